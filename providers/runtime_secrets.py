"""Secrets a provider learns only at request time: an OAuth access token
(Vertex AI), AWS credentials from botocore's chain and a request's signature
(Bedrock). The core scrubs what it can read from the environment before a run
(`ModelConfig.secrets`); these it never sees, so the provider takes them out
of its own events (`RuntimeSecretsGuard`) before they leave it."""

from __future__ import annotations

import json
from time import perf_counter
from typing import Any

from providers.events import (
    Finish,
    ReasoningDelta,
    Retrying,
    ServedBy,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCall,
)
from providers.secrets import MIN_FRAGMENT, HeldBack, scrubber_for



class RuntimeSecretsGuard:
    """Takes `secrets` out of every string a server chose, before the events
    leave the provider. Streamed text and reasoning go through `HeldBack` (a
    secret cut across deltas is still found), flushed before any other event;
    the other fields are scrubbed whole."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        kept = tuple(dict.fromkeys(s for s in secrets if s and len(s) >= MIN_FRAGMENT))
        self.scrubber = scrubber_for(kept) if kept else None
        self.held = HeldBack(self.scrubber) if self.scrubber is not None else None
        self.last_t: dict[str, float] = {}   # per kind: when the text held back now began to arrive

    def events(self, ev: StreamEvent) -> list[StreamEvent]:
        if self.scrubber is None or self.held is None:
            return [ev]
        s = self.scrubber.scrub
        if isinstance(ev, (TextDelta, ReasoningDelta)):
            # text held back is released stamped with when its first character came (time to first token)
            first = self.last_t.get(ev.type) if self.held.pending.get(ev.type) else None
            shown = self.held.feed(ev.type, ev.text)
            if not shown:
                self.last_t[ev.type] = ev.t if first is None else first
                return []
            self.last_t[ev.type] = ev.t
            return [ev.model_copy(update={"text": shown, "t": ev.t if first is None else first})]
        out = self._flush()
        if isinstance(ev, ServedBy):
            ev = ev.model_copy(update={"model": _opt(s, ev.model), "system_fingerprint": _opt(s, ev.system_fingerprint)})
        elif isinstance(ev, Finish):
            ev = ev.model_copy(update={"reason": _opt(s, ev.reason)})
        elif isinstance(ev, ToolCall):
            args = ev.arguments
            if isinstance(args, str):
                args = s(args)
            elif self.scrubber.spans(text := json.dumps(args, ensure_ascii=False, default=str)):
                args = json.loads(s(text)) if isinstance(args, (dict, list)) else s(text)
            ev = ev.model_copy(update={"id": _opt(s, ev.id), "name": s(ev.name), "arguments": args,
                                       "signature": _opt(s, ev.signature)})
        elif isinstance(ev, (StreamError, Retrying)):
            ev = ev.model_copy(update={"message": s(ev.message)})
        out.append(ev)
        return out

    def _flush(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        assert self.held is not None
        for kind, cls in (("reasoning", ReasoningDelta), ("text", TextDelta)):
            rest = self.held.flush(kind)
            if rest:
                out.append(cls(text=rest, t=self.last_t.get(kind, perf_counter())))
        return out


def _opt(scrub: Any, value: str | None) -> str | None:
    return None if value is None else scrub(value)
