"""SVG snapshot of the report screen at 80 columns (pytest-textual-snapshot).
Deterministic: a fixed database (`report_tui_data`), fixed bootstrap rounds
and seed. Update with `pytest tests/test_tui_report_snapshot.py --snapshot-update`."""

from __future__ import annotations

import asyncio

import pytest
from tests.report_tui_data import make_report_db
from tests.tui_support import wait_for

from store import AsyncStore
from tui.app import LineupApp, ReportOptions
from tui.report_screen import ReportScreen


@pytest.fixture
def store(tmp_path):
    make_report_db(tmp_path / "r.db")
    loop = asyncio.new_event_loop()
    s = loop.run_until_complete(AsyncStore.open(tmp_path / "r.db"))
    yield s
    loop.run_until_complete(s.aclose())
    loop.close()


def test_report_screen(snap_compare, store):
    async def before(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen) and app.screen.loads == 1
                       and not app.screen.computing, "the report")
        await pilot.pause(0.2)

    app = LineupApp(store, report=ReportOptions(rounds=200, seed=3), rater="tester")
    assert snap_compare(app, run_before=before, terminal_size=(80, 46))


def test_report_screen_decision(snap_compare, store):
    """The decision section, reached with `p`."""
    async def before(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen) and app.screen.loads == 1
                       and not app.screen.computing, "the report")
        await pilot.pause(0.2)                     # laid out: the section's place is known
        await pilot.press("p")
        body = app.screen.query_one("#report-body")
        await wait_for(pilot, lambda: body.scroll_y > 0, "scrolled to the decision")
        await pilot.pause(0.3)

    app = LineupApp(store, report=ReportOptions(rounds=200, seed=3), rater="tester")
    assert snap_compare(app, run_before=before, terminal_size=(80, 46))
