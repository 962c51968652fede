"""ULIDs: sortable by creation time and unique across machines, so that
records from several people's databases merge without collisions.

Within one process they are also monotonic (the ULID spec's monotonic mode):
two ids made in the same millisecond sort in the order they were made, so a
query that orders by id reads rows back in the order they were written."""

from __future__ import annotations

import hashlib
import os
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_RANDOM_MAX = (1 << 80) - 1
_lock = threading.Lock()
_last_ms = -1
_last_random = 0


def _encode(value: int) -> str:
    out = []
    for _ in range(26):
        out.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(out))


def new_ulid(now_ms: int | None = None) -> str:
    """A 26-character ULID: 48-bit millisecond timestamp + 80 random bits.

    With `now_ms` given (synthetic records) the id is for that time and does
    not take part in the ordering. Otherwise an id made in the same
    millisecond as the previous one (or after the clock stepped back) is the
    previous one plus one, so ids never sort before one made earlier."""
    global _last_ms, _last_random
    if now_ms is not None:
        return _encode((now_ms << 80) | int.from_bytes(os.urandom(10), "big"))
    ms = int(time.time() * 1000)
    with _lock:
        if ms <= _last_ms:
            ms = _last_ms
            rnd = _last_random + 1
            if rnd > _RANDOM_MAX:        # 2**80 ids in one millisecond: move to the next
                ms, rnd = ms + 1, int.from_bytes(os.urandom(10), "big") >> 1
        else:
            rnd = int.from_bytes(os.urandom(10), "big") >> 1   # room to count up within the ms
        _last_ms, _last_random = ms, rnd
    return _encode((ms << 80) | rnd)


def derived_ulid(ms: int, key: str) -> str:
    """A ULID whose random part comes from `key`: the same record gets the same
    id on every import (Arena battles, the votes of a vote package)."""
    ms = max(0, min(int(ms), (1 << 48) - 1))
    return _encode((ms << 80) | int.from_bytes(hashlib.sha256(key.encode()).digest()[:10], "big"))
