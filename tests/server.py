"""A real HTTP server on 127.0.0.1 that speaks the four model wire protocols,
with scripted replies and injected faults. For tests and benchmarks.

Usage
-----
    from tests.server import TestServer, Reply, RawReply

    with TestServer() as srv:                 # own thread + asyncio loop, ephemeral port
        srv.url                               # "http://127.0.0.1:PORT"
        srv.base_url("anthropic")             # what ModelConfig.base_url should be, per provider
        srv.script(Reply(status=503), Reply(text="hi"))   # replies for the next requests, in
                                              # order; the last one repeats (default: Reply())
        ... run a client ...
        srv.requests                          # [Received]: method, path, query, headers, body, json
        srv.requests[0].wait_closed(5)        # perf_counter() when the client closed the
                                              # connection before the reply ended, else None

    # client side, for tests: a ModelConfig aimed at the server, and one full stream
    cfg = model_config(srv, "openai", max_retries=0)
    result, events = collect(cfg, chat_request("hi"))   # (StreamResult, [events])

The protocol is chosen by the request path: `.../chat/completions` (OpenAI
SSE), `/v1/messages` (Anthropic SSE), `/api/chat` (Ollama NDJSON),
`.../model/M/converse-stream` (Bedrock ConverseStream: AWS event-stream
binary frames, `event_stream_frame`; `error_event` is an exception message of
`error_type` when it ends in "Exception", else `modelStreamErrorException`),
`...:streamGenerateContent` (Gemini; `?alt=sse` gives SSE, otherwise the
JSON-array stream), `.../responses` (the OpenAI Responses API: typed SSE
events, each item added, its deltas, done, then `response.completed`, or
`response.incomplete` with a `finish_reason` other than "completed"; its
`error_event` is `response.failed` with code `server_error`, its
`no_finish` / `role_only` a `response.completed` with no status; base URL
`srv.base_url("openai-responses")`). Vertex AI's paths speak the same:
`.../publishers/google/models/M:streamGenerateContent` is Gemini,
`.../publishers/anthropic/models/M:streamRawPredict` Anthropic; `POST /token`
is Google's OAuth token endpoint (a credentials file's `token_uri`), handing
out `ya29.test-token-N` (`srv.tokens_issued` counts them). `GET /api/tags`
and `GET .../models` list `srv.models`.

`Reply` scripts an answer: `text`, `reasoning` (sent first), `chunk_chars`
(characters per delta; one delta = one flushed HTTP chunk), `delay` between
deltas, `first_delay` before the first body byte, `gate` (hold that byte
until `srv.max_in_flight` reaches it, at most `_GATE_HOLD` seconds: a test
that needs requests to overlap gets them however slow the machine, and
fails rather than hangs when the client cannot overlap them),
`header_delay` before the status line, `status` (an error status with the
protocol's error body and `message`), `retry_after` / `retry_after_ms` headers, `finish_reason`,
`usage` (input, output, reasoning), and `fault`, one of `FAULTS`, applied
after `fault_after` deltas:

    disconnect      close the socket abruptly mid-body (no final chunk)
    stall           stop sending, keep the connection open until the client leaves
    stall_headers   never send the status line (hold until the client leaves)
    malformed_json  a protocol message whose JSON is cut, then the rest as usual
    html            HTTP `status` (200 by default) with an HTML error page
    no_terminator   everything but the terminator ([DONE], message_stop, done:true,
                    the finish element / closing `]`)
    invalid_utf8    a delta whose bytes are not UTF-8
    error_event     an in-stream error (Anthropic `error` event of `error_type`,
                    OpenAI error chunk, Ollama error line, Gemini error element)
    no_finish       the terminator without any finish reason, as a server that cut
                    the answer sends it (llama-cpp-python on a new request: `[DONE]`
                    with no `finish_reason` and no usage; Anthropic `message_stop`
                    with no `message_delta`; Ollama `done: true` with no
                    `done_reason` or counts; Gemini SSE end / `]` with no finishReason)
    role_only       only the opening message (OpenAI role chunk, Anthropic
                    `message_start`, an empty Ollama line or Gemini element), then
                    the terminator as in `no_finish`; `fault_after` is ignored
    keepalive_stall stop the answer and send only keep-alives (an SSE comment, or a
                    blank line for NDJSON / the JSON array) every `delay` s (0.2 s
                    when 0) until the client leaves

`served_model` is the model id every protocol's stream names (OpenAI
`model`, Anthropic `message.model`, Gemini `modelVersion`, Ollama `model`;
default "test-model") and `system_fingerprint` the one OpenAI-compatible
chunks carry when set.

`tool_calls` (a list of `{"name", "arguments", "id"?}`) are streamed after
the text in each protocol's own form, their arguments split across chunks:
OpenAI `delta.tool_calls` fragments per index, Anthropic `tool_use` blocks
with `input_json_delta` fragments, and for Ollama (`message.tool_calls`) and
Gemini (`functionCall` parts), which send a call whole, its message cut into
flushed pieces of `chunk_chars` bytes. The finish reason defaults to the
protocol's own for calls (`tool_calls`, `tool_use`). A call's `raw_arguments`
(JSON text) is sent verbatim in place of its `arguments`, inline in Ollama's
and Gemini's messages: arguments Python cannot build or re-encode, such as
an array nested 5,000 deep. An Anthropic request
that forces a tool (`tool_choice: {"type": "tool"}`, how structured output is
asked there) gets the reply's `text` as that tool's input, in fragments.
`refuse_fields` names request fields (top level, or in Gemini's
`generationConfig`) this server does not support: a request carrying one gets
HTTP 400 naming it, as servers without structured output answer.

Load mode (`srv.load_profile(base_ms, per_inflight_ms)`): latency grows with
concurrency. Each model request's first-token delay (added to its reply's
`first_delay`) becomes `base_ms + per_inflight_ms * (requests in flight - 1)`,
counting the requests in flight when it arrives, itself included. In every
mode the server counts model requests in flight: `srv.in_flight` now and
`srv.max_in_flight` since the start (or `srv.reset()` / `load_profile`), and
each `Received.in_flight` at its arrival, which
is how a test checks a client's concurrency cap.

Connections: the server keeps each connection open after a reply whose body
it ended properly (HTTP/1.1 keep-alive, as real servers do) and reads the
next request from it; a reply cut by a fault (`disconnect`, a stall the
client left) or a client that hung up ends the connection. `srv.connections`
counts the TCP connections accepted since the start (or `srv.reset()`), and
`srv.open_connections` those open now, which is how a test checks that a
client reuses its connections. `srv.keep_alive = False` sends `connection:
close` and closes after every reply instead (a server without keep-alive).
`GET /_stats` answers those counts as JSON (`connections`, `open_connections`,
`requests`) for a client in another process (benchmarks/bench_http.py); its
own connection is counted too.

`srv.respond(fn)` answers every request with `fn(received)` (a `Reply` or
`RawReply`) instead of the script: a tool loop that depends on what was sent.

`whole=True` answers with the protocol's complete non-streamed response in one
body (OpenAI `chat.completion`, Anthropic `message`, Ollama's last line with
the whole message, Gemini one `GenerateContentResponse` object), as gateways
do for a stream request (the LiteLLM proxy's `/v1/messages`), with
`whole_content_type` (default `application/json`).

Azure mode (`srv.azure(deployment, api_version, key)`): requests must come to
`/openai/deployments/{deployment}/chat/completions?api-version={api_version}`
with the key in an `api-key` header, as Azure OpenAI wants them; anything else
gets Azure's own error (404 `DeploymentNotFound` for another deployment, 404
"Resource not found" without `api-version`, 401 for a missing or wrong key, an
`Authorization` header included). Its streams start, as Azure's do, with a
chunk of `prompt_filter_results` and no choices. `srv.reset()` ends it.

`PairwiseJudge(verdict)` is such an `fn`: an LLM judge on the wire. It reads
the request (any protocol) as a pairwise judging request in the MT-Bench
convention, single- or multi-turn (`request_texts` gives its system and
user text, `judge_material` the last question and answers), calls
`verdict(question, answer_a, answer_b)` -> "A", "B" or "C", and answers "a
short reason [[X]]" (with `usage`, after `delay` between deltas); requests it
cannot read get `[[C]]`. `PairwiseJudge(lambda q, a, b: "A")` always says A.

`stamp=True` replaces each text delta by the server's `time.perf_counter()`
at the moment it is written ("%.6f " seconds), for latency benchmarks (same
clock as the client when both run in one process).

`srv.batches` speaks the OpenAI Batch API (files, batches) and Anthropic
Message Batches with partial failures and expiry (`tests/batch_api.py`).

Why this file is past 600 lines: one server speaks the four protocols,
their faults, tool calls and structured output, so that every client test
and benchmark drives the same real HTTP; an encoder per protocol keeps the
wire forms side by side.

`RawReply(status, headers, body, cuts=[...])` serves exact bytes, flushed
separately at the given byte offsets; `RawReply.from_case(case, cuts)` serves
a conformance corpus case (`../shared/conformance/wire/*.json`).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

FAULTS = ("disconnect", "stall", "stall_headers", "malformed_json", "html", "no_terminator",
          "invalid_utf8", "error_event", "no_finish", "role_only", "keepalive_stall")

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            408: "Request Timeout", 409: "Conflict", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout", 529: "Overloaded"}
_MAX_HOLD = 60.0   # a stall never outlives this (a test that forgot to close still ends)
_GATE_HOLD = 10.0  # a gate opens after this even when too few requests came (`Reply.gate`)


@dataclass
class Reply:
    text: str = "Hello from the loopback server."
    reasoning: str = ""
    chunk_chars: int = 4
    delay: float = 0.0
    first_delay: float = 0.0
    header_delay: float = 0.0
    status: int = 200
    message: str = "scripted error"
    error_type: str = "overloaded_error"      # Anthropic error type for fault="error_event"
    retry_after: str | None = None
    retry_after_ms: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str | None = None          # protocol default when None
    usage: tuple[int, int, int | None] | None = None
    fault: str | None = None
    fault_after: int = 1
    stamp: bool = False
    served_model: str = "test-model"          # the model id the stream names (drift tests change it)
    system_fingerprint: str | None = None     # OpenAI-compatible chunks carry it when set
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    refuse_fields: tuple[str, ...] = ()
    whole: bool = False
    whole_content_type: str = "application/json"
    gate: int = 0                             # hold the first body byte until this many were in flight at once

    def __post_init__(self) -> None:
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; one of {FAULTS}")

    def deltas(self, kind: str) -> list[str]:
        src = self.reasoning if kind == "reasoning" else self.text
        n = max(1, self.chunk_chars)
        return [src[i:i + n] for i in range(0, len(src), n)]


@dataclass
class RawReply:
    status: int
    headers: dict[str, str]
    body: bytes
    cuts: Sequence[int] | None = None         # byte offsets where a new flushed chunk starts
    delay: float = 0.0

    @classmethod
    def from_case(cls, case: dict[str, Any], cuts: Sequence[int] | None = None) -> "RawReply":
        resp = case["response"]
        return cls(resp["status"], dict(resp["headers"]), resp["body"].encode("utf-8"), cuts)

    def pieces(self) -> list[bytes]:
        if not self.cuts:
            return [self.body]
        points = sorted({c for c in self.cuts if 0 < c < len(self.body)})
        out, prev = [], 0
        for c in points + [len(self.body)]:
            out.append(self.body[prev:c])
            prev = c
        return out


@dataclass
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    t: float                                   # perf_counter when the request was read
    reply: Reply | RawReply | None = None
    closed_at: float | None = None             # perf_counter when the client hung up mid-reply
    done_at: float | None = None               # perf_counter when the server finished the reply
    chunk_times: list[float] = field(default_factory=list)
    in_flight: int = 0                         # model requests in flight when it arrived, itself included
    _closed: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def wait_closed(self, timeout: float = 5.0) -> float | None:
        """Block until the client closed the connection mid-reply; its perf_counter time, or None."""
        self._closed.wait(timeout)
        return self.closed_at


class _ClientGone(Exception):
    pass


class TestServer:
    """See the module docstring."""

    __test__ = False   # not a pytest test class

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._azure: tuple[str, str, str] | None = None
        self._script: list[Reply | RawReply] = []
        self._last: Reply | RawReply = Reply()
        self._respond: Callable[[Received], Reply | RawReply] | None = None
        self.requests: list[Received] = []
        self.models: list[str] = ["test-model"]
        self.tokens_issued = 0      # Google access tokens issued by POST /token (Vertex AI's sign-in)
        self.keep_alive = True      # keep a connection for the next request (see the module doc)
        self.connections = 0        # TCP connections accepted since start / reset
        self.open_connections = 0   # TCP connections open now
        self.in_flight = 0          # model requests being answered now
        self.max_in_flight = 0      # the most at once since start / reset / load_profile
        self._load: tuple[float, float] | None = None
        from tests.batch_api import BatchService

        self.batches = BatchService(self)      # the batch APIs (tests/batch_api.py)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self.port = 0

    # -- lifecycle
    def __enter__(self) -> "TestServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        started = threading.Event()
        error: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                error.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="lineup-test-server", daemon=True)
        self._thread.start()
        started.wait(10)
        if error:
            raise error[0]

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        self._thread.join(10)
        self._loop = self._thread = None

    # -- scripting and inspection
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def base_url(self, provider: str) -> str:
        """`ModelConfig.base_url` that points a provider at this server."""
        return {"openai": self.url + "/v1", "openai-responses": self.url + "/v1",
                "gemini": self.url + "/v1beta", "vertex": self.url + "/v1",
                "vertex-anthropic": self.url + "/v1"}.get(provider, self.url)   # bedrock: the root

    def script(self, *replies: Reply | RawReply) -> None:
        """Replies for the next requests, in order; the last one keeps being served."""
        with self._lock:
            self._script = list(replies[:-1])
            if replies:
                self._last = replies[-1]

    def respond(self, fn: Callable[[Received], Reply | RawReply] | None) -> None:
        """Answer every request with `fn(request)` (None: back to the script)."""
        with self._lock:
            self._respond = fn

    def reset(self) -> None:
        with self._lock:
            self._script = []
            self._last = Reply()
            self._respond = None
            self.requests = []
            self._azure = None
            self._load = None
            self.max_in_flight = self.in_flight
            self.connections = 0
            self.keep_alive = True

    def load_profile(self, base_ms: float, per_inflight_ms: float) -> None:
        """Load mode (see the module doc): the first-token delay grows by
        `per_inflight_ms` for each other request in flight. Resets `max_in_flight`."""
        if base_ms < 0 or per_inflight_ms < 0:
            raise ValueError("load_profile takes delays of 0 ms or more")
        with self._lock:
            self._load = (base_ms, per_inflight_ms)
            self.max_in_flight = self.in_flight

    def _arrived(self) -> tuple[int, tuple[float, float] | None]:
        """One more model request in flight: (how many now, the load profile)."""
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.in_flight, self._load

    def _left(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def azure(self, deployment: str, api_version: str, key: str) -> str:
        """Azure OpenAI mode (see the module doc); returns the base URL a model
        should use (`.../openai/deployments/{deployment}`)."""
        with self._lock:
            self._azure = (deployment, api_version, key)
        return f"{self.url}/openai/deployments/{deployment}"

    def _azure_refusal(self, rec: "Received") -> tuple[int, dict[str, Any]] | None:
        """Azure's error for a request that does not follow its conventions, or None."""
        if self._azure is None:
            return None
        deployment, api_version, key = self._azure
        prefix = "/openai/deployments/"
        if not rec.path.startswith(prefix) or not rec.path.endswith("/chat/completions"):
            return 404, {"error": {"code": "404", "message": "Resource not found"}}
        if rec.path[len(prefix):-len("/chat/completions")] != deployment:
            return 404, {"error": {"code": "DeploymentNotFound", "message": (
                "The API deployment for this resource does not exist. If you created the deployment within "
                "the last 5 minutes, please wait a moment and try again.")}}
        if dict(parse_qsl(rec.query)).get("api-version") != api_version:
            return 404, {"error": {"code": "404", "message": "Resource not found"}}
        if rec.headers.get("api-key") != key or "authorization" in rec.headers:
            return 401, {"error": {"code": "401", "message": (
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
                "valid key for an active subscription and use a correct regional API endpoint for your resource.")}}
        return None

    def _next_reply(self, rec: Received) -> Reply | RawReply:
        with self._lock:
            fn = self._respond
            if fn is None:
                return self._script.pop(0) if self._script else self._last
        return fn(rec)

    # -- HTTP
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One TCP connection: its requests, one after another while both
        sides keep it (see the module doc on connections)."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self._lock:
            self.connections += 1
            self.open_connections += 1
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Reader(reader)
        try:
            while await self._exchange(conn, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        except asyncio.CancelledError:   # `stop()`: an idle kept connection ends quietly
            pass
        finally:
            with self._lock:
                self.open_connections -= 1
            self._tasks.discard(task)
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass

    async def _exchange(self, conn: "_Reader", writer: asyncio.StreamWriter) -> bool:
        """One request and its reply; True when the connection can take the next one."""
        rec = await self._read_request(conn)
        if rec is None:
            return False
        with self._lock:
            self.requests.append(rec)
        closed = asyncio.Event()

        def watch_done(fut: asyncio.Future) -> None:
            # The client sent EOF (or reset) while we were still replying.
            if rec.done_at is None and rec.closed_at is None:
                rec.closed_at = time.perf_counter()
                rec._closed.set()
            closed.set()

        # Watches for the client hanging up mid-reply; what it reads after the
        # reply is the start of the next request, handed back to `conn`.
        watcher = asyncio.ensure_future(conn.read(65536))
        watcher.add_done_callback(watch_done)
        responder = _Responder(self, rec, writer, closed)
        try:
            await responder.respond()
        except (_ClientGone, ConnectionError):
            watch_done(watcher)
            return False
        finally:
            if rec.done_at is None and rec.closed_at is None:
                rec.done_at = time.perf_counter()
            if not watcher.done():
                watcher.cancel()
                await asyncio.wait([watcher])   # the reader is free again before the next read
        if not (self.keep_alive and responder.finished) or rec.closed_at is not None:
            return False
        if watcher.cancelled():          # nothing came from the client during the reply
            return True
        if watcher.exception() is not None:
            return False
        data = watcher.result()
        if not data:                     # the client closed the connection
            return False
        conn.push_back(data)             # the next request began to arrive
        return True

    async def _read_request(self, reader: "_Reader") -> Received | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                k = k.strip().lower()
                headers[k] = f"{headers[k]}, {v.strip()}" if k in headers else v.strip()
        body = b""
        if "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        elif "chunked" in headers.get("transfer-encoding", ""):
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                data = await reader.readexactly(size + 2)
                if size == 0:
                    break
                parts.append(data[:-2])
            body = b"".join(parts)
        url = urlsplit(target)
        return Received(method, url.path, url.query, headers, body, time.perf_counter())


class _Reader:
    """A connection's incoming bytes, with room to hand back what the
    mid-reply watcher read (the start of the next request)."""

    _HEAD_LIMIT = 1 << 20

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.pending = b""

    def push_back(self, data: bytes) -> None:
        self.pending = data + self.pending

    async def read(self, n: int) -> bytes:
        if self.pending:
            out, self.pending = self.pending[:n], self.pending[n:]
            return out
        return await self.reader.read(n)

    async def _more(self) -> None:
        data = await self.reader.read(65536)
        if not data:
            raise asyncio.IncompleteReadError(self.pending, None)
        self.pending += data

    async def readuntil(self, sep: bytes) -> bytes:
        while sep not in self.pending:
            if len(self.pending) > self._HEAD_LIMIT:
                raise ValueError("request head too long")
            await self._more()
        end = self.pending.index(sep) + len(sep)
        out, self.pending = self.pending[:end], self.pending[end:]
        return out

    async def readexactly(self, n: int) -> bytes:
        while len(self.pending) < n:
            await self._more()
        out, self.pending = self.pending[:n], self.pending[n:]
        return out


class _Responder:
    """Writes one reply; every body piece is its own flushed HTTP chunk."""

    def __init__(self, server: TestServer, rec: Received, writer: asyncio.StreamWriter, closed: asyncio.Event):
        self.server, self.rec, self.writer, self.closed = server, rec, writer, closed
        self.finished = False   # the body was ended properly: the connection may take another request

    async def _gate(self, count: int) -> None:
        """Wait until `count` model requests have been in flight at once (`Reply.gate`)."""
        deadline = time.monotonic() + _GATE_HOLD
        while self.server.max_in_flight < count and time.monotonic() < deadline:
            await self.wait(0.005)

    async def wait(self, seconds: float) -> None:
        """Sleep, but stop at once if the client hangs up."""
        if seconds <= 0:
            if self.closed.is_set():
                raise _ClientGone
            return
        try:
            await asyncio.wait_for(self.closed.wait(), seconds)
        except asyncio.TimeoutError:
            return
        raise _ClientGone

    async def head(self, status: int, headers: dict[str, str], chunked: bool = True, length: int = 0) -> None:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        for k, v in headers.items():
            lines.append(f"{k}: {v}")
        lines.append("transfer-encoding: chunked" if chunked else f"content-length: {length}")
        lines.append("connection: keep-alive" if self.server.keep_alive else "connection: close")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await self.writer.drain()

    async def piece(self, data: bytes) -> None:
        if not data:
            return
        if self.closed.is_set():
            raise _ClientGone
        self.rec.chunk_times.append(time.perf_counter())
        self.writer.write(b"%x\r\n%b\r\n" % (len(data), data))
        await self.writer.drain()

    async def finish(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
        self.rec.done_at = time.perf_counter()
        self.finished = True

    async def respond(self) -> None:
        rec = self.rec
        if self.server.batches.handles(rec.path):
            return await self.server.batches.respond(self, rec)
        if rec.method == "GET":
            return await self.listing()
        if rec.path == "/token":
            return await self.token()
        count, load = self.server._arrived()
        rec.in_flight = count
        try:
            reply = self.server._next_reply(rec)
            if load is not None and isinstance(reply, Reply):
                base_ms, per_ms = load
                reply = replace(reply, first_delay=reply.first_delay + (base_ms + per_ms * (count - 1)) / 1000)
            await self._reply(rec, reply)
        finally:
            self.server._left()

    async def _reply(self, rec: Received, reply: Reply | RawReply) -> None:
        rec.reply = reply
        if isinstance(reply, RawReply):
            await self.head(reply.status, reply.headers)
            for i, p in enumerate(reply.pieces()):
                if i and reply.delay:
                    await self.wait(reply.delay)
                await self.piece(p)
            return await self.finish()
        refused = self.server._azure_refusal(rec)
        if refused is not None:
            await self.head(refused[0], {"content-type": "application/json"})
            await self.piece(json.dumps(refused[1]).encode())
            return await self.finish()
        proto = _protocol(rec)
        if proto is None:
            await self.head(404, {"content-type": "application/json"})
            await self.piece(b'{"error": {"message": "no such endpoint"}}')
            return await self.finish()
        await self.wait(reply.header_delay)
        if reply.fault == "stall_headers":
            await self.wait(_MAX_HOLD)
            return
        extra = dict(reply.headers)
        if reply.retry_after is not None:
            extra["retry-after"] = reply.retry_after
        if reply.retry_after_ms is not None:
            extra["retry-after-ms"] = reply.retry_after_ms
        if reply.fault == "html":
            await self.head(reply.status, {"content-type": "text/html; charset=utf-8", **extra})
            await self.piece(b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
                             b"<body><h1>Bad Gateway</h1><p>nginx</p></body></html>")
            return await self.finish()
        refused = _refused_field(proto, rec, reply)
        if refused:
            reply = replace(reply, status=400, message=f"{refused} is not supported by this server")
        if reply.status != 200:
            await self.head(reply.status, {"content-type": "application/json", **extra})
            await self.piece(json.dumps(_error_body(proto, reply)).encode())
            return await self.finish()
        if reply.whole:
            await self.head(200, {"content-type": reply.whole_content_type, **extra})
            await self._gate(reply.gate)
            await self.wait(reply.first_delay)
            await self.piece(json.dumps(_whole_body(proto, reply), indent=2).encode())
            return await self.finish()
        ctype = {"openai": "text/event-stream", "responses": "text/event-stream",
                 "anthropic": "text/event-stream; charset=utf-8",
                 "ollama": "application/x-ndjson", "gemini-sse": "text/event-stream",
                 "gemini-json": "application/json; charset=UTF-8",
                 "bedrock": "application/vnd.amazon.eventstream"}[proto]
        await self.head(200, {"content-type": ctype, **extra})
        await self._gate(reply.gate)
        await self.wait(reply.first_delay)
        enc = _ENCODERS[proto](reply)
        enc.request = rec.json if isinstance(rec.json, dict) else {}
        if self.server._azure is not None:
            await self.piece(b"data: " + _j({"choices": [], "created": 0, "id": "", "model": "", "object": "",
                                             "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {
                                                 "hate": {"filtered": False, "severity": "safe"}}}]}) + b"\n\n")
        sent = 0
        pending = reply.fault is not None and reply.fault != "no_terminator"
        if reply.fault == "role_only":
            await self.piece(enc.opening() + enc.cut_end())
            return await self.finish()
        for kind, payload in _plan(reply):
            if pending and (kind == "end" or sent == reply.fault_after):
                pending = False
                if await self.fault(reply, enc):
                    return
            if kind == "end":
                await self.piece(enc.end(reply, with_terminator=reply.fault != "no_terminator"))
                break
            if sent:
                await self.wait(reply.delay)
            if kind == "tool":
                for i, piece in enumerate(enc.tool_call(int(payload), reply.tool_calls[int(payload)])):
                    if i:
                        await self.wait(reply.delay)
                    await self.piece(piece)
                sent += 1
                continue
            if reply.stamp and kind == "text":
                payload = f"{time.perf_counter():.6f} "
            await self.piece(enc.delta(kind, payload))
            sent += 1
        await self.finish()

    async def fault(self, reply: Reply, enc: "_Encoder") -> bool:
        """Apply the reply's fault; True when the reply is over."""
        f = reply.fault
        if f == "disconnect":
            self.writer.transport.abort()
            self.rec.done_at = time.perf_counter()
            raise _ClientGone
        if f == "stall":
            await self.wait(_MAX_HOLD)
            return True
        if f == "no_finish":
            await self.piece(enc.cut_end())
            await self.finish()
            return True
        if f == "keepalive_stall":
            until = time.perf_counter() + _MAX_HOLD
            while time.perf_counter() < until:
                await self.wait(reply.delay or 0.2)
                await self.piece(enc.keepalive())
            return True
        if f == "malformed_json":
            await self.piece(enc.malformed())
        elif f == "invalid_utf8":
            await self.piece(enc.delta("text", "@@BAD@@").replace(b"@@BAD@@", b"\xff\xfe"))
        elif f == "error_event":
            await self.piece(enc.error(reply))
            await self.finish()
            return True
        return False

    async def token(self) -> None:
        """Google's OAuth token endpoint (`token_uri` of an authorized_user
        credentials file): a fresh access token, `ya29.test-token-N`."""
        srv = self.server
        with srv._lock:
            srv.tokens_issued += 1
            token = f"ya29.test-token-{srv.tokens_issued}"
        await self.head(200, {"content-type": "application/json"})
        await self.piece(json.dumps({"access_token": token, "expires_in": 3600, "token_type": "Bearer"}).encode())
        await self.finish()

    async def listing(self) -> None:
        path = self.rec.path
        if path == "/_stats":
            srv = self.server
            with srv._lock:
                body: dict[str, Any] = {"connections": srv.connections, "open_connections": srv.open_connections,
                                        "requests": len(srv.requests)}
        elif path.endswith("/api/tags"):
            body = {"models": [{"name": m, "model": m} for m in self.server.models]}
        elif path.endswith("/models"):
            body = {"object": "list", "data": [{"id": m, "object": "model"} for m in self.server.models]}
        else:
            await self.head(404, {"content-type": "application/json"})
            await self.piece(b'{"error": "not found"}')
            return await self.finish()
        await self.head(200, {"content-type": "application/json"})
        await self.piece(json.dumps(body).encode())
        await self.finish()


