"""OpenAI-compatible `/chat/completions` (OpenAI, OpenRouter, vLLM, llama.cpp
server, LM Studio, Ollama `/v1`, Groq...): SSE chunks with `delta.content`,
reasoning in `delta.reasoning_content` or `delta.reasoning`, tool-call
fragments per index, usage from the last chunk that has it, `[DONE]` as the
terminator. A plain JSON `chat.completion` body (a server that ignored
`stream: true`) is read as one message."""

from __future__ import annotations

import json
from typing import Any

from providers.events import (
    ChatRequest,
    ErrorKind,
    Message,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    arguments_text,
    result_text,
    wire_params,
)
from providers.http import (
    Accumulated,
    HttpProvider,
    StreamParser,
    image_data_url,
    kind_for_status,
    parse_json_args,
    short,
)
from providers.sse import DecodeError, SSEDecoder, malformed_json
from providers.sse import loads as fast_loads

_loads = fast_loads


class OpenAIProvider(HttpProvider):
    name = "openai"
    protocol = "OpenAI chat-completions"

    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for m in request.messages:
            if m.tool_calls or m.tool_results:
                messages += _tool_messages(m)
            elif m.images:
                parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
                parts += [{"type": "image_url", "image_url": {"url": image_data_url(i.mime, i.data)}} for i in m.images]
                messages.append({"role": m.role, "content": parts})
            else:
                messages.append({"role": m.role, "content": m.content})
        body: dict[str, Any] = {"model": self.cfg.model, "messages": messages, "stream": True,
                                "stream_options": {"include_usage": True}}
        if request.tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters}} for t in request.tools]
        fmt = request.response_format
        if fmt is not None:
            schema: dict[str, Any] = {"name": fmt.name, "schema": fmt.schema_}
            if fmt.strict is not None:
                schema["strict"] = fmt.strict
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        p = self.params(request)
        body.update(wire_params(p, "openai"))
        if p.reasoning_effort is not None:
            body["reasoning_effort"] = p.reasoning_effort
        body.update(self.cfg.extra_body)
        body.update(p.extra_body or {})
        headers = {"accept": "text/event-stream"}
        return f"{self.base_url}/chat/completions", headers, body

    def parser(self) -> StreamParser:
        return OpenAIParser()


def _tool_messages(m: Message) -> list[dict[str, Any]]:
    """An assistant message with its calls, or one `tool` message per result."""
    if m.role == "tool":
        return [{"role": "tool", "tool_call_id": r.id, "content": result_text(r.content)} for r in m.tool_results]
    return [{"role": "assistant", "content": m.content or None, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments_text(c.arguments)}}
        for c in m.tool_calls]}]


