"""Tool calls and structured output for an answer: the one place that knows
what a tool loop is.

Why it exists: a case (or a chat started with `--tools`) declares tools and
scripted results; the providers only send tools and report the calls they
stream. Between the two, an answer becomes several requests: the model calls,
the script answers, the model is asked again with the results, until it
answers in text or the step limit comes. This module runs that loop as one
event stream (so the recorder, the panes and the store see one answer),
falls back from native structured output to instructions when a server
refuses it, and turns what happened into the recorded `AnswerTrace`, the
thread messages of a follow-up, and the readable lines panes, replay and
exports show.

Scripted results: the first entry of `tool_results` whose `name` is the
call's and whose `arguments` (when given) are each equal to the call's
argument of that name answers it; otherwise `tool_default`.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from providers.events import (
    ANSWER_TOOL,
    ChatRequest,
    ErrorKind,
    Finish,
    Message,
    ResponseFormat,
    StreamError,
    StreamEvent,
    StreamResult,
    ToolCall,
    ToolResult,
    ToolResultPart,
    ToolSpec,
    UsageReport,
)
from store.records import AnswerTrace, OutputRecord, TraceCall, TraceStep

if TYPE_CHECKING:   # only named: importing core.answering.tools (exports, the report) loads no HTTP client
    from providers.base import Provider
    from providers.model_config import ModelConfig

DEFAULT_MAX_STEPS = 8
MAX_STEPS_LIMIT = 50
#: What an unmatched call gets when the script has no `tool_default`.
DEFAULT_RESULT: dict[str, str] = {"error": "no result is scripted for this call"}
#: Tool names no script may use: the forced tool that carries Anthropic's structured answers.
RESERVED_TOOL_NAMES = frozenset({ANSWER_TOOL})
#: Words in a refusal (HTTP 400) that name a protocol's structured-output field, per provider.
STRUCTURED_FIELDS: dict[str, tuple[str, ...]] = {
    "openai": ("response_format", "json_schema"),
    "openai-responses": ("text.format", "json_schema"),
    "anthropic": ("tool_choice", ANSWER_TOOL),
    "gemini": ("responseschema", "response_schema", "responsemimetype", "response_mime_type"),
    "ollama": ("format",),
}


class ScriptedResult(BaseModel):
    """One entry of a case's `tool_results`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, description="the tool whose calls this answers")
    arguments: dict[str, Any] | None = Field(
        default=None, description="when given, each of these arguments must equal the call's")
    result: Any = Field(description="what the call returns: any JSON value")


#: How a structured answer fails its schema (`core.answering.checks` finds them, `core.report.structured` counts them).
STRUCTURED_FAILURES = ("invalid_json", "missing_field", "wrong_type", "other")


class StructuredOutput(ResponseFormat):
    """A case's `response_format`: the schema its answer must follow, and how
    to ask for it (`native`: the protocol's own structured output, falling
    back to instructions where the server refuses it; `instructions`: only
    the instructions)."""

    mode: Literal["native", "instructions"] = "native"

    def request_format(self) -> ResponseFormat:
        return ResponseFormat.model_validate({"name": self.name, "schema": self.schema_, "strict": self.strict})


