"""Regression gate and response cache benchmark.

- `lineup diff` on two runs of N cases (answers of ~120 words, one check
  each, TTFT and duration; 2,000 bootstrap rounds): `compare_runs` after the
  two `load_session`s, beside the baseline of loading the two sessions alone
  (the floor: reading the record), both in this process, medians of
  `--repeat` runs; and the whole `lineup gate --json` as a command.
- The cache lookup (`store.runs.find_cached`, on the partial index
  `output_request_key`) per request on a store of 2N answers, beside a
  primary-key read of one output in the same store.

    .venv/bin/python benchmarks/bench_compare.py [--cases N ...] [--repeat R]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.decide.compare import compare_runs  # noqa: E402
from store import Store  # noqa: E402
from store import rows as R  # noqa: E402
from store.ids import new_ulid  # noqa: E402
from store.records import (  # noqa: E402
    CheckResultRecord,
    ContestantRecord,
    OutputRecord,
    SessionRecord,
    TurnRecord,
)
from store.runs import find_cached  # noqa: E402

WORDS = ("the model answers each question with a short paragraph about latency cost quality and the "
         "evidence a team needs before it ships a change to production").split()


def _text(rng: random.Random, n: int = 120) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build(store: Store, n: int, seed: int, changed: float) -> tuple[str, list[str]]:
    """One run of n cases; `changed` of the answers differ from seed 0's."""
    rng = random.Random(seed)
    base = random.Random(0)
    sid = new_ulid()
    keys = []
    with store.batch():
        store.create_session(SessionRecord(id=sid, kind="run", blind=False, contestants=[
            ContestantRecord(alias="m", provider="openai", model="x", label="m")]))
        for i in range(n):
            turn = TurnRecord(session_id=sid, position=i, case_id=f"c{i:05d}", category=f"k{i % 7}",
                              user_message=f"question {i}")
            store.add_turn(turn)
            text = _text(base)
            if rng.random() < changed:
                text = _text(rng)
            key = hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()
            keys.append(key)
            out = OutputRecord(session_id=sid, turn_id=turn.id, contestant="m", label="m", status="complete",
                               text=text, ttft_ms=rng.uniform(80, 200), duration_ms=rng.uniform(900, 3000),
                               cost=0.001, request_key=key)
            store.finish_output(out)
            store.add_check_result(CheckResultRecord(output_id=out.id, check="contains", passed=rng.random() < 0.9))
    return sid, keys


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args()
    if args.smoke:
        args.cases, args.repeat = [50], 1
    print(f"{'cases':>7} {'load x2':>9} {'diff':>9} {'ratio':>7} {'gate cmd':>9} {'cache hit':>10} "
          f"{'pk read':>9} {'ratio':>6}")
    for n in args.cases:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.db"
            with Store.open(db) as store:
                a, keys = build(store, n, 1, 0.0)
                b, _ = build(store, n, 2, 0.3)

                def load(a: str = a, b: str = b) -> tuple:
                    return store.load_session(a), store.load_session(b)

                def diff() -> None:
                    compare_runs(*load())

                t_load = median_time(load, args.repeat)
                t_diff = median_time(diff, args.repeat)
                probe = random.Random(5).sample(keys, min(500, len(keys)))
                some_id = store.conn.execute("SELECT id FROM output LIMIT 1").fetchone()[0]

                def hits(probe: list = probe) -> None:
                    for k in probe:
                        find_cached(store, k)

                def pk_reads(probe: list = probe, some_id: str = some_id) -> None:
                    for _ in probe:
                        store.conn.execute(f"SELECT {R.cols(R.READ['output'])} FROM output WHERE id = ?",
                                           [some_id]).fetchone()

                t_hit = median_time(hits, args.repeat) / len(probe)
                t_pk = median_time(pk_reads, args.repeat) / len(probe)
            cmd = [sys.executable, "-m", "lineup", "gate", "--baseline", a, "--candidate", b, "--db", str(db),
                   "--json"]
            t_cmd = median_time(lambda cmd=cmd: subprocess.run(cmd, capture_output=True, check=False), 3)
        print(f"{n:>7} {t_load * 1000:>7.0f}ms {t_diff * 1000:>7.0f}ms {t_diff / t_load:>6.1f}x "
              f"{t_cmd * 1000:>7.0f}ms {t_hit * 1e6:>8.1f}us {t_pk * 1e6:>7.1f}us {t_hit / t_pk:>5.1f}x",
              flush=True)


if __name__ == "__main__":
    main()
