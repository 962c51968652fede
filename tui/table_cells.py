"""A Markdown table's cells as rich's Markdown reads them, for the table tail.

Why a module of its own: the table tail (`tui.tail_render`) reads the cells
of the rows written since its last flush, 40 times a second per pane. Read
through rich's Markdown (a markdown-it parse, then rich's elements), that is
~0.17 ms a flush, most of it the same for any row: the parse of the header
the rows hang under, and the machinery around the cells. A row of plain text
(`row_cells`) is read here without either, as the parser reads it;
tests/test_tail_render.py compares both readings of random rows.
"""

from __future__ import annotations

import re

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import TableElement
from rich.text import Text

from tui.block_render import _NO_LINK_ELEMENTS, _BlockMarkdown

__all__ = ["row_cells", "table_cells"]


class _Recorded(TableElement):
    """A Markdown table's cells as rich reads them, kept instead of drawn."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        _CellsMarkdown.found.append(self)
        return iter(())


class _CellsMarkdown(_BlockMarkdown):
    elements = {**_NO_LINK_ELEMENTS, "table_open": _Recorded}
    found: list[_Recorded] = []


def table_cells(console: Console, text: str) -> tuple[list[Text], list[list[Text]]] | None:
    """The header's and each row's cells of `text`, when it is one table and nothing else."""
    _CellsMarkdown.found = []
    markdown = _CellsMarkdown(text)
    tokens = markdown.parsed
    if not tokens or tokens[0].type != "table_open" or tokens[-1].type != "table_close" \
            or sum(token.type == "table_open" for token in tokens) != 1:
        return None
    list(console.render(markdown, console.options.update(width=max(1, console.width))))
    found, _CellsMarkdown.found = _CellsMarkdown.found, []
    head = found[0].header if len(found) == 1 else None
    if head is None or head.row is None:
        return None
    table = found[0]
    header = [cell.content for cell in head.row.cells]
    body = [[cell.content for cell in row.cells] for row in (table.body.rows if table.body is not None else [])]
    return header, body


#: A row read without the parser: it begins with a pipe (so no other block
#: can begin on its line, nor end the table) and holds no character that an
#: inline rule of rich's parser acts on (CommonMark with tables and
#: strikethrough: escapes, code spans, emphasis, links, images, raw HTML,
#: entities). Printable too (`str.isprintable`): the space is the only white
#: character, so every way of trimming a cell trims the same.
_PLAIN_ROW = re.compile(r"\|[^\\`*_~\[\]!<&]*")


def row_cells(console: Console, head: str, rows: list[str], header: list[Text]) -> list[list[Text]] | None:
    """The cells of `rows`, body rows of a table whose header and delimiter
    lines are `head` and header cells `header`, as `table_cells` reads them;
    None when they are not rows of that table each (a blank line, say).

    Rows of plain text are split as the parser splits them (on pipes, an
    empty first and last cell dropped, each cell trimmed, as many cells as
    the header has) into rich's cells (a Text justified as its column's
    heading is); with any other row, all are read by `table_cells`."""
    if all(_PLAIN_ROW.fullmatch(row) and row.isprintable() for row in rows):
        body = []
        for row in rows:
            columns = row.strip(" ").split("|")
            if columns and columns[0] == "":
                columns.pop(0)
            if columns and columns[-1] == "":
                columns.pop()
            cells = []
            for k, heading in enumerate(header):
                cell = Text("", justify=heading.justify)
                content = columns[k].strip(" ") if k < len(columns) else ""
                if content:   # (as rich's TableDataElement takes the text in: the style in force is none)
                    cell.append(content)
                cells.append(cell)
            body.append(cells)
        return body
    found = table_cells(console, head + "\n" + "\n".join(rows))
    return None if found is None or len(found[1]) != len(rows) else found[1]
