"""Anthropic Messages API (`/v1/messages`, `stream: true`): SSE events
`message_start` (input usage), `content_block_start/delta/stop` (text,
thinking, `tool_use` with `input_json_delta` fragments), `message_delta`
(stop reason, output usage), `ping`, `message_stop` (the terminator) and
mid-stream `error` events. Server tools (web search) are not tool calls.
A gateway that answers `stream: true` with one whole `message` object (the
LiteLLM proxy's `/v1/messages` route does) is read as one message.

Structured output goes through a forced tool (`ANSWER_TOOL`, its input
schema the answer's): the parser streams that tool's input as the answer's
text, so it reads like any JSON answer (in a whole message, the tool's
input as JSON text). The name is reserved: a sample set cannot declare a
tool of that name."""

from __future__ import annotations

import json
from typing import Any

from providers.events import (
    ANSWER_TOOL,
    ChatRequest,
    ErrorKind,
    Message,
    ReasoningDelta,
    ServedBy,
    StreamEvent,
    TextDelta,
    ToolCall,
    arguments_object,
    result_text,
    wire_params,
)
from providers.http import Accumulated, HttpProvider, StreamParser, parse_json_args, short
from providers.sse import DecodeError, SSEDecoder, malformed_json
from providers.sse import loads as fast_loads

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024   # the API requires max_tokens

_loads = fast_loads

_ERROR_KINDS = {
    "overloaded_error": ErrorKind.overloaded,
    "rate_limit_error": ErrorKind.rate_limited,
    "api_error": ErrorKind.server,
    "timeout_error": ErrorKind.timeout,
    "authentication_error": ErrorKind.auth,
    "permission_error": ErrorKind.auth,
    "not_found_error": ErrorKind.not_found,
    "invalid_request_error": ErrorKind.bad_request,
    "request_too_large": ErrorKind.bad_request,
}


class AnthropicProvider(HttpProvider):
    name = "anthropic"
    protocol = "Anthropic messages"

    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            if m.tool_calls or m.tool_results:
                _append(messages, *_tool_message(m))
            elif m.images:
                parts: list[dict[str, Any]] = [
                    {"type": "image", "source": {"type": "base64", "media_type": i.mime, "data": i.data}}
                    for i in m.images
                ]
                if m.content:
                    parts.append({"type": "text", "text": m.content})
                _append(messages, m.role, parts)
            else:
                _append(messages, m.role, m.content)
        p = self.params(request)
        body: dict[str, Any] = {"model": self.cfg.model, "max_tokens": p.max_tokens or DEFAULT_MAX_TOKENS,
                                "messages": messages, "stream": True}
        tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                 for t in request.tools]
        fmt = request.response_format
        if fmt is not None:
            tools.append({"name": ANSWER_TOOL, "description": "Give your whole answer as this tool's input.",
                          "input_schema": fmt.schema_})
            body["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL}
        if tools:
            body["tools"] = tools
        if request.system:
            body["system"] = request.system
        body.update(wire_params(p, "anthropic"))
        # `seed` and `reasoning_effort` have no Anthropic equivalent; they are recorded by the session, not sent.
        body.update(self.cfg.extra_body)
        body.update(p.extra_body or {})
        headers = {"accept": "text/event-stream", "anthropic-version": ANTHROPIC_VERSION}
        return f"{self.base_url}/v1/messages", headers, body

    def parser(self) -> StreamParser:
        return AnthropicParser()


def _tool_message(m: Message) -> tuple[str, list[dict[str, Any]]]:
    """(role, content blocks) of an assistant message with calls, or of the
    results that answer them (a user message of `tool_result` blocks)."""
    if m.role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": r.id, "content": result_text(r.content)}
                        for r in m.tool_results]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": arguments_object(c.arguments)}
               for c in m.tool_calls]
    return "assistant", blocks


def _append(messages: list[dict[str, Any]], role: str, content: str | list[dict[str, Any]]) -> None:
    """Add a message; one of the same role as the last is merged into it
    (results, then the user's next message: one user turn, as the API wants)."""
    if messages and messages[-1]["role"] == role:
        last = messages[-1]
        blocks = [{"type": "text", "text": c} if isinstance(c, str) else c for c in (last["content"], content)]
        last["content"] = [b for part in blocks for b in (part if isinstance(part, list) else [part])]
        return
    messages.append({"role": role, "content": content})


