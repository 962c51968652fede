"""The compare view: the answers to the last turn aligned line by line
(`tui.answer_diff`), with what differs highlighted (words and symbols in one
colour, numbers in another, code lines on their own background) and a
"differences only" toggle that folds identical lines into one marker.

Side by side when each answer gets at least `MIN_COLUMN` cells, otherwise
stacked: each row shows every answer's line under the previous one, with
its label, so a narrow terminal still reads a row at a time.

Columns are named by what the chat shows (`ChatSession.display_name`):
labels only while blind, so the view is usable before the vote."""

from __future__ import annotations

from rich.console import RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from tui.answer_diff import Cell, Comparison, Gap, Row, compare, tokens
from core.ground.text import one_line

MIN_COLUMN = 30

CHANGED = Style(color="black", bgcolor="yellow", bold=True)
NUMBER = Style(color="black", bgcolor="cyan", bold=True)
MISSING = Style(dim=True, italic=True)
CODE = Style(bgcolor="grey11")
SAME = Style(dim=True)


def cell_text(cell: Cell, row_same: bool) -> Text:
    """One answer's line with its changed spans highlighted (never markup)."""
    if cell.text is None:
        return Text("·", style=MISSING)
    line = one_line(cell.text)            # one character for one: the spans' offsets still hold
    text = Text(line, style=CODE if cell.code else "")
    if row_same:
        text.stylize(SAME)
        return text
    for start, end in cell.changed:
        piece = line[start:end]
        numeric = any(t[:1].isdigit() or (t[:1] in "+-" and t[1:2].isdigit()) for t in tokens(piece))
        text.stylize(NUMBER if numeric and cell.numbers else CHANGED, start, end)
    return text


def gap_text(gap: Gap) -> Text:
    return Text(f"⋯ {gap.rows} identical line{'s' if gap.rows != 1 else ''}", style="dim italic")


def render_comparison(comparison: Comparison, rows: list[Row | Gap], width: int) -> RenderableType:
    """Side by side when every column gets `MIN_COLUMN` cells, else stacked."""
    n = len(comparison.labels)
    if not rows:
        return Text("Nothing to compare.", style="dim")
    if width // n >= MIN_COLUMN:
        table = Table(expand=True, box=None, padding=(0, 1), show_edge=False, pad_edge=False,
                      header_style="bold", show_lines=False)
        for label in comparison.labels:
            table.add_column(Text(one_line(label)), ratio=1, overflow="fold")
        for row in rows:
            if isinstance(row, Gap):
                table.add_row(gap_text(row), *[Text("") for _ in range(n - 1)])
            else:
                table.add_row(*[cell_text(c, row.same) for c in row.cells])
        return table
    stacked = Table(expand=True, box=None, padding=(0, 1), show_edge=False, pad_edge=False, show_header=False)
    stacked.add_column(no_wrap=True, style="bold")
    stacked.add_column(ratio=1, overflow="fold")
    for k, row in enumerate(rows):
        if isinstance(row, Gap):
            stacked.add_row(Text(""), gap_text(row))
            continue
        if row.same:
            stacked.add_row(Text("=", style="dim"), cell_text(row.cells[0], True))
            continue
        if k:
            stacked.add_row(Text(""), Text(""))
        for label, cell in zip(comparison.labels, row.cells, strict=True):
            stacked.add_row(Text(one_line(label)), cell_text(cell, False))
    return stacked


class CompareScreen(Screen[None]):
    """The last turn's answers, aligned; `d` shows only what differs."""

    BINDINGS = [
        Binding("d", "toggle_differences", "Differences only", id="compare.differences",
                tooltip="Only the lines that differ (identical runs folded) / all"),
        Binding("escape,q", "close", "Back", id="compare.back", tooltip="Back to the chat"),
    ]

    def __init__(self, labels: list[str], answers: list[str], *, differences_only: bool = False,
                 title: str = "compare") -> None:
        super().__init__()
        self.comparison = compare(answers, labels)
        self.differences_only = differences_only
        self.title_text = title

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield Static("", id="compare-summary", classes="info-line")
        with VerticalScroll(id="compare-body"):
            yield Static("", id="compare-table")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.title = "lineup"
        self.sub_title = self.title_text
        self.refresh_view()

    def on_resize(self) -> None:
        self.refresh_view()

    def refresh_view(self) -> None:
        c = self.comparison
        rows = c.view(differences_only=self.differences_only)
        summary = Text()
        summary.append(one_line(", ".join(c.labels)), style="bold")
        summary.append(f"  {c.summary()}")
        summary.append("  (differences only)" if self.differences_only else "  (all lines)", style="dim")
        self.query_one("#compare-summary", Static).update(summary)
        width = max(20, self.size.width - 2)
        self.query_one("#compare-table", Static).update(render_comparison(c, rows, width))

    def action_toggle_differences(self) -> None:
        self.differences_only = not self.differences_only
        self.refresh_view()

    def action_close(self) -> None:
        self.dismiss(None)
