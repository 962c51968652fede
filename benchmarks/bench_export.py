"""Export benchmark: one imported Chatbot Arena file of 5,000 / 10,000 /
20,000 battles (one session: a turn, two outputs and a vote per battle),
exported as JSONL, CSV and Markdown, and the sessions list of a database of
N/4 blind sessions of 4 turns each. Each figure is the median of 3 (load the session + build the
export, as `lineup export` does). Linear growth means the per-battle cost
stays flat: the ratio 20k/5k of the total time should be about 4x (target
4.4x), where a quadratic export gives ~16x; on a busy machine single figures
vary by a third, so only a ratio past 8x fails the run. Baseline in the
same run: the previous grouping (a scan of every output per turn) at 5k.

    .venv/bin/python benchmarks/bench_export.py [--sizes 5000,10000,20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the checkout: tests.synthetic builds the data
from core.exchange.export import FORMATS, export_session  # noqa: E402
from core.exchange.importing import import_file  # noqa: E402
from tests.synthetic import synthetic_session, write_synthetic  # noqa: E402
from store import Store  # noqa: E402

LINEAR_LIMIT = 4.4   # 20k/5k total-time ratio counted as linear (4.0 ideal)
QUADRATIC = 8.0      # past this, halfway (in log) to the 16x of a quadratic export: a failure


def arena_file(path: Path, n: int) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({
                "model_a": f"model-{i % 7}", "model_b": f"other-{i % 5}",
                "winner": ("model_a", "model_b", "tie", "tie (bothbad)")[i % 4], "tstamp": 1.7e9 + i,
                "judge": f"judge-{i % 3}", "question_id": f"q{i}",
                "conversation_a": [{"role": "user", "content": f"question {i} " + "word " * 20},
                                   {"role": "assistant", "content": "answer a " + "text " * 40}],
                "conversation_b": [{"role": "user", "content": f"question {i} " + "word " * 20},
                                   {"role": "assistant", "content": "answer b " + "text " * 40}],
            }) + "\n")
    return path


def _per_turn_scan(loaded) -> None:
    """The previous grouping (what `outputs_for` did for every turn): a scan of
    every output of the session per turn, quadratic."""
    order = {c.alias: c.position for c in loaded.session.contestants}
    for t in loaded.turns:
        sorted((o for o in loaded.outputs if o.turn_id == t.id),
               key=lambda o: (order.get(o.contestant, 1 << 30), o.label, o.attempt))


def median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5000,10000,20000", help="battles per database, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.repeats = "200", 1
    sizes = [int(x) for x in args.sizes.split(",")]
    results: dict[int, dict[str, float]] = {}
    print(f"export benchmark: one Arena import of N battles, median of {args.repeats} (seconds)")
    print(f"{'battles':>8} {'import':>8} " + " ".join(f"{f:>8}" for f in FORMATS) + f" {'sessions':>9}")
    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        for n in sizes:
            db = Path(tmp) / f"arena{n}.db"
            src = arena_file(Path(tmp) / f"arena{n}.jsonl", n)
            row: dict[str, float] = {}
            with Store.open(db) as store:
                t0 = time.perf_counter()
                import_file(store, src)
                row["import"] = time.perf_counter() - t0
                sid = store.latest_session_id()
                for fmt in FORMATS:
                    row[fmt] = median_s(lambda sid=sid, fmt=fmt: export_session(store.load_session(sid), fmt), args.repeats)
                if n == min(sizes):
                    loaded = store.load_session(sid)
                    baseline = median_s(lambda loaded=loaded: _per_turn_scan(loaded), 1)
            many = Path(tmp) / f"sessions{n}.db"
            with Store.open(many) as store:   # the list: n / 4 blind sessions of 4 turns
                with store.batch():
                    for seed in range(n // 4):
                        write_synthetic(store, *synthetic_session(turns=4, blind=True, words=5, seed=seed,
                                                                  created=1.7e9 + seed))
                row["sessions"] = median_s(lambda: store.list_sessions(), args.repeats)
            results[n] = row
            print(f"{n:>8} {row['import']:>8.2f} " + " ".join(f"{row[f]:>8.2f}" for f in FORMATS)
                  + f" {row['sessions']:>9.3f}", flush=True)
    lo, hi = min(sizes), max(sizes)
    print(f"\nbaseline at {lo:,} battles: the previous per-turn scan of every output (grouping only, "
          f"reimplemented here) {baseline:.2f} s = {baseline / results[lo]['jsonl']:.1f}x the whole JSONL "
          "export now; it grows with the square of the battles")
    ok = True
    if hi > lo:
        scale = hi / lo
        print(f"\ngrowth {hi // 1000}k/{lo // 1000}k ({scale:.0f}x the battles; linear = {scale:.1f}x, "
              f"per-battle cost ratio in brackets, linear = 1.00):")
        for key in ("import", *FORMATS, "sessions"):
            ratio = results[hi][key] / results[lo][key]
            limit, fail = LINEAR_LIMIT * scale / 4, QUADRATIC * scale / 4
            verdict = ("(not checked)" if key == "import" else "linear" if ratio <= limit
                       else "above the target, below quadratic (a busy machine?)" if ratio <= fail
                       else "NOT LINEAR")
            ok = ok and (key == "import" or ratio <= fail)
            print(f"  {key:>7}: {ratio:5.2f}x  ({ratio / scale:.2f} per battle)  {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
