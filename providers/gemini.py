"""Gemini `models/{model}:streamGenerateContent`, in either of its two forms:
`?alt=sse` (one `GenerateContentResponse` per SSE event; the stream is
complete when a finish reason arrived) or the default streamed JSON array
(pretty-printed elements separated by `,`; complete at the closing `]`).
The form is chosen per provider (`stream_form`, default "sse"); the response
is read by its first byte (`[`: the array, else SSE), so either body works
with either request. A whole `GenerateContentResponse` object (`{...}`: a
gateway that does not stream) is read as one message.
Parts marked `thought: true` are reasoning; `usageMetadata` is cumulative
(the last one wins); `functionCall` parts are tool calls (`id` usually absent).
The key goes in the `x-goog-api-key` header, never in the URL."""

from __future__ import annotations

from typing import Any, Literal

import httpx

from providers.events import (
    ChatRequest,
    ErrorKind,
    Message,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    arguments_object,
    wire_params,
)
from providers.http import (
    Accumulated,
    HttpProvider,
    RetryPolicy,
    StreamParser,
    kind_for_status,
    short,
)
from providers.model_config import ModelConfig
from providers.sse import DecodeError, JSONArrayDecoder, SSEDecoder, malformed_json
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
            if m.tool_calls or m.tool_results:
                parts = _tool_parts(m)
            else:
                parts = [{"text": m.content}] if m.content or not m.images else []
                parts += [{"inlineData": {"mimeType": i.mime, "data": i.data}} for i in m.images]
            role = "model" if m.role == "assistant" else "user"
            if contents and contents[-1]["role"] == role:   # results, then the user's next message: one turn
                contents[-1]["parts"] += parts
            else:
                contents.append({"role": role, "parts": parts})
        body: dict[str, Any] = {"contents": contents}
        if request.system:
            body["systemInstruction"] = {"parts": [{"text": request.system}]}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [
                {"name": t.name, "description": t.description, "parameters": t.parameters} for t in request.tools]}]
        p = self.params(request)
        gen: dict[str, Any] = {}
        if request.response_format is not None:
            gen["responseMimeType"] = "application/json"
            gen["responseSchema"] = request.response_format.schema_
        gen.update(wire_params(p, "gemini"))
        if gen:
            body["generationConfig"] = gen
        for k, v in {**self.cfg.extra_body, **(p.extra_body or {})}.items():
            if k == "generationConfig" and isinstance(v, dict):
                body["generationConfig"] = {**gen, **v}
            else:
                body[k] = v
        url = f"{self.model_url()}:streamGenerateContent"
        headers: dict[str, str] = {}
        if self.stream_form == "sse":
            url += "?alt=sse"
            headers["accept"] = "text/event-stream"
        else:
            headers["accept"] = "application/json"
        return url, headers, body

    def model_url(self) -> str:
        """The model's resource URL, before `:streamGenerateContent` (Vertex AI's has a project and region)."""
        return f"{self.base_url}/models/{self.cfg.model.removeprefix('models/')}"

    def parser(self) -> StreamParser:
        return GeminiParser()


def _tool_parts(m: Message) -> list[dict[str, Any]]:
    """A model turn's text and `functionCall` parts (each with the
    `thoughtSignature` it came with), or the `functionResponse` parts that
    answer them. An id goes back only where the server gave one."""
    if m.role == "tool":
        out = []
        for r in m.tool_results:
            response: dict[str, Any] = {"name": r.name, "response": (
                r.content if isinstance(r.content, dict) else {"output": r.content})}
            if r.id:
                response["id"] = r.id
            out.append({"functionResponse": response})
        return out
    parts: list[dict[str, Any]] = [{"text": m.content}] if m.content else []
    for c in m.tool_calls:
        call: dict[str, Any] = {"name": c.name, "args": arguments_object(c.arguments)}
        if c.id:
            call["id"] = c.id
        part: dict[str, Any] = {"functionCall": call}
        if c.signature:
            part["thoughtSignature"] = c.signature
        parts.append(part)
    return parts


class GeminiParser(StreamParser):
    protocol = "Gemini streamGenerateContent"
    whole_starts = b"{"       # "[" starts the JSON-array stream

    def __init__(self) -> None:
        super().__init__()
        self.acc = Accumulated()
        self.sse: SSEDecoder | None = None
        self.array: JSONArrayDecoder | None = None
        self.finished = False     # a finish reason (or a prompt block) arrived

    def feed(self, chunk: bytes, t: float) -> list[StreamEvent]:
        if self.sse is None and self.array is None:
            # The first byte tells the form, whatever the content type says.
            head = chunk.lstrip().removeprefix(b"\xef\xbb\xbf").lstrip()
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
                    raise malformed_json("an SSE event", exc, data) from None
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
        model = obj.get("modelVersion")
        if model is not None and model != self._served[0]:
            self.served(out, model)
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
                    signature = part.get("thoughtSignature")
                    out.append(ToolCall(id=call.get("id"), name=call.get("name") or "", arguments=call.get("args") or {},
                                        signature=signature if isinstance(signature, str) else None))
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

    def whole(self, obj: dict[str, Any], t: float) -> list[StreamEvent] | None:
        """A non-streamed `GenerateContentResponse` (`generateContent`'s reply,
        one element of the stream), or `{"error": ...}`."""
        if not any(k in obj for k in ("candidates", "promptFeedback", "usageMetadata", "error")):
            return None
        out: list[StreamEvent] = []
        if self._element(obj, t, out):
            return out
        return out + self._closing(t)

    def end(self, t: float) -> list[StreamEvent]:
        if self.sse is not None:
            if self.finished and not self.sse.pending:
                return self._closing(t)
            if self.seen_any and not self.sse.pending:
                return [self.cut(t, "end of the SSE body")]
            return [self.truncated(t, "a finish reason")]
        return [self.truncated(t, "the closing ] of the JSON array")]
