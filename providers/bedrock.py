"""Amazon Bedrock ConverseStream (`provider = "bedrock"`):
`POST {base}/model/{modelId}/converse-stream` at the region's endpoint
(`https://bedrock-runtime.{region}.amazonaws.com`), SigV4-signed with
botocore's signer, the credentials from botocore's own chain (environment,
shared config and credentials files, profiles, SSO, the instance role) —
botocore is the `bedrock` extra.

The body is Converse's (`messages` of content blocks, `system`,
`inferenceConfig`, `toolConfig`; structured output as a forced tool, as for
Anthropic). The response is AWS event-stream binary framing, read with
botocore's `EventStreamBuffer` (which checks both CRCs): `messageStart`,
`contentBlockStart` (a `toolUse` with its id and name),
`contentBlockDelta` (`text`, `reasoningContent.text`, `toolUse.input`
fragments), `contentBlockStop`, `messageStop` (`stopReason`), then
`metadata` (usage) ends the stream; an exception message
(`throttlingException`, `modelStreamErrorException`,
`validationException`...) ends it as its error — throttling before the first
token is retried like HTTP 429. A whole Converse response
(`{"output": {"message": ...}, "stopReason", "usage"}`) is read as one.

The request is signed once per answer (the signature is valid for five
minutes, longer than the retries of one answer wait); the secret key, the
session token and the signature are scrubbed from every message and every
field the server sends back (`providers.runtime_secrets`)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import anyio

from providers.events import (
    ANSWER_TOOL,
    ChatRequest,
    ErrorKind,
    Message,
    ReasoningDelta,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCall,
    arguments_object,
    result_text,
    wire_params,
)
from providers.http import (
    Accumulated,
    HttpProvider,
    PreparedRequest,
    Route,
    StreamParser,
    parse_json_args,
    perf_counter,
    short,
)
from providers.runtime_secrets import RuntimeSecretsGuard
from providers.sse import DecodeError

#: SigV4's name for the service.
SERVICE = "bedrock"

#: Exception event types (`:exception-type`) by what they mean.
_EXCEPTION_KINDS = {
    "throttlingException": ErrorKind.rate_limited,
    "serviceUnavailableException": ErrorKind.overloaded,
    "internalServerException": ErrorKind.server,
    "modelStreamErrorException": ErrorKind.server,
    "modelTimeoutException": ErrorKind.timeout,
    "validationException": ErrorKind.bad_request,
    "accessDeniedException": ErrorKind.auth,
    "resourceNotFoundException": ErrorKind.not_found,
}
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}


def _load_credentials() -> tuple[Any, str | None]:
    """(frozen credentials, problem) from botocore's chain (blocking: may ask
    SSO or the instance metadata service; called in a worker thread)."""
    try:
        import botocore.session
    except ImportError:
        return None, "Bedrock needs botocore: pip install 'lineup[bedrock]'"
    try:
        creds = botocore.session.Session().get_credentials()
    except Exception as exc:  # noqa: BLE001 - botocore's profile and provider errors
        return None, f"AWS credentials ({type(exc).__name__}): {short(str(exc))}"
    if creds is None:
        return None, ("no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, "
                      "or configure ~/.aws/credentials)")
    return creds.get_frozen_credentials(), None


class BedrockProvider(HttpProvider):
    name = "bedrock"
    protocol = "Bedrock ConverseStream"
    accepts_images = True

    def __init__(self, cfg: Any, **options: Any) -> None:
        super().__init__(cfg, **options)
        self._creds: Any = None
        #: the latest requests' signatures (answers in flight share the provider): scrubbed from the answers
        self._signatures: deque[str] = deque(maxlen=64)

    def key(self) -> tuple[str | None, str | None]:
        return None, None   # no key header: the request is signed (`_prepare`)

    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            role, content = _message(m)
            if messages and messages[-1]["role"] == role:   # results, then the user's next message: one turn
                messages[-1]["content"] += content
            else:
                messages.append({"role": role, "content": content})
        body: dict[str, Any] = {"messages": messages}
        if request.system:
            body["system"] = [{"text": request.system}]
        tools = [{"toolSpec": {"name": t.name, "description": t.description, "inputSchema": {"json": t.parameters}}}
                 for t in request.tools]
        tool_config: dict[str, Any] = {}
        if request.response_format is not None:
            tools.append({"toolSpec": {"name": ANSWER_TOOL, "description": "Give your whole answer as this tool's input.",
                                       "inputSchema": {"json": request.response_format.schema_}}})
            tool_config["toolChoice"] = {"tool": {"name": ANSWER_TOOL}}
        if tools:
            body["toolConfig"] = {"tools": tools, **tool_config}
        p = self.params(request)
        inference = wire_params(p, "bedrock")
        if inference:
            body["inferenceConfig"] = inference
        body.update(self.cfg.extra_body)
        body.update(p.extra_body or {})
        return (f"{self.base_url}/model/{quote(self.cfg.model, safe='')}/converse-stream",
                {"accept": "application/vnd.amazon.eventstream"}, body)

    def parser(self) -> StreamParser:
        return BedrockParser()

    def route(self, request: ChatRequest) -> Route:
        route = super().route(request)
        return Route(url=route.url, auth=f"AWS SigV4 ({SERVICE}, {self.cfg.region}; botocore's credential chain)",
                     headers=route.headers)

    async def _events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        creds, problem = await anyio.to_thread.run_sync(_load_credentials)
        if creds is None:
            yield StreamError(kind=ErrorKind.config, message=f"model {self.cfg.alias!r}: {problem}", t=perf_counter())
            return
        self._creds = creds
        guard: RuntimeSecretsGuard | None = None
        async for ev in super()._events(request):
            if guard is None:   # the first event comes after `_prepare` signed the request
                guard = RuntimeSecretsGuard((creds.secret_key, creds.token or "", *self._signatures))
            for out in guard.events(ev):
                yield out

    def _prepare(self, request: ChatRequest) -> PreparedRequest | StreamError:
        """The request as `HttpProvider` prepares it, then signed (SigV4 over
        the final URL, headers and body bytes)."""
        prepared = super()._prepare(request)
        if isinstance(prepared, StreamError):
            return prepared
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        creds = self._creds
        signed = AWSRequest(method="POST", url=prepared.url, data=prepared.content,
                            headers={k: v for k, v in prepared.headers.items() if k in ("content-type", "accept")})
        SigV4Auth(creds, SERVICE, self.cfg.region or "").add_auth(signed)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = signed.headers.get(name)
            if value:
                prepared.headers[name.lower()] = value
        signature = str(signed.headers.get("Authorization", "")).rpartition("Signature=")[2]
        self._signatures.append(signature)
        prepared.secrets = tuple(s for s in (*prepared.secrets, creds.secret_key, creds.token, signature)
                                 if s and len(s) >= 4)
        return prepared


def _message(m: Message) -> tuple[str, list[dict[str, Any]]]:
    """(role, content blocks) of one message of the thread."""
    if m.role == "tool":
        return "user", [{"toolResult": {"toolUseId": r.id, "content": [{"text": result_text(r.content)}]}}
                        for r in m.tool_results]
    blocks: list[dict[str, Any]] = [{"text": m.content}] if m.content else []
    if m.role == "assistant":
        blocks += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": arguments_object(c.arguments)}}
                   for c in m.tool_calls]
        return "assistant", blocks
    blocks += [{"image": {"format": _IMAGE_FORMATS.get(i.mime, "png"), "source": {"bytes": i.data}}}
               for i in m.images]
    return "user", blocks


class BedrockParser(StreamParser):
    protocol = "Bedrock ConverseStream"
    whole_starts = b"{"

    def __init__(self) -> None:
        super().__init__()
        from botocore.eventstream import EventStreamBuffer

        self.buffer = EventStreamBuffer()
        self.acc = Accumulated()
        self.blocks: dict[int, list[Any]] = {}   # index -> [id, name, input fragments]
        self.stopped = False                      # messageStop came (metadata, the last event, may follow)

    def form_for(self, content_type: str) -> str | None:
        if "eventstream" in content_type:
            return "stream"
        if "json" in content_type:
            return "whole"
        return None

    def feed(self, chunk: bytes, t: float) -> list[StreamEvent]:
        from botocore.eventstream import ParserError

        out: list[StreamEvent] = []
        self.buffer.add_data(chunk)
        try:
            for message in self.buffer:
                headers = message.headers
                mtype = headers.get(":message-type")
                if mtype == "event":
                    self.seen_any = True
                    if self._event(str(headers.get(":event-type")), message.payload, t, out):
                        return out
                elif mtype in ("exception", "error"):
                    self.seen_any = True
                    out.append(self._exception(headers, message.payload, t))
                    return out
        except ParserError as exc:
            raise DecodeError(f"an event-stream frame that does not parse ({type(exc).__name__})") from None
        return out

    def _event(self, kind: str, payload: bytes, t: float, out: list[StreamEvent]) -> bool:
        """Handle one event; True when it ended the stream."""
        try:
            obj = json.loads(payload) if payload else {}
        except ValueError:
            raise DecodeError(f"a {kind} event whose payload is not JSON") from None
        if not isinstance(obj, dict):
            raise DecodeError(f"a {kind} event whose payload is not a JSON object")
        index = obj.get("contentBlockIndex", -1)
        if kind == "contentBlockDelta":
            delta = obj.get("delta") or {}
            text = delta.get("text")
            if isinstance(text, str) and text:
                out.append(TextDelta(text=text, t=t))
                self.shown = True
            reasoning = (delta.get("reasoningContent") or {}).get("text")
            if isinstance(reasoning, str) and reasoning:
                out.append(ReasoningDelta(text=reasoning, t=t))
                self.shown = True
            tool = delta.get("toolUse")
            if isinstance(tool, dict) and isinstance(tool.get("input"), str):
                block = self.blocks.get(index)
                if block is not None and block[1] == ANSWER_TOOL:   # a structured answer: its JSON is the text
                    if tool["input"]:
                        out.append(TextDelta(text=tool["input"], t=t))
                        self.shown = True
                elif block is not None:
                    block[2].append(tool["input"])
        elif kind == "contentBlockStart":
            tool = (obj.get("start") or {}).get("toolUse")
            if isinstance(tool, dict):
                self.blocks[index] = [tool.get("toolUseId"), tool.get("name"), []]
        elif kind == "contentBlockStop":
            block = self.blocks.pop(index, None)
            if block is not None and block[1] != ANSWER_TOOL:
                args = parse_json_args("".join(block[2])) if block[2] else {}
                out.append(ToolCall(id=block[0], name=block[1] or "", arguments=args))
                self.shown = True
        elif kind == "messageStop":
            reason = obj.get("stopReason")
            self.acc.finish_reason = reason if isinstance(reason, str) else None
            self.stopped = True
        elif kind == "metadata":
            self._usage(obj.get("usage"))
            if self.stopped:
                return self._finish(t, out)
        # messageStart and unknown events: nothing
        return False

    def _finish(self, t: float, out: list[StreamEvent]) -> bool:
        if self.acc.finish_reason is None:
            out.append(self.cut(t, "messageStop"))
        else:
            out += self.acc.closing(t)
            self.done = True
        return True

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.acc.input_tokens = usage.get("inputTokens")
            self.acc.output_tokens = usage.get("outputTokens")

    def _exception(self, headers: dict[str, Any], payload: bytes, t: float) -> StreamError:
        etype = str(headers.get(":exception-type") or headers.get(":error-code") or "exception")
        message = str(headers.get(":error-message") or "")
        try:
            obj = json.loads(payload) if payload else {}
            if isinstance(obj, dict) and obj.get("message"):
                message = str(obj["message"])
        except ValueError:
            pass
        return self.failed(t, _EXCEPTION_KINDS.get(etype, ErrorKind.server),
                           f"error in stream: {short(message or etype)} ({short(etype, 60)})")

    def end(self, t: float) -> list[StreamEvent]:
        if self.stopped:   # messageStop came, the metadata did not: the answer is whole
            out: list[StreamEvent] = []
            self._finish(t, out)
            return out
        return [self.truncated(t, "messageStop")]

    def whole(self, obj: dict[str, Any], t: float) -> list[StreamEvent] | None:
        """A non-streamed Converse response: `{"output": {"message": {"content": [...]}},
        "stopReason", "usage"}`."""
        message = (obj.get("output") or {}).get("message") if isinstance(obj.get("output"), dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return None
        out: list[StreamEvent] = []
        for block in message["content"]:
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str) and block["text"]:
                out.append(TextDelta(text=block["text"], t=t))
            reasoning = ((block.get("reasoningContent") or {}).get("reasoningText") or {}).get("text")
            if isinstance(reasoning, str) and reasoning:
                out.append(ReasoningDelta(text=reasoning, t=t))
            tool = block.get("toolUse")
            if isinstance(tool, dict) and tool.get("name") == ANSWER_TOOL:
                out.append(TextDelta(text=json.dumps(tool.get("input") or {}, ensure_ascii=False), t=t))
            elif isinstance(tool, dict):
                out.append(ToolCall(id=tool.get("toolUseId"), name=tool.get("name") or "",
                                    arguments=tool.get("input") or {}))
        self.shown = bool(out)
        reason = obj.get("stopReason")
        self.acc.finish_reason = reason if isinstance(reason, str) else None
        self._usage(obj.get("usage"))
        if self.acc.finish_reason is None:
            return [*out, self.cut(t, "stopReason")]
        return out + self.acc.closing(t)
