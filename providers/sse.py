"""Incremental decoders for the three streamed body formats, fed raw bytes as
they arrive from the network (chunk boundaries anywhere: inside a line, a
CRLF pair, a multi-byte UTF-8 character or a JSON value).

- `SSEDecoder`: text/event-stream per the WHATWG rules (comments, CR / LF /
  CRLF, multi-line `data:`, `event:` names, one optional space after the colon,
  unknown fields and field names with a leading space ignored, an unfinished
  event at end of stream dropped).
- `NDJSONDecoder`: one JSON value per line (Ollama `/api/chat`).
- `JSONArrayDecoder`: one JSON array streamed element by element (Gemini
  `streamGenerateContent` without `alt=sse`).

Every decoder raises `DecodeError` on bytes that are not its format (invalid
UTF-8, malformed JSON); the provider layer turns that into `bad_response`.
Lines are split on bytes and decoded once per chunk, which keeps the hot path
to a few C-level calls per network read.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

__all__ = ["DecodeError", "SSEDecoder", "NDJSONDecoder", "JSONArrayDecoder", "loads", "malformed_json"]

_json_loads = json.loads
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__; typeshed lacks it


def loads(text: str) -> Any:
    """`json.loads` for one complete value, ~40% faster on the hot path (the C
    scanner called directly); anything unusual goes through `json.loads`, which
    also gives the precise error."""
    try:
        obj, end = _scan(text, 0)
    except (StopIteration, ValueError):
        return _json_loads(text)
    if end != len(text) and not text[end:].isspace():
        return _json_loads(text)   # raises: extra data
    return obj


_loads = loads


class DecodeError(ValueError):
    """The body is not the format it claims to be (short, safe message)."""


def malformed_json(what: str, exc: ValueError, text: str) -> DecodeError:
    """The error for `text` (the JSON of `what`) that `json.loads` refused."""
    why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)   # e.g. an integer of 5,000 digits
    return DecodeError(f"malformed JSON in {what}: {why} (near {text[:60]!r})")


def _take_lines(buf: list[bytes], chunk: bytes) -> bytes | None:
    """The complete lines that `chunk` ends (up to its last LF, without it),
    joined to the unfinished line held in `buf`, which keeps what follows; None
    while no line ends (`chunk` is held). Only the new chunk is searched, so a
    long line costs linear time however finely it is chunked."""
    cut = chunk.rfind(b"\n")
    if cut < 0:
        if chunk:
            buf.append(chunk)
        return None
    if buf:
        buf.append(chunk[:cut])
        head = b"".join(buf)
        buf.clear()
    else:
        head = chunk[:cut]
    if cut + 1 < len(chunk):
        buf.append(chunk[cut + 1:])
    return head


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in response body at byte {exc.start} of a line") from None


class SSEDecoder:
    """`feed(bytes) -> [(event_name, data)]` for every event completed so far.

    `event_name` is "message" when the event had no `event:` field. Comments
    (`: OPENROUTER PROCESSING`) and events with no `data:` are not reported.
    `pending` tells whether an unfinished event was left at end of stream.
    """

    __slots__ = ("_buf", "_skip_lf", "_event", "_data", "_started")

    def __init__(self) -> None:
        self._buf: list[bytes] = []   # an unfinished line, in the pieces it came in (no CR or LF inside)
        self._skip_lf = False      # last chunk ended in CR: a leading LF now is part of that CRLF
        self._event = ""
        self._data: list[str] = []
        self._started = False      # BOM check done

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        if not chunk:
            return []
        if (chunk[-2:] == b"\n\n" and self._started and not self._buf and not self._data and not self._event
                and not self._skip_lf and b"\r" not in chunk):
            # Fast path: one whole event in one chunk ("data: ...", maybe after "event: ...").
            text = _decode(chunk)
            nl = text.find("\n")
            end = len(text) - 2
            if nl == end and text.startswith("data: "):
                return [("message", text[6:end])]
            if text.startswith("event: ") and text.startswith("data: ", nl + 1) and text.find("\n", nl + 1) == end:
                return [(text[7:nl] or "message", text[nl + 7:end])]
            return self._lines(text[:-1])
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if not chunk:
                    return []
        # Only the new chunk is searched and folded: what is buffered holds no line
        # end, so a long line costs linear time however finely it is chunked.
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":
                self._skip_lf = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        head = _take_lines(self._buf, chunk)
        return [] if head is None else self._lines(_decode(head))

    def _lines(self, text: str) -> list[tuple[str, str]]:
        """Process complete lines (`text`, LF-separated, CR already folded)."""
        if not self._started:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        out: list[tuple[str, str]] = []
        data = self._data
        for line in text.split("\n"):
            if not line:
                if data:
                    out.append((self._event or "message", data[0] if len(data) == 1 else "\n".join(data)))
                    data = self._data = []
                self._event = ""
                continue
            if line[0] == ":":
                continue
            # Fast path for the overwhelmingly common "data: ..." line.
            if line.startswith("data:"):
                value = line[5:]
                data.append(value[1:] if value[:1] == " " else value)
                continue
            field, sep, value = line.partition(":")
            if sep and value[:1] == " ":
                value = value[1:]
            if field == "event":
                self._event = value
            elif field == "data":   # "data" with no colon: an empty data line
                data.append(value)
            # id, retry and unknown fields (including " data") are ignored.
        return out

    @property
    def pending(self) -> bool:
        """True if bytes or an undispatched event remain (the stream was cut)."""
        return bool(any(p.strip() for p in self._buf) or self._data)


class NDJSONDecoder:
    """`feed(bytes) -> [parsed JSON value]` for every complete non-blank line."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf: list[bytes] = []   # an unfinished line, in pieces (linear however it is chunked)

    def feed(self, chunk: bytes) -> list[Any]:
        head = _take_lines(self._buf, chunk)
        if head is None:
            return []
        out = []
        for line in _decode(head).split("\n"):
            if line and not line.isspace():
                out.append(_parse(line))
        return out

    def close(self) -> list[Any]:
        """A last line without a newline still counts if it is whole JSON."""
        rest, self._buf = b"".join(self._buf), []
        text = _decode(rest).strip()
        return [_parse(text)] if text else []

    @property
    def pending(self) -> bool:
        return any(p.strip() for p in self._buf)


