"""Re-rendering a view's unfinished tail, flush after flush, at the cost of
what changed since the last flush rather than of the whole tail.

Why a module of its own: `block_render` renders a block once; the tail is
the one block rendered again on every flush (40 times a second per pane),
and the kinds that grow large there cost most: a fenced code chunk (up
to `CODE_CHUNK_LINES` lines, lexed by pygments at ~3.5 us a character), a
Markdown table (rich's Table, ~0.4 ms a row: a 40-row table took 15 ms a
flush, and six panes streaming tables stalled the event loop for up to 200 ms)
and wrapped text: reasoning and Markdown paragraphs, up to `MAX_BLOCK_CHARS`
before they are committed. Each keeps what it rendered for its complete
lines, rows or wrapped lines and renders only the rest; every shortcut is
checked to give the lines the whole render gives (tests/test_tail_render.py
compares them flush by flush), and anything it cannot vouch for is
rendered whole, as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Paragraph
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Span, Text
from textual.strip import Strip

from tui.block_render import (_NO_LINK_ELEMENTS, _BlockMarkdown, _clean, _is_blank, _lines, prose,
                              render_piece, strips_of)
from tui.markdown_blocks import Piece
from tui.table_cells import row_cells, table_cells
from tui.text_lines import line_breaks

__all__ = ["TailRender"]


class TailRender:
    """Renders one view's unfinished tail, flush after flush.

    A table tail keeps the lines of its header and of each row, and renders
    only the rows that are new or changed since (the last one is usually
    being written), each alone at the same column widths: rich lays a row
    out from the widths alone, so the lines come out as the whole table's.
    A new row of plain text is read without a parse (`tui.table_cells`),
    and a row whose cells fit a line each is painted without a rich Table
    (`_RowPainter`, 3x cheaper). When rich would give a column another
    width (a wider cell; in a table wider than the pane, any change to how
    it shares the width out), every row is drawn again, from the cells kept. A flush that ends just after a
    new row's first pipe leaves a blank last row: it has no lines (the whole
    table's blank last line is trimmed), and the rows before it stand.

    A code tail keeps the lines it rendered for its complete lines and, on
    each flush, renders only the lines completed since and the line being
    written: lexing the whole chunk again (up to `CODE_CHUNK_LINES` lines,
    pygments at ~3.5 us a character) on every flush was a third of the CPU
    of panes streaming code. New lines are lexed on their own, which starts
    them outside any string or comment; so while the complete lines may end
    inside one that goes on (`_may_continue`), the tail is lexed whole, as
    before. What is left approximate is state that check does not know of
    (a type after a Rust `name:` at a line's end), and only in the colours
    of a chunk being written: a finished block is always rendered whole.
    A tail of wrapped text, reasoning or a Markdown paragraph, keeps its
    lines but the last two while its text begins as it did (`_Prose`): a
    paragraph is still parsed at each flush, for what a closing `**` does
    to the words before it, but only its last lines are wrapped again.

    Kept lines stay the same objects, so Textual does not style them again
    after a scroll (`LineScrollView._reuse_moved_lines`).
    """

    def __init__(self) -> None:
        self._head: tuple[tuple, str, list[Strip]] | None = None   # (how, complete lines, their lines)
        self._table: _Table | None = None
        self._not_table: tuple[tuple, str] | None = None   # (how, text) of a tail found not to be one table
        self._prose: _Prose | None = None

    def render(self, console: Console, piece: Piece, width: int, gap: bool,
               style: Style | None = None) -> list[Strip]:
        kind = piece.kind
        if kind != "md":
            self._table = None
        if kind != "code":
            self._head = None
        if kind == "code":
            self._prose = None
        if kind == "md":
            return self._render_table(console, piece, width, gap, style)
        if kind == "code":
            return self._render_code(console, piece, width, gap, style)
        return self._render_prose(console, piece, width, gap, style)

    def _render_code(self, console: Console, piece: Piece, width: int, gap: bool,
                     style: Style | None) -> list[Strip]:
        head, _, line = piece.text.rpartition("\n")
        head += "\n"   # ends the last complete line: without it an empty last line would not show
        if head == "\n" or _may_continue(head):
            self._head = None
            return render_piece(console, piece, width, gap, style)
        how = (piece.lang, piece.first, width, gap, style)
        kept = self._head
        if kept is None or kept[0] != how or not head.startswith(kept[1]):
            kept = (how, head, render_piece(console, replace(piece, text=head, last=False), width, gap, style))
        elif len(head) > len(kept[1]):
            more = replace(piece, text=head[len(kept[1]):], gap=False, first=False, last=False)
            kept = (how, head, kept[2] + render_piece(console, more, width, False, style))
        self._head = kept
        return kept[2] + render_piece(console, replace(piece, text=line, gap=False, first=False), width,
                                      False, style)

    def _render_prose(self, console: Console, piece: Piece, width: int, gap: bool,
                      style: Style | None) -> list[Strip]:
        """Plain text (reasoning, mostly), wrapped again only from its last
        lines while it grows (`_wrapped`)."""
        width = max(4, width)
        text, room, prefix, head = prose(piece, width)
        strips = self._wrapped(console, (piece.kind, piece.first, width, gap, style), text, room, width, gap,
                               style, prefix, head)
        return strips if strips is not None else render_piece(console, piece, width, gap, style)

    def _render_paragraph(self, console: Console, piece: Piece, width: int, gap: bool,
                          style: Style | None) -> list[Strip]:
        """A Markdown tail that is one paragraph: its text as rich's Markdown
        makes it (parsed again: a closing `**` restyles what came before),
        wrapped again only from its last lines (`_wrapped`)."""
        width = max(4, width)
        markdown = _BlockMarkdown(piece.text)
        text = _paragraph_text(console, markdown, width)
        strips = None if text is None else self._wrapped(console, ("md", width, gap, style), text, width, width,
                                                         gap, style, None, None)
        if strips is None:   # (what render_piece draws, from the tokens parsed here)
            self._prose = None
            return strips_of(_lines(console, markdown, width), width, gap, style)
        return strips

    def _wrapped(self, console: Console, how: tuple, text: Text, room: int, width: int, gap: bool,
                 style: Style | None, prefix: Segment | None, head: Text | None) -> list[Strip] | None:
        """The Strips `render_piece` gives for `text` wrapped in `room` cells
        (behind `prefix`, under `head`): the lines kept from the last flush
        where it still begins as it did (`_Prose.restart`), the rest wrapped
        anew. None, for a render of the whole, when it is shorter than
        `_KEPT_FROM` lines or has tabs (expanded: the offsets would not be the
        text's). Its lines are kept only where it is known where rich breaks
        them (`text_lines.line_breaks`)."""
        kept, self._prose = self._prose, None
        plain = text.plain
        if "\t" in plain or len(plain) < _KEPT_FROM * room:
            return None
        styled = _styled(text)
        at = kept.restart(text) if kept is not None and kept.how == how and _styled(kept.text) == styled else 0
        if kept is not None and at:
            start = kept.starts[at]
            rest = text[start:]
            if styled and not _styled(rest):   # drawn as the whole text is: its plain runs in a null style
                rest.spans = [Span(0, len(rest), Style.null())]
            lines = _lines(console, rest, room)
            found = _line_starts(plain[start:], room)
            if lines and found is not None and len(lines) == len(found):
                starts = [start + offset for offset in found]
                self._prose = _Prose(how, text, kept.starts[:at] + starts, kept.head,
                                     kept.lines[:at] + strips_of(lines, width, False, style, prefix))
                return self._prose.head + self._prose.lines
        head_lines = _lines(console, head, room) if head is not None else []
        lines = _lines(console, text, room)
        strips = strips_of(head_lines + lines, width, gap, style, prefix)
        found = _line_starts(plain, room)
        if lines and found is not None and len(lines) == len(found):   # (no blank line trimmed away)
            cut = len(strips) - len(lines)
            self._prose = _Prose(how, text, found, strips[:cut], strips[cut:])
        return strips

    def _render_table(self, console: Console, piece: Piece, width: int, gap: bool,
                      style: Style | None) -> list[Strip]:
        lines = piece.text.split("\n")
        if len(lines) < 2 + _TABLE_ROWS or not _DELIMITER_ROW.match(lines[1]) or "|" not in lines[1]:
            self._table = None   # not a table: no cells to read
            return self._render_paragraph(console, piece, width, gap, style)
        self._prose = None
        head, rows = "\n".join(lines[:2]), lines[2:]
        how = (max(4, width), gap, style, head)
        kept = self._table
        if kept is not None and kept.how == how:
            same = 0
            for was, now in zip(kept.rows, rows, strict=False):
                if was != now:
                    break
                same += 1
            if kept.more_rows(console, rows, same):
                return kept.strips()
        self._table = None
        memo = self._not_table
        if _WIDTHS_METHOD and not (memo and memo[0] == how and piece.text.startswith(memo[1])):
            self._table = _Table.drawn(console, how, rows)
            if self._table is not None:
                return self._table.strips()
            self._not_table = (how, piece.text)   # (what failed stays failed as the text grows)
        return render_piece(console, piece, width, gap, style)


#: Openers and closers of constructs that lexers carry from one line to the next.
_SPANNING = (('"""', '"""'), ("'''", "'''"), ("/*", "*/"), ("`", "`"))


def _may_continue(code: str) -> bool:
    """Whether `code` may end inside a string or comment that goes on to the
    next line (a triple quote, block comment or backtick string left open, in
    the order they come), or on a line continued by a backslash. Rough, and
    on the side of lexing whole: it knows nothing of the language."""
    for opener, closer in _SPANNING:
        at = code.find(opener)
        while at >= 0:
            end = code.find(closer, at + len(opener))
            if end < 0:
                return True
            at = code.find(opener, end + len(closer))
    return code.endswith("\\\n")


# --------------------------------------------------------------------------- plain text


#: Wrapped text shorter than this many lines' width is wrapped whole: keeping
#: lines would cost more than it saves (parsing and wrapping a short paragraph
#: twice, reading the breaks).
_KEPT_FROM = 4


@dataclass
class _Prose:
    """A tail of wrapped text (reasoning, a Markdown paragraph) as last
    drawn: its text, where each line it wraps into begins in it, and the
    Strips of its gap and heading and of each line.

    rich wraps a line greedily, word by word (`divide_line`): where a line
    breaks depends on the words up to the one that did not fit. So where
    the text still begins as it did, up to and including the word a kept
    line begins with, every break before stands, and so do the lines
    between (their characters and styles unchanged). Growing text keeps
    all but its last two lines; text restyled before (a `**` closed) is
    wrapped again from where it changed. Restarts are at a word's start, not
    inside a word folded over lines; tests/test_tail_render.py compares the
    lines flush by flush with wrapping the whole text."""

    how: tuple                  # (kind, ..., width, gap, style)
    text: Text
    starts: list[int]
    head: list[Strip]
    lines: list[Strip]

    def restart(self, new: Text) -> int:
        """The line to wrap `new` again from: the last but one, or the
        nearest before it that begins a word that `new` begins with too,
        all it has before it the same; 0 when there is none (all again)."""
        old, now = self.text.plain, new.plain
        at = len(self.starts) - 2
        while at > 0:
            start = self.starts[at]
            if 0 < start < len(old) and old[start - 1].isspace() and not old[start].isspace():
                end = start
                while end < len(old) and not old[end].isspace():
                    end += 1
                # (the plain text alike, then its styles: a restyle leaves no plain text as it was
                # in the Markdown seen so far, a closing `**` drops the pair, but lines are kept
                # only where they would be drawn alike)
                # (Text equality is of the plain text and the spans: with no spans, the plain's)
                if end < len(old) and now[:end + 1] == old[:end + 1] and (
                        not new.spans and not self.text.spans or new[:start] == self.text[:start]):
                    return at
            at -= 1
        return 0


def _styled(text: Text) -> bool:
    """Whether rich draws `text`'s plain runs in a (null) Style or in none
    (`Text.render`: none when the text it draws, wrapped and joined, has no
    spans): a line's segments depend on the whole text's spans."""
    return bool(text.style) or bool(text.spans)


def _line_starts(text: str, room: int) -> list[int] | None:
    """Where each line of `text` begins when rich wraps it in `room` cells
    (`Text.wrap`: each line of the text divided at its breaks), or None
    when that is not known (`text_lines.line_breaks`)."""
    starts: list[int] = []
    at = 0
    for line in text.split("\n"):
        starts.append(at)
        found = line_breaks(line, room)
        if found is None:
            return None
        starts.extend(at + offset for offset in found)
        at += len(line) + 1
    return starts


# --------------------------------------------------------------------------- tables

#: A table tail with fewer rows is rendered whole: keeping rows would cost more than it saves.
_TABLE_ROWS = 3
#: A Markdown table's delimiter row (`|---|:--:|`), before its cells are read to be sure.
_DELIMITER_ROW = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
#: Where rich lays a table's rows out from (`_MarkdownTable`); another rich renders tables whole.
_WIDTHS_METHOD = hasattr(Table, "_calculate_column_widths")


@dataclass
class _Table:
    """A table tail as last drawn: its cells, rich's column widths for them,
    and the lines of the header (after a blank line when it has a gap) and
    of each row, each drawn alone at those widths."""

    how: tuple                       # (width, gap, style, the header and delimiter lines)
    header: list[Text]
    rows: list[str]                  # each row's text
    body: list[list[Text]]           # each row's cells
    ranges: list[list[tuple[int, int]]]   # each row's cells' (least, most) widths, the header's first
    widths: list[int]                # rich's column widths for these ranges, padding included
    head_strips: list[Strip]
    row_strips: list[list[Strip]]
    tops: list[list[tuple[int, int]]] = field(default_factory=list)   # column ranges of ranges[:k + 1], each k
    painter: tuple = ()              # (console, border style, widths, the _RowPainter for them) last used

    def strips(self) -> list[Strip]:
        return self.head_strips + [strip for row in self.row_strips for strip in row]

    @classmethod
    def drawn(cls, console: Console, how: tuple, rows: list[str]) -> _Table | None:
        """The table of `rows` under the header `how[3]`, drawn row by row,
        or None when it cannot be kept: not one table, a blank row amid its
        rows, or a pane too narrow for its header (nor can that text grown)."""
        width, _, _, head = how
        found = table_cells(console, head + "\n" + "\n".join(rows))
        if found is None or len(found[1]) != len(rows):
            return None
        header, body = found
        ranges = [_ranges(console, width, header)] + [_ranges(console, width, row) for row in body]
        widths = _column_widths(console, width, header, body)
        table = cls(how, header, [], [], [], [], [], [])
        return table if widths is not None and table._draw_all(console, rows, body, ranges, widths) else None

    def more_rows(self, console: Console, rows: list[str], same: int) -> bool:
        """Bring the table up to `rows`, of which the first `same` are as
        kept: draw the others alone, at the kept widths, or every row again
        from the cells kept when their cells change a column's width. False
        when that would not give the whole table's lines (cells that are
        not one row each, a blank row amid the rows): then it is drawn anew."""
        width, _, _, head = self.how
        if self.row_strips and not self.row_strips[-1]:
            same = min(same, len(self.rows) - 1)   # a blank last row: drawn again when not last
        if same == len(rows) == len(self.rows):
            return True
        new = row_cells(console, head, rows[same:], self.header)
        if new is None:
            return False
        body = self.body[:same] + new
        added = [_ranges(console, width, row) for row in new]
        ranges = self.ranges[:same + 1] + added
        tops = self.tops[:same + 1] + _tops(self.tops[same], added)
        if tops[-1] != self.tops[-1]:
            widths = _column_widths(console, width, self.header, body)
            if widths != self.widths:   # (the same widths: the kept rows stand as drawn)
                return widths is not None and self._draw_all(console, rows, body, ranges, widths)
        drawn = self._rows_drawn(console, body, ranges, same, self.widths)
        if drawn is None:
            return False
        self.rows, self.body, self.ranges, self.tops = rows, body, ranges, tops
        self.row_strips = self.row_strips[:same] + drawn
        return True

    def _draw_all(self, console: Console, rows: list[str], body: list[list[Text]],
                  ranges: list[list[tuple[int, int]]], widths: list[int]) -> bool:
        """Draw the header and every row at `widths`, and keep them; False
        when a row cannot be drawn alone, or the header is not one line and
        its rule (too narrow a pane)."""
        width, gap, style, _ = self.how
        head_lines = _lines(console, _table(self.header, [], widths), width)
        if len(head_lines) < 2:
            return False
        row_strips = self._rows_drawn(console, body, ranges, 0, widths)
        if row_strips is None:
            return False
        self.rows, self.body, self.ranges, self.widths = rows, body, ranges, widths
        self.tops = [ranges[0]] + _tops(ranges[0], ranges[1:])
        self.head_strips, self.row_strips = strips_of(head_lines, width, gap, style), row_strips
        return True

    def _rows_drawn(self, console: Console, body: list[list[Text]], ranges: list[list[tuple[int, int]]],
                    start: int, widths: list[int]) -> list[list[Strip]] | None:
        """The lines of each row from `start` on, each drawn alone at
        `widths`: painted when its cells fit a line each (`_RowPainter`;
        `ranges` as kept, the header's first), else by a rich Table of that row."""
        width, _, style, _ = self.how
        border = console.get_style("markdown.table.border")
        kept = self.painter
        if not kept or kept[0] is not console or kept[1] != border or kept[2] != widths:
            kept = self.painter = (console, border, list(widths), _RowPainter.of(console, self.header, widths))
        painter = kept[3]
        drawn = []
        for at, row in enumerate(body[start:], start):
            line = painter.line(row, ranges[at + 1]) if painter is not None else None
            if line is None:
                lines = _lines(console, _table(self.header, [row], widths, show_header=False), width)
            else:   # (trimmed as rich's lines are)
                lines = [] if _is_blank(line) else [line]
            if not lines and at < len(body) - 1:
                return None   # a blank row amid the table: its line would be trimmed here, not there
            # (a blank last row, the row being begun, has no lines: the whole table's are trimmed too)
            drawn.append(strips_of(lines, width, False, style) if lines else [])
        return drawn


class _RowPainter:
    """Draws a row whose cells fit a line each as rich's Table draws it
    (`Table._render`), without the table: rich costs ~0.4 ms a row, most of
    it in the layers around `Text.wrap`, and a column width change draws
    every row of a tail again. Only for the table `_table` makes: a box of
    spaces, each cell padded a cell on its right but the last
    (`collapse_padding`, no `pad_edge`), edges and dividers in the border's
    style. Other rows are None, drawn by rich; tests/test_tail_render.py
    compares the lines with the whole table's."""

    def __init__(self, console: Console, table: Table, widths: list[int]) -> None:
        border = console.get_style(table.style or "") + console.get_style(table.border_style or "")
        self.console = console
        self.widths = widths
        self.columns = table.columns
        self.edge = Segment(" ", border)
        self.divider = Segment(" ", Style.null().background_style + border)
        self.pad = console.get_style("none")   # a cell's padding (rich's `Padding` style)

    @classmethod
    def of(cls, console: Console, header: list[Text], widths: list[int]) -> _RowPainter | None:
        table = _table(header, [], widths, show_header=False)
        chars = (table.box.head_left, table.box.head_vertical, table.box.head_right, table.box.mid_left,
                 table.box.mid_vertical, table.box.mid_right, table.box.foot_left, table.box.foot_vertical,
                 table.box.foot_right) if table.box is not None else ("",)
        if (table.padding != (0, 1, 0, 1) or not table.collapse_padding or table.pad_edge or not table.show_edge
                or table.show_lines or table.leading or table.row_styles or any(c.style for c in table.columns)
                or any(char != " " for char in chars) or len(widths) != len(table.columns)):
            return None
        return cls(console, table, widths)

    def line(self, cells: list[Text], ranges: list[tuple[int, int]]) -> list[Segment] | None:
        """The row's line, or None when a cell takes more than one (by its
        measured range, before any is wrapped: rows of a table narrower
        than its cells mostly do) or the row has not a cell for each
        column (which rich fills in)."""
        console, last = self.console, len(self.widths) - 1
        if len(cells) != len(self.widths) or len(ranges) != len(cells):
            return None
        if any(most > width - (k != last) for k, ((_, most), width) in enumerate(zip(ranges, self.widths, strict=True))):
            return None
        line = [self.edge]
        for k, (cell, column, width) in enumerate(zip(cells, self.columns, self.widths, strict=True)):
            right = 0 if k == last else 1
            inner = width - right
            justify = cell.justify or column.justify or "default"
            plain = cell.plain
            if justify == "default" and "\n" not in plain and "\t" not in plain and cell_len(plain) <= inner:
                segments = list(cell.render(console, end=""))   # (what Text.wrap makes of it: itself)
            else:
                tab_size = console.tab_size if cell.tab_size is None else cell.tab_size
                wrapped = cell.wrap(console, inner, justify=justify,
                                    overflow=cell.overflow or column.overflow or "fold", tab_size=tab_size or 8,
                                    no_wrap=column.no_wrap if cell.no_wrap is None else cell.no_wrap)
                if len(wrapped) != 1:
                    return None
                segments = list(wrapped[0].render(console, end=""))
            size = Segment.get_line_length(segments)
            if size > inner:
                return None
            line += segments
            if size < inner:
                line.append(Segment(" " * (inner - size), self.pad))
            if right:
                line.append(Segment(" " * right, self.pad))
            if k != last:
                line.append(self.divider)
        line.append(self.edge)
        return _clean(line)


class _ParagraphText(Paragraph):
    """A Markdown paragraph's text as rich makes it, kept instead of drawn."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        self.text.justify = self.justify   # (as rich's Paragraph does before it draws its text)
        _TextMarkdown.found.append(self.text)
        return iter(())


class _TextMarkdown(_BlockMarkdown):
    elements = {**_NO_LINK_ELEMENTS, "paragraph_open": _ParagraphText}
    found: list[Text] = []


def _paragraph_text(console: Console, markdown: _BlockMarkdown, width: int) -> Text | None:
    """The text of `markdown` when it is one paragraph and nothing else (what
    rich's Markdown draws it as: that text, wrapped), and long enough to
    keep lines of (`_KEPT_FROM`)."""
    if len(markdown.markup) < _KEPT_FROM * width or \
            [token.type for token in markdown.parsed] != ["paragraph_open", "inline", "paragraph_close"]:
        return None
    _TextMarkdown.found = []
    list(console.render(_TextMarkdown(markdown.markup, parsed=markdown.parsed), _options(console, width)))
    found, _TextMarkdown.found = _TextMarkdown.found, []
    return found[0] if len(found) == 1 else None


class _MarkdownTable(Table):
    """The table rich's Markdown draws (`rich.markdown.TableElement`), at
    given column widths, padding included, when given (rich lays each row
    out from the widths alone: `_calculate_column_widths`)."""

    def __init__(self, widths: list[int] | None = None, show_header: bool = True) -> None:
        super().__init__(box=box.SIMPLE, pad_edge=False, style="markdown.table.border", show_edge=True,
                         collapse_padding=True, show_header=show_header)
        self._widths = widths

    def _calculate_column_widths(self, console: Console, options: ConsoleOptions) -> list[int]:
        if self._widths is None:
            return super()._calculate_column_widths(console, options)
        return list(self._widths)


def _table(header: list[Text], body: list[list[Text]], widths: list[int] | None = None,
           show_header: bool = True) -> Table:
    table = _MarkdownTable(widths, show_header)
    for heading in header:
        heading = heading.copy()
        heading.stylize("markdown.table.header")
        table.add_column(heading)
    for row in body:
        table.add_row(*row)
    return table


def _options(console: Console, width: int) -> ConsoleOptions:
    """The options a tail's table is drawn with (`block_render._lines`)."""
    return console.options.update(width=max(1, width), height=None, highlight=False, markup=False, no_wrap=False)


def _column_widths(console: Console, width: int, header: list[Text], body: list[list[Text]]) -> list[int] | None:
    """The column widths rich gives this table in `width` cells (as `Table.__rich_console__` asks them)."""
    table = _table(header, body)
    options = _options(console, width)
    edges = 2 + len(table.columns) - 1
    try:
        widths = table._calculate_column_widths(console, options.update_width(options.max_width - edges))
    except (AttributeError, TypeError):   # another rich: every table tail is rendered whole
        return None
    return [int(size) for size in widths]


def _ranges(console: Console, width: int, cells: list[Text]) -> list[tuple[int, int]]:
    """Each cell's (least, most) width as rich measures it for a column."""
    options = _options(console, width)
    return [tuple(Measurement.get(console, options, cell)) for cell in cells]  # type: ignore[misc]


def _tops(top: list[tuple[int, int]], rows: list[list[tuple[int, int]]]) -> list[list[tuple[int, int]]]:
    """Each column's range of widths (what rich's column widths are made
    from) over the rows so far, after each of `rows` in turn, from `top`,
    the ranges over the rows before them (the header's first)."""
    tops = []
    for row in rows:
        top = [(max(least, row[k][0]), max(most, row[k][1])) if k < len(row) else (least, most)
               for k, (least, most) in enumerate(top)]
        tops.append(top)
    return tops
