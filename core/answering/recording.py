"""One answer streamed into the store (`record_stream`): started,
checkpointed about once a second, finished with its final status; every
field a server sends through one gate (`server_fields`); a key the server
echoes never reaches the store or the screen. A chat (`core.answering.sessions`),
a run, a load profile and a batch all record answers through here."""

from __future__ import annotations


import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio

from core.ground.errors import store_error_in
from core.ground.text import SERVER_FIELD_LIMIT, SERVER_MESSAGE_LIMIT, server_text
from core.answering.tools import AnswerLoop, StructuredOutput, ToolScript, build_trace, scrubbed_trace
from providers.base import ChatStream, Provider
from providers.events import (
    ChatRequest,
    ErrorKind,
    Finish,
    ReasoningDelta,
    Retrying,
    ServedBy,
    StreamError,
    StreamEvent,
    StreamResult,
    TextDelta,
    ToolCall,
    ToolResult,
)
from providers.model_config import ModelConfig
from providers.secrets import GrowingText, HeldBack, scrubber_for
from store import AsyncStore
from store.records import (
    OutputRecord,
)




class Contestant(Protocol):
    """What recording an answer needs of a contestant
    (`core.answering.sessions.Contestant` is one)."""

    config: ModelConfig
    position: int
    stream: ChatStream | None

    def get_provider(self) -> Provider: ...

CHECKPOINT_EVERY_S = 1.0
_Text = TypeVar("_Text", str, str | None)   # a text and its scrubbed form have the same type


@dataclass(slots=True)
class PaneUpdate:
    """What the UI receives for every stream event of one contestant."""

    index: int
    event: StreamEvent
    result: StreamResult
    output_id: str
    turn_id: str


def output_from_result(base: OutputRecord, result: StreamResult, cfg: ModelConfig) -> OutputRecord:
    """The final record of one answer, from what its stream reported. The error
    text is kept as it came (keys are scrubbed by the caller): blind or not,
    what a screen may show of it is decided when it is shown
    (`core.stats.votes.error_line`)."""
    err = result.error
    if err is None:
        status = "complete" if result.finish_reason is not None or result.end_t is not None else "interrupted"
    elif err.kind == ErrorKind.cancelled:
        status = "cancelled"
    else:
        status = "error"
    tokens, estimated = result.output_tokens_or_estimate()
    message = err.message if err else None
    cost = cfg.price.cost(result.input_tokens, tokens) if cfg.price else None
    return base.model_copy(update=dict(
        status=status, text=result.text, reasoning=result.reasoning,
        error_kind=err.kind.value if err else None, error_message=message,
        finish_reason=result.finish_reason, sent_at=result.sent_wall,
        ttft_ms=result.ttft_ms, duration_ms=result.duration_ms, connect_ms=result.connect_ms,
        chunk_ms=list(result.chunk_ms), chunk_chars=list(result.chunk_chars),
        input_tokens=result.input_tokens, output_tokens=tokens, tokens_estimated=estimated,
        reasoning_tokens=result.reasoning_tokens, cost=cost, streamed=result.streamed,
        served_model=result.served_model, system_fingerprint=result.system_fingerprint,
    ))


