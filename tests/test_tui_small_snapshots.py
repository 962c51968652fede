"""SVG snapshots at 80x24, the default size of many terminals:
four demo models under tabs with the vote bar focused, eight blind ones
with every choice on screen, and the settings dialog with every column.
Deterministic as the main snapshots are (test_tui_snapshots). Update with
`pytest tests/test_tui_small_snapshots.py --snapshot-update`."""

from __future__ import annotations

from tests.snapshot_support import _deterministic, mask, store  # noqa: F401  (fixtures)
from tests.tui_sessions import demo_models
from tests.tui_support import wait_for

from tui.app import ChatOptions, LineupApp
from tui.settings_screen import SettingsScreen

SMALL = (80, 24)


def small_app(store, n: int, **kw) -> LineupApp:
    return LineupApp(store, chat=ChatOptions(models=demo_models(n), seed=1, label_seed=11, **kw), rater="tester")


async def voting(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat")
    await pilot.press(*"Explain python list comprehensions", "enter")
    await wait_for(pilot, lambda: app.chat_screen.sends == 1 and not app.chat_screen.sending
                   and not app.session.streaming and app.chat_screen.vote_bar.has_class("-visible"), "answers")
    await pilot.press("f2")
    await pilot.pause(0.3)
    mask(app)


def test_four_models_at_80x24_vote_bar(snap_compare, store):
    assert snap_compare(small_app(store, 4), run_before=voting, terminal_size=SMALL)


def test_eight_blind_models_at_80x24_vote_bar(snap_compare, store):
    assert snap_compare(small_app(store, 8, blind=True), run_before=voting, terminal_size=SMALL)


def test_settings_at_80x24(snap_compare, store):
    async def before(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), "the settings")
        await pilot.press("tab", *"0.5")
        await pilot.pause(0.3)
        for field in app.screen.query("Input"):
            field.cursor_blink = False

    assert snap_compare(small_app(store, 4), run_before=before, terminal_size=SMALL)
