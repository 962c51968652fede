"""OpenAI Responses API (`POST /v1/responses`, `stream: true`): the protocol
of OpenAI's reasoning models, the only one that shows their reasoning
summaries. The stream is typed SSE events, each a JSON object whose `type`
names it: `response.created` (the served model), `response.output_item.added`
(a message, a reasoning item or a `function_call` with its `call_id` and name),
`response.output_text.delta` and `response.refusal.delta` (the answer),
`response.reasoning_summary_text.delta` and `response.reasoning_text.delta`
(reasoning; summary parts after the first are set apart by a blank line),
`response.function_call_arguments.delta` / `.done` and
`response.output_item.done` (a call, emitted once its item is done), then one
of `response.completed` (usage), `response.incomplete` (stopped early:
`max_output_tokens`, `content_filter`, a `Finish` with that reason, as chat
completions' `length`), `response.failed` (its `error`) or a bare `error`
event. There is no `[DONE]`; a stream that ends before one of those was cut.

The raw finish reason is the response's `status` ("completed") or, when
incomplete, its `incomplete_details.reason`. A whole `response` object (a
server that ignored `stream: true`) is read from its `output` items.

Requests go out stateless (`store: false`, nothing kept on the server); a
tool loop sends the calls back as `function_call` items and the results as
`function_call_output` items. `reasoning_effort` is sent as
`reasoning: {effort, summary: "auto"}` (summaries are shown only when asked
for); a model's `extra_body` may override either. `stop` and `seed` have no
Responses equivalent and are not sent."""

from __future__ import annotations

from typing import Any

from providers.events import (
    ChatRequest,
    ErrorKind,
    Message,
    ReasoningDelta,
    ServedBy,
    StreamEvent,
    TextDelta,
    ToolCall,
    arguments_text,
    result_text,
    wire_params,
)
from providers.http import Accumulated, HttpProvider, StreamParser, image_data_url, parse_json_args, short
from providers.sse import DecodeError, SSEDecoder, malformed_json
from providers.sse import loads as fast_loads

_loads = fast_loads

#: The fewest output tokens the API accepts (`max_output_tokens` below it is refused with HTTP 400).
MIN_OUTPUT_TOKENS = 16

#: Error codes of `error` events and of a failed response's `error`, by what they mean.
_ERROR_KINDS = {
    "rate_limit_exceeded": ErrorKind.rate_limited,
    "insufficient_quota": ErrorKind.rate_limited,
    "server_error": ErrorKind.server,
    "server_is_overloaded": ErrorKind.overloaded,
    "overloaded": ErrorKind.overloaded,
    "slow_down": ErrorKind.rate_limited,
    "invalid_prompt": ErrorKind.bad_request,
    "invalid_request_error": ErrorKind.bad_request,
    "model_not_found": ErrorKind.not_found,
    "invalid_api_key": ErrorKind.auth,
}


class ResponsesProvider(HttpProvider):
    name = "openai-responses"
    protocol = "OpenAI responses"

    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for m in request.messages:
            items += _input_items(m)
        body: dict[str, Any] = {"model": self.cfg.model, "input": items, "stream": True, "store": False}
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                              "parameters": t.parameters} for t in request.tools]
        fmt = request.response_format
        if fmt is not None:
            form: dict[str, Any] = {"type": "json_schema", "name": fmt.name, "schema": fmt.schema_}
            if fmt.strict is not None:
                form["strict"] = fmt.strict
            body["text"] = {"format": form}
        p = self.params(request)
        wire = wire_params(p, "openai-responses")
        if "max_output_tokens" in wire:
            wire["max_output_tokens"] = max(MIN_OUTPUT_TOKENS, wire["max_output_tokens"])
        body.update(wire)
        if p.reasoning_effort is not None:
            body["reasoning"] = {"effort": p.reasoning_effort, "summary": "auto"}
        body.update(self.cfg.extra_body)
        body.update(p.extra_body or {})
        return f"{self.base_url}/responses", {"accept": "text/event-stream"}, body

    def parser(self) -> StreamParser:
        return ResponsesParser()


