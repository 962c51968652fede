"""The HTTP machinery shared by the four wire protocols.

`HttpProvider` owns one `httpx.AsyncClient` per configured model and runs the
request loop: key and header secrets (the environment, at request time), the
auth header, extra headers and query parameters (`ModelConfig.auth`,
`headers`, `query`: gateways, Azure), sending, status -> `ErrorKind`, retries
*only before the first token* with bounded backoff that honours `retry-after`
/ `retry-after-ms`, timing where the bytes arrive, and a terminal event on
every path. A protocol module supplies three things: how to build the request
(`build`), a `StreamParser` that turns body bytes into events, and the
parser's `whole` for a complete non-streamed response.

A body is read in one of two forms, decided by its content type or else its
first non-space byte (`StreamParser.opening`): the protocol's stream, fed as
it arrives, or one whole JSON response (a gateway that ignores `stream: true`),
collected and read at the end, its answer marked not streamed. A body that is
neither is reported as `bad_response` saying what it was: status, content
type and its first bytes, quoted with Python's escapes so nothing in them acts
on a terminal (the screens neutralise it again through `core.ground.text`).

The request loop (`HttpProvider._events`) runs in named steps: `_prepare`
(key, auth and configured headers, URL and query, body, limits; once), then
per attempt `_open` (send, check the status), `_parse` (each body chunk into
events, or kept for a whole body, within the deadline and size limits) and
the parser's `close` (`end` for a stream, `whole` for a body); `_retry_delay`
decides whether a failure is tried again (only before the first token), else
it ends the stream as its one `StreamError`.

Messages never carry the API key, a secret header's value or an auth header:
every message built here goes through `scrub`.

Why one file past 600 lines: the loop, the failures it maps to `ErrorKind`,
the body forms and the helpers every protocol module shares (parsing errors,
retry-after, scrub) are one contract, a terminal event on every path, best
read in one place.
"""

from __future__ import annotations

import email.utils
import functools
import json
import os
import random
import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import anyio
import httpx
from pydantic import ValidationError

from providers.base import Provider
from providers.catalogue import CATALOGUE, default_base_url
from providers.events import (
    SERVED_LIMIT,
    ChatRequest,
    ErrorKind,
    Finish,
    ReasoningDelta,
    RequestSent,
    Retrying,
    SamplingParams,
    ServedBy,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCall,
    UsageReport,
)
from providers.model_config import Auth, EnvValue, ModelConfig, header_value_ok, server_concurrency
from providers.secrets import scrubber_for
from providers.sse import DecodeError

perf_counter = time.perf_counter

#: Statuses worth another attempt (before the first token only).
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
#: Kinds worth another attempt when they happen before the first token.
RETRYABLE_KINDS = frozenset({ErrorKind.rate_limited, ErrorKind.overloaded, ErrorKind.server, ErrorKind.connection})
_ERROR_BODY_LIMIT = 64 * 1024
#: Response bytes read per answer, as a multiple of `max_answer_bytes`: room for
#: the protocol's framing around small deltas, a bound on a decompression bomb.
_BODY_FACTOR = 16
_MESSAGE_LIMIT = 300
#: Bytes of a body quoted when it is not the protocol's (`StreamParser.not_the_protocol`).
_HEAD_BYTES = 120
#: What is read of a body after the answer's end to keep its connection
#: (`_drain`): the rest of a well-behaved body is a few bytes, at once.
_DRAIN_BYTES = 16 * 1024
_DRAIN_SECONDS = 0.25
_SPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff; the attempt count comes from `ModelConfig.max_retries`.

    A server-given wait (`retry-after`, `retry-after-ms`) is used as is up to
    `cap`; a longer one ends the retries at once (waiting would only fail again).
    """

    base: float = 0.5
    factor: float = 2.0
    cap: float = 30.0
    jitter: float = 0.25   # fraction of the computed delay, added at random

    def delay(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds to wait after failed attempt number `attempt` (1-based), or None to stop."""
        if retry_after is not None:
            return retry_after if retry_after <= self.cap else None
        d = min(self.cap, self.base * self.factor ** (attempt - 1))
        return min(self.cap, d * (1 + self.jitter * random.random()))


# --- helpers -----------------------------------------------------------------


@functools.cache
def shared_ssl_context():
    """One TLS context for every client: loading the CA bundle costs ~20 ms each time."""
    return httpx.create_ssl_context()

# A credential after a header name and ":" or "=" (with its scheme word, if any), or
# after an auth scheme: the value is replaced, the words around it are kept, so a
# server's "provide your key in an Authorization header using Bearer auth" still
# reads as it was written.
_AUTH_VALUE_RE = re.compile(
    r"(?i)\b(authorization|proxy-authorization|x-api-key|x-goog-api-key|api[-_]?key)([\"']?\s*[:=]\s*[\"']?)"
    r"((?:bearer|basic|token)\s+)?([^\s,;)\]'\"]+)")
