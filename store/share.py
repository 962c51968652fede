"""The SQL of blind vote packages (`lineup share`, `lineup vote FILE`,
`lineup import FILE`); what goes into a package and what comes back is
decided by `core.exchange.share`.

Why a module of its own: a package is a lineup database of its own (the
same schema, so the vote queue, tags, undo and resume work on it as on any
database) with one `package_info` row saying what it is; the owner's
database keeps, per package, the blind mapping (`share_map`: which opaque id
stands for which session, turn, answer and contestant, with the content
hash of each turn and answer as shared). Writing those, reading them back,
and merging a package's votes and tags into the owner's record are the
store's job; nothing here knows what may or may not be shown."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from store import rows as R
from store.db import Store, insert_vote
from store.records import TagRecord, VoteRecord

ShareKind = Literal["session", "turn", "output", "contestant"]


class PackageInfo(BaseModel):
    """The `package_info` row of a package: its id (the owner's
    `share_package.id`), the owner database's share identity, when it was
    made, its format, the vote queue's shuffle seed and the tags offered."""

    model_config = ConfigDict(extra="forbid")

    id: str
    origin: str
    created: float
    format: int
    seed: str
    tags: list[str] = Field(default_factory=list)


class ShareRow(BaseModel):
    """One line of the blind mapping (`share_map`)."""

    model_config = ConfigDict(extra="forbid")

    kind: ShareKind
    shared_id: str
    owner_id: str
    session_id: str
    digest: str | None = None


class SharedPackage(BaseModel):
    """What the owner's database knows of a package it issued."""

    model_config = ConfigDict(extra="forbid")

    id: str
    created: float
    origin: str
    sessions: list[str]
    file_name: str | None = None
    rows: list[ShareRow] = Field(default_factory=list)


def package_info_at(path: str | Path) -> PackageInfo | None:
    """The `package_info` row of the SQLite file at `path`, or None when it
    is no package (no such table or row, or not a database at all). Read-only."""
    uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return None
    try:
        return read_package_info(conn)
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def read_package_info(conn: sqlite3.Connection) -> PackageInfo | None:
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'package_info'").fetchone():
        return None
    rows = conn.execute("SELECT id, origin, created, format, seed, tags FROM package_info").fetchall()
    if len(rows) != 1:
        return None
    pid, origin, created, fmt, seed, tags = rows[0]
    try:
        return PackageInfo(id=pid, origin=origin, created=created, format=fmt, seed=seed,
                           tags=json.loads(tags or "[]"))
    except (ValueError, TypeError):
        return None


def write_package_info(store: Store, info: PackageInfo) -> None:
    store._write("write the package's description", lambda conn: conn.execute(
        "INSERT INTO package_info (id, origin, created, format, seed, tags) VALUES (?, ?, ?, ?, ?, ?)",
        [info.id, info.origin, info.created, info.format, info.seed, R.dumps(info.tags)]))


def share_origin(store: Store) -> str | None:
    """This database's share identity (the origin of the packages it issued), if it issued any."""
    row = store.conn.execute("SELECT origin FROM share_package ORDER BY created, id LIMIT 1").fetchone()
    return row[0] if row else None


def record_share(store: Store, package: SharedPackage) -> None:
    """Keep the blind mapping of a package just made, in one transaction."""
    def step(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO share_package (id, created, origin, sessions, file_name, options) "
                     "VALUES (?, ?, ?, ?, ?, '{}')",
                     [package.id, package.created, package.origin, R.dumps(package.sessions), package.file_name])
        conn.executemany("INSERT INTO share_map (package_id, kind, shared_id, owner_id, session_id, digest) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         [(package.id, r.kind, r.shared_id, r.owner_id, r.session_id, r.digest)
                          for r in package.rows])
    store._write(f"record the package {package.id}", step)


def shared_package(store: Store, package_id: str) -> SharedPackage | None:
    """The owner's record of a package (its mapping included), or None."""
    row = store.conn.execute("SELECT id, created, origin, sessions, file_name FROM share_package WHERE id = ?",
                             [package_id]).fetchone()
    if row is None:
        return None
    rows = [ShareRow(kind=k, shared_id=s, owner_id=o, session_id=sid, digest=d) for k, s, o, sid, d in
            store.conn.execute("SELECT kind, shared_id, owner_id, session_id, digest FROM share_map "
                               "WHERE package_id = ? ORDER BY kind, shared_id", [package_id])]
    return SharedPackage(id=row[0], created=row[1], origin=row[2], sessions=json.loads(row[3]),
                         file_name=row[4], rows=rows)


def tags_with_removals(store: Store) -> list[tuple[TagRecord, float | None]]:
    """Every tag in the database with when it was removed (None: still set)."""
    return [(R.tag_from(r[:-1]), r[-1]) for r in store.conn.execute(
        f"SELECT {R.cols(R.READ['tag'])}, removed_at FROM tag ORDER BY created, id")]


def merge_package_records(store: Store, votes: Iterable[VoteRecord],
                          tags: Iterable[tuple[TagRecord, float | None]], source: str) -> dict[str, int]:
    """Write the votes and tags of a package (already mapped to this
    database's records) in one transaction; those already here are kept,
    and a vote withdrawn or a tag removed in the package since an earlier
    import is withdrawn or removed here too. Returns rows added per table."""
    votes, tags = list(votes), list(tags)

    def step(conn: sqlite3.Connection) -> dict[str, int]:
        (v0,) = conn.execute("SELECT count(*) FROM vote").fetchone()
        (t0,) = conn.execute("SELECT count(*) FROM tag").fetchone()
        for v in sorted(votes, key=lambda v: (v.created, v.id)):   # a superseding vote after the one it replaces
            insert_vote(conn, v, "INSERT OR IGNORE")
            if v.retracted_at is not None:
                conn.execute("UPDATE vote SET retracted_at = ?, current = 0 WHERE id = ? AND retracted_at IS NULL",
                             [v.retracted_at, v.id])
                conn.execute("UPDATE vote_contestant SET current = 0 WHERE vote_id = ?", [v.id])
        for tag, removed_at in tags:
            conn.execute(R.insert_sql("tag", R.TAG_COLS, "INSERT OR IGNORE"), R.tag_row(tag, removed_at))
            if removed_at is not None:
                conn.execute("UPDATE tag SET removed_at = ? WHERE id = ? AND removed_at IS NULL", [removed_at, tag.id])
        (v1,) = conn.execute("SELECT count(*) FROM vote").fetchone()
        (t1,) = conn.execute("SELECT count(*) FROM tag").fetchone()
        return {"vote": v1 - v0, "tag": t1 - t0}

    return store._write(f"import the votes of {source}", step)
