"""Export benchmark: one imported Chatbot Arena file of 5,000 / 10,000 /
20,000 battles (one session: a turn, two outputs and a vote per battle),
exported as JSONL, CSV and Markdown, and the sessions list of a database of
N/4 blind sessions of 4 turns each. Each figure is the median of 3 (load the session + build the
export, as `lineup export` does). Linear growth means the per-battle cost
stays flat: the ratio 20k/5k of the total time should be about 4x (target
4.4x), where a quadratic export gives ~16x; on a busy machine single figures
vary by a third, so only a ratio past 8x fails the run. Baseline in the
same run: the previous grouping (a scan of every output per turn) at 5k.

Peak memory (issue 32, item 2): `lineup export -f FORMAT -o FILE` in a fresh
process per figure (its peak resident size), which streams the session page
by page, against the whole-session export (`load_session` + `export_session`,
what the command did before) in a fresh process too. Goal: flat in the
number of answers (20k/5k under 1.5x; a 100k-answer export under 200 MB).

    .venv/bin/python benchmarks/bench_export.py [--sizes 5000,10000,20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
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


#: A fresh process that runs its arguments and prints its own peak resident size (KiB).
_PEAK = ("import resource, sys\n"
         "sys.path.insert(0, sys.argv[1])\n"
         "if sys.argv[2] == 'whole':\n"
         "    from core.exchange.export import export_session\n"
         "    from store import Store\n"
         "    with Store.open(sys.argv[3], readonly=True) as st:\n"
         "        text = export_session(st.load_session(st.latest_session_id()), sys.argv[4])\n"
         "    open(sys.argv[5], 'w', encoding='utf-8').write(text)\n"
         "else:\n"
         "    from lineup.cli import main\n"
         "    assert main(['export', '--db', sys.argv[3], '-f', sys.argv[4], '-o', sys.argv[5]]) == 0\n"
         "try:\n"   # VmHWM: this program's own peak (ru_maxrss also counts the parent's at the fork)
         "    peak = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
         "except OSError:\n"
         "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
         "print(peak)\n")
ROOT = Path(__file__).resolve().parents[1]


def peak_mb(how: str, db: Path, fmt: str, out: Path) -> float:
    done = subprocess.run([sys.executable, "-c", _PEAK, str(ROOT), how, str(db), fmt, str(out)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"export ({how}, {fmt}) failed: {done.stderr[-2000:]}")
    return int(done.stdout.strip().splitlines()[-1]) / 1024


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
            for fmt in FORMATS:
                out = Path(tmp) / f"out.{fmt}"
                row[f"peak {fmt}"] = peak_mb("stream", db, fmt, out)
                row[f"whole {fmt}"] = peak_mb("whole", db, fmt, out)
            results[n] = row
            print(f"{n:>8} {row['import']:>8.2f} " + " ".join(f"{row[f]:>8.2f}" for f in FORMATS)
                  + f" {row['sessions']:>9.3f}", flush=True)
    lo, hi = min(sizes), max(sizes)
    print("\npeak memory of one export process, MB: `lineup export` (streamed) / the whole-session export "
          "(load_session + export_session); answers = 2 x battles")
    print(f"{'battles':>8} " + " ".join(f"{f:>16}" for f in FORMATS))
    for n in sizes:
        print(f"{n:>8} " + " ".join(f"{results[n]['peak ' + f]:>7.1f} / {results[n]['whole ' + f]:>6.1f}"
                                    for f in FORMATS))
    if hi > lo:
        for fmt in FORMATS:
            grow = results[hi][f"peak {fmt}"] / results[lo][f"peak {fmt}"]
            whole = results[hi][f"whole {fmt}"] / results[lo][f"whole {fmt}"]
            print(f"  {fmt:>5}: streamed {hi}/{lo} {grow:.2f}x (goal < 1.5x: {'met' if grow < 1.5 else 'NOT met'}), "
                  f"whole-session {whole:.2f}x")
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