async def record_stream(
    store: AsyncStore,
    contestant: Contestant,
    request: ChatRequest,
    base: OutputRecord,
    *,
    contestants: Sequence[Contestant],
    on_update: Callable[[PaneUpdate], None] | None = None,
    script: ToolScript | None = None,
    structured: StructuredOutput | None = None,
) -> tuple[OutputRecord, StreamResult]:
    """Stream one answer into the store: started, checkpointed about once a
    second, finished with its final status. Error text is stored and reported
    as it came, keys aside; a blind screen shows only its kind and status
    until the reveal (`core.stats.votes.error_line`).

    Checkpoints run on a timer beside the stream, never on the per-token path,
    so text that came just before a stall is saved within about a second.

    A key the server echoes (in the answer, its reasoning or an error) never
    reaches the store or the screen: text is scrubbed of any run of 8 or more
    characters of any key in the session at each checkpoint and at the end; what
    goes to `on_update` passes through `HeldBack`, which holds back an ending
    that could still grow into the key. Only models with a key pay for this.

    With a tool `script` or `structured` output the answer runs as a tool
    loop (`core.answering.tools.AnswerLoop`): one stream, one record, its trace saved
    with it."""
    await store.start_output(base)
    result = StreamResult()
    loop, stream = _open_stream(contestant, request, script, structured)
    contestant.stream = stream
    index = contestant.position
    # Every secret of the session (keys and secret header values): an answer may
    # echo a neighbour's (a shared proxy) as well as its own.
    keys = tuple(sorted({k for c in (contestant, *contestants) for k in c.config.secrets()}))
    scrubber = scrubber_for(keys) if keys else None
    held = HeldBack(scrubber) if scrubber is not None and on_update is not None else None
    kept = {"text": GrowingText(scrubber), "reasoning": GrowingText(scrubber)} if scrubber is not None else None

    def secret_free(kind: str, text: _Text) -> _Text:
        return kept[kind].of(text) if kept is not None and text else text

    def emit(event: StreamEvent) -> None:
        event = server_fields(event, scrubber.scrub if scrubber is not None else None)
        result.add(event)
        if on_update is not None:
            if held is None:
                on_update(PaneUpdate(index, event, result, base.id, base.turn_id))
            else:
                for shown in _shown_events(held, event):
                    on_update(PaneUpdate(index, shown, result, base.id, base.turn_id))

    saved = [0]                        # len(result.chunk_ms) at the last checkpoint
    write_failed: list[BaseException] = []

    async def checkpoint_on_a_timer() -> None:
        try:
            while True:
                await anyio.sleep(CHECKPOINT_EVERY_S)
                n = len(result.chunk_ms)
                if n != saved[0]:
                    saved[0] = n
                    await store.checkpoint_output(base.id, secret_free("text", result.text),
                                                  secret_free("reasoning", result.reasoning),
                                                  result.chunk_ms[:n], result.chunk_chars[:n])
        except Exception as exc:  # a failed write ends this answer; raised by the streaming task
            write_failed.append(exc)
            stream.cancel()

    try:
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(checkpoint_on_a_timer)
            try:
                async for event in stream:
                    emit(event)
            except Exception as exc:
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if write_failed:
            raise write_failed[0]
        if failure is not None:
            # A client that breaks its contract (raises instead of ending with
            # a StreamError) fails this answer only, never its neighbours; the
            # exception's text is scrubbed of the key like any error message.
            if store_error_in(failure) is not None or result.error is not None:
                raise failure
            emit(StreamError(kind=ErrorKind.bad_request, t=time.perf_counter(), message=_scrub_secrets(
                f"the client failed: {type(failure).__name__}: {failure}", contestant.config)[:500]))
    finally:
        contestant.stream = None
        final = _final_record(base, result, contestant, loop, scrubber, secret_free)
        with anyio.CancelScope(shield=True):
            await store.finish_output(final)
    return final, result


def _open_stream(contestant: Contestant, request: ChatRequest, script: ToolScript | None,
                 structured: StructuredOutput | None) -> tuple[AnswerLoop | None, ChatStream]:
    """The answer's stream: the provider's own, or a tool loop's around it."""
    provider = contestant.get_provider()
    if script is None and structured is None:
        return None, provider.stream(request)
    loop = AnswerLoop(provider, contestant.config.provider, request, script=script, structured=structured)
    return loop, ChatStream(loop.events())


