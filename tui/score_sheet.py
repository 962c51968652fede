"""Scoring the answers of a case on the session's dimensions, 1-5 with the
number keys (`core.answering.dimensions`): after the vote, before the names
are shown, or instead of the vote (F3 in the queue). Why a screen of its own:
it asks answer by answer and dimension by dimension, and names the answers by
their labels only, so scoring never unblinds. Returns the scores given as
(label, dimension, value), in order; Esc ends it, keeping those given."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label

from core.answering.dimensions import Dimension
from core.ground.text import one_line

Score = tuple[str, str, int]


class ScoreSheet(ModalScreen[list[Score]]):
    """1-5 score the answer and dimension asked; s skips it; Esc ends."""

    BINDINGS = [
        *[Binding(str(n), f"score({n})", str(n), id=f"score.{n}", show=n in (1, 5)) for n in range(1, 6)],
        Binding("s", "skip_one", "Skip", id="score.skip"),
        Binding("escape", "done", "Done", id="score.done"),
    ]

    def __init__(self, labels: Sequence[str], dimensions: Sequence[Dimension],
                 current: Callable[[str, str], int | None] = lambda label, dim: None) -> None:
        super().__init__()
        self.asks = [(label, d) for label in labels for d in dimensions]
        self.current = current
        self.at = 0
        self.given: list[Score] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="score-dialog"):
            yield Label(Text("Score each answer, 1 (poor) to 5 (excellent)"), id="score-title")
            yield Label(Text(""), id="score-ask")
            yield Label(Text("1-5: score · s: skip this one · esc: done"), id="score-help")

    def on_mount(self) -> None:
        self._show()

    def _show(self) -> None:
        label, dim = self.asks[self.at]
        now = self.current(label, dim.name)
        text = Text(f"{self.at + 1}/{len(self.asks)}  Answer {label} · {dim.name}")
        if dim.description:
            text.append(f": {one_line(dim.description)}")
        if now is not None:
            text.append(f"  (now {now})", style="dim")
        self.query_one("#score-ask", Label).update(text)

    def _next(self) -> None:
        self.at += 1
        if self.at >= len(self.asks):
            self.dismiss(self.given)
        else:
            self._show()

    def action_score(self, value: int) -> None:
        label, dim = self.asks[self.at]
        self.given.append((label, dim.name, value))
        self._next()

    def action_skip_one(self) -> None:
        self._next()

    def action_done(self) -> None:
        self.dismiss(self.given)
