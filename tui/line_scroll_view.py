"""LineScrollView: a ScrollView painted from cached lines, cheap to follow as it grows.

Why this module exists: painting a streaming pane through Textual's generic
paths cost more than rendering the text. Assigning `virtual_size` relayouts
the whole screen; Textual's scrollbar is a widget of its own, and every
widget beside a changed row costs the compositor a render and a cut of each
row (six panes' scrollbars were half of each paint); and Textual caches
styled lines (border, padding) by row, so a view that scrolls by one line
restyles every row. This base class grows the virtual size without a
relayout, draws its vertical scrollbar in its own lines (the look and the
mouse handling of Textual's, `_bar_rows`), and lets rows that a scroll only
moved keep their styled lines. Those are the places where the stream view
relies on Textual internals (besides `lean_strip`); they are kept here, each
with a fallback, and tests/test_stream_view.py and test_line_scroll_view.py
check them.

A subclass implements `_content_line(y)`: the line at row `y` of the view,
`text_width` cells wide.
"""

from __future__ import annotations

import time
from math import ceil
from typing import NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBarRender
from textual.strip import Strip
from textual.timer import Timer

from tui.lean_strip import LeanStrip, lean

__all__ = ["LineScrollView", "bar_cells"]

class _BarKey(NamedTuple):
    """What the bar's drawing depends on (`_bar_rows`)."""

    height: int
    virtual: int
    window: int
    position: float
    state: str          # "", "hover" or "grab"


_BAR_ACTIONS = {"up": "scroll_up", "down": "scroll_down", "track": "",
                "thumb": "grab", "start": "grab", "end": "grab"}


def bar_cells(size: int, virtual: float, window: float, position: float) -> list[tuple[str, str]]:
    """A vertical scrollbar of `size` rows as (part, glyph) per row, where it
    would put Textual's ScrollBarRender.render_bar: the track above the thumb
    ("up"), the thumb ("thumb", with eighth-cell ends "start" and "end"), the
    track below ("down"), or all "track" when nothing scrolls.

    Computed here, not by render_bar, because that builds styles carrying
    mouse actions for every cell (~0.15 ms a bar, on every flush of every
    pane); tests/test_line_scroll_view.py checks that both draw the same bars.
    """
    bars = ScrollBarRender.VERTICAL_BARS
    blank = ScrollBarRender.BLANK_GLYPH
    steps = len(bars)
    if not (window and size and virtual and size != virtual):
        return [("track", blank)] * size
    thumb = max(1, window / (virtual / size))
    offset = (size - thumb) * (position / (virtual - window))
    start = int(offset * steps)
    end = start + ceil(thumb * steps)
    start_row, start_step = divmod(max(0, start), steps)
    end_row, end_step = divmod(max(0, end), steps)
    cells = [("up", blank)] * size
    cells[end_row:] = [("down", blank)] * (size - end_row)
    cells[start_row:end_row] = [("thumb", blank)] * (end_row - start_row)
    if start_row < len(cells) and (glyph := bars[steps - 1 - start_step]) != " ":
        cells[start_row] = ("start", glyph)
    if end_row < len(cells) and (glyph := bars[steps - 1 - end_step]) != " ":
        cells[end_row] = ("end", glyph)
    return cells[:size]


