"""Ratings benchmark: core.stats.ratings beside a reference implementation of the
Chatbot Arena recipe (FastChat `compute_bt` + `compute_bootstrap_bt`: unique
(a, b, outcome) rows with counts, multinomial resampling of those counts with
`default_rng(seed)`, one scipy L-BFGS-B fit per round from zero, gtol 1e-6,
maxiter 100) in the same process, on the same synthetic votes. The reference
draws over the classes lineup draws over (a row and its mirror image are one:
`merged_classes`), so that the intervals can be compared draw for draw.

Prints, per case: median time of each (and p95 over repeats), the speedup,
and the largest difference in point ratings and in interval bounds.
Target: large case >= 2x faster than the reference and under 2 s, medium
under 0.5 s, ratings within ~0.01 points.

Last, the whole report on a store of that size (100,000 votes, 20 models,
200,000 answers; built in a temp folder with `tests.synthetic`, ~25 s):
`build_report` in this process, and `lineup report --json` as a command with
this code and with the code of a baseline commit (`--baseline`, default the
last one before the bootstrap merged mirror-image rows; extracted with `git
archive`, run from its own folder), taking
turns: medians of `--repeat` (5) of wall and CPU time, their ratio, whether both print
the same JSON, against the 0.5 s target. This code runs twice a turn: cold
(an empty cache folder: every bootstrap round drawn, as on votes not rated
before) and warm (the rounds kept by an earlier run read back,
`core.report.draw_cache`: the same votes reported again).

    .venv/bin/python benchmarks/bench_ratings.py [--repeat N] [--rounds R] [--quick]
                                                 [--report-db PATH | --no-report] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Both sides single-threaded BLAS (set before numpy loads; an explicit setting
# wins): thread pools on tiny matrices made the timings of both swing 5-10x
# on a loaded 2-core machine.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.stats.ratings import BattleSet, rate  # noqa: E402

try:
    from scipy.optimize import minimize
    from scipy.special import expit
except ImportError:  # pragma: no cover - the bench extra brings scipy
    sys.exit("bench_ratings needs scipy (pip install -e '.[test]')")


# ----------------------------------------------------------------- reference recipe


def ref_preprocess(model_a: list[str], model_b: list[str], winner: np.ndarray):
    models: dict[str, int] = {}
    for m in list(model_a) + list(model_b):
        models.setdefault(m, len(models))
    sched = np.ones((len(model_a), 3), dtype=np.int64)
    sched[:, 0] = [models[m] for m in model_a]
    sched[:, 1] = [models[m] for m in model_b]
    sched[winner == "a", 2] = 2
    sched[winner == "b", 2] = 0
    rows, weights = np.unique(sched, return_counts=True, axis=0)
    return rows[:, :2], rows[:, 2] / 2.0, list(models), weights.astype(np.float64)


def ref_loss_grad(r, matchups, outcomes, weights, alpha):
    d = alpha * (r[matchups[:, 0]] - r[matchups[:, 1]])
    p = expit(d)
    loss = -((np.log(p) * outcomes + np.log(1.0 - p) * (1.0 - outcomes)) * weights).sum()
    g_rows = -alpha * (outcomes - p) * weights
    grad = np.zeros_like(r)
    np.add.at(grad, matchups[:, 0], g_rows)
    np.add.at(grad, matchups[:, 1], -g_rows)
    return loss, grad


def ref_fit(matchups, outcomes, weights, n, alpha, tol=1e-6):
    res = minimize(ref_loss_grad, np.zeros(n), args=(matchups, outcomes, weights, alpha),
                   jac=True, method="L-BFGS-B", options={"maxiter": 100, "gtol": tol})
    return res.x


def merged_classes(matchups, outcomes, weights):
    """The classes lineup draws over: a row and its mirror image ((a, b, o)
    and (b, a, 1 - o)) are one, in order of (lower index, higher, outcome of
    the lower); returns their weights and, for each, the row that carries its
    draw. FastChat draws over the rows themselves: the same distribution,
    other draws, so the intervals would differ by Monte Carlo noise."""
    a, b, code = matchups[:, 0], matchups[:, 1], np.rint(outcomes * 2).astype(np.int64)
    m = int(matchups.max()) + 1
    key = (np.minimum(a, b) * m + np.maximum(a, b)) * 3 + np.where(a < b, code, 2 - code)
    keys, cls = np.unique(key, return_inverse=True)
    carrier = np.zeros(keys.size, dtype=np.int64)
    carrier[cls] = np.arange(key.size)
    return np.bincount(cls, weights=weights, minlength=keys.size), carrier


def reference(model_a, model_b, winner, rounds, seed):
    matchups, outcomes, models, weights = ref_preprocess(model_a, model_b, winner)
    alpha = math.log(10.0)
    point = ref_fit(matchups, outcomes, weights, len(models), alpha) * 400 + 1000
    rng = np.random.default_rng(seed)
    n = len(model_a)
    class_w, carrier = merged_classes(matchups, outcomes, weights)
    boot_w = np.zeros((rounds, weights.size))
    boot_w[:, carrier] = rng.multinomial(n, class_w / class_w.sum(), size=rounds) / n
    boot = np.array([ref_fit(matchups, outcomes, w, len(models), alpha) for w in boot_w]) * 400 + 1000
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    return models, point, lo, hi


# ----------------------------------------------------------------- data and timing


def synthetic(n_votes: int, n_models: int, seed: int):
    rng = np.random.default_rng(seed)
    strength = rng.normal(0, 0.6, n_models)            # natural scale: 240 Elo sd
    a = rng.integers(0, n_models, n_votes)
    b = (a + rng.integers(1, n_models, n_votes)) % n_models
    p = 1.0 / (1.0 + 10.0 ** (strength[b] - strength[a]))
    u = rng.random(n_votes)
    tie = 0.15
    winner = np.where(u < tie, "tie", np.where(u < tie + (1 - tie) * p, "a", "b"))
    names = [f"model-{i:02d}" for i in range(n_models)]
    return [names[i] for i in a], [names[i] for i in b], winner


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, times


def p95(xs):
    return sorted(xs)[min(len(xs) - 1, math.ceil(0.95 * len(xs)) - 1)]


def run_case(label, n_votes, n_models, rounds, repeat, ref_repeat, seed=0):
    ma, mb, w = synthetic(n_votes, n_models, seed)
    ours, t_ours = timed(lambda: rate(BattleSet.from_arrays(ma, mb, w), rounds=rounds, seed=seed), repeat)
    (models, point, lo, hi), t_ref = timed(lambda: reference(ma, mb, w, rounds, seed), ref_repeat)
    by_name = {m.name: m for m in ours.models}
    d_point = max(abs(by_name[m].rating - point[k]) for k, m in enumerate(models))
    d_bound = max(max(abs(by_name[m].ci_low - lo[k]), abs(by_name[m].ci_high - hi[k]))
                  for k, m in enumerate(models))
    mo, mr = statistics.median(t_ours), statistics.median(t_ref)
    print(f"{label}: {n_votes:,} votes / {n_models} models / {rounds} rounds")
    print(f"  core.stats.ratings   median {mo * 1000:8.1f} ms   p95 {p95(t_ours) * 1000:8.1f} ms   (n={repeat})")
    print(f"  reference L-BFGS median {mr * 1000:8.1f} ms   p95 {p95(t_ref) * 1000:8.1f} ms   (n={ref_repeat})")
    print(f"  speedup {mr / mo:6.1f}x   max |rating diff| {d_point:.4f}   max |interval bound diff| {d_bound:.4f}")
    return mo, mr, d_point, d_bound


# ----------------------------------------------------------------- the whole report


def build_report_db(path: Path, sessions: int = 500) -> float:
    """100,000 two-way votes among 20 models (500 sessions of 200 turns, two
    answers per turn; `sessions` fewer for a smoke run); returns the seconds it took."""
    from store import Store
    from tests.synthetic import synthetic_session, write_synthetic

    models = [f"model-{i:02d}" for i in range(20)]
    rng = random.Random(1)
    t0 = time.perf_counter()
    with Store.open(path) as store:
        for i in range(sessions):
            pair = rng.sample(models, 2)
            write_synthetic(store, *synthetic_session(turns=200, contestants=2, words=3, seed=i, aliases=pair,
                                                      created=1.7e9 + i * 1000))
    return time.perf_counter() - t0


#: The code the whole report is compared with: the last commit before the
#: report read the digests kept with the record (schema 20; it is given a
#: copy of the store with the later tables, triggers and index dropped,
#: `_as_schema`). Earlier baselines: 7b719b4 (before the bootstrap drew
#: mirror-image rows as one pattern) and 61ebddc (before the report's
#: rework) read older schemas only.
BASELINE = "35ce53d"
ROOT = Path(__file__).resolve().parents[1]


def baseline_tree(rev: str, dest: Path) -> Path | None:
    """The files of commit `rev` of this repository under `dest` (git archive),
    or None when git or the commit is not there (a shallow or exported copy)."""
    import io
    import tarfile

    try:
        out = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev],
                             check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _command(db: Path, rounds: int, code: Path | None, cache: Path) -> tuple[float, float, bytes]:
    """One `lineup report --json` in a fresh process (with the code in `code`
    first on the path, when given; `cache` its user cache folder, where it
    keeps the bootstrap's rounds): (wall s, CPU s of the process, its output
    without `generated_at` and `database`: the baseline reads a copy)."""
    import re
    import resource

    # bytecode written and read as on a user's machine: with PYTHONDONTWRITEBYTECODE set, every
    # module changed since its .pyc was compiled again in every run (tens of ms)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(cache)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    # `python -m lineup`: what each tree's `lineup` script runs, its exit included
    cli = [sys.executable, "-m", "lineup", "report", "--db", str(db), "--json", "--bootstrap", str(rounds)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # run from the code's own folder: `python -m` puts the working folder first
    # on the path, ahead of PYTHONPATH, so run from this checkout the baseline
    # would import this checkout's modules (its report and ratings, not the
    # baseline's: the two printed the same JSON whatever the baseline was)
    out = subprocess.run(cli, check=True, capture_output=True, env=env, cwd=code or ROOT).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = re.sub(rb'"generated_at": [^,]+,', b"", out, count=1)
    return wall, cpu, re.sub(rb'"database": "(?:[^"\\]|\\.)*",', b"", out, count=1)


def _point_ratings(out: bytes) -> list:
    """What of a report JSON does not depend on the bootstrap's draws: each
    model's rating, votes, wins, ties and losses."""
    return [[m["name"], round(m["rating"], 9), m["votes"], m["wins"], m["ties"], m["losses"]]
            for m in json.loads(out)["models"]]


