"""SVG snapshots of the main screens (pytest-textual-snapshot). Deterministic:
demo models at instant speed with a fixed seed, fixed blind labels, fixed
ids and times for stored sessions (TZ=UTC); live figures are masked.
Update with `pytest tests/test_tui_snapshots.py --snapshot-update`."""

from __future__ import annotations


from tests.snapshot_support import SID, SIZE, _deterministic, chat_answered, mask, store  # noqa: F401  (fixtures)
from tests.tui_support import wait_for

from providers.demo import DEMO_MODELS
from tui.app import ChatOptions, LineupApp, ReplayOptions, VoteOptions
from tui.help_screen import HelpScreen
from tui.replay_screen import ReplayScreen
from tui.sessions_screen import SessionsScreen
from tui.vote_queue import VoteQueueScreen

HINT = "Demo models (offline, synthetic answers). Add real ones in config.toml; see `lineup models`."


def chat_app(store, **kw):
    opts = ChatOptions(models=DEMO_MODELS[:3], seed=1, hint=HINT, label_seed=11, **kw)
    return LineupApp(store, chat=opts, rater="tester")


def test_chat_with_answers(snap_compare, store):
    assert snap_compare(chat_app(store), run_before=chat_answered, terminal_size=SIZE)


def test_chat_with_tool_calls(snap_compare, store):
    from core.answering.tools import ToolScript

    script = ToolScript(tools=[{"name": "get_weather", "description": "Current weather for a city.",
                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                               "required": ["city"]}}],
                        tool_results=[{"name": "get_weather", "arguments": {"city": "Lisbon"},
                                       "result": {"temp_c": 21, "conditions": "sunny"}}])
    opts = ChatOptions(models=DEMO_MODELS[:2], seed=1, hint=HINT, label_seed=11, script=script)

    async def before(pilot):
        await chat_answered(pilot, "What is the weather in Lisbon?")

    assert snap_compare(LineupApp(store, chat=opts, rater="tester"), run_before=before, terminal_size=SIZE)


def test_blind_vote_bar(snap_compare, store):
    async def before(pilot):
        await chat_answered(pilot, "Compare bubble sort and merge sort")
        assert pilot.app.focused is pilot.app.chat_screen.prompt     # the vote bar never takes the focus
        await pilot.press("f2")
        await pilot.pause(0.2)
        assert pilot.app.focused is pilot.app.chat_screen.vote_bar

    assert snap_compare(chat_app(store, blind=True), run_before=before, terminal_size=SIZE)


def test_blind_after_vote_reveals_names(snap_compare, store):
    async def before(pilot):
        await chat_answered(pilot, "Compare bubble sort and merge sort")
        await pilot.press("f2", "b")
        await wait_for(pilot, lambda: pilot.app.session.revealed, "the reveal")
        await pilot.pause(0.2)
        mask(pilot.app)

    assert snap_compare(chat_app(store, blind=True), run_before=before, terminal_size=SIZE)


def test_help_screen(snap_compare, store):
    async def before(pilot):
        await wait_for(pilot, lambda: pilot.app.chat_screen is not None, "chat")
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, HelpScreen), "help")

    assert snap_compare(chat_app(store), run_before=before, terminal_size=SIZE)


def test_sessions_screen(snap_compare, store):
    async def before(pilot):
        await wait_for(pilot, lambda: pilot.app.chat_screen is not None, "chat")
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SessionsScreen)
                       and pilot.app.screen.summaries, "sessions")
        await pilot.press("slash", *"nightly")
        await pilot.pause(0.2)

    assert snap_compare(chat_app(store), run_before=before, terminal_size=SIZE)


def test_vote_queue(snap_compare, store):
    async def before(pilot):
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, VoteQueueScreen)
                       and pilot.app.screen.current is not None, "the queue")
        await pilot.press("enter")   # nothing judged yet: Enter does nothing
        await pilot.pause(0.2)

    app = LineupApp(store, vote=VoteOptions(SID, shuffle_seed=4), rater="tester")
    assert snap_compare(app, run_before=before, terminal_size=SIZE)


def test_replay(snap_compare, store):
    async def before(pilot):
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ReplayScreen)
                       and pilot.app.screen.panes, "the replay")
        await pilot.pause(0.2)

    app = LineupApp(store, replay=ReplayOptions(SID), rater="tester")
    assert snap_compare(app, run_before=before, terminal_size=SIZE)


def test_blinding_audit_guess(snap_compare, store):
    from tui.guess_picker import GuessPicker

    async def before(pilot):
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, VoteQueueScreen)
                       and pilot.app.screen.current is not None, "the queue")
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, GuessPicker), "the guess")
        await pilot.pause(0.2)

    app = LineupApp(store, vote=VoteOptions(SID, shuffle_seed=4, blinding_audit=True), rater="tester")
    assert snap_compare(app, run_before=before, terminal_size=SIZE)
