"""What the SVG snapshot tests share: fixed time zone and demo speed for
every test (`_deterministic`), a store holding a recorded run (`store`), live
figures masked (`mask`), and a chat answered before the picture
(`chat_answered`). Fixtures: a test module imports them by name."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from tests.tui_sessions import CASES, make_run
from tests.tui_support import wait_for

from store import AsyncStore

SIZE = (120, 34)
SID = "01HX0000000000000000000001"


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch):
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    old_tz = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old_tz is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old_tz
    time.tzset()


@pytest.fixture
def store(tmp_path):
    """An AsyncStore over a fresh file (closed after the test)."""
    make_run(tmp_path / "s.db", CASES, sid=SID)
    loop = asyncio.new_event_loop()
    s = loop.run_until_complete(AsyncStore.open(tmp_path / "s.db"))
    yield s
    loop.run_until_complete(s.aclose())
    loop.close()


def mask(app) -> None:
    """Live figures and the blinking cursor are not part of the design."""
    screen = app.screen
    for pane in getattr(screen, "panes", []):
        if pane.figures:
            pane.figures = "ttft 250 ms · 120 tok/s · 42 tok"
    for area in screen.query("PromptBox"):
        area.cursor_blink = False


async def chat_answered(pilot, prompt="Explain python list comprehensions") -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat")
    await pilot.press(*prompt, "enter")
    await wait_for(pilot, lambda: app.chat_screen.sends == 1 and not app.chat_screen.sending
                   and not app.session.streaming, "the answers")
    await pilot.pause(0.2)
    mask(app)
