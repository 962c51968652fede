"""Markdown block splitting for a text stream: pure text in, pieces out.

Why this module exists: rendering a growing Markdown answer again on every
token is quadratic (see tui/stream_view.py). The stream view renders
each finished block once and only re-renders the small unfinished tail; this
module decides where blocks end. It is plain string work with no Textual or
Rich import, so the rules (block boundaries outside code fences, code
committed in chunks, limits on pathological lines and blocks) are tested on
their own, and the core can use them without the TUI.

The text fed here is already neutralised by the caller (`core.ground.text`); this
module never interprets it as markup, it only looks for line structure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CODE_CHUNK_CHARS", "CODE_CHUNK_LINES", "MAX_BLOCK_CHARS", "MAX_LINE_CHARS",
    "BlockSplitter", "Piece", "fenced_code_blocks",
]

MAX_LINE_CHARS = 8192      # an unterminated line longer than this is cut (10,000-column lines)
MAX_BLOCK_CHARS = 12_000   # a Markdown block longer than this is committed as plain text
CODE_CHUNK_LINES = 24      # code inside a fence is committed in chunks, seamlessly
CODE_CHUNK_CHARS = 4096

_FENCE_RE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
_HEADING_RE = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_ITEM_RE = re.compile(r"^ {0,1}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


@dataclass(slots=True)
class Piece:
    """A unit of text with one rendering: a committed block or the tail."""

    kind: str            # md | code | plain | reasoning | user | note | tool
    text: str
    gap: bool = True     # a blank line before it
    lang: str = ""       # code: lexer name
    first: bool = True   # code: carries the top padding; reasoning: carries the header
    last: bool = True    # code: carries the bottom padding


class BlockSplitter:
    """Incremental block splitter for one part (answer text or reasoning).

    Blocks end at blank lines (a list waits for the next non-indented line),
    before and after headings, at fences; fenced code is emitted in chunks
    of whole lines so a long code block never becomes a large tail.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind                  # "md" or "reasoning"
        self.plain = kind != "md"
        self.partial = ""
        self.lines: list[str] = []
        self.chars = 0
        self.block: str | None = None     # None | "md" | "list"
        self.blank_after = False
        self.gap = True
        self.fence: tuple[str, int, int] | None = None  # (char, length, indent)
        self.lang = ""
        self.code_first = True
        self.first_piece = True
        self.out: list[Piece] = []

    # -- feeding
    def feed(self, text: str) -> None:
        if "\n" not in text:
            self.partial += text
        else:
            lines = (self.partial + text).split("\n")
            self.partial = lines.pop()
            for line in lines:
                self._line(line)
        while len(self.partial) > MAX_LINE_CHARS:
            cut = self.partial.rfind(" ", MAX_LINE_CHARS // 2, MAX_LINE_CHARS)
            cut = cut + 1 if cut > 0 else MAX_LINE_CHARS
            head, self.partial = self.partial[:cut], self.partial[cut:]
            self._line(head, forced=True)

    def finish(self) -> None:
        if self.partial:
            line, self.partial = self.partial, ""
            self._line(line)
        if self.fence is not None:
            self._commit_code(last=True)
            self.fence = None
        else:
            self._commit()

    def take(self) -> list[Piece]:
        out, self.out = self.out, []
        return out

    def tail(self) -> Piece | None:
        """The unfinished block (complete lines plus the partial line)."""
        if self.fence is not None:
            lines = self.lines + ([self._dedent(self.partial)] if self.partial else [])
            if not lines and not self.code_first:
                return None
            return Piece("code", "\n".join(lines), gap=self.code_first, lang=self.lang,
                          first=self.code_first, last=True)
        if not self.lines and not self.partial.strip():
            return None
        text = "\n".join(self.lines + [self.partial]) if self.partial else "\n".join(self.lines)
        return self._piece(text, self.gap)

    # -- internals
    def _piece(self, text: str, gap: bool, kind: str | None = None) -> Piece:
        kind = kind or ("md" if not self.plain else self.kind)
        return Piece(kind, text, gap=gap, first=self.first_piece)

    def _commit(self, kind: str | None = None) -> None:
        if self.lines:
            self.out.append(self._piece("\n".join(self.lines), self.gap, kind))
            self.first_piece = False
        self.lines = []
        self.chars = 0
        self.block = None
        self.blank_after = False
        self.gap = True

    def _commit_code(self, last: bool) -> None:
        if self.lines or last:
            self.out.append(Piece("code", "\n".join(self.lines), gap=self.code_first,
                                   lang=self.lang, first=self.code_first, last=last))
            self.code_first = False
            self.first_piece = False
        self.lines = []
        self.chars = 0

    def _dedent(self, line: str) -> str:
        indent = self.fence[2] if self.fence else 0
        if indent:
            spaces = len(line) - len(line.lstrip(" \t"))
            return line[min(indent, spaces):]
        return line

    def _add(self, line: str) -> None:
        self.lines.append(line)
        self.chars += len(line) + 1

    def _line(self, line: str, forced: bool = False) -> None:
        if self.fence is not None:
            char, length, _indent = self.fence
            stripped = line.strip()
            if (not forced and stripped.startswith(char * length)
                    and stripped.strip(char) == ""):
                self._commit_code(last=True)
                self.fence = None
                return
            self._add(self._dedent(line))
            if len(self.lines) >= CODE_CHUNK_LINES or self.chars >= CODE_CHUNK_CHARS:
                self._commit_code(last=False)
            return

        stripped = line.strip()
        if self.plain:
            if not stripped:
                self._commit()
                return
            self._add(line)
            if self.chars > MAX_BLOCK_CHARS:
                self._commit()
                self.gap = False
            return

        if not stripped:
            if self.block == "list":
                self.blank_after = True
            else:
                self._commit()
            return
        if forced:
            self._plain_line(line)
            return
        fence = _FENCE_RE.match(line)
        if fence and not (fence.group(2)[0] == "`" and "`" in fence.group(3)):
            self._commit()
            self.fence = (fence.group(2)[0], len(fence.group(2)), len(fence.group(1)))
            info = fence.group(3).strip()
            self.lang = info.split()[0] if info else ""
            self.code_first = True
            return
        if _HEADING_RE.match(line):
            self._commit()
            self._add(line)
            self._commit()
            return
        if _ITEM_RE.match(line):
            continues_list = self.block == "list"
            self._commit()
            self.block = "list"
            self.gap = not continues_list
            self._add(line)
            return
        if self.block == "list" and self.blank_after:
            if line[:1] in (" ", "\t"):  # an indented paragraph inside the last item
                self._add("")
                self._add(line)
                self.blank_after = False
                return
            self._commit()
        self._plain_line(line)

    def _plain_line(self, line: str) -> None:
        if self.block is None:
            self.block = "md"
        self._add(line)
        if self.chars > MAX_BLOCK_CHARS:
            # A pathological block (a 1 MB paragraph, a huge table): show it as plain text.
            self._commit(kind="plain")
            self.gap = False


# ---------------------------------------------------------------------------
# Fenced code in finished text (for copy)

_CLOSE_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*$")


def fenced_code_blocks(text: str) -> list[str]:
    """Fenced code blocks in Markdown text (an unclosed last fence runs to the end)."""
    blocks: list[str] = []
    fence: tuple[str, int, int] | None = None
    body: list[str] = []
    for line in text.split("\n"):
        if fence is None:
            m = _FENCE_RE.match(line)
            if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                fence = (m.group(2)[0], len(m.group(2)), len(m.group(1)))
                body = []
            continue
        close = _CLOSE_FENCE.match(line)
        if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= fence[1]:
            blocks.append("\n".join(body))
            fence = None
            continue
        spaces = len(line) - len(line.lstrip(" \t"))
        body.append(line[min(fence[2], spaces):])
    if fence is not None:
        blocks.append("\n".join(body))
    return blocks