def _schema_of(code: Path) -> int:
    """The schema version the code in `code` writes (its own `store.schema`, in a child process)."""
    out = subprocess.run([sys.executable, "-c", "from store.schema import SCHEMA_VERSION; print(SCHEMA_VERSION)"],
                         check=True, capture_output=True, text=True, cwd=code,
                         env={**os.environ, "PYTHONPATH": str(code)}).stdout
    return int(out)


def _as_schema(db: Path, dest: Path, version: int) -> Path:
    """A copy of `db` as schema `version` had it: the later migrations' tables,
    triggers and indexes dropped (what they add is derived or empty here)."""
    import shutil
    import sqlite3

    from store.schema import MIGRATION_NAMES

    shutil.copyfile(db, dest)
    conn = sqlite3.connect(dest)
    later = MIGRATION_NAMES[version:]
    for kind, name in conn.execute("SELECT type, name FROM sqlite_master WHERE name LIKE 'report_%' "
                                   "OR name = 'turn_case' ORDER BY type = 'table'").fetchall():
        conn.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
    conn.executemany("DELETE FROM _sqlite_migrations WHERE name = ?", [(n,) for n in later])
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()
    return dest


def _reads(db: Path, repeat: int) -> None:
    """The report's reads (votes, people's and judges'; answers; values out
    of range) from the digests and from the rows, in this process."""
    from store import Store
    from store import report_queries as Q

    times: dict[str, list[float]] = {"digests": [], "rows": []}
    for _ in range(repeat):
        for how in times:
            with Store.open(db, readonly=True) as store:
                sql = how == "rows"
                t0 = time.perf_counter()
                Q.read_votes(store, Q.Scope(), sql=sql)
                Q.read_votes(store, Q.Scope(rater_kind="judge"), sql=sql)
                Q.read_outputs(store, Q.Scope(), sql=sql)
                if sql:
                    store.out_of_range(None, tables=("output",))
                else:
                    Q.outputs_out_of_range(store)
                times[how].append(time.perf_counter() - t0)
    rows, digests = statistics.median(times["rows"]), statistics.median(times["digests"])
    print(f"  the reads, from the rows (before)   median {rows:6.3f} s   (n={repeat})")
    print(f"  the reads, from the digests         median {digests:6.3f} s   ({rows / digests:.1f}x)")


