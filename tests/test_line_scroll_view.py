"""LineScrollView's scrollbar, drawn in the view's own rows: it looks like
Textual's ScrollBar widget and answers the mouse as that widget does.

The stream views draw it themselves because a scrollbar widget beside each
pane cost the compositor half of every paint (benchmarks/bench_render.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.geometry import Region
from textual.scrollbar import ScrollBar, ScrollBarRender

from tests.tui_support import settle
from tui.line_scroll_view import LineScrollView, bar_cells
from tui.stream_view import StreamView

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"  # Textual runs on asyncio


class TwoViews(App):
    CSS = "StreamView { width: 1fr; border: round $primary; }"

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield StreamView(id="left")
            yield StreamView(id="right")


def textual_bar(view: StreamView, state: str = "") -> list[tuple[str, object, object, bool]]:
    """The cells Textual's own ScrollBar widget draws for the view's scroll
    state: its render() with the view's styles, the view as its parent."""
    bar = ScrollBar(vertical=True, thickness=LineScrollView.BAR_WIDTH)
    bar._parent = view   # render() reads its colours from the parent's styles
    height = view.scrollable_content_region.height
    bar.set_reactive(ScrollBar.window_virtual_size, view.virtual_size.height)
    bar.set_reactive(ScrollBar.window_size, height)
    bar.set_reactive(ScrollBar.position, int(view.scroll_y * 8) / 8)
    bar.set_reactive(ScrollBar.mouse_over, state == "hover")
    bar.set_reactive(ScrollBar.grabbed, (0, 0) if state == "grab" else None)
    console = view.app.console
    options = console.options.update_dimensions(LineScrollView.BAR_WIDTH, height)
    lines = console.render_lines(bar.render(), options, pad=False)
    return [cell(line[0]) for line in lines]


def cell(segment: Segment) -> tuple[str, object, object, bool]:
    style = segment.style
    return (segment.text, style.color, style.bgcolor, bool(style.reverse))


def drawn_bar(view: StreamView) -> list[tuple[str, object, object, bool]]:
    """The last cells of each row the view paints: its scrollbar."""
    width = view.text_width
    cells = []
    for y in range(view.scrollable_content_region.height):
        segments = list(view.render_line(y).crop(width, width + view.bar_width))
        assert len(segments) == 1, segments
        cells.append(cell(segments[0]))
    return cells


def paints_fresh(view: StreamView) -> bool:
    """What the view paints now (Textual's cached styled rows) is what it
    paints from nothing: no row kept a scrollbar cell that changed."""
    region = Region(0, 0, view.region.width, view.region.height)
    painted = view.render_lines(region)
    view._styles_cache.clear()
    return view.render_lines(region) == painted


async def stream(pilot, view: StreamView, lines: int) -> None:
    view.start_answer()
    for index in range(lines):
        view.append(f"line {index}\n\n")
        if index % 9 == 0:
            await pilot.pause(0.002)
    view.end_answer()
    await settle(pilot, view)   # the bar's last move, once the growth stopped, included


@settings(max_examples=400, deadline=None)
@given(size=st.integers(0, 60), virtual=st.integers(0, 5000), window=st.integers(0, 80),
       position=st.integers(0, 40000).map(lambda p: p / 8))
def test_bar_cells_are_where_textuals_render_bar_puts_them(size, virtual, window, position):
    position = min(position, max(0.0, float(virtual - window)))
    ours = bar_cells(size, virtual, window if window < virtual else 0, position)
    theirs = ScrollBarRender.render_bar(size=size, virtual_size=virtual,
                                        window_size=window if window < virtual else 0,
                                        position=position, thickness=1, vertical=True).segments
    theirs = theirs[:size]
    assert [glyph for _, glyph in ours] == [segment.text for segment in theirs]
    actions = {"scroll_up": "up", "scroll_down": "down", "grab": "grab"}
    their_parts = [actions[segment.style.meta["@mouse.down"]] if segment.style.meta else "track"
                   for segment in theirs]
    our_parts = ["grab" if part in ("thumb", "start", "end") else part for part, _ in ours]
    assert our_parts == their_parts


