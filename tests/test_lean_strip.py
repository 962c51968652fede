"""Lean strips (tui/lean_strip.py) lean on Textual internals: these tests fail
loudly when the internals they rely on change, before a stale shared cache
could paint one line's content on another.

What is relied on: the exact names in `Strip.__slots__`; which of them hold
`FIFOCache` memo caches in a fresh Strip (the rest are plain values); that
Strip stores into those caches only with `cache[key] = value` or
`cache.set(...)` (both are no-ops on the shared `NoCache`). If one of these
fails after a Textual upgrade, review tui/lean_strip.py against the new
`textual/strip.py`, then update the expectations here and the Textual range
in pyproject.toml.
"""

from __future__ import annotations

import inspect
import re

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.terminal_theme import DEFAULT_TERMINAL_THEME
from textual.cache import FIFOCache
from textual.color import Color
from textual.filter import ANSIToTruecolor, DimFilter
from textual.strip import Strip

from tui import lean_strip
from tui.lean_strip import DRAWN_LINES, LEAN_DEFAULTS, LeanStrip, NoCache, blank_line, drawn_line

STRIP_SLOTS = [
    "_segments", "_cell_length", "_divide_cache", "_crop_cache", "_style_cache",
    "_filter_cache", "_render_cache", "_line_length_cache", "_crop_extend_cache",
    "_offsets_cache", "_link_ids", "_cell_count",
]
CACHE_SLOTS = {
    "_divide_cache", "_crop_cache", "_style_cache", "_filter_cache", "_line_length_cache",
    "_crop_extend_cache", "_offsets_cache",
}
PLAIN_SLOTS = {"_render_cache": None, "_link_ids": None, "_cell_count": None}

ANSI_FILTER = ANSIToTruecolor(DEFAULT_TERMINAL_THEME)
REVIEW = "Textual's Strip internals changed: review tui/lean_strip.py"


def test_strip_slots_are_the_ones_lean_strips_were_written_for():
    assert list(Strip.__slots__) == STRIP_SLOTS, REVIEW
    assert LeanStrip.__slots__ == ()
    fresh = Strip([Segment("x")], 1)
    caches = {name for name in STRIP_SLOTS if isinstance(getattr(fresh, name), FIFOCache)}
    assert caches == CACHE_SLOTS, REVIEW
    for name, value in PLAIN_SLOTS.items():
        assert getattr(fresh, name) == value, REVIEW


def test_lean_strips_are_in_use_with_one_shared_cache_that_keeps_nothing():
    assert LEAN_DEFAULTS is not None, REVIEW + " (lean strips fell back to plain Strips)"
    assert {name for name, _ in LEAN_DEFAULTS} == set(STRIP_SLOTS) - {"_segments", "_cell_length"}
    strip = LeanStrip([Segment("abc")], 3)
    shared = {id(getattr(strip, name)) for name in CACHE_SLOTS}
    assert len(shared) == 1
    assert isinstance(strip._crop_cache, NoCache)
    for name, value in PLAIN_SLOTS.items():
        assert getattr(strip, name) == value


def test_strip_stores_into_its_caches_only_through_set_or_item_assignment():
    source = inspect.getsource(Strip)
    calls = set(re.findall(r"self\.(_\w+_cache)\.(\w+)\(", source))
    assert {method for _, method in calls} <= {"get"}, (REVIEW, sorted(calls))
    stores = set(re.findall(r"self\.(_\w+_cache)\[[^\]]*\]\s*=", source))
    assert stores <= CACHE_SLOTS, (REVIEW, sorted(stores))
    for name in ("set", "__setitem__"):
        assert name in vars(FIFOCache), REVIEW
        assert name in vars(NoCache)


def _ops(strip: Strip, console: Console) -> list:
    """What Textual does with a painted line, every call twice (the second
    would be answered from a memo cache on a plain Strip)."""
    style = Style(color="red", bgcolor="blue")
    results = []
    for _ in range(2):
        results += [
            strip.text, strip.cell_length, list(strip), len(strip),
            strip.crop(1, 5), strip.crop(0, 3), strip.divide([2, 4]),
            strip.apply_style(style), strip.apply_filter(DimFilter(), Color(0, 0, 0)),
            strip.apply_filter(ANSI_FILTER, Color(0, 0, 0)),
            strip.adjust_cell_length(9), strip.adjust_cell_length(4, style),
            strip.crop_extend(0, 8, None), strip.crop_extend(2, 10, style),
            strip.extend_cell_length(12), strip.simplify(), strip.discard_meta(),
            strip.apply_offsets(1, 2), strip.link_ids, strip.render(console),
            strip.cell_count,
        ]
    return results


def test_a_lean_strip_behaves_like_a_strip_and_its_shared_cache_stays_empty():
    console = Console(width=80, color_system="truecolor", force_terminal=True, legacy_windows=False)
    segments = [Segment("he", Style(bold=True)), Segment("llo w"), Segment("orld", Style(color="green"))]
    plain = Strip(list(segments), 11)
    lean = LeanStrip(list(segments), 11)
    assert _ops(lean, console) == _ops(plain, console)
    shared = lean._crop_cache
    assert len(shared) == 0, "a lean strip stored into the shared cache"
    # a second lean strip with other content is not answered from the first one's results
    other = LeanStrip([Segment("0123456789a")], 11)
    assert other.crop(1, 5).text == "1234"
    assert other.divide([2, 4])[1].text == "23"
    assert len(shared) == 0


def test_lines_drawn_alike_are_one_lean_line_and_the_table_of_them_stays_bounded():
    red = Style(color="red")
    line = drawn_line((Segment("ab", red), Segment("  ")), 4)
    assert type(line) is LeanStrip and line.text == "ab  " and line.cell_length == 4
    assert drawn_line((Segment("ab", Style(color="red")), Segment("  ")), 4) is line
    assert drawn_line((Segment("ab", Style(color="blue")), Segment("  ")), 4) is not line
    assert drawn_line((Segment("ab", red), Segment("   ")), 5) is not line
    assert blank_line(4, red) is drawn_line((Segment("    ", red),), 4)
    assert list(blank_line(4, red)) == list(Strip.blank(4, red))
    # control codes given in a list cannot be a key: drawn anew, not refused
    bell = (Segment("", None, [(1,)]),)
    assert drawn_line(bell, 0) is not drawn_line(bell, 0)
    for k in range(2 * DRAWN_LINES + 3):
        drawn_line((Segment(f"{k:>6}"),), 6)
        assert len(lean_strip._DRAWN) <= DRAWN_LINES
