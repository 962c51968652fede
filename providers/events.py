"""The contract between providers and everything above them.

A provider turns a `ChatRequest` into an async stream of `StreamEvent`s.
Every stream starts with `RequestSent` and ends with exactly one terminal
event: `Finish` (the model stopped) or `StreamError` (it did not). In between
come `TextDelta`, `ReasoningDelta`, `ToolCall`, `UsageReport` and `Retrying`.
Timestamps (`t`) are `time.perf_counter()` seconds taken where the bytes
arrived; `StreamResult` turns them into the figures the store keeps.
"""

from __future__ import annotations

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


class TextDelta(_Event):
    type: Literal["text"] = "text"
    text: str
    t: float


class ReasoningDelta(_Event):
    type: Literal["reasoning"] = "reasoning"
    text: str
    t: float


class ToolCall(_Event):
    type: Literal["tool_call"] = "tool_call"
    id: str | None
    name: str
    arguments: Any


class UsageReport(_Event):
    """Token counts as the provider reported them (cumulative, last one wins)."""

    type: Literal["usage"] = "usage"
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None


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


class StreamError(_Event):
    """Terminal failure. `message` never contains a key or an Authorization
    header; it may name the model, its host or vendor (it is stored as it is;
    a blind screen shows only `kind` and the status: `core.votes.error_line`)."""

    type: Literal["error"] = "error"
    kind: ErrorKind
    message: str
    t: float
    status: int | None = None
    retry_after: float | None = None


StreamEvent = (RequestSent | TextDelta | ReasoningDelta | ToolCall | UsageReport | Retrying | Queued | Finish
               | StreamError)


class ImagePart(BaseModel):
    """An image sent with a user message; `data` is base64 without a data: prefix."""

    model_config = ConfigDict(frozen=True)
    mime: str
    data: str
    path: str | None = None
    sha256: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)
    role: Literal["user", "assistant"]
    content: str
    images: tuple[ImagePart, ...] = ()


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


class StreamResult:
    """Folds a stream's events into what is shown and recorded.

    Feed every event to `add`; read the fields at any time (a checkpoint) or
    after the terminal event. Chunk timings are kept compactly: milliseconds
    since the request went out and the number of characters, per delta.
    """

    __slots__ = (
        "text_parts", "reasoning_parts", "tool_calls", "finish_reason", "error",
        "input_tokens", "output_tokens", "reasoning_tokens", "sent_t", "sent_wall",
        "first_token_t", "end_t", "chunk_ms", "chunk_chars", "attempts",
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

    def add(self, event: StreamEvent) -> None:
        kind = event.type
        if kind == "text" or kind == "reasoning":
            if not event.text:
                return
            (self.text_parts if kind == "text" else self.reasoning_parts).append(event.text)
            if self.first_token_t is None:
                self.first_token_t = event.t
            base = self.sent_t if self.sent_t is not None else event.t
            self.chunk_ms.append(round((event.t - base) * 1000))
            self.chunk_chars.append(len(event.text))
        elif kind == "sent":
            self.sent_t, self.sent_wall, self.attempts = event.t, event.wall, event.attempt
        elif kind == "usage":
            if event.input_tokens is not None:
                self.input_tokens = event.input_tokens
            if event.output_tokens is not None:
                self.output_tokens = event.output_tokens
            if event.reasoning_tokens is not None:
                self.reasoning_tokens = event.reasoning_tokens
        elif kind == "tool_call":
            self.tool_calls.append(event)
        elif kind == "finish":
            self.finish_reason, self.end_t = event.reason, event.t
        elif kind == "error":
            self.error, self.end_t = event, event.t

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def reasoning(self) -> str | None:
        return "".join(self.reasoning_parts) if self.reasoning_parts else None

    @property
    def ttft_ms(self) -> float | None:
        if self.first_token_t is None or self.sent_t is None:
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
        """Output tokens per second from first token to end (the decode speed)."""
        if self.first_token_t is None or self.end_t is None:
            return None
        span = self.end_t - self.first_token_t
        tokens, _ = self.output_tokens_or_estimate()
        return tokens / span if span > 0 and tokens > 1 else None
