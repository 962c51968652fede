"""What every protocol's parser shares: `StreamParser` (body bytes into
events, a stream or one whole JSON body, and the errors it reports), the
helpers for the text a server sends back (scrubbed of secrets, bounded,
quoted), the status and `retry-after` rules. `providers/http.py` runs the
request loop around it; each protocol module subclasses `StreamParser`."""

from __future__ import annotations

import email.utils
import json
import re
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import httpx

from providers.events import (
    SERVED_LIMIT,
    ErrorKind,
    Finish,
    ServedBy,
    StreamError,
    StreamEvent,
    UsageReport,
)
from providers.secrets import scrubber_for


_MESSAGE_LIMIT = 300
#: Bytes of a body quoted when it is not the protocol's (`StreamParser.not_the_protocol`).
_HEAD_BYTES = 120
_SPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"


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
