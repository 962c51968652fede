"""The live figures shown in a pane header (time to first token, tokens/s,
tokens, cost), computed from a `StreamResult` or a saved `OutputRecord`.
Kept apart from widgets so replay, the chat panes and tests format alike."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from providers.events import StreamResult

if TYPE_CHECKING:
    from core.stats.votes import OutputRecord


def format_figures(ttft_ms: float | None, tokens: int | None, estimated: bool,
                   tokens_per_s: float | None, cost: float | None = None, *, streamed: bool = True) -> str:
    """'ttft 412 ms · 38 tok/s · 512 tok' with the parts that are known; an
    answer that came as one whole body (a gateway that does not stream) says
    'not streamed' where its time to first token would be."""
    parts: list[str] = [] if streamed else ["not streamed"]
    if ttft_ms is not None:
        parts.append(f"ttft {ttft_ms:,.0f} ms")
    if tokens_per_s is not None:
        parts.append(f"{tokens_per_s:,.0f} tok/s")
    if tokens:
        parts.append(f"{'~' if estimated else ''}{tokens:,} tok")
    if cost:
        parts.append(f"${cost:.4f}")
    return " · ".join(parts)


def live_figures(result: StreamResult, *, now: float | None = None) -> str:
    """Figures of a stream in flight or finished (tokens/s measured so far)."""
    tokens, estimated = result.output_tokens_or_estimate()
    rate = result.tokens_per_s()
    if rate is None and result.first_token_t is not None and result.end_t is None:
        span = (time.perf_counter() if now is None else now) - result.first_token_t
        rate = tokens / span if span > 0.05 and tokens > 1 else None
    return format_figures(result.ttft_ms, tokens, estimated, rate, streamed=result.streamed)


def record_figures(out: OutputRecord) -> str:
    """Figures of a saved answer (an `OutputRecord`)."""
    rate = None
    if out.duration_ms and out.ttft_ms is not None and out.output_tokens:
        span = (out.duration_ms - out.ttft_ms) / 1000
        rate = out.output_tokens / span if span > 0 and out.output_tokens > 1 else None
    return format_figures(out.ttft_ms, out.output_tokens, bool(out.tokens_estimated), rate, out.cost,
                          streamed=out.streamed)