def _protocol(rec: Received) -> str | None:
    path = rec.path
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/v1/messages") or path.endswith(":streamRawPredict"):   # the second: Anthropic on Vertex AI
        return "anthropic"
    if path.endswith("/api/chat"):
        return "ollama"
    if path.endswith(":streamGenerateContent"):
        return "gemini-sse" if "alt=sse" in rec.query else "gemini-json"
    if path.endswith("/converse-stream"):
        return "bedrock"
    return None


def _plan(reply: Reply) -> Iterator[tuple[str, str]]:
    for d in reply.deltas("reasoning"):
        yield "reasoning", d
    for d in reply.deltas("text"):
        yield "text", d
    for i in range(len(reply.tool_calls)):
        yield "tool", str(i)
    yield "end", ""


def _refused_field(proto: str, rec: Received, reply: Reply) -> str | None:
    """The first request field the reply says this server does not support."""
    if not reply.refuse_fields:
        return None
    try:
        body = rec.json
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    nested = body.get("generationConfig") if proto.startswith("gemini") else None
    for name in reply.refuse_fields:
        if name in body or (isinstance(nested, dict) and name in nested):
            return name
    return None


def _pieces(data: bytes, size: int) -> list[bytes]:
    """`data` cut every `size` bytes (each piece is flushed as its own chunk)."""
    n = max(1, size)
    return [data[i:i + n] for i in range(0, len(data), n)]