def _upkeep(db: Path, repeat: int) -> None:
    """What keeping the digests costs a writer: one more vote, then the
    refresh its close makes (its session's digest and its group's)."""
    import shutil

    from core.stats import votes as V
    from store import Store

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "upkeep.db"
        shutil.copyfile(db, copy)
        times = []
        for k in range(repeat):
            with Store.open(copy) as store:
                (n_turns,) = store.conn.execute("SELECT count(*) FROM turn").fetchone()
                sid, tid = store.conn.execute("SELECT session_id, id FROM turn ORDER BY id LIMIT 1 OFFSET ?",
                                              [k * 997 % n_turns]).fetchone()
                session = store.load_session(sid).session
                mapping = {c.label: c.alias for c in session.contestants}
                store.add_vote(V.make_votes(sid, [tid], list(mapping)[0], mapping=mapping, positions=list(mapping),
                                            rater=f"upkeep-{k}", revealed=False)[0])
                t0 = time.perf_counter()
                store.refresh_digests()
                times.append(time.perf_counter() - t0)
    print(f"  a writer's close after one vote: digests rebuilt in median {statistics.median(times) * 1000:.0f} ms "
          f"(n={repeat})")


def run_report(db: Path, rounds: int, repeat: int = 3, baseline: str | None = BASELINE) -> None:
    """The report's reads from the digests and from the rows, `build_report`
    in this process, then `lineup report --json` as a command, this code and
    the baseline's taking turns (medians of `repeat` each, the same machine,
    the same minutes), their ratio, and whether the two print the same
    report; last, what keeping the digests costs a writer."""
    from core.report import build_report
    from store import Store

    with Store.open(db, readonly=True) as store:
        n_votes = store.conn.execute("SELECT count(*) FROM vote").fetchone()[0]
    print(f"whole report: {n_votes:,} votes / 20 models / {2 * n_votes:,} answers / {rounds} rounds "
          f"(load average {os.getloadavg()[0]:.2f})")
    with Store.open(db) as store:      # a writer's close keeps the digests: as after any command that wrote
        store.refresh_digests()
    _reads(db, repeat)
    in_process = []
    for _ in range(repeat):
        with Store.open(db, readonly=True) as store:
            t0 = time.perf_counter()
            report = build_report(store, rounds=rounds, seed=0, cache=False)
            in_process.append(time.perf_counter() - t0)
    assert report.votes_used == n_votes, (report.votes_used, n_votes)
    print(f"  build_report (this process, drawing every round)  median {statistics.median(in_process):6.3f} s   "
          f"(n={repeat})")
    with tempfile.TemporaryDirectory() as tmp:
        old_code = baseline_tree(baseline, Path(tmp) / "code") if baseline else None
        old_db = db
        if old_code is not None and (version := _schema_of(old_code)) < _schema_of(ROOT):
            old_db = _as_schema(db, Path(tmp) / "old.db", version)
        # cold: an empty cache folder each run (votes not rated before: every
        # round drawn); warm: one folder, filled by an untimed run first (the
        # same votes reported again: the rounds read back)
        warm = Path(tmp) / "warm-cache"
        _command(db, rounds, None, warm)          # untimed: also compiles what changed since the last .pyc
        if old_code is not None:
            try:
                _command(old_db, rounds, old_code, Path(tmp) / "old-cache")
            except subprocess.CalledProcessError:
                pass                              # said below, at its first timed run
        runs: dict[str, list[tuple[float, float, bytes]]] = {"after": [], "warm": [], "before": []}
        for k in range(repeat):
            runs["after"].append(_command(db, rounds, None, Path(tmp) / f"cold-cache-{k}"))
            runs["warm"].append(_command(db, rounds, None, warm))
            if old_code is not None:
                try:
                    runs["before"].append(_command(old_db, rounds, old_code, Path(tmp) / f"old-cache-{k}"))
                except subprocess.CalledProcessError as e:   # e.g. a schema it cannot read: said, not hidden
                    print(f"  the baseline ({baseline}) could not report on this store: "
                          f"{e.stderr.decode(errors='replace').strip()[-300:]}")
                    old_code = None
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
           for k, v in runs.items() if v}
    wall, cpu = med["after"]
    warm_wall, warm_cpu = med["warm"]
    if "before" in med:
        old_wall, old_cpu = med["before"]
        print(f"  lineup report --json, before ({baseline})  median {old_wall:6.3f} s wall, "
              f"{old_cpu:6.3f} s CPU   (n={repeat}, a fresh process each)")
        print(f"  lineup report --json, after, cold       median {wall:6.3f} s wall, {cpu:6.3f} s CPU")
        print(f"  lineup report --json, after, warm       median {warm_wall:6.3f} s wall, {warm_cpu:6.3f} s CPU")
        print(f"  ratio before/after: cold {old_wall / wall:.2f}x wall, {old_cpu / cpu:.2f}x CPU; "
              f"warm {old_wall / warm_wall:.2f}x wall, {old_cpu / warm_cpu:.2f}x CPU")
        same = all(o == runs["after"][0][2] for o in (r[2] for r in runs["after"] + runs["warm"] + runs["before"]))
        print(f"  the same JSON from both (generated_at and the file's path aside): {'yes' if same else 'NO'}")
        if not same:   # since the draws merged mirror-image rows, every bootstrap figure moved by noise
            points = {json.dumps(_point_ratings(r[2]), sort_keys=True) for r in runs["after"] + runs["before"]}
            print(f"  the same point ratings, votes and wins/ties/losses (before 57c5308 the bootstrap drew "
                  f"differently: mirror-image rows were two patterns): {'yes' if len(points) == 1 else 'NO'}")
    else:
        print(f"  lineup report --json, cold   median {wall:6.3f} s wall, {cpu:6.3f} s CPU   (n={repeat}; "
              f"no baseline: {'none asked for' if not baseline else f'commit {baseline} not run'})")
        print(f"  lineup report --json, warm   median {warm_wall:6.3f} s wall, {warm_cpu:6.3f} s CPU")
        same = all(r[2] == runs["after"][0][2] for r in runs["after"] + runs["warm"])
        print(f"  the same JSON cold and warm: {'yes' if same else 'NO'}")
    print(f"target: the whole command < 0.5 s (cold {wall:.3f} s: {'met' if wall < 0.5 else 'NOT met'}; "
          f"warm, the same votes reported again, {warm_wall:.3f} s: {'met' if warm_wall < 0.5 else 'NOT met'})")
    _upkeep(db, repeat)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of core.stats.ratings per case")
    ap.add_argument("--ref-repeat", type=int, default=1, help="timed runs of the reference per case")
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="100 rounds, for a smoke run")
    ap.add_argument("--report-db", type=Path, help="an existing 100k-vote store for the whole-report timing "
                                                   "(default: build one in a temp folder)")
    ap.add_argument("--no-report", action="store_true", help="skip the whole-report timing")
    ap.add_argument("--baseline", default=BASELINE, help=f"commit to compare the whole report with "
                                                         f"(default {BASELINE}; '' for none)")
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args(argv)
    rounds = 20 if args.smoke else 100 if args.quick else args.rounds
    if args.smoke:   # the whole report on 5 sessions (1,000 votes), with no baseline
        args.repeat, args.ref_repeat, args.baseline = 1, 1, ""
    results = {
        "medium": run_case("medium", 500 if args.smoke else 5_000, 8, rounds, args.repeat, args.ref_repeat),
        "large": run_case("large", 2_000 if args.smoke else 100_000, 20, rounds, args.repeat, args.ref_repeat),
    }
    mo, mr, dp, db = results["large"]
    print(f"targets: large >= 2x ({mr / mo:.1f}x), large < 2 s ({mo:.3f} s), "
          f"medium < 0.5 s ({results['medium'][0]:.3f} s), ratings within 0.01 "
          f"({max(r[2] for r in results.values()):.4f})")
    if not args.no_report:
        with tempfile.TemporaryDirectory() as tmp:
            db = args.report_db
            if db is None:
                db = Path(tmp) / "report.db"
                n = 5 if args.smoke else 500
                print(f"whole report: building a {n * 200:,}-vote store ({build_report_db(db, n):.1f} s)")
            run_report(db, rounds, repeat=args.repeat, baseline=args.baseline or None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