class ToolScript(BaseModel):
    """The tools of an answer and what their calls return (a case's `tools`,
    `tool_results`, `tool_default` and `max_steps`; or a chat's `--tools` file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tools: tuple[ToolSpec, ...] = Field(min_length=1)
    tool_results: tuple[ScriptedResult, ...] = ()
    tool_default: Any = Field(default_factory=lambda: dict(DEFAULT_RESULT))
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1, le=MAX_STEPS_LIMIT,
                           description="requests at most in one answer (a step: one request and its calls)")

    @field_validator("tools")
    @classmethod
    def _tools_ok(cls, tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        problems = tool_problems(tools, ())
        if problems:
            raise ValueError(problems[0])
        return tools

    def answer(self, call: ToolCall) -> tuple[Any, str]:
        """(result, rule) for a call: the first matching entry, else the default."""
        for i, entry in enumerate(self.tool_results):
            if entry.name == call.name and (entry.arguments is None or arguments_match(entry.arguments, call.arguments)):
                return entry.result, f"tool_results.{i}"
        return self.tool_default, "default"

    def schema_of(self, name: str) -> dict[str, Any] | None:
        return next((t.parameters for t in self.tools if t.name == name), None)


def answer_script(own: ToolScript | None, cfg: ModelConfig) -> ToolScript | None:
    """The tools one contestant's answer may call: `own` (the case's tools, or
    a chat's `--tools`) when there are any, else the contestant's (a variant's
    `tools = FILE`). The case wins because it is the test: its scripted
    results and tool checks are written against its own tools, and every
    contestant then answers it with the same ones; a variant's tools turn a
    set without tools into "with tools vs without" (docs/models.md)."""
    if own is not None or cfg.tools is None:
        return own
    return ToolScript.model_validate(cfg.tools)


def arguments_match(wanted: dict[str, Any], arguments: Any) -> bool:
    """Whether each of `wanted` is among a call's `arguments`, equal (JSON equality)."""
    if not isinstance(arguments, dict):
        return False
    return all(key in arguments and _same(arguments[key], value) for key, value in wanted.items())


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def tool_problems(tools: Sequence[ToolSpec], results: Sequence[ScriptedResult]) -> list[str]:
    """What is wrong with declared tools and scripted results, as
    "FIELD: message" lines (the sample-set loader prefixes FILE:LINE)."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if tool.name in RESERVED_TOOL_NAMES:
            problems.append(f"tools.{i}.name: {tool.name!r} is reserved (lineup uses it for structured output)")
        if tool.name in seen:
            problems.append(f"tools.{i}.name: {tool.name!r} is declared twice")
        seen.add(tool.name)
        problem = schema_problem(tool.parameters)
        if problem:
            problems.append(f"tools.{i}.parameters: {problem}")
        elif tool.parameters.get("type", "object") != "object":
            problems.append(f"tools.{i}.parameters: must be a schema of \"type\": \"object\" (the arguments object)")
    schemas = {t.name: t.parameters for t in tools}
    for i, entry in enumerate(results):
        if entry.name not in schemas:
            problems.append(f"tool_results.{i}.name: {entry.name!r} is not one of the declared tools "
                            f"({', '.join(sorted(schemas)) or 'none'})")
            continue
        props = schemas[entry.name].get("properties")
        if entry.arguments and isinstance(props, dict) and schemas[entry.name].get("additionalProperties") is False:
            unknown = sorted(set(entry.arguments) - set(props))
            if unknown:
                problems.append(f"tool_results.{i}.arguments: {', '.join(map(repr, unknown))} not among the "
                                f"parameters of {entry.name!r}")
    return problems


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not a valid JSON schema, or None (also when its
    patterns cannot run under the time limit of `core.ground.patterns`)."""
    import jsonschema

    from core.ground.patterns import schema_pattern_problem

    if not isinstance(schema, dict):
        return "a JSON schema must be an object"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        return f"invalid JSON schema at {where}: {exc.message}"
    return schema_pattern_problem(schema)


def structured_instructions(fmt: ResponseFormat) -> str:
    """The instruction that asks for the schema in words (the fallback)."""
    return ("Answer with a single JSON value that is valid against the JSON schema below, and nothing else: "
            "no prose and no code fence.\n" + json.dumps(fmt.schema_, ensure_ascii=False, sort_keys=True))


def with_instructions(request: ChatRequest, fmt: ResponseFormat) -> ChatRequest:
    """The request without native structured output, the schema in its system prompt."""
    system = f"{request.system}\n\n{structured_instructions(fmt)}" if request.system else structured_instructions(fmt)
    return request.model_copy(update={"system": system, "response_format": None})


def refuses_structured(provider: str, error: StreamError) -> bool:
    """Whether `error` is the server refusing native structured output: a
    refused request (4xx) whose message names the protocol's field."""
    if error.kind != ErrorKind.bad_request:
        return False
    message = error.message.lower()
    return any(word in message for word in STRUCTURED_FIELDS.get(provider, ()))


# --------------------------------------------------------------------------- the loop


