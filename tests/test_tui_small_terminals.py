"""Small terminals and the settings dialog: at
80x24 every pane is reachable and named, every vote choice is on screen, the
footer names whole keys, code folds between tokens with a mark, the pane
header drops whole figures, and the settings dialog shows every field, Tabs
into the first one and never drops a key without saying so. The rules are
checked on their own and in the app (a pilot at 80x24); the real terminal is
tests/test_tui_terminal_sizes.py."""

from __future__ import annotations

import re

import pytest
from rich.text import Text
from textual.binding import ActiveBinding, Binding
from textual.widgets import Button, Input, TextArea
from tests.tui_sessions import demo_models
from tests.tui_support import open_store, run, screen_text, wait_for

from tui.app import ChatOptions, LineupApp, VoteOptions
from tui.block_render import _code_lines
from tui.footer_fit import fit_bindings, key_width
from tui.pane_tabs import STATUS_MARK, fit_tabs
from tui.panes import header_text
from tui.settings_screen import FIELDS, SettingsScreen
from tui.vote_bar import fit_choices


@pytest.fixture(autouse=True)
def _instant(monkeypatch):
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")


# --------------------------------------------------------------------------- the rules on their own


@pytest.mark.parametrize("n", range(2, 9))
def test_the_tab_strip_names_every_pane_in_80_columns(n):
    names = [m.alias for m in demo_models(n)]
    for active in (0, n - 1):
        text, spans = fit_tabs(names, ["done"] * n, active, 78)
        assert text.cell_len <= 78 and len(spans) == n
        shown = [text.plain[a:b].split(STATUS_MARK["done"])[0].strip() for a, b in spans]
        assert len(set(shown)) == n, shown                     # told apart
        for name, tab in zip(names, shown, strict=True):                    # the name, or its ends around an ellipsis
            head, _, tail = tab.partition("…")
            assert len(head) >= 2 and head in name and name.endswith(tail), tab


def test_the_tab_strip_keeps_the_status_words_and_hint_where_they_fit():
    text, _ = fit_tabs(["A", "B"], ["done", "streaming"], 1, 158)
    assert "A ✓ done" in text.plain and "B ▸ streaming" in text.plain and "alt+←/→ switch" in text.plain


def test_names_cut_to_fit_keep_what_tells_them_apart():
    names = [f"openrouter/model-{i}-large" for i in range(8)]
    text, spans = fit_tabs(names, ["streaming"] * 8, 7, 78)
    shown = [text.plain[a:b] for a, b in spans]
    assert text.cell_len <= 78 and len(set(shown)) == 8
    assert all(str(i) in s for i, s in enumerate(shown))


@pytest.mark.parametrize("n", range(2, 9))
@pytest.mark.parametrize("blind", [False, True])
def test_every_vote_choice_fits_in_80_columns(n, blind):
    labels = list("ABCDEFGH"[:n]) if blind else [m.alias for m in demo_models(n)]
    bad = "both_bad" if n == 2 else "all_bad"
    texts, stacked = fit_choices(labels, bad, 78, "Which answer is best? (F2 to vote)")
    assert sum(len(t) + 3 for t in texts) <= 78
    assert texts[n:n + 2] == ["tie", bad.replace("_", " ")] and (texts[-1] == "rank…") == (n > 2)
    assert [t[0].lower() for t in texts[:n]] == list("abcdefgh"[:n])


def test_the_vote_bar_keeps_whole_names_beside_the_question_when_wide():
    labels = ["demo/concise", "demo/thorough"]
    texts, stacked = fit_choices(labels, "both_bad", 158, "Which answer is best? (F2 to vote)")
    assert texts == ["a: demo/concise", "b: demo/thorough", "tie", "both bad"] and not stacked


def _active(key: str, action: str, description: str, group: Binding.Group | None = None) -> ActiveBinding:
    return ActiveBinding(None, Binding(key, action, description, group=group), True, "")  # type: ignore[arg-type]


def test_the_footer_keeps_whole_keys_the_most_important_first():
    bindings = {k: _active(k, a, d) for k, a, d in [("enter", "submit", "Send"), ("ctrl+j", "newline", "New line"),
                                                    ("ctrl+l", "pick_models", "Models"), ("ctrl+q", "quit", "Quit"),
                                                    ("f1", "help", "Help")]}
    order = ["submit", "quit", "help", "pick_models", "newline"]
    kept = fit_bindings(bindings, 32, True, lambda b: b.key, lambda b: order.index(b.binding.action))
    assert list(kept) == ["enter", "ctrl+q", "f1"]                     # in the footer's order
    assert sum(key_width(k, b.binding.description, True) for k, b in kept.items()) <= 32


