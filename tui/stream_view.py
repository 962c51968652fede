"""StreamView: one pane's whole conversation, streamed fast with the Line API.

Why this shape: re-rendering a growing
Markdown document per token is quadratic, and Textual's Markdown widget pays
for one child widget per block. Here the stream is split at Markdown block
boundaries outside code fences (`tui.markdown_blocks`); each finished
block is rendered once (`block_render`: rich Markdown, highlighted code) into
Strips cached at the current width (`lean_strip`); only the small unfinished
tail is re-rendered, on a timer. Only visible lines are painted
(``render_line``). A width change makes cached blocks stale: the
visible ones are re-rendered at once, the rest in the background, with the
scroll position anchored to the block at the top of the view.

Six streaming panes flush together on one clock (`flush_clock`), and the
painting that follows the growth cheaply is in `line_scroll_view`.

Model output is untrusted: it is never parsed as Rich/Textual markup, and
escape sequences, control and bidi-override characters are replaced by
visible stand-ins (`core.ground.text.neutralise`) before anything is rendered.

Why this file is past 600 lines: it is one widget whose parts all share the
block list, the unfinished tail and the scroll position (buffered ops and
their splitting, layout across width changes with the view anchored, lazy
and background re-rendering, following the bottom); what stands alone has
its own module (above).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.style import Style
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from tui.markdown_blocks import BlockSplitter, Piece, fenced_code_blocks
from core.ground.text import neutralise
from tui.block_render import estimate_height, render_piece
from tui.flush_clock import FlushClock
from tui.line_scroll_view import LineScrollView
from tui.lean_strip import blank_line
from tui.tail_render import TailRender

__all__ = ["StreamView"]


# ---------------------------------------------------------------------------
# Conversation bookkeeping (raw text, for copy)

@dataclass
class _Answer:
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)

    def joined(self) -> str:
        if len(self.text) > 1:
            self.text[:] = ["".join(self.text)]
        return self.text[0] if self.text else ""


class _Block:
    __slots__ = ("piece", "gap", "hidden_kind", "strips", "width", "height")

    def __init__(self, piece: Piece, gap: bool, width: int) -> None:
        self.piece = piece
        self.gap = gap
        self.hidden_kind = piece.kind == "reasoning"
        self.strips: list[Strip] | None = None
        self.width = -1  # the width `height` is exact for; -1: an estimate
        self.height = estimate_height(piece, width, gap)


# ---------------------------------------------------------------------------
# The widget

_UNKNOWN = object()  # a row whose block is not rendered yet (_visible_rows)

_FALLBACK_CONSOLE = Console(width=80, color_system="truecolor", force_terminal=False,
                            legacy_windows=False)


class StreamView(LineScrollView, can_focus=True):
    """One pane's conversation: user prompts, streamed answers, reasoning, notes.

    Text deltas are only buffered on ``append``; a flush (at most every
    ``FLUSH_INTERVAL`` seconds, at once when idle) splits them into blocks,
    renders the tail and repaints. Follows the bottom while streaming unless
    the user has scrolled up (scrolling back to the bottom resumes it).
    """

    DEFAULT_CSS = """
    StreamView {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        overflow-x: hidden;
    }
    """

    FLUSH_INTERVAL = 0.025  # p95 display lag < 33 ms at 6 x 300 tokens/s; a tick of six panes ~5 ms of CPU
    CACHED_LINES = 30_000  # rendered lines kept; others are re-rendered (height known) on view
    BACKGROUND_INTERVAL = 0.05
    BACKGROUND_BUDGET = 0.01
    BACKGROUND_QUIET = 0.25  # background re-rendering waits while text keeps arriving

    show_reasoning: reactive[bool] = reactive(True, init=False)

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None, disabled: bool = False) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self._answers: list[_Answer] = []
        self._open: _Answer | None = None
        self._ops: list[tuple[str, str | None]] = []
        self._reset_display()
        self._flush_timer: Timer | None = None  # a flush waits on the shared clock (its timer)
        self._flush_queued = False
        self._last_flush = 0.0           # when the last flush ended
        self._last_flush_start = 0.0     # and began: flushes start an interval apart
        self._interval = self.FLUSH_INTERVAL
        self._bg_timer: Timer | None = None
        self._base_style: Style | None = None    # self.rich_style, computed once
        self._strip_style: Style | None = None   # the style cached strips carry
        self._paint: tuple[int, int] | None = None
        self._blank: tuple[int, Style | None, Strip] | None = None  # _blank_line

    def _reset_display(self) -> None:
        self._blocks: list[_Block] = []
        self._starts: list[int] = []
        self._total = 0
        self._relayout_from: int | None = None
        self._splitter: BlockSplitter | None = None
        self._new_entry = True
        self._tail: list[Strip] = []
        self._tail_piece: Piece | None = None
        self._tail_render = TailRender()
        self._tail_successor: tuple[int, _Block] | None = None   # the block the shown tail became, at its index
        self._tail_dirty = False
        self._width = 0
        self._follow = True
        self._anchor: tuple[int, int] | None = None
        self._prompt_blocks: list[int] = []          # each user message's first block
        self._open_at_prompt: int | None = None      # `show_from_prompt`, done at the next flush
        self._fix_scheduled = False
        self._cache: OrderedDict[int, int] = OrderedDict()  # id(block) -> lines, LRU
        self._cache_blocks: dict[int, _Block] = {}
        self._cached_lines = 0
        self._stale = 0
        self._painted: tuple[int, int, int, list[object]] | None = None  # _refresh_changed

    # ----------------------------------------------------------------- API
    def add_user(self, text: str) -> None:
        """A user prompt entry (plain text, styled distinctly)."""
        self._open = None
        self._ops.append(("user", text))
        self._flush_soon(now=True)

    def add_note(self, text: str) -> None:
        """A plain status line of its own (between a prompt and its answer)."""
        self._open = None
        self._ops.append(("note", text))
        self._flush_soon(now=True)

    def start_answer(self) -> None:
        """Begin a new assistant answer."""
        self._open = _Answer()
        self._answers.append(self._open)
        self._ops.append(("start", None))

    def append(self, text: str) -> None:
        """Answer text delta: buffered, rendered on the next flush."""
        if not text:
            return
        if self._open is None:
            self.start_answer()
        self._open.text.append(text)  # type: ignore[union-attr]
        self._ops.append(("md", text))
        self._flush_soon()

    def append_reasoning(self, text: str) -> None:
        """Reasoning delta, shown dimmed in its own block when ``show_reasoning``."""
        if not text:
            return
        if self._open is None:
            self.start_answer()
        self._open.reasoning.append(text)  # type: ignore[union-attr]
        self._ops.append(("reasoning", text))
        self._flush_soon()

    def add_tool(self, line: str) -> None:
        """A tool call or result line inside the open answer (plain text, its
        own bar: an answer's Markdown cannot produce it). Text after it starts
        a new block."""
        if self._open is None:
            self.start_answer()
        answer = self._open
        if answer is not None and answer.text and answer.text[-1] != "\n\n":
            answer.text.append("\n\n")   # a copied answer keeps its steps' texts apart
        self._ops.append(("tool", line))
        self._flush_soon()

    def end_answer(self, note: str | None = None) -> None:
        """Finish the answer (flush the tail); ``note`` is a plain status line."""
        self._open = None
        self._ops.append(("end", note))
        self._flush_soon(now=True)

    def set_conversation(self, entries: list[tuple[str, str]]) -> None:
        """Bulk load (replay): ("user"|"assistant"|"reasoning"|"tool"|"note", text) entries.

        Reasoning and text that follow each other form one answer; a second
        "assistant" entry starts a new answer, unless a "tool" line (a call or
        a result, inside the answer) came between; a "note" ends the open answer.
        Only what is visible is rendered now; the rest in the background.
        """
        self.clear()
        tool_since = False   # a tool line since the open answer's text: more text continues it
        for role, text in entries:
            if role == "user":
                self.add_user(text)
            elif role == "assistant":
                if self._open is None or (self._open.text and not tool_since):
                    self.start_answer()
                tool_since = False
                self.append(text)
            elif role == "tool":
                self.add_tool(text)
                tool_since = True
            elif role == "reasoning":
                if self._open is None or (self._open.text and not tool_since):
                    self.start_answer()
                self.append_reasoning(text)
            elif role == "note":
                if self._open is not None:
                    self.end_answer(text)
                else:
                    self._ops.append(("note", text))
            else:
                raise ValueError(f"set_conversation: unknown role {role!r}")
        if self._open is not None:
            self.end_answer()
        self._flush_soon(now=True)

    def show_from_prompt(self, index: int = 0) -> None:
        """Open on the `index`-th user message (0: the first) rather than at
        the end: a finished conversation loaded to be read from where it
        starts to matter (the vote queue's case, after its context). The view
        stops following until scrolled back to the bottom."""
        self._open_at_prompt = index
        self._flush_soon(now=True)

    def clear(self) -> None:
        """Remove everything."""
        self._answers = []
        self._open = None
        self._ops = []
        self._reset_display()
        if self._bg_timer is not None:
            self._bg_timer.stop()
            self._bg_timer = None
        if self.is_mounted:
            self.virtual_size = Size(0, 0)
            self.scroll_to(y=0, animate=False)
            self.refresh()

    def answer_text(self, index: int = -1) -> str:
        """Raw text of an answer (as received: never print it to a terminal
        unneutralised; copying to the clipboard is fine). IndexError if none."""
        return self._answers[index].joined()

    def reasoning_text(self, index: int = -1) -> str:
        """Raw reasoning text of an answer."""
        return "".join(self._answers[index].reasoning)

    @property
    def answer_count(self) -> int:
        return len(self._answers)

    def last_code_block(self, index: int = -1) -> str | None:
        """Content of the last fenced code block of an answer, or None."""
        blocks = fenced_code_blocks(self.answer_text(index))
        return blocks[-1] if blocks else None

    def plain_text(self) -> str:
        """Everything shown (after pending deltas are flushed), as plain text."""
        self._flush()
        width = self._width or 80
        out: list[str] = []
        for index, block in enumerate(self._blocks):
            if block.hidden_kind and not self.show_reasoning:
                continue
            strips = self._strips_for(index, width, schedule_fix=self.is_mounted)
            out.extend(strip.text.rstrip() for strip in strips)
        if self._splitter is not None:
            self._tail_piece = self._splitter.tail()
            if self._tail_piece is not None and not self._tail_hidden():
                tail = render_piece(self._render_console(), self._tail_piece, width, self._tail_gap())
                out.extend(strip.text.rstrip() for strip in tail)
        return "\n".join(out)

    # ------------------------------------------------------------ scheduling
    def _flush_soon(self, now: bool = False) -> None:
        """Flush at once (``now``, or when the last flush is an interval old),
        else at the next tick of the app's shared flush clock, so that all
        streaming panes flush together and the screen paints once for them."""
        if not self.is_mounted or self._flush_queued:
            return
        if now:
            self._leave_clock()
            self._flush_queued = True
            self.call_later(self._flush)
            return
        if self._flush_timer is not None:
            return
        at = self._last_flush_start + self._interval
        if at <= time.perf_counter():
            self._flush_queued = True
            self.call_later(self._flush)
        else:
            self._flush_timer = FlushClock.of(self.app, self.FLUSH_INTERVAL).request(self, at)

    def _leave_clock(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer = None
            FlushClock.of(self.app, self.FLUSH_INTERVAL).cancel(self)

    def on_mount(self) -> None:
        super().on_mount()
        if self._ops:
            self._flush_soon(now=True)

    def on_resize(self) -> None:
        self._flush_soon(now=True)

    def watch_show_reasoning(self, show: bool) -> None:
        if not self._blocks and self._tail_piece is None:
            return
        self._capture_anchor()
        for index, block in enumerate(self._blocks):
            if block.hidden_kind:
                self._relayout_from = index if self._relayout_from is None else min(
                    self._relayout_from, index)
                break
        self._tail_dirty = True
        self._flush_soon(now=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._follow = round(new_value) >= self.max_scroll_y

    def _follow_to(self, y: int) -> None:
        """Scroll to `y` to follow the stream: what ``scroll_to(y=y, animate=False)``
        does for a view that paints itself (no children to move), without the
        round trip through reactive validation and watchers at every flush;
        the scrollbar, drawn in the rows, moves with the repaint."""
        if not 0 <= y <= self.max_scroll_y:
            self.scroll_to(y=y, animate=False)
            return
        old = self.scroll_y
        self.set_reactive(Widget.scroll_target_y, float(y))
        self.set_reactive(Widget.scroll_y, float(y))
        if round(old) != y:
            self.refresh(self.size.region)

    # --------------------------------------------------------------- flushing
    def _render_console(self) -> Console:
        try:
            return self.app.console
        except Exception:  # not running in an app (plain_text on a bare widget)
            return _FALLBACK_CONSOLE

    def _flush(self) -> None:
        """Process buffered ops, render the tail and what became visible, repaint."""
        self._leave_clock()
        self._flush_queued = False
        started = self._last_flush_start = time.perf_counter()
        width = self.text_width if self.is_mounted else 0
        if width <= 0:
            if self._width:
                width = self._width
            else:
                self._process_ops(80)  # not laid out yet: split now, render once sized
                return
        if width != self._width:
            self._capture_anchor()
            self._set_width(width)
        elif not self._follow and self._anchor is None:
            self._capture_anchor()
        self._process_ops(width)
        if self._open_at_prompt is not None:     # asked for once: a message that is not there is no scroll
            if self._open_at_prompt < len(self._prompt_blocks):
                self._follow, self._anchor = False, (self._prompt_blocks[self._open_at_prompt], 0)
            self._open_at_prompt = None
        if self._tail_dirty:
            self._render_tail()
        self._ensure_visible()
        self._apply_layout()
        self._last_flush = time.perf_counter()
        # Keep the tail's share of the loop bounded when it is large.
        self._interval = min(0.25, max(self.FLUSH_INTERVAL, 4 * (self._last_flush - started)))
        if self._stale and self._bg_timer is None and self.is_mounted:
            self._bg_timer = self.set_interval(self.BACKGROUND_INTERVAL, self._background_step)

    def _process_ops(self, width: int) -> None:
        ops, self._ops = self._ops, []
        for op, text in ops:
            if op == "md" or op == "reasoning":
                if self._splitter is None or self._splitter.kind != op:
                    self._end_part()
                    self._splitter = BlockSplitter(op)
                self._splitter.feed(neutralise(text))  # type: ignore[arg-type]
                self._tail_dirty = True
            elif op == "user":
                self._end_part()
                self._new_entry = True
                self._prompt_blocks.append(len(self._blocks))
                splitter = BlockSplitter("user")
                splitter.feed(neutralise(text or ""))
                splitter.finish()
                self._add_pieces(splitter.take() or [Piece("user", "")], width)
                self._new_entry = True
            elif op == "start":
                self._end_part()
                self._new_entry = True
            elif op == "end":
                self._end_part()
                if text:
                    self._add_pieces([Piece("note", neutralise(text))], width)
                self._new_entry = True
            elif op == "note":
                self._end_part()
                self._new_entry = True
                self._add_pieces([Piece("note", neutralise(text or ""))], width)
                self._new_entry = True
            elif op == "tool":
                self._end_part()
                self._add_pieces([Piece("tool", neutralise(text or ""), gap=False)], width)
            if self._splitter is not None:
                self._add_pieces(self._splitter.take(), width)

    def _end_part(self) -> None:
        if self._splitter is not None:
            self._splitter.finish()
            self._add_pieces(self._splitter.take(), self._width or 80)
            self._splitter = None
            self._new_entry = True
            self._tail_dirty = True

    def _add_pieces(self, pieces: list[Piece], width: int) -> None:
        for piece in pieces:
            gap = bool(self._blocks) and (piece.gap or self._new_entry)
            self._new_entry = False
            block = _Block(piece, gap, width)
            if self._tail and self._tail_successor is None:
                self._tail_successor = (len(self._blocks), block)   # rendered first (`_render_tail`)
            if self._relayout_from is None:
                self._starts.append(self._total)
                self._total += self._visible_height(block)
            self._blocks.append(block)
            self._stale += 1

    def _visible_height(self, block: _Block) -> int:
        return 0 if (block.hidden_kind and not self.show_reasoning) else block.height

    def _tail_hidden(self) -> bool:
        piece = self._tail_piece
        return piece is not None and piece.kind == "reasoning" and not self.show_reasoning

    def _tail_gap(self) -> bool:
        piece = self._tail_piece
        return piece is not None and self._total > 0 and (piece.gap or self._new_entry)

    def _render_tail(self) -> None:
        self._tail_dirty = False
        if self._tail_successor is not None:
            # The block the shown tail became, before the new tail: its lines go on from the
            # tail's (`TailRender`), the same lines as rendering it whole, at the cost of the rest.
            index, block = self._tail_successor
            if index < len(self._blocks) and self._blocks[index] is block and self._width:
                self._strips_for(index, schedule_fix=False)
            self._tail_successor = None
        self._tail_piece = self._splitter.tail() if self._splitter is not None else None
        if self._tail_piece is None or self._tail_hidden() or not self._width:
            self._tail = []
        else:
            self._tail = self._tail_render.render(self._render_console(), self._tail_piece, self._width,
                                                  self._tail_gap(), self._style())

    # ----------------------------------------------------------------- layout
    def _set_width(self, width: int) -> None:
        """All cached blocks become stale: heights become estimates."""
        old = self._width
        self._width = width
        self._tail_dirty = True
        if not self._blocks:
            return
        for block in self._blocks:
            if block.width != -1:
                block.width = -1
                self._stale += 1
            block.height = estimate_height(block.piece, width, block.gap)
        self._drop_cache()
        if self._anchor is not None and old:  # the top line's offset scales with the width
            index, offset = self._anchor
            self._anchor = (index, offset * old // width)
        self._relayout_from = 0

    def _drop_cache(self) -> None:
        for block in self._cache_blocks.values():
            block.strips = None
        self._cache.clear()
        self._cache_blocks.clear()
        self._cached_lines = 0

    def _relayout(self) -> None:
        start = self._relayout_from
        if start is None:
            return
        self._relayout_from = None
        starts = self._starts
        del starts[start:]
        if start > 0:
            y = starts[start - 1] + self._visible_height(self._blocks[start - 1])
        else:
            y = 0
        show = self.show_reasoning
        for block in self._blocks[start:]:
            starts.append(y)
            if show or not block.hidden_kind:
                y += block.height
        self._total = y

    def _block_at(self, y: int) -> int:
        return bisect_right(self._starts, y) - 1

    def _capture_anchor(self) -> None:
        """Remember which block line is at the top, to keep it there across relayouts."""
        if self._anchor is not None or self._follow or not self._blocks:
            return
        self._relayout()
        y = round(self.scroll_y)
        if y >= self._total:
            return
        index = max(0, self._block_at(y))
        self._anchor = (index, y - self._starts[index])

    def _strips_for(self, index: int, width: int | None = None,
                    schedule_fix: bool = True, keep: bool = True) -> list[Strip]:
        block = self._blocks[index]
        width = width or self._width
        key = id(block)
        if block.strips is not None and block.width == width:
            self._cache.move_to_end(key)
            return block.strips
        if block.width != width and schedule_fix and not self._follow:
            self._capture_anchor()
        successor = self._tail_successor is not None and self._tail_successor[1] is block
        if successor and width == self._width:
            strips = self._tail_render.render(self._render_console(), block.piece, width, block.gap, self._style())
        else:
            strips = render_piece(self._render_console(), block.piece, width, block.gap, self._style())
        if successor:
            self._tail_successor = None
        if block.width != width:
            if width == self._width:
                self._stale -= 1
            if block.height != len(strips):
                block.height = len(strips)
                self._relayout_from = index if self._relayout_from is None else min(
                    self._relayout_from, index)
                if schedule_fix and not self._fix_scheduled and self.is_mounted:
                    self._fix_scheduled = True
                    self.call_after_refresh(self._fix_layout)
            block.width = width
        if width == self._width and (keep or self._cached_lines + len(strips) <= self.CACHED_LINES):
            block.strips = strips
            self._cache[key] = len(strips)
            self._cache_blocks[key] = block
            self._cached_lines += len(strips)
            self._evict()
        return strips

    def _evict(self) -> None:
        while self._cached_lines > self.CACHED_LINES and len(self._cache) > 1:
            key, lines = self._cache.popitem(last=False)
            self._cache_blocks.pop(key).strips = None
            self._cached_lines -= lines

    def _ensure_visible(self) -> None:
        """Render stale blocks that will be on screen (bottom when following,
        else from the anchored block down)."""
        if not self._blocks:
            return
        self._relayout()
        view = max(1, self.scrollable_content_region.height) if self.is_mounted else 24
        show = self.show_reasoning

        def render(index: int) -> int:
            block = self._blocks[index]
            if block.hidden_kind and not show:
                return 0
            if block.width != self._width:
                self._strips_for(index, schedule_fix=False)
            return block.height

        if self._follow or self._anchor is None:
            if self._follow:
                need = view - len(self._tail)
                index = len(self._blocks) - 1
            else:
                top = round(self.scroll_y)
                index = max(0, self._block_at(min(top, max(0, self._total - 1))))
                need = view + top - self._starts[index]
                self._anchor = (index, top - self._starts[index])
                self._fill_down(index, need, render)
                return
            while need > 0 and index >= 0:
                need -= render(index)
                index -= 1
        else:
            index, offset = self._anchor
            index = min(index, len(self._blocks) - 1)
            self._fill_down(index, view + offset, render)

    def _fill_down(self, index: int, need: int, render: Callable[[int], int]) -> None:
        first = index
        while need > 0 and index < len(self._blocks):
            need -= render(index)
            index += 1
        need -= len(self._tail)
        index = first - 1
        while need > 0 and index >= 0:  # near the end: the view shows blocks above too
            need -= render(index)
            index -= 1

    def _apply_layout(self) -> None:
        """Relayout, set the virtual size, restore the scroll position, repaint."""
        self._relayout()
        height = self._total + len(self._tail)
        if not self.is_mounted:
            self._anchor = None
            return
        self._set_virtual_size(Size(self._width, height))
        if self._follow:
            target = max(0, height - self.scrollable_content_region.height)
            if round(self.scroll_y) != target:
                self._follow_to(target)
            self._follow = True
        elif self._anchor is not None:
            index, offset = self._anchor
            if index < len(self._blocks):
                block = self._blocks[index]
                y = self._starts[index] + min(offset, max(0, self._visible_height(block) - 1))
                if round(self.scroll_y) != y:
                    self.scroll_to(y=y, animate=False)
        self._anchor = None
        self._refresh_changed()
        self._refresh_bar()  # after scrolling: the thumb is drawn where it ends up

    def _visible_rows(self, top: int, height: int) -> list[object]:
        """What each row of the view shows: a Strip, None (blank) or _UNKNOWN
        (a block not rendered at this width yet: painting will render it)."""
        rows: list[object] = []
        blocks, starts, total, tail = self._blocks, self._starts, self._total, self._tail
        width = self._width
        index = self._block_at(top) if blocks and top < total else -1
        count = len(blocks)
        for line in range(top, top + height):
            if line >= total:
                offset = line - total
                rows.append(tail[offset] if offset < len(tail) else None)
                continue
            while index + 1 < count and starts[index + 1] <= line:
                index += 1
            if index < 0:
                rows.append(None)
                continue
            block = blocks[index]
            strips = block.strips
            if strips is None or block.width != width:
                rows.append(_UNKNOWN)
                continue
            offset = line - starts[index]
            rows.append(strips[offset] if offset < len(strips) else None)
        return rows

    def _refresh_changed(self) -> None:
        """Repaint the rows whose content changed since the last layout, not the pane.

        A refresh of the whole widget repaints every row of it (and its border);
        when the view did not scroll, a flush usually changes only the last
        rows of the tail, and nothing at all when the reader has scrolled up.
        A scroll repaints the whole view (as Textual's watch_scroll_y does).
        """
        region = self.scrollable_content_region
        top = self.scroll_offset.y
        rows = self._visible_rows(top, region.height)
        old = self._painted
        self._painted = (top, self._width, region.width, rows)
        if (old is None or old[1] != self._width or old[2] != region.width
                or len(old[3]) != len(rows)):
            self.refresh()
            return
        if old[0] != top:
            self.refresh(self.size.region)
            return
        first = last = -1
        for y, (was, now) in enumerate(zip(old[3], rows, strict=True)):
            if was is now and now is not _UNKNOWN:
                continue
            if (was is not None and now is not None and was is not _UNKNOWN
                    and now is not _UNKNOWN and was == now):
                continue  # a re-rendered tail line that came out the same
            if first < 0:
                first = y
            last = y
        if first >= 0:
            self.refresh(Region(0, first, max(self.virtual_size.width, self.size.width),
                                last - first + 1))

    def _fix_layout(self) -> None:
        self._fix_scheduled = False
        self._apply_layout()

    def _background_step(self) -> None:
        """Render stale blocks (newest first) in small slices; stop when none left."""
        if self._stale <= 0 or not self._width:
            if self._bg_timer is not None:
                self._bg_timer.stop()
                self._bg_timer = None
            self._stale = max(0, self._stale)
            return
        if self._ops or time.perf_counter() - self._last_flush < self.BACKGROUND_QUIET:
            return  # streaming: each layout change here would repaint the pane
        deadline = time.perf_counter() + self.BACKGROUND_BUDGET
        self._capture_anchor()
        rendered = 0
        for index in range(len(self._blocks) - 1, -1, -1):
            block = self._blocks[index]
            if block.width == self._width:
                continue
            # Only the height is needed; the strips are kept while the cache has room
            # (so background work never evicts what is on screen).
            self._strips_for(index, schedule_fix=False, keep=False)
            rendered += 1
            if time.perf_counter() > deadline:
                break
        else:
            self._stale = 0
        if rendered:
            self._apply_layout()
        else:
            self._anchor = None

    # -------------------------------------------------------------- painting
    def _style(self) -> Style | None:
        """The base style cached strips are built with (``rich_style``, once).

        When it changes (theme, CSS), strips built with the old one are dropped
        and re-rendered as they are painted; heights do not change.
        """
        style = self._base_style
        if style is None:
            if not self.is_mounted:
                return self._strip_style
            style = self._base_style = self.rich_style  # computing it walks the DOM: once
            if style != self._strip_style:
                self._strip_style = style
                self._drop_cache()
                if self._tail_piece is not None:
                    self._render_tail()
        return style

    def render_lines(self, crop: Region) -> list[Strip]:
        # Geometry once per paint, not once per line (each lookup walks styles).
        self._paint = (self.scroll_offset.y, self.text_width)
        self._style()
        try:
            return super().render_lines(crop)
        finally:
            self._paint = None

    def _content_line(self, y: int) -> Strip:
        """The line at row `y` of the view (LineScrollView.render_line)."""
        paint = self._paint
        if paint is None:
            scroll_y, width = self.scroll_offset.y, self.text_width
        else:
            scroll_y, width = paint
        line = scroll_y + y
        strip: Strip | None = None
        if line >= self._total:
            offset = line - self._total
            if offset < len(self._tail):
                strip = self._tail[offset]
        elif self._blocks:
            # Heights changed by lazy renders in this paint are laid out after it
            # (_fix_layout), with the top line anchored.
            index = self._block_at(line)
            if index >= 0:
                strips = self._strips_for(index)
                offset = line - self._starts[index]
                if offset < len(strips):
                    strip = strips[offset]
        # Cached strips already carry the base style (_render_piece).
        if strip is None:
            return self._blank_line(width)
        if strip.cell_length != width:
            strip = strip.crop_extend(0, width, self._strip_style)
        return strip

    def _blank_line(self, width: int) -> Strip:
        """One blank line object per width and style: a row that stays blank
        across a scroll keeps its styled line (LineScrollView._reuse_moved_lines)."""
        style = self._style()
        blank = self._blank
        if blank is None or blank[0] != width or blank[1] is not style:
            blank = self._blank = (width, style, blank_line(width, style))
        return blank[2]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base_style = None
