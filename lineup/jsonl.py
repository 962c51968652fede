"""Reading JSONL the same way everywhere: one JSON object per line, blank
lines skipped, a UTF-8 byte-order mark on line 1 dropped, and every problem
named as `FILE:LINE: what is wrong`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator


def json_objects(lines: Iterable[bytes], shown: str, what: str = "a line"
                 ) -> Iterator[tuple[int, str, dict | None, str | None]]:
    """(line number, "FILE:LINE", object, None) for each line holding a JSON
    object, or (line number, "FILE:LINE", None, problem) for one that does not.
    The caller decides whether a problem stops it or is collected."""
    for lineno, raw in enumerate(lines, start=1):
        where = f"{shown}:{lineno}"
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield lineno, where, None, f"{where}: not UTF-8 text (byte {exc.start + 1})"
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield lineno, where, None, f"{where}: invalid JSON: {exc.msg} (column {exc.colno})"
            continue
        if not isinstance(obj, dict):
            yield lineno, where, None, f"{where}: {what} must be a JSON object, not {type(obj).__name__}"
            continue
        yield lineno, where, obj, None
