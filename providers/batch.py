"""Provider batch APIs, for large runs: the OpenAI Batch API and Anthropic
Message Batches. Half the price of streamed requests and outside the rate
limits, at the cost of waiting (up to 24 hours).

OpenAI (`base_url` .../v1): the requests as JSONL (`custom_id`, `method`,
`url` /v1/chat/completions, `body`) uploaded with `POST /files` (multipart,
`purpose=batch`); `POST /batches` (`input_file_id`, `endpoint`,
`completion_window` 24h, `metadata` naming our job, so a batch whose creation
was never recorded can be found again with `GET /batches`); polled with
`GET /batches/{id}` (validating, in_progress, finalizing, then completed,
failed, expired, cancelled; `request_counts`); results in
`GET /files/{output_file_id}/content` and `.../{error_file_id}/content`, one
JSON line per request (`custom_id`, `response.status_code`, `response.body`,
or `error` such as `batch_expired`).

Anthropic (`base_url` the API root): `POST /v1/messages/batches` with
`requests` (`custom_id`, `params`); polled with `GET
/v1/messages/batches/{id}` (`processing_status` in_progress, canceling,
ended; `request_counts` processing, succeeded, errored, canceled, expired);
results from its `results_url` (followed only on the API's own origin, the
key is sent there) as JSON lines (`result.type` succeeded with `message`,
errored with `error`, canceled, expired).

Each request body is what the protocol's provider builds for a streamed
request (`HttpProvider.build`), without `stream`; each result becomes the
events of one answer, ending with exactly one terminal event, like a stream
(`providers.events`), with no timings. The key comes from the environment at
call time and is scrubbed from every message. A results line that cannot be
read fails only the request it names, or is reported by its number
(`BatchResults`): one bad line never holds back the batch. The server's
fields are made inert by the core before they are stored
(`core.answering.recording.server_fields`, `core.answering.batch_run`).
"""

from __future__ import annotations

import json
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from providers import make_provider
from providers.events import (
    ChatRequest,
    ErrorKind,
    StreamError,
    StreamEvent,
)
from providers.http import HttpProvider, error_message_from_body, kind_for_status, scrub, short
from providers.model_config import ModelConfig

#: The providers whose batch API lineup speaks.
BATCH_PROVIDERS = ("openai", "anthropic")
#: What a batch request costs against a streamed one (both providers' published discount).
BATCH_PRICE_FACTOR = 0.5
#: Bytes of a results file read at most (a bound on what a server may send).
MAX_RESULTS_BYTES = 2 * 1024 ** 3

BatchState = Literal["running", "ended", "failed", "expired", "cancelled"]


class BatchAPIError(Exception):
    """A batch API call that failed: its kind, and whether the request may
    have reached the server (a timeout or a cut connection after sending)."""

    def __init__(self, kind: ErrorKind, message: str, *, maybe_sent: bool = True, status: int | None = None):
        super().__init__(message)
        self.kind, self.message, self.maybe_sent, self.status = kind, message, maybe_sent, status


@dataclass
class BatchStatus:
    state: BatchState
    remote_status: str
    counts: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    done: int = 0            # requests with a result so far (any outcome)
    total: int = 0
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class BatchResult:
    custom_id: str
    events: list[StreamEvent]


@dataclass
class BatchResults:
    """What a batch's results files held: one result per request they name
    (a line that could not be read but names its request is that request's
    failure, `bad_response`), and the lines that could not be read and name
    no request ("output file line 3 is not JSON"): one bad line never keeps
    the others from being recorded."""

    results: list[BatchResult] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


