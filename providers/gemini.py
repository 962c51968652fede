"""Gemini `models/{model}:streamGenerateContent`, in either of its two forms:
`?alt=sse` (one `GenerateContentResponse` per SSE event; the stream is
complete when a finish reason arrived) or the default streamed JSON array
(pretty-printed elements separated by `,`; complete at the closing `]`).
The form is chosen per provider (`stream_form`, default "sse"); the response
is read by its content type, so either body works with either request.
Parts marked `thought: true` are reasoning; `usageMetadata` is cumulative
(the last one wins); `functionCall` parts are tool calls (`id` usually absent).
The key goes in the `x-goog-api-key` header, never in the URL."""

from __future__ import annotations

from typing import Any, Literal

import httpx

from providers.events import ChatRequest, ErrorKind, ReasoningDelta, StreamEvent, TextDelta, ToolCall
from providers.http import (
    Accumulated,
    HttpProvider,
    RetryPolicy,
    StreamParser,
    kind_for_status,
    short,
)
from providers.model_config import ModelConfig
from providers.sse import DecodeError, JSONArrayDecoder, SSEDecoder
from providers.sse import loads as fast_loads

_loads = fast_loads
_STATUS_KINDS = {
    "RESOURCE_EXHAUSTED": ErrorKind.rate_limited,
    "UNAVAILABLE": ErrorKind.overloaded,
    "INTERNAL": ErrorKind.server,
    "DEADLINE_EXCEEDED": ErrorKind.timeout,
    "UNAUTHENTICATED": ErrorKind.auth,
    "PERMISSION_DENIED": ErrorKind.auth,
    "NOT_FOUND": ErrorKind.not_found,
    "INVALID_ARGUMENT": ErrorKind.bad_request,
}