class AnswerLoop:
    """One answer that may take several requests: `events()` is the stream
    (exactly one terminal event, as every stream), `trace(result)` what it
    records. Later steps' `RequestSent` and `Connected` are not passed on
    (the answer's timings run from its first request); usage is summed over the steps."""

    def __init__(self, provider: Provider, provider_name: str, request: ChatRequest, *,
                 script: ToolScript | None = None, structured: StructuredOutput | None = None) -> None:
        self.provider = provider
        self.provider_name = provider_name
        self.script = script
        self.structured_spec = structured
        self.structured: Literal["native", "fallback", "instructions"] | None = None
        self.stopped: Literal["answered", "step_limit"] | None = None
        self.steps = 0
        if structured is not None:
            fmt = structured.request_format()
            if structured.mode == "instructions":
                request, self.structured = with_instructions(request, fmt), "instructions"
            else:
                request, self.structured = request.model_copy(update={"response_format": fmt}), "native"
        if script is not None:
            request = request.model_copy(update={"tools": script.tools})
        self.request = request

    @property
    def max_steps(self) -> int:
        return self.script.max_steps if self.script is not None else 1

    async def events(self) -> AsyncIterator[StreamEvent]:
        request = self.request
        totals = [0, 0, 0]            # usage of the finished steps: input, output, reasoning
        seen = [False, False, False]
        while True:
            self.steps += 1
            first_step = self.steps == 1
            calls: list[ToolCall] = []
            text: list[str] = []
            shown = False
            last_usage: UsageReport | None = None
            inner = self.provider.events(request)
            terminal: StreamEvent | None = None
            try:
                async for ev in inner:
                    kind = ev.type
                    if kind == "sent" or kind == "connected":
                        if first_step:
                            yield ev
                        continue
                    if kind == "finish" or kind == "error":
                        terminal = ev
                        break
                    if isinstance(ev, UsageReport):
                        last_usage = ev
                        yield _summed(totals, seen, ev)
                        continue
                    if isinstance(ev, ToolCall):
                        calls.append(ev)
                        shown = True
                    elif kind == "text" or kind == "reasoning":
                        shown = True
                        if kind == "text":
                            text.append(ev.text)  # type: ignore[union-attr]
                    yield ev
            finally:
                await inner.aclose()   # type: ignore[attr-defined]
            if terminal is None:
                yield StreamError(kind=ErrorKind.truncated, message="stream ended without a terminal event",
                                  t=time.perf_counter())
                return
            if last_usage is not None:
                for i, v in enumerate((last_usage.input_tokens, last_usage.output_tokens,
                                       last_usage.reasoning_tokens)):
                    if v is not None:
                        totals[i] += v
                        seen[i] = True
            if isinstance(terminal, StreamError):
                fmt = request.response_format
                if (first_step and not shown and fmt is not None and self.structured == "native"
                        and refuses_structured(self.provider_name, terminal)):
                    self.structured = "fallback"
                    self.steps = 0
                    request = with_instructions(request, fmt)
                    # sent again at once, without a word on screen: which servers refuse it could tell
                    # a blind rater which model this is (the trace records it, shown after the vote)
                    continue
                yield terminal
                return
            assert isinstance(terminal, Finish)
            if not calls or self.script is None:
                self.stopped = "answered"
                yield terminal
                return
            results = []
            for call in calls:
                content, rule = self.script.answer(call)
                results.append(ToolResultPart(id=call.id, name=call.name, content=content))
                yield ToolResult(id=call.id, name=call.name, content=content, rule=rule, t=time.perf_counter())
            if self.steps >= self.script.max_steps:
                self.stopped = "step_limit"
                yield terminal
                return
            request = request.model_copy(update={"messages": (
                *request.messages, Message(role="assistant", content="".join(text), tool_calls=tuple(calls)),
                Message(role="tool", content="", tool_results=tuple(results)))})

    def trace(self, result: StreamResult) -> AnswerTrace:
        """The recorded trace of the answer `result` folded."""
        return build_trace(result, self.stopped, self.script.max_steps if self.script is not None else None,
                           self.structured)


def build_trace(result: StreamResult, stopped: str | None = None, max_steps: int | None = None,
                structured: Literal["native", "fallback", "instructions"] | None = None) -> AnswerTrace:
    """An answer's trace from its folded stream: closed steps, then the
    current one (its text is the answer); how it stopped (an error or a
    cancel as the stream ended, else `stopped`)."""
    steps = [TraceStep(text=text, calls=[_trace_call(c, r) for c, r in _paired(calls, results)])
             for text, calls, results in result.steps]
    last = TraceStep(text=result.text, calls=[_trace_call(c, None) for c in result.step_calls])
    if last.text or last.calls or not steps:
        steps.append(last)
    end: Any = stopped
    if result.error is not None:
        end = "cancelled" if result.error.kind == ErrorKind.cancelled else "error"
    elif end is None:
        end = "answered"
    return AnswerTrace(steps=steps, stopped=end, max_steps=max_steps, structured=structured)


