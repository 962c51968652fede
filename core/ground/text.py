"""Untrusted text made inert, wherever it goes: the one place that decides how.

Model answers, error bodies, imported model names, file names, case ids and
log values can all hold escape sequences, bidi overrides or formula prefixes.
Nothing of ours interprets them; these functions decide how they are shown:

- on a screen (`neutralise`, `one_line`): each control character becomes a
  visible stand-in ("␛" for ESC, "␇" for BEL, U+FFFD for C1 controls, bidi
  overrides and lone surrogates), so `\\x1b[31m` shows as `␛[31m`;
- in a file a person opens later (`escape_controls` and the Markdown, HTML
  and CSV forms built on it): `\\x1b`-style escapes that a reader can decode
  and that neither `cat` nor a spreadsheet acts on.

Stateless per character, so stream deltas can be neutralised one by one.
Rich/Textual markup is never involved here: callers build `Text` objects, not
markup strings, from what these return.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from datetime import datetime, timezone

from store.bounds import time_ok

__all__ = ["SERVER_FIELD_LIMIT", "SERVER_MESSAGE_LIMIT", "server_text", "format_time", "neutralise", "one_line", "shows_as_is_on_one_line", "escape_controls", "markdown_inline", "html_text", "csv_cell",
           "json_line"]

# Bidi marks, embeddings, overrides and isolates: they reorder what follows.
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))


def _screen_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for code in range(0x20):
        if code not in (0x09, 0x0A):
            table[code] = chr(0x2400 + code)  # control pictures: ESC -> "␛", NUL -> "␀", BEL -> "␇"
    table[0x7F] = "\u2421"  # DEL -> "␡"
    for code in (*range(0x80, 0xA0), *_BIDI, *range(0xD800, 0xE000)):
        table[code] = "\ufffd"  # C1 controls (0x9B is a one-byte CSI), bidi, lone surrogates
    table[0x2028] = "\n"  # line / paragraph separators: treat as newlines
    table[0x2029] = "\n"
    return table


def _class(codes: object) -> re.Pattern[str]:
    return re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(codes)) + "]")  # type: ignore[call-overload]


_SCREEN = _screen_table()
_SCREEN_RE = _class(_SCREEN)
_LINE = {**_SCREEN, 0x09: " ", 0x0A: " ", 0x2028: " ", 0x2029: " "}
_LINE_RE = _class(_LINE)
_LINE_TABLES = {1: _LINE, 4: {**_LINE, 0x09: "    "}}

# In files: C0 (tab and newline kept when asked: a raw CR could hide what
# precedes it on the line), DEL, C1, bidi,
# line separators and lone surrogates become escapes.
_FILE_CODES = {*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI, 0x2028, 0x2029, *range(0xD800, 0xE000)}
_FILE_RE = _class(_FILE_CODES)
_FILE_KEEP_RE = _class(_FILE_CODES - {0x09, 0x0A})


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def neutralise(text: str) -> str:
    """For a screen: keeps newlines and tabs, shows every other control,
    bidi or surrogate character as a visible stand-in."""
    if _SCREEN_RE.search(text) is None:
        return text
    return text.translate(_SCREEN)


def shows_as_is_on_one_line(text: str) -> bool:
    """True when `one_line` would leave `text` unchanged (the fast path of a
    renderer that checks a whole line of segments at once)."""
    return _LINE_RE.search(text) is None


def one_line(text: object, limit: int | None = None, *, tab_width: int = 1) -> str:
    """For one line of a screen (a title, a table cell, a progress line, a
    rendered segment): `neutralise`, with newlines as spaces and a tab as
    `tab_width` spaces, cut to `limit` with "…"."""
    s = str(text)
    if _LINE_RE.search(s) is not None:
        table = _LINE_TABLES.get(tab_width) or {**_LINE, 0x09: " " * tab_width}
        s = s.translate(table)
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    return s


def escape_controls(text: object, keep_newlines: bool = True) -> str:
    """For a file: control, bidi and surrogate characters as `\\xNN` /
    `\\uNNNN` escapes; tabs and newlines kept unless `keep_newlines` is off."""
    s = "" if text is None else str(text)
    return (_FILE_KEEP_RE if keep_newlines else _FILE_RE).sub(_escape, s)


#: The most characters a field a server names kept: a model id, a fingerprint, a
#: finish reason, a tool call's name or id, a batch's status or count name.
SERVER_FIELD_LIMIT = 200
#: The most characters of an error message a server's text went into.
SERVER_MESSAGE_LIMIT = 2000


def server_text(value: object, scrub: Callable[[str], str] | None = None,
                limit: int = SERVER_FIELD_LIMIT) -> str:
    """What a string a server sent may become before it is stored, every field
    of every protocol alike (`core.answering.recording.server_fields` applies it): scrubbed
    of the session's secrets by `scrub` (`providers.secrets`: any run of 8 of a
    secret's characters, across whitespace), its control, bidi and surrogate
    characters as `\\x1b`-style escapes (on one line), cut to `limit` with "…".
    Scrubbed before the escapes, so a secret split by a line break is found;
    the text is cut to a few times `limit` first, so a huge value costs little."""
    s = value if isinstance(value, str) else str(value)
    if len(s) > 4 * limit + 64:
        s = s[:4 * limit + 64]
    if scrub is not None and s:
        s = scrub(s)
    s = escape_controls(s, keep_newlines=False)
    return s if len(s) <= limit else s[:max(limit - 1, 0)] + "…"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")


def markdown_inline(text: object) -> str:
    """Markdown-inert text for one line or a table cell: no markup, no pipes,
    no newlines, no HTML."""
    return _MD_SPECIAL.sub(r"\\\1", escape_controls(text, keep_newlines=False))


def html_text(text: object) -> str:
    """Text for HTML (element content or a quoted attribute)."""
    return html.escape(escape_controls(text, keep_newlines=False), quote=True)


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: controls escaped, and text
    starting with = + - @ (a formula) gets a leading '."""
    if not isinstance(value, str):
        return value
    value = escape_controls(value)
    if value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


# What json.dumps(ensure_ascii=False) leaves raw but a terminal could act on.
_JSON_RAW = re.compile("[\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def json_line(obj: object) -> str:
    """Compact JSON on one line, readable Unicode, no raw DEL, C1, bidi or
    surrogate characters (json.dumps escapes C0 itself). A NaN or infinity
    (a bad stored number) is written as null: the line stays valid JSON."""
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), ensure_ascii=False, separators=(",", ":"))
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(obj: object) -> object:
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def format_time(ts: float | None, fmt: str = "%Y-%m-%dT%H:%M:%SZ", *, utc: bool = True) -> str:
    """`ts` formatted, "" for None; a time outside 1990..2200 (or one that
    cannot be formatted at all) as its raw number, never an exception."""
    if ts is None:
        return ""
    if not time_ok(ts):
        return repr(ts) if isinstance(ts, float) else str(ts)
    try:
        when = datetime.fromtimestamp(ts, timezone.utc) if utc else datetime.fromtimestamp(ts)
        return when.strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return repr(ts)
