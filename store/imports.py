"""What an import writes: records that `core.exchange.importing` read and checked from
a file (our JSONL export, Chatbot Arena battles), in one transaction, and
another lineup database (a teammate's votes) merged idempotently after it
has been checked whole. Re-importing adds nothing: records keep their ids."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from store import rows as R
from store.db import Store, StoreError, connect_readonly
from store.owners import pid_alive, start_time
from store.rows import insert_session, insert_vote, upsert_output
from store.records import (
    CheckResultRecord,
    OutputRecord,
    RevealRecord,
    ScoreRecord,
    SessionRecord,
    TagRecord,
    TurnRecord,
    VoteRecord,
)

TABLES = ("session", "contestant", "turn", "output", "vote", "vote_contestant", "tag", "check_result", "reveal",
          "image", "deleted_session", "gold_check", "blind_guess", "score")


class ImportFileError(StoreError):
    """Bad import input (not the database's fault): names the file and the line or item."""


class ImportSummary(BaseModel):
    source: str
    format: Literal["lineup-jsonl", "arena", "lineup-db", "mixed", "empty", "lineup-package"]
    records: int = 0                     # lines / battles / sessions read
    added: dict[str, int] = Field(default_factory=dict)
    # sessions the source holds that were deleted here (their tombstones keep them out)
    deleted_here: list[str] = Field(default_factory=list)


def write_imported(store: Store, sessions: Iterable[SessionRecord], records: Iterable[Any],
                   source: str) -> dict[str, int]:
    """Write sessions, then their turns, outputs, votes, tags, checks, scores and
    reveals, in one transaction; rows already there are kept (a finished
    output replaces one we only have half of); a session deleted here (its
    tombstone) and everything in it are left out. Returns the rows added per table."""
    with store.batch():
        conn = store.conn
        try:
            # counted under the write lock: rows another process wrote meanwhile are not ours to report
            before = _counts(conn)
            deleted = {r[0] for r in conn.execute("SELECT id FROM deleted_session")}
            skipped_outputs: set[str] = set()
            for session in sessions:
                if session.id not in deleted:
                    insert_session(conn, session, "INSERT OR IGNORE")
            for rec in records:
                if deleted and _in_deleted(rec, deleted, skipped_outputs):
                    continue
                _write_record(conn, rec)
            after = _counts(conn)
        except sqlite3.Error as exc:
            raise store._translate(exc, f"import {source}") from None
    return {t: after[t] - before[t] for t in TABLES if t != "vote_contestant"}


def _in_deleted(rec: Any, deleted: set[str], skipped_outputs: set[str]) -> bool:
    """Whether `rec` belongs to a deleted session (an output's id is noted,
    so that its tags and checks are left out with it)."""
    if isinstance(rec, (TagRecord, CheckResultRecord, ScoreRecord)):
        return rec.output_id in skipped_outputs
    if getattr(rec, "session_id", None) in deleted:
        if isinstance(rec, OutputRecord):
            skipped_outputs.add(rec.id)
        return True
    return False


def _write_record(conn: sqlite3.Connection, rec: Any) -> None:
    if isinstance(rec, TurnRecord):
        conn.execute(R.insert_sql("turn", R.TURN_COLS, "INSERT OR IGNORE"), R.turn_row(rec))
    elif isinstance(rec, OutputRecord):
        if rec.status in ("streaming", "interrupted"):
            conn.execute(R.insert_sql("output", R.OUTPUT_COLS, "INSERT OR IGNORE"), R.output_row(rec))
        else:  # a finished answer replaces one we only have half of
            upsert_output(conn, rec, time.time(), only_unfinished=True)
    elif isinstance(rec, VoteRecord):
        insert_vote(conn, rec, "INSERT OR IGNORE")
    elif isinstance(rec, TagRecord):
        conn.execute(R.insert_sql("tag", R.TAG_COLS, "INSERT OR IGNORE"), R.tag_row(rec))
    elif isinstance(rec, ScoreRecord):
        conn.execute(R.insert_sql("score", R.SCORE_COLS, "INSERT OR IGNORE"), R.score_row(rec))
    elif isinstance(rec, CheckResultRecord):
        conn.execute(R.insert_sql("check_result", R.CHECK_COLS, "INSERT OR IGNORE"), R.check_row(rec))
    elif isinstance(rec, RevealRecord):
        conn.execute(R.insert_sql("reveal", R.REVEAL_COLS, "INSERT OR IGNORE"), R.reveal_row(rec))
    else:  # pragma: no cover - programming error
        raise TypeError(type(rec))


def _counts(conn: sqlite3.Connection, schema: str = "main") -> dict[str, int]:
    return {t: conn.execute(f"SELECT count(*) FROM {schema}.{t}").fetchone()[0] for t in TABLES}


# ---------------------------------------------------------------------- another database

_MERGE_COLS = {
    "session": R.SESSION_COLS, "contestant": R.CONTESTANT_COLS, "turn": R.TURN_COLS,
    "output": R.OUTPUT_COLS, "vote": R.VOTE_COLS, "vote_contestant": R.VOTE_CONTESTANT_COLS,
    "tag": R.TAG_COLS, "check_result": R.CHECK_COLS, "reveal": R.REVEAL_COLS,
    "image": ("sha256", "mime", "size", "data"), "deleted_session": ("id", "deleted_at"),
    "gold_check": R.GOLD_COLS, "blind_guess": R.GUESS_COLS, "score": R.SCORE_COLS,
}

# Which rows of the other database belong to a session deleted here: none of
# them is merged (a deleted session stays deleted). Its tombstones for
# sessions we do not hold are merged too, so that a later merge from a third
# database does not bring those back either; a session we still hold is
# never deleted by a merge (it says which, `ImportSummary.deleted_here`).
_DELETED = "(SELECT id FROM main.deleted_session)"
_KEEP = {
    "session": f"id NOT IN {_DELETED}",
    "contestant": f"session_id NOT IN {_DELETED}",
    "turn": f"session_id NOT IN {_DELETED}",
    "output": f"session_id NOT IN {_DELETED}",
    "vote": f"session_id NOT IN {_DELETED}",
    "reveal": f"session_id NOT IN {_DELETED}",
    "gold_check": f"session_id NOT IN {_DELETED}",
    "blind_guess": f"session_id NOT IN {_DELETED}",
    "vote_contestant": f"vote_id NOT IN (SELECT id FROM other.vote WHERE session_id IN {_DELETED})",
    "tag": f"output_id NOT IN (SELECT id FROM other.output WHERE session_id IN {_DELETED})",
    "check_result": f"output_id NOT IN (SELECT id FROM other.output WHERE session_id IN {_DELETED})",
    # a score's value is checked by `store.bounds` before the merge; its kind here
    "score": (f"output_id NOT IN (SELECT id FROM other.output WHERE session_id IN {_DELETED}) "
              "AND rater_kind IN ('human', 'judge')"),
    "image": ("sha256 IN (SELECT json_extract(j.value, '$.sha256') FROM other.turn t, json_each(t.images) j "
              f"WHERE json_valid(t.images) AND t.session_id NOT IN {_DELETED})"),
    "deleted_session": "id NOT IN (SELECT id FROM main.session)",
}


def merge_database(store: Store, other: str | os.PathLike) -> ImportSummary:
    """Merge another lineup database into `store`: rows we lack are added,
    rows we have are kept (a finished output replaces an unfinished one; a
    removal or reveal is carried over). One transaction; idempotent."""
    other = Path(other)
    summary = ImportSummary(source=str(other), format="lineup-db")
    if store.path.exists() and other.exists() and os.path.samefile(store.path, other):
        return summary
    with work_folder("merge") as tmp:
        copy = tmp / "other.db"
        _snapshot(other, copy)
        _check_sound(copy, other)
        try:
            src = Store.open(copy)  # validates and brings an older schema up to ours
        except StoreError as exc:
            raise ImportFileError(str(exc).replace(str(copy), str(other))) from None
        try:
            _check_complete(src.conn, other)
            bad, named = src.out_of_range()
            if bad:
                raise ImportFileError(f"{other}: {bad} record{'s' if bad != 1 else ''} with a time, duration, count "
                                      f"or cost out of range ({', '.join(named)}{' ...' if bad > len(named) else ''}); "
                                      "it was left untouched")
            summary.records = src.conn.execute("SELECT count(*) FROM session").fetchone()[0]
            gone = set(store.deleted_sessions())
            summary.deleted_here = sorted(r[0] for r in src.conn.execute("SELECT id FROM session") if r[0] in gone)
        except sqlite3.DatabaseError as exc:
            raise ImportFileError(f"{other} is corrupt ({exc}); it was left untouched") from None
        finally:
            src.close()
        summary.added = _merge_attached(store, copy, other)
    return summary


_WORK_NAME = re.compile(r"lineup-(?:merge|package)-(\d+)-(\d+)-")


@contextlib.contextmanager
def work_folder(kind: str) -> Iterator[Path]:
    """A private temporary folder for the copy an import works on, named
    after this process (`lineup-KIND-PID-START-...`). An import killed
    (kill -9, a power cut) leaves its folder behind, a full copy of what it
    imported: the folders of ours whose process is gone are removed first."""
    folder = tempfile.gettempdir()
    remove_stale_work(folder)
    me = os.getpid()
    with tempfile.TemporaryDirectory(prefix=f"lineup-{kind}-{me}-{start_time(me) or 0}-", dir=folder) as tmp:
        yield Path(tmp)


def remove_stale_work(folder: str) -> list[str]:
    """Remove the import folders in `folder` left by processes of this host
    that no longer run (the pid is gone, or now another process's); returns
    their names. Folders of running imports, of other users and any other
    name are left alone."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _WORK_NAME.match(entry.name)
        if not m or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        pid, start = int(m.group(1)), m.group(2)
        if pid_alive(pid) and start in ("0", start_time(pid) or "0"):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.name)
    return removed


def _check_sound(copy: Path, other: Path) -> None:
    """SQLite's own integrity check on (the snapshot of) the source: a file
    with a damaged page or index is refused before a row of it is read."""
    conn = sqlite3.connect(copy)
    try:
        found = [r[0] for r in conn.execute("PRAGMA integrity_check(3)")]
    except sqlite3.DatabaseError as exc:
        found = [str(exc)]
    finally:
        conn.close()
    if found != ["ok"]:
        raise ImportFileError(f"{other} is corrupt: it fails SQLite's integrity check "
                              f"({'; '.join(found)}); it was left untouched")


def _check_complete(conn: sqlite3.Connection, other: Path) -> None:
    """Every table and column the merge reads is there, and every row's
    parent (a turn's session, an output's turn...) is in the file too."""
    for table in TABLES:
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in _MERGE_COLS[table] if c not in have]
        if missing:
            raise ImportFileError(f"{other} is not a complete lineup database (table {table} lacks "
                                  f"{', '.join(missing)}); it was left untouched")
    orphans = conn.execute("PRAGMA foreign_key_check").fetchall()
    if orphans:
        table, rowid, parent = orphans[0][:3]
        raise ImportFileError(f"{other} is inconsistent: {len(orphans)} row{'s' if len(orphans) != 1 else ''} "
                              f"refer to records missing from it (first: {table} row {rowid}, whose {parent} "
                              "is absent); it was left untouched")


def _snapshot(src: Path, dst: Path) -> None:
    """A consistent copy of `src` (WAL included) without writing to it."""
    try:
        source = connect_readonly(src)
        target = sqlite3.connect(dst)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
    except sqlite3.DatabaseError as exc:
        raise ImportFileError(f"{src}: cannot read it as a database ({exc}); it was left untouched") from None


# A consistent copy of a database file, and SQLite's own check of it: what a
# merge does first, and what reading a vote package (`core.exchange.share`) does too.
snapshot = _snapshot
check_sound = _check_sound


def _merge_attached(store: Store, copy: Path, other: Path) -> dict[str, int]:
    if store.readonly:
        raise StoreError(f"{store.path} is read-only: cannot import {other}")
    conn = store.conn
    cols = _MERGE_COLS
    try:
        conn.execute("ATTACH DATABASE ? AS other", [str(copy)])
    except sqlite3.Error as exc:
        raise store._translate(exc, f"import {other}") from None
    try:
        with store.batch():
            try:
                before = _counts(conn)    # under the write lock: a concurrent writer's rows are not counted
                for table in TABLES:
                    c = ", ".join(cols[table])
                    conn.execute(f"INSERT OR IGNORE INTO main.{table} ({c}) SELECT {c} FROM other.{table} "
                                 f"WHERE {_KEEP[table]}")
                finished = ", ".join(f"{c} = o.{c}" for c in R.OUTPUT_COLS[1:])
                conn.execute(f"UPDATE main.output SET {finished} FROM other.output AS o WHERE output.id = o.id "
                             "AND output.status IN ('streaming', 'interrupted') "
                             "AND o.status NOT IN ('streaming', 'interrupted')")
                conn.execute("UPDATE main.tag SET removed_at = o.removed_at FROM other.tag AS o "
                             "WHERE tag.id = o.id AND tag.removed_at IS NULL AND o.removed_at IS NOT NULL")
                for table in ("session", "vote"):
                    conn.execute(f"UPDATE main.{table} SET revealed_at = o.revealed_at FROM other.{table} AS o "
                                 f"WHERE {table}.id = o.id AND {table}.revealed_at IS NULL "
                                 "AND o.revealed_at IS NOT NULL")
                # a vote withdrawn in either database is withdrawn here
                conn.execute("UPDATE main.vote SET retracted_at = o.retracted_at, current = 0 FROM other.vote AS o "
                             "WHERE vote.id = o.id AND vote.retracted_at IS NULL AND o.retracted_at IS NOT NULL")
                conn.execute("UPDATE main.gold_check SET retracted_at = o.retracted_at FROM other.gold_check AS o "
                             "WHERE gold_check.id = o.id AND gold_check.retracted_at IS NULL "
                             "AND o.retracted_at IS NOT NULL")
                # a vote superseded in either database is superseded here
                conn.execute("UPDATE main.vote SET current = 0 WHERE current = 1 AND id IN "
                             "(SELECT supersedes FROM main.vote WHERE supersedes IS NOT NULL)")
                conn.execute("UPDATE main.vote_contestant SET current = 0 WHERE current = 1 AND vote_id IN "
                             "(SELECT id FROM main.vote WHERE current = 0)")
                after = _counts(conn)
            except sqlite3.Error as exc:
                raise store._translate(exc, f"import {other}") from None
    finally:
        _detach(conn)
    return {t: after[t] - before[t] for t in TABLES if t != "vote_contestant"}


def _detach(conn: sqlite3.Connection) -> None:
    """Detach the merged copy. A statement that failed (a full disk) can
    leave a read lock on the attached file after SQLite rolled back, and
    DETACH then says "locked": an empty transaction releases it. Should it
    still fail, closing the connection detaches it, and the error that
    brought us here is the one to tell, not this one."""
    try:
        conn.execute("DETACH DATABASE other")
        return
    except sqlite3.Error:
        pass
    try:
        if not conn.in_transaction:
            conn.execute("BEGIN")
        conn.execute("ROLLBACK")
        conn.execute("DETACH DATABASE other")
    except sqlite3.Error:
        pass
