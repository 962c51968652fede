"""How panes are laid out for the terminal's size, and the tab strip used
when they do not fit side by side.

The rule (`pane_layout`): side by side (up to four in a row, then two rows)
while every pane keeps `MIN_PANE_WIDTH` columns of text and `MIN_PANE_HEIGHT`
rows; otherwise one pane at a time under a tab strip that names every pane
with its status, so a pane never shrinks to a fragment of a header and code
that wraps mid-word. At 100x30 with four panes each would get 23 columns:
tabs. The strip is built as `Text` (pane names can be model aliases) and
shows labels only while the session is blind, as the panes do."""

from __future__ import annotations

import math
from typing import Literal

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import Static

from core.ground.text import one_line

MIN_PANE_WIDTH = 32        # columns of text inside a pane's border
MIN_PANE_HEIGHT = 6        # rows of text inside a pane's border
CHROME_ROWS = 7            # header, session bar, vote bar, prompt (2 + rule), footer

Layout = Literal["grid", "tabs"]

STATUS_MARK = {"idle": "·", "waiting": "…", "queued": "…", "retrying": "↻", "streaming": "▸", "done": "✓",
               "error": "✗", "cancelled": "■", "interrupted": "■"}


def grid_shape(n: int) -> tuple[int, int]:
    """Columns and rows: side by side up to four, then two rows."""
    if n <= 4:
        return max(n, 1), 1
    return math.ceil(n / 2), 2


def pane_layout(width: int, height: int, n: int) -> Layout:
    """"grid" when `n` panes side by side each keep `MIN_PANE_WIDTH` x
    `MIN_PANE_HEIGHT` of text at this terminal size, else "tabs"."""
    if n <= 1:
        return "grid"
    cols, rows = grid_shape(n)
    inner_width = (width - (cols - 1)) // cols - 2          # a gutter between panes, a border each side
    inner_height = (height - CHROME_ROWS) // rows - 3       # border top and bottom, the pane's header
    return "grid" if inner_width >= MIN_PANE_WIDTH and inner_height >= MIN_PANE_HEIGHT else "tabs"


class PaneTabs(Static):
    """One tab per pane: its name and a status mark; the active one stands out."""

    class Selected(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.names: list[str] = []
        self.statuses: list[str] = []
        self.active = 0
        self._spans: list[tuple[int, int]] = []

    def show(self, names: list[str], statuses: list[str], active: int) -> None:
        self.names, self.statuses, self.active = names, statuses, active
        text = Text(no_wrap=True, overflow="ellipsis")
        self._spans = []
        for i, (name, status) in enumerate(zip(names, statuses, strict=True)):
            if i:
                text.append(" │ ", style="dim")
            start = len(text)
            style = "bold reverse" if i == active else ""
            text.append(f" {one_line(name, 24)} {STATUS_MARK.get(status, '?')} {status} ", style=style)
            self._spans.append((start, len(text)))
        text.append("   alt+←/→ switch", style="dim")
        self.update(text)

    def on_click(self, event: events.Click) -> None:
        for i, (start, end) in enumerate(self._spans):
            if start <= event.x < end:
                self.post_message(self.Selected(i))
                return
