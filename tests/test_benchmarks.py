"""Every benchmark still runs: each `benchmarks/bench_*.py` at its smallest
sizes (`--smoke`), in its own process, must exit 0. A benchmark that asserts
an old schema (bench_store's vote columns did, and crashed at its 1M-vote
step) or an old API fails here, not the next time someone measures. These are
not measurements: no timing is judged. A new benchmark is picked up by the
glob and must take `--smoke` too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def test_there_are_benchmarks_to_smoke():
    assert len(BENCHMARKS) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("script", BENCHMARKS, ids=[s.stem for s in BENCHMARKS])
def test_each_benchmark_runs_at_smoke_size(script, tmp_path):
    proc = subprocess.run([sys.executable, str(script), "--smoke"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, f"{script.name} --smoke: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip()
