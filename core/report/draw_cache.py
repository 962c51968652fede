"""The bootstrap's rounds kept between reports: a report (or a decision) on
votes that have not changed reads its 1,000 fitted rounds back instead of
drawing and fitting them again.

Why: on 100k votes the draws and fits of the whole and of each category are
most of a report's CPU, and the same votes give the same rounds: they are a
function of the votes' patterns, the seed, the rounds asked for and the code
(`core.stats.ratings.draws_key` hashes all of them, this file's code and
numpy's version included). So an entry is never stale; a change anywhere is
a miss, and the rounds are drawn as before.

Kept in `<user cache dir>/lineup/draws/`, a file per key, made 0600 in a 0700
folder: the database is never written (a report opens it read-only). Each
file is signed with the user's digest key (`store.digest_keys`): with no key
(no command has written as this user) nothing is kept. A file that is not
signed with it as it is, or whose length, shape or values are off, is
ignored, and the next report replaces it. At most `MAX_ENTRIES` files and
`MAX_BYTES` are kept (the least recently used go first); the folder can be
deleted at any time.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import time
from pathlib import Path

import numpy as np

from store.digest_keys import Key, key

FORMAT = 1
MAGIC = b"LNB" + bytes([FORMAT])
MAC_BYTES = 32
HEADER_BYTES = len(MAGIC) + 8 + MAC_BYTES + 8     # MAGIC, key id, MAC, (rounds, models) as 2 x u32
SUFFIX = ".draws"
#: The most values one entry holds (32 MB); larger draws are not kept.
MAX_VALUES = 4_000_000
#: Files and bytes kept; past either, the least recently used are removed down to the second.
MAX_ENTRIES, KEEP = 256, 192
MAX_BYTES, KEEP_BYTES = 256 * 2 ** 20, 192 * 2 ** 20
#: A partly written file (a process killed while writing) older than this is removed.
STALE_PART_S = 600.0


def folder() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("lineup", appauthor=False)) / "draws"


def open_draw_cache() -> DrawCache | None:
    """The user's cache, or None when there is no digest key to sign with."""
    k = key()
    return DrawCache(folder(), k) if k is not None else None


class DrawCache:
    """`core.stats.ratings.DrawStore` on files. Best effort: a file that
    cannot be read or written costs the draws' time, never a figure."""

    def __init__(self, where: Path, k: Key):
        self.where, self._key = where, k

    def _path(self, lookup: bytes) -> Path:
        return self.where / (lookup.hex() + SUFFIX)

    def _mac(self, lookup: bytes, body: memoryview | bytes) -> bytes:
        h = hashlib.blake2b(key=self._key.secret, digest_size=MAC_BYTES, person=b"lineup-draws")
        h.update(lookup)
        h.update(body)
        return h.digest()

    def get(self, lookup: bytes, shape: tuple[int, int]) -> np.ndarray | None:
        rounds, models = shape
        if not (0 < rounds and 0 < models and rounds * models <= MAX_VALUES):
            return None
        size = HEADER_BYTES + 8 * rounds * models
        path = self._path(lookup)
        try:
            # not blocking: a FIFO put in its place must not hang the report
            with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    return None
                blob = f.read(size + 1)          # more than an entry of this shape: not one
        except OSError:
            return None
        prefix = MAGIC + self._key.id
        if len(blob) != size or blob[:len(prefix)] != prefix:
            return None
        body = memoryview(blob)[len(prefix) + MAC_BYTES:]
        if not hmac.compare_digest(blob[len(prefix):len(prefix) + MAC_BYTES], self._mac(lookup, body)):
            return None
        if bytes(body[:8]) != rounds.to_bytes(4, "little") + models.to_bytes(4, "little"):
            return None
        draws = np.frombuffer(blob, dtype="<f8", offset=HEADER_BYTES).reshape(shape).astype(np.float64)
        if not np.isfinite(draws).all():
            return None
        try:
            os.utime(path)                       # recently used: kept longer
        except OSError:
            pass
        return draws

    def put(self, lookup: bytes, draws: np.ndarray) -> None:
        if draws.ndim != 2 or not 0 < draws.size <= MAX_VALUES or not np.isfinite(draws).all():
            return
        rounds, models = draws.shape
        body = rounds.to_bytes(4, "little") + models.to_bytes(4, "little") + \
            np.ascontiguousarray(draws, dtype="<f8").tobytes()
        blob = MAGIC + self._key.id + self._mac(lookup, body) + body
        path = self._path(lookup)
        part = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            self.where.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                view = memoryview(blob)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(part, path)
        except OSError:
            with contextlib.suppress(OSError):     # not made, or its folder is not one
                part.unlink()
            return
        self._prune()

    def _prune(self) -> None:
        """Past `MAX_ENTRIES` files or `MAX_BYTES`, the least recently used
        go (down to `KEEP` and `KEEP_BYTES`); parts left by a killed writer
        go when stale."""
        now, found, gone = time.time(), [], []
        try:
            with os.scandir(self.where) as entries:
                for entry in entries:
                    is_part = entry.name.startswith(".") and SUFFIX + "." in entry.name
                    if is_part or entry.name.endswith(SUFFIX):
                        st = entry.stat(follow_symlinks=False)
                        if not is_part:
                            found.append((st.st_mtime, st.st_size, entry.path))
                        elif now - st.st_mtime > STALE_PART_S:
                            gone.append(entry.path)
        except OSError:
            return
        total = sum(size for _, size, _ in found)
        if len(found) > MAX_ENTRIES or total > MAX_BYTES:
            found.sort()
            while found and (len(found) > KEEP or total > KEEP_BYTES):
                _, size, old = found.pop(0)
                gone.append(old)
                total -= size
        for old in gone:
            try:
                os.unlink(old)
            except OSError:                      # another process pruned it first
                pass
