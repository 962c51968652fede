"""The report's first step (`core.report.start`): the votes read and their
bootstraps begun before the rest of the report loads, with the same report
as a build that begins them itself."""

from __future__ import annotations

import ast
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.report import ReportFilters, build_report
from core.report.start import start_ratings
from tests.report_support import Builder, two_way

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def voted(tmp_path):
    from store import Store

    store = Store.open(tmp_path / "report.db")
    b = Builder(store)
    two_way(b, {("alpha", "beta"): 6, ("beta", "alpha"): 3, ("beta", "gamma"): 5, ("gamma", "alpha"): 4},
             category="code")
    two_way(b, {("alpha", "gamma"): 4, ("gamma", "beta"): 2}, category="math")
    yield store
    store.close()


def _json(report) -> dict:
    data = json.loads(report.to_json())
    data.pop("generated_at")
    return data


def test_a_build_that_goes_on_from_started_ratings_is_the_build_that_starts_them(voted):
    filters = ReportFilters(category=None)
    started = start_ratings(voted, filters, rounds=60, seed=3)
    went_on = build_report(voted, filters, rounds=60, seed=3, started=started)
    alone = build_report(voted, filters, rounds=60, seed=3)
    assert _json(went_on) == _json(alone)
    assert set(went_on.by_category) == {"code", "math"} and went_on.votes_used == 24


def test_started_ratings_given_other_arguments_are_refused_and_their_threads_stopped(voted):
    for kwargs in ({"rounds": 61}, {"seed": 4}, {"filters": ReportFilters(category="code")},
                   {"style_control": True}, {"breakdowns": False}):
        started = start_ratings(voted, ReportFilters(), rounds=60, seed=3)
        asked = {"filters": ReportFilters(), "rounds": 60, "seed": 3} | kwargs
        filters = asked.pop("filters")
        with pytest.raises(ValueError, match="other filters or arguments"):
            build_report(voted, filters, started=started, **asked)
        with pytest.raises(RuntimeError):   # closed: its threads take no more work
            started.pool.submit(int)


def test_demo_votes_read_instead_are_the_filters_the_report_carries(voted):
    """Every vote in scope on demo models: the start reads them and says so;
    the report built from it carries filters with demo included, as before."""
    b = Builder(voted)
    s = b.session(["demo-a", "demo-b"], demo={"demo-a", "demo-b"})
    t = b.turn(s, 0, category="poetry")
    b.vote(s, t, "demo-a")
    filters = ReportFilters(category="poetry")
    started = start_ratings(voted, filters, rounds=10, seed=0)
    assert started.demo and started.filters.include_demo and not filters.include_demo
    report = build_report(voted, filters, rounds=10, seed=0, started=started)
    assert report.demo and report.filters.include_demo
    assert {m.name for m in report.models} == {"demo-a", "demo-b"}


def test_lineup_report_draws_while_the_rest_of_the_report_loads(voted):
    """`lineup report` begins the bootstraps before it imports the report's
    sections and data model: when `core.report.build` starts loading, the
    rating threads are already at work and the model is not loaded yet."""
    probe = r"""
import sys, threading
seen = {}
class Probe:
    def find_spec(self, name, path=None, target=None):
        if name == "core.report.build" and not seen:
            seen["threads"] = sorted({t.name.rsplit("_", 1)[0] for t in threading.enumerate()})
            seen["model"] = "core.report.model" in sys.modules
        return None
sys.meta_path.insert(0, Probe())
from lineup.cli import main
code = main(sys.argv[1:])
print("PROBE", seen, file=sys.stderr)
sys.exit(code)
"""
    out = subprocess.run([sys.executable, "-c", probe, "report", "--db", str(voted.path), "--json",
                          "--bootstrap", "50"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    found = re.search(r"PROBE (\{.*\})", out.stderr)
    assert found, out.stderr
    seen = ast.literal_eval(found.group(1))
    assert "lineup-report-ratings" in seen["threads"] and seen["model"] is False
    assert json.loads(out.stdout)["votes_used"] == 24


def test_the_start_loads_neither_the_report_model_nor_its_sections():
    out = subprocess.run([sys.executable, "-c", "import sys, core.report.start; "
                          "print(sorted(m for m in sys.modules if m.startswith('core.report')))"],
                         capture_output=True, text=True, cwd=ROOT, check=True, timeout=60)
    loaded = set(ast.literal_eval(out.stdout))
    assert loaded == {"core.report", "core.report.patterns", "core.report.start"}


def _report_json(db: Path, *extra: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "lineup", "report", "--db", str(db), "--json", "--bootstrap", "40",
                          *extra], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    data.pop("generated_at")
    data.pop("database")
    return data


def test_lineup_report_on_a_read_only_file_is_the_report_of_a_writable_copy(voted, tmp_path):
    import shutil

    voted.close()
    copy = tmp_path / "copy.db"
    shutil.copy(voted.path, copy)
    voted.path.chmod(0o444)
    try:
        assert _report_json(voted.path) == _report_json(copy)
    finally:
        voted.path.chmod(0o644)


WRITER = r"""
import sys
from store import Store
from tests.report_support import Builder
store = Store.open(sys.argv[1])
b = Builder(store)
s = b.session(["alpha", "beta"])
print("ready", flush=True)
for k in range(int(sys.argv[2])):
    b.vote(s, b.turn(s, k, category="code"), "alpha" if k % 3 else "beta")
store.close()
"""


def test_lineup_report_while_another_process_votes_counts_a_moment_of_the_record(voted):
    """A writer adds votes one transaction at a time while `lineup report`
    reads the same file: every report exits 0 and counts between the votes
    there were when it began and those there are when it ended."""
    before = 24
    voted.close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(voted.path), "150"], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        seen = [_report_json(voted.path)["votes_used"] for _ in range(3)]
    finally:
        assert writer.wait(120) == 0
    assert all(before <= n <= before + 150 for n in seen) and seen == sorted(seen)
    assert _report_json(voted.path)["votes_used"] == before + 150