class LineScrollView(ScrollView):
    """A ScrollView of lines (the Line API) for content that keeps growing."""

    BAR_WIDTH = 2        # the vertical scrollbar drawn in the lines: Textual's default thickness
    BAR_INTERVAL = 0.25  # while the content grows the thumb moves at most this often
    BAR_SETTLE = 0.05    # and once more this long after that, to where it ends up

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None, disabled: bool = False) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self.styles.scrollbar_size_vertical = 0   # no ScrollBar widget: the bar is in the rows
        self._paint_lines: dict[int, Strip] | None = None  # content row -> line, in a paint
        self._line_sources: dict[int, Strip] = {}  # widget row -> line last styled there
        self._painted_top = -1   # the scroll offset of the last paint
        self._bar: tuple[_BarKey, list[Segment], list[str]] | None = None  # key, rows, actions
        self._bar_shown: list[Segment] = []   # the bar rows as last painted or refreshed
        self._bar_glyphs: dict[Segment, Segment] = {}  # one object per drawn bar cell
        # (line, bar cell) -> that line with that cell, for the lines on screen
        self._bar_lines: dict[tuple[int, int], tuple[Strip, Segment, Strip]] = {}
        self._leaned: dict[int, tuple[Strip, Strip]] = {}   # id(styled line) -> (it, its lean strip)
        self._bar_style_cache: dict[str, dict[str, Style]] = {}
        self._bar_at = 0.0          # when the bar was last drawn differently
        self._bar_timer: Timer | None = None
        self._bar_hover = False
        self._bar_grab: tuple[int, float] | None = None  # (screen y, scroll y) when grabbed

    def _content_line(self, y: int) -> Strip:
        """The line at row `y` of the view (the subclass's `render_line`)."""
        raise NotImplementedError

    @property
    def bar_width(self) -> int:
        """Cells the scrollbar takes at the right of each row (none unless overflow-y: scroll)."""
        return self.BAR_WIDTH if self.styles.overflow_y == "scroll" else 0

    @property
    def text_width(self) -> int:
        """Cells of a row left for the content, beside the scrollbar."""
        return max(0, self.scrollable_content_region.width - self.bar_width)

    # ----------------------------------------------------------------- growing
    def _set_virtual_size(self, size: Size) -> None:
        """Grow the scrollable area without a screen relayout.

        Assigning `virtual_size` relayouts (and fully repaints) the whole
        screen: at 20 flushes a second in six panes that was the dominant cost.
        With a fixed-size pane whose scrollbar is drawn in its own lines,
        only the scroll limits depend on it.
        """
        if size == self.virtual_size:
            return
        height = self.styles.height
        if (height is not None and height.is_auto) or self.styles.overflow_y != "scroll":
            self.virtual_size = size
            return
        self.set_reactive(LineScrollView.virtual_size, size)
        if self.scroll_y > self.max_scroll_y:  # shrunk below the view: scroll back inside
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)

    # --------------------------------------------------------------- scrollbar
    def _bar_rows(self) -> tuple[list[Segment], list[str]]:
        """The scrollbar as one segment per row, and what a press on each row
        does ("scroll_up", "grab" or "scroll_down").

        The same cells as Textual's ScrollBar widget draws (`bar_cells`, with
        the colours it picks when normal, hovered or grabbed); its mouse
        actions are handled here (`_on_mouse_down`).
        """
        height = self.scrollable_content_region.height
        virtual = self.virtual_size.height
        window = height - self.scrollbar_size_horizontal
        position = int(self.scroll_y * 8) / 8
        state = "grab" if self._bar_grab is not None else "hover" if self._bar_hover else ""
        key = _BarKey(height, virtual, window, position, state)
        bar = self._bar
        if bar is not None and (bar[0] == key or self._bar_growing(bar[0], key)):
            return bar[1], bar[2]
        self._bar_at = time.perf_counter()
        styles = self._bar_styles(state)
        shown = self.screen.styles.scrollbar_color.a != 0 if self.is_mounted else True
        cells = bar_cells(height, virtual if shown else 100,
                          window if shown and window < virtual else 0, position if shown else 0)
        glyphs = self._bar_glyphs
        if len(glyphs) > 64:
            glyphs.clear()
        rows: list[Segment] = []
        actions: list[str] = []
        thickness = self.bar_width
        for part, glyph in cells:
            cell = Segment(glyph * thickness, styles[part])
            rows.append(glyphs.setdefault(cell, cell))
            actions.append(_BAR_ACTIONS[part])
        self._bar = (key, rows, actions)
        return rows, actions

    def _bar_growing(self, drawn: _BarKey, key: _BarKey) -> bool:
        """Whether to keep the bar as drawn while the content grows: a thumb
        that moves with every flush restyles its rows on every flush, so it
        moves at most every BAR_INTERVAL then (and once more when the growth
        stops); a scroll by the reader, or a press, redraws it at once."""
        if (drawn.height, drawn.window, drawn.state) != (key.height, key.window, key.state) \
                or drawn.virtual == key.virtual:
            return False
        if drawn.position != key.position and self.scroll_y < self.max_scroll_y:
            return False   # the reader scrolled while it grows: the thumb goes with them
        wait = self._bar_at + self.BAR_INTERVAL - time.perf_counter()
        if wait <= 0:
            return False
        if self._bar_timer is None and self.is_mounted:
            self._bar_timer = self.set_timer(wait + self.BAR_SETTLE, self._bar_settle)
        return True

    def _bar_settle(self) -> None:
        self._bar_timer = None
        self._refresh_bar()

    def _bar_styles(self, state: str) -> dict[str, Style]:
        """The styles of the bar's cells, from the colours Textual's ScrollBar
        widget would use in `state` (kept until the styles change)."""
        cached = self._bar_style_cache.get(state)
        if cached is not None:
            return cached
        styles = self.styles
        if state == "grab":
            back, color = styles.scrollbar_background_active, styles.scrollbar_color_active
        elif state == "hover":
            back, color = styles.scrollbar_background_hover, styles.scrollbar_color_hover
        else:
            back, color = styles.scrollbar_background, styles.scrollbar_color
        if back.a < 1:
            back = self.background_colors[0] + back
        color = back + color
        bg, fg = back.rich_color, color.rich_color
        cached = self._bar_style_cache[state] = {
            "up": Style(bgcolor=bg), "down": Style(bgcolor=bg), "track": Style(bgcolor=bg),
            "thumb": Style(color=fg, reverse=True),
            "start": Style(bgcolor=bg, color=fg), "end": Style(bgcolor=bg, color=fg, reverse=True),
        }
        return cached

    def _bar_changes(self) -> list[int] | None:
        """The content rows whose bar cell changed since the bar was last shown
        (None: all of them), the bar now taken as shown."""
        rows, _ = self._bar_rows()
        shown, self._bar_shown = self._bar_shown, rows
        if len(shown) != len(rows):
            return None
        return [y for y, (was, now) in enumerate(zip(shown, rows, strict=True)) if was is not now]

    def _refresh_bar(self) -> None:
        """Repaint the rows whose scrollbar cell changed since it was last drawn."""
        if not self.bar_width or not self.is_mounted:
            return
        changed = self._bar_changes()
        if changed is None:
            self.refresh()
        elif changed:   # each row apart: the thumb's two ends can be far apart
            width = self.size.width
            self.refresh(*(Region(0, y, width, 1) for y in changed))   # refresh() adds the border

    def _mark_bar_rows(self) -> None:
        """In a paint: the rows whose bar cell changed since they were styled
        are styled again (the others keep Textual's styled line)."""
        changed = self._bar_changes()
        if changed is None:
            self._styles_cache.clear()
        elif changed:    # Textual's styled rows count the border
            top, width = self.styles.gutter.top, self.size.width
            self._styles_cache.set_dirty(*(Region(0, top + y, width, 1) for y in changed))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._bar = None
        self._bar_style_cache.clear()

    def _bar_row_at(self, event: events.MouseEvent) -> int | None:
        """The row of the scrollbar under the pointer, or None when it is elsewhere."""
        if not self.bar_width:
            return None
        offset = event.get_content_offset(self)
        if offset is None or offset.x < self.text_width:
            return None
        return offset.y

    async def _on_mouse_down(self, event: events.MouseDown) -> None:
        row = self._bar_row_at(event)
        if row is None:
            return
        event.prevent_default()
        event.stop()
        # A press on the bar is no start of a text selection; a selection made before stays.
        screen = self.screen
        selections = screen.selections
        screen.clear_selection()
        screen.selections = selections
        _, actions = self._bar_rows()
        action = actions[row] if row < len(actions) else ""
        if action == "scroll_up":
            self.scroll_page_up()
        elif action == "scroll_down":
            self.scroll_page_down()
        elif action == "grab":
            self._bar_grab = (event.screen_y, self.scroll_y)
            self.capture_mouse()
            self._refresh_bar()

    async def _on_mouse_move(self, event: events.MouseMove) -> None:
        grab = self._bar_grab
        if grab is not None:
            event.stop()
            window = self.scrollable_content_region.height - self.scrollbar_size_horizontal
            if window > 0:
                start_y, start_scroll = grab
                y = start_scroll + (event.screen_y - start_y) * (self.virtual_size.height / window)
                self.scroll_to(y=max(0.0, min(self.max_scroll_y, y)), animate=False, immediate=True)
            return
        hover = self._bar_row_at(event) is not None
        if hover != self._bar_hover:
            self._bar_hover = hover
            self._refresh_bar()

    async def _on_mouse_up(self, event: events.MouseUp) -> None:
        if self._bar_grab is not None:
            event.prevent_default()
            event.stop()
            self.release_mouse()
            self._bar_grab = None
            self._refresh_bar()

    def _on_mouse_release(self, event: events.MouseRelease) -> None:
        if self._bar_grab is not None:
            self._bar_grab = None
            self._refresh_bar()

    def _on_leave(self, event: events.Leave) -> None:
        if self._bar_hover:
            self._bar_hover = False
            self._refresh_bar()

    # ---------------------------------------------------------------- painting
    def render_lines(self, crop: Region) -> list[Strip]:
        self._paint_lines = {}
        if self.bar_width:
            self._mark_bar_rows()
        try:
            top = self.scroll_offset.y
            if top != self._painted_top:  # else the rows to style again are new lines
                self._painted_top = top
                self._reuse_moved_lines(crop)
            return self._lean_lines(super().render_lines(crop))
        finally:
            self._remember_sources(crop)
            self._paint_lines = None
            self._prune_bar_lines()

    def _lean_lines(self, strips: list[Strip]) -> list[Strip]:
        """The styled lines as lean strips (no cycles: `lean`), the same lean
        strip for the same styled line as in the paints before: Textual
        hands back the line it styled and kept for an unchanged row, and
        every paint of a pane covers the rows of every other pane's change
        (the compositor renders the box around all of a frame's changes)."""
        kept = self._leaned
        out = []
        for strip in strips:
            hit = kept.get(id(strip))
            if hit is None or hit[0] is not strip:
                hit = kept[id(strip)] = (strip, lean(strip))
            out.append(hit[1])
        if len(kept) > 4 * len(out) + 64:   # keep this paint's lines, drop the rest
            self._leaned = {id(hit[0]): hit for hit in (kept[id(strip)] for strip in strips)}
        return out

    def _reuse_moved_lines(self, crop: Region) -> None:
        """Give rows whose line was painted at another row last time that row's
        styled line, instead of having Textual style it again.

        Textual caches a widget's styled lines (border, padding, filters' input)
        by row, so following a stream, where every new line scrolls the view,
        restyled every row of every pane on each scroll: most of the paint CPU.
        A styled row depends only on the line painted in it and on the widget's
        styles, size and colours, and every change of those clears Textual's
        cache (there is nothing to reuse then). Relies on `StylesCache._cache`
        (row -> styled strip) and `_dirty_lines`; without them this does
        nothing (tests/test_stream_view.py checks that it still finds them).
        """
        sources = self._line_sources
        if not sources:
            return
        styles_cache = self._styles_cache
        cache = getattr(styles_cache, "_cache", None)
        dirty = getattr(styles_cache, "_dirty_lines", None)
        if type(cache) is not dict or type(dirty) is not set:
            return
        styled: dict[int, tuple[Strip, Strip]] = {}
        for y, source in sources.items():
            line = cache.get(y)
            if line is not None:
                styled[id(source)] = (source, line)
        top = self.styles.gutter.top
        height = self.content_region.height
        for y in crop.line_range:
            content_y = y - top
            if not 0 <= content_y < height or (y not in dirty and y in cache):
                continue
            source = self.render_line(content_y)
            hit = styled.get(id(source))
            if hit is not None and hit[0] is source:
                cache[y] = hit[1]
                dirty.discard(y)

    def _remember_sources(self, crop: Region) -> None:
        """Which line each row of this paint was styled from (_reuse_moved_lines)."""
        painted = self._paint_lines
        if not painted:
            return
        top = self.styles.gutter.top
        sources = self._line_sources
        for y in crop.line_range:
            source = painted.get(y - top)
            if source is not None:
                sources[y] = source

    def render_line(self, y: int) -> Strip:
        painted = self._paint_lines
        if painted is not None:
            strip = painted.get(y)
            if strip is not None:  # asked before, in _reuse_moved_lines
                return strip
            strip = self._with_bar(y, self._content_line(y))
            painted[y] = strip
            return strip
        return self._with_bar(y, self._content_line(y))

    def _with_bar(self, y: int, line: Strip) -> Strip:
        """The content line with its row's scrollbar cell, the same object for
        the same pair as in the last paint (so `_reuse_moved_lines` finds it)."""
        if not self.bar_width:
            return line
        rows = self._bar_shown if self._paint_lines is not None else self._bar_rows()[0]
        if not 0 <= y < len(rows):
            return line
        cell = rows[y]
        key = (id(line), id(cell))
        hit = self._bar_lines.get(key)
        if hit is None or hit[0] is not line or hit[1] is not cell:
            hit = (line, cell, LeanStrip([*line, cell], line.cell_length + cell.cell_length))
            if self._paint_lines is not None:
                self._bar_lines[key] = hit
        return hit[2]

    def _prune_bar_lines(self) -> None:
        """Keep the lines-with-bar of the rows on screen (a scroll moves them to
        other rows, where `_reuse_moved_lines` looks for them), drop the rest."""
        lines = self._bar_lines
        if len(lines) <= 2 * len(self._line_sources) + 16:
            return
        shown = {id(line) for line in self._line_sources.values()}
        self._bar_lines = {key: hit for key, hit in lines.items() if id(hit[2]) in shown}