_SCHEME_RE = re.compile(r"(?i)\b(bearer|basic)(\s+)([^\s,;)\]'\"]{8,})")


def _scheme_value(m: re.Match[str]) -> str:
    value = m.group(3)
    # a credential has digits or is long; "Bearer authentication" is prose
    if value.startswith("[redacted") or not (any(c.isdigit() for c in value) or len(value) >= 20):
        return m.group(0)
    return m.group(1) + m.group(2) + "[redacted]"


def scrub(text: str, key: str | tuple[str, ...] | None) -> str:
    """`text` without the key (or each of several secrets: the key and secret
    header values), any run of 8 or more of its characters (a cut or
    line-wrapped echo too, see `providers.secrets`), or anything that
    looks like an auth header value."""
    keys = (key,) if isinstance(key, str) else (key or ())
    keys = tuple(k for k in keys if len(k.strip()) >= 4)
    if keys:
        text = scrubber_for(keys).scrub(text)
    text = _AUTH_VALUE_RE.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + "[redacted]", text)
    return _SCHEME_RE.sub(_scheme_value, text)


def short(text: str, limit: int = _MESSAGE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quoted(text: str, limit: int = 80) -> str:
    """Untrusted text (a body, a content type) quoted inside one of our
    messages: on one line, cut, and with Python's escapes for every control,
    bidi or other non-printable character, so it is inert however it is shown."""
    return repr(short(text, limit))


def _a(words: str) -> str:
    return ("an " if words[:1].lower() in "aeiou" else "a ") + words


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `retry-after`
    (delta-seconds or an HTTP date); None when absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000
            if value >= 0:
                return value
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    ra = ra.strip()
    try:
        value = float(ra)
        return value if value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def error_message_from_body(text: str, content_type: str = "") -> str:
    """The provider's own error message from an error body, else a short excerpt."""
    stripped = text.strip()
    if not stripped:
        return ""
    if "html" in content_type or stripped[:1] == "<":
        title = re.search(r"(?is)<title>(.*?)</title>", stripped)
        return "HTML page" + (f" ({short(title.group(1), 80)})" if title else "")
    try:
        obj: Any = json.loads(stripped)
    except ValueError:
        return short(stripped, 200)
    if isinstance(obj, list) and obj:
        obj = obj[0]
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, str):
            return short(err)
        if isinstance(err, dict):
            for field in ("message", "detail", "error"):
                value = err.get(field)
                if isinstance(value, str) and value:
                    kind = err.get("type") or err.get("status") or err.get("code")   # code: Azure
                    return short(f"{value} ({kind})" if isinstance(kind, str) and kind not in value else value)
        for field in ("message", "detail"):
            value = obj.get(field)
            if isinstance(value, str) and value:
                return short(value)
    return short(stripped, 200)


def kind_for_status(status: int, body: str = "") -> ErrorKind:
    if status in (401, 403):
        return ErrorKind.auth
    if status == 404:
        return ErrorKind.not_found
    if status == 429:
        return ErrorKind.rate_limited
    if status == 529 or (status >= 500 and "overloaded" in body.lower()):
        return ErrorKind.overloaded
    if status >= 500 or status in (408, 409):
        return ErrorKind.server
    if status >= 400:
        return ErrorKind.bad_request
    return ErrorKind.bad_response


_RETRY_DELAY_RE = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')


def parse_json_args(raw: str) -> Any:
    """Tool-call arguments: parsed JSON, `{}` for nothing, the raw text if it is not JSON."""
    if not raw or not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


# --- the protocol side ---------------------------------------------------------


