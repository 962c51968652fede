"""Ollama native `/api/chat`: NDJSON lines with `message.content`,
`message.thinking` and `message.tool_calls`; the last line has `done: true`,
`done_reason` and the counts (`prompt_eval_count`, `eval_count`) with
nanosecond durations; an `{"error": ...}` line is a server error even under
HTTP 200. A whole `application/json` reply (`stream: false`, or a gateway
that does not stream) is read as one message."""

from __future__ import annotations

from typing import Any

from providers.events import (
    ChatRequest,
    ErrorKind,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    arguments_object,
    result_text,
    wire_params,
)
from providers.http import Accumulated, HttpProvider, StreamParser, parse_json_args, short
from providers.sse import DecodeError, NDJSONDecoder


class OllamaProvider(HttpProvider):
    name = "ollama"
    protocol = "Ollama chat"

    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for m in request.messages:
            if m.role == "tool":   # one message per result, named by its tool
                messages += [{"role": "tool", "content": result_text(r.content), "tool_name": r.name}
                             for r in m.tool_results]
                continue
            msg: dict[str, Any] = {"role": m.role, "content": m.content}
            if m.images:
                msg["images"] = [i.data for i in m.images]
            if m.tool_calls:
                msg["tool_calls"] = [{"function": {"name": c.name, "arguments": arguments_object(c.arguments)}}
                                     for c in m.tool_calls]
            messages.append(msg)
        body: dict[str, Any] = {"model": self.cfg.model, "messages": messages, "stream": True}
        if request.tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}} for t in request.tools]
        if request.response_format is not None:
            body["format"] = request.response_format.schema_
        p = self.params(request)
        options = wire_params(p, "ollama")
        if options:
            body["options"] = options
        if p.reasoning_effort is not None:
            # Ollama's `think`: a level for the models that take one (gpt-oss), no thinking for "minimal"
            body["think"] = False if p.reasoning_effort == "minimal" else p.reasoning_effort
        body.update(self.cfg.extra_body)
        body.update(p.extra_body or {})
        headers = {"accept": "application/x-ndjson"}   # a key, for a proxy or hosted Ollama: HttpProvider adds it
        return f"{self.base_url}/api/chat", headers, body

    def parser(self) -> StreamParser:
        return OllamaParser()


class OllamaParser(StreamParser):
    protocol = "Ollama NDJSON"
    whole_starts = b""        # NDJSON starts with "{" too: only the content type tells a whole body

    def form_for(self, content_type: str) -> str | None:
        """`application/json` is one whole response (`stream: false`, or a
        gateway's); NDJSON, and anything else, is read as the stream."""
        if "json" in content_type and "ndjson" not in content_type:
            return "whole"
        return "stream"

    def __init__(self) -> None:
        super().__init__()
        self.lines = NDJSONDecoder()
        self.acc = Accumulated()

    def feed(self, chunk: bytes, t: float) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for obj in self.lines.feed(chunk):
            if self._line(obj, t, out):
                return out
        return out

    def _line(self, obj: Any, t: float, out: list[StreamEvent]) -> bool:
        if not isinstance(obj, dict):
            raise DecodeError("an NDJSON line that is not a JSON object")
        self.seen_any = True
        model = obj.get("model")
        if model is not None and model != self._served[0]:
            self.served(out, model)
        if "error" in obj:
            err = obj["error"]
            message = err.get("message", str(err)) if isinstance(err, dict) else str(err)
            out.append(self.failed(t, ErrorKind.server, f"error in stream: {short(message)}"))
            return True
        message = obj.get("message")
        if message:
            thinking = message.get("thinking")
            if thinking:
                out.append(ReasoningDelta(text=thinking, t=t))
                self.shown = True
            content = message.get("content")
            if content:
                out.append(TextDelta(text=content, t=t))
                self.shown = True
            for call in message.get("tool_calls") or ():
                fn = call.get("function") or {}
                args = fn.get("arguments")
                out.append(ToolCall(id=call.get("id"), name=fn.get("name") or "",
                                    arguments=parse_json_args(args) if isinstance(args, str) else (args or {})))
                self.shown = True
        if obj.get("done"):
            if not obj.get("done_reason") and obj.get("eval_count") is None:
                # Servers before done_reason still sent the counts; neither: cut short.
                out.append(self.cut(t, "done: true"))
                return True
            acc = self.acc
            acc.finish_reason = obj.get("done_reason") or "stop"
            acc.input_tokens = obj.get("prompt_eval_count")
            acc.output_tokens = obj.get("eval_count")
            out += acc.closing(t)
            self.done = True
            return True
        return False

    def whole(self, obj: dict[str, Any], t: float) -> list[StreamEvent] | None:
        """A non-streamed `/api/chat` reply: the stream's last line with the whole message."""
        if not any(k in obj for k in ("message", "done", "error")):
            return None
        out: list[StreamEvent] = []
        if not self._line(obj, t, out):
            out.append(self.cut(t, "a whole response without done: true"))
        return out

    def end(self, t: float) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for obj in self.lines.close():
            if self._line(obj, t, out):
                return out
        out.append(self.truncated(t, "a line with done: true"))
        return out