def _input_items(m: Message) -> list[dict[str, Any]]:
    """One message of the thread as Responses input items."""
    if m.role == "tool":
        return [{"type": "function_call_output", "call_id": r.id, "output": result_text(r.content)}
                for r in m.tool_results]
    if m.role == "assistant":
        out: list[dict[str, Any]] = [{"role": "assistant", "content": m.content}] if m.content else []
        # no item `id`: a call sent back without its reasoning item must not name one (the API refuses it)
        out += [{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": arguments_text(c.arguments)}
                for c in m.tool_calls]
        return out
    if m.images:
        parts: list[dict[str, Any]] = [{"type": "input_text", "text": m.content}] if m.content else []
        parts += [{"type": "input_image", "image_url": image_data_url(i.mime, i.data)} for i in m.images]
        return [{"role": "user", "content": parts}]
    return [{"role": "user", "content": m.content}]


class ResponsesParser(StreamParser):
    protocol = "OpenAI responses"

    def __init__(self) -> None:
        super().__init__()
        self.sse = SSEDecoder()
        self.acc = Accumulated()
        #: function calls by item id: [call_id, name, argument fragments, emitted]
        self.calls: dict[str, list[Any]] = {}
        self.summaries = 0   # reasoning summary parts begun (the second and later are set apart)

    def feed(self, chunk: bytes, t: float) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for event, data in self.sse.feed(chunk):
            if data == "[DONE]":   # not this protocol's, but harmless where a gateway adds it
                continue
            try:
                obj = _loads(data)
            except ValueError as exc:
                raise malformed_json("an SSE event", exc, data) from None
            if not isinstance(obj, dict):
                raise DecodeError("an SSE event that is not a JSON object")
            self.seen_any = True
            if self._event(obj.get("type") or event, obj, t, out):
                return out
        return out

    def _event(self, kind: Any, obj: dict[str, Any], t: float, out: list[StreamEvent]) -> bool:
        """Handle one event; True when it ended the stream."""
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            text = obj.get("delta")
            if text and isinstance(text, str):
                out.append(TextDelta(text=text, t=t))
                self.shown = True
        elif kind == "response.reasoning_summary_text.delta" or kind == "response.reasoning_text.delta":
            text = obj.get("delta")
            if text and isinstance(text, str):
                out.append(ReasoningDelta(text=text, t=t))
                self.shown = True
        elif kind == "response.reasoning_summary_part.added":
            self.summaries += 1
            if self.summaries > 1 and self.shown:
                out.append(ReasoningDelta(text="\n\n", t=t))
        elif kind == "response.function_call_arguments.delta":
            call = self.calls.get(str(obj.get("item_id")))
            text = obj.get("delta")
            if call is not None and isinstance(text, str):
                call[2].append(text)
        elif kind == "response.function_call_arguments.done":
            call = self.calls.get(str(obj.get("item_id")))
            if call is not None and isinstance(obj.get("arguments"), str):
                call[2] = [obj["arguments"]]
        elif kind == "response.output_item.added":
            self._item_added(obj.get("item"))
        elif kind == "response.output_item.done":
            self._item_done(obj.get("item"), out)
        elif kind == "response.created" or kind == "response.in_progress":
            response = obj.get("response")
            if isinstance(response, dict):
                self.served(out, response.get("model"))
        elif kind == "response.completed" or kind == "response.incomplete":
            self._closing(obj.get("response"), t, out)
            return True
        elif kind == "response.failed":
            response = obj.get("response")
            err = response.get("error") if isinstance(response, dict) else None
            out.append(self._error(err if isinstance(err, dict) else {}, t))
            return True
        elif kind == "error":
            err = obj.get("error")
            out.append(self._error(err if isinstance(err, dict) else obj, t))
            return True
        # content parts, `.done` events that repeat the deltas, server tools: nothing new
        return False

    def _item_added(self, item: Any) -> None:
        if isinstance(item, dict) and item.get("type") == "function_call":
            self.calls[str(item.get("id"))] = [item.get("call_id"), item.get("name"), [], False]
            self.shown = True

    def _item_done(self, item: Any, out: list[StreamEvent]) -> None:
        """A function call's item is done: the call, complete (its own arguments win over the fragments)."""
        if not isinstance(item, dict) or item.get("type") != "function_call":
            return
        call = self.calls.get(str(item.get("id")))
        if call is None:   # no `added` event came for it: the done item says it all
            call = self.calls[str(item.get("id"))] = [item.get("call_id"), item.get("name"), [], False]
        if isinstance(item.get("arguments"), str):
            call[2] = [item["arguments"]]
        call[0] = call[0] or item.get("call_id")
        call[1] = call[1] or item.get("name")
        self._emit(call, out)

    def _emit(self, call: list[Any], out: list[StreamEvent]) -> None:
        if call[3]:
            return
        call[3] = True
        cid = call[0] if isinstance(call[0], str) else None
        name = call[1] if isinstance(call[1], str) else ""
        out.append(ToolCall(id=cid, name=name, arguments=parse_json_args("".join(call[2]))))
        self.shown = True

    def _closing(self, response: Any, t: float, out: list[StreamEvent]) -> None:
        """`response.completed` or `.incomplete`: calls not yet emitted, usage, `Finish`."""
        for call in self.calls.values():
            self._emit(call, out)
        if isinstance(response, dict):
            self.served(out, response.get("model"))
            self._usage(response.get("usage"))
            status = response.get("status")
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            self.acc.finish_reason = reason if isinstance(reason, str) and reason else (
                status if isinstance(status, str) and status else None)
        if self.acc.finish_reason is None:   # a terminator with no status: nothing says the answer is whole
            out.append(self.cut(t, "response.completed"))
            return
        out += self.acc.closing(t)
        self.done = True

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        acc = self.acc
        acc.input_tokens = usage.get("input_tokens")
        acc.output_tokens = usage.get("output_tokens")
        details = usage.get("output_tokens_details")
        acc.reasoning_tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None

    def _error(self, err: dict[str, Any], t: float) -> StreamEvent:
        code = err.get("code") or err.get("type")
        message = err.get("message")
        text = str(message) if message else str(code or "error")
        kind = _ERROR_KINDS.get(code, ErrorKind.server) if isinstance(code, str) else ErrorKind.server
        if kind is ErrorKind.server and "overloaded" in text.lower():
            kind = ErrorKind.overloaded
        where = f" ({short(code, 60)})" if isinstance(code, str) and code not in text else ""
        return self.failed(t, kind, f"error in stream: {short(text)}{where}")

    def end(self, t: float) -> list[StreamEvent]:
        return [self.truncated(t, "response.completed")]

    def whole(self, obj: dict[str, Any], t: float) -> list[StreamEvent] | None:
        """A non-streamed `response` object (`output` items), or `{"error": ...}`."""
        if isinstance(obj.get("error"), dict) and not isinstance(obj.get("output"), list):
            return [self._error(obj["error"], t)]
        output = obj.get("output")
        if not isinstance(output, list) or obj.get("object", "response") != "response":
            return None
        out: list[StreamEvent] = []
        self.served(out, obj.get("model"))
        if obj.get("status") == "failed":
            err = obj.get("error")
            return out + [self._error(err if isinstance(err, dict) else {}, t)]
        for item in output:
            if not isinstance(item, dict):
                continue
            itype = item.get("type")
            if itype == "reasoning":
                parts = [*(item.get("summary") or ()), *(item.get("content") or ())]
                texts = [str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
                         and p["text"]]
                if texts:
                    out.append(ReasoningDelta(text="\n\n".join(texts), t=t))
            elif itype == "message":
                for part in item.get("content") or ():
                    if isinstance(part, dict):
                        text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
                        if isinstance(text, str) and text:
                            out.append(TextDelta(text=text, t=t))
            elif itype == "function_call":
                self._item_done(item, out)
        self.shown = any(not isinstance(ev, ServedBy) for ev in out)
        self._closing(obj, t, out)
        return out
