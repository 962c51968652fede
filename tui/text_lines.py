"""One line of rich Text wrapped into screen lines as rich draws it
(`Text.__rich_console__`: wrap, justify, join, render, split), without the
Text objects rich makes and joins again for each line.

Why a module of its own: wrapped text is what most streaming tails draw
(reasoning, Markdown paragraphs), 40 times a second a pane, and rich spends
~100 us on a two-line paragraph, most of it in those objects and in
measuring each word twice. Here the breaks are rich's (`breaks`, its
`divide_line` for text whose characters are a cell each) and each line is
cut from the text, styled as rich styles it: each run between span edges in the
combination of the text's style and the spans over it, in their order.
Only for text it can vouch for (one line, no tab, every character one cell
wide, folded, left or default justified); anything else is None and rich
draws it. tests/test_text_lines.py compares the lines with rich's on
random texts and spans.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import pairwise

from rich.cells import get_character_cell_size
from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

try:   # rich's breaks, for a line of characters wider or narrower than a cell
    from rich._wrap import divide_line as _divide_line
except ImportError:  # pragma: no cover - another rich: only one-cell text is broken here
    _divide_line = None  # type: ignore[assignment]

try:
    from rich.cells import _SINGLE_CELLS as _RICH_ONE_CELL
except ImportError:  # pragma: no cover
    _RICH_ONE_CELL = frozenset(map(chr, range(0x20, 0x7F)))

__all__ = ["breaks", "line_breaks", "one_cell", "text_lines"]

#: Characters one cell wide, for which rich's cell counts are character
#: counts: rich's own set, and the general punctuation models write (dashes,
#: curly quotes, the ellipsis) that it measures one at a time.
_ONE_CELL = _RICH_ONE_CELL | frozenset(
    ch for ch in map(chr, range(0x2010, 0x2070)) if ch.isprintable() and get_character_cell_size(ch) == 1)
one_cell = _ONE_CELL.issuperset
_WORD = re.compile(r"(\s*\S+)\s*")        # rich's word (`rich._wrap.re_word`), its spaces apart


def breaks(plain: str, width: int) -> list[int]:
    """`rich._wrap.divide_line(plain, width, fold=True)` for text of one-cell
    characters, whose cell counts are its lengths: where each line after
    the first begins. rich measures each word twice and makes it a string;
    this reads its bounds from the match."""
    out: list[int] = []
    append = out.append
    offset = 0
    at = 0
    size = len(plain)
    match = _WORD.match
    while at < size:
        found = match(plain, at)
        if found is None:
            break
        start, end = found.span()
        length = found.end(1) - start               # the word without the spaces after it
        if width - offset >= length:
            offset += end - start
        elif length > width:                        # folded: a line for each `width` of it
            for piece in range(start, end, width):
                if piece:
                    append(piece)
            offset = (end - start) - width * ((end - start - 1) // width)
        elif offset:                                # (never the first word: it is at 0)
            append(start)
            offset = end - start
        at = end
    return out


def line_breaks(line: str, width: int) -> list[int] | None:
    """Where rich breaks a line of text in `width` cells (`Text.wrap`:
    `divide_line`, folding): read by `breaks` when its characters are a
    cell each, else by rich; None when this rich cannot say."""
    if one_cell(line):
        return breaks(line, width)
    return None if _divide_line is None else _divide_line(line, width, fold=True)


def text_lines(console: Console, options: ConsoleOptions, text: Text) -> list[list[Segment]] | None:
    """The lines `console.render(text, options)` splits into, or None when
    `text` is not one this module draws."""
    plain = text.plain
    width = options.max_width
    justify = text.justify or options.justify or "default"
    if (not plain or width < 1 or "\n" in plain or "\t" in plain
            or not one_cell(plain) or justify not in ("default", "left")
            or (text.overflow or options.overflow or "fold") != "fold"
            or (text.no_wrap if text.no_wrap is not None else options.no_wrap) or text.end != "\n"):
        return None
    get_style = console.get_style
    base = text.style
    base_style = get_style(base, default=Style.null()) if base else None
    size = len(plain)
    if any(span.start < 0 or span.end > size for span in text.spans):
        return None
    spans = [(span.start, span.end, get_style(span.style, default=Style.null())) for span in text.spans]
    bounds = [0, *breaks(plain, width), size]
    one = len(bounds) == 2       # not divided: rich keeps every span, empty ones too (`Text.divide`)
    lines: list[list[Segment]] = []
    cut: list[tuple[int, int, bool, int]] = []      # each line: (start, end, cropped, padding)
    for start, end in pairwise(bounds):
        # longer than the width (the spaces after its last word): rich crops
        # those spaces, then the rest, to the width (`rstrip_end`, `truncate`)
        cropped = end - start > width
        if cropped:
            end = start + width
        cut.append((start, end, cropped, width - (end - start) if justify == "left" else 0))
    # each line's spans: cut to it (a span over no character of it is dropped,
    # unless the text is one line), then to what is left of it when cropped;
    # in the spans' order, which is the order rich combines their styles in
    kept: list[list[tuple[int, int, int]]] = [[] for _ in cut]
    if one:
        start, end, cropped, _ = cut[0]
        kept[0] = [(s, min(e, end) if cropped else e, k) for k, (s, e, _) in enumerate(spans)
                   if not cropped or s < end]
    else:
        starts = [line[0] for line in cut]
        for k, (s, e, _) in enumerate(spans):
            for at in range(max(0, bisect_right(starts, s) - 1), len(cut)):
                start, end = cut[at][0], cut[at][1]
                if start >= e:
                    break
                if max(s, start) < min(e, end):
                    kept[at].append((max(s, start), min(e, end), k))
    # rich joins the lines into one text, each line's style a span over it:
    # with no span on any line, every run is drawn in no style at all
    styled = base_style is not None or any(kept)
    combined: dict[tuple[int, ...], Style] = {}
    for (start, end, _, pad), inside in zip(cut, kept, strict=True):
        edges = {start, end + pad}
        for s, e, _ in inside:
            edges.add(s)
            edges.add(e)
        line_text = plain[start:end] + " " * pad if pad else plain[start:end]
        points = sorted(edges)
        line = []
        for a, b in pairwise(points):
            style = None
            if styled:
                over = tuple(k for s, e, k in inside if s <= a < e)
                style = combined.get(over)
                if style is None:
                    parts = ([base_style] if base_style is not None else []) + [spans[k][2] for k in over]
                    style = combined[over] = Style.combine(parts) if parts else Style.null()
            line.append(Segment(line_text[a - start:b - start], style))
        lines.append(line)
    return lines
