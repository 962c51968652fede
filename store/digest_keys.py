"""The report digests' signing key, format and upkeep check, without numpy
(`store.digests` builds and reads them, with numpy): every writing
command's close asks whether any digest is missing, and few need to build.

The key is the user's (`key_path`: made 0600 on first use, raced safely,
replaced by a writer when the file is not a key),
never the database's: a digest made elsewhere is not trusted. Digests are
signed with BLAKE2b keyed with it; its id is stored in the clear after
`MAGIC`, so SQL can tell the digests signed here (`MISSING_SQL`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

FORMAT = 1
MAGIC = b"LND" + bytes([FORMAT])   # a digest of another format is rebuilt

KEY_BYTES, KEY_ID_BYTES, MAC_BYTES = 32, 8, 32
PREFIX_BYTES = len(MAGIC) + KEY_ID_BYTES + MAC_BYTES   # MAGIC, the key id, the MAC


@dataclass(frozen=True)
class Key:
    """The secret digests are signed with, and its id (stored in the clear
    after `MAGIC`, so SQL can tell the digests signed with it)."""

    secret: bytes
    id: bytes

    @property
    def prefix(self) -> bytes:
        return MAGIC + self.id


def key_path() -> Path:
    """<user data dir>/lineup/digest.key: the user's, not the database's (a
    database may be a file from elsewhere)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("lineup", appauthor=False)) / "digest.key"


def key(*, create: bool = False) -> Key | None:
    """This user's signing key (made, 0600, when `create` and none exists, or
    when the file there is not a key: cut short, another format); None when
    there is none or it cannot be read: then no digest is trusted."""
    path = key_path()
    try:
        found = _parse(_read(path))
    except FileNotFoundError:
        if not create:
            return None
        try:
            return _parse(_make_key(path, replace=False))
        except OSError:
            return None
    except OSError:
        return None
    if found is None and create:
        # A damaged key would turn the digests off for good: replace it. What
        # was signed with it was never trusted; the writer signs again.
        try:
            return _parse(_make_key(path, replace=True))
        except OSError:
            return None
    return found


def _read(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(4 * KEY_BYTES)   # a key is 2 * KEY_BYTES hex digits: more is not a key


def _parse(text: bytes) -> Key | None:
    try:
        secret = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    if len(secret) != KEY_BYTES:
        return None
    return Key(secret, hashlib.blake2b(secret, digest_size=KEY_ID_BYTES, person=b"lineup-key-id").digest())


def _make_key(path: Path, *, replace: bool) -> bytes:
    """A new key at `path` (replacing what is there when `replace`), or the
    one another process made or put there first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, os.urandom(KEY_BYTES).hex().encode())   # as text: no stray bytes in a file of ours
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        if replace:
            os.replace(part, path)
        else:
            os.link(part, path)        # fails if another process made one meanwhile: use theirs
    except FileExistsError:
        pass
    finally:
        part.unlink(missing_ok=True)
    return _read(path)


def mac(k: Key, body: bytes, turns: bytes) -> bytes:
    """The signature of a digest: its blob after the prefix, and its turns' JSON."""
    h = hashlib.blake2b(key=k.secret, digest_size=MAC_BYTES, person=b"lineup-digest")
    h.update(len(body).to_bytes(8, "little"))
    h.update(body)
    h.update(turns)
    return h.digest()



#: Is there anything for `refresh` to do? (?1: the prefix of the digests signed here)
MISSING_SQL = ("SELECT id FROM session WHERE id NOT IN (SELECT session_id FROM report_digest "
               "WHERE substr(data, 1, 12) = ?1) OR id NOT IN (SELECT session_id FROM report_group_member) "
               "UNION ALL SELECT NULL FROM report_group_member m WHERE m.grp NOT IN "
               "(SELECT grp FROM report_group WHERE substr(data, 1, 12) = ?1)")
