"""Which process owns something the database records (a streaming answer,
a claimed unit of a run, an import's work folder): a token naming the host,
the pid and the process's start time, and whether that process still runs.
Apart from `store/db.py` because the importer and the runs share it."""

from __future__ import annotations

import os
import socket
import time

#: an owner on another host (whose process cannot be asked) counts as alive
#: for this long after its claim
STALE_AFTER_S = 600.0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def process_token() -> str:
    """host:pid:start for this process; the start time (Linux) tells a reused pid apart."""
    return f"{socket.gethostname()}:{os.getpid()}:{start_time(os.getpid())}"


def start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner_alive(owner: str, claimed: float | None, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether the process named by a `process_token()` still runs."""
    host, _, rest = owner.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return claimed is not None and time.time() - claimed < stale_after_s
    if not pid_alive(int(pid)):
        return False
    return not start or start == start_time(int(pid)) or not start_time(int(pid))
