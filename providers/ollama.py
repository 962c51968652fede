"""Ollama native `/api/chat`: NDJSON lines with `message.content`,
`message.thinking` and `message.tool_calls`; the last line has `done: true`,
`done_reason` and the counts (`prompt_eval_count`, `eval_count`) with
nanosecond durations; an `{"error": ...}` line is a server error even under
HTTP 200."""

from __future__ import annotations

from typing import Any

from providers.events import ChatRequest, ErrorKind, ReasoningDelta, StreamEvent, TextDelta, ToolCall
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
            msg: dict[str, Any] = {"role": m.role, "content": m.content}
            if m.images:
                msg["images"] = [i.data for i in m.images]
            messages.append(msg)
        body: dict[str, Any] = {"model": self.cfg.model, "messages": messages, "stream": True}
        p = self.params(request)
        options: dict[str, Any] = {}
        if p.temperature is not None:
            options["temperature"] = p.temperature
        if p.top_p is not None:
            options["top_p"] = p.top_p
        if p.max_tokens is not None:
            options["num_predict"] = p.max_tokens
        if p.seed is not None:
            options["seed"] = p.seed
        if p.stop:
            options["stop"] = list(p.stop)
        if options:
            body["options"] = options
        if p.reasoning_effort is not None:
            # Ollama's `think`: a level for the models that take one (gpt-oss), no thinking for "minimal"
            body["think"] = False if p.reasoning_effort == "minimal" else p.reasoning_effort
        body.update(self.cfg.extra_body)
        body.update(p.extra_body or {})
        headers = {"accept": "application/x-ndjson"}
        if key:   # a proxy or hosted Ollama that wants a key
            headers["authorization"] = f"Bearer {key}"
        return f"{self.base_url}/api/chat", headers, body

    def parser(self) -> StreamParser:
        return OllamaParser()


class OllamaParser(StreamParser):
    protocol = "Ollama NDJSON"

    def __init__(self) -> None:
        super().__init__()
        self.lines = NDJSONDecoder()
        self.acc = Accumulated()
        #: (prompt_eval_duration, eval_duration) in seconds from the last line, when sent
        self.durations: tuple[float | None, float | None] = (None, None)

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
            ns = obj.get("prompt_eval_duration"), obj.get("eval_duration")
            self.durations = tuple(v / 1e9 if isinstance(v, (int, float)) else None for v in ns)  # type: ignore[assignment]
            out += acc.closing(t)
            self.done = True
            return True
        return False

    def end(self, t: float) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for obj in self.lines.close():
            if self._line(obj, t, out):
                return out
        out.append(self.truncated(t, "a line with done: true"))
        return out
