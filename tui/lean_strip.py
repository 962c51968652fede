"""Lean strips: Textual `Strip`s for cached lines, without per-line memo caches.

Why this module exists: a `Strip` builds seven small memo caches when it is
created. The stream view keeps tens of thousands of rendered lines cached,
and those caches (empty for a cached line: Textual copies the segments into
new strips when it paints) were most of the objects the cycle collector
walked on its full passes, i.e. the long pauses. A lean strip shares one
cache that never stores anything.

This depends on Textual internals: the names in `Strip.__slots__`, that the
memo caches are `FIFOCache`s, and that Strip stores into them only through
`FIFOCache.set` / `__setitem__`. The slots are found by introspection, so a
Textual with other slots falls back to plain Strips (slower, still correct);
tests/test_lean_strip.py fails loudly when any of these assumptions change,
and pyproject.toml pins the Textual range it was checked with.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.cache import FIFOCache
from textual.strip import Strip

__all__ = ["LEAN_DEFAULTS", "LeanStrip", "NoCache", "blank_line", "drawn_line", "lean"]


class NoCache(FIFOCache):
    """A memo cache that keeps nothing: one instance shared by every lean strip."""

    __slots__ = ()

    def set(self, key: object, value: object) -> None:
        return None

    __setitem__ = set


def _lean_defaults() -> list[tuple[str, object]] | None:
    """Slot values for a Strip whose memo caches are the shared `NoCache`.

    A Strip builds seven small caches; for a cached line they stay empty
    (Textual copies its segments into a new Strip per paint) but the cycle
    collector walks them on every full pass: 16 objects a line became the
    main cost of the long pauses. Found by introspection so that a Textual
    with other slots falls back to plain Strips.
    """
    try:
        proto = Strip([], 0)
        names = list(Strip.__slots__)
        values = [getattr(proto, name) for name in names]
    except (AttributeError, TypeError):
        return None
    if "_segments" not in names or "_cell_length" not in names:
        return None
    shared = NoCache(1)
    return [(name, shared if isinstance(value, FIFOCache) else value)
            for name, value in zip(names, values, strict=True)
            if name not in ("_segments", "_cell_length")]


LEAN_DEFAULTS = _lean_defaults()


class LeanStrip(Strip):
    """A Strip for cached lines: same segments, no per-instance memo caches."""

    __slots__ = ()

    def __init__(self, segments: list[Segment], cell_length: int) -> None:
        if LEAN_DEFAULTS is None:
            super().__init__(segments, cell_length)
            return
        setter = object.__setattr__
        for name, value in LEAN_DEFAULTS:
            setter(self, name, value)
        self._segments = segments
        self._cell_length = cell_length


def lean(strip: Strip) -> Strip:
    """`strip` as a lean strip (the same segments, shared), to hand to the
    compositor: it divides every line it paints, and a plain Strip keeps the
    division of itself into itself (`[self]`) in its own memo cache, a cycle
    that only the cycle collector frees. Painted lines made ~160k such
    objects in ten seconds of six streaming panes, and their collections
    were the longest stalls of eight fast ones. A lean strip stores nothing,
    so a painted line is freed as soon as it is replaced."""
    if LEAN_DEFAULTS is None or type(strip) is LeanStrip:
        return strip
    return LeanStrip(strip._segments, strip.cell_length)


#: Lines drawn, by their segments (`drawn_line`); emptied when it reaches `DRAWN_LINES`.
_DRAWN: dict[tuple[Segment, ...], Strip] = {}
DRAWN_LINES = 2048


def drawn_line(segments: tuple[Segment, ...], width: int) -> Strip:
    """The lean strip of a line of `width` cells: the same object as the last
    line drawn with the same segments, while it is in `_DRAWN`.

    Textual styles a row again when its line is another object than the
    one it styled (`LineScrollView._reuse_moved_lines` finds lines only by
    identity), at ~30 us a row in the paced runs of `bench_render`. Most
    lines drawn alike are blank lines and lines drawn again: a paragraph's
    last lines, a list or a table row redrawn, a blank line under a code
    line: 39% of the rows styled in bench_render's paced code run, 24% in
    its Markdown run. A line whose segments cannot be hashed (control codes
    in a list) is not kept."""
    try:
        strip = _DRAWN.get(segments)
    except TypeError:
        return LeanStrip(list(segments), width)
    if strip is None:
        if len(_DRAWN) >= DRAWN_LINES:
            _DRAWN.clear()
        strip = _DRAWN[segments] = LeanStrip(list(segments), width)
    return strip


def blank_line(width: int, style: Style | None) -> Strip:
    """What `Strip.blank` draws, as the drawn line (`drawn_line`)."""
    return drawn_line((Segment(" " * width, style),), width)