def test_the_footer_names_a_group_of_keys_whole_or_not_at_all():
    best = Binding.Group("best")
    bindings = {k: _active(k, f"pick('{k}')", f"{k} best", best) for k in "abcd"}
    bindings["t"] = _active("t", "tie", "Tie")
    kept = fit_bindings(bindings, 16, True, lambda b: b.key, lambda b: 0)
    assert list(kept) == ["a", "b", "c", "d"]                           # "a b c d best" is 14 cells
    kept = fit_bindings(bindings, 12, True, lambda b: b.key, lambda b: 0)
    assert list(kept) == ["t"]


def _rows(code: str, width: int) -> list[str]:
    lines = _code_lines(code, "python", width, False, False)
    return ["".join(seg.text for seg in line)[1:-1].rstrip() for line in lines]


def test_long_code_lines_fold_between_tokens_with_a_mark():
    rows = _rows("    return [item for item in items if item]\n", 36)
    assert rows == ["    return [item for item in items", "↪ if item]"]
    rows = _rows("    return [item for item in items if item]\n", 30)
    assert rows == ["    return [item for item in", "↪ items if item]"]
    words = set(re.findall(r"\w+", "return item for in items if"))
    for row in rows:                                   # no row starts or ends inside a word
        assert all(w in words for w in re.findall(r"\w+", row))


def test_strings_and_comments_fold_between_words_and_a_huge_token_is_cut():
    rows = _rows('x = "one two three four five six"  # a comment that is long\n', 24)
    assert all(len(r) <= 22 for r in rows) and rows[0] == 'x = "one two three'
    assert all(r.startswith("↪ ") for r in rows[1:])
    assert " ".join(r.removeprefix("↪ ") for r in rows).split() == \
        'x = "one two three four five six" # a comment that is long'.split()
    rows = _rows("y = " + "a" * 50 + "\n", 24)
    assert "".join(r.removeprefix("↪ ") for r in rows).replace(" ", "") == "y=" + "a" * 50
    assert all(r.startswith("↪ ") for r in rows[1:])


def test_a_line_that_fits_is_left_alone():
    assert _rows("def f(items):\n    return items\n", 40) == ["def f(items):", "    return items"]


def test_the_pane_header_drops_whole_figures():
    figures = "ttft 312 ms · 38 tok/s · 512 tok"
    for width in range(10, 60):
        plain = header_text("demo/concise", "done", "", figures, width).plain
        assert not plain.rstrip().endswith("·")
        shown = plain.removeprefix("demo/concise  done").strip()
        assert shown == "" or figures.startswith(shown)
        if width >= 52:
            assert shown == figures
    assert isinstance(header_text("a", "idle", "", "", 5), Text)


# --------------------------------------------------------------------------- in the app, at 80x24


def chat(store, n: int, **kw) -> LineupApp:
    return LineupApp(store, chat=ChatOptions(models=demo_models(n), seed=1, label_seed=3, **kw), rater="t")


