"""SVG snapshots of the workbench's new screens, blind and revealed:
the model picker, the settings dialog, the compare view, one pane at a time
under tabs on a 100x30 terminal, the attach dialog with its completions and
the question before a session is deleted. Deterministic as the main
snapshots are (test_tui_snapshots: demo models at instant speed, fixed seeds
and labels, TZ=UTC); answers that must be compared come from the loopback
server's scripts. Update with `--snapshot-update`."""

from __future__ import annotations

import pytest
from tests.snapshot_support import SIZE, _deterministic, mask, store  # noqa: F401  (fixtures)
from tests.tui_support import ModelServers, Reply, models_config, wait_for

from core.answering.config import Config
from providers.demo import DEMO_MODELS
from tui.app import ChatOptions, LineupApp
from tui.compare_screen import CompareScreen
from tui.dialogs import Confirm, TextPrompt
from tui.model_picker import ModelPicker
from tui.sessions_screen import SessionsScreen
from tui.settings_screen import SettingsScreen

CODE_A = ("Use a comprehension:\n\n```python\nsquares = [x * x for x in range(10)]\nprint(squares[3])\n```\n\n"
          "It prints 9.")
CODE_B = ("Use a comprehension:\n\n```python\nsquares = [x ** 2 for x in range(10)]\nprint(squares[3])\n```\n\n"
          "It prints 9, in 0.1 ms.")
NAMES = [("zephyr", "zephyr-7b"), ("orca", "orca-mini")]


def still(app) -> None:
    """Live figures, blinking cursors and passing notifications are not part of the design."""
    mask(app)
    app.clear_notifications()
    for field in app.screen.query("Input"):
        field.cursor_blink = False
    for area in app.screen.query("TextArea"):
        area.cursor_blink = False


def demo_app(store, n: int = 3, **kw) -> LineupApp:
    opts = ChatOptions(models=DEMO_MODELS[:n], seed=1, label_seed=11, **kw)
    return LineupApp(store, Config(models={m.alias: m for m in DEMO_MODELS}), chat=opts, rater="tester")


async def in_chat(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat")
    await pilot.pause()


async def answered(pilot, prompt: str = "Explain python list comprehensions") -> None:
    app = pilot.app
    await in_chat(pilot)
    await pilot.press(*prompt, "enter")
    await wait_for(pilot, lambda: app.chat_screen.sends >= 1 and not app.chat_screen.sending
                   and not app.session.streaming, "the answers")
    await pilot.pause(0.2)
    still(app)


def _picker(search: str):
    async def before(pilot):
        await in_chat(pilot)
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModelPicker), "the picker")
        await pilot.press(*search)
        await pilot.pause(0.2)
        still(pilot.app)
    return before


def test_model_picker(snap_compare, store):
    assert snap_compare(demo_app(store), run_before=_picker(""), terminal_size=SIZE)


def test_model_picker_blind(snap_compare, store):
    assert snap_compare(demo_app(store, blind=True), run_before=_picker("th"), terminal_size=SIZE)


def _settings(typed: str):
    async def before(pilot):
        await in_chat(pilot)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SettingsScreen), "the settings")
        await pilot.press(*"You are terse.", "tab", *typed)
        await pilot.pause(0.2)
        still(pilot.app)
    return before


def test_settings_revealed(snap_compare, store):
    assert snap_compare(demo_app(store), run_before=_settings("0.4"), terminal_size=SIZE)


def test_settings_blind(snap_compare, store):
    assert snap_compare(demo_app(store, blind=True), run_before=_settings("0.4"), terminal_size=SIZE)


def _code_app(store, srv) -> LineupApp:
    srv["zephyr"].script(Reply(text=CODE_A))
    srv["orca"].script(Reply(text=CODE_B))
    models = srv.models()
    return LineupApp(store, models_config(models), chat=ChatOptions(models=models, blind=True, label_seed=5),
                     rater="tester")


def test_compare_blind(snap_compare, store):
    async def before(pilot):
        await answered(pilot, "Squares in python?")
        await pilot.press("f9")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CompareScreen), "the compare view")
        await pilot.pause(0.2)
        still(pilot.app)

    with ModelServers(NAMES) as srv:
        assert snap_compare(_code_app(store, srv), run_before=before, terminal_size=SIZE)


def test_compare_revealed_differences_only(snap_compare, store):
    async def before(pilot):
        await answered(pilot, "Squares in python?")
        await pilot.press("f2", "a")
        await wait_for(pilot, lambda: pilot.app.session.revealed, "the reveal")
        await pilot.press("f9")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CompareScreen), "the compare view")
        await pilot.press("d")
        await pilot.pause(0.2)
        still(pilot.app)

    with ModelServers(NAMES) as srv:
        assert snap_compare(_code_app(store, srv), run_before=before, terminal_size=SIZE)


def test_four_panes_narrow_blind(snap_compare, store):
    async def before(pilot):
        await answered(pilot, "Show a python decorator")
        await pilot.press("alt+right")
        await pilot.pause(0.2)
        still(pilot.app)

    assert snap_compare(demo_app(store, n=4, blind=True), run_before=before, terminal_size=(100, 30))


def test_attach_dialog(snap_compare, store, tmp_path, monkeypatch):
    shots = tmp_path / "shots"
    shots.mkdir()
    for name in ("chart-q1.png", "chart-q2.png", "diagram.webp", "notes.txt"):
        (shots / name).write_bytes(b"\x89PNG\r\n\x1a\n")
    (shots / "older").mkdir()
    monkeypatch.chdir(tmp_path)

    async def before(pilot):
        await in_chat(pilot)
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TextPrompt), "the attach dialog")
        await pilot.press(*"shots/", "c", "tab")
        await pilot.pause(0.2)
        still(pilot.app)

    assert snap_compare(demo_app(store), run_before=before, terminal_size=SIZE)


def test_delete_session_question(snap_compare, store):
    async def before(pilot):
        await in_chat(pilot)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SessionsScreen)
                       and pilot.app.screen.summaries, "sessions")
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, Confirm), "the question")
        await pilot.pause(0.2)

    assert snap_compare(demo_app(store), run_before=before, terminal_size=SIZE)


@pytest.fixture(autouse=True)
def _no_clipboard_env(monkeypatch):
    for var in ("TMUX", "STY", "DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(var, raising=False)
