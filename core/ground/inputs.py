"""Reading a file the user names, the one way every command does it: sample
sets, request logs, import files and the config all come in through here.

- Only regular files. A FIFO, a device, a socket or a directory is refused
  with what it is, before a byte is read: a FIFO would block until someone
  writes to it, `/dev/zero` never ends. (Opened with O_NONBLOCK, so even the
  open of a FIFO cannot block; the check is on the open file, not the name.)
- Bounded. A file larger than `max_input_bytes()` (1 GiB unless the
  environment variable LINEUP_MAX_INPUT_BYTES says otherwise) is refused, and
  so is a line of a JSONL file over MAX_LINE_BYTES (64 MiB).
- Strict. Text must be UTF-8 (a byte-order mark is dropped); JSON must be
  JSON: NaN, Infinity and numbers beyond the float range are refused, and so
  is nesting deeper than MAX_JSON_DEPTH (100) levels, which nothing we read
  needs and which would otherwise exhaust Python's stack in json, pydantic or
  jsonschema. A lone surrogate written as a JSON escape ("\\ud800") cannot be
  stored or printed as UTF-8: it becomes U+FFFD, as in every other text lineup
  keeps.

Every problem is an `InputError` whose text is `FILE: what is wrong` or
`FILE:LINE: what is wrong`; FILE is shown as `core.ground.text.one_line` shows it,
so a file name cannot carry escape sequences to the terminal.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from typing import Any, BinaryIO

from core.ground.text import one_line

MAX_INPUT_BYTES = 1 << 30          # default for `max_input_bytes()`
MAX_LINE_BYTES = 64 << 20
MAX_JSON_DEPTH = 100
LIMIT_ENV = "LINEUP_MAX_INPUT_BYTES"

_BOM = b"\xef\xbb\xbf"
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class InputError(ValueError):
    """An input file (or one of its lines) that lineup refuses to read."""

    def __init__(self, shown: str, problem: str, line: int | None = None) -> None:
        self.shown, self.problem, self.line = shown, problem, line
        super().__init__(f"{shown}:{line}: {problem}" if line is not None else f"{shown}: {problem}")


def shown_name(path: str | os.PathLike) -> str:
    """A file name as messages show it: one line, no control characters."""
    return one_line(os.fspath(path))


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def max_input_bytes() -> int:
    """The largest input file read: LINEUP_MAX_INPUT_BYTES (bytes) when set, else 1 GiB."""
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return MAX_INPUT_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(LIMIT_ENV, f"must be a whole number of bytes, at least 1 (got {one_line(raw, 40)!r})")
    return value


def _regular(mode: int, shown: str) -> None:
    if stat.S_ISDIR(mode):
        raise InputError(shown, "is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a plain file")
        raise InputError(shown, f"not a regular file (it is {kind}); lineup reads only regular files")


def open_input(path: str | os.PathLike, *, limit: int | None = None) -> BinaryIO:
    """`path` opened for reading bytes, once it is known to be a regular file
    of at most `limit` bytes (default `max_input_bytes()`; 0: no size limit,
    for a database that SQLite reads itself)."""
    shown = shown_name(path)
    if limit is None:
        limit = max_input_bytes()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(shown, "no such file") from None
    except IsADirectoryError:
        raise InputError(shown, "is a directory, not a file") from None
    except OSError as exc:   # a socket cannot even be opened (ENXIO): say what it is
        try:
            _regular(os.stat(path).st_mode, shown)
        except OSError:
            pass
        raise InputError(shown, f"cannot read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        _regular(st.st_mode, shown)
        if limit and st.st_size > limit:
            raise InputError(shown, f"{_size(st.st_size)}, more than the {_size(limit)} lineup reads "
                                    f"(set {LIMIT_ENV} to allow more)")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: str | os.PathLike, *, limit: int | None = None) -> bytes:
    """The whole file, bounded as `open_input` bounds it (also if it grows while read)."""
    if limit is None:
        limit = max_input_bytes()
    with open_input(path, limit=limit) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputError(shown_name(path), f"more than the {_size(limit)} lineup reads (it grew while read; "
                                           f"set {LIMIT_ENV} to allow more)")
    return data


def decode(data: bytes, shown: str, line: int | None = None) -> str:
    """Strict UTF-8 (a leading byte-order mark dropped). For a whole file
    (`line` None) an error names the line the bad byte is on."""
    if data.startswith(_BOM):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if line is None:
            start = data.rfind(b"\n", 0, exc.start) + 1
            raise InputError(shown, f"not UTF-8 text (byte {exc.start - start + 1} of the line)",
                             data.count(b"\n", 0, exc.start) + 1) from None
        raise InputError(shown, f"not UTF-8 text (byte {exc.start + 1})", line) from None


def lines(f: BinaryIO | io.BufferedIOBase, shown: str, *, max_line: int = MAX_LINE_BYTES
          ) -> Iterator[tuple[int, bytes | InputError]]:
    """(line number, the line's bytes without its end) for each line of `f`,
    or (line number, InputError) for a line longer than `max_line`, whose
    bytes are skipped without being kept. Line 1 loses a byte-order mark."""
    lineno = 0
    while True:
        raw = f.readline(max_line + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > max_line and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):      # skip the rest of the line
                raw = f.readline(1 << 20)
            yield lineno, InputError(shown, f"line longer than {_size(max_line)}", lineno)
            continue
        if lineno == 1 and raw.startswith(_BOM):
            raw = raw[3:]
        yield lineno, raw.rstrip(b"\n").removesuffix(b"\r")


def text_lines(f: BinaryIO | io.BufferedIOBase, shown: str) -> Iterator[str]:
    """The lines of a text file, each with its end (`\n`, `\r\n` or a lone
    `\r`, as `newline=""` splits them: what the csv module reads), decoded as
    strict UTF-8 line by line, so that a bad byte is named by its line
    (`FILE:LINE`) and its place in that line. Line 1 loses a byte-order mark."""
    lineno = 0
    for raw in f:
        for piece in raw.splitlines(keepends=True):   # bytes split on \n, \r\n and \r only
            lineno += 1
            if lineno == 1 and piece.startswith(_BOM):
                piece = piece[3:]
            try:
                yield piece.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(shown, f"not UTF-8 text (byte {exc.start + 1} of the line)", lineno) from None


def split_lines(data: bytes, shown: str, *, max_line: int = MAX_LINE_BYTES
                ) -> Iterator[tuple[int, bytes | InputError]]:
    """`lines` over bytes already read."""
    return lines(io.BytesIO(data), shown, max_line=max_line)


# ---------------------------------------------------------------------- JSON

class _Refused(ValueError):
    pass


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {one_line(text, 40)} is beyond the range of a float")
    return value


_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_constant)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def _deeper_than(obj: Any, limit: int) -> bool:
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def _deep_line(text: str, limit: int) -> int:
    """The line of `text` on which its nesting first passes `limit` (strings skipped)."""
    depth, line, pos = 0, 1, 0
    blanked = _STRING.sub('""', text)   # a JSON string holds no raw newline, so lines are kept
    for m in _BRACKET.finditer(blanked):
        depth += 1 if m.group() in "[{" else -1
        if depth > limit:
            return line + blanked.count("\n", pos, m.start())
        line += blanked.count("\n", pos, m.start())
        pos = m.start()
    return line


def _first_non_finite(obj: Any) -> str | None:
    """The path (`votes[0].created`) of the first NaN or infinite number in
    `obj`, in the document's order; None if there is none."""
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path or "the value"
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None


def _without_surrogates(obj: Any) -> Any:
    """`obj` with every lone surrogate in its strings (keys too) as U+FFFD."""
    def fix(s: str) -> str:
        return _LONE_SURROGATE.sub("\ufffd", s) if _LONE_SURROGATE.search(s) else s

    if isinstance(obj, str):
        return fix(obj)
    stack = [obj] if isinstance(obj, (dict, list)) else []
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            for i, child in enumerate(value):
                if isinstance(child, str):
                    value[i] = fix(child)
                elif isinstance(child, (dict, list)):
                    stack.append(child)
        else:
            items = [(fix(k), fix(v) if isinstance(v, str) else v) for k, v in value.items()]
            value.clear()
            value.update(items)
            stack.extend(v for _, v in items if isinstance(v, (dict, list)))
    return obj


def loads(text: str, shown: str, line: int | None = None, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """One JSON value, strictly (see the module's doc). `line`: the line it
    came from (a JSONL line); None for a whole file, whose problems are then
    located by their own line."""
    def refuse(problem: str, at: int | None, column: int | None = None) -> InputError:
        where = line if line is not None else at
        if column is not None and line is not None:
            problem += f" (column {column})"
        return InputError(shown, problem, where)

    too_deep = f"nested deeper than {max_depth} levels"
    try:
        obj = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise refuse(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise refuse(too_deep, _deep_line(text, max_depth)) from None
    except _Refused as exc:
        where = _first_non_finite(json.loads(text))   # the same text, NaN allowed: which field was it?
        raise refuse(f"{where}: {exc}" if where else f"invalid JSON: {exc}", None) from None
    except ValueError as exc:   # e.g. an integer of more than 4300 digits
        raise refuse(f"invalid JSON: {one_line(exc, 200)}", None) from None
    # Only a text with more brackets than the limit can be nested beyond it.
    if text.count("[") + text.count("{") > max_depth and isinstance(obj, (dict, list)) \
            and _deeper_than(obj, max_depth):
        raise refuse(too_deep, _deep_line(text, max_depth))
    if _SURROGATE_ESCAPE.search(text):
        obj = _without_surrogates(obj)
    return obj