def _parse(text: str) -> Any:
    try:
        return _loads(text)
    except ValueError as exc:
        raise malformed_json("response", exc, text) from None


_STRUCT = re.compile(r'[{}\[\]"]')
_IN_STRING = re.compile(r'["\\]')
_WS = " \t\r\n"


class JSONArrayDecoder:
    """`feed(bytes) -> [element]` for each array element completed so far.

    A cheap scanner tracks bracket nesting and string state to find where each
    element ends (linear in the body, however it is chunked), then parses the
    element once. `closed` becomes True at the array's `]`.
    (An element spanning chunks is kept as scanned pieces, never re-copied.)
    """

    __slots__ = ("_dec", "_text", "_pos", "_stack", "_in_str", "_esc", "_start", "_parts", "_opened", "closed")

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")("strict")
        self._text = ""
        self._pos = 0          # where scanning resumes in _text
        self._stack: list[str] = []   # the closers expected, innermost last
        self._in_str = False
        self._esc = False      # a backslash ended the previous chunk inside a string
        self._start = -1       # start of the element being scanned, -1 between elements
        self._parts: list[str] = []   # the scanned start of an element that spans chunks
        self._opened = False
        self.closed = False

    def feed(self, chunk: bytes) -> list[Any]:
        try:
            new = self._dec.decode(chunk)
        except UnicodeDecodeError as exc:
            raise DecodeError(f"invalid UTF-8 in response body ({exc.reason})") from None
        if self.closed:
            if new.strip():
                raise DecodeError("data after the end of the JSON array")
            return []
        text = self._text + new
        pos = self._pos
        out: list[Any] = []
        n = len(text)
        while pos < n:
            if self._start < 0:
                # Between elements: whitespace, '[', ',' or ']'.
                c = text[pos]
                if c in _WS:
                    pos += 1
                    continue
                if not self._opened:
                    if c != "[":
                        raise DecodeError(f"expected a JSON array, got {text[pos:pos + 40]!r}")
                    self._opened = True
                    pos += 1
                    continue
                if c == ",":
                    pos += 1
                    continue
                if c == "]":
                    self.closed = True
                    if text[pos + 1:].strip():
                        raise DecodeError("data after the end of the JSON array")
                    text, pos = "", 0
                    break
                if c != "{" and c != "[":
                    raise DecodeError(f"unexpected {text[pos:pos + 40]!r} in JSON array stream")
                # Fast path: the whole element is already here (the usual case), so the C
                # scanner parses it in one go. If it is incomplete, scan it incrementally.
                try:
                    obj, end = _scan(text, pos)
                except (StopIteration, ValueError):
                    pass
                else:
                    out.append(obj)
                    pos = end
                    continue
                self._start = pos
            if self._esc:
                self._esc = False
                pos += 1
                continue
            if self._in_str:
                m = _IN_STRING.search(text, pos)
                if m is None:
                    pos = n
                    break
                if m.group() == "\\":
                    pos = m.end() + 1
                    if pos > n:
                        self._esc = True
                        pos = n
                else:
                    self._in_str = False
                    pos = m.end()
                continue
            m = _STRUCT.search(text, pos)
            if m is None:
                pos = n
                break
            c = m.group()
            pos = m.end()
            if c == '"':
                self._in_str = True
            elif c == "{":
                self._stack.append("}")
            elif c == "[":
                self._stack.append("]")
            else:
                if not self._stack or self._stack.pop() != c:
                    raise DecodeError(f"malformed JSON in array element: unexpected {c!r} "
                                      f"(near {text[max(self._start, pos - 40):pos]!r})")
                if not self._stack:
                    if self._parts:
                        self._parts.append(text[self._start:pos])
                        element, self._parts = "".join(self._parts), []
                    else:
                        element = text[self._start:pos]
                    out.append(_parse(element))
                    self._start = -1
                    # Drop what is consumed so the buffer stays small.
                    text, pos, n = text[pos:], 0, n - pos
        if self._start >= 0:
            # An element spans chunks: keep what is scanned as a piece, joined once
            # at its end (a huge element costs linear time however it is chunked).
            self._parts.append(text[self._start:pos])
            text, pos = text[pos:], 0
            self._start = 0
        else:
            text, pos = text[pos:], 0
        self._text, self._pos = text, pos
        return out

    @property
    def pending(self) -> bool:
        return not self.closed
