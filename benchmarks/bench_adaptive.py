"""Votes to a correct top-1: the adaptive vote queue (`core.adaptive`,
`lineup vote --adaptive`) against a uniform queue (every (case, pair) in a
random order: the baseline), in the same run, with the same simulated raters
and the same stopping rule.

Simulated raters vote on pairs of models whose true ratings are known
(Bradley-Terry outcomes from them), and each vote is flipped with
probability `--error` (the raters' error rate, the same for both queues).
Each queue serves votes until its stopping rule says the top is separated
at 95% ("you can stop": the leader's gap to every model excludes 0), or
`--cap` votes. Printed per queue: the median votes to stop over `--seeds`
seeded repetitions, how often it stopped with the true best model on top,
how often it ran into the cap; and the ratio adaptive / uniform.

    .venv/bin/python benchmarks/bench_adaptive.py [--seeds 20] [--error 0.1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.adaptive import AdaptivePlanner, Candidate, Choice, standing, stop_message  # noqa: E402

#: Eight models, the best 45 Elo points ahead of the second.
TRUE = {"m1": 1160.0, "m2": 1115.0, "m3": 1090.0, "m4": 1050.0, "m5": 1010.0, "m6": 980.0, "m7": 930.0,
        "m8": 880.0}


def candidates(models: Sequence[str], cases: int, categories: int = 4) -> list[Candidate]:
    return [Candidate(key=f"case{k}", pair=pair, category=f"cat{k % categories}")
            for k in range(cases) for pair in combinations(sorted(models), 2)]


def rater_vote(rng: random.Random, true: dict[str, float], pair: tuple[str, str], error: float) -> float:
    """The score of pair[0]: a Bradley-Terry draw from the true ratings, flipped with probability `error`."""
    x, y = pair
    p = 1.0 / (1.0 + 10.0 ** ((true[y] - true[x]) / 400.0))
    win = rng.random() < p
    if rng.random() < error:
        win = not win
    return 1.0 if win else 0.0


def run_queue(kind: str, seed: int, *, true: dict[str, float] = TRUE, cases: int = 150, error: float = 0.1,
              cap: int = 3000, level: float = 0.95) -> tuple[int, bool, bool]:
    """(votes served, stopped with the true best on top, stopped by the rule) of one simulated pass."""
    rng = random.Random(seed)
    items = candidates(list(true), cases)
    planner = AdaptivePlanner(list(items), rng=random.Random(seed + 1))
    order = list(items)
    random.Random(seed + 2).shuffle(order)
    best = max(true, key=true.__getitem__)
    for n in range(1, cap + 1):
        if kind == "adaptive":
            choice = planner.next()
            assert choice is not None
            planner.served(choice)
        else:
            cand = order[n - 1]
            choice = Choice(cand, cand.pair[0], {})
        planner.record(f"v{n}", choice, rater_vote(rng, true, choice.candidate.pair, error))
        st = standing(list(planner.battles.values()), list(true))
        if stop_message(st, level) is not None:
            return n, st.models[0] == best, True
    st = standing(list(planner.battles.values()), list(true))
    return cap, st.models[0] == best, False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--error", type=float, default=0.1, help="raters' error rate (a vote flipped), both queues")
    ap.add_argument("--cap", type=int, default=3000)
    args = ap.parse_args()
    results: dict[str, list[tuple[int, bool, bool]]] = {}
    for kind in ("uniform", "adaptive"):
        start = time.perf_counter()
        results[kind] = [run_queue(kind, seed, error=args.error, cap=args.cap) for seed in range(args.seeds)]
        took = time.perf_counter() - start
        votes = [r[0] for r in results[kind]]
        correct = sum(r[1] for r in results[kind])
        capped = sum(not r[2] for r in results[kind])
        print(f"{kind:9s} votes to stop: median {statistics.median(votes):.0f} (mean {statistics.mean(votes):.0f}, "
              f"min {min(votes)}, max {max(votes)}); true best on top at the stop: {correct}/{args.seeds}; "
              f"ran into the cap ({args.cap}): {capped}; {took:.1f} s")
    u = statistics.median(r[0] for r in results["uniform"])
    a = statistics.median(r[0] for r in results["adaptive"])
    print(f"adaptive / uniform votes (medians, {args.seeds} seeds, rater error rate {args.error:.0%}): "
          f"{a / u:.2f} ({1 - a / u:.0%} fewer)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
