"""Decision benchmark: what `lineup decide` computes, on 100,000 votes, 20
models, 10 categories and 1000 bootstrap rounds (target: under 1 s), beside
a baseline measured in the same run: the plain report's overall ratings
(`core.stats.ratings.rate` on the same 100,000 votes, the same rounds).

The decide side is its whole computation once the votes are read: the ten
per-category fits with their bootstraps (run two at a time, as
`core.report.decision` does with `core.report.start.RATING_THREADS`), then
`core.decide.choose.decide` (P(best) for the mix replicate by replicate,
the tie group, routing, the frontiers). Reading the store is the report's
own read and is measured by bench_ratings. Votes are synthetic, drawn in
memory from planted per-category strengths (seeded); the same votes serve
both sides.

Prints the median of `--repeat` runs of each (and the spread), the ratio
decide / baseline, and the recommendation (a planted favourite exists).
Beside them, figures that say where the time goes on a shared machine:
decide's CPU time (all threads; the wall time is about CPU / threads on idle
cores) and the draws alone: each category's multinomial counts over its unique
vote patterns (`numpy.random.Generator.multinomial`, the same seeds, the
patterns `core.stats.ratings` draws over: a row and its mirror image are one), run
one after another, the floor of decide's CPU time; and the same draws over
the rows as written ((a, b, outcome), twice the patterns: what FastChat and
the version before this one drew), with the ratio of the two.

    .venv/bin/python benchmarks/bench_decide.py [--votes N] [--models M] [--categories C]
                                                [--rounds R] [--repeat K]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.stats import ratings as R  # noqa: E402
from core.decide.choose import decide  # noqa: E402
from core.report.start import RATING_THREADS  # noqa: E402

TARGET_S = 1.0


def synthetic(n_votes: int, n_models: int, n_cats: int, seed: int = 0):
    """(the whole BattleSet, each vote's category code, category names)."""
    rng = np.random.default_rng(seed)
    names = [f"model-{k:02d}" for k in range(n_models)]
    strength = rng.normal(0.0, 0.5, size=(n_cats, n_models))        # natural units
    cat = rng.integers(0, n_cats, size=n_votes)
    a = rng.integers(0, n_models, size=n_votes)
    b = (a + rng.integers(1, n_models, size=n_votes)) % n_models
    p = 1.0 / (1.0 + np.exp(-np.log(10) * (strength[cat, a] - strength[cat, b])))
    u = rng.random(n_votes)
    score = np.where(u < 0.1, 0.5, np.where(u < 0.1 + 0.9 * p, 1.0, 0.0))
    bs = R.BattleSet.from_arrays([names[i] for i in a], [names[i] for i in b], score.tolist(),
                                 list(range(n_votes)))
    return bs, cat, [f"category-{k}" for k in range(n_cats)]


def run_decide(bs: R.BattleSet, cat: np.ndarray, cats: list[str], rounds: int):
    with ThreadPoolExecutor(RATING_THREADS) as pool:
        futs = {name: pool.submit(R.rate, bs.subset(np.flatnonzero(cat == k)), rounds=rounds,
                                  seed=R.stream_seed(0, name))
                for k, name in enumerate(cats)}
        results = {name: f.result() for name, f in futs.items()}
    mix = {name: 1.0 / len(cats) for name in cats}
    return decide(results, [], [], mix=mix, rounds=rounds, seed=0)


def pattern_counts(bs: R.BattleSet, cat: np.ndarray, cats: list[str], as_written: bool) -> list[np.ndarray]:
    """Each category's pattern counts: those `core.stats.ratings` draws over, or
    the rows as written, (a, b, outcome)."""
    out = []
    for k in range(len(cats)):
        sub = bs.subset(np.flatnonzero(cat == k))
        if not as_written:
            out.append(R._patterns(sub).counts)
            continue
        m = len(sub.models)
        out.append(np.unique((sub.a * m + sub.b) * 3 + np.rint(sub.score * 2).astype(np.int64),
                             return_counts=True)[1])
    return out


def draws_only(counts: list[np.ndarray], cats: list[str], rounds: int) -> None:
    """Each category's bootstrap draws, nothing else (the floor)."""
    for c, name in zip(counts, cats, strict=True):
        rng = np.random.default_rng(R.stream_seed(0, name))
        rng.multinomial(int(c.sum()), c / c.sum(), size=rounds)


def timed(fn, repeat: int, cpu: list[float] | None = None) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - start)
        if cpu is not None:
            cpu.append(time.process_time() - start_cpu)
    return times, out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--votes", type=int, default=100_000)
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--categories", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.votes, args.models, args.categories, args.rounds, args.repeat = 3000, 5, 3, 50, 1
    bs, cat, cats = synthetic(args.votes, args.models, args.categories)
    print(f"{args.votes} votes, {args.models} models, {args.categories} categories, {args.rounds} rounds, "
          f"{RATING_THREADS} rating thread(s)")
    base_t, _ = timed(lambda: R.rate(bs, rounds=args.rounds, seed=0), args.repeat)
    dec_cpu: list[float] = []
    dec_t, decision = timed(lambda: run_decide(bs, cat, cats, args.rounds), args.repeat, dec_cpu)
    merged, written = (pattern_counts(bs, cat, cats, as_written) for as_written in (False, True))
    draw_t, _ = timed(lambda: draws_only(merged, cats, args.rounds), args.repeat)
    rows_t, _ = timed(lambda: draws_only(written, cats, args.rounds), args.repeat)
    b, d = statistics.median(base_t), statistics.median(dec_t)
    print(f"baseline (plain report ratings): median {b:.3f} s  (min {min(base_t):.3f}, max {max(base_t):.3f})")
    print(f"decide (10 category fits + P(best), routing): median {d:.3f} s  "
          f"(min {min(dec_t):.3f}, max {max(dec_t):.3f})")
    print(f"decide CPU time (all threads): median {statistics.median(dec_cpu):.3f} s;  "
          f"the draws alone (one thread): median {statistics.median(draw_t):.3f} s "
          f"({statistics.median(draw_t) / d:.0%} of decide's wall time)")
    print(f"the draws over {sum(c.size for c in merged) // len(cats)} patterns a category (mirror images merged): "
          f"median {statistics.median(draw_t):.3f} s; over the {sum(c.size for c in written) // len(cats)} rows "
          f"as written: median {statistics.median(rows_t):.3f} s; ratio "
          f"{statistics.median(draw_t) / statistics.median(rows_t):.2f}")
    print(f"ratio decide / baseline: {d / b:.2f}x;  target {TARGET_S:.1f} s: {'met' if d < TARGET_S else 'MISSED'}")
    top = max(decision.models, key=lambda m: m.p_best)              # type: ignore[attr-defined]
    print(f"recommendation: {decision.recommendation} (favourite {top.name}, P(best) {top.p_best:.2f})")  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
