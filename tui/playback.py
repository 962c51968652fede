"""Rebuild the chunks of a saved answer with their recorded timing, so an
answer can be played back at 1x, 4x or instantly. Pure functions: the
replay screen only sleeps and appends."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chunk:
    at_ms: int        # when it arrived, ms after the request went out
    kind: str         # "reasoning" or "text"
    text: str


def answer_chunks(text: str, reasoning: str | None, chunk_ms: list[int], chunk_chars: list[int]) -> list[Chunk]:
    """The deltas of one answer in arrival order.

    Recorded chunk sizes cover reasoning first, then text (that is how the
    stream arrives). When the record does not add up (an interrupted answer,
    an import without timings) the text is split into even pieces instead.
    """
    reasoning = reasoning or ""
    whole = reasoning + text
    if chunk_chars and len(chunk_ms) == len(chunk_chars) and sum(chunk_chars) == len(whole):
        out: list[Chunk] = []
        pos = 0
        for at, n in zip(chunk_ms, chunk_chars, strict=True):
            piece = whole[pos:pos + n]
            split = len(reasoning) - pos
            if 0 < split < n:   # a delta never spans both; be safe anyway
                out.append(Chunk(at, "reasoning", piece[:split]))
                out.append(Chunk(at, "text", piece[split:]))
            else:
                out.append(Chunk(at, "reasoning" if pos < len(reasoning) else "text", piece))
            pos += n
        return out
    pieces: list[Chunk] = []
    step = 16
    end = chunk_ms[-1] if chunk_ms else 0
    total = max(1, len(whole))
    offset = 0
    for kind, part in (("reasoning", reasoning), ("text", text)):
        for start in range(0, len(part), step):
            pieces.append(Chunk(round(end * (offset + start) / total), kind, part[start:start + step]))
        offset += len(part)
    return pieces


def delays(chunks: list[Chunk], speed: float) -> list[float]:
    """Seconds to wait before each chunk at `speed` (inf = no waiting)."""
    if speed == float("inf"):
        return [0.0] * len(chunks)
    out, last = [], 0
    for c in chunks:
        out.append(max(0, c.at_ms - last) / 1000 / speed)
        last = max(last, c.at_ms)
    return out
