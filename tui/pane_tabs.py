"""How panes are laid out for the terminal's size, and the tab strip used
when they do not fit side by side.

The rule (`pane_layout`): side by side (up to four in a row, then two rows)
while every pane keeps `MIN_PANE_WIDTH` columns of text and `MIN_PANE_HEIGHT`
rows; otherwise one pane at a time under a tab strip that names every pane
with its status, so a pane never shrinks to a fragment of a header and code
that wraps mid-word. At 100x30 with four panes each would get 23 columns:
tabs. The strip is built as `Text` (pane names can be model aliases) and
shows labels only while the session is blind, as the panes do.

The strip fits the terminal's width (`fit_tabs`): every pane keeps a tab
however narrow the terminal, named by a shorter form of its name and its
status mark alone before any tab is dropped (eight panes fit in 80 columns)."""

from __future__ import annotations

import math
import os
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


SWITCH_HINT = "   alt+←/→ switch"


def short_names(names: list[str]) -> list[str]:
    """Each name without its "provider/" prefix where that stays unambiguous."""
    shorts = [name.rsplit("/", 1)[-1] or name for name in names]
    return [short if shorts.count(short) == 1 else name for name, short in zip(names, shorts, strict=True)]


def distinct_tails(names: list[str]) -> list[str]:
    """`names` without the prefix they all share, cut at a separator
    ("model-1-large", "model-2-large" -> "1-large", "2-large"), so names cut
    short to fit still tell the panes apart."""
    if len(names) < 2:
        return list(names)
    common = os.path.commonprefix(names)
    cut = max(common.rfind(c) for c in "-_./: ") + 1
    tails = [name[cut:] for name in names]
    return tails if all(tails) else list(names)


def cut_name(name: str, cells: int) -> str:
    """`name` in at most `cells` characters, cut in the middle ("concise4" ->
    "con…e4"), where names of one family differ: a size, a version, a number."""
    name = one_line(name, 200)
    if len(name) <= cells:
        return name
    if cells < 3:
        return name[:cells]
    keep = cells - 1
    return name[:(keep + 1) // 2] + "…" + name[len(name) - keep // 2:]


def cut_names(names: list[str], cells: int) -> list[str]:
    """Each name in at most `cells` characters: its start ("thorou…"), or cut
    in the middle for all when the starts alone would look alike."""
    starts = [one_line(name, cells) for name in names]
    if len(set(starts)) == len(set(names)):
        return starts
    return [cut_name(name, cells) for name in names]


def fit_tabs(names: list[str], statuses: list[str], active: int, width: int) -> tuple[Text, list[tuple[int, int]]]:
    """The strip for `width` cells and each tab's (start, end): the longest
    form that fits, from "name ✓ done" with the switch hint down to a few
    letters of each name and its mark, so every pane is always named."""
    shorts = short_names(names)
    longest = max((len(n) for n in names), default=1)
    forms: list[tuple[list[str], bool, str, bool]] = [   # names, status word, separator, hint
        ([one_line(n, 24) for n in names], True, " │ ", True),
        ([one_line(n, 24) for n in names], True, " │ ", False),
        ([one_line(n, 24) for n in names], False, " │ ", False),
        ([one_line(n, 24) for n in shorts], False, " │ ", False),
        ([one_line(n, 24) for n in shorts], False, "│", False),
    ]
    tails = distinct_tails(shorts)
    forms += [(cut_names(tails, cut), False, "│", False) for cut in range(min(longest, 24), 0, -1)]
    text, spans = Text(), list[tuple[int, int]]()
    for tab_names, words, sep, hint in forms:
        text, spans = _strip(tab_names, statuses, active, words, sep, hint)
        if text.cell_len <= width:
            break
    return text, spans


def _strip(names: list[str], statuses: list[str], active: int, words: bool, sep: str,
           hint: bool) -> tuple[Text, list[tuple[int, int]]]:
    text = Text(no_wrap=True, overflow="ellipsis")
    spans: list[tuple[int, int]] = []
    for i, (name, status) in enumerate(zip(names, statuses, strict=True)):
        if i:
            text.append(sep, style="dim")
        start = len(text)
        style = "bold reverse" if i == active else ""
        mark = STATUS_MARK.get(status, "?")
        text.append(f" {name} {mark} {status} " if words else f" {name} {mark} ", style=style)
        spans.append((start, len(text)))
    if hint:
        text.append(SWITCH_HINT, style="dim")
    return text, spans


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
        width = self.content_size.width or max(1, self.app.size.width - 2)
        text, self._spans = fit_tabs(names, statuses, active, width)
        self.update(text)

    def on_resize(self) -> None:
        if self.names:
            self.show(self.names, self.statuses, self.active)

    def on_click(self, event: events.Click) -> None:
        for i, (start, end) in enumerate(self._spans):
            if start <= event.x < end:
                self.post_message(self.Selected(i))
                return