class StreamParser(ABC):
    """One response's protocol state: body bytes in, events out.

    `begin` gets the status and content type; `opening` sees the first
    chunks until the body's form is known (`form`: "stream" or "whole").
    A stream: `feed` returns the events completed by a chunk, all stamped `t`
    (when the chunk arrived). A whole body: `collect` keeps the chunks and
    `whole` reads the complete response at the end. A parser emits exactly one
    terminal event (`Finish` at the protocol's terminator, or `StreamError`
    for an in-stream error) as the last item of a batch and then sets `done`.
    `close` is called at end of body when `done` is still False: it returns
    the last events (`end` for a stream, `whole` for a body), ending with
    `Finish` or `StreamError(truncated | bad_response)`. `shown` turns True
    once any content (text, reasoning, tool call) was emitted.
    """

    protocol: ClassVar[str] = "?"
    #: First non-space bytes that start a whole JSON response rather than this
    #: protocol's stream (an SSE stream never starts with "{" or "[").
    whole_starts: ClassVar[bytes] = b"{["

    def __init__(self) -> None:
        self.done = False
        self.shown = False
        self.seen_any = False        # any protocol message at all (vs. a body that is not the protocol)
        self.streamed = True         # False once the body turned out to be one whole response
        self.form: str | None = None   # "stream" | "whole"; None until known
        self.status = 200
        self.content_type = ""
        self.head = b""              # the body's first bytes, for a message when it is not the protocol
        self._parts: list[bytes] = []  # a whole body, collected

    def begin(self, status: int, content_type: str) -> None:
        """Called once with the response's status and content type, before the first chunk."""
        self.status, self.content_type = status, content_type
        self.form = self.form_for(content_type)
        self.start(content_type)

    def form_for(self, content_type: str) -> str | None:
        """"stream" or "whole" when the content type settles the body's form;
        None (the default): its first non-space byte does (`whole_starts`)."""
        return None

    def start(self, content_type: str) -> None:  # noqa: B027  (optional hook)
        """Called once with the response's content type, before the first chunk."""

    def opening(self, chunk: bytes) -> bytes:
        """A chunk that came while `head` or `form` was still open: keeps the
        first bytes, decides the form on the first non-space byte. Returns the
        bytes to hand on: b"" while only white space (and a byte-order mark)
        came, which no form needs; from the first other byte once it is here."""
        if len(self.head) < _HEAD_BYTES:
            self.head += chunk[: _HEAD_BYTES - len(self.head)]
        if self.form is not None:
            return chunk
        first = chunk.lstrip(_SPACE)
        if first.startswith(_BOM):
            first = first[len(_BOM):].lstrip(_SPACE)
        if first:
            self.form = "whole" if first[:1] in self.whole_starts else "stream"
        return first

    def take(self, chunk: bytes, t: float) -> list[StreamEvent]:
        """Any chunk of the body, in either form (what the request loop does
        until the first bytes are seen; then it calls `feed` or `collect`)."""
        if self.form is None or len(self.head) < _HEAD_BYTES:
            chunk = self.opening(chunk)
            if not chunk:
                return []
        return self.collect(chunk, t) if self.form == "whole" else self.feed(chunk, t)

    @property
    def opened(self) -> bool:
        """The form is known and the first bytes are kept: `take` is `feed` or `collect` from now on."""
        return self.form is not None and len(self.head) >= _HEAD_BYTES

    def collect(self, chunk: bytes, t: float) -> list[StreamEvent]:
        """`feed` for a whole body: kept until the end of the body."""
        self._parts.append(chunk)
        return []

    def close(self, t: float) -> list[StreamEvent]:
        """The last events at the end of the body (see the class doc)."""
        if self.form == "whole":
            return self._whole_body(t)
        if self.form is None:          # nothing but white space
            return [self.not_the_protocol(t)]
        return self.end(t)

    @abstractmethod
    def feed(self, chunk: bytes, t: float) -> list[StreamEvent]: ...

    @abstractmethod
    def end(self, t: float) -> list[StreamEvent]: ...

    def whole(self, obj: dict[str, Any], t: float) -> list[StreamEvent] | None:
        """The events of one complete (non-streamed) response of this protocol,
        ending with a terminal event; None when `obj` is not such a response."""
        return None

    def _whole_body(self, t: float) -> list[StreamEvent]:
        body = b"".join(self._parts)
        self._parts = []
        try:
            obj = json.loads(body)
        except (ValueError, RecursionError):   # not JSON, not UTF-8, or nested past what Python parses
            return [self.not_the_protocol(t, "a body that is not JSON")]
        return self.whole_events(obj, t)

    def whole_events(self, obj: Any, t: float) -> list[StreamEvent]:
        """The events of a parsed whole response (a body sent to a stream
        request, or a batch API's result), `streamed=False` on the terminal
        event; `bad_response` when `obj` is not a response of this protocol."""
        events = self.whole(obj, t) if isinstance(obj, dict) else None
        if not events:
            return [self.not_the_protocol(t, "JSON that is not a response of this protocol")]
        self.seen_any = True
        self.streamed = False
        self.done = True
        return [ev.model_copy(update={"streamed": False}) if ev.type == "finish" or ev.type == "error" else ev
                for ev in events]

    # Helpers for subclasses.
    def not_the_protocol(self, t: float, what: str | None = None) -> StreamError:
        """`bad_response` for a body that is neither this protocol's stream nor
        its whole response, saying what it was (never interpreting it)."""
        self.done = True
        head = self.head.decode("utf-8", "replace")
        start = f"starts {quoted(head)}" if head.strip() else ("is empty" if not head else "is only white space")
        detail = f"{what}; " if what else ""
        return StreamError(kind=ErrorKind.bad_response, t=t, status=self.status, message=(
            f"the response is neither {_a(self.protocol)} stream nor a whole {self.protocol} response "
            f"({detail}HTTP {self.status}, "
            f"{'content-type ' + quoted(self.content_type, 60) if self.content_type else 'no content-type'}, "
            f"the body {start})"))

    def truncated(self, t: float, what: str) -> StreamError:
        self.done = True
        if not self.seen_any:
            return self.not_the_protocol(t)
        return StreamError(kind=ErrorKind.truncated, t=t, message=f"the stream ended without {what}")

    def cut(self, t: float, terminator: str) -> StreamError:
        """The protocol's terminator came without a finish reason: the server
        ended the answer early (llama-cpp-python does so when another request
        arrives). The text so far is kept; the answer is not complete."""
        self.done = True
        return StreamError(kind=ErrorKind.truncated, t=t, message=(
            f"the server ended the stream ({terminator}) without a finish reason: the answer was cut"))

    def failed(self, t: float, kind: ErrorKind, message: str, retry_after: float | None = None) -> StreamError:
        self.done = True
        return StreamError(kind=kind, message=message, t=t, retry_after=retry_after)

    #: the (model, system_fingerprint) last reported by `served`
    _served: tuple[str | None, str | None] = (None, None)

    def served(self, out: list[StreamEvent], model: Any, fingerprint: Any = None) -> None:
        """Report which model the server says answered (`ServedBy`), when a
        value is new: non-empty strings only, cut to `SERVED_LIMIT`. Called
        with what each message of the stream carries; costs two compares when
        nothing changed."""
        if model is None and fingerprint is None:
            return
        m = model[:SERVED_LIMIT] if isinstance(model, str) and model else None
        f = fingerprint[:SERVED_LIMIT] if isinstance(fingerprint, str) and fingerprint else None
        last_m, last_f = self._served
        if (m is None or m == last_m) and (f is None or f == last_f):
            return
        self._served = (m or last_m, f or last_f)
        out.append(ServedBy(model=m, system_fingerprint=f))