def scrubbed_trace(trace: AnswerTrace, scrub: Callable[[str], str]) -> AnswerTrace:
    """`trace` with `scrub` applied to the model's text and every string in its
    calls' arguments, the names of their fields too."""
    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return scrub(value)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {scrub(k) if isinstance(k, str) else k: clean(v) for k, v in value.items()}
        return value

    return trace.model_copy(update={"steps": [
        step.model_copy(update={"text": scrub(step.text), "calls": [
            c.model_copy(update={"arguments": clean(c.arguments)}) for c in step.calls]})
        for step in trace.steps]})


def _summed(totals: list[int], seen: list[bool], ev: UsageReport) -> UsageReport:
    values = []
    for i, v in enumerate((ev.input_tokens, ev.output_tokens, ev.reasoning_tokens)):
        values.append(totals[i] + v if v is not None else (totals[i] if seen[i] else None))
    return UsageReport(input_tokens=values[0], output_tokens=values[1], reasoning_tokens=values[2])


def _paired(calls: list[ToolCall], results: list[ToolResult]) -> list[tuple[ToolCall, ToolResult | None]]:
    return [(c, results[i] if i < len(results) else None) for i, c in enumerate(calls)]


def _trace_call(call: ToolCall, result: ToolResult | None) -> TraceCall:
    return TraceCall(id=call.id, name=call.name, arguments=call.arguments, signature=call.signature,
                     result=None if result is None else result.content, rule=None if result is None else result.rule)


# --------------------------------------------------------------------------- reading a trace

def answer_messages(output: OutputRecord) -> list[Message]:
    """The thread messages an answer adds (for the next turn): its tool
    exchanges, then its text; nothing for an answer with neither."""
    trace = output.trace
    if trace is None or not trace.calls:
        return [Message(role="assistant", content=output.text)] if output.text else []
    out: list[Message] = []
    for step in trace.steps:
        if step.calls:
            out.append(Message(role="assistant", content=step.text, tool_calls=tuple(
                ToolCall(id=c.id, name=c.name, arguments=c.arguments, signature=c.signature) for c in step.calls)))
            out.append(Message(role="tool", content="", tool_results=tuple(
                ToolResultPart(id=c.id, name=c.name, content=c.result) for c in step.calls)))
        elif step.text:
            out.append(Message(role="assistant", content=step.text))
    return out


TraceLine = tuple[Literal["text", "call", "result", "notice", "stop"], str]
_SHOWN_CHARS = 400


def compact(value: Any, limit: int = _SHOWN_CHARS) -> str:
    """A JSON value on one line, cut at `limit` characters (raw text as is)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def trace_lines(trace: AnswerTrace) -> list[TraceLine]:
    """The readable sequence of a traced answer, in order: a notice when
    structured output fell back to instructions, each step's text, its calls
    (`→ name(arguments)`), their results (`← name: result`), and how it
    stopped when that was the step limit. The pieces are untrusted (model and
    case text): every reader neutralises them for where they go."""
    out: list[TraceLine] = []
    if trace.structured == "fallback":
        out.append(("notice", "structured output: the server refused it natively; asked with instructions"))
    for step in trace.steps:
        if step.text:
            out.append(("text", step.text))
        for call in step.calls:
            out.append(("call", _call_text(call.name, call.arguments)))
        for call in step.calls:
            if call.rule is not None:
                out.append(("result", _result_text(call.name, call.result)))
    if trace.stopped == "step_limit":
        out.append(("stop", f"stopped at the step limit ({trace.max_steps} requests) without an answer"))
    return out


def _call_text(name: str, arguments: Any) -> str:
    return f"→ {name}({compact(arguments)})"


def _result_text(name: str, content: Any) -> str:
    return f"← {name}: {compact(content)}"


def call_line(call: ToolCall) -> str:
    """A streamed call as the pane shows it (the same form as `trace_lines`)."""
    return _call_text(call.name, call.arguments)


def result_line(result: ToolResult) -> str:
    """A result fed back, as the pane shows it."""
    return _result_text(result.name, result.content)