def _call_id(call: dict[str, Any], index: int) -> str:
    return str(call.get("id") or f"call_{index}")


#: Where a call's `raw_arguments` go in a message built as JSON (replaced by the raw text).
_RAW = "\u0000raw arguments\u0000"
_RAW_JSON = json.dumps(_RAW).encode()


def _args_text(call: dict[str, Any]) -> str:
    """A call's arguments as the JSON text OpenAI and Anthropic send in fragments."""
    if "raw_arguments" in call:
        return str(call["raw_arguments"])
    return json.dumps(call.get("arguments", {}), ensure_ascii=False)


def _with_raw(message: bytes, call: dict[str, Any]) -> bytes:
    """`message` with the placeholder of a call's `raw_arguments` replaced by that text, as is."""
    if "raw_arguments" not in call:
        return message
    return message.replace(_RAW_JSON, str(call["raw_arguments"]).encode())


def _usage(reply: Reply) -> tuple[int, int, int | None]:
    if reply.usage is not None:
        return reply.usage
    return 10, len(reply.deltas("text")) + len(reply.deltas("reasoning")), None


def _error_body(proto: str, reply: Reply) -> Any:
    status, msg = reply.status, reply.message
    if proto == "anthropic":
        etype = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                 429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": etype, "message": msg}}
    if proto == "ollama":
        return {"error": msg}
    if proto == "bedrock":   # the type travels in the x-amzn-ErrorType header (not sent here)
        return {"message": msg}
    if proto.startswith("gemini"):
        gstatus = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                   429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(status, "INTERNAL")
        return {"error": {"code": status, "message": msg, "status": gstatus}}
    return {"error": {"message": msg, "type": "server_error" if status >= 500 else "invalid_request_error",
                      "code": status}}