class Accumulated:
    """Usage, finish reason and tool calls gathered over a stream and emitted
    once, just before `Finish` (so an error ends a stream with no usage)."""

    __slots__ = ("input_tokens", "output_tokens", "reasoning_tokens", "finish_reason")

    def __init__(self) -> None:
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.reasoning_tokens: int | None = None
        self.finish_reason: str | None = None

    def closing(self, t: float) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if self.input_tokens is not None or self.output_tokens is not None or self.reasoning_tokens is not None:
            out.append(UsageReport(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                                   reasoning_tokens=self.reasoning_tokens))
        out.append(Finish(reason=self.finish_reason, t=t))
        return out


@dataclass
class _Failure:
    kind: ErrorKind
    message: str
    t: float
    status: int | None = None
    retry_after: float | None = None
    retryable: bool = False
    streamed: bool = True


@dataclass(frozen=True)
class Route:
    """Where a model's requests go and how they authenticate, in words that
    hold no secret (`lineup models --check` prints it): the URL (keys travel
    in headers, never in it), how the key is sent, the extra headers by name
    (a secret one with the variable it comes from)."""

    url: str
    auth: str
    headers: tuple[str, ...] = ()


@dataclass(slots=True)
class _Prepared:
    """One answer's request as every attempt sends it, and its limits."""

    secrets: tuple[str, ...]  # the key and secret header values: scrubbed from every message
    client: httpx.AsyncClient
    url: str
    headers: dict[str, str]
    content: bytes
    deadline: float           # perf_counter() by which the whole answer must be in
    max_text: int             # answer bytes (text and reasoning, UTF-8)
    max_body: int             # response bytes read
    text_bytes: int = 0       # answer bytes shown so far


@dataclass(slots=True)
class _AttemptState:
    """What one attempt left behind: its failure (None: it ended the stream)."""

    failure: _Failure | None = None
    parser: StreamParser | None = None
    body_bytes: int = 0
    #: what a chunk goes to once the body's form and first bytes are known
    #: (`StreamParser.opened`): the parser's `feed` or `collect`; None: its `take`
    feed: Callable[[bytes, float], list[StreamEvent]] | None = None

    @property
    def shown(self) -> bool:
        """Whether any content reached the consumer (then no retry)."""
        return self.parser is not None and self.parser.shown


#: What reading a body may raise: the connection's failures, and a body that is
#: not the protocol (invalid JSON or UTF-8, valid JSON in a shape it does not have,
#: JSON nested past what Python parses: a message or a call's arguments).
_READ_ERRORS = (httpx.TimeoutException, httpx.TransportError, DecodeError, ValueError, TypeError, AttributeError,
                KeyError, IndexError, RecursionError)


# --- the provider side ---------------------------------------------------------


