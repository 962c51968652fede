"""The README's offline path, end to end on the demo models, as a newcomer
types it: `lineup run` a shipped set on two demo models, `lineup vote` in a
real terminal (tmux), then `lineup report` (terminal, --html, --json) and
`lineup decide`. Every vote is on demo models, so the report shows them,
marked demo everywhere, instead of an empty page."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from lineup.cli import main
from store import Store
from tests.cli_support import ROOT, TMUX, Tmux, start_in_tmux

README = (ROOT / "README.md").read_text()
SET = "sample_sets/instruction_following.jsonl"
MODELS = ["-m", "demo/concise", "-m", "demo/thorough"]


def _wait_until(tmux: Tmux, test, what: str, polls: int = 300) -> str:
    screen = ""
    for _ in range(polls):
        screen = tmux.screen()
        if test(screen):
            return screen
        time.sleep(0.1)
    raise AssertionError(f"{what} never happened; the screen was:\n{screen}")


def test_the_readme_gives_this_demo_path():
    """The commands this test runs are the README's (a newcomer copies them)."""
    assert f"lineup run {SET} {' '.join(MODELS)}" in README
    assert "lineup vote" in README and "lineup report --html report.html" in README


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_the_demo_path_ends_in_a_filled_report_marked_demo(tmp_path, monkeypatch, capsys):
    db = tmp_path / "lineup.db"
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    (tmp_path / "config.toml").write_text("")          # no models configured: the demo ones
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("LINEUP_DB", str(db))
    monkeypatch.chdir(ROOT)
    assert main(["run", SET, *MODELS, "--quiet"]) == 0
    cases = sum(1 for line in (ROOT / SET).read_text().splitlines() if line.strip())

    tmux = Tmux(f"lineup-test-demo-flow-{os.getpid()}")
    start_in_tmux(tmux, tmp_path, "vote", "0")
    try:
        for k in range(cases):
            _wait_until(tmux, lambda s: "Which answer is best?" in s and "· demo/" not in s, f"case {k + 1}")
            tmux("send-keys", "-t", "lineup", "a" if k % 3 else "b")
            _wait_until(tmux, lambda s: "· demo/" in s, f"the reveal of case {k + 1}")
            tmux("send-keys", "-t", "lineup", "Enter")
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
    with Store.open(db) as store:
        (summary,) = store.list_sessions()
        assert summary.votes == cases and summary.is_demo
    capsys.readouterr()

    assert main(["report", "--html", str(tmp_path / "report.html")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DEMO: every vote here is on demo models")
    table = out.split("Ratings (")[1]
    assert f"{cases} votes" in table and "demo/concise" in table and "demo/thorough" in table
    assert "Only demo-model votes match" not in out

    page = (tmp_path / "report.html").read_text()
    assert '<p class="demo">DEMO: every vote here is on demo models' in page
    assert "<title>lineup report (demo models)</title>" in page
    assert re.search(r"<h2>Ratings</h2>.*demo/concise", page, re.S) and len(page) > 10_000

    assert main(["report", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["demo"] is True and report["votes_used"] == cases
    assert {m["name"] for m in report["models"]} == {"demo/concise", "demo/thorough"}
    assert report["decision"]["demo"] is True

    assert main(["decide"]) == 0
    decided = capsys.readouterr().out
    assert decided.startswith("DEMO models only (synthetic answers): Recommendation: demo/"), decided
    assert main(["decide", "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["demo"] is True and decision["recommendation"] in ("demo/concise", "demo/thorough")