def _fingerprint(reply: Reply) -> dict[str, str]:
    return {"system_fingerprint": reply.system_fingerprint} if reply.system_fingerprint else {}


def _whole_body(proto: str, reply: Reply) -> Any:
    """The protocol's complete non-streamed response for `reply`."""
    i, o, r = _usage(reply)
    if proto == "responses":
        output: list[dict[str, Any]] = []
        if reply.reasoning:
            output.append({"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text",
                                                                          "text": reply.reasoning}]})
        output.append({"type": "message", "id": "msg_0", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
        output += [{"type": "function_call", "id": f"fc_{n}", "call_id": _call_id(c, n), "name": c["name"],
                    "arguments": _args_text(c), "status": "completed"} for n, c in enumerate(reply.tool_calls)]
        return {"id": "resp_test", "object": "response", "status": "completed", "model": reply.served_model,
                "output": output, "usage": {"input_tokens": i, "output_tokens": o, "total_tokens": i + o,
                                            "output_tokens_details": {"reasoning_tokens": r or 0}}}
    if proto == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        return {"id": "chatcmpl-test", "object": "chat.completion", "model": reply.served_model,
                **_fingerprint(reply),
                "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason or "stop"}],
                "usage": {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}}
    if proto == "anthropic":
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "sig"})
        content.append({"type": "text", "text": reply.text})
        return {"id": "msg_test", "type": "message", "role": "assistant", "model": reply.served_model,
                "content": content,
                "stop_reason": reply.finish_reason or "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": i, "output_tokens": o}}
    if proto == "ollama":
        msg: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.reasoning:
            msg["thinking"] = reply.reasoning
        return {"model": reply.served_model, "message": msg, "done": True,
                "done_reason": reply.finish_reason or "stop",
                "prompt_eval_count": i, "eval_count": o, "prompt_eval_duration": 1_000_000,
                "eval_duration": 50_000_000}
    parts: list[dict[str, Any]] = [{"text": reply.reasoning, "thought": True}] if reply.reasoning else []
    parts.append({"text": reply.text})
    usage: dict[str, Any] = {"promptTokenCount": i, "candidatesTokenCount": o, "totalTokenCount": i + o + (r or 0)}
    return {"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": reply.finish_reason or "STOP",
                            "index": 0}], "usageMetadata": usage, "modelVersion": reply.served_model}


