"""Comparing two or more answers line by line: which lines they share, which
only some of them have, and within a differing line which words, numbers and
symbols differ.

Why this module exists: the compare view (`tui/compare_screen.py`) must show
the same alignment whatever draws it, blind or not, and the alignment is
logic worth testing on its own (no Textual here; labels are whatever the
caller passes, so a blind view passes labels only).

How: the first answer is the reference. Each other answer is aligned to it
with `difflib.SequenceMatcher` over lines (trailing spaces ignored); a
replaced block pairs its lines in order, and lines an answer has that the
reference lacks become rows of their own where they occur. Within a row that
differs, each line is split into tokens (numbers whole, words, single
symbols) and a token counts as changed when it is not matched against some
other answer's line; a line that some answers lack is changed whole. Lines
inside fenced code blocks are marked as code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

__all__ = ["Cell", "Comparison", "Gap", "Row", "compare", "tokens"]

_TOKEN = re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?%?|\w+|\s+|[^\w\s]")
_NUMBER = re.compile(r"[-+]?\d")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


@dataclass(frozen=True, slots=True)
class Cell:
    """One answer's line in a row. `text` None: the answer has no line here.
    `changed`: (start, end) character spans that differ from another answer."""

    text: str | None
    changed: tuple[tuple[int, int], ...] = ()
    code: bool = False
    numbers: bool = False       # a changed token is a number


@dataclass(frozen=True, slots=True)
class Row:
    cells: tuple[Cell, ...]
    same: bool

    @property
    def code(self) -> bool:
        return any(c.code for c in self.cells)

    @property
    def numbers(self) -> bool:
        return any(c.numbers for c in self.cells)


@dataclass(frozen=True, slots=True)
class Gap:
    """Identical rows left out of a differences-only view."""

    rows: int


@dataclass(frozen=True)
class Comparison:
    labels: tuple[str, ...]
    rows: tuple[Row, ...]
    differing_rows: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "differing_rows", sum(1 for r in self.rows if not r.same))

    @property
    def identical(self) -> bool:
        return self.differing_rows == 0

    def view(self, differences_only: bool = False, context: int = 0) -> list[Row | Gap]:
        """The rows to show: all of them, or only the differing ones (with
        `context` identical rows around each) and a `Gap` for each run left out."""
        if not differences_only:
            return list(self.rows)
        keep = [not r.same for r in self.rows]
        if context:
            near = list(keep)
            for i, k in enumerate(keep):
                if k:
                    for j in range(max(0, i - context), min(len(keep), i + context + 1)):
                        near[j] = True
            keep = near
        out: list[Row | Gap] = []
        hidden = 0
        for row, shown in zip(self.rows, keep, strict=True):
            if shown:
                if hidden:
                    out.append(Gap(hidden))
                    hidden = 0
                out.append(row)
            else:
                hidden += 1
        if hidden:
            out.append(Gap(hidden))
        return out

    def summary(self) -> str:
        """One line: how many rows differ, and where numbers or code do."""
        if not self.rows:
            return "no text to compare"
        if self.identical:
            return f"identical ({len(self.rows)} lines)"
        numbers = sum(1 for r in self.rows if not r.same and r.numbers)
        code = sum(1 for r in self.rows if not r.same and r.code)
        parts = [f"{self.differing_rows} of {len(self.rows)} lines differ"]
        if numbers:
            parts.append(f"numbers in {numbers}")
        if code:
            parts.append(f"code in {code}")
        return ", ".join(parts)


def tokens(line: str) -> list[str]:
    """A line as tokens: numbers whole (signs, decimals, exponents, %), words,
    runs of spaces, single symbols. Joined they give the line back."""
    return _TOKEN.findall(line)


def _code_lines(lines: list[str]) -> list[bool]:
    """Which lines are in a fenced code block (the fences included)."""
    out, fence = [], None
    for line in lines:
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            out.append(True)
        elif fence is not None:
            out.append(True)
            if m and m.group(1).startswith(fence) and not line.strip()[len(m.group(1)):].strip():
                fence = None
        else:
            out.append(False)
    return out


def _align(ref: list[str], other: list[str]) -> tuple[list[int | None], list[list[int]]]:
    """(for each reference line, the other's line paired with it or None;
    for each slot 0..len(ref), the other's lines inserted before that reference line)."""
    pair: list[int | None] = [None] * len(ref)
    inserted: list[list[int]] = [[] for _ in range(len(ref) + 1)]
    matcher = SequenceMatcher(None, [s.rstrip() for s in ref], [s.rstrip() for s in other], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for t in range(i2 - i1):
                pair[i1 + t] = j1 + t
        elif op == "replace":
            n = min(i2 - i1, j2 - j1)
            for t in range(n):
                pair[i1 + t] = j1 + t
            inserted[i2].extend(range(j1 + n, j2))
        elif op == "insert":
            inserted[i1].extend(range(j1, j2))
    return pair, inserted


def _changed_spans(line: str, others: Sequence[str]) -> tuple[tuple[tuple[int, int], ...], bool]:
    """Character spans of `line` whose tokens are not matched in some other
    line (spaces between two changed tokens join them); whether a changed
    token is a number."""
    toks = tokens(line)
    changed = [False] * len(toks)
    for other in others:
        m = SequenceMatcher(None, toks, tokens(other), autojunk=False)
        matched = [False] * len(toks)
        for block in m.get_matching_blocks():
            for t in range(block.a, block.a + block.size):
                matched[t] = True
        for t, ok in enumerate(matched):
            if not ok and toks[t].strip():
                changed[t] = True
    spans: list[tuple[int, int]] = []
    numbers = False
    pos = 0
    start = end = -1
    for tok, ch in zip(toks, changed, strict=True):
        if ch:
            numbers = numbers or bool(_NUMBER.match(tok))
            if start < 0:
                start = pos
            end = pos + len(tok)
        elif tok.strip() and start >= 0:
            spans.append((start, end))
            start = -1
        pos += len(tok)
    if start >= 0:
        spans.append((start, end))
    return tuple(spans), numbers


def _row(texts: list[str | None], code: list[bool]) -> Row:
    present = [t for t in texts if t is not None]
    keys = {t.rstrip() for t in present}
    if len(present) == len(texts) and len(keys) == 1:
        return Row(tuple(Cell(t, (), c) for t, c in zip(texts, code, strict=True)), same=True)
    cells = []
    whole = len(present) < len(texts)     # some answers lack this line: it differs whole
    for i, (text, is_code) in enumerate(zip(texts, code, strict=True)):
        if text is None:
            cells.append(Cell(None, (), False))
            continue
        spans: tuple[tuple[int, int], ...]
        if whole or not text.strip():
            spans = ((0, len(text.rstrip())),) if text.strip() else ()
            numbers = any(_NUMBER.match(t) for t in tokens(text))
        else:
            spans, numbers = _changed_spans(text, [o for j, o in enumerate(texts) if j != i and o is not None])
        cells.append(Cell(text, spans, is_code, numbers))
    return Row(tuple(cells), same=False)


def compare(answers: Sequence[str], labels: Sequence[str] | None = None) -> Comparison:
    """Align `answers` (two or more) line by line; `labels` name the columns
    (default A, B, ...)."""
    from core.stats.votes import labels_for   # the labels' one owner, loaded only when a default is needed

    if len(answers) < 2:
        raise ValueError("comparing needs two answers or more")
    names = tuple(labels) if labels is not None else tuple(labels_for(len(answers)))
    if len(names) != len(answers):
        raise ValueError("one label per answer")
    lines = [a.splitlines() for a in answers]
    codes = [_code_lines(ls) for ls in lines]
    ref = lines[0]
    aligned = [_align(ref, other) for other in lines[1:]]
    rows: list[Row] = []
    n = len(answers)
    for slot in range(len(ref) + 1):
        extra = max((len(ins[slot]) for _, ins in aligned), default=0)
        for r in range(extra):
            texts: list[str | None] = [None]
            code = [False]
            for k, (_, ins) in enumerate(aligned, start=1):
                j = ins[slot][r] if r < len(ins[slot]) else None
                texts.append(lines[k][j] if j is not None else None)
                code.append(codes[k][j] if j is not None else False)
            rows.append(_row(texts, code))
        if slot < len(ref):
            texts = [ref[slot]]
            code = [codes[0][slot]]
            for k, (pair, _) in enumerate(aligned, start=1):
                j = pair[slot]
                texts.append(lines[k][j] if j is not None else None)
                code.append(codes[k][j] if j is not None else False)
            rows.append(_row(texts, code))
    assert all(len(r.cells) == n for r in rows)
    return Comparison(names, tuple(rows))