class OpenAIParser(StreamParser):
    protocol = "OpenAI chat-completions"

    def __init__(self) -> None:
        super().__init__()
        self.sse = SSEDecoder()
        self.acc = Accumulated()
        self.tools: dict[int, list[Any]] = {}      # index -> [id, name, argument fragments]
        self.usage_seen = False                    # a chunk with usage arrived (sent at the end)

    def feed(self, chunk: bytes, t: float) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for _event, data in self.sse.feed(chunk):
            if data == "[DONE]":
                self.seen_any = True
                # A normal end has a finish reason, or at least the usage chunk that
                # servers send only once generation is over (some OpenRouter
                # upstreams never set finish_reason). Neither: the server cut it.
                if self.acc.finish_reason is None and not self.usage_seen:
                    out.append(self.cut(t, "data: [DONE]"))
                    return out
                out += self._closing(t)
                return out
            try:
                obj = _loads(data)
            except ValueError as exc:
                raise malformed_json("an SSE event", exc, data) from None
            self.seen_any = True
            if self._chunk(obj, t, out):
                return out
        return out

    def _chunk(self, obj: Any, t: float, out: list[StreamEvent]) -> bool:
        """Handle one chunk object; True when it ended the stream (an error)."""
        if not isinstance(obj, dict):
            raise DecodeError("an SSE event that is not a JSON object")
        model, fingerprint = obj.get("model"), obj.get("system_fingerprint")
        last = self._served
        if (model is not None and model != last[0]) or (fingerprint is not None and fingerprint != last[1]):
            self.served(out, model, fingerprint)   # only when something may be new: no call per chunk
        choices = obj.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                content = delta.get("content")
                if content:
                    out.append(TextDelta(text=content, t=t))
                    self.shown = True
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning and isinstance(reasoning, str):
                    out.append(ReasoningDelta(text=reasoning, t=t))
                    self.shown = True
                calls = delta.get("tool_calls")
                if calls:
                    self._tool_fragments(calls)
            reason = choice.get("finish_reason")
            if reason:
                self.acc.finish_reason = reason
        usage = obj.get("usage")
        if usage:
            self._usage(usage)
            self.usage_seen = True
        err = obj.get("error")
        if err:
            out.append(self._error(err, t))
            return True
        return False

    def _tool_fragments(self, calls: list[dict[str, Any]]) -> None:
        tools = self.tools
        for call in calls:
            index = call.get("index", len(tools))
            slot = tools.get(index)
            if slot is None:
                slot = tools[index] = [None, None, []]
            if slot[0] is None and call.get("id"):
                slot[0] = call["id"]
            fn = call.get("function") or {}
            if slot[1] is None and fn.get("name"):
                slot[1] = fn["name"]
            args = fn.get("arguments")
            if args:
                slot[2].append(args if isinstance(args, str) else json.dumps(args))
            self.shown = True

    def _usage(self, usage: dict[str, Any]) -> None:
        acc = self.acc
        acc.input_tokens = usage.get("prompt_tokens")
        acc.output_tokens = usage.get("completion_tokens")
        details = usage.get("completion_tokens_details") or {}
        acc.reasoning_tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None

    def _error(self, err: Any, t: float):
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("type") or "error")
            code = err.get("code")
        else:
            message, code = str(err), None
        kind = ErrorKind.server
        if isinstance(code, int) and code >= 400:
            kind = kind_for_status(code, message)
        elif "overloaded" in message.lower():
            kind = ErrorKind.overloaded
        elif "rate limit" in message.lower():
            kind = ErrorKind.rate_limited
        return self.failed(t, kind, f"error in stream: {short(message)}")

    def _closing(self, t: float) -> list[StreamEvent]:
        out: list[StreamEvent] = [
            ToolCall(id=tid, name=name or "", arguments=parse_json_args("".join(frags)))
            for tid, name, frags in (self.tools[i] for i in sorted(self.tools))
        ]
        out += self.acc.closing(t)
        self.done = True
        return out

    def end(self, t: float) -> list[StreamEvent]:
        return [self.truncated(t, "data: [DONE]")]

    def whole(self, obj: dict[str, Any], t: float) -> list[StreamEvent] | None:
        """A non-streamed `chat.completion` (`choices[].message`), or `{"error": ...}`."""
        out: list[StreamEvent] = []
        self.served(out, obj.get("model"), obj.get("system_fingerprint"))
        if obj.get("error"):
            out.append(self._error(obj["error"], t))
            return out
        choices = obj.get("choices")
        if not isinstance(choices, list):
            return None
        if choices:
            choice = choices[0]
            message = choice.get("message") or choice.get("delta") or {}
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                out.append(ReasoningDelta(text=reasoning, t=t))
            content = message.get("content")
            if content:
                out.append(TextDelta(text=content, t=t))
            for index, call in enumerate(message.get("tool_calls") or ()):
                fn = call.get("function") or {}
                args = fn.get("arguments") or ""
                self.tools[index] = [call.get("id"), fn.get("name"),
                                     [args if isinstance(args, str) else json.dumps(args)]]
            if choice.get("finish_reason"):
                self.acc.finish_reason = choice["finish_reason"]
        if obj.get("usage"):
            self._usage(obj["usage"])
        return out + self._closing(t)