def _j(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


class _Encoder:
    request: dict[str, Any] = {}

    def __init__(self, reply: Reply) -> None:
        self.reply = reply

    def tool_call(self, index: int, call: dict[str, Any]) -> list[bytes]: ...

    def delta(self, kind: str, text: str) -> bytes: ...
    def end(self, reply: Reply, with_terminator: bool) -> bytes: ...
    def error(self, reply: Reply) -> bytes: ...
    def malformed(self) -> bytes: ...
    def opening(self) -> bytes: ...
    def cut_end(self) -> bytes: ...

    def keepalive(self) -> bytes:
        return b": keep-alive\n\n"


class _OpenAI(_Encoder):
    first = True

    def delta(self, kind: str, text: str) -> bytes:
        return self._chunk({"content": text} if kind == "text" else {"content": None, "reasoning_content": text})

    def _chunk(self, delta: dict[str, Any]) -> bytes:
        if self.first:
            self.first = False
            delta["role"] = "assistant"
        return b"data: " + _j({"id": "chatcmpl-test", "object": "chat.completion.chunk",
                               "model": self.reply.served_model, **_fingerprint(self.reply),
                               "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}) + b"\n\n"

    def tool_call(self, index: int, call: dict[str, Any]) -> list[bytes]:
        args = _args_text(call)
        out = [self._chunk({"tool_calls": [{"index": index, "id": _call_id(call, index), "type": "function",
                                            "function": {"name": call["name"], "arguments": ""}}]})]
        n = max(1, self.reply.chunk_chars)
        out += [self._chunk({"tool_calls": [{"index": index, "function": {"arguments": args[i:i + n]}}]})
                for i in range(0, len(args), n)]
        return out

    def end(self, reply: Reply, with_terminator: bool) -> bytes:
        i, o, r = _usage(reply)
        usage: dict[str, Any] = {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}
        if r is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": r}
        reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        out = (b"data: " + _j({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
               + b"\n\ndata: " + _j({"choices": [], "usage": usage}) + b"\n\n")
        return out + (b"data: [DONE]\n\n" if with_terminator else b"")

    def error(self, reply: Reply) -> bytes:
        return b"data: " + _j({"error": {"message": reply.message, "code": 502}}) + b"\n\n"

    def malformed(self) -> bytes:
        return b'data: {"choices": [{"index": 0, "delta": {"content": "oops"\n\n'

    def opening(self) -> bytes:
        return b"data: " + _j({"id": "chatcmpl-test", "object": "chat.completion.chunk",
                               "model": self.reply.served_model, **_fingerprint(self.reply),
                               "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                            "finish_reason": None}]}) + b"\n\n"

    def cut_end(self) -> bytes:
        return b"data: [DONE]\n\n"


class _Anthropic(_Encoder):
    def __init__(self, reply: Reply) -> None:
        super().__init__(reply)
        self.started = False
        self.block: str | None = None
        self.index = -1

    def _ev(self, name: str, obj: dict[str, Any]) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + _j(obj) + b"\n\n"

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        i, _, _ = _usage(self.reply)
        return self._ev("message_start", {"type": "message_start", "message": {
            "id": "msg_test", "type": "message", "role": "assistant", "model": self.reply.served_model,
            "content": [],
            "stop_reason": None, "usage": {"input_tokens": i, "output_tokens": 1}}}) + \
            self._ev("ping", {"type": "ping"})

    def _switch(self, block: str) -> bytes:
        if self.block == block:
            return b""
        out = self._stop()
        self.block, self.index = block, self.index + 1
        cb = {"type": "text", "text": ""} if block == "text" else {"type": "thinking", "thinking": ""}
        return out + self._ev("content_block_start", {"type": "content_block_start", "index": self.index,
                                                      "content_block": cb})

    def _stop(self) -> bytes:
        if self.block is None:
            return b""
        self.block = None
        return self._ev("content_block_stop", {"type": "content_block_stop", "index": self.index})

    def _forced_tool(self) -> str | None:
        choice = self.request.get("tool_choice")
        return choice.get("name") if isinstance(choice, dict) and choice.get("type") == "tool" else None

    def _tool_start(self, call_id: str, name: str) -> bytes:
        out = self._stop()
        self.block, self.index = "tool_use", self.index + 1
        return out + self._ev("content_block_start", {"type": "content_block_start", "index": self.index,
                                                      "content_block": {"type": "tool_use", "id": call_id,
                                                                        "name": name, "input": {}}})

    def _json_delta(self, fragment: str) -> bytes:
        return self._ev("content_block_delta", {"type": "content_block_delta", "index": self.index,
                                                "delta": {"type": "input_json_delta", "partial_json": fragment}})

    def delta(self, kind: str, text: str) -> bytes:
        forced = self._forced_tool() if kind == "text" else None
        if forced is not None:   # structured output through a forced tool: the text is its input
            head = self._start() + (b"" if self.block == "tool_use" else self._tool_start("toolu_answer", forced))
            return head + self._json_delta(text)
        d = {"type": "text_delta", "text": text} if kind == "text" else {"type": "thinking_delta", "thinking": text}
        return self._start() + self._switch(kind) + self._ev(
            "content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": d})

    def tool_call(self, index: int, call: dict[str, Any]) -> list[bytes]:
        args = _args_text(call)
        n = max(1, self.reply.chunk_chars)
        out = [self._start() + self._tool_start(_call_id(call, index), call["name"])]
        out += [self._json_delta(args[i:i + n]) for i in range(0, len(args), n)]
        out.append(self._stop())
        return out

    def end(self, reply: Reply, with_terminator: bool) -> bytes:
        _, o, _ = _usage(reply)
        reason = reply.finish_reason or ("tool_use" if reply.tool_calls or self._forced_tool() else "end_turn")
        out = self._start() + self._stop() + self._ev("message_delta", {
            "type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": o}})
        return out + (self._ev("message_stop", {"type": "message_stop"}) if with_terminator else b"")

    def error(self, reply: Reply) -> bytes:
        return self._start() + self._ev("error", {"type": "error", "error": {"type": reply.error_type,
                                                                           "message": reply.message}})

    def malformed(self) -> bytes:
        return self._start() + b'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": {\n\n'

    def opening(self) -> bytes:
        return self._start()

    def cut_end(self) -> bytes:
        return self._start() + self._stop() + self._ev("message_stop", {"type": "message_stop"})


class _Ollama(_Encoder):
    def delta(self, kind: str, text: str) -> bytes:
        msg = {"role": "assistant", "content": text} if kind == "text" else \
            {"role": "assistant", "content": "", "thinking": text}
        return _j({"model": self.reply.served_model, "message": msg, "done": False}) + b"\n"

    def tool_call(self, index: int, call: dict[str, Any]) -> list[bytes]:
        fn: dict[str, Any] = {"name": call["name"], "arguments": _RAW if "raw_arguments" in call else
                              call.get("arguments", {})}
        entry: dict[str, Any] = {"function": fn}
        if call.get("id"):
            entry["id"] = call["id"]
        line = _with_raw(_j({"model": self.reply.served_model, "message": {
            "role": "assistant", "content": "", "tool_calls": [entry]}, "done": False}), call) + b"\n"
        return _pieces(line, self.reply.chunk_chars)

    def end(self, reply: Reply, with_terminator: bool) -> bytes:
        if not with_terminator:
            return b""
        i, o, _ = _usage(reply)
        return _j({"model": self.reply.served_model, "message": {"role": "assistant", "content": ""}, "done": True,
                   "done_reason": reply.finish_reason or "stop", "prompt_eval_count": i, "eval_count": o,
                   "prompt_eval_duration": 1_000_000, "eval_duration": 50_000_000}) + b"\n"

    def error(self, reply: Reply) -> bytes:
        return _j({"error": reply.message}) + b"\n"

    def malformed(self) -> bytes:
        return b'{"model": "test-model", "message": {"content": "oops"\n'

    def opening(self) -> bytes:
        return _j({"model": self.reply.served_model, "message": {"role": "assistant", "content": ""},
                   "done": False}) + b"\n"

    def cut_end(self) -> bytes:
        return _j({"model": self.reply.served_model, "message": {"role": "assistant", "content": ""},
                   "done": True}) + b"\n"

    def keepalive(self) -> bytes:
        return b"\n"


class _Gemini(_Encoder):
    sse = True

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply)
        self.count = 0

    def _frame(self, obj: Any, raw: bytes | None = None) -> bytes:
        body = raw if raw is not None else json.dumps(obj, ensure_ascii=False, indent=2).encode("utf-8")
        self.count += 1
        if self.sse:
            return b"data: " + (raw if raw is not None else _j(obj)) + b"\r\n\r\n"
        return (b"[" if self.count == 1 else b"\n,\r\n") + body

    def delta(self, kind: str, text: str) -> bytes:
        part: dict[str, Any] = {"text": text}
        if kind == "reasoning":
            part["thought"] = True
        return self._frame({"candidates": [{"content": {"parts": [part], "role": "model"}, "index": 0}],
                            "modelVersion": self.reply.served_model})

    def tool_call(self, index: int, call: dict[str, Any]) -> list[bytes]:
        fn: dict[str, Any] = {"name": call["name"], "args": _RAW if "raw_arguments" in call else
                              call.get("arguments", {})}
        if call.get("id"):
            fn["id"] = call["id"]
        part: dict[str, Any] = {"functionCall": fn}
        if call.get("signature"):
            part["thoughtSignature"] = call["signature"]
        frame = _with_raw(self._frame({"candidates": [{"content": {"parts": [part], "role": "model"}, "index": 0}],
                                       "modelVersion": self.reply.served_model}), call)
        return _pieces(frame, self.reply.chunk_chars)

    def end(self, reply: Reply, with_terminator: bool) -> bytes:
        i, o, r = _usage(reply)
        usage: dict[str, Any] = {"promptTokenCount": i, "candidatesTokenCount": o, "totalTokenCount": i + o + (r or 0)}
        if r is not None:
            usage["thoughtsTokenCount"] = r
        if self.sse and not with_terminator:
            return b""
        out = self._frame({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"},
                                           "finishReason": reply.finish_reason or "STOP", "index": 0}],
                           "usageMetadata": usage, "modelVersion": self.reply.served_model})
        if not self.sse and with_terminator:
            out += b"\n]"
        return out

    def error(self, reply: Reply) -> bytes:
        return self._frame({"error": {"code": 503, "message": reply.message, "status": "UNAVAILABLE"}})

    def malformed(self) -> bytes:
        return self._frame(None, raw=b'{"candidates": [{"content": {"parts": [{"text": "oops"}}]')

    def opening(self) -> bytes:
        return self._frame({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "index": 0}],
                            "modelVersion": self.reply.served_model})

    def cut_end(self) -> bytes:
        return b"" if self.sse else (b"[" if self.count == 0 else b"") + b"\n]"

    def keepalive(self) -> bytes:
        return b": keep-alive\r\n\r\n" if self.sse else b"\n"