async def test_bar_is_drawn_as_textuals_and_follows_the_stream():
    app = TwoViews()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one("#left", StreamView)
        for lines in (5, 40, 400):
            await stream(pilot, view, lines)
            assert view.scroll_y == view.max_scroll_y
            assert drawn_bar(view) == textual_bar(view), lines
            assert paints_fresh(view), lines
        # no scrollbar widget takes part in painting (the reason it is drawn in the rows)
        visible = app.screen._compositor.visible_widgets
        assert not [widget for widget in visible if isinstance(widget, ScrollBar)]
        top_thumb = drawn_bar(view)
        view.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        assert drawn_bar(view) == textual_bar(view)
        assert drawn_bar(view) != top_thumb
        # what reaches the screen is the same bar (Textual's styling adds nothing to it)
        region = Region(0, 0, view.region.width, view.region.height)
        painted = view.render_lines(region)
        right = view.styles.gutter.right
        assert [strip.crop(region.width - right - view.bar_width, region.width - right).text
                for strip in painted[1:-1]] == [text for text, *_ in textual_bar(view)]


async def test_pressing_the_track_pages_and_dragging_the_thumb_scrolls():
    app = TwoViews()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one("#left", StreamView)
        await stream(pilot, view, 300)
        middle = view.max_scroll_y // 2
        view.scroll_to(y=middle, animate=False, immediate=True)
        await pilot.pause()
        height = view.scrollable_content_region.height
        bar_x = view.content_region.x + view.text_width   # screen column of the bar
        top = view.content_region.y
        _, actions = view._bar_rows()
        thumb = actions.index("grab")
        assert 0 < thumb and actions[-1] == "scroll_down"
        # above the thumb: a page up; below it: a page down (as Textual's bar does)
        await pilot.click(offset=(bar_x, top))
        await pilot.wait_for_scheduled_animations()
        assert view.scroll_y == middle - height
        await pilot.click(offset=(bar_x + 1, top + height - 1))
        await pilot.wait_for_scheduled_animations()
        assert view.scroll_y == middle
        # drag the thumb down by a few rows: the view moves in proportion
        await pilot.mouse_down(offset=(bar_x, top + thumb))
        assert view._bar_grab is not None
        await pilot.pause()
        assert drawn_bar(view) == textual_bar(view, "grab")
        assert paints_fresh(view)
        await pilot.hover(offset=(bar_x, top + thumb + 3))
        await pilot.pause()
        expected = middle + 3 * view.virtual_size.height / height
        assert abs(view.scroll_y - min(view.max_scroll_y, expected)) <= 1
        await pilot.mouse_up(offset=(bar_x, top + thumb + 3))
        await pilot.pause()
        assert view._bar_grab is None
        assert paints_fresh(view)
        # the press started no text selection
        assert not app.screen.selections
        # the text beside the bar is still the text's: a press there is no scroll
        before = view.scroll_y
        await pilot.click(offset=(view.content_region.x + 2, top + 2))
        await pilot.pause()
        assert view.scroll_y == before


async def test_bar_takes_the_hover_colours_under_the_pointer():
    app = TwoViews()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one("#left", StreamView)
        await stream(pilot, view, 200)
        normal = drawn_bar(view)
        bar_x = view.content_region.x + view.text_width
        await pilot.hover(offset=(bar_x, view.content_region.y + 3))
        await pilot.pause()
        assert drawn_bar(view) == textual_bar(view, "hover")
        assert paints_fresh(view)
        if view.styles.scrollbar_background_hover != view.styles.scrollbar_background:
            assert drawn_bar(view) != normal
        await pilot.hover(offset=(view.content_region.x + 2, view.content_region.y + 3))
        await pilot.pause()
        assert drawn_bar(view) == normal
        assert paints_fresh(view)


async def test_bar_follows_the_reader_at_once_while_the_text_grows():
    """While text streams in the thumb moves at most every BAR_INTERVAL when
    the view follows it; a reader who scrolled up sees it move with them."""
    app = TwoViews()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one("#left", StreamView)
        await stream(pilot, view, 300)
        view.start_answer()
        view.scroll_to(y=10, animate=False, immediate=True)
        await pilot.pause()
        for step in range(1, 6):
            view.append(f"more {step}\n\n")
            await pilot.pause(0.03)        # a flush: the content grows
            view.scroll_to(y=10 + 40 * step, animate=False, immediate=True)
            await pilot.pause()
            assert drawn_bar(view) == textual_bar(view), step
            assert paints_fresh(view), step
        view.end_answer()
        await settle(pilot, view)
