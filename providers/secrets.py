"""Finding an API key in text, however it was cut, wrapped or echoed.

A server may echo the key in an error body, an answer or its reasoning; our
own messages may cut that text short or fold its line breaks. So a key is
looked for as any run of at least `MIN_FRAGMENT` consecutive characters of it
(a cut key still counts), with whitespace allowed between them (a key wrapped
over lines still counts), and every such run is replaced by `REDACTED`.

`KeyScrubber.scrub` does it to a whole text (error messages; an answer at each
checkpoint and at its end). `HeldBack` does it to text as it streams to the
screen: it holds back the end of what came so far while that end could be the
start of the key, so no fragment is shown before the rest has arrived.

Finding runs: any run of `MIN_FRAGMENT` key characters contains one of the
key's pieces of half that length at aligned offsets (0, 4, 8, ...), so those
pieces are searched with `str.find` (C speed, a few dozen searches per text)
and each hit is extended both ways against the key.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right

__all__ = ["MIN_FRAGMENT", "REDACTED", "KeyScrubber", "KeysScrubber", "HeldBack", "GrowingText", "key_scrubber",
           "scrubber_for"]

#: The shortest run of a key's characters that is treated as the key.
MIN_FRAGMENT = 8
REDACTED = "[redacted]"
_WS = re.compile(r"\s+")


class KeyScrubber:
    """Finds and removes runs of one key's characters (see the module doc)."""

    __slots__ = ("key", "min", "_piece", "_pieces")

    def __init__(self, key: str) -> None:
        self.key = _WS.sub("", key)
        self.min = max(1, min(MIN_FRAGMENT, len(self.key)))
        self._piece = (self.min + 1) // 2
        pieces: dict[str, list[int]] = {}
        for i in range(0, len(self.key) - self._piece + 1, self._piece):
            pieces.setdefault(self.key[i:i + self._piece], []).append(i)
        self._pieces = pieces     # aligned piece -> its offsets in the key

    def spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) in `text` of every run of key characters long enough to
        count (whitespace inside allowed), merged, in order."""
        flat = "".join(text.split())    # 4x faster than _WS.sub; the same characters (str.isspace)
        if len(flat) == len(text):
            flat = text
        if len(flat) < self.min:
            return []
        key, b, n, k = self.key, self._piece, len(flat), len(self.key)
        found: list[tuple[int, int]] = []
        for piece, offsets in self._pieces.items():
            p = flat.find(piece)
            while p >= 0:
                for i in offsets:
                    left = 0
                    while left < i and left < p and flat[p - left - 1] == key[i - left - 1]:
                        left += 1
                    right = 0
                    while i + b + right < k and p + b + right < n and flat[p + b + right] == key[i + b + right]:
                        right += 1
                    if left + b + right >= self.min:
                        found.append((p - left, p + b + right))
                p = flat.find(piece, p + 1)
        if not found:
            return []
        found.sort()
        merged = [found[0]]
        for start, end in found[1:]:
            if start <= merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end)
            else:
                merged.append((start, end))
        if flat is text:
            return merged
        # Back from whitespace-free positions to positions in `text`.
        before: list[int] = []   # per whitespace run: non-space characters before it
        upto: list[int] = []     # per whitespace run: whitespace characters up to its end
        total = 0
        for m in _WS.finditer(text):
            before.append(m.start() - total)
            total += m.end() - m.start()
            upto.append(total)

        def at(i: int) -> int:
            r = bisect_right(before, i)
            return i + (upto[r - 1] if r else 0)

        return [(at(s), at(e - 1) + 1) for s, e in merged]

    def scrub(self, text: str) -> str:
        """`text` with every run of the key's characters replaced."""
        if not text:
            return text
        return _redact(text, self.spans(text))

    def hold_from(self, text: str) -> int:
        """Where the longest ending of `text` that could be the start of the key
        (whitespace aside) begins; `len(text)` when none could."""
        key = self.key
        cut = i = len(text)
        frag = ""
        while i > 0 and len(frag) < len(key):
            i -= 1
            c = text[i]
            if c.isspace():
                continue
            candidate = c + frag
            if candidate not in key:
                break
            frag, cut = candidate, i
        return cut


class KeysScrubber:
    """Several keys at once (every key configured in a session): the union of
    their runs; an ending is held back while it could start any of them."""

    __slots__ = ("scrubbers",)

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.scrubbers = tuple(KeyScrubber(k) for k in keys)

    def spans(self, text: str) -> list[tuple[int, int]]:
        found = sorted(span for s in self.scrubbers for span in s.spans(text))
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def scrub(self, text: str) -> str:
        return _redact(text, self.spans(text)) if text else text

    def hold_from(self, text: str) -> int:
        return min(s.hold_from(text) for s in self.scrubbers)


def _redact(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    out, pos = [], 0
    for start, end in spans:
        out.append(text[pos:start])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)


class HeldBack:
    """Streamed text (per kind: "text", "reasoning") in, text safe to show out.

    `feed` returns what can be shown now: everything but an ending that could
    still grow into a run of the key, with complete runs replaced. `flush`
    returns the rest at the end of the stream. What is shown, joined, never
    holds `MIN_FRAGMENT` consecutive characters of the key.
    """

    __slots__ = ("scrubber", "pending")

    def __init__(self, scrubber: KeyScrubber | KeysScrubber) -> None:
        self.scrubber = scrubber
        self.pending: dict[str, str] = {}

    def feed(self, kind: str, piece: str) -> str:
        text = self.pending.get(kind, "") + piece
        s = self.scrubber
        cut = s.hold_from(text)
        spans = s.spans(text)
        if spans and not text[spans[-1][1]:].strip():   # a run at the end may still grow: hold all of it
            cut = min(cut, spans[-1][0])
            spans = spans[:-1]
        for start, end in spans:
            if start < cut < end:   # a finished run across the cut: show it redacted, hold what follows
                cut = end
        self.pending[kind] = text[cut:]
        return _redact(text[:cut], [span for span in spans if span[1] <= cut])

    def flush(self, kind: str) -> str:
        return self.scrubber.scrub(self.pending.pop(kind, ""))


class GrowingText:
    """The scrubbed form of a text that only grows (an answer being saved once
    a second): each call scrubs only what was added since the last one, so a
    long answer costs linear time overall, not a full pass per checkpoint.
    The result equals `KeyScrubber.scrub` of the whole text."""

    __slots__ = ("held", "fed", "done")

    def __init__(self, scrubber: KeyScrubber | KeysScrubber) -> None:
        self.held = HeldBack(scrubber)
        self.fed = 0          # characters of the text fed so far
        self.done = ""        # their scrubbed form, final (the held ending aside)

    def of(self, text: str) -> str:
        """The scrubbed form of `text`, which extends the text given last time."""
        if len(text) > self.fed:
            self.done += self.held.feed("t", text[self.fed:])
            self.fed = len(text)
        return self.done + self.held.scrubber.scrub(self.held.pending.get("t", ""))


@functools.lru_cache(maxsize=32)
def key_scrubber(key: str) -> KeyScrubber:
    return KeyScrubber(key)


@functools.lru_cache(maxsize=32)
def scrubber_for(keys: tuple[str, ...]) -> KeyScrubber | KeysScrubber:
    """One scrubber for every key in `keys` (at least one)."""
    return key_scrubber(keys[0]) if len(keys) == 1 else KeysScrubber(keys)