class HttpProvider(Provider):
    """A model reached over HTTP; subclasses give the protocol."""

    #: the `ModelConfig.provider` value this class serves (for the default base URL)
    name: ClassVar[str] = "?"
    protocol: ClassVar[str] = "?"

    def __init__(self, cfg: ModelConfig, *, retry: RetryPolicy | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.cfg = cfg
        entry = CATALOGUE.get(self.name)   # None: a provider plugin's protocol (`providers.plugins`)
        if entry is None and not cfg.base_url:
            raise ValueError(f"model {cfg.alias!r}: base_url is required (provider {cfg.provider!r} has no default)")
        base = (cfg.base_url or default_base_url(self.name)).rstrip("/")
        # A query in base_url (`...?api-version=...`) is kept and sent on every request.
        parts = urlsplit(base)
        self._query: dict[str, str] = dict(parse_qsl(parts.query, keep_blank_values=True))
        if parts.query or parts.fragment:
            base = urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
        self._query.update(cfg.query)
        self.base_url = base
        # how this protocol sends its key when the model's `auth` does not say (a plugin: Authorization: Bearer)
        self.auth = cfg.auth or (Auth(header=entry.auth_header, scheme=entry.auth_scheme) if entry
                                 else Auth(header="Authorization", scheme="Bearer"))
        self.retry = retry or RetryPolicy()
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    # -- what a protocol module provides
    @abstractmethod
    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        """(url, headers, JSON body) for one request; `key` is None when no key is used.
        The auth header, the configured headers and query parameters are added
        by `HttpProvider` (`credentials`, `url_for`), not here."""

    @abstractmethod
    def parser(self) -> StreamParser:
        """A fresh parser for one response."""

    # -- shared parts
    def params(self, request: ChatRequest) -> SamplingParams:
        """The request's parameters, falling back to the model's configured ones per field."""
        return self.cfg.params.merged(request.params)

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            cfg = self.cfg
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(cfg.read_timeout, connect=cfg.connect_timeout, pool=cfg.connect_timeout),
                limits=httpx.Limits(max_connections=max(8, server_concurrency(cfg) * 2),
                                    max_keepalive_connections=server_concurrency(cfg)),
                headers={"user-agent": "lineup"},
                transport=self._transport,
                verify=shared_ssl_context(),
                follow_redirects=False,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def key(self) -> tuple[str | None, str | None]:
        """(key, problem): the key from the environment now, or why there is none."""
        env = self.cfg.api_key_env
        if not env:
            return None, None
        value = os.environ.get(env, "").strip()
        if not value:
            return None, f"model {self.cfg.alias!r}: environment variable {env} is not set (it should hold the API key)"
        if not value.isascii() or not value.isprintable():
            # it would go in an HTTP header; never echo it, only say where it came from
            return None, (f"model {self.cfg.alias!r}: environment variable {env} holds characters an API key "
                          "cannot have (non-ASCII or control characters)")
        return value, None

    def credentials(self, key: str | None) -> tuple[dict[str, str], tuple[str, ...], str | None]:
        """(headers, secrets, problem): the auth header with `key` (from `key()`)
        and the configured headers, values from the environment now; the secret
        values among them (for scrubbing); or why they cannot be sent."""
        headers: dict[str, str] = {}
        secrets: list[str] = []
        auth = self.auth
        if key and auth.header:
            headers[auth.header.lower()] = f"{auth.scheme} {key}" if auth.scheme else key
            secrets.append(key)
        for name, value in self.cfg.headers.items():
            if isinstance(value, EnvValue):
                v = os.environ.get(value.env, "").strip()
                if not v:
                    return {}, (), (f"model {self.cfg.alias!r}: environment variable {value.env} is not set "
                                    f"(it should hold the value of header {name})")
                if not header_value_ok(v):
                    return {}, (), (f"model {self.cfg.alias!r}: environment variable {value.env} (header {name}) "
                                    "holds characters a header cannot have (non-ASCII or control characters)")
                headers[name.lower()] = v
                secrets.append(v)
            else:
                headers[name.lower()] = value
        return headers, tuple(secrets), None

    def url_for(self, url: str) -> str:
        """`url` (from `build`) with the base URL's and the config's query parameters."""
        if not self._query:
            return url
        return str(httpx.URL(url).copy_merge_params(self._query))

    def route(self, request: ChatRequest) -> Route:
        """Where `request` would go and how it would authenticate (`Route`); sends nothing."""
        url, _, _ = self.build(request, None)
        names = tuple(f"{name} (from {v.env})" if isinstance(v, EnvValue) else name
                      for name, v in self.cfg.headers.items())
        return Route(url=self.url_for(url), auth=self.auth.describe(self.cfg.api_key_env), headers=names)

    def events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return self._events(request)

    # -- the request loop, in named steps: prepare once; per attempt open (send,
    # check the response), read (body bytes -> `_parse` -> events) and end; then
    # retry (only before the first token) or end the stream with its error.

    async def _events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        prepared = self._prepare(request)
        if isinstance(prepared, StreamError):
            yield prepared
            return
        attempt = 0
        while True:
            attempt += 1
            yield RequestSent(t=perf_counter(), wall=time.time(), attempt=attempt)
            state = _AttemptState()
            async with aclosing(self._attempt(prepared, state)) as events:
                async for ev in events:
                    yield ev
            failure = state.failure
            if failure is None:          # the attempt ended the stream with its terminal event
                return
            failure.message = scrub(failure.message, prepared.secrets)
            delay = self._retry_delay(failure, state.shown, attempt, prepared.deadline)
            if delay is None:
                yield StreamError(kind=failure.kind, message=failure.message, t=failure.t, status=failure.status,
                                  retry_after=failure.retry_after, streamed=failure.streamed)
                return
            yield Retrying(attempt=attempt, delay=delay, kind=failure.kind, message=failure.message)
            await anyio.sleep(delay)

    def _prepare(self, request: ChatRequest) -> _Prepared | StreamError:
        """The request as it goes out on every attempt (key and configured
        headers read from the environment now, URL with its query parameters,
        headers, body bytes) and the answer's limits; or the error that stops
        it before any request (no key or secret header value, a body that
        cannot be built)."""
        key, problem = self.key()
        sent_headers, secrets, problem = self.credentials(key) if not problem else ({}, (), problem)
        if problem:
            return StreamError(kind=ErrorKind.config, message=problem, t=perf_counter())
        try:
            url, protocol_headers, body = self.build(request, key)
            url = self.url_for(url)
            headers = {name.lower(): value for name, value in protocol_headers.items()}
            headers.update(sent_headers)
            # allow_nan=False: NaN or Infinity (which JSON does not have) in a
            # parameter fails this answer here rather than reach the server as
            # invalid JSON; SamplingParams refuses them earlier, this is the last line.
            content = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
        except (ValueError, TypeError) as exc:
            return StreamError(kind=ErrorKind.bad_request, t=perf_counter(),
                               message=scrub(short(f"cannot build the request: {exc}"), secrets))
        headers.setdefault("content-type", "application/json")   # a configured header cannot replace it (core.answering.config)
        max_text = self.cfg.max_answer_bytes
        # The whole answer has a deadline: keep-alive comments (or a trickle of
        # bytes) reset the read timeout but not this.
        return _Prepared(secrets=secrets, client=self.client, url=url, headers=headers, content=content,
                         deadline=perf_counter() + self.cfg.answer_deadline, max_text=max_text,
                         max_body=_BODY_FACTOR * max_text)   # decompressed body bytes read, framing and all

    async def _attempt(self, p: _Prepared, state: _AttemptState) -> AsyncGenerator[StreamEvent, None]:
        """One request: opened (`_open`), its body read chunk by chunk into
        events (`_parse`; a whole body is kept), ended by the parser (`close`)
        at the end of the body: a whole body's events all come then, held to
        the size limit there. The response is closed on every path. On a
        failure the events stop and `state.failure` says why; without one, the
        last event was terminal."""
        parser = state.parser = self.parser()
        resp, state.failure = await self._open(p)
        if resp is None:
            return
        status = resp.status_code
        try:
            parser.begin(status, resp.headers.get("content-type", "").lower())
            # Raw bytes (no decoder layer) unless the body is compressed.
            body = resp.aiter_bytes() if resp.headers.get("content-encoding", "identity") \
                not in ("identity", "") else resp.aiter_raw()
            async for chunk in body:
                evs = self._parse(chunk, parser, p, state, status)
                if parser.done and state.failure is None:
                    # The answer is whole: read the end of the body before the
                    # events go out (the consumer closes the stream on the
                    # terminal one), so the connection goes back to the pool.
                    await _drain(body, p.deadline)
                for ev in evs:
                    yield ev
                if state.failure is not None or parser.done:
                    return
            evs = parser.close(perf_counter())
        except _READ_ERRORS as exc:
            state.failure = self._read_failure(exc, parser, status)
            return
        finally:
            await resp.aclose()
        # A whole body's text comes here, at the end: the size limit holds for it too.
        evs, failure = _within(evs, p.max_text, p.text_bytes, status)
        if failure is not None:
            failure.streamed = parser.streamed
            parser.shown = parser.shown or bool(evs)   # what fitted is shown: no retry after it
            state.failure = failure
        else:
            last = evs[-1]
            if isinstance(last, StreamError):
                evs[-1] = last.model_copy(update={"message": scrub(last.message, p.secrets)})
        for ev in evs:
            yield ev

    async def _open(self, p: _Prepared) -> tuple[httpx.Response | None, _Failure | None]:
        """Send the request within the answer's deadline and check the
        response: (it, None) when its body is the stream to read, else (None,
        why not) with the response closed (a status other than 2xx, an HTML
        page, no connection, a timeout)."""
        client = p.client
        resp: httpx.Response | None = None
        try:
            with anyio.move_on_after(max(0.0, p.deadline - perf_counter())):
                resp = await client.send(client.build_request("POST", p.url, headers=p.headers, content=p.content),
                                         stream=True)
        except httpx.TimeoutException as exc:
            connect = isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
            return None, _Failure(ErrorKind.timeout, (
                f"no connection to {self._host()} within {self.cfg.connect_timeout:g} s" if connect else
                f"no response from {self._host()} within {self.cfg.read_timeout:g} s"),
                perf_counter(), retryable=connect)
        except httpx.TransportError as exc:
            return None, _Failure(ErrorKind.connection, f"cannot reach {self._host()}: {_exc_text(exc)}",
                                  perf_counter(), retryable=True)
        if resp is None:    # the deadline passed first
            return None, self._deadline_failure(None)
        try:
            failure = await self._refusal(resp)
        except BaseException:
            await resp.aclose()
            raise
        if failure is not None:
            await resp.aclose()
            return None, failure
        return resp, None

    async def _refusal(self, resp: httpx.Response) -> _Failure | None:
        """Why a response is no stream to read (its status, an HTML page), or None."""
        status = resp.status_code
        if not 200 <= status < 300:
            return await self._status_failure(resp)
        if "text/html" in resp.headers.get("content-type", "").lower():
            return _Failure(ErrorKind.bad_response, f"HTTP {status} with an HTML page instead of "
                            f"a {self.protocol} response", perf_counter(), status=status)
        return None

    def _parse(self, chunk: bytes, parser: StreamParser, p: _Prepared, state: _AttemptState,
               status: int) -> list[StreamEvent]:
        """One chunk of the body: the events it completes, within the answer's
        deadline and size limits. Sets `state.failure` where the attempt fails
        (the events before that point still count): past a limit, or an error
        in the stream worth another attempt. Error messages are scrubbed."""
        now = perf_counter()
        state.body_bytes += len(chunk)
        if now > p.deadline:
            state.failure = self._deadline_failure(status)
            return []
        if state.body_bytes > p.max_body:
            state.failure = _Failure(ErrorKind.truncated, (
                f"the response passed {_size(p.max_body)} without finishing the answer "
                f"({_BODY_FACTOR} x max_answer_bytes); the rest was not read"), now, status=status)
            return []
        evs = (state.feed or parser.take)(chunk, now)
        if state.feed is None and parser.opened:   # the form and the first bytes are known
            state.feed = parser.collect if parser.form == "whole" else parser.feed
        if not evs:
            return evs
        if parser.done:
            last = evs[-1]
            if isinstance(last, StreamError):
                failure = self._in_stream_failure(parser, last, status)
                if failure.retryable:
                    state.failure = failure
                    return []
                evs[-1] = last.model_copy(update={"message": scrub(last.message, p.secrets)})
        for i, ev in enumerate(evs):
            if isinstance(ev, (TextDelta, ReasoningDelta)):
                piece = ev.text
                p.text_bytes += len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
                if p.text_bytes > p.max_text:
                    keep = _fit(piece, p.text_bytes - p.max_text)
                    state.failure = _Failure(ErrorKind.truncated, (
                        f"the answer passed the size limit of {_size(p.max_text)} "
                        "(max_answer_bytes): cut there, the rest was not read"), ev.t, status=status)
                    return [*evs[:i], ev.model_copy(update={"text": keep})] if keep else evs[:i]
        return evs

    def _read_failure(self, exc: Exception, parser: StreamParser, status: int) -> _Failure:
        """What an exception while reading the body means for the answer."""
        if isinstance(exc, httpx.TimeoutException):
            return _Failure(ErrorKind.timeout, f"the stream stalled: no data for {self.cfg.read_timeout:g} s",
                            perf_counter(), status=status)
        if isinstance(exc, httpx.TransportError):
            if parser.seen_any or parser.shown:
                return _Failure(ErrorKind.truncated, f"the connection closed mid-stream ({_exc_text(exc)})",
                                perf_counter(), status=status, retryable=not parser.shown)
            return _Failure(ErrorKind.connection, f"the connection closed before any data ({_exc_text(exc)})",
                            perf_counter(), status=status, retryable=True)
        if isinstance(exc, DecodeError):
            message = str(exc)
            if not parser.seen_any:   # not one message of the protocol: say what came
                message = parser.not_the_protocol(0.0, message.split(" (near ")[0]).message
            return _Failure(ErrorKind.bad_response, message, perf_counter(), status=status)
        if isinstance(exc, RecursionError):   # the server's fault too: say so, not "the client failed"
            return _Failure(ErrorKind.bad_response, f"the {self.protocol} stream sent JSON nested too deeply "
                            "to read (a message or a tool call's arguments past Python's nesting limit)",
                            perf_counter(), status=status)
        if isinstance(exc, ValidationError):   # an event the contract refuses (arguments nested too deeply)
            why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors(include_url=False))
            return _Failure(ErrorKind.bad_response, f"the {self.protocol} stream sent what lineup cannot keep: "
                            f"{short(why, 200)}", perf_counter(), status=status)
        # Valid JSON in a shape the protocol does not have (a list where an
        # object belongs...): the server's fault, never a crash of the app.
        return _Failure(ErrorKind.bad_response, f"unexpected {self.protocol} message "
                        f"({type(exc).__name__}: {short(str(exc), 120)})", perf_counter(), status=status)

    def _retry_delay(self, failure: _Failure, shown: bool, attempt: int, deadline: float) -> float | None:
        """Seconds to wait before the next attempt, or None for no retry: the
        failure is not worth one, something was shown, the attempts are used
        up, or the wait would pass the answer's deadline."""
        if not failure.retryable or shown or attempt >= 1 + self.cfg.max_retries:
            return None
        delay = self.retry.delay(attempt, failure.retry_after)
        if delay is None or perf_counter() + delay >= deadline:
            return None
        return delay

    def _deadline_failure(self, status: int | None) -> _Failure:
        return _Failure(ErrorKind.timeout, f"no complete answer within {self.cfg.answer_deadline:g} s "
                        "(answer_deadline): stopped there, the text so far is kept", perf_counter(), status=status)

    def _in_stream_failure(self, parser: StreamParser, ev: StreamError, status: int) -> _Failure:
        retryable = not parser.shown and ev.kind in RETRYABLE_KINDS
        return _Failure(ev.kind, ev.message, ev.t, status=status, retry_after=ev.retry_after, retryable=retryable)

    async def _status_failure(self, resp: httpx.Response) -> _Failure:
        status = resp.status_code
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in resp.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size >= _ERROR_BODY_LIMIT:
                    break
        except httpx.HTTPError:
            pass   # the status says enough
        t = perf_counter()
        text = b"".join(chunks)[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")
        ctype = resp.headers.get("content-type", "").lower()
        detail = error_message_from_body(text, ctype)
        kind = kind_for_status(status, text)
        retry_after = parse_retry_after(resp.headers)
        if retry_after is None and status in (429, 503):
            m = _RETRY_DELAY_RE.search(text)
            if m:
                retry_after = float(m.group(1))
        reason = resp.reason_phrase or ""
        message = f"HTTP {status}" + (f" {reason}" if reason and not detail else "") + (f": {detail}" if detail else "")
        return _Failure(kind, message, t, status=status, retry_after=retry_after,
                        retryable=status in RETRYABLE_STATUS or status >= 500)

    def _host(self) -> str:
        try:
            return httpx.URL(self.base_url).host or self.base_url
        except Exception:  # noqa: BLE001 - a malformed URL is reported by the request itself
            return "the server"


async def _drain(body: AsyncIterator[bytes], deadline: float) -> None:
    """Read what is left of a body after the protocol's terminator (the
    chunked encoding's last chunk, a trailing blank line) so that httpx can
    put the connection back in its pool for the next request; a body that
    ended already costs nothing. Bounded in bytes and time: a server that
    keeps sending (or holds the body open) after the answer ended gets its
    connection closed instead (`aclose` on a body not read to its end)."""
    left = _DRAIN_BYTES
    with anyio.move_on_after(max(0.0, min(_DRAIN_SECONDS, deadline - perf_counter()))):
        async for chunk in body:
            left -= len(chunk)
            if left < 0:
                return


def _within(evs: list[StreamEvent], limit: int, used: int, status: int) -> tuple[list[StreamEvent], _Failure | None]:
    """The last events of a body, held to `limit` UTF-8 bytes of text and
    reasoning in all (`used` already came): (all of them, None), or (those
    that fit, the failure)."""
    out: list[StreamEvent] = []
    for ev in evs:
        if isinstance(ev, (TextDelta, ReasoningDelta)):
            used += len(ev.text.encode("utf-8", "surrogatepass"))
            if used > limit:
                keep = _fit(ev.text, used - limit)
                if keep:
                    out.append(ev.model_copy(update={"text": keep}))
                return out, _Failure(ErrorKind.truncated, (
                    f"the answer passed the size limit of {_size(limit)} (max_answer_bytes): cut there, "
                    "the rest was not kept"), ev.t, status=status)
        out.append(ev)
    return out, None


def _fit(text: str, over: int) -> str:
    """`text` without its last `over` UTF-8 bytes (never splitting a character)."""
    raw = text.encode("utf-8", "surrogatepass")
    return raw[: max(0, len(raw) - over)].decode("utf-8", "ignore")


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"


def _exc_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return short(text, 160)


def image_data_url(mime: str, data: str) -> str:
    return f"data:{mime};base64,{data}"


# Re-exported for protocol modules.
__all__ = [
    "Accumulated", "HttpProvider", "RetryPolicy", "Route", "StreamParser", "RETRYABLE_STATUS", "scrub", "short",
    "quoted",
    "parse_retry_after", "error_message_from_body", "kind_for_status", "parse_json_args", "image_data_url",
    "TextDelta", "ReasoningDelta", "ToolCall", "UsageReport", "Finish", "StreamError", "ErrorKind", "perf_counter",
]
