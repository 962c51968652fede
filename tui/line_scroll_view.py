"""LineScrollView: a ScrollView painted from cached lines, cheap to follow as it grows.

Why this module exists: painting a streaming pane through Textual's generic
paths cost more than rendering the text. Assigning `virtual_size` relayouts
the whole screen; each scrollbar update repaints the bar's whole height; and
Textual caches styled lines (border, padding) by row, so a view that scrolls
by one line restyles every row. This base class grows the virtual size
without a relayout, repaints the scrollbar at most a few times a second and
only when its thumb would be drawn differently, and lets rows that a scroll
only moved keep their styled lines. Those are the places where the stream
view relies on Textual internals (besides `lean_strip`); they are kept here,
each with a fallback, and tests/test_stream_view.py checks them.

A subclass implements `_content_line(y)`: the line at row `y` of the view.
"""

from __future__ import annotations

import time

from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.timer import Timer

__all__ = ["LineScrollView"]


class LineScrollView(ScrollView):
    """A ScrollView of lines (the Line API) for content that keeps growing."""

    SCROLLBAR_INTERVAL = 0.25  # at most this often a scrollbar repaint while growing
    SCROLLBAR_SETTLE = 0.1     # after the growth stops, the last one comes this much later

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None, disabled: bool = False) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self._paint_lines: dict[int, Strip] | None = None  # content row -> line, in a paint
        self._line_sources: dict[int, Strip] = {}  # widget row -> line last styled there
        self._scrollbar_at = 0.0
        self._scrollbar_timer: Timer | None = None
        self._thumb_drawn: list | None = None  # the scrollbar thumb last drawn (_thumb_unchanged)

    def _content_line(self, y: int) -> Strip:
        """The line at row `y` of the view (the subclass's `render_line`)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- growing
    def _set_virtual_size(self, size: Size) -> bool:
        """Grow the scrollable area without a screen relayout; True when the
        scrollbar is left to `_schedule_scrollbar`.

        Assigning `virtual_size` relayouts (and fully repaints) the whole
        screen: at 20 flushes a second in six panes that was the dominant cost.
        With a fixed-size pane and a vertical scrollbar that is always shown,
        only the scrollbar and scroll limits depend on it.
        """
        if size == self.virtual_size:
            return False
        height = self.styles.height
        scroll_update = getattr(self, "_scroll_update", None)
        if (scroll_update is None or (height is not None and height.is_auto)
                or self.styles.overflow_y != "scroll"):
            self.virtual_size = size
            return False
        self.set_reactive(LineScrollView.virtual_size, size)
        return True

    def _schedule_scrollbar(self) -> None:
        """The scrollbar repaints its whole height on each update: at most 4 a second,
        inside a flush while text streams (so it paints with the panes), and only
        when the thumb would be drawn differently."""
        now = time.perf_counter()
        if now - self._scrollbar_at >= self.SCROLLBAR_INTERVAL:
            self._update_scrollbar()
        elif self._scrollbar_timer is None:
            # For when the stream stops; while it flows, a flush comes first.
            self._scrollbar_timer = self.set_timer(
                self._scrollbar_at + self.SCROLLBAR_INTERVAL + self.SCROLLBAR_SETTLE - now,
                self._update_scrollbar)

    def _update_scrollbar(self) -> None:
        if self._scrollbar_timer is not None:
            self._scrollbar_timer.stop()
            self._scrollbar_timer = None
        self._scrollbar_at = time.perf_counter()
        if self.show_vertical_scrollbar and self._thumb_unchanged():
            return
        self._scroll_update(self.virtual_size)
        if self.show_vertical_scrollbar:
            self.vertical_scrollbar.position = self.scroll_y

    def _thumb_unchanged(self) -> bool:
        """Whether the vertical scrollbar would be drawn as it is now; if so its
        state is updated without a repaint (a long answer's thumb moves by an
        eighth of a cell only every few dozen lines).

        Only for growth: a shrinking content also clamps the scroll position,
        which `_scroll_update` does.
        """
        bar = self.vertical_scrollbar
        virtual = self.virtual_size.height
        window = self.container_size.height - self.scrollbar_size_horizontal
        if virtual < bar.window_virtual_size or window != bar.window_size:
            return False
        position = int(self.scroll_y * 8) / 8  # ScrollBar.validate_position
        size = bar.size
        drawn = bar.renderer.render_bar(
            size=size.height, virtual_size=virtual,
            window_size=window if window < virtual else 0, position=position,
            thickness=size.width, vertical=True).segments
        unchanged = drawn == self._thumb_drawn
        self._thumb_drawn = drawn
        if unchanged:
            bar.set_reactive(ScrollBar.window_virtual_size, virtual)
            bar.set_reactive(ScrollBar.position, position)
        return unchanged

    # ---------------------------------------------------------------- painting
    def render_lines(self, crop: Region) -> list[Strip]:
        self._paint_lines = {}
        try:
            self._reuse_moved_lines(crop)
            return super().render_lines(crop)
        finally:
            self._remember_sources(crop)
            self._paint_lines = None

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
            strip = self._content_line(y)
            painted[y] = strip
            return strip
        return self._content_line(y)
