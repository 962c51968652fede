"""Store benchmark: write 100,000 outputs with chunk timings, load a
500-turn 4-contestant session for replay (and 250 / 1000 turns, to show the
growth is linear), count votes per model over 1,000,000 votes, and report the
database sizes. Baselines run in the same process: one commit per row
against the batched path, and votes per model by parsing each vote's JSON
mapping against the `vote_contestant` index.

    .venv/bin/python benchmarks/bench_store.py [--scale 0.1] [--keep DIR] [--smoke]

`--smoke`: the smallest sizes, no verdict on the timings: that it still runs
(tests/test_benchmarks.py runs every benchmark so).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the checkout: tests.synthetic builds the data

from tests.synthetic import synthetic_session, write_synthetic  # noqa: E402
from store import OutputRecord, Store, TurnRecord  # noqa: E402
from store.ids import new_ulid  # noqa: E402
from store.rows import VOTE_CONTESTANT_COLS, dumps, insert_sql, vote_contestant_rows  # noqa: E402

WORDS = ("alpha beta gamma delta code JSON number list step answer careful parse value result model "
         "token stream chunk latency exact").split()


def size_mb(path: Path) -> float:
    total = path.stat().st_size
    for suffix in ("-wal", "-shm"):
        extra = Path(str(path) + suffix)
        if extra.exists():
            total += extra.stat().st_size
    return total / 1e6


def settle(store: Store) -> None:
    """Fold the WAL into the file so its size is the database's size."""
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def make_outputs(n: int, session_id: str, turn_ids: list[str], rng: random.Random, words: int = 80):
    aliases = ["m0", "m1", "m2", "m3"]
    now = time.time()
    for i in range(n):
        chunks = [rng.choice(WORDS) + " " for _ in range(words)]
        t, ms = rng.randint(100, 500), []
        for _ in chunks:
            t += rng.randint(3, 30)
            ms.append(t)
        yield OutputRecord(id=new_ulid(), session_id=session_id, turn_id=turn_ids[i // 4], contestant=aliases[i % 4],
                           label=aliases[i % 4], status="complete", text="".join(chunks), finish_reason="stop",
                           sent_at=now, ttft_ms=float(ms[0]), duration_ms=float(ms[-1]), chunk_ms=ms,
                           chunk_chars=[len(c) for c in chunks], input_tokens=40, output_tokens=words,
                           cost=1e-5, created=now)


def bench_writes(folder: Path, n: int, naive_n: int) -> dict:
    rng = random.Random(1)
    store = Store.open(folder / "outputs.db")
    s, _, _, _ = synthetic_session(turns=0, contestants=4, aliases=["m0", "m1", "m2", "m3"])
    store.create_session(s)
    turns = [TurnRecord(session_id=s.id, position=i, user_message=f"prompt {i} " + " ".join(rng.choices(WORDS, k=20)))
             for i in range((n + naive_n) // 4 + 1)]
    with store.batch():
        for t in turns:
            store.add_turn(t)
    turn_ids = [t.id for t in turns]

    # baseline: one transaction (and one fsync) per output, as a live session writes them
    naive = list(make_outputs(naive_n, s.id, turn_ids[-(naive_n // 4 + 1):], rng))
    t0 = time.perf_counter()
    for o in naive:
        store.finish_output(o)
    naive_rate = naive_n / (time.perf_counter() - t0)

    chunk = max(1, n // 10)
    rates, gen = [], make_outputs(n, s.id, turn_ids, rng)
    start = time.perf_counter()
    for _ in range(0, n, chunk):
        batch = [next(gen) for _ in range(min(chunk, n - len(rates) * chunk))]
        t0 = time.perf_counter()
        with store.batch():
            for o in batch:
                store.finish_output(o)
        rates.append(len(batch) / (time.perf_counter() - t0))
    total = time.perf_counter() - start
    settle(store)
    store.close()
    return {"n": n, "rates": rates, "total_s": total, "naive_rate": naive_rate, "naive_n": naive_n,
            "size_mb": size_mb(folder / "outputs.db")}


def bench_load(folder: Path, sizes: tuple[int, ...], repeats: int) -> dict:
    store = Store.open(folder / "replay.db")
    ids = {}
    for turns in sizes:
        recs = synthetic_session(turns=turns, contestants=4, words=300, seed=turns)
        write_synthetic(store, *recs)
        ids[turns] = recs[0].id
    settle(store)
    out = {}
    for turns, sid in ids.items():
        store.load_session(sid)  # warm the page cache once
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            loaded = store.load_session(sid)
            times.append((time.perf_counter() - t0) * 1000)
        assert len(loaded.turns) == turns and len(loaded.outputs) == 4 * turns
        times.sort()
        out[turns] = (statistics.median(times), times[int(0.95 * (len(times) - 1))])
    store.close()
    return {"ms": out, "size_mb": size_mb(folder / "replay.db")}


#: The vote columns the benchmark fills (every other one keeps its schema default).
VOTE_BENCH_COLS = ("id", "session_id", "turn_id", "rater", "choice", "winner", "mapping", "positions", "created",
                   "supersedes", "current")


def bench_votes(folder: Path, n: int, repeats: int) -> dict:
    rng = random.Random(2)
    models = [f"model-{i}" for i in range(12)]
    store = Store.open(folder / "votes.db")
    sessions = [synthetic_session(turns=100, contestants=2, votes=False, words=5, seed=i, aliases=models[:2])
                for i in range(max(1, n // 10_000))]
    with store.batch():
        for s, turns, _, _ in sessions:
            store.create_session(s)
            for t in turns:
                store.add_turn(t)
    targets = [(s.id, t.id) for s, turns, _, _ in sessions for t in turns]
    t0 = time.perf_counter()
    conn = store.conn
    # rows built directly (the records' validation is not what is measured): the columns a person's vote
    # sets, named, so that a column added later takes its default instead of breaking the insert
    vote_sql = insert_sql("vote", VOTE_BENCH_COLS)
    vc_sql = insert_sql("vote_contestant", VOTE_CONTESTANT_COLS)
    block, prev = 100_000, None
    pairs = [(a, b) for a in models for b in models if a != b]
    pair_json = {p: dumps(dict(zip("AB", p, strict=True))) for p in pairs}
    label_json = {2: dumps(["A", "B"]), 4: dumps(["A", "B", "C", "D"])}
    id_prefix = new_ulid()[:10]
    for lo in range(0, n, block):
        votes, parts = [], []
        for i in range(lo, min(n, lo + block)):
            sid, tid = targets[i % len(targets)]
            if rng.random() < 0.8:
                labels, picked = ("A", "B"), rng.choice(pairs)
                mapping_json = pair_json[picked]
            else:
                labels, picked = ("A", "B", "C", "D"), tuple(rng.sample(models, 4))
                mapping_json = dumps(dict(zip(labels, picked, strict=True)))
            mapping = dict(zip(labels, picked, strict=True))
            choice = rng.choice(labels + ("tie", "both_bad" if len(labels) == 2 else "all_bad"))
            vid = f"{id_prefix}{i:016X}"  # a valid, unique ULID (time prefix + counter): cheap to make
            supersedes = prev if (prev and rng.random() < 0.05) else None
            votes.append((vid, sid, tid, "r", choice, mapping.get(choice), mapping_json,
                          label_json[len(labels)], 1.7e9 + i, supersedes, 1))
            parts.extend(vote_contestant_rows(vid, choice, mapping, labels, 1))
            prev = vid
        with store.batch():
            conn.executemany(vote_sql, votes)
            conn.executemany(vc_sql, parts)
    with store.batch():  # mark the superseded ones, as Store.add_vote does one at a time
        conn.execute("UPDATE vote SET current = 0 WHERE id IN (SELECT supersedes FROM vote "
                     "WHERE supersedes IS NOT NULL)")
        conn.execute("UPDATE vote_contestant SET current = 0 WHERE vote_id IN "
                     "(SELECT supersedes FROM vote WHERE supersedes IS NOT NULL)")
    load_s = time.perf_counter() - t0
    conn.execute("ANALYZE")
    settle(store)

    def timed(fn):
        fn()
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            result = fn()
            ts.append((time.perf_counter() - t) * 1000)
        return statistics.median(ts), result

    fast_ms, fast = timed(store.votes_per_model)
    # baseline: what a report would do without vote_contestant: read every current vote's mapping
    def by_json():
        counts: dict[str, int] = {}
        for (mapping,) in conn.execute("SELECT mapping FROM vote WHERE current = 1"):
            for alias in json.loads(mapping).values():
                counts[alias] = counts.get(alias, 0) + 1
        return counts

    slow_ms, slow = timed(by_json)
    sql_ms, _ = timed(lambda: conn.execute("SELECT j.value, count(*) FROM vote, json_each(vote.mapping) j "
                                           "WHERE vote.current = 1 GROUP BY j.value").fetchall())
    assert {m.alias: m.votes for m in fast} == slow, "the two counts disagree"
    store.close()
    return {"n": n, "load_s": load_s, "fast_ms": fast_ms, "json_ms": slow_ms, "json_sql_ms": sql_ms,
            "size_mb": size_mb(folder / "votes.db")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full sizes (quick runs)")
    parser.add_argument("--keep", type=Path, help="write the databases here instead of a temporary folder")
    parser.add_argument("--smoke", action="store_true", help="smallest sizes, timings not judged: does it run?")
    args = parser.parse_args(argv)
    scale = 0.0 if args.smoke else args.scale
    n_out = max(100, int(100_000 * scale))
    n_votes = max(10_000, int(1_000_000 * scale))
    sizes = (25, 50, 100) if args.smoke else (250, 500, 1000)
    repeats = 1 if args.smoke else 15
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"store benchmark (SQLite WAL, synchronous=FULL) in {folder}")
        t0 = time.perf_counter()
        w = bench_writes(folder, n_out, naive_n=max(100, int(1000 * scale)))
        med = statistics.median(w["rates"])
        print(f"\nwrite {w['n']:,} outputs (80 chunks each) in {len(w['rates'])} batches: {w['total_s']:.1f} s, "
              f"median {med:,.0f} rows/s (batches {min(w['rates']):,.0f} .. {max(w['rates']):,.0f} rows/s)")
        print(f"  baseline, one commit per output ({w['naive_n']:,} rows): {w['naive_rate']:,.0f} rows/s "
              f"-> batched is {med / w['naive_rate']:.1f}x")
        print(f"  database: {w['size_mb']:.1f} MB ({w['size_mb'] * 1e6 / (w['n'] + w['naive_n']):,.0f} bytes/output"
              " incl. text, chunk timings and full-text index)")

        ld = bench_load(folder, sizes, repeats=repeats)
        ms = ld["ms"]
        small, mid, large = sizes
        print(f"\nload a 4-contestant session for replay (300-word outputs, median / p95 of {repeats}):")
        for turns, (m, p95) in ms.items():
            print(f"  {turns:>5} turns: {m:7.1f} ms / {p95:7.1f} ms  ({m / turns * 1000:.0f} us per turn)")
        print(f"  growth: {mid}/{small} turns = {ms[mid][0] / ms[small][0]:.2f}x, {large}/{mid} turns = "
              f"{ms[large][0] / ms[mid][0]:.2f}x (linear = 2.00x)")
        fast = ms[mid][0] < 200 or args.smoke
        if not args.smoke:
            print(f"  500 turns under 200 ms: {'OK' if fast else 'TOO SLOW'}")
        print(f"  database: {ld['size_mb']:.1f} MB")

        v = bench_votes(folder, n_votes, repeats=1 if args.smoke else 5)
        print(f"\nvotes per model over {v['n']:,} votes (inserted in {v['load_s']:.1f} s): "
              f"{v['fast_ms']:.0f} ms (vote_contestant index)")
        print(f"  baseline, JSON mapping parsed in Python: {v['json_ms']:.0f} ms -> {v['json_ms'] / v['fast_ms']:.1f}x; "
              f"with SQLite json_each: {v['json_sql_ms']:.0f} ms -> {v['json_sql_ms'] / v['fast_ms']:.1f}x")
        print(f"  database: {v['size_mb']:.1f} MB ({v['size_mb'] * 1e6 / v['n']:,.0f} bytes/vote)")
        print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0 if fast else 1


if __name__ == "__main__":
    sys.exit(main())
