"""Reading JSONL the same way everywhere: one JSON object per line, blank
lines skipped, a UTF-8 byte-order mark on line 1 dropped, and every problem
named as `FILE:LINE: what is wrong`. Lines and values are read as
`core.ground.inputs` reads them: bounded in length and depth, strictly decoded."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from core.ground.inputs import InputError, decode, loads


def json_objects(lines: Iterable[tuple[int, bytes | InputError]], shown: str, what: str = "a line"
                 ) -> Iterator[tuple[int, str, dict | None, str | None]]:
    """(line number, "FILE:LINE", object, None) for each line holding a JSON
    object, or (line number, "FILE:LINE", None, problem) for one that does not.
    `lines` is what `core.ground.inputs.lines` (or `split_lines`) gives; `shown` is
    the file as messages name it (`core.ground.inputs.shown_name`). The caller
    decides whether a problem stops it or is collected."""
    for lineno, raw in lines:
        where = f"{shown}:{lineno}"
        if isinstance(raw, InputError):
            yield lineno, where, None, str(raw)
            continue
        try:
            line = decode(raw, shown, lineno)
            if not line.strip():
                continue
            obj = loads(line, shown, lineno)
        except InputError as exc:
            yield lineno, where, None, str(exc)
            continue
        if not isinstance(obj, dict):
            yield lineno, where, None, f"{where}: {what} must be a JSON object, not {type(obj).__name__}"
            continue
        yield lineno, where, obj, None
