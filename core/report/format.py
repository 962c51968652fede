"""How the report's figures are written, the same in every rendering (the
terminal, Markdown, HTML and the TUI's charts): numbers, percentages,
intervals with their open sides, rank ranges, the "votes to separate" hint,
and the step between axis ticks.

Why a module of its own: each renderer and the charts import these and
nothing else of each other. The results are plain strings of our own words
and numbers; the recorded names inside `gap_hint` stay untrusted, and each
renderer escapes them its own way (`core.ground.text`)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from rich.cells import cell_len, chop_cells, set_cell_size
from rich.text import Text

from core.stats.ratings import Gap, ModelRating
from core.ground.text import one_line


def fmt(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}f}"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def fmt_ci(row: ModelRating) -> str:
    """Bounds; an open side shows as infinite, a bound never computed (no
    bootstrap) as "n/a"."""
    lo = ("-inf" if row.open_low else "n/a") if row.ci_low is None else f"{row.ci_low:.0f}"
    hi = ("+inf" if row.open_high else "n/a") if row.ci_high is None else f"{row.ci_high:.0f}"
    return f"{lo} .. {hi}"


def fmt_rank(row: ModelRating) -> str:
    """The rank range; "-" for a model with too few votes to rank."""
    if row.rank_low is None or row.rank_high is None:
        return "-"
    return str(row.rank_low) if row.rank_low == row.rank_high else f"{row.rank_low}-{row.rank_high}"


NOT_ENOUGH_VOTES = "not enough votes to estimate how many more would separate them"


def more_votes_text(g: Gap) -> str:
    """What the estimate says, in words: a number only where it means something."""
    if g.more_votes is None:
        return NOT_ENOUGH_VOTES
    return f"~{g.more_votes:,} more votes (same mix) would separate them at this gap"


def gap_hint(g: Gap) -> str:
    """One not-yet-separated pair, as every rendering of the report says it."""
    return f"{g.upper} vs {g.lower}: gap {g.gap:.0f}, not yet separated; {more_votes_text(g)}"


def nice_step(raw: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) of at least `raw`, for axis ticks."""
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def cell(text: str, width: int, *, right: bool = False) -> str:
    """`text` in exactly `width` cells: cut with an ellipsis, padded left or right."""
    text = one_line(text)
    if width <= 0:
        return ""
    if cell_len(text) > width:
        text = set_cell_size(text, width - 1) + "…"
    pad = " " * (width - cell_len(text))
    return pad + text if right else text + pad


def name_width(names: Iterable[str], width: int, floor: int = 6) -> int:
    """Room for a chart's name column: the longest name, at most a quarter of the width."""
    longest = max((cell_len(one_line(n)) for n in names), default=floor)
    return max(floor, min(longest, max(10, width // 4)))


def fit_names(names: Iterable[str], width: int) -> dict[str, str]:
    """Each name (one line) in at most `width` cells, the cut ones still told
    apart: cut at the end with "…" (`cell`) where that keeps them distinct,
    else with the "…" inside, keeping as much of each name's end (where
    versions differ) as it takes: "anthropic/claude-sonnet-4" and
    "anthropic/claude-sonnet-4.5" in 20 cells were both "anthropic/claude-so…"."""
    width = max(2, width)
    flat = {n: one_line(n) for n in names}
    out = {n: f if cell_len(f) <= width else set_cell_size(f, width - 1) + "…" for n, f in flat.items()}
    seen: dict[str, int] = {}
    for short in out.values():
        seen[short] = seen.get(short, 0) + 1
    clashing = [n for n, short in out.items() if seen[short] > 1 and cell_len(flat[n]) > width]
    for head in range((width - 1) // 3, -1, -1):       # less of the start, more of the end, until apart
        tried = {n: _middle_cut(flat[n], width, head) for n in clashing}
        if len(set(tried.values()) | ({out[n] for n in out if n not in tried})) == len(out):
            out.update(tried)
            break
    return out


def _middle_cut(text: str, width: int, head: int) -> str:
    """`text` in `width` cells: its first `head` cells, "…", and its end."""
    tail, cells, k = width - 1 - head, 0, len(text)
    while k > 0 and cells + cell_len(text[k - 1]) <= tail:     # the end, a character at a time: bounded by width
        cells += cell_len(text[k - 1])
        k -= 1
    return set_cell_size(text, head).rstrip() + "…" + text[k:]


def fold_pieces(text: str, after: str = " /-_:") -> list[str]:
    """`text` cut after each of `after`'s characters: what `fold_at` packs into
    lines (the widest, its trailing space aside, is the least width it needs)."""
    pieces: list[str] = []
    start = 0
    for k, ch in enumerate(text):
        if ch in after:
            pieces.append(text[start:k + 1])
            start = k + 1
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def fold_at(text: str, width: int, after: str = " /-_:") -> str:
    """`text` (one line) in lines of at most `width` cells, broken after a
    space or one of `after`'s characters: a model's name at its "/" or "-"
    ("anthropic/" over "claude-" over "sonnet-4"), a header between words,
    not mid-word as a plain fold cuts them. Packed from the end, so that a
    name's last parts stay together; a piece wider than `width` is cut (at
    least two cells: a wide character)."""
    width = max(2, width)
    lines = [""]
    for piece in reversed(fold_pieces(text, after)):
        if lines[-1] and cell_len((piece + lines[-1]).rstrip()) > width:
            lines.append("")
        lines[-1] = piece + lines[-1]
    return "\n".join(part for ln in reversed(lines) for part in chop_cells(ln.rstrip(), width))


def line(*parts: tuple[str, str] | str | Text) -> Text:
    """A chart line that never wraps (the caller sized it): text, or (text, style)."""
    out = Text(no_wrap=True, overflow="crop", end="")
    for part in parts:
        if isinstance(part, (str, Text)):
            out.append(part)
        else:
            out.append(*part)
    return out
