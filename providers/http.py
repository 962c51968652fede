"""The HTTP machinery shared by the four wire protocols.

`HttpProvider` owns one `httpx.AsyncClient` per configured model and runs the
request loop: key lookup (the environment, at request time), sending, status
-> `ErrorKind`, retries *only before the first token* with bounded backoff that
honours `retry-after` / `retry-after-ms`, timing where the bytes arrive, and a
terminal event on every path. A protocol module supplies two things: how to
build the request (`build`) and a `StreamParser` that turns body bytes into
events.

Messages never carry the API key or an auth header: every message built here
goes through `scrub`.
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
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import httpx

from providers.base import Provider
from providers.catalogue import PROVIDER_DEFAULT_BASE_URL
from providers.events import (
    ChatRequest,
    ErrorKind,
    Finish,
    ReasoningDelta,
    SERVED_LIMIT,
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
from providers.model_config import ModelConfig, server_concurrency
from providers.secrets import key_scrubber
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

_AUTH_RE = re.compile(r"(?i)\b(authorization|x-api-key|x-goog-api-key|api[-_]?key|bearer)(\s*[:=]\s*|\s+)(\S+)")


def scrub(text: str, key: str | None) -> str:
    """`text` without the key, any run of 8 or more of its characters (a cut or
    line-wrapped echo too, see `providers.secrets`), or anything that
    looks like an auth header value."""
    if key and len(key.strip()) >= 4:
        text = key_scrubber(key).scrub(text)
    return _AUTH_RE.sub(lambda m: m.group(1) + m.group(2) + "[redacted]", text)


def short(text: str, limit: int = _MESSAGE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
                    kind = err.get("type") or err.get("status")
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

    `feed` returns the events completed by a chunk, all stamped `t` (when the
    chunk arrived). A parser emits exactly one terminal event (`Finish` at the
    protocol's terminator, or `StreamError` for an in-stream error) as the
    last item of a batch and then sets `done`. `end` is called at end of body
    when `done` is still False: it returns the last events, ending with
    `Finish` or `StreamError(truncated | bad_response)`. `shown` turns True
    once any content (text, reasoning, tool call) was emitted.
    """

    protocol: ClassVar[str] = "?"

    def __init__(self) -> None:
        self.done = False
        self.shown = False
        self.seen_any = False        # any protocol message at all (vs. a body that is not the protocol)

    def start(self, content_type: str) -> None:
        """Called once with the response's content type, before the first chunk."""

    @abstractmethod
    def feed(self, chunk: bytes, t: float) -> list[StreamEvent]: ...

    @abstractmethod
    def end(self, t: float) -> list[StreamEvent]: ...

    # Helpers for subclasses.
    def truncated(self, t: float, what: str) -> StreamError:
        self.done = True
        if not self.seen_any:
            return StreamError(kind=ErrorKind.bad_response, t=t,
                               message=f"the response is not a {self.protocol} stream")
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


# --- the provider side ---------------------------------------------------------