class _GeminiArray(_Gemini):
    sse = False


class _Responses(_Encoder):
    """The OpenAI Responses API's typed events: each item (reasoning, message,
    function call) added, its deltas, done; `response.completed` at the end
    (`response.incomplete` when the reply's `finish_reason` is set and is
    not "completed": its `incomplete_details.reason`)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply)
        self.seq = 0
        self.started = False
        self.item: str | None = None      # the open item's kind: "text" | "reasoning"
        self.index = -1                   # its output_index

    def _ev(self, name: str, obj: dict[str, Any]) -> bytes:
        self.seq += 1
        return b"event: " + name.encode() + b"\ndata: " + _j({"type": name, "sequence_number": self.seq, **obj}) + b"\n\n"

    def _response(self, status: str | None, **extra: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"id": "resp_test", "object": "response", "created_at": 0,
                               "model": self.reply.served_model, "output": [], "usage": None, **extra}
        if status is not None:
            out["status"] = status
        return out

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        return (self._ev("response.created", {"response": self._response("in_progress")})
                + self._ev("response.in_progress", {"response": self._response("in_progress")}))

    def _close(self) -> bytes:
        if self.item is None:
            return b""
        kind, self.item = self.item, None
        item_id = f"{'msg' if kind == 'text' else 'rs'}_{self.index}"
        if kind == "text":
            return (self._ev("response.content_part.done", {"item_id": item_id, "output_index": self.index,
                                                            "content_index": 0, "part": {"type": "output_text"}})
                    + self._ev("response.output_item.done", {"output_index": self.index, "item": {
                        "type": "message", "id": item_id, "status": "completed", "role": "assistant"}}))
        return self._ev("response.output_item.done", {"output_index": self.index, "item": {
            "type": "reasoning", "id": item_id}})

    def _open(self, kind: str) -> bytes:
        if self.item == kind:
            return b""
        out = self._close()
        self.item, self.index = kind, self.index + 1
        if kind == "text":
            item_id = f"msg_{self.index}"
            return out + self._ev("response.output_item.added", {"output_index": self.index, "item": {
                "type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}}) \
                + self._ev("response.content_part.added", {"item_id": item_id, "output_index": self.index,
                                                           "content_index": 0,
                                                           "part": {"type": "output_text", "text": "",
                                                                    "annotations": []}})
        item_id = f"rs_{self.index}"
        return out + self._ev("response.output_item.added", {"output_index": self.index, "item": {
            "type": "reasoning", "id": item_id, "summary": []}}) \
            + self._ev("response.reasoning_summary_part.added", {"item_id": item_id, "output_index": self.index,
                                                                 "summary_index": 0,
                                                                 "part": {"type": "summary_text", "text": ""}})

    def delta(self, kind: str, text: str) -> bytes:
        head = self._start() + self._open(kind)
        name = "response.output_text.delta" if kind == "text" else "response.reasoning_summary_text.delta"
        where = {"content_index": 0} if kind == "text" else {"summary_index": 0}
        item_id = f"{'msg' if kind == 'text' else 'rs'}_{self.index}"
        return head + self._ev(name, {"item_id": item_id, "output_index": self.index, **where, "delta": text})

    def tool_call(self, index: int, call: dict[str, Any]) -> list[bytes]:
        args = _args_text(call)
        n = max(1, self.reply.chunk_chars)
        head = self._start() + self._close()
        self.index += 1
        item = {"type": "function_call", "id": f"fc_{self.index}", "call_id": _call_id(call, index),
                "name": call["name"], "arguments": "", "status": "in_progress"}
        out = [head + self._ev("response.output_item.added", {"output_index": self.index, "item": item})]
        out += [self._ev("response.function_call_arguments.delta", {
            "item_id": item["id"], "output_index": self.index, "delta": args[i:i + n]}) for i in range(0, len(args), n)]
        out.append(self._ev("response.function_call_arguments.done", {
            "item_id": item["id"], "output_index": self.index, "arguments": args})
            + self._ev("response.output_item.done", {"output_index": self.index,
                                                     "item": {**item, "arguments": args, "status": "completed"}}))
        return out

    def end(self, reply: Reply, with_terminator: bool) -> bytes:
        out = self._start() + self._close()
        if not with_terminator:
            return out
        i, o, r = _usage(reply)
        usage = {"input_tokens": i, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": o,
                 "output_tokens_details": {"reasoning_tokens": r or 0}, "total_tokens": i + o}
        reason = reply.finish_reason
        if reason and reason != "completed":
            return out + self._ev("response.incomplete", {"response": self._response(
                "incomplete", usage=usage, incomplete_details={"reason": reason})})
        return out + self._ev("response.completed", {"response": self._response("completed", usage=usage)})

    def error(self, reply: Reply) -> bytes:
        return self._start() + self._close() + self._ev("response.failed", {"response": self._response(
            "failed", error={"code": "server_error", "message": reply.message})})

    def malformed(self) -> bytes:
        return self._start() + b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "delta": \n\n'

    def opening(self) -> bytes:
        return self._start()

    def cut_end(self) -> bytes:
        # the terminator with no status: nothing says the answer was complete
        return self._start() + self._close() + self._ev("response.completed", {"response": self._response(None)})


def event_stream_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (total and headers length, its
    CRC32), string headers (type 7), payload, message CRC32. botocore has a
    parser for these and no encoder."""
    import struct
    import zlib

    head = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
                    for k, v in headers.items())
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


