"""Writing an output file so that it is either the old file or the whole new
one, and so that a process killed while writing leaves nothing behind.

On Linux the text goes into an unnamed file (O_TMPFILE) in the target's
folder: killed, the kernel frees it. Finished, it is given a temporary name
(`.NAME.PID.tmp`) and renamed over the target, two steps of microseconds.
Elsewhere (or on a filesystem without O_TMPFILE) the temporary file is named
from the start. Either way, a `.NAME.PID.tmp` whose process no longer runs
(left by a kill in those microseconds, on the fallback path, or by an older
lineup) is removed the next time that NAME is written.

The text may come as one string or as an iterable of strings (an export
streamed page by page): it is encoded and written as it comes, in pieces of
about a megabyte, so a large output is never held whole."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["write_stdout", "write_text_atomic"]

# O_TMPFILE unsupported by the filesystem or kernel: use a named temporary file.
_NO_TMPFILE = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT}


def _temp_name(target: Path, pid: int) -> Path:
    return target.with_name(f".{target.name}.{pid}.tmp")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:   # exists, another user's: alive
        return True
    return True


def remove_stale_temps(target: Path) -> list[Path]:
    """Remove `.NAME.PID.tmp` files beside `target` whose PID no longer runs."""
    prefix = f".{target.name}."
    removed: list[Path] = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid = name[len(prefix):-len(".tmp")]
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        try:
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_PIECE = 1 << 20


def _encoded(text: str | Iterable[str]) -> Iterator[bytes]:
    """`text` as UTF-8 bytes ("replace" for lone surrogates: exports are UTF-8
    files, whatever the locale), in pieces of about `_PIECE` characters."""
    if isinstance(text, str):
        yield text.encode("utf-8", "replace")
        return
    parts: list[str] = []
    size = 0
    for part in text:
        parts.append(part)
        size += len(part)
        if size >= _PIECE:
            yield "".join(parts).encode("utf-8", "replace")
            parts, size = [], 0
    if parts:
        yield "".join(parts).encode("utf-8", "replace")


def _write_pieces(fd: int, text: str | Iterable[str]) -> None:
    for data in _encoded(text):
        _write_all(fd, data)


def write_stdout(text: str | Iterable[str]) -> None:
    """Write `text` (a string or its pieces) to standard output, all of it or
    an OSError: Python's buffered stream can report a large write as done when
    the disk filled or the reader left half way, losing the rest; the file
    descriptor cannot."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):   # not a real file (captured in tests)
        for part in ([text] if isinstance(text, str) else text):
            stream.write(part)
        stream.flush()
        return
    stream.flush()
    _write_pieces(fd, text)


def write_text_atomic(target: str | os.PathLike, text: str | Iterable[str]) -> None:
    """Write `text` (UTF-8; a string or its pieces) to `target`, replacing it
    in one rename. Raises OSError (disk full, no permission...) with nothing
    of the new text left; an exception from the pieces leaves nothing either."""
    target = Path(target)
    remove_stale_temps(target)
    temp = _temp_name(target, os.getpid())
    if not (hasattr(os, "O_TMPFILE") and _unnamed(target, text, temp)):
        _named(text, temp)
    try:
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _unnamed(target: Path, text: str | Iterable[str], temp: Path) -> bool:
    """Write into an O_TMPFILE file, then name it `temp` (or, without a /proc
    to name it through, copy it to `temp`); False where the filesystem does
    not allow such a file (nothing of `text` read then)."""
    try:
        fd = os.open(target.parent, os.O_TMPFILE | os.O_RDWR, 0o666)
    except OSError as exc:
        if exc.errno in _NO_TMPFILE:
            return False
        raise
    try:
        _write_pieces(fd, text)
        temp.unlink(missing_ok=True)   # our own pid's name: a leftover of a process before us
        try:
            os.link(f"/proc/self/fd/{fd}", temp, follow_symlinks=True)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EXDEV, errno.EPERM, errno.ENOTDIR):
                raise
            _copy(fd, temp)   # no /proc to name it through: copied (the text is read only once)
    finally:
        os.close(fd)
    return True


def _copy(fd: int, temp: Path) -> None:
    """What `fd` holds, from its start, into a new file named `temp`."""
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            while data := os.read(fd, _PIECE):
                _write_all(out, data)
        finally:
            os.close(out)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _named(text: str | Iterable[str], temp: Path) -> None:
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            _write_pieces(fd, text)
        finally:
            os.close(fd)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
