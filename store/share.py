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
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from store import bounds
from store import rows as R
from store.db import Store, connect_readonly
from store.rows import insert_vote
from store.imports import ImportFileError
from store.records import ScoreRecord, TagRecord, VoteRecord

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


def package_info_at(path: str | os.PathLike) -> PackageInfo | None:
    """The `package_info` row of the SQLite file at `path`, or None when it
    is no package (no such table, no row or several, or not a database at
    all). Read-only, and readable where nothing can be written (a voted
    package on a read-only share is in WAL mode: `store.db.connect_readonly`)."""
    marks = package_marks_at(path, standin_provider=None)
    return marks.info if marks is not None else None


class PackageMarks(BaseModel):
    """What says that a SQLite file is a vote package: its `package_info`
    rows (exactly one in a package) and its stand-in contestants (the
    provider every contestant of a package has, and no other database's)."""

    markers: int
    info: PackageInfo | None
    standins: int


def package_marks_at(path: str | os.PathLike, *, standin_provider: str | None) -> PackageMarks | None:
    """The package marks of the SQLite file at `path`, or None when it cannot
    be read as a database (read-only, like `package_info_at`)."""
    try:
        conn = connect_readonly(path)
    except sqlite3.Error:
        return None
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        markers = conn.execute("SELECT count(*) FROM package_info").fetchone()[0] \
            if "package_info" in tables else 0
        standins = conn.execute("SELECT count(*) FROM contestant WHERE provider = ?", [standin_provider]).fetchone()[0] \
            if standin_provider is not None and "contestant" in tables else 0
        return PackageMarks(markers=markers, info=read_package_info(conn) if markers == 1 else None,
                            standins=standins)
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def settle_package(path: str | Path) -> bool:
    """Fold a package's write-ahead log into the file and leave it in
    rollback-journal mode (when its vote queue closes), so that the one file
    is the whole package and reads anywhere, a read-only share included.
    False when another process still has it open (it stays as it is)."""
    try:
        conn = sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=rw", uri=True, timeout=1)
    except sqlite3.Error:
        return False
    try:
        mode = conn.execute("PRAGMA journal_mode = DELETE").fetchone()
        return bool(mode) and str(mode[0]).lower() == "delete"
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def check_package_file(copy: Path, shown: str | os.PathLike) -> None:
    """What is checked on (a copy of) a package as stored, before a record
    is built from it: exactly one package_info row (none or several is an
    altered package, never merged as a database), and every number of every
    table within `store.bounds` (a text, an infinity or a time in the year
    33658 is named with its table, row and field). ImportFileError naming
    `shown` otherwise."""
    conn = sqlite3.connect(copy)
    try:
        marks = conn.execute("SELECT count(*) FROM package_info").fetchone()[0]
        if marks != 1:
            raise ImportFileError(f"{shown} is not a vote package as shared: it has {marks} package_info rows "
                                  "(a package has exactly one); it was altered")
        problem = bounds.first_bad_row(conn)
    except sqlite3.DatabaseError as exc:
        raise ImportFileError(f"{shown} is not a complete vote package ({exc})") from None
    finally:
        conn.close()
    if problem:
        raise ImportFileError(f"{shown}: {problem}")


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


def every_score(store: Store) -> list[ScoreRecord]:
    """Every score in the database, whatever answer it names."""
    return [R.score_from(r) for r in store.conn.execute(f"SELECT {R.cols(R.SCORE_COLS)} FROM score "
                                                          "ORDER BY created, id")]


def merge_package_records(store: Store, votes: Iterable[VoteRecord],
                          tags: Iterable[tuple[TagRecord, float | None]], source: str, *,
                          superseded: Iterable[str] = (), scores: Iterable[ScoreRecord] = ()) -> dict[str, int]:
    """Write the votes, tags and scores of a package (already mapped to this
    database's records, under ids of the package's own) in one transaction;
    those already here are kept, and a vote withdrawn or a tag removed in the
    package since an earlier import is withdrawn or removed here too, as are
    the `superseded` votes (of the package's, a later vote of the same rater
    on the same unit replaced them; a later score supersedes by itself).
    Returns rows added per table."""
    votes, tags, replaced, scores = list(votes), list(tags), sorted(set(superseded)), list(scores)

    def step(conn: sqlite3.Connection) -> dict[str, int]:
        (v0,) = conn.execute("SELECT count(*) FROM vote").fetchone()
        (t0,) = conn.execute("SELECT count(*) FROM tag").fetchone()
        for v in sorted(votes, key=lambda v: (v.created, v.id)):   # a superseding vote after the one it replaces
            insert_vote(conn, v, "INSERT OR IGNORE")
            if v.retracted_at is not None:
                conn.execute("UPDATE vote SET retracted_at = ?, current = 0 WHERE id = ? AND retracted_at IS NULL",
                             [v.retracted_at, v.id])
                conn.execute("UPDATE vote_contestant SET current = 0 WHERE vote_id = ?", [v.id])
        conn.executemany("UPDATE vote SET current = 0 WHERE id = ?", [(i,) for i in replaced])
        conn.executemany("UPDATE vote_contestant SET current = 0 WHERE vote_id = ?", [(i,) for i in replaced])
        for tag, removed_at in tags:
            conn.execute(R.insert_sql("tag", R.TAG_COLS, "INSERT OR IGNORE"), R.tag_row(tag, removed_at))
            if removed_at is not None:
                conn.execute("UPDATE tag SET removed_at = ? WHERE id = ? AND removed_at IS NULL", [removed_at, tag.id])
        (s0,) = conn.execute("SELECT count(*) FROM score").fetchone()
        conn.executemany(R.insert_sql("score", R.SCORE_COLS, "INSERT OR IGNORE"), [R.score_row(sc) for sc in scores])
        (v1,) = conn.execute("SELECT count(*) FROM vote").fetchone()
        (t1,) = conn.execute("SELECT count(*) FROM tag").fetchone()
        (s1,) = conn.execute("SELECT count(*) FROM score").fetchone()
        return {"vote": v1 - v0, "tag": t1 - t0, "score": s1 - s0}

    return store._write(f"import the votes of {source}", step)