class _Bedrock(_Encoder):
    """ConverseStream's events in event-stream frames: no start event for a
    text or reasoning block (its deltas open it), `contentBlockStart` for a
    tool use, `messageStop` then `metadata` at the end; a fault's error is an
    exception message of `error_type` (default `modelStreamErrorException`)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply)
        self.started = False
        self.block: str | None = None
        self.index = -1

    def _ev(self, name: str, obj: dict[str, Any]) -> bytes:
        return event_stream_frame({":event-type": name, ":content-type": "application/json",
                                   ":message-type": "event"}, _j({**obj, "p": "abcdefgh"}))

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        return self._ev("messageStart", {"role": "assistant"})

    def _stop(self) -> bytes:
        if self.block is None:
            return b""
        self.block = None
        return self._ev("contentBlockStop", {"contentBlockIndex": self.index})

    def _forced_tool(self) -> str | None:
        choice = (self.request.get("toolConfig") or {}).get("toolChoice")
        return (choice.get("tool") or {}).get("name") if isinstance(choice, dict) else None

    def _tool_start(self, call_id: str, name: str) -> bytes:
        out = self._stop()
        self.block, self.index = "tool", self.index + 1
        return out + self._ev("contentBlockStart", {"contentBlockIndex": self.index,
                                                    "start": {"toolUse": {"toolUseId": call_id, "name": name}}})

    def _input(self, fragment: str) -> bytes:
        return self._ev("contentBlockDelta", {"contentBlockIndex": self.index,
                                              "delta": {"toolUse": {"input": fragment}}})

    def delta(self, kind: str, text: str) -> bytes:
        forced = self._forced_tool() if kind == "text" else None
        if forced is not None:
            head = self._start() + (b"" if self.block == "tool" else self._tool_start("tooluse_answer", forced))
            return head + self._input(text)
        out = self._start()
        if self.block != kind:
            out += self._stop()
            self.block, self.index = kind, self.index + 1
        d = {"text": text} if kind == "text" else {"reasoningContent": {"text": text}}
        return out + self._ev("contentBlockDelta", {"contentBlockIndex": self.index, "delta": d})

    def tool_call(self, index: int, call: dict[str, Any]) -> list[bytes]:
        args = _args_text(call)
        n = max(1, self.reply.chunk_chars)
        out = [self._start() + self._tool_start(_call_id(call, index), call["name"])]
        out += [self._input(args[i:i + n]) for i in range(0, len(args), n)]
        out.append(self._stop())
        return out

    def _metadata(self, reply: Reply) -> bytes:
        i, o, _ = _usage(reply)
        return self._ev("metadata", {"usage": {"inputTokens": i, "outputTokens": o, "totalTokens": i + o},
                                     "metrics": {"latencyMs": 42}})

    def end(self, reply: Reply, with_terminator: bool) -> bytes:
        if not with_terminator:
            return self._start() + self._stop()
        reason = reply.finish_reason or ("tool_use" if reply.tool_calls or self._forced_tool() else "end_turn")
        return self._start() + self._stop() + self._ev("messageStop", {"stopReason": reason}) + self._metadata(reply)

    def error(self, reply: Reply) -> bytes:
        etype = reply.error_type if reply.error_type.endswith("Exception") else "modelStreamErrorException"
        return self._start() + event_stream_frame(
            {":exception-type": etype, ":content-type": "application/json", ":message-type": "exception"},
            _j({"message": reply.message}))

    def malformed(self) -> bytes:
        return self._start() + event_stream_frame(
            {":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"},
            b'{"contentBlockIndex": 0, "delta": {"te')

    def opening(self) -> bytes:
        return self._start()

    def cut_end(self) -> bytes:
        return self._start() + self._stop() + self._ev("messageStop", {}) + self._metadata(self.reply)

    def keepalive(self) -> bytes:
        return b""


_ENCODERS = {"openai": _OpenAI, "responses": _Responses, "anthropic": _Anthropic, "ollama": _Ollama,
             "gemini-sse": _Gemini, "gemini-json": _GeminiArray, "bedrock": _Bedrock}


# --- a judge on the wire ------------------------------------------------------------


def _texts(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def request_texts(rec: Received) -> tuple[str, str]:
    """(system prompt, last user message) of a chat request in any protocol."""
    body = rec.json or {}
    proto = _protocol(rec) or ""
    if proto.startswith("gemini"):
        system = _texts((body.get("systemInstruction") or {}).get("parts"))
        users = [c for c in body.get("contents", []) if c.get("role") == "user"]
        return system, _texts(users[-1].get("parts")) if users else ""
    messages = body.get("messages", [])
    system = _texts(body.get("system")) if proto == "anthropic" else \
        "".join(_texts(m.get("content")) for m in messages if m.get("role") == "system")
    users = [m for m in messages if m.get("role") == "user"]
    return system, _texts(users[-1].get("content")) if users else ""


_JUDGE_ANSWER = re.compile(r"\[The Start of Assistant (A|B)'s Answer\]\n(.*?)\n\[The End of Assistant \1's Answer\]",
                           re.DOTALL)
_JUDGE_QUESTION = re.compile(r"\[User Question\]\n(.*?)\n\n\[The Start of (?:Reference|Assistant)", re.DOTALL)
_JUDGE_CONVERSATION = re.compile(r"<\|The Start of Assistant (A|B)'s Conversation with User\|>\n\n(.*?)\n\n"
                                 r"<\|The End of Assistant \1's Conversation with User\|>", re.DOTALL)
_JUDGE_TURN = re.compile(r"### User:\n(.*?)\n\n### Assistant (?:A|B):\n(.*?)(?=\n\n### User:\n|\Z)", re.DOTALL)


def judge_material(user: str) -> tuple[str, str, str] | None:
    """(last question, answer A, answer B) of a pairwise judging request, single- or multi-turn."""
    answers = {m.group(1): m.group(2) for m in _JUDGE_ANSWER.finditer(user)}
    q = _JUDGE_QUESTION.search(user)
    if set(answers) == {"A", "B"} and q is not None:
        return q.group(1), answers["A"], answers["B"]
    last = {m.group(1): _JUDGE_TURN.findall(m.group(2))[-1:] for m in _JUDGE_CONVERSATION.finditer(user)}
    if set(last) != {"A", "B"} or not last["A"] or not last["B"]:
        return None
    return last["A"][0][0], last["A"][0][1], last["B"][0][1]


@dataclass
class PairwiseJudge:
    """See the module docstring: `srv.respond(PairwiseJudge(verdict))`."""

    verdict: Callable[[str, str, str], str]
    usage: tuple[int, int, int | None] | None = None
    delay: float = 0.0
    seen: list[tuple[str, str, str]] = field(default_factory=list)   # (question, A, B) of each request

    def __call__(self, rec: Received) -> Reply:
        _, user = request_texts(rec)
        found = judge_material(user)
        if found is None:
            return Reply(text="I cannot see two answers here. [[C]]", usage=self.usage, delay=self.delay)
        self.seen.append(found)
        pick = self.verdict(*found)
        return Reply(text=f"Comparing the two answers briefly. [[{pick}]]", usage=self.usage, delay=self.delay)


# --- client-side helpers for tests ----------------------------------------------


def free_port() -> int:
    """A loopback port nobody listens on (bound, read and let go): a refused
    connection, a proxy that is not there, or a port for a server to take."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_config(srv: TestServer, provider: str, **fields: Any):
    """A `ModelConfig` (alias "test") for `provider` pointing at `srv`."""
    from providers.model_config import ModelConfig

    fields.setdefault("model", "test-model")
    fields.setdefault("alias", "test")
    return ModelConfig(provider=provider, base_url=srv.base_url(provider), **fields)


