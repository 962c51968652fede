"""Every key binding of the TUI, found by walking the `tui` package (not a list
kept by hand): each is a `Binding` with an id, the ids are unique, and each
place that declares bindings is a group of the help screen, whose rendered
text shows every binding's key and what it does."""

from __future__ import annotations

import importlib
import pkgutil

from textual.binding import Binding
from tests.tui_support import open_store, run, screen_text, wait_for

import tui
from tui.app import LineupApp
from tui.help_screen import HelpScreen, _key_display, binding_groups


def classes_with_bindings() -> dict[str, type]:
    """Every class defined in a `tui` module that declares its own BINDINGS."""
    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(tui.__path__, "tui."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and obj.__module__ == module.__name__ and "BINDINGS" in vars(obj):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_binding_in_the_tui_has_a_unique_id():
    classes = classes_with_bindings()
    # the walk sees the screens and widgets it should (it cannot pass by finding nothing)
    assert {"tui.app.LineupApp", "tui.chat_screen.ChatScreen", "tui.panes.Pane", "tui.vote_bar.VoteBar",
            "tui.help_screen.HelpScreen", "tui.vote_queue.VoteQueueScreen"} <= set(classes)
    ids: list[str] = []
    for name, cls in classes.items():
        assert cls.BINDINGS, f"{name}: empty BINDINGS"
        for b in cls.BINDINGS:
            assert isinstance(b, Binding), f"{name}: {b!r} is not a Binding (a tuple has no id)"
            assert b.id, f"{name}: the binding for {b.key!r} ({b.action}) has no id"
            ids.append(b.id)
    assert sorted(i for i in ids if ids.count(i) > 1) == []


def test_every_place_with_bindings_is_a_group_of_the_help_screen():
    groups = binding_groups(LineupApp)
    in_help = {id(bindings) for _, bindings in groups}
    missing = [name for name, cls in classes_with_bindings().items() if id(cls.BINDINGS) not in in_help]
    assert missing == [], f"not in tui.help_screen.binding_groups: {missing}"
    assert len(in_help) == len(groups), "a group listed twice"


def test_the_help_screen_shows_every_binding(tmp_path):
    shown: dict[str, str] = {}

    async def scenario():
        store = await open_store(tmp_path / "t.db")
        app = LineupApp(store)
        # tall enough for every group at once (the help scrolls in a real terminal)
        async with app.run_test(size=(160, 400)) as pilot:
            await pilot.press("f1")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
            await pilot.pause()
            shown["text"] = screen_text(app)
        await store.aclose()

    run(scenario())
    lines = [line.strip().strip("│").strip() for line in shown["text"].splitlines()]   # inside the box
    for title, bindings in binding_groups(LineupApp):
        assert any(line == title for line in lines), f"no group {title!r} in the help screen"
        for b in bindings:
            if b.id and b.id.startswith("vote.") and len(b.key) == 1 and b.key in "abcdefgh":
                key, what = "a … h", "vote: that answer is best"   # the letters share one line
            else:
                key, what = _key_display(b), b.tooltip or b.description
            assert any(line.startswith(key) and what in line for line in lines), \
                f"{title}: {b.id} ({key}: {what}) is not in the help screen"