class AnthropicParser(StreamParser):
    protocol = "Anthropic messages"

    def __init__(self) -> None:
        super().__init__()
        self.sse = SSEDecoder()
        self.acc = Accumulated()
        self.blocks: dict[int, list[Any]] = {}   # index -> [type, id, name, json fragments, initial input]

    def feed(self, chunk: bytes, t: float) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for event, data in self.sse.feed(chunk):
            try:
                obj = _loads(data)
            except ValueError as exc:
                raise malformed_json("an SSE event", exc, data) from None
            if not isinstance(obj, dict):
                raise DecodeError("an SSE event that is not a JSON object")
            self.seen_any = True
            kind = obj.get("type") or event
            if kind == "content_block_delta":
                delta = obj.get("delta") or {}
                dtype = delta.get("type")
                if dtype == "text_delta":
                    text = delta.get("text")
                    if text:
                        out.append(TextDelta(text=text, t=t))
                        self.shown = True
                elif dtype == "thinking_delta":
                    text = delta.get("thinking")
                    if text:
                        out.append(ReasoningDelta(text=text, t=t))
                        self.shown = True
                elif dtype == "input_json_delta":
                    block = self.blocks.get(obj.get("index", -1))
                    if block is not None and block[0] == ANSWER_TOOL:   # a structured answer: its JSON is the text
                        text = delta.get("partial_json")
                        if text:
                            out.append(TextDelta(text=text, t=t))
                            self.shown = True
                    elif block is not None:
                        block[3].append(delta.get("partial_json") or "")
                # signature_delta, citations_delta: nothing to show
            elif kind == "content_block_start":
                self._block_start(obj, t, out)
            elif kind == "content_block_stop":
                block = self.blocks.pop(obj.get("index", -1), None)
                if block is not None and block[0] == "tool_use":
                    args = parse_json_args("".join(block[3])) if block[3] else (block[4] or {})
                    out.append(ToolCall(id=block[1], name=block[2] or "", arguments=args))
                    self.shown = True
            elif kind == "message_delta":
                delta = obj.get("delta") or {}
                if delta.get("stop_reason"):
                    self.acc.finish_reason = delta["stop_reason"]
                self._usage(obj.get("usage"))
            elif kind == "message_start":
                message = obj.get("message") or {}
                self._usage(message.get("usage"))
                self.served(out, message.get("model"))
            elif kind == "message_stop":
                if self.acc.finish_reason is None:   # no message_delta with a stop_reason
                    out.append(self.cut(t, "message_stop"))
                    return out
                out += self.acc.closing(t)
                self.done = True
                return out
            elif kind == "error":
                out.append(self._error(obj, t))
                return out
            # ping and unknown events: nothing
        return out

    def _block_start(self, obj: dict[str, Any], t: float, out: list[StreamEvent]) -> None:
        block = obj.get("content_block") or {}
        btype = block.get("type")
        if btype == "text":
            if block.get("text"):
                out.append(TextDelta(text=block["text"], t=t))
                self.shown = True
        elif btype == "thinking":
            if block.get("thinking"):
                out.append(ReasoningDelta(text=block["thinking"], t=t))
                self.shown = True
        elif btype == "tool_use" and block.get("name") == ANSWER_TOOL:
            self.blocks[obj.get("index", -1)] = [ANSWER_TOOL, block.get("id"), ANSWER_TOOL, [], None]
        elif btype == "tool_use":
            self.blocks[obj.get("index", -1)] = ["tool_use", block.get("id"), block.get("name"), [], block.get("input")]
        elif btype:
            # server_tool_use and tool results: collect fragments so indexes stay consistent, never report
            self.blocks[obj.get("index", -1)] = [btype, None, None, [], None]

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        if usage.get("input_tokens") is not None:
            self.acc.input_tokens = usage["input_tokens"]
        if usage.get("output_tokens") is not None:
            self.acc.output_tokens = usage["output_tokens"]

    def _error(self, obj: dict[str, Any], t: float) -> StreamEvent:
        err = obj.get("error") or {}
        etype = err.get("type") or "error"
        message = err.get("message") or etype
        return self.failed(t, _ERROR_KINDS.get(etype, ErrorKind.server), f"{short(message)} ({etype})")

    def end(self, t: float) -> list[StreamEvent]:
        return [self.truncated(t, "message_stop")]

    def whole(self, obj: dict[str, Any], t: float) -> list[StreamEvent] | None:
        """A non-streamed Messages response: `{"type": "message", "content":
        [blocks], "stop_reason", "usage"}`, or `{"type": "error", "error": ...}`."""
        if obj.get("type") == "error" and isinstance(obj.get("error"), dict):
            return [self._error(obj, t)]
        content = obj.get("content")
        if not isinstance(content, list) or obj.get("type", "message") != "message":
            return None
        out: list[StreamEvent] = []
        self.served(out, obj.get("model"))
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and block.get("text"):
                out.append(TextDelta(text=block["text"], t=t))
            elif btype == "thinking" and block.get("thinking"):
                out.append(ReasoningDelta(text=block["thinking"], t=t))
            elif btype == "tool_use" and block.get("name") == ANSWER_TOOL:   # a structured answer: its JSON is the text
                out.append(TextDelta(text=json.dumps(block.get("input") or {}, ensure_ascii=False), t=t))
            elif btype == "tool_use":
                out.append(ToolCall(id=block.get("id"), name=block.get("name") or "", arguments=block.get("input") or {}))
            # server tools and their results, redacted thinking: nothing to show
        self.shown = any(not isinstance(ev, ServedBy) for ev in out)
        self.acc.finish_reason = obj.get("stop_reason")
        self._usage(obj.get("usage"))
        return out + self.acc.closing(t)
