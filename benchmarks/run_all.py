"""Run every benchmark script in this folder, one after another, each in its
own process (so one area's warm caches never flatter another's). Each script
prints its figures beside a baseline measured in the same run, as ratios.

    python benchmarks/run_all.py            # all
    python benchmarks/run_all.py store render
    python benchmarks/run_all.py --smoke    # each at its smallest sizes: that it still runs
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    smoke = "--smoke" in argv
    argv = [a for a in argv if a != "--smoke"]
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if any(s.stem == f"bench_{a}" for a in argv)]
    failed = 0
    for script in scripts:
        print(f"\n=== {script.stem} ===", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(script), *(["--smoke"] if smoke else [])], cwd=HERE.parent)
        print(f"--- {script.stem}: exit {code}, {time.perf_counter() - start:.1f} s wall", flush=True)
        failed += code != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
