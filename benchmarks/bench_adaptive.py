"""Votes to a correct top-1: the adaptive vote queue (`core.stats.adaptive`,
`lineup vote --adaptive`) against a uniform queue (every (case, pair) in a
seeded random order: the baseline), in the same run, with the same simulated
raters, the same error rate and the same stop.

Simulated raters (`tests.synthetic.simulate_queue`) vote on pairs of eight
models whose true ratings are known (Bradley-Terry outcomes, the best 45 Elo
points ahead of the second), each vote flipped with probability `--error`.
Each queue serves votes until the sequential stop (`core.stats.adaptive.separated`:
the leader ahead of every other model by an always-valid test, Bonferroni
over its comparisons, at 95%) fires, or `--cap` votes. The stop is looked at
after every vote for the first 100 and then whenever the votes grew by 1%
(the same looks for both queues; fewer looks never make the stop less
valid, and the vote it fires at is known to 1%).

Printed per queue: the median votes to stop over `--seeds` seeded
repetitions with a bootstrap 95% interval of the median, how often the
model on top at the end is the true best (top-1 accuracy), how many runs
ran into the cap (counted at the cap: their medians are a lower bound); then
the ratio of the medians adaptive / uniform with its bootstrap interval.

    .venv/bin/python benchmarks/bench_adaptive.py            # 30 seeds (about 7 minutes on a busy core)
    .venv/bin/python benchmarks/bench_adaptive.py --quick    # 6 seeds (about 2 minutes)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.synthetic import QueuePass, simulate_queue  # noqa: E402

#: Eight models, the best 45 Elo points ahead of the second.
TRUE = {"m1": 1160.0, "m2": 1115.0, "m3": 1090.0, "m4": 1050.0, "m5": 1010.0, "m6": 980.0, "m7": 930.0,
        "m8": 880.0}
#: Cases in the prompt set: every pair can be voted on each once (28 pairs: 42,000 items, above any cap used).
CASES = 1500


def median_interval(values: list[int], rng: random.Random, rounds: int = 2000) -> tuple[float, float]:
    """A bootstrap 95% interval of the median."""
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return meds[int(0.025 * rounds)], meds[int(0.975 * rounds) - 1]


def ratio_interval(a: list[int], u: list[int], rng: random.Random, rounds: int = 2000) -> tuple[float, float]:
    """A bootstrap 95% interval of median(a) / median(u) (seeds resampled together: paired)."""
    idx = range(len(a))
    ratios = []
    for _ in range(rounds):
        pick = rng.choices(idx, k=len(a))
        ratios.append(statistics.median(a[i] for i in pick) / statistics.median(u[i] for i in pick))
    ratios.sort()
    return ratios[int(0.025 * rounds)], ratios[int(0.975 * rounds) - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="6 seeds, a check in about 2 minutes")
    ap.add_argument("--error", type=float, default=0.1, help="raters' error rate (a vote flipped), both queues")
    ap.add_argument("--cap", type=int, default=30000, help="votes a run may take at most (both queues)")
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args()
    seeds = 2 if args.smoke else 6 if args.quick else args.seeds
    if args.smoke:
        args.cap = min(args.cap, 2000)
    best = max(TRUE, key=TRUE.__getitem__)
    results: dict[str, list[QueuePass]] = {}
    boot = random.Random(12345)
    print(f"{len(TRUE)} models, best {TRUE[best] - sorted(TRUE.values())[-2]:.0f} Elo ahead of the second; "
          f"rater error rate {args.error:.0%}; stop at 95% (sequential, Bonferroni); cap {args.cap} votes; "
          f"{seeds} seeds")
    for kind in ("uniform", "adaptive"):
        start = time.perf_counter()
        results[kind] = [simulate_queue(kind, TRUE, seed=seed, cases=CASES, error=args.error, cap=args.cap,
                                        look=0.01) for seed in range(seeds)]
        took = time.perf_counter() - start
        votes = [r.votes for r in results[kind]]
        lo, hi = median_interval(votes, boot)
        correct = sum(r.top == best for r in results[kind])
        capped = sum(not r.stopped for r in results[kind])
        wrong_stops = sum(r.stopped and r.top != best for r in results[kind])
        print(f"{kind:9s} votes to stop: median {statistics.median(votes):.0f} [95% {lo:.0f}, {hi:.0f}] "
              f"(mean {statistics.mean(votes):.0f}, min {min(votes)}, max {max(votes)}); "
              f"true best on top at the end: {correct}/{seeds}; stopped on a wrong top: {wrong_stops}; "
              f"ran into the cap: {capped}/{seeds}; {took:.1f} s")
    a = [r.votes for r in results["adaptive"]]
    u = [r.votes for r in results["uniform"]]
    ratio = statistics.median(a) / statistics.median(u)
    lo, hi = ratio_interval(a, u, boot)
    print(f"adaptive / uniform votes (medians, {seeds} seeds, rater error rate {args.error:.0%}): "
          f"{ratio:.2f} [95% {lo:.2f}, {hi:.2f}] ({1 - ratio:.0%} fewer)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