async def answered(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat")
    await pilot.press(*"list comprehension", "enter")
    await wait_for(pilot, lambda: app.chat_screen.sends == 1 and not app.chat_screen.sending
                   and not app.session.streaming and app.chat_screen.vote_bar.has_class("-visible"), "answers")
    await wait_for(pilot, lambda: len(app.chat_screen.vote_bar.query(Button)) >= n_choices(app), "the buttons")
    await pilot.pause(0.2)


def n_choices(app) -> int:
    n = len(app.chat_screen.panes)
    return n + 2 + (n > 2)


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("blind", [False, True])
def test_at_80x24_every_pane_is_named_and_every_vote_choice_shows(tmp_path, n, blind):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        app = chat(store, n, blind=blind)
        async with app.run_test(size=(80, 24)) as pilot:
            await answered(pilot)
            screen = app.chat_screen
            for _step in range(n):
                text = screen_text(app)
                lines = text.splitlines()
                tabs = next(line for line in lines if STATUS_MARK["done"] in line and "│" in line) \
                    if n > 1 and screen.pane_mode == "tabs" else ""
                if screen.pane_mode == "tabs":
                    shown = [tab.split(STATUS_MARK["done"])[0].strip() for tab in tabs.split("│")]
                    assert len(set(shown)) == n, tabs
                    for i, tab in enumerate(shown):          # the name, or its ends around an ellipsis
                        name = screen.session.display_name(i)
                        head, _, tail = tab.partition("…")
                        assert head and head in name and name.endswith(tail), (name, tabs)
                assert screen.panes[screen.active].display
                assert screen.session.display_name(screen.active) in text      # the shown pane's header
                for button in screen.vote_bar.query(Button):
                    region = button.region
                    assert region.width and region.right <= 80, (button.label, region)
                    assert str(button.label).strip() in text
                await pilot.press("alt+right")
                await pilot.pause(0.05)
            footer = screen_text(app).splitlines()[-1]
            assert "^q Quit" in footer or "Quit" in footer
            await pilot.press("f2", "x")                 # all bad (both bad): reachable from the keyboard
            await wait_for(pilot, lambda: bool(app.session.votes), "the vote")
            assert app.session.votes[-1].choice in ("all_bad", "both_bad")
            await pilot.press("ctrl+q")
        await store.aclose()

    run(scenario())


async def _open_settings(pilot) -> SettingsScreen:
    app = pilot.app
    await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat")
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), "the settings")
    await pilot.pause(0.2)
    return app.screen


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_every_settings_field_shows_and_the_first_tab_goes_to_the_first_field(tmp_path, size):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        app = chat(store, 4)
        async with app.run_test(size=size) as pilot:
            dialog = await _open_settings(pilot)
            text = screen_text(app)
            for row in ("session", "demo/concise", "demo/thinker"):
                line = next(line for line in text.splitlines() if f"│ {row} " in line and " idle " not in line)
                cells = re.split(r"\s{2,}", line.split(f"│ {row} ")[-1].split("│")[0].strip())
                assert len(cells) == 6 and "default" in cells, line   # each field shows its placeholder
            for name in FIELDS:
                box = dialog.query_one(f"#set-session-{name}", Input)
                assert box.region.width >= 6 and box.region.right <= size[0]
                assert box.placeholder                             # something drawn while empty
            assert isinstance(app.focused, TextArea)
            await pilot.press("tab")
            assert app.focused is dialog.query_one("#set-session-temperature", Input)
            order = []
            for _ in range(6):
                order.append(app.focused.id)
                await pilot.press("tab")
            assert order == ["set-session-temperature", "set-session-top_p", "set-session-max_tokens",
                             "set-session-seed", "set-session-reasoning_effort", "set-session-extra_body"]
            assert app.focused.id == "set-0-temperature"           # row by row, left to right
            await pilot.press("ctrl+q")
        await store.aclose()

    run(scenario())


def test_nothing_typed_in_the_settings_is_dropped_without_a_word(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        app = chat(store, 2)
        async with app.run_test(size=(80, 24)) as pilot:
            dialog = await _open_settings(pilot)
            await pilot.press("tab", *"0.5")
            assert dialog.query_one("#set-session-temperature", Input).value == "0.5"
            dialog.set_focus(None)                                   # a click on no field
            await pilot.press("7")
            await pilot.pause()
            assert "outside any field" in screen_text(app)
            await pilot.press("escape")                              # the 0.5 typed: asked first
            await pilot.pause()
            assert app.screen is dialog and "Esc again" in screen_text(app)
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: app.screen is app.chat_screen, "the chat")
            await wait_for(pilot, lambda: app.session.params.temperature == 0.5, "the setting applied")
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), "the settings again")
            await pilot.press("escape")                              # nothing typed: closes at once
            await wait_for(pilot, lambda: app.screen is app.chat_screen, "the chat")
            await pilot.press("ctrl+q")
        await store.aclose()

    run(scenario())


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_vote_queue_footer_ends_on_a_whole_key(tmp_path, width):
    """The vote queue's footer, like the chat's, names whole keys: the vote
    bar's first, then Next, Skip and Quit, none cut at the edge."""
    from tests.tui_sessions import CASES, make_run
    from textual.widgets import Footer

    from tui.vote_queue import VoteQueueScreen

    sid = make_run(tmp_path / "q.db", CASES)

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = LineupApp(store, vote=VoteOptions(session_id=sid),
                        rater="tester")
        async with app.run_test(size=(width, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen) and app.screen.current is not None,
                           "the queue")
            await wait_for(pilot, lambda: screen_text(app).splitlines()[-1].strip() != "", "the footer")
            screen = app.screen
            shown = screen.active_bindings
            descriptions = [b.binding.description for b in shown.values() if b.binding.show]
            groups = {b.binding.group.description for b in shown.values() if b.binding.group}
            footer = screen_text(app).splitlines()[-1].rstrip()
            assert "Quit" in descriptions and "Quit" in footer, footer
            assert footer.split()[-1] in {d.split()[-1] for d in [*descriptions, *groups]}, footer
            compact = screen.query_one(Footer).compact
            used = sum(key_width(app.get_key_display(b.binding), b.binding.description, compact)
                       for b in shown.values() if b.binding.show and b.binding.group is None)
            assert used <= width
        await store.aclose()

    run(scenario())
