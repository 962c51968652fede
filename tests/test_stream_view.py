"""StreamView: the streaming conversation widget (Line API), driven by a Textual pilot."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import subprocess
import sys
import weakref

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip

from core.ground.text import neutralise
from tests.tui_support import settle
from tui import block_render
from tui.lean_strip import LeanStrip
from tui.stream_view import StreamView

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"  # Textual runs on asyncio


UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


class ViewApp(App):
    def compose(self) -> ComposeResult:
        yield StreamView()


def visible(view: StreamView) -> list[str]:
    """The text on screen, row by row, without the scrollbar drawn beside it."""
    return [view.render_line(y).crop(0, view.text_width).text
            for y in range(view.scrollable_content_region.height)]


def all_painted_strips(view: StreamView):
    """Every line the widget paints, top to bottom, by scrolling through it."""
    height = view.scrollable_content_region.height
    strips = []
    for top in range(0, max(1, view.virtual_size.height), height):
        view.scroll_to(y=top, animate=False)
        for y in range(height):
            if view.scroll_offset.y + y < view.virtual_size.height:
                strips.append(view.render_line(y))
    return strips


# ---------------------------------------------------------------- streaming
async def test_streamed_text_is_painted_without_being_asked():
    app = ViewApp()
    async with app.run_test(size=(90, 30)) as pilot:
        view = app.query_one(StreamView)
        view.add_user("What is a monad?")
        view.start_answer()
        answer = "A **monad** is a pattern.\n\nIt has two parts:\n\n- unit\n- bind\n\nDone here."
        for index in range(0, len(answer), 3):
            view.append(answer[index:index + 3])
            await pilot.pause(0.005)
        await settle(pilot, view)
        # Painted by the timer-driven flush: render_line, not plain_text, is asked here.
        screen = "\n".join(visible(view))
        assert "What is a monad?" in screen
        assert "A monad is a pattern." in screen  # Markdown rendered: no asterisks
        assert "• unit" in screen and "• bind" in screen
        assert "Done here." in screen
        assert view.answer_text() == answer
        view.end_answer()
        await settle(pilot, view)
        assert "Done here." in view.plain_text()


async def test_an_app_that_streamed_is_freed_when_it_ends():
    """The flush clock all of an app's views share is the app's alone: kept
    in a table keyed weakly by the app, it held its app, and so every app
    that had streamed stayed in memory with all it drew (each run of the
    render benchmark, each test app: the collector's pauses grew with them)."""
    async def stream() -> weakref.ref:
        app = ViewApp()
        async with app.run_test(size=(60, 20)) as pilot:
            view = app.query_one(StreamView)
            view.start_answer()
            for word in ("flushed ", "on ", "the ", "clock"):
                view.append(word)
                await pilot.pause(0.03)
            await settle(pilot, view)
            view.end_answer()
            await settle(pilot, view)
        return weakref.ref(app)

    # (in a task of its own: Textual leaves its app in a context variable of the task that ran it)
    ended = await asyncio.create_task(stream())
    gc.collect()
    assert ended() is None


async def test_lines_painted_while_streaming_are_freed_without_the_cycle_collector():
    """The compositor divides every line it paints, and a Textual Strip keeps
    its division into itself in its own memo cache: a cycle. Each painted
    line was garbage only the cycle collector could free (~160k objects in
    ten seconds of six streaming panes; its passes were the longest stalls).
    The view hands it lean strips (`tui.lean_strip.lean`): none is left."""
    app = ViewApp()
    async with app.run_test(size=(60, 20)) as pilot:
        view = app.query_one(StreamView)
        view.start_answer()
        gc.collect()
        gc.disable()
        try:
            for k in range(30):
                view.append(f"Line {k} of an answer that scrolls the view as it grows.\n\n")
                await pilot.pause(0.03)
            await settle(pilot, view)
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            cycles = sum(isinstance(found, Strip) for found in gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        assert "Line 29 of an answer" in "\n".join(visible(view))
    assert cycles == 0


async def test_a_row_painted_again_unchanged_is_handed_over_as_the_same_line():
    """The compositor renders the box around all of a frame's changes, so a
    pane paints rows that did not change whenever another pane's did: an
    unchanged row is given as the lean line it was last time, not a new one."""
    app = ViewApp()
    async with app.run_test(size=(60, 20)) as pilot:
        view = app.query_one(StreamView)
        view.start_answer()
        view.append("".join(f"Line {k} of an answer.\n\n" for k in range(12)))
        await settle(pilot, view)
        first = view.render_lines(view.size.region)
        again = view.render_lines(view.size.region)
        assert len(first) == view.size.height and all(type(line) is LeanStrip for line in first)
        assert all(a is b for a, b in zip(first, again, strict=True))
        view.append("one more line")
        await settle(pilot, view)
        after = view.render_lines(view.size.region)
        assert any(a is not b for a, b in zip(first, after, strict=True))   # (what changed is drawn anew)


async def test_partial_line_shows_before_its_newline():
    app = ViewApp()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(StreamView)
        view.start_answer()
        view.append("streaming wor")
        await settle(pilot, view)
        assert any("streaming wor" in line for line in visible(view))
        view.append("ds and more")
        await settle(pilot, view)
        assert any("streaming words and more" in line for line in visible(view))


async def test_answers_and_notes_keep_their_order_and_raw_text():
    app = ViewApp()
    async with app.run_test(size=(80, 40)) as pilot:
        view = app.query_one(StreamView)
        view.add_user("first question")
        view.start_answer()
        view.append("first answer")
        view.end_answer("cancelled")
        view.add_user("second question")
        view.start_answer()
        view.append("second answer\x1b[2J")
        view.end_answer("error: rate limited")
        await settle(pilot, view)
        text = view.plain_text()
        order = ["first question", "first answer", "cancelled", "second question",
                 "second answer", "error: rate limited"]
        positions = [text.index(word) for word in order]
        assert positions == sorted(positions)
        assert view.answer_count == 2
        assert view.answer_text(0) == "first answer"
        assert view.answer_text() == "second answer\x1b[2J"  # raw, as received
        assert "second answer␛[2J" in text                   # shown neutralised
        with pytest.raises(IndexError):
            view.answer_text(5)


async def test_follows_the_bottom_unless_the_user_scrolled_up():
    app = ViewApp()
    async with app.run_test(size=(60, 12)) as pilot:
        view = app.query_one(StreamView)
        view.start_answer()
        for index in range(60):
            view.append(f"line {index}\n\n")
            await pilot.pause(0.002)
        await settle(pilot, view)
        assert view.max_scroll_y > 0
        assert view.scroll_y == view.max_scroll_y
        assert any("line 59" in line for line in visible(view))

        view.scroll_to(y=0, animate=False)
        await pilot.pause()
        for index in range(60, 80):
            view.append(f"line {index}\n\n")
        await settle(pilot, view)
        assert view.scroll_y == 0
        assert any("line 0" in line for line in visible(view))

        view.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        view.append("line 80\n\n")
        await settle(pilot, view)
        assert view.scroll_y == view.max_scroll_y
        assert any("line 80" in line for line in visible(view))


@pytest.mark.slow
async def test_rows_moved_by_a_scroll_are_not_styled_again_and_paint_the_same():
    """Following a stream scrolls the view by a line or two per flush: the rows
    that only moved reuse Textual's styled line (StreamView._reuse_moved_lines),
    and what is painted is what a fresh render paints."""
    app = ViewApp()
    async with app.run_test(size=(60, 14)) as pilot:
        view = app.query_one(StreamView)
        styles_cache = view._styles_cache
        # The Textual internals the reuse relies on (else it silently does nothing).
        assert isinstance(getattr(styles_cache, "_cache", None), dict)
        assert isinstance(getattr(styles_cache, "_dirty_lines", None), set)
        styled = []
        render_line = styles_cache.render_line

        def counting(*args, **kwargs):
            styled.append(args[1])
            return render_line(*args, **kwargs)

        styles_cache.render_line = counting
        region = Region(0, 0, view.region.width, view.region.height)
        view.start_answer()
        scrolls = 0
        for index in range(60):
            top = view.scroll_offset.y
            view.append(f"line {index} " + "word " * (index % 7) + "\n\n")
            await settle(pilot, view)
            scrolls += view.scroll_offset.y != top
            painted = view.render_lines(region)
            styles_cache.clear()
            assert view.render_lines(region) == painted, index
        assert scrolls > 30
        height = view.scrollable_content_region.height
        # Without the reuse each scroll restyles every row (plus the fresh renders above).
        assert len(styled) < (scrolls * height) // 2 + 60 * region.height


async def styled_rows_following_code(monkeypatch, new_objects: bool) -> tuple[int, int]:
    """(rows Textual styled, scrolls) while a view follows 40 flushes of code
    lines each followed by a blank line; with `new_objects`, every line
    drawn is a new object, as before `lean_strip.drawn_line`."""
    if new_objects:
        monkeypatch.setattr(block_render, "drawn_line", lambda segments, width: LeanStrip(list(segments), width))
    app = ViewApp()
    async with app.run_test(size=(60, 14)) as pilot:
        view = app.query_one(StreamView)
        styles_cache = view._styles_cache
        styled = 0
        render_line = styles_cache.render_line

        def counting(*args, **kwargs):
            nonlocal styled
            styled += 1
            return render_line(*args, **kwargs)

        region = Region(0, 0, view.region.width, view.region.height)
        view.start_answer()
        view.append("```python\n")
        await settle(pilot, view)
        view.render_lines(region)
        styles_cache.render_line = counting
        scrolls = 0
        for k in range(40):
            top = view.scroll_offset.y
            view.append(f"value_{k} = {k}\n\n")
            await settle(pilot, view)
            scrolls += view.scroll_offset.y != top
            view.render_lines(region)
    monkeypatch.undo()
    return styled, scrolls


async def test_a_line_drawn_like_one_already_styled_is_not_styled_again(monkeypatch):
    """Textual finds a row's styled line by the line object: the blank lines
    of streamed code and a code block's bottom padding, drawn again at each
    flush, are the line it styled before (`lean_strip.drawn_line`). Each
    flush adds a line of code and a blank line and draws the bottom padding
    again: two restyles a flush fewer than with a new object per line."""
    styled, scrolls = await styled_rows_following_code(monkeypatch, new_objects=False)
    before, _ = await styled_rows_following_code(monkeypatch, new_objects=True)
    assert scrolls > 20
    assert styled + 60 <= before, (styled, before)


async def test_a_streamed_table_and_code_paint_what_the_answer_loaded_at_once_paints():
    """The tail's table rows and code lines are kept between flushes and the
    finished block goes on from them (`tui.tail_render`): every painted line
    is still the one a fresh render of the whole answer gives."""
    rows = "\n".join(f"| model-{k} | {k * 37} | " + "a note that goes on " * (k % 4) + "|" for k in range(18))
    answer = ("A table:\n\n| model | score | note |\n|---|--:|---|\n" + rows + "\n\nAnd code:\n\n```python\n"
              + "\n".join(f"def f{k}(x):\n    return x * {k}  # {'why ' * (k % 5)}" for k in range(20))
              + "\n```\n\nDone.")
    app = ViewApp()
    async with app.run_test(size=(70, 24)) as pilot:
        view = app.query_one(StreamView)
        view.start_answer()
        for index in range(0, len(answer), 5):
            view.append(answer[index:index + 5])
            if index % 15 == 0:
                await settle(pilot, view)
        view.end_answer()
        await settle(pilot, view)
        streamed = all_painted_strips(view)
        view.set_conversation([("assistant", answer)])
        await settle(pilot, view)
        assert all_painted_strips(view) == streamed
        assert any("model-17" in strip.text for strip in streamed)


# ---------------------------------------------------------------- width
async def test_width_change_rerenders_every_block():
    app = ViewApp()
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.query_one(StreamView)
        paragraph = " ".join(f"word{i}" for i in range(200))
        view.set_conversation([
            ("user", "question"),
            ("assistant", f"{paragraph}\n\n```\n{'c' * 150}\n```\n\n{paragraph}"),
        ])
        await settle(pilot, view)
        wide_width = view.text_width
        wide_lines = view.plain_text().split("\n")
        assert max(len(line) for line in wide_lines) <= wide_width

        await pilot.resize_terminal(50, 30)
        await settle(pilot, view)
        narrow_width = view.text_width
        assert narrow_width < wide_width
        assert all(block.width == narrow_width for block in view._blocks)
        narrow_lines = view.plain_text().split("\n")
        assert max(len(line) for line in narrow_lines) <= narrow_width
        assert len(narrow_lines) > len(wide_lines) + 10
        assert view.virtual_size.height == len(narrow_lines)
        words = " ".join(narrow_lines).split()
        assert words.count("word199") == 2
        assert "".join(narrow_lines).count("c") >= 150


async def test_scroll_position_is_kept_across_a_resize_when_not_following():
    app = ViewApp()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(StreamView)
        view.set_conversation([("assistant", "\n\n".join(f"para {i} " + "x " * 30 for i in range(80)))])
        await settle(pilot, view)
        view.scroll_to(y=view.max_scroll_y // 2, animate=False)
        await pilot.pause()
        top = visible(view)[0].split()[:2] or visible(view)[1].split()[:2]
        await pilot.resize_terminal(60, 20)
        await settle(pilot, view)
        screen = "\n".join(visible(view))
        assert " ".join(top) in screen  # the paragraph that was on screen still is


# ---------------------------------------------------------------- safety
HOSTILE = (
    "[bold red]not bold[/] [link=https://evil.example]click[/link] [@click=app.quit]quit[/]\n\n"
    "ansi \x1b[31mred\x1b[0m clear \x1b[2J osc \x1b]8;;https://evil.example\x07here\x1b]8;;\x07 "
    "title \x1b]0;pwned\x1b\\ bell \x07 nul \x00 del \x7f c1 \x9b31m cr \r tab \t end "
    "bidi \u202egnp.exe\u202c isolate \u2066x\u2069 lone \ud800\n\n"
    "[a markdown link](https://evil.example/path) <https://auto.example>\n\n"
    "```\ncode \x1b[1mbold\x1b[0m [b]x[/b]\n```\n"
)


async def test_markup_and_escapes_are_shown_literally_and_neutralised():
    app = ViewApp()
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(StreamView)
        view.add_user("user [bold]x[/] \x1b[5mblink")
        view.start_answer()
        view.append_reasoning("think \x1b[8mhidden\x1b[0m [i]x[/i]")
        for index in range(0, len(HOSTILE), 7):
            view.append(HOSTILE[index:index + 7])
        view.end_answer("note [red]x[/] \x1b[31m")
        await settle(pilot, view)

        text = view.plain_text()
        flat = " ".join(text.split())  # lines wrap at the pane width
        for literal in ["[bold red]not bold[/]", "[link=https://evil.example]click[/link]",
                        "[@click=app.quit]quit[/]", "␛[31mred␛[0m", "␛]8;;https://evil.example␇here",
                        "␛]0;pwned␛\\", "bell ␇", "nul ␀", "del ␡", "cr ␍", "user [bold]x[/] ␛[5mblink",
                        "[i]x[/i]", "note [red]x[/] ␛[31m", "code ␛[1mbold␛[0m [b]x[/b]",
                        "https://evil.example/path"]:
            assert literal in flat, literal
        assert UNSAFE.search(text) is None

        strips = all_painted_strips(view)
        assert len(strips) == view.virtual_size.height
        for strip in strips:
            for segment in strip:
                assert not segment.control
                assert UNSAFE.search(segment.text) is None, repr(segment.text)
                assert "\t" not in segment.text
                if segment.style is not None:
                    assert not segment.style.link
                    assert not segment.style.meta


def test_neutralise_covers_each_class_and_keeps_text():
    assert neutralise("plain [b]text[/b]\n\tok") == "plain [b]text[/b]\n\tok"
    assert neutralise("\x1b[31m") == "␛[31m"
    assert neutralise("\x00\x07\x08\r\x7f") == "␀␇␈␍␡"
    assert neutralise("\x9b\x85") == "\ufffd\ufffd"
    assert neutralise("a\u202eb\u2066c\u200fd") == "a\ufffdb\ufffdc\ufffdd"
    assert neutralise("x\ud800y") == "x\ufffdy"
    assert neutralise("é漢字😀") == "é漢字😀"


# ---------------------------------------------------------------- copy helpers
async def test_last_code_block():
    app = ViewApp()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(StreamView)
        view.start_answer()
        view.append("No code here.")
        view.end_answer()
        view.start_answer()
        view.append("First:\n```python\nprint(1)\n```\nthen\n~~~\nraw ``` inside\n\nkept\n~~~\n"
                    "1. step\n   ```bash\n   echo hi\n     indented\n   ```\n")
        view.end_answer()
        view.start_answer()
        view.append("```js\nlet unfinished = true;\n")
        await settle(pilot, view)
        assert view.last_code_block(0) is None
        assert view.last_code_block(1) == "echo hi\n  indented"
        assert view.last_code_block(-1) == "let unfinished = true;\n"
        view.end_answer()
        assert view.last_code_block() == "let unfinished = true;\n"
        assert "echo hi" in view.plain_text()


# ---------------------------------------------------------------- reasoning
async def test_reasoning_toggle():
    app = ViewApp()
    async with app.run_test(size=(80, 30)) as pilot:
        view = app.query_one(StreamView)
        view.add_user("q")
        view.start_answer()
        view.append_reasoning("Let me think about the secret plan.\n\nStep two of thinking.")
        view.append("The answer is 42.")
        view.end_answer()
        await settle(pilot, view)
        assert view.show_reasoning
        shown = view.plain_text()
        assert "secret plan" in shown and "Step two" in shown and "The answer is 42." in shown
        assert shown.index("secret plan") < shown.index("The answer is 42.")
        height = view.virtual_size.height

        view.show_reasoning = False
        await settle(pilot, view)
        hidden = view.plain_text()
        assert "secret plan" not in hidden and "Step two" not in hidden
        assert "The answer is 42." in hidden
        assert view.virtual_size.height < height
        assert not any("secret plan" in line for line in visible(view))
        assert view.reasoning_text() == "Let me think about the secret plan.\n\nStep two of thinking."
        assert view.answer_text() == "The answer is 42."

        view.show_reasoning = True
        await settle(pilot, view)
        assert view.plain_text() == shown


async def test_reasoning_streamed_while_hidden_appears_when_shown():
    app = ViewApp()
    async with app.run_test(size=(80, 30)) as pilot:
        view = app.query_one(StreamView)
        view.show_reasoning = False
        view.start_answer()
        view.append_reasoning("hidden musing")
        await settle(pilot, view)
        assert "hidden musing" not in "\n".join(visible(view))
        view.show_reasoning = True
        await settle(pilot, view)
        assert any("hidden musing" in line for line in visible(view))


# ---------------------------------------------------------------- replay / bulk
async def test_set_conversation_replays_turns():
    app = ViewApp()
    async with app.run_test(size=(80, 40)) as pilot:
        view = app.query_one(StreamView)
        view.start_answer()
        view.append("stale content")
        view.set_conversation([
            ("user", "hello"), ("reasoning", "hmm"), ("assistant", "Hi **there**"),
            ("user", "again"), ("assistant", "partial"), ("note", "cancelled"),
            ("assistant", "third"),
        ])
        await settle(pilot, view)
        text = view.plain_text()
        assert "stale content" not in text
        assert view.answer_count == 3
        assert [view.answer_text(i) for i in range(3)] == ["Hi **there**", "partial", "third"]
        assert view.reasoning_text(0) == "hmm"
        for word in ["hello", "hmm", "Hi there", "again", "partial", "cancelled", "third"]:
            assert word in text
        view.clear()
        await settle(pilot, view)
        assert view.plain_text() == "" and view.answer_count == 0
        assert view.virtual_size.height == 0


# ---------------------------------------------------------------- big inputs
def markdown_document(size: int) -> str:
    unit = ("## Section\n\nSome *text* with `code` and **bold** words, long enough to wrap "
            "around once or twice in a narrow pane.\n\n- item one\n- item two\n\n"
            "```python\ndef f(x):\n    return x + 1\n```\n\n")
    return (unit * (size // len(unit) + 1))[:size]


async def test_one_megabyte_answer_loads_and_streams():
    app = ViewApp()
    async with app.run_test(size=(100, 40)) as pilot:
        view = app.query_one(StreamView)
        answer = markdown_document(1_000_000) + "\n\nTHE END"
        view.set_conversation([("user", "long please"), ("assistant", answer)])
        await pilot.pause()
        await pilot.pause(0.05)
        assert view.answer_text() == answer
        assert any("THE END" in line for line in visible(view))  # following: bottom shown
        source_lines = answer.count("\n")
        assert source_lines * 0.5 < view.virtual_size.height < source_lines * 3

        view.scroll_to(y=0, animate=False)
        await pilot.pause(0.05)
        assert any("long please" in line for line in visible(view))

        view.clear()
        view.start_answer()
        for index in range(0, len(answer), 65_536):
            view.append(answer[index:index + 65_536])
            await pilot.pause()
        view.end_answer()
        await pilot.pause(0.05)
        assert any("THE END" in line for line in visible(view))
        assert view.answer_text() == answer


@pytest.mark.parametrize("answer, tail", [
    ("x" * 10_000 + " tail10k", "tail10k"),
    ("\n".join(f"row {i}" for i in range(100_000)), "row 99999"),
    ("```\n" + "\n".join(f"code {i}" for i in range(100_000)) + "\n```", "code 99999"),
    ("y" * 1_000_000 + " endofline", "endofline"),
], ids=["10k-column line", "100k lines", "100k code lines", "1 MB line"])
async def test_huge_lines_and_line_counts_do_not_freeze(answer, tail):
    app = ViewApp()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(StreamView)
        view.set_conversation([("assistant", answer)])
        await pilot.pause()
        await pilot.pause(0.05)
        width = view.text_width
        screen = visible(view)
        assert any(tail in line for line in screen)
        assert all(len(line) <= width for line in screen)
        rows = answer.count("\n") + 1
        height = view.virtual_size.height
        assert height >= min(rows, len(answer) // width)
        assert height <= rows + len(answer) // (width // 2) + 10


@pytest.mark.parametrize("env, fps", [({}, "120"), ({"TEXTUAL_FPS": "30"}, "30")])
def test_the_app_paints_up_to_120_frames_a_second_unless_told_otherwise(env, fps):
    """At Textual's default 60 a paint after a late one waits up to two frames
    (33 ms), longer than the 25 ms flush interval (tui/__init__.py)."""
    base = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    code = ("import tui.app, textual.constants as c, textual.screen as s; "
            "print(c.MAX_FPS, round(1 / s.UPDATE_PERIOD))")
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == [fps, fps]