class GeminiProvider(HttpProvider):
    name = "gemini"
    protocol = "Gemini streamGenerateContent"

    def __init__(self, cfg: ModelConfig, *, stream_form: Literal["sse", "json"] = "sse",
                 retry: RetryPolicy | None = None, transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(cfg, retry=retry, transport=transport)
        if stream_form not in ("sse", "json"):
            raise ValueError(f"stream_form must be 'sse' or 'json', not {stream_form!r}")
        self.stream_form = stream_form

    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        contents: list[dict[str, Any]] = []
        for m in request.messages:
            parts: list[dict[str, Any]] = [{"text": m.content}] if m.content or not m.images else []
            parts += [{"inlineData": {"mimeType": i.mime, "data": i.data}} for i in m.images]
            contents.append({"role": "model" if m.role == "assistant" else "user", "parts": parts})
        body: dict[str, Any] = {"contents": contents}
        if request.system:
            body["systemInstruction"] = {"parts": [{"text": request.system}]}
        p = self.params(request)
        gen: dict[str, Any] = {}
        if p.temperature is not None:
            gen["temperature"] = p.temperature
        if p.top_p is not None:
            gen["topP"] = p.top_p
        if p.max_tokens is not None:
            gen["maxOutputTokens"] = p.max_tokens
        if p.seed is not None:
            gen["seed"] = p.seed
        if p.stop:
            gen["stopSequences"] = list(p.stop)
        if gen:
            body["generationConfig"] = gen
        for k, v in {**self.cfg.extra_body, **(p.extra_body or {})}.items():
            if k == "generationConfig" and isinstance(v, dict):
                body["generationConfig"] = {**gen, **v}
            else:
                body[k] = v
        model = self.cfg.model.removeprefix("models/")
        url = f"{self.base_url}/models/{model}:streamGenerateContent"
        headers: dict[str, str] = {}
        if self.stream_form == "sse":
            url += "?alt=sse"
            headers["accept"] = "text/event-stream"
        else:
            headers["accept"] = "application/json"
        if key:
            headers["x-goog-api-key"] = key
        return url, headers, body

    def parser(self) -> StreamParser:
        return GeminiParser()


class GeminiParser(StreamParser):
    protocol = "Gemini streamGenerateContent"

    def __init__(self) -> None:
        super().__init__()
        self.acc = Accumulated()
        self.sse: SSEDecoder | None = None
        self.array: JSONArrayDecoder | None = None
        self.finished = False     # a finish reason (or a prompt block) arrived

    def start(self, content_type: str) -> None:
        if "event-stream" in content_type:
            self.sse = SSEDecoder()
        elif "json" in content_type:
            self.array = JSONArrayDecoder()

    def feed(self, chunk: bytes, t: float) -> list[StreamEvent]:
        if self.sse is None and self.array is None:
            # No usable content type: sniff the first byte.
            head = chunk.lstrip()
            if not head:
                return []
            if head[:1] == b"[":
                self.array = JSONArrayDecoder()
            else:
                self.sse = SSEDecoder()
        out: list[StreamEvent] = []
        if self.sse is not None:
            for _event, data in self.sse.feed(chunk):
                try:
                    obj = _loads(data)
                except ValueError as exc:
                    raise DecodeError(f"malformed JSON in an SSE event: {exc.msg} (near {data[:60]!r})") from None
                if self._element(obj, t, out):
                    return out
            return out
        array = self.array
        assert array is not None
        for obj in array.feed(chunk):
            if self._element(obj, t, out):
                return out
        if array.closed:
            out += self._closing(t) if self.finished else [self.cut(t, "the closing ] of the JSON array")]
        return out

    def _element(self, obj: Any, t: float, out: list[StreamEvent]) -> bool:
        if not isinstance(obj, dict):
            raise DecodeError("a stream element that is not a JSON object")
        self.seen_any = True
        err = obj.get("error")
        if err:
            out.append(self._error(err, t))
            return True
        cands = obj.get("candidates")
        if cands:
            cand = cands[0]
            content = cand.get("content") or {}
            for part in content.get("parts") or ():
                text = part.get("text")
                if text:
                    if part.get("thought"):
                        out.append(ReasoningDelta(text=text, t=t))
                    else:
                        out.append(TextDelta(text=text, t=t))
                    self.shown = True
                call = part.get("functionCall")
                if call:
                    out.append(ToolCall(id=call.get("id"), name=call.get("name") or "", arguments=call.get("args") or {}))
                    self.shown = True
            reason = cand.get("finishReason")
            if reason:
                self.acc.finish_reason = reason
                self.finished = True
        feedback = obj.get("promptFeedback")
        if feedback and feedback.get("blockReason"):
            self.acc.finish_reason = self.acc.finish_reason or feedback["blockReason"]
            self.finished = True
        usage = obj.get("usageMetadata")
        if usage:
            acc = self.acc
            acc.input_tokens = usage.get("promptTokenCount")
            acc.output_tokens = usage.get("candidatesTokenCount")
            acc.reasoning_tokens = usage.get("thoughtsTokenCount")
        return False

    def _error(self, err: Any, t: float):
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("status") or "error")
            status = err.get("status")
            code = err.get("code")
            kind = _STATUS_KINDS.get(status) if isinstance(status, str) else None
            if kind is None:
                kind = kind_for_status(code, message) if isinstance(code, int) and code >= 400 else ErrorKind.server
        else:
            message, kind = str(err), ErrorKind.server
        return self.failed(t, kind, f"error in stream: {short(message)}")

    def _closing(self, t: float) -> list[StreamEvent]:
        self.done = True
        return self.acc.closing(t)

    def end(self, t: float) -> list[StreamEvent]:
        if self.sse is not None:
            if self.finished and not self.sse.pending:
                return self._closing(t)
            if self.seen_any and not self.sse.pending:
                return [self.cut(t, "end of the SSE body")]
            return [self.truncated(t, "a finish reason")]
        return [self.truncated(t, "the closing ] of the JSON array")]