def _final_record(base: OutputRecord, result: StreamResult, contestant: Contestant, loop: AnswerLoop | None,
                  scrubber: Any, secret_free: Callable[[str, Any], Any]) -> OutputRecord:
    """The answer as it is finished in the store: its status, its trace (a
    tool loop's, or the steps of one stream), every text scrubbed of keys."""
    final = output_from_result(base, result, contestant.config)
    if loop is not None or result.multi_step:
        trace = loop.trace(result) if loop is not None else build_trace(result)
        final = final.model_copy(update={"trace": trace if scrubber is None else scrubbed_trace(trace, scrubber.scrub)})
    if scrubber is not None:
        final = final.model_copy(update={
            "text": secret_free("text", final.text), "reasoning": secret_free("reasoning", final.reasoning),
            "error_message": scrubber.scrub(final.error_message) if final.error_message else None})
    return final


#: The most characters of a tool call's opaque signature kept (Gemini's `thoughtSignature`, sent back with it).
SIGNATURE_LIMIT = 64 * 1024


def server_fields(event: StreamEvent, scrub: Callable[[str], str] | None) -> StreamEvent:
    """`event` with every string its server chose made what `core.ground.text.server_text`
    allows (the session's secrets scrubbed, bounded, controls escaped): the
    served model and fingerprint, the finish reason, a tool call's (and its
    result's) name, id and signature, an error's or a retry's message. The one
    gate every answer's events pass before they are folded, shown or stored,
    streamed (`record_stream`) or from a batch (`core.answering.batch_run`). Answer and
    reasoning text are the answer itself: scrubbed as they grow (`GrowingText`,
    `HeldBack`), kept whole, made inert where they are shown; a call's arguments
    are scrubbed with the trace (`core.answering.tools.scrubbed_trace`)."""
    def field(value: str | None, limit: int = SERVER_FIELD_LIMIT) -> str | None:
        return None if value is None else server_text(value, scrub, limit)

    match event:
        case ServedBy():
            return event.model_copy(update={"model": field(event.model),
                                            "system_fingerprint": field(event.system_fingerprint)})
        case Finish():
            return event.model_copy(update={"reason": field(event.reason)})
        case ToolCall():
            return event.model_copy(update={"id": field(event.id), "name": field(event.name) or "",
                                            "signature": field(event.signature, SIGNATURE_LIMIT)})
        case ToolResult():
            return event.model_copy(update={"id": field(event.id), "name": field(event.name) or ""})
        case StreamError() | Retrying():
            return event.model_copy(update={"message": server_text(event.message, scrub, SERVER_MESSAGE_LIMIT)})
    return event


def _shown_events(held: HeldBack, event: StreamEvent) -> list[StreamEvent]:
    """What the screen gets for `event`: deltas without any run of the key
    (an ending that may grow into one waits for the next delta); held text is
    let out before a terminal event; messages scrubbed too."""
    match event:
        case TextDelta() | ReasoningDelta():
            kind = "text" if isinstance(event, TextDelta) else "reasoning"
            out: list[StreamEvent] = []
            if kind == "text" and held.pending.get("reasoning"):
                out.append(ReasoningDelta(text=held.flush("reasoning"), t=event.t))
            shown = held.feed(kind, event.text)
            if shown:
                out.append(event.model_copy(update={"text": shown}))
            return out
        case Finish() | StreamError():
            out = [ReasoningDelta(text=held.flush("reasoning"), t=event.t)] if held.pending.get("reasoning") else []
            rest = held.flush("text")
            if rest:
                out.append(TextDelta(text=rest, t=event.t))
            if isinstance(event, StreamError):
                event = event.model_copy(update={"message": held.scrubber.scrub(event.message)})
            return [*out, event]
        case Retrying():
            return [event.model_copy(update={"message": held.scrubber.scrub(event.message)})]
    return [event]


def _scrub_secrets(text: str, cfg: ModelConfig) -> str:
    """`text` without the model's secrets (its key and secret header values, as
    set in their variables now), any run of 8 or more of their characters, or
    anything that looks like a key in a header."""
    from providers.http import scrub

    return scrub(text, cfg.secrets())
