"""The contract between providers and everything above them.

A provider turns a `ChatRequest` into an async stream of `StreamEvent`s.
Every stream starts with `RequestSent` and ends with exactly one terminal
event: `Finish` (the model stopped) or `StreamError` (it did not). In between
come `TextDelta`, `ReasoningDelta`, `ToolCall`, `UsageReport`, `Retrying` and
`ServedBy` (which model the server says answered: the drift watch's evidence),
`Connected` (the time this request spent setting up its connection, 0 on a
reused one: the figures run from a ready connection, as a warm production
client's do), and, from the core's tool loop, `ToolResult`: the scripted result it fed
back before the next request of the same answer.
Timestamps (`t`) are `time.perf_counter()` seconds taken where the bytes
arrived; `StreamResult` turns them into the figures the store keeps. A
server that answers with one whole response body instead of a stream (some
gateways do) gives the same events, all at once, and `Finish(streamed=False)`:
such an answer keeps its duration but has no time to first token or speed.

Consumers tell events apart by their class (`match event: case TextDelta():`
or `isinstance`), which a type checker narrows; each event's `type` string is
its tag in JSON (`model_dump_json`), not the way to switch on it.
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class ErrorKind(StrEnum):
    auth = "auth"                  # 401/403, missing or rejected key
    rate_limited = "rate_limited"  # 429 (retry_after when the server said)
    overloaded = "overloaded"      # 529, Anthropic overloaded_error, 503 "overloaded"
    server = "server"              # 5xx, error event / line inside a 200 stream
    timeout = "timeout"            # connect or read timeout (a stalled stream)
    truncated = "truncated"        # the stream ended without its terminator
    bad_response = "bad_response"  # not the protocol: HTML page, invalid JSON or UTF-8
    cancelled = "cancelled"        # the user (or the app) cancelled it
    connection = "connection"      # refused, DNS failure, TLS error, reset before any byte
    not_found = "not_found"        # 404: unknown model or wrong base URL
    bad_request = "bad_request"    # other 4xx: the request itself was refused
    config = "config"              # missing key variable etc., found before any request


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)


class RequestSent(_Event):
    type: Literal["sent"] = "sent"
    t: float
    wall: float = Field(description="time.time() when the request went out")
    attempt: int = 1


class Connected(_Event):
    """The request has its connection: `setup_ms` spent opening it (DNS, TCP,
    TLS) now, 0 when a kept-alive one was reused. `StreamResult` records it
    apart (`connect_ms`) and runs the answer's timings from the ready
    connection, so a cold start does not inflate the time to first token."""

    type: Literal["connected"] = "connected"
    t: float
    setup_ms: float = Field(ge=0, allow_inf_nan=False)


class TextDelta(_Event):
    type: Literal["text"] = "text"
    text: str
    t: float


class ReasoningDelta(_Event):
    type: Literal["reasoning"] = "reasoning"
    text: str
    t: float


class ToolCall(_Event):
    """A function call the model made (complete: its argument fragments are
    joined and parsed; `arguments` is the raw text when it is not JSON).
    `signature` is an opaque token some protocols need sent back with the
    call (Gemini's `thoughtSignature`)."""

    type: Literal["tool_call"] = "tool_call"
    id: str | None
    name: str
    arguments: Any
    signature: str | None = None

    @field_validator("arguments")
    @classmethod
    def _not_too_deep(cls, value: Any) -> Any:
        # deeper than this, the record could not be written (its JSON encoder stops near 255 levels)
        if not _within_depth(value, MAX_ARGUMENT_DEPTH):
            raise ValueError(f"tool call arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        return value


#: How deep a tool call's arguments may nest (a parser refuses deeper ones: a bad response).
MAX_ARGUMENT_DEPTH = 100


def _within_depth(value: Any, limit: int) -> bool:
    """Whether `value` (a JSON-like tree) nests at most `limit` levels (no recursion: any depth is safe)."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            if depth >= limit:
                return False
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return True


class ToolResult(_Event):
    """The result fed back for a call (the core's tool loop: a sample set's
    scripted result); `rule` says which script entry answered it
    ("tool_results.N" or "default"). The next request of the same answer
    follows."""

    type: Literal["tool_result"] = "tool_result"
    id: str | None
    name: str
    content: Any
    rule: str | None = None
    t: float


class UsageReport(_Event):
    """Token counts as the provider reported them (cumulative, last one wins)."""

    type: Literal["usage"] = "usage"
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None


#: The most characters of a served model id or fingerprint kept (they come from the server).
SERVED_LIMIT = 200


class ServedBy(_Event):
    """Which model the provider says produced this answer, as its stream
    reported it: OpenAI-compatible `model` and `system_fingerprint` (per
    chunk), Anthropic `message.model` (`message_start`), Gemini
    `modelVersion`, Ollama `model`. Sent when first seen and again whenever
    a value changes; the last one wins (`StreamResult.served_model`). Values
    are the server's text (cut to `SERVED_LIMIT`): untrusted, shown only
    through `core.ground.text`, and never before a blind vote is revealed."""

    type: Literal["served_by"] = "served_by"
    model: str | None = None
    system_fingerprint: str | None = None


class Retrying(_Event):
    """A failed attempt before the first token; another follows after `delay` s."""

    type: Literal["retrying"] = "retrying"
    attempt: int
    delay: float
    kind: ErrorKind
    message: str


class Queued(_Event):
    """The request waits for its server: as many requests as the server takes
    at once (`concurrency`) are in flight for other panes or cases."""

    type: Literal["queued"] = "queued"
    message: str
    t: float


class Finish(_Event):
    type: Literal["finish"] = "finish"
    reason: str | None = Field(description="the provider's raw finish reason")
    t: float
    streamed: bool = Field(default=True, description=(
        "False when the server answered a stream request with one complete response body (a gateway "
        "that does not stream): the answer came all at once, so it has no time to first token"))


class StreamError(_Event):
    """Terminal failure. `message` never contains a key or an Authorization
    header; it may name the model, its host or vendor (it is stored as it is;
    a blind screen shows only `kind` and the status: `core.stats.votes.error_line`)."""

    type: Literal["error"] = "error"
    kind: ErrorKind
    message: str
    t: float
    status: int | None = None
    retry_after: float | None = None
    streamed: bool = Field(default=True, description="False when the text before the error came as one whole body")


StreamEvent = (RequestSent | Connected | TextDelta | ReasoningDelta | ToolCall | ToolResult | UsageReport | Retrying | Queued
               | Finish | StreamError | ServedBy)


class ImagePart(BaseModel):
    """An image sent with a user message; `data` is base64 without a data: prefix."""

    model_config = ConfigDict(frozen=True)
    mime: str
    data: str
    path: str | None = None
    sha256: str | None = None


#: Tool names every protocol accepts (OpenAI: 1-64 of these characters).
TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"


class ToolSpec(BaseModel):
    """A function the model may call: each protocol sends it in its own form
    (OpenAI-compatible and Ollama `tools`, Anthropic `tools` with
    `input_schema`, Gemini `functionDeclarations`). `parameters` is a JSON
    schema for the arguments object."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(pattern=TOOL_NAME_PATTERN)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


#: The forced tool that carries an Anthropic structured answer (its input is
#: the answer): defined here, with the request contract, so that a module that
#: only needs the name (core.answering.tools, and through it exports and the report)
#: does not load the HTTP client with `providers.anthropic`.
ANSWER_TOOL = "structured_answer"


class ResponseFormat(BaseModel):
    """Native structured output: the answer must be JSON valid against
    `schema` (OpenAI-compatible `response_format: json_schema`, Gemini
    `responseSchema`, Ollama `format`, Anthropic a forced tool named
    `ANSWER_TOOL`, see `providers.anthropic`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    name: str = Field(default="response", pattern=TOOL_NAME_PATTERN)
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None


class ToolResultPart(BaseModel):
    """One result in a `tool` message: what answered call `id` (`name`)."""

    model_config = ConfigDict(frozen=True)
    id: str | None
    name: str
    content: Any


class Message(BaseModel):
    """One message of a thread. An assistant message may carry the calls it
    made (`tool_calls`); a `tool` message carries their results, in order."""

    model_config = ConfigDict(frozen=True)
    role: Literal["user", "assistant", "tool"]
    content: str
    images: tuple[ImagePart, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResultPart, ...] = ()


def result_text(content: Any) -> str:
    """A tool result as the text the protocols that take a string get."""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def arguments_text(arguments: Any) -> str:
    """A call's arguments as the JSON text OpenAI-compatible servers take back
    (raw text that was not JSON is sent as it came)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def arguments_object(arguments: Any) -> dict[str, Any]:
    """A call's arguments as the object Anthropic, Gemini and Ollama take back
    (arguments that were not an object are wrapped as {"value": ...})."""
    return arguments if isinstance(arguments, dict) else {"value": arguments}



#: The ranges accepted for sampling parameters wherever they are set (config
#: [defaults] and `params`, a case's `params`, the command-line flags), so that
#: no request can carry a value a provider would refuse or JSON cannot hold.
TEMPERATURE_RANGE = (0.0, 2.0)
MAX_TOKENS_LIMIT = 1_000_000
SEED_RANGE = (-(2**63), 2**63 - 1)
#: How hard a reasoning model thinks, where its protocol takes it (OpenAI's
#: `reasoning_effort`, Ollama's `think` levels: see the catalogue's
#: `reasoning_effort` column); other protocols leave it out of the request.
ReasoningEffort = Literal["minimal", "low", "medium", "high"]
#: Every parameter a session, a model's `params` or `-p KEY=VALUE` may set.
PARAM_NAMES = ("temperature", "top_p", "max_tokens", "seed", "stop", "reasoning_effort", "extra_body")


class SamplingParams(BaseModel):
    """Fixed for a session unless overridden; `None` means "provider default".
    Every value is checked: finite numbers, in the ranges above (temperature
    0..2, top_p above 0 and at most 1, max_tokens 1..1,000,000, seed a 64-bit
    integer); a boolean is not a number here. `reasoning_effort` is sent
    only where the protocol has it; `extra_body` is merged into the request
    body as is, after the model's own `extra_body` (no NaN or infinity:
    JSON has none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    reasoning_effort: ReasoningEffort | None = None
    extra_body: dict[str, Any] | None = None

    @field_validator("temperature", "top_p", "max_tokens", "seed", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a number, not true or false")
        return value

    @field_validator("temperature")
    @classmethod
    def _temperature(cls, value: float | None) -> float | None:
        low, high = TEMPERATURE_RANGE
        if value is not None and not (math.isfinite(value) and low <= value <= high):
            raise ValueError(f"must be between {low:g} and {high:g}")
        return value

    @field_validator("top_p")
    @classmethod
    def _top_p(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and 0 < value <= 1):
            raise ValueError("must be greater than 0 and at most 1")
        return value

    @field_validator("max_tokens")
    @classmethod
    def _max_tokens(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("must be at least 1")
        if value is not None and value > MAX_TOKENS_LIMIT:
            raise ValueError(f"must be at most {MAX_TOKENS_LIMIT:,}")
        return value

    @field_validator("seed")
    @classmethod
    def _seed(cls, value: int | None) -> int | None:
        if value is not None and not SEED_RANGE[0] <= value <= SEED_RANGE[1]:
            raise ValueError("must be a 64-bit integer (between -2^63 and 2^63-1)")
        return value

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not _json_finite(value):
            raise ValueError("must hold no NaN or infinite number (JSON has none)")
        return value

    def merged(self, override: "SamplingParams | None") -> "SamplingParams":
        """These params with every field `override` sets replacing ours
        (`extra_body` key by key: the override's keys win)."""
        if override is None:
            return self
        update = override.model_dump(exclude_none=True)
        if self.extra_body and override.extra_body is not None:
            update["extra_body"] = {**self.extra_body, **override.extra_body}
        return self.model_copy(update=update)


# Each protocol's names for the sampling parameters: the one table the
# providers build their request bodies from (a field absent is not sent).
SAMPLING_WIRE_NAMES: dict[str, dict[str, str]] = {
    "openai": {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_tokens", "seed": "seed",
               "stop": "stop"},
    # the Responses API has no seed or stop sequences
    "openai-responses": {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_output_tokens"},
    # max_tokens is required there and set apart; seed has no equivalent
    "anthropic": {"temperature": "temperature", "top_p": "top_p", "stop": "stop_sequences"},
    "gemini": {"temperature": "temperature", "top_p": "topP", "max_tokens": "maxOutputTokens", "seed": "seed",
               "stop": "stopSequences"},
    "ollama": {"temperature": "temperature", "top_p": "top_p", "max_tokens": "num_predict", "seed": "seed",
               "stop": "stop"},
    # Bedrock Converse's inferenceConfig; seed has no equivalent
    "bedrock": {"temperature": "temperature", "top_p": "topP", "max_tokens": "maxTokens", "stop": "stopSequences"},
}


def wire_params(params: SamplingParams, protocol: str) -> dict[str, Any]:
    """The parameters set in `params`, under `protocol`'s names."""
    out: dict[str, Any] = {}
    for field, name in SAMPLING_WIRE_NAMES[protocol].items():
        value = getattr(params, field)
        if field == "stop":
            if value:
                out[name] = list(value)
        elif value is not None:
            out[name] = value
    return out


def _json_finite(value: Any, depth: int = 0) -> bool:
    """Whether `value` (a JSON-like tree) holds no NaN or infinity, nested at most 100 deep."""
    if depth > 100:
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_json_finite(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_json_finite(v, depth + 1) for v in value)
    return True


def params_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """A `SamplingParams` validation error as (field, what is wrong), the
    wording the config, the sample-set and the flag checks all show."""
    out = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        out.append((field, msg[:1].lower() + msg[1:]))
    return out


class ChatRequest(BaseModel):
    model_config = ConfigDict(frozen=True)
    model: str
    messages: tuple[Message, ...]
    system: str | None = None
    params: SamplingParams = SamplingParams()
    tools: tuple[ToolSpec, ...] = ()
    response_format: ResponseFormat | None = None


class StreamResult:
    """Folds a stream's events into what is shown and recorded.

    Feed every event to `add`; read the fields at any time (a checkpoint) or
    after the terminal event. Chunk timings are kept compactly: milliseconds
    since the request went out and the number of characters, per delta.

    An answer of several requests (a tool loop: calls, `ToolResult`s, the
    next request) is cut into steps: the first result after a step's calls
    closes it (its text and calls go to `steps`), so `text` is always the
    text of the current step, the final answer once the stream is over.
    `tool_calls` keeps every call of every step.
    """

    __slots__ = (
        "text_parts", "reasoning_parts", "tool_calls", "finish_reason", "error",
        "input_tokens", "output_tokens", "reasoning_tokens", "sent_t", "sent_wall",
        "first_token_t", "end_t", "chunk_ms", "chunk_chars", "attempts", "steps", "step_calls", "streamed",
        "served_model", "system_fingerprint", "connect_ms",
    )

    def __init__(self) -> None:
        self.text_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.finish_reason: str | None = None
        self.error: StreamError | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.reasoning_tokens: int | None = None
        self.sent_t: float | None = None
        self.sent_wall: float | None = None
        self.first_token_t: float | None = None
        self.end_t: float | None = None
        self.chunk_ms: list[int] = []
        self.chunk_chars: list[int] = []
        self.attempts = 0
        #: closed steps: (text, calls, results fed back), in order
        self.steps: list[tuple[str, list[ToolCall], list[ToolResult]]] = []
        self.step_calls: list[ToolCall] = []   # calls of the current step
        self.streamed = True   # False once a Finish (or StreamError) says the answer came as one whole body
        self.served_model: str | None = None          # the last `ServedBy` values
        self.system_fingerprint: str | None = None
        self.connect_ms: float | None = None          # `Connected` of the last attempt; None: not measured

    def add(self, event: StreamEvent) -> None:
        match event:
            case TextDelta() | ReasoningDelta():
                text = event.text
                if not text:
                    return
                (self.text_parts if isinstance(event, TextDelta) else self.reasoning_parts).append(text)
                if self.first_token_t is None:
                    self.first_token_t = event.t
                base = self.sent_t if self.sent_t is not None else event.t
                self.chunk_ms.append(round((event.t - base) * 1000))
                self.chunk_chars.append(len(text))
            case RequestSent():
                self.sent_t, self.sent_wall, self.attempts = event.t, event.wall, event.attempt
                self.served_model = self.system_fingerprint = None   # a new attempt says it again
                self.connect_ms = None
            case Connected():
                # timings from the ready connection; no more than the time since the request (a plugin's figure)
                setup = min(event.setup_ms, max(0.0, (event.t - self.sent_t) * 1000)) \
                    if self.sent_t is not None else event.setup_ms
                self.connect_ms = setup
                if self.sent_t is not None and self.first_token_t is None:
                    self.sent_t += setup / 1000
            case UsageReport():
                if event.input_tokens is not None:
                    self.input_tokens = event.input_tokens
                if event.output_tokens is not None:
                    self.output_tokens = event.output_tokens
                if event.reasoning_tokens is not None:
                    self.reasoning_tokens = event.reasoning_tokens
            case ToolCall():
                self.tool_calls.append(event)
                self.step_calls.append(event)
            case ToolResult():
                if self.step_calls or not self.steps:
                    self.steps.append(("".join(self.text_parts), self.step_calls, []))
                    self.text_parts, self.step_calls = [], []
                self.steps[-1][2].append(event)
            case Finish():
                self.finish_reason, self.end_t = event.reason, event.t
                if not event.streamed:
                    self.streamed = False
            case StreamError():
                self.error, self.end_t = event, event.t
                if not event.streamed:
                    self.streamed = False
            case ServedBy():
                if event.model is not None:
                    self.served_model = event.model
                if event.system_fingerprint is not None:
                    self.system_fingerprint = event.system_fingerprint

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def multi_step(self) -> bool:
        """Whether this answer made tool calls (a trace is worth recording)."""
        return bool(self.steps or self.step_calls)

    @property
    def reasoning(self) -> str | None:
        return "".join(self.reasoning_parts) if self.reasoning_parts else None

    @property
    def ttft_ms(self) -> float | None:
        """Time to first token; None when no token came or the answer was not streamed."""
        if self.first_token_t is None or self.sent_t is None or not self.streamed:
            return None
        return (self.first_token_t - self.sent_t) * 1000

    @property
    def duration_ms(self) -> float | None:
        if self.end_t is None or self.sent_t is None:
            return None
        return (self.end_t - self.sent_t) * 1000

    def output_tokens_or_estimate(self) -> tuple[int, bool]:
        """(count, estimated): the provider's figure, else ~4 characters a token."""
        if self.output_tokens is not None:
            return self.output_tokens, False
        chars = sum(self.chunk_chars)
        return (max(1, round(chars / 4)) if chars else 0), True

    def tokens_per_s(self) -> float | None:
        """Output tokens per second from first token to end (the decode speed);
        None for an answer that was not streamed (it has no first-token time)."""
        if self.first_token_t is None or self.end_t is None or not self.streamed:
            return None
        span = self.end_t - self.first_token_t
        tokens, _ = self.output_tokens_or_estimate()
        return tokens / span if span > 0 and tokens > 1 else None