class BatchClient(ABC):
    """One model's batch API (see the module doc); `aclose()` when done."""

    def __init__(self, cfg: ModelConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if cfg.provider not in BATCH_PROVIDERS:
            raise ValueError(f"model {cfg.alias!r}: {cfg.provider} has no batch API lineup can use "
                             f"(only {', '.join(BATCH_PROVIDERS)})")
        provider = make_provider(cfg, transport=transport)
        assert isinstance(provider, HttpProvider)
        self.cfg = cfg
        self.provider = provider
        self.base_url = provider.base_url

    # -- what a protocol provides
    @abstractmethod
    async def submit(self, items: Sequence[tuple[str, ChatRequest]], tag: str,
                     input_file_id: str | None = None) -> tuple[str, str | None]:
        """Create the batch: (its id, the uploaded input file's id or None)."""

    async def upload(self, items: Sequence[tuple[str, ChatRequest]]) -> str | None:
        """Upload the requests where the protocol needs a file first (its id); None otherwise."""
        return None

    async def find(self, tag: str) -> str | None:
        """The id of a batch created for `tag` whose creation went unrecorded, where the API can say."""
        return None

    @abstractmethod
    async def poll(self, remote_id: str) -> BatchStatus: ...

    @abstractmethod
    async def results(self, remote_id: str, status: BatchStatus) -> BatchResults: ...

    # -- shared
    def key(self) -> str | None:
        key, problem = self.provider.key()
        if problem:
            raise BatchAPIError(ErrorKind.config, problem, maybe_sent=False)
        return key

    def protocol_headers(self) -> dict[str, str]:
        """Headers the batch API wants besides the credentials."""
        return {}

    def body(self, request: ChatRequest, key: str | None) -> dict[str, Any]:
        """The protocol's request body for `request`, not streamed."""
        _url, _headers, body = self.provider.build(request, key)
        body.pop("stream", None)
        body.pop("stream_options", None)
        return body

    async def call(self, method: str, url: str, *, json_body: Any = None, files: Any = None,
                   data: Any = None, limit: int = 64 * 1024 * 1024) -> bytes:
        """One API call; the body (at most `limit` bytes) or `BatchAPIError`."""
        # the model's own auth and headers (`auth`, `headers` in the config), as its streamed requests send them
        cred, secrets, problem = self.provider.credentials(self.key())
        if problem:
            raise BatchAPIError(ErrorKind.config, problem, maybe_sent=False)
        key = secrets
        headers = {**cred, **self.protocol_headers(), "user-agent": "lineup"}
        content = None
        if json_body is not None:
            content = json.dumps(json_body, ensure_ascii=False, allow_nan=False).encode()
            headers["content-type"] = "application/json"
        client = self.provider.client
        try:
            request = client.build_request(method, url, headers=headers, content=content, files=files, data=data,
                                           timeout=self.provider.timeout)
            resp = await client.send(request, stream=True)
        except httpx.ConnectError as exc:
            raise BatchAPIError(ErrorKind.connection, scrub(f"cannot reach {self._host()}: {exc}", key),
                                maybe_sent=False) from None
        except httpx.TimeoutException:
            raise BatchAPIError(ErrorKind.timeout, f"no response from {self._host()} within "
                                f"{self.cfg.read_timeout:g} s") from None
        except httpx.TransportError as exc:
            raise BatchAPIError(ErrorKind.connection, scrub(f"the connection to {self._host()} failed: {exc}",
                                                            key)) from None
        try:
            chunks, size = [], 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise BatchAPIError(ErrorKind.truncated, f"the response passed {limit:,} bytes; not read")
                chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise BatchAPIError(ErrorKind.connection, scrub(f"the response was cut: {exc}", key)) from None
        finally:
            await resp.aclose()
        body = b"".join(chunks)
        if not 200 <= resp.status_code < 300:
            text = body[:65536].decode("utf-8", "replace")
            detail = error_message_from_body(text, resp.headers.get("content-type", ""))
            raise BatchAPIError(kind_for_status(resp.status_code, text),
                                scrub(f"HTTP {resp.status_code}" + (f": {detail}" if detail else ""), key),
                                status=resp.status_code)
        return body

    async def call_json(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        body = await self.call(method, url, **kwargs)
        try:
            obj = json.loads(body)
        except ValueError:
            raise BatchAPIError(ErrorKind.bad_response, f"{method} {urlsplit(url).path}: the response is not JSON "
                                f"({short(body[:80].decode('utf-8', 'replace'), 80)!r})") from None
        if not isinstance(obj, dict):
            raise BatchAPIError(ErrorKind.bad_response, f"{method} {urlsplit(url).path}: not a JSON object")
        return obj

    def _host(self) -> str:
        return urlsplit(self.base_url).netloc or self.base_url

    def same_origin(self, url: str) -> bool:
        a, b = urlsplit(url), urlsplit(self.base_url)
        return (a.scheme, a.netloc) == (b.scheme, b.netloc)

    async def aclose(self) -> None:
        await self.provider.aclose()


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


#: A request's id in a line that is not JSON (ours are ULIDs; Anthropic's rule: 1-64 of these).
_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*"([A-Za-z0-9_-]{1,64})"')


def _lines(body: bytes, what: str, into: BatchResults,
           events: Callable[[dict[str, Any]], list[StreamEvent]]) -> None:
    """Every line of a results file (`what`, as messages name it) into `into`:
    a readable line as its request's events, an unreadable one as its
    request's failure where the line still names it, else by its number."""
    failed: list[BatchResult] = []
    for n, line in enumerate(body.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:   # not JSON, not UTF-8, nested past what Python parses
            why = "is not JSON" if not isinstance(exc, RecursionError) else "is JSON nested too deeply to read"
        else:
            if isinstance(obj, dict) and isinstance(obj.get("custom_id"), str):
                into.results.append(BatchResult(obj["custom_id"], events(obj)))
                continue
            why = "names no request (no custom_id)"
        where = f"{what} line {n}"
        m = _CUSTOM_ID.search(line)
        if m is None:
            into.unreadable.append(f"{where} {why}")
        else:
            failed.append(BatchResult(m.group(1).decode(), [_error(ErrorKind.bad_response,
                                                                   f"its result ({where}) {why}")]))
    # a readable result of the same request wins over an unreadable line
    into.results[:0] = failed


def _error(kind: ErrorKind, message: str, status: int | None = None) -> StreamError:
    return StreamError(kind=kind, message=message, t=time.perf_counter(), status=status)


# --------------------------------------------------------------------------- OpenAI


_OPENAI_STATES: dict[str, BatchState] = {"completed": "ended", "failed": "failed", "expired": "expired",
                                          "cancelled": "cancelled"}


class OpenAIBatch(BatchClient):
    ENDPOINT = "/v1/chat/completions"

    def jsonl(self, items: Sequence[tuple[str, ChatRequest]], key: str | None) -> bytes:
        return b"".join(json.dumps({"custom_id": cid, "method": "POST", "url": self.ENDPOINT,
                                    "body": self.body(req, key)}, ensure_ascii=False,
                                   allow_nan=False).encode() + b"\n" for cid, req in items)

    async def upload(self, items: Sequence[tuple[str, ChatRequest]]) -> str | None:
        content = self.jsonl(items, self.key())
        obj = await self.call_json("POST", f"{self.base_url}/files", data={"purpose": "batch"},
                                   files={"file": ("lineup-batch.jsonl", content, "application/jsonl")})
        file_id = obj.get("id")
        if not isinstance(file_id, str) or not file_id:
            raise BatchAPIError(ErrorKind.bad_response, "POST /files answered without a file id")
        return file_id

    async def submit(self, items: Sequence[tuple[str, ChatRequest]], tag: str,
                     input_file_id: str | None = None) -> tuple[str, str | None]:
        file_id = input_file_id or await self.upload(items)
        obj = await self.call_json("POST", f"{self.base_url}/batches", json_body={
            "input_file_id": file_id, "endpoint": self.ENDPOINT, "completion_window": "24h",
            "metadata": {"lineup_batch": tag}})
        batch_id = obj.get("id")
        if not isinstance(batch_id, str) or not batch_id:
            raise BatchAPIError(ErrorKind.bad_response, "POST /batches answered without a batch id")
        return batch_id, file_id

    async def find(self, tag: str) -> str | None:
        obj = await self.call_json("GET", f"{self.base_url}/batches?limit=100")
        for b in obj.get("data") or ():
            if isinstance(b, dict) and (b.get("metadata") or {}).get("lineup_batch") == tag:
                found = b.get("id")
                return found if isinstance(found, str) else None
        return None

    async def poll(self, remote_id: str) -> BatchStatus:
        obj = await self.call_json("GET", f"{self.base_url}/batches/{remote_id}")
        status = str(obj.get("status") or "")
        counts = _dict(obj.get("request_counts"))
        state = _OPENAI_STATES.get(status, "running")
        errors = _dict(obj.get("errors")).get("data")
        error = "; ".join(short(str(e.get("message") or e.get("code")), 200) for e in errors
                          if isinstance(e, dict)) if isinstance(errors, list) and errors else None
        total = _count(counts.get("total"))
        done = _count(counts.get("completed")) + _count(counts.get("failed"))
        return BatchStatus(state=state, remote_status=status, counts=counts, error=error, done=done, total=total,
                           raw=obj)

    async def results(self, remote_id: str, status: BatchStatus) -> BatchResults:
        out = BatchResults()
        for name, what in (("output_file_id", "output file"), ("error_file_id", "error file")):
            file_id = status.raw.get(name)
            if isinstance(file_id, str) and file_id:
                body = await self.call("GET", f"{self.base_url}/files/{file_id}/content", limit=MAX_RESULTS_BYTES)
                _lines(body, what, out, self._events)
        return out

    def _events(self, line: dict[str, Any]) -> list[StreamEvent]:
        err = line.get("error")
        resp = line.get("response")
        if isinstance(err, dict) and err:
            code = str(err.get("code") or "error")
            message = short(str(err.get("message") or code))
            kind = ErrorKind.timeout if code == "batch_expired" else ErrorKind.server
            return [_error(kind, f"{message} ({code})" if code not in message else message)]
        if not isinstance(resp, dict):
            return [_error(ErrorKind.bad_response, "a result line with neither a response nor an error")]
        status = resp.get("status_code")
        body = resp.get("body")
        if status != 200:
            text = json.dumps(body) if not isinstance(body, str) else body
            http = status if isinstance(status, int) else 500
            return [_error(kind_for_status(http, text), f"HTTP {http}: {error_message_from_body(text)}", http)]
        from providers.openai import OpenAIParser

        # one whole chat.completion, read as a gateway's whole reply to a stream request is
        try:
            return OpenAIParser().whole_events(body, time.perf_counter())
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
            return [_error(ErrorKind.bad_response, f"an unreadable chat.completion ({short(str(exc), 120)})")]


# --------------------------------------------------------------------------- Anthropic


class AnthropicBatch(BatchClient):
    def protocol_headers(self) -> dict[str, str]:
        from providers.anthropic import ANTHROPIC_VERSION

        return {"anthropic-version": ANTHROPIC_VERSION}

    async def submit(self, items: Sequence[tuple[str, ChatRequest]], tag: str,
                     input_file_id: str | None = None) -> tuple[str, str | None]:
        key = self.key()
        obj = await self.call_json("POST", f"{self.base_url}/v1/messages/batches", json_body={
            "requests": [{"custom_id": cid, "params": self.body(req, key)} for cid, req in items]})
        batch_id = obj.get("id")
        if not isinstance(batch_id, str) or not batch_id:
            raise BatchAPIError(ErrorKind.bad_response, "POST /v1/messages/batches answered without a batch id")
        return batch_id, None

    async def poll(self, remote_id: str) -> BatchStatus:
        obj = await self.call_json("GET", f"{self.base_url}/v1/messages/batches/{remote_id}")
        status = str(obj.get("processing_status") or "")
        counts = _dict(obj.get("request_counts"))
        done = sum(_count(counts.get(k)) for k in ("succeeded", "errored", "canceled", "expired"))
        return BatchStatus(state="ended" if status == "ended" else "running", remote_status=status, counts=counts,
                           done=done, total=done + _count(counts.get("processing")), raw=obj)

    async def results(self, remote_id: str, status: BatchStatus) -> BatchResults:
        url = status.raw.get("results_url")
        if not isinstance(url, str) or not self.same_origin(url):
            url = f"{self.base_url}/v1/messages/batches/{remote_id}/results"
        body = await self.call("GET", url, limit=MAX_RESULTS_BYTES)
        out = BatchResults()
        _lines(body, "results file", out, lambda line: self._events(line.get("result")))
        return out

    def _events(self, result: Any) -> list[StreamEvent]:
        if not isinstance(result, dict):
            return [_error(ErrorKind.bad_response, "a result line without a result")]
        rtype = result.get("type")
        if rtype == "succeeded" and isinstance(result.get("message"), dict):
            from providers.anthropic import AnthropicParser

            try:
                return AnthropicParser().whole_events(result["message"], time.perf_counter())
            except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
                return [_error(ErrorKind.bad_response, f"an unreadable message ({short(str(exc), 120)})")]
        if rtype == "errored":
            err = _dict(_dict(result.get("error")).get("error"))
            etype = str(err.get("type") or "api_error")
            from providers.anthropic import _ERROR_KINDS

            return [_error(_ERROR_KINDS.get(etype, ErrorKind.server),
                           f"{short(str(err.get('message') or etype))} ({etype})")]
        if rtype == "expired":
            return [_error(ErrorKind.timeout, "the batch expired before this request ran (expired)")]
        if rtype == "canceled":
            return [_error(ErrorKind.cancelled, "the batch was cancelled before this request ran")]
        return [_error(ErrorKind.bad_response, f"an unknown result type {short(str(rtype), 40)!r}")]


def batch_client(cfg: ModelConfig, **options: Any) -> BatchClient:
    """The batch API client for a model (ValueError when its provider has none)."""
    if cfg.provider == "anthropic":
        return AnthropicBatch(cfg, **options)
    return OpenAIBatch(cfg, **options)