def chat_request(text: str = "hi", **fields: Any):
    from providers.events import ChatRequest, Message

    return ChatRequest(model="test-model", messages=(Message(role="user", content=text),), **fields)


async def collect_async(provider: Any, request: Any = None) -> tuple[Any, list]:
    """Run one stream to its end: (StreamResult, [events])."""
    from providers.events import StreamResult

    result, events = StreamResult(), []
    async for ev in provider.stream(request or chat_request()):
        result.add(ev)
        events.append(ev)
    return result, events


async def cancelled_at_first_text(provider: Any, request: Any = None) -> list:
    """Stream one answer and cancel it at its first piece of text, as a person
    stopping it does: the events seen, the last of them its end."""
    from providers.events import TextDelta

    stream, seen = provider.stream(request or chat_request()), []
    async for ev in stream:
        seen.append(ev)
        if isinstance(ev, TextDelta):
            stream.cancel()
    return seen


def collect(cfg: Any, request: Any = None, **options: Any) -> tuple[Any, list]:
    """Make the provider for `cfg` (`options` to `make_provider`), run one stream in a
    fresh event loop, close the provider: (StreamResult, [events])."""
    import anyio

    from providers import make_provider

    async def go() -> tuple[Any, list]:
        provider = make_provider(cfg, **options)
        try:
            return await collect_async(provider, request)
        finally:
            await provider.aclose()

    return anyio.run(go)


def _main() -> None:
    """`python tests/server.py [--reply JSON]`: serve until killed; prints the URL
    on the first line (benchmarks run it in a separate process so that the
    server's CPU time is not counted as the client's)."""
    import argparse
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run as a script: `tests` importable
    ap = argparse.ArgumentParser(description=_main.__doc__)
    ap.add_argument("--reply", default="{}", help="Reply fields as a JSON object, served to every request")
    args = ap.parse_args()
    with TestServer() as srv:
        srv.script(Reply(**json.loads(args.reply)))
        print(srv.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    _main()