class HttpProvider(Provider):
    """A model reached over HTTP; subclasses give the protocol."""

    #: the `ModelConfig.provider` value this class serves (for the default base URL)
    name: ClassVar[str] = "?"
    protocol: ClassVar[str] = "?"

    def __init__(self, cfg: ModelConfig, *, retry: RetryPolicy | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.cfg = cfg
        self.base_url = (cfg.base_url or PROVIDER_DEFAULT_BASE_URL[self.name]).rstrip("/")
        self.retry = retry or RetryPolicy()
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    # -- what a protocol module provides
    @abstractmethod
    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        """(url, headers, JSON body) for one request; `key` is None when no key is used."""

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

    def events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return self._events(request)

    async def _events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        key, problem = self.key()
        if problem:
            yield StreamError(kind=ErrorKind.config, message=problem, t=perf_counter())
            return
        try:
            url, headers, body = self.build(request, key)
            # allow_nan=False: NaN or Infinity (which JSON does not have) in a
            # parameter fails this answer here rather than reach the server as
            # invalid JSON; SamplingParams refuses them earlier, this is the last line.
            content = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
        except (ValueError, TypeError) as exc:
            yield StreamError(kind=ErrorKind.bad_request, message=scrub(short(f"cannot build the request: {exc}"), key),
                              t=perf_counter())
            return
        headers.setdefault("content-type", "application/json")
        client = self.client
        max_attempts = 1 + self.cfg.max_retries
        attempt = 0
        # The whole answer has a deadline: keep-alive comments (or a trickle of
        # bytes) reset the read timeout but not this.
        deadline = perf_counter() + self.cfg.answer_deadline
        max_text = self.cfg.max_answer_bytes
        max_body = _BODY_FACTOR * max_text   # decompressed body bytes read, framing and all
        text_bytes = 0
        while True:
            attempt += 1
            failure: _Failure | None = None
            shown = False
            resp: httpx.Response | None = None
            yield RequestSent(t=perf_counter(), wall=time.time(), attempt=attempt)
            try:
                try:
                    with anyio.move_on_after(max(0.0, deadline - perf_counter())) as waited:
                        resp = await client.send(client.build_request("POST", url, headers=headers,
                                                                      content=content), stream=True)
                    if waited.cancelled_caught:
                        failure = self._deadline_failure(None)
                except httpx.TimeoutException as exc:
                    connect = isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
                    failure = _Failure(ErrorKind.timeout, (
                        f"no connection to {self._host()} within {self.cfg.connect_timeout:g} s" if connect else
                        f"no response from {self._host()} within {self.cfg.read_timeout:g} s"),
                        perf_counter(), retryable=connect)
                except httpx.TransportError as exc:
                    failure = _Failure(ErrorKind.connection, f"cannot reach {self._host()}: {_exc_text(exc)}",
                                       perf_counter(), retryable=True)
                if resp is not None:
                    status = resp.status_code
                    if not 200 <= status < 300:
                        failure = await self._status_failure(resp)
                    else:
                        ctype = resp.headers.get("content-type", "").lower()
                        if "text/html" in ctype:
                            failure = _Failure(ErrorKind.bad_response, f"HTTP {status} with an HTML page instead of "
                                               f"a {self.protocol} response", perf_counter(), status=status)
                        else:
                            parser = self.parser()
                            parser.start(ctype)
                            feed = parser.feed
                            try:
                                # Raw bytes (no decoder layer) unless the body is compressed.
                                body = resp.aiter_bytes() if resp.headers.get("content-encoding", "identity") \
                                    not in ("identity", "") else resp.aiter_raw()
                                body_bytes = 0
                                async for chunk in body:
                                    now = perf_counter()
                                    body_bytes += len(chunk)
                                    if now > deadline:
                                        failure = self._deadline_failure(status)
                                        break
                                    if body_bytes > max_body:
                                        failure = _Failure(ErrorKind.truncated, (
                                            f"the response passed {_size(max_body)} without finishing the answer "
                                            f"({_BODY_FACTOR} x max_answer_bytes); the rest was not read"),
                                            now, status=status)
                                        break
                                    evs = feed(chunk, now)
                                    if evs:
                                        if parser.done:
                                            last = evs[-1]
                                            if last.type == "error":
                                                failure = self._in_stream_failure(parser, last, status)
                                                if failure.retryable:
                                                    break
                                                failure = None
                                                evs[-1] = last.model_copy(update={"message": scrub(last.message, key)})
                                        for ev in evs:
                                            kind = ev.type
                                            if kind == "text" or kind == "reasoning":
                                                piece = ev.text
                                                text_bytes += len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
                                                if text_bytes > max_text:
                                                    keep = _fit(piece, text_bytes - max_text)
                                                    if keep:
                                                        yield ev.model_copy(update={"text": keep})
                                                    failure = _Failure(ErrorKind.truncated, (
                                                        f"the answer passed the size limit of {_size(max_text)} "
                                                        "(max_answer_bytes): cut there, the rest was not read"),
                                                        ev.t, status=status)
                                                    break
                                            yield ev
                                        if failure is not None:
                                            break
                                        if parser.done:
                                            return
                                        shown = parser.shown
                                if failure is None:
                                    evs = parser.end(perf_counter())
                            except httpx.TimeoutException:
                                failure = _Failure(ErrorKind.timeout, f"the stream stalled: no data for "
                                                   f"{self.cfg.read_timeout:g} s", perf_counter(), status=status)
                            except httpx.TransportError as exc:
                                shown = parser.shown
                                if parser.seen_any or shown:
                                    failure = _Failure(ErrorKind.truncated, "the connection closed mid-stream "
                                                       f"({_exc_text(exc)})", perf_counter(), status=status,
                                                       retryable=not shown)
                                else:
                                    failure = _Failure(ErrorKind.connection, f"the connection closed before any "
                                                       f"data ({_exc_text(exc)})", perf_counter(), status=status,
                                                       retryable=True)
                            except DecodeError as exc:
                                failure = _Failure(ErrorKind.bad_response, str(exc), perf_counter(), status=status)
                            except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
                                # Valid JSON in a shape the protocol does not have (a list where an
                                # object belongs...): the server's fault, never a crash of the app.
                                failure = _Failure(ErrorKind.bad_response, f"unexpected {self.protocol} message "
                                                   f"({type(exc).__name__}: {short(str(exc), 120)})",
                                                   perf_counter(), status=status)
                            else:
                                if failure is None:
                                    last = evs[-1]
                                    if last.type == "error":
                                        evs[-1] = last.model_copy(update={"message": scrub(last.message, key)})
                                    for ev in evs:
                                        yield ev
                                    return
            finally:
                if resp is not None:
                    await resp.aclose()
            assert failure is not None
            failure.message = scrub(failure.message, key)
            if failure.retryable and not shown and attempt < max_attempts:
                delay = self.retry.delay(attempt, failure.retry_after)
                if delay is not None and perf_counter() + delay < deadline:
                    yield Retrying(attempt=attempt, delay=delay, kind=failure.kind, message=failure.message)
                    await anyio.sleep(delay)
                    continue
            yield StreamError(kind=failure.kind, message=failure.message, t=failure.t, status=failure.status,
                              retry_after=failure.retry_after)
            return

    def _deadline_failure(self, status: int | None) -> _Failure:
        return _Failure(ErrorKind.timeout, f"no complete answer within {self.cfg.answer_deadline:g} s "
                        "(answer_deadline): stopped there, the text so far is kept", perf_counter(), status=status)

    def _in_stream_failure(self, parser: StreamParser, ev: StreamEvent, status: int) -> _Failure:
        assert isinstance(ev, StreamError)
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
    "Accumulated", "HttpProvider", "RetryPolicy", "StreamParser", "RETRYABLE_STATUS", "scrub", "short",
    "parse_retry_after", "error_message_from_body", "kind_for_status", "parse_json_args", "image_data_url",
    "TextDelta", "ReasoningDelta", "ToolCall", "UsageReport", "Finish", "StreamError", "ErrorKind", "perf_counter",
]
