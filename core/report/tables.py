"""Rich tables for any terminal width: the report's, the decision's and the
commands' (drift, canary). A table wider than the terminal is split into
tables of its columns that each fit, each beginning with the name column;
figures are never folded mid-number; a model's name is broken after its
"/" or "-", never cut short of two lines. Every cell goes in through
`core.ground.text.one_line`, never as markup.

Why a module of its own: the commands' tables used these from the decision's
terminal module, which is about the decision."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from core.report.format import cell, fold_at, fold_pieces
from core.ground.text import one_line

__all__ = ["CELL", "EDGE", "MAX_NAME", "natural_widths", "print_table"]

MAX_NAME = 24   # a model's name in a table: longer ones end in "…"


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]],
           whole: Sequence[int] | None = None, left: Sequence[str] = ()) -> Table:
    """A table for any width: a narrow terminal folds headers and figures, never
    a model's name: one longer than `MAX_NAME` is broken after its "/" or "-"
    (`fold_at`), or ends in "…" when longer than two lines of it; `whole`: each
    column's least width, so that its figures are not folded."""
    table = Table(title=Text(one_line(title)), title_justify="left")
    for k, col in enumerate(header):
        head = one_line(col) if whole is None or not k else fold_at(one_line(col), whole[k])
        table.add_column(Text(head), justify="left" if k == 0 or col in left else "right", no_wrap=k == 0,
                         max_width=MAX_NAME if k == 0 else None, overflow="ellipsis" if k == 0 else "fold",
                         min_width=whole[k] if whole is not None and k else None)
    for r in rows:
        name = one_line(r[0]) if r else ""
        if MAX_NAME < cell_len(name) <= 2 * MAX_NAME:
            name = fold_at(name, MAX_NAME)
        table.add_row(*(Text(c) for c in [name, *(one_line(c) for c in r[1:])]))
    return table


#: What a Rich table adds to its columns' text: a cell's padding either side
#: and the border after it (`CELL`), and the border before the first (`EDGE`).
CELL, EDGE = 3, 1


def natural_widths(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    """Each column's width with its header and every cell on one line."""
    return [max([cell_len(h)] + [cell_len(r[k]) for r in rows]) for k, h in enumerate(header)]


def print_table(console: Console, title: str, header: Sequence[str], rows: Sequence[Sequence[str]],
                left: Sequence[str] = ()) -> None:
    """`_table` for the console's width: a table wider than that is split into
    tables of its columns that each fit, each beginning with the first (the
    name), so that figures stay whole ("1,047 ms", not "1,04" over "7 ms");
    headers wrap between words and after a model name's "/" or "-"
    (`fold_at`: the matchups' headers are names). A column too wide to fit beside
    the name alone folds as before."""
    texts = [[one_line(c) for c in r] for r in rows]
    head = [cell(c, 2 * MAX_NAME).rstrip() for c in header]    # matchups' headers are names: any length
    data = [max((cell_len(r[k]) for r in texts), default=0) for k in range(len(head))]
    need = [max(data[k], max((cell_len(w.rstrip()) for w in fold_pieces(head[k])), default=0))
            for k in range(len(head))]
    first = min(need[0], MAX_NAME) + CELL + EDGE
    groups: list[list[int]] = [[]]
    used = first
    for k in range(1, len(head)):
        if groups[-1] and used + need[k] + CELL > console.width:
            groups.append([])
            used = first
        groups[-1].append(k)
        used += need[k] + CELL
    whole = natural_widths(head, texts)    # headers on one line
    for n, cols in enumerate(groups):
        keep = [0] + cols
        widths = next((w for w in (whole, need) if first + sum(w[k] + CELL for k in cols) <= console.width),
                      None)
        console.print(_table(title if n == 0 else f"{title} (continued)", [head[k] for k in keep],
                             [[r[k] for k in keep] for r in rows], [widths[k] for k in keep] if widths else None,
                             left))
