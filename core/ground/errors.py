"""What can go wrong, as the command line reports it: one ground-floor module
so that the core, the TUI and the commands name failures the same way without
importing the command line.

Exit codes: 0 done, 1 a runtime failure (a database that fails under us, a
model that failed every request), 2 bad usage or input (reported in one line
naming the file, line or field), 130 interrupted, 141 standard output closed
by its reader; `lineup gate` exits 3 when the candidate regressed."""

from __future__ import annotations

import sys
from typing import TypeVar

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
#: `lineup gate`: the candidate run regressed significantly (CI fails the change).
EXIT_REGRESSED = 3
EXIT_INTERRUPTED = 130
# Standard output closed by its reader (`lineup sessions --json | head -1`):
# stop quietly with the status a shell gives a command killed by SIGPIPE.
EXIT_CLOSED_PIPE = 141


_E = TypeVar("_E", bound=BaseException)


class UsageError(Exception):
    """Bad usage or bad input: printed as one clear line, exit code 2."""


def found_in(exc: BaseException, kind: type[_E]) -> _E | None:
    """`exc` if it is a `kind`, or the first `kind` inside an exception group
    (a task group raises its tasks' errors as a group)."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = found_in(inner, kind)
            if found is not None:
                return found
    return None


def store_error_in(exc: BaseException) -> BaseException | None:
    """The `store.StoreError` in `exc` (itself, or inside an exception group),
    else None. Looked up without importing the store: a command that never
    opened one cannot have failed in it."""
    db = sys.modules.get("store.db")
    return None if db is None else found_in(exc, db.StoreError)
