"""The HTTP machinery shared by the four wire protocols.

`HttpProvider` uses its server's connection pool (`providers.pools`, shared by
the aliases there) and runs the request loop: key and header secrets (the
environment, at request time), the auth header, extra headers and query
parameters (`ModelConfig.auth`, `headers`, `query`: gateways, Azure), sending,
status -> `ErrorKind`, retries *only before the first token* with bounded
backoff that honours `retry-after` / `retry-after-ms`, timing where the bytes
arrive, and a terminal event on every path. A protocol module supplies three
things: how to build the request (`build`), a `StreamParser` that turns body
bytes into events, and the parser's `whole` for a complete non-streamed
response.

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

Why one file past 600 lines: the loop and the failures it maps to
`ErrorKind` are one contract, a terminal event on every path, best read in
one place. What each protocol's parser shares (`StreamParser`, the text
helpers, the status and retry-after rules) is `providers/parsing.py`; this
module re-exports it (`__all__`) as the provider contract plugins build on.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import time
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import anyio
import httpx
from pydantic import ValidationError

from providers.base import Provider
from providers.catalogue import CATALOGUE, default_base_url
from providers.events import (
    ChatRequest,
    Connected,
    ErrorKind,
    Finish,
    ReasoningDelta,
    RequestSent,
    Retrying,
    SamplingParams,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCall,
    UsageReport,
)
from providers import pools
from providers.model_config import Auth, EnvValue, ModelConfig, header_value_ok, server_concurrency, server_key
from providers.parsing import (
    Accumulated,
    StreamParser,
    error_message_from_body,
    kind_for_status,
    parse_json_args,
    parse_retry_after,
    quoted,
    scrub,
    short,
)
from providers.sse import DecodeError

perf_counter = time.perf_counter
_RETRY_DELAY_RE = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')

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
class PreparedRequest:
    """One answer's request as every attempt sends it, and its limits: what
    `HttpProvider._prepare` returns, and what a protocol that signs its
    requests (`providers.bedrock`) adds its headers and secrets to."""

    secrets: tuple[str, ...]  # the key and secret header values: scrubbed from every message
    client: httpx.AsyncClient
    url: str
    headers: dict[str, str]
    content: bytes
    deadline: float           # perf_counter() by which the whole answer must be in
    max_text: int             # answer bytes (text and reasoning, UTF-8)
    max_body: int             # response bytes read
    text_bytes: int = 0       # answer bytes shown so far


class _ConnectTimer:
    """httpx's `trace` extension for one request: when opening its connection
    began and when it was ready (TCP, TLS; through a proxy too). No connection
    event: the pool handed it a kept-alive one, set up in no time."""

    __slots__ = ("started", "ready")
    _STEPS = ("connect_tcp", "connect_unix_socket", "start_tls")

    def __init__(self) -> None:
        self.started: float | None = None
        self.ready: float | None = None

    async def __call__(self, name: str, info: dict) -> None:
        step, _, phase = name.rpartition(".")
        if step.rpartition(".")[2] not in self._STEPS:
            return
        if phase == "started" and self.started is None:
            self.started = perf_counter()
        elif phase == "complete":
            self.ready = perf_counter()

    @property
    def setup_ms(self) -> float:
        return 0.0 if self.started is None or self.ready is None else (self.ready - self.started) * 1000


@dataclass(slots=True)
class _AttemptState:
    """What one attempt left behind: its failure (None: it ended the stream)."""

    failure: _Failure | None = None
    parser: StreamParser | None = None
    body_bytes: int = 0
    #: what a chunk goes to once the body's form and first bytes are known
    #: (`StreamParser.opened`): the parser's `feed` or `collect`; None: its `take`
    feed: Callable[[bytes, float], list[StreamEvent]] | None = None
    connect: _ConnectTimer = field(default_factory=_ConnectTimer)

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
        base = (cfg.base_url or default_base_url(self.name, cfg.region)).rstrip("/")
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
        self._pool: pools.Pool | None = None
        self.timeout = httpx.Timeout(cfg.read_timeout, connect=cfg.connect_timeout, pool=cfg.connect_timeout)

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
        """The connection pool of this model's server, shared with every alias
        there (`providers.pools`); requests set their own `timeout`."""
        pool = self._pool
        if pool is None or pool.is_closed:
            cfg = self.cfg
            pool = self._pool = pools.acquire(
                server_key(cfg), httpx.Limits(max_connections=max(8, server_concurrency(cfg) * 2),
                                              max_keepalive_connections=server_concurrency(cfg)),
                self._transport, shared_ssl_context())
        return pool.client

    async def aclose(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pools.release(pool)

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
        attempt = renewals = 0
        while True:
            attempt += 1
            yield RequestSent(t=perf_counter(), wall=time.time(), attempt=attempt)
            state = _AttemptState()
            pool, shard, client = self._pool, None, prepared.client
            if pool is not None and len(pool.clients) > 1 and client is pool.client:
                shard = pool.lease()   # a large pool's requests are spread over its clients
                client = pool.clients[shard]
            try:
                async with aclosing(self._attempt(prepared, state, client)) as events:
                    async for ev in events:
                        yield ev
            finally:
                if shard is not None and pool is not None:
                    pool.unlease(shard)
            failure = state.failure
            if failure is None:          # the attempt ended the stream with its terminal event
                return
            failure.message = scrub(failure.message, prepared.secrets)
            delay = self._retry_delay(failure, state.shown, attempt, prepared.deadline)
            if delay is None and not state.shown and not renewals:
                renewed = await self._renew(request, failure)
                if renewed is not None:      # new credentials: once, at once
                    prepared, delay, renewals = renewed, 0.0, 1
            if delay is None:
                yield StreamError(kind=failure.kind, message=failure.message, t=failure.t, status=failure.status,
                                  retry_after=failure.retry_after, streamed=failure.streamed)
                return
            yield Retrying(attempt=attempt, delay=delay, kind=failure.kind, message=failure.message)
            await anyio.sleep(delay)

    async def _renew(self, request: ChatRequest, failure: _Failure) -> PreparedRequest | None:
        """After a failure no retry is due for, before anything was shown:
        the request prepared again with new credentials, to be sent once more
        at once, or None (the default: credentials that cannot be renewed)."""
        return None

    def _prepare(self, request: ChatRequest) -> PreparedRequest | StreamError:
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
        return PreparedRequest(secrets=secrets, client=self.client, url=url, headers=headers, content=content,
                         deadline=perf_counter() + self.cfg.answer_deadline, max_text=max_text,
                         max_body=_BODY_FACTOR * max_text)   # decompressed body bytes read, framing and all

    async def _attempt(self, p: PreparedRequest, state: _AttemptState,
                       client: httpx.AsyncClient) -> AsyncGenerator[StreamEvent, None]:
        """One request, sent by `client`: opened (`_open`), its body read chunk by chunk into
        events (`_parse`; a whole body is kept), ended by the parser (`close`)
        at the end of the body: a whole body's events all come then, held to
        the size limit there. The response is closed on every path. On a
        failure the events stop and `state.failure` says why; without one, the
        last event was terminal."""
        parser = state.parser = self.parser()
        resp, state.failure = await self._open(p, state.connect, client)
        if resp is None:
            return
        yield Connected(t=perf_counter(), setup_ms=state.connect.setup_ms)
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

    async def _open(self, p: PreparedRequest, timer: _ConnectTimer,
                    client: httpx.AsyncClient) -> tuple[httpx.Response | None, _Failure | None]:
        """Send the request by `client` within the answer's deadline and
        check the response: (it, None) when its body is the stream to read,
        else (None, why not) with the response closed (a status other than
        2xx, an HTML page, no connection, a timeout)."""
        resp: httpx.Response | None = None
        try:
            with anyio.move_on_after(max(0.0, p.deadline - perf_counter())):
                resp = await client.send(client.build_request("POST", p.url, headers=p.headers, content=p.content,
                                                              timeout=self.timeout, extensions={"trace": timer}),
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

    def _parse(self, chunk: bytes, parser: StreamParser, p: PreparedRequest, state: _AttemptState,
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
