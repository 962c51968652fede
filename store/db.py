"""`Store`: one SQLite connection to a lineup database.

Why it looks like this:
- every write is one short `BEGIN IMMEDIATE` transaction, committed at once
  (a vote, a tag, a finished output survive a crash the moment they are made),
  retried while another process holds the write lock, so two processes can
  write the same file;
- WAL + synchronous=FULL: readers never block the writer, commits survive a
  power cut;
- streaming outputs are checkpointed (`checkpoint_output`), and an output left
  "streaming" by a process that no longer exists becomes "interrupted";
- a file that is not a lineup database is never written to.
Use a Store from one thread at a time; `AsyncStore` puts it on a writer thread.

Why this file is past 600 lines: `Store` is the one connection every write
goes through (the retry on a busy lock, the transaction, the file identity
check all wrap each method), so its write methods stay on one class; its
reads are `store/reads.py` (a base class), the rows it writes
`store/rows.py`, who owns a claim `store/owners.py`, merges and imports
`store/imports.py`."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from store import rows as R
from store.errors import StoreError
from store.owners import owner_alive, pid_alive
from store.reads import Reads
from store.rows import insert_session, insert_vote, upsert_output
from store.records import (
    UNIT_TURNS_SQL,
    BlindGuessRecord,
    CheckResultRecord,
    GoldCheckRecord,
    OutputRecord,
    RevealRecord,
    SessionRecord,
    ScoreRecord,
    TagRecord,
    TurnRecord,
    VoteRecord,
    vote_problem,
)
from store.schema import (
    APPLICATION_ID,
    MIGRATION_NAMES,
    MIGRATION_SET,
    SCHEMA_VERSION,
    build_migrations,
)

T = TypeVar("T")
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 5_000
# Total time a write keeps retrying while another process holds the lock.
WRITE_RETRY_S = 30.0
# A streaming output from another host with no checkpoint for this long is dead.
STALE_STREAM_S = 600.0


def default_db_path() -> Path:
    """$LINEUP_DB, else <user data dir>/lineup/lineup.db."""
    env = os.environ.get("LINEUP_DB")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("lineup", appauthor=False)) / "lineup.db"


def _is_busy(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


class Store(Reads):
    """A lineup database. Open with `Store.open(path)`."""

    def __init__(self, conn: sqlite3.Connection, path: Path, readonly: bool):
        self.conn = conn
        self.path = path
        self.readonly = readonly
        self._batch_depth = 0
        self._mine: set[str] = set()  # outputs this Store started and has not finished
        self.writer = f"{socket.gethostname()}:{os.getpid()}"
        # The file opened (absolute path, (st_dev, st_ino)): checked before every
        # commit, so a database deleted or replaced under us is never written blind.
        self._file: tuple[str, tuple[int, int]] | None = None
        self._lost: str | None = None   # why this Store writes no more

    # ------------------------------------------------------------------ open / close

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, *, readonly: bool = False,
             create: bool = True) -> "Store":
        """Open (and migrate) the database at `path` (default: `default_db_path()`).

        A file that cannot be written (or whose folder cannot be) is opened
        read-only: reads work, writes raise StoreError."""
        path = Path(path).expanduser() if path is not None else default_db_path()
        memory = str(path) == ":memory:"
        exists = not memory and path.exists()
        if exists:
            if not path.is_file():
                raise StoreError(f"{path}: not a file")
            # (A file that is not a database is found by SQLite's first read, before anything is
            # written. Not by reading its header here: closing a descriptor of the file drops
            # every lock this process holds on it, a writer's SQLite locks included.)
            if not readonly and (not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK)):
                readonly = True
        elif not memory:
            if readonly or not create:
                raise StoreError(f"{path}: no such database")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{path}: cannot create its folder ({exc.strerror or exc})") from None
        conn = cls._connect(path, readonly, memory)
        store = cls(conn, path, readonly)
        if not memory and not readonly:
            opened = _identity(path)
            if opened is not None:
                store._file = (os.path.abspath(path), opened)
        try:
            store._prepare()
        except BaseException:
            conn.close()
            raise
        return store

    @staticmethod
    def _connect(path: Path, readonly: bool, memory: bool) -> sqlite3.Connection:
        kw: dict[str, Any] = dict(isolation_level=None, check_same_thread=False,
                                  timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            if memory:
                return sqlite3.connect(":memory:", **kw)
            if not readonly:
                return sqlite3.connect(str(path), **kw)
            return connect_readonly(path, **kw)
        except sqlite3.Error as exc:
            if _not_a_database(exc):
                raise StoreError(f"{path} is not a SQLite database (left untouched)") from None
            raise StoreError(f"{path}: cannot open ({exc})") from None

    def _prepare(self) -> None:
        conn = self.conn
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA foreign_keys = ON")
            self._check_is_lineup()
            if not self.readonly:
                # Two processes creating one file: the switch to WAL can find the
                # other's lock and fail at once, without waiting (SQLite does not
                # wait where waiting could deadlock), so it is retried like a write.
                _retry_busy(self, "open", lambda: conn.execute("PRAGMA journal_mode = WAL"))
                conn.execute("PRAGMA synchronous = FULL")
                self._migrate()
                self._recover_streaming()
            else:
                pending = [n for n in MIGRATION_NAMES if n not in self._applied()]
                if pending:
                    raise StoreError(f"{self.path} uses schema version {self._user_version()} and needs "
                                     f"upgrading to {SCHEMA_VERSION}, but it is read-only")
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "open") from None

    def _user_version(self) -> int:
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def _applied(self) -> list[str]:
        if not self.conn.execute("SELECT 1 FROM sqlite_master WHERE name='_sqlite_migrations'").fetchone():
            return []
        return [r[0] for r in self.conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid",
            [MIGRATION_SET])]

    def _check_is_lineup(self) -> None:
        """Refuse foreign SQLite files and files from a newer lineup, before any write."""
        app_id = self.conn.execute("PRAGMA application_id").fetchone()[0]
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if app_id not in (0, APPLICATION_ID) or (tables and app_id == 0 and "_sqlite_migrations" not in tables):
            raise StoreError(f"{self.path} is a SQLite database but not a lineup database (left untouched)")
        applied = self._applied()
        if tables and not applied and app_id != APPLICATION_ID:
            raise StoreError(f"{self.path} is a SQLite database but not a lineup database (left untouched)")
        version = self._user_version()
        unknown = [n for n in applied if n not in MIGRATION_NAMES]
        if version > SCHEMA_VERSION or unknown:
            raise StoreError(f"{self.path} was written by a newer lineup (schema version "
                             f"{max(version, len(applied))}; this lineup reads up to {SCHEMA_VERSION}); "
                             f"upgrade lineup to open it")

    def _migrate(self) -> None:
        def step(conn: sqlite3.Connection) -> None:
            self._check_is_lineup()  # re-check under the lock: another process may have migrated
            if [n for n in MIGRATION_NAMES if n not in self._applied()]:
                from sqlite_utils import Database  # only here: an up-to-date file never loads it

                build_migrations().apply(Database(conn, execute_plugins=False))
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

        if self._user_version() == SCHEMA_VERSION and self._applied() == list(MIGRATION_NAMES):
            return
        self._write("migrate the schema", step)

    def _recover_streaming(self) -> None:
        """Outputs still "streaming" whose process is gone become "interrupted"
        (their text is the last checkpoint)."""
        host, pid = self.writer.rsplit(":", 1)
        now = time.time()
        dead = []
        for oid, writer, updated, created in self.conn.execute(
                "SELECT id, writer, updated, created FROM output WHERE status = 'streaming'"):
            w_host, _, w_pid = (writer or "").rpartition(":")
            if w_host == host and w_pid.isdigit():
                if w_pid != pid and not pid_alive(int(w_pid)):
                    dead.append(oid)
            elif now - (updated or created) > STALE_STREAM_S or not writer:
                dead.append(oid)
        if dead:
            self._mark_interrupted(dead)

    def _mark_interrupted(self, ids: list[str]) -> None:
        def step(conn: sqlite3.Connection) -> None:
            conn.executemany("UPDATE output SET status = 'interrupted' WHERE id = ? AND status = 'streaming'",
                             [(i,) for i in ids])
        self._write("mark interrupted outputs", step)

    def close(self) -> None:
        """Close; outputs this Store left streaming become "interrupted"."""
        if self.conn is None:
            return
        try:
            if self._mine and not self.readonly:
                self._mark_interrupted(sorted(self._mine))
                self._mine.clear()
        except StoreError:
            # The disk refused the write (full, read-only now...). Closing must
            # not fail, nor hide the error that brought us here: those outputs
            # stay "streaming" and the next open marks them interrupted.
            self._mine.clear()
        try:
            if not self.readonly and self.conn.total_changes and not self.conn.in_transaction:
                self.refresh_digests()
        finally:
            self.conn.close()
            self.conn = None  # type: ignore[assignment]

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return self._user_version()

    # ------------------------------------------------------------------ transactions

    def _translate(self, exc: BaseException, action: str) -> StoreError:
        if _not_a_database(exc):
            return StoreError(f"{self.path} is not a SQLite database (left untouched)")
        msg = str(exc)
        low = msg.lower()
        if "disk is full" in low or "disk full" in low:
            return StoreError(f"{self.path}: disk full while trying to {action}; nothing of it was saved")
        if "disk i/o error" in low:
            return StoreError(f"{self.path}: disk error while trying to {action} (disk full, file size limit "
                              f"or I/O failure); nothing of it was saved")
        if "readonly" in low or "read-only" in low:
            return StoreError(f"{self.path} is read-only: cannot {action}")
        if "malformed" in low or "not a database" in low or "corrupt" in low:
            return StoreError(f"{self.path} is corrupt ({msg}); it was left untouched")
        if isinstance(exc, sqlite3.IntegrityError):
            return StoreError(f"{self.path}: cannot {action}: {msg}")
        if _is_busy(exc):
            return StoreError(f"{self.path}: still locked by another process after "
                              f"{WRITE_RETRY_S:.0f} s; could not {action}")
        return StoreError(f"{self.path}: cannot {action} ({msg})")

    def _commit(self) -> None:
        """COMMIT the open write transaction, unless the file at our path is no
        longer the one we opened (deleted, or replaced by another file): then
        roll back, stop writing for good, and say so. One stat() per commit."""
        if self._file is not None:
            try:
                now = _identity(self._file[0])
            except OSError:   # cannot tell (a permission changed on a folder): no evidence of a change
                now = self._file[1]
            if now != self._file[1]:
                self.conn.execute("ROLLBACK")
                self._abandon()
        self.conn.execute("COMMIT")

    def _abandon(self) -> None:
        self._lost = (f"{self.path} was replaced or deleted while lineup was writing to it; nothing more is "
                      "written there")
        # Fold our write-ahead log into the file we opened (wherever it went)
        # and empty it: a log left beside a new file of that name would be
        # replayed into it and corrupt it.
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass
        raise StoreError(self._lost)

    def _check_writable(self, action: str) -> None:
        if self.readonly:
            raise StoreError(f"{self.path} is read-only: cannot {action}")
        if self._lost:
            raise StoreError(self._lost)

    def refresh_digests(self, wait_s: float = 0.2) -> int:
        """Rebuild the report digests that writes have deleted, or that
        were not signed here (`store.digests`), in one write transaction;
        how many sessions' digests were built. Best effort:
        a digest is derived data that a report rebuilds in memory when
        missing, so a lock held elsewhere for longer than `wait_s`, or a
        disk that refuses the write, leaves them missing and says nothing."""
        from store import digest_keys

        conn = self.conn
        if conn.in_transaction:     # inside a batch: its own transaction is not ours to end
            return 0
        key = digest_keys.key(create=True)
        if key is None or conn.execute(digest_keys.MISSING_SQL + " LIMIT 1", [key.prefix]).fetchone() is None:
            return 0
        from store import digests   # (numpy: only when there is something to build)

        conn.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        try:
            self._check_writable("refresh the report digests")
            conn.execute("BEGIN IMMEDIATE")
            try:
                done = digests.refresh(conn, key)
                self._commit()
                return done
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        except (sqlite3.Error, StoreError):
            return 0
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def _write(self, action: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` in one short write transaction, retrying while the database is busy."""
        self._check_writable(action)
        conn = self.conn
        if self._batch_depth:
            try:
                return fn(conn)
            except sqlite3.Error as exc:
                raise self._translate(exc, action) from None

        def attempt() -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
                self._commit()
                return result
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        return _retry_busy(self, action, attempt)

    @contextlib.contextmanager
    def batch(self) -> Iterator["Store"]:
        """Group many writes in one transaction (imports, bulk runs): all or nothing."""
        if self._batch_depth:
            self._batch_depth += 1
            try:
                yield self
            finally:
                self._batch_depth -= 1
            return
        _begin_immediate(self)
        self._batch_depth = 1
        try:
            yield self
        except BaseException:
            self._batch_depth = 0
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self._batch_depth = 0
        try:
            self._commit()
        except sqlite3.Error as exc:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise self._translate(exc, "commit") from None

    # ------------------------------------------------------------------ sessions

    def create_session(self, rec: SessionRecord) -> None:
        def step(conn: sqlite3.Connection) -> None:
            insert_session(conn, rec)
        self._write(f"save session {rec.id}", step)

    def update_session(self, session_id: str, **fields: Any) -> SessionRecord:
        """Change some fields of a session (contestants included); returns the new record."""
        if "id" in fields:
            raise StoreError("a session's id cannot change")

        def step(conn: sqlite3.Connection) -> SessionRecord:
            old = self._session_record(self._resolve_session(session_id))
            data = old.model_dump()
            data.update({k: (v.model_dump() if hasattr(v, "model_dump") else v) for k, v in fields.items()})
            if "contestants" in fields:
                data["contestants"] = [c.model_dump() if hasattr(c, "model_dump") else c
                                       for c in fields["contestants"]]
            try:
                new = SessionRecord.model_validate(data)
            except ValueError as exc:
                raise StoreError(f"session {old.id}: {exc}") from None
            conn.execute(f"UPDATE session SET {', '.join(c + ' = ?' for c in R.SESSION_COLS[1:])} WHERE id = ?",
                         R.session_row(new)[1:] + (new.id,))
            if "contestants" in fields:
                conn.execute("DELETE FROM contestant WHERE session_id = ?", [new.id])
                conn.executemany(R.insert_sql("contestant", R.CONTESTANT_COLS),
                                 [R.contestant_row(new.id, c) for c in new.contestants])
            return new
        return self._write(f"update session {session_id}", step)

    def rename_session(self, session_id: str, title: str | None) -> SessionRecord:
        """Give a session a title (None or blank: no title)."""
        title = title.strip() if title else None
        return self.update_session(session_id, title=title or None)

    def delete_session(self, session_id: str, at: float | None = None) -> SessionRecord:
        """Delete a session and everything recorded in it (turns, answers,
        votes, tags, checks, reveals, claims, and the images no other turn
        names), leaving a tombstone (`deleted_session`) so that a merge or an
        import never brings it back. Returns the record as it was."""
        at = time.time() if at is None else at

        def step(conn: sqlite3.Connection) -> SessionRecord:
            sid = self._resolve_session(session_id)
            rec = self._session_record(sid)
            conn.execute("INSERT OR REPLACE INTO deleted_session (id, deleted_at) VALUES (?, ?)", [sid, at])
            hashes = [r[0] for r in conn.execute(
                "SELECT DISTINCT json_extract(j.value, '$.sha256') FROM turn, json_each(turn.images) j "
                "WHERE turn.session_id = ? AND json_valid(turn.images)", [sid]) if r[0]]
            conn.execute("DELETE FROM session WHERE id = ?", [sid])   # the rest goes by ON DELETE CASCADE
            if hashes:
                conn.execute(
                    f"DELETE FROM image WHERE sha256 IN ({','.join('?' * len(hashes))}) AND sha256 NOT IN "
                    "(SELECT json_extract(j.value, '$.sha256') FROM turn, json_each(turn.images) j "
                    " WHERE json_valid(turn.images))", hashes)
            return rec
        return self._write(f"delete session {session_id}", step)

    def deleted_sessions(self) -> dict[str, float]:
        """The tombstones: deleted session id -> when it was deleted."""
        return dict(self.conn.execute("SELECT id, deleted_at FROM deleted_session").fetchall())

    def reveal_session(self, session_id: str, at: float | None = None) -> None:
        """Identities become visible: the session and every vote not yet revealed."""
        at = time.time() if at is None else at

        def step(conn: sqlite3.Connection) -> None:
            sid = self._resolve_session(session_id)
            conn.execute("UPDATE session SET revealed_at = ? WHERE id = ? AND revealed_at IS NULL", [at, sid])
            conn.execute("UPDATE vote SET revealed_at = ? WHERE session_id = ? AND revealed_at IS NULL", [at, sid])
        self._write(f"reveal session {session_id}", step)

    # ------------------------------------------------------------------ turns and outputs

    def add_turn(self, rec: TurnRecord, images: Sequence[tuple[str, str, bytes]] = ()) -> None:
        """Save a turn; `images` (sha256, mime, bytes) are the bytes of the
        images it names, kept once per hash, in the same transaction."""
        def step(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT OR IGNORE INTO image (sha256, mime, size, data) VALUES (?, ?, ?, ?)",
                             [(sha, mime, len(data), data) for sha, mime, data in images])
            conn.execute(R.insert_sql("turn", R.TURN_COLS), R.turn_row(rec))
        self._write(f"save turn {rec.id}", step)

    def images(self, hashes: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """sha256 -> (mime, bytes) of the stored images among `hashes`."""
        if not hashes:
            return {}
        wanted = sorted(set(hashes))
        try:
            return {sha: (mime, bytes(data)) for sha, mime, data in self.conn.execute(
                f"SELECT sha256, mime, data FROM image WHERE sha256 IN ({','.join('?' * len(wanted))})", wanted)}
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "read images") from None

    def start_output(self, rec: OutputRecord) -> None:
        """Record an output that has begun streaming (status "streaming")."""
        rec = rec.model_copy(update={"status": "streaming"})
        now = time.time()
        self._write(f"start output {rec.id}", lambda conn: conn.execute(
            R.insert_sql("output", R.OUTPUT_COLS), R.output_row(rec, now, self.writer)))
        self._mine.add(rec.id)

    def checkpoint_output(self, output_id: str, text: str, reasoning: str | None = None,
                          chunk_ms: list[int] | None = None, chunk_chars: list[int] | None = None) -> None:
        """Save a streaming output's text so far (the sessions layer calls it ~1/s)."""
        args = (R.sqlite_text(text), R.sqlite_text(reasoning), R.pack_ints(chunk_ms or []),
                R.pack_ints(chunk_chars or []), time.time(),
                self.writer, output_id)
        self._write(f"checkpoint output {output_id}", lambda conn: conn.execute(
            "UPDATE output SET text = ?, reasoning = ?, chunk_ms = ?, chunk_chars = ?, updated = ?, "
            "writer = ? WHERE id = ? AND status = 'streaming'", args))

    def finish_output(self, rec: OutputRecord) -> None:
        """The final record replaces the streaming one (inserted if none was started)."""
        def step(conn: sqlite3.Connection) -> None:
            upsert_output(conn, rec, time.time())
        self._write(f"save output {rec.id}", step)
        self._mine.discard(rec.id)

    # ------------------------------------------------------------------ votes, tags, checks

    def add_vote(self, rec: VoteRecord) -> None:
        problem = vote_problem(rec)
        if problem:
            raise StoreError(problem)
        self._write(f"save vote {rec.id}", lambda conn: insert_vote(conn, _superseding(conn, rec)))

    def retract_vote(self, vote_id: str, at: float | None = None) -> bool:
        """Withdraw a vote (undo): it is kept with `retracted_at` and no longer
        counts; the vote it had superseded stays superseded, so its case is
        unvoted until someone votes again. False if it was already withdrawn."""
        at = time.time() if at is None else at

        def write(conn) -> bool:
            changed = conn.execute("UPDATE vote SET retracted_at = ?, current = 0 "
                                   "WHERE id = ? AND retracted_at IS NULL", [at, vote_id]).rowcount > 0
            conn.execute("UPDATE vote_contestant SET current = 0 WHERE vote_id = ?", [vote_id])
            return changed

        return self._write(f"retract vote {vote_id}", write)

    def reveal_votes(self, vote_ids: list[str], at: float | None = None) -> int:
        """Record that these votes' models were shown (the vote queue's reveal
        at the end): their cases count as revealed, the session's other cases
        stay hidden. Returns how many were not revealed before."""
        at = time.time() if at is None else at
        ids = list(vote_ids)

        def write(conn) -> int:
            return sum(conn.execute("UPDATE vote SET revealed_at = ? WHERE id = ? AND revealed_at IS NULL",
                                    [at, i]).rowcount for i in ids)

        return self._write("record the reveal of votes", write)

    def add_reveal(self, rec: RevealRecord) -> None:
        """Record that the rater was shown the models of this turn's answers
        without voting (its case or turn counts as revealed from now on)."""
        self._write(f"save reveal {rec.id}", lambda conn: conn.execute(
            R.insert_sql("reveal", R.REVEAL_COLS), R.reveal_row(rec)))

    def add_gold_check(self, rec: GoldCheckRecord) -> None:
        """A gold pair judged in the vote queue (rater quality; not a vote)."""
        self._write(f"save gold check {rec.id}", lambda conn: conn.execute(
            R.insert_sql("gold_check", R.GOLD_COLS), R.gold_row(rec)))

    def retract_gold_check(self, check_id: str, at: float | None = None) -> bool:
        """Withdraw a gold judgement (undo in the queue): kept with `retracted_at`."""
        at = time.time() if at is None else at
        return self._write(f"retract gold check {check_id}", lambda conn: conn.execute(
            "UPDATE gold_check SET retracted_at = ? WHERE id = ? AND retracted_at IS NULL",
            [at, check_id]).rowcount > 0)

    def add_blind_guess(self, rec: BlindGuessRecord) -> None:
        """The rater's guess of which model wrote an answer (the blinding audit)."""
        self._write(f"save blinding guess {rec.id}", lambda conn: conn.execute(
            R.insert_sql("blind_guess", R.GUESS_COLS), R.guess_row(rec)))

    def add_tag(self, rec: TagRecord) -> None:
        self._write(f"save tag {rec.id}", lambda conn: conn.execute(R.insert_sql("tag", R.TAG_COLS),
                                                                  R.tag_row(rec)))

    def add_score(self, rec: ScoreRecord) -> None:
        """Record a score (a later one of the same rater, answer and dimension supersedes it)."""
        self._write(f"save score {rec.id}", lambda conn: conn.execute(R.insert_sql("score", R.SCORE_COLS),
                                                                      R.score_row(rec)))

    def add_tag_once(self, rec: TagRecord) -> bool:
        """Add `rec` unless its output ever had this tag from this rater (a tag
        a rater removed stays removed): True when it was added."""
        def write(conn: sqlite3.Connection) -> bool:
            if conn.execute("SELECT 1 FROM tag WHERE output_id = ? AND tag = ? AND rater = ? LIMIT 1",
                            [rec.output_id, rec.tag, rec.rater]).fetchone():
                return False
            conn.execute(R.insert_sql("tag", R.TAG_COLS), R.tag_row(rec))
            return True

        return self._write(f"save tag {rec.id}", write)

    def remove_tag(self, tag_id: str, at: float | None = None) -> bool:
        """Remove a tag (the row is kept with `removed_at`, so a merge does not revive it)."""
        at = time.time() if at is None else at
        return self._write(f"remove tag {tag_id}", lambda conn: conn.execute(
            "UPDATE tag SET removed_at = ? WHERE id = ? AND removed_at IS NULL", [at, tag_id]).rowcount > 0)

    def add_check_result(self, rec: CheckResultRecord) -> None:
        self._write(f"save check result {rec.id}", lambda conn: conn.execute(
            R.insert_sql("check_result", R.CHECK_COLS), R.check_row(rec)))

    # ------------------------------------------------------------------ `lineup run`: shared session, claims

    def open_run_session(self, rec: SessionRecord, key: str,
                         differences: Callable[[SessionRecord], list[str]]
                         ) -> tuple[SessionRecord, bool, tuple[str, list[str]] | None]:
        """The newest run session with this `run_key` in which `differences`
        finds none: (it, True, None). Otherwise `rec` is created: (rec, False,
        (id, differences) of the newest one with the key, if any). One write
        transaction, so two processes starting together get the same session."""
        def step(conn: sqlite3.Connection):
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM session WHERE kind = 'run' AND json_extract(meta, '$.run_key') = ? "
                "ORDER BY created DESC, id DESC", [key])]
            drift = None
            for sid in ids:
                existing = self._session_record(sid)
                found = differences(existing)
                if not found:
                    return existing, True, None
                drift = drift or (sid, found)
            insert_session(conn, rec)
            return rec, False, drift
        return self._write(f"open run session {rec.id}", step)

    def claim_unit(self, session_id: str, unit: str, owner: str) -> str:
        """Take one unit of a run for `owner`: "mine", "done" (finished by
        anyone), or the token of the live process that holds it. A claim whose
        process is gone (or, from another host, older than STALE_STREAM_S) is
        taken over."""
        def step(conn: sqlite3.Connection) -> str:
            row = conn.execute("SELECT owner, claimed, done FROM run_claim WHERE session_id = ? AND unit = ?",
                               [session_id, unit]).fetchone()
            if row is not None:
                held_by, claimed, done = row
                if done:
                    return "done"
                if held_by and held_by != owner and owner_alive(held_by, claimed, STALE_STREAM_S):
                    return held_by
            conn.execute("INSERT INTO run_claim (session_id, unit, owner, claimed, done) VALUES (?, ?, ?, ?, 0) "
                         "ON CONFLICT(session_id, unit) DO UPDATE SET owner = excluded.owner, "
                         "claimed = excluded.claimed", [session_id, unit, owner, time.time()])
            return "mine"
        return self._write(f"claim run work in session {session_id}", step)

    def finish_claim(self, session_id: str, unit: str, owner: str, done: bool) -> None:
        """Release a claim: marked done, or free for the next run to retry."""
        sql = ("UPDATE run_claim SET owner = NULL, done = 1 WHERE session_id = ? AND unit = ? AND owner = ?"
               if done else "DELETE FROM run_claim WHERE session_id = ? AND unit = ? AND owner = ? AND done = 0")
        self._write(f"release run work in session {session_id}",
                    lambda conn: conn.execute(sql, [session_id, unit, owner]))

    def release_claims(self, session_id: str, owner: str) -> None:
        """Every unfinished claim of `owner` in a session becomes free (a run that stops)."""
        self._write(f"release run work in session {session_id}", lambda conn: conn.execute(
            "DELETE FROM run_claim WHERE session_id = ? AND owner = ? AND done = 0", [session_id, owner]))

    def run_unit(self, session_id: str, case_id: str, repeat_index: int, contestant: str
                 ) -> tuple[list[TurnRecord], list[OutputRecord], list[CheckResultRecord]]:
        """What is recorded for one unit of a run, read fresh (another process
        may have written it): its turns, the contestant's outputs on them, and
        their check results."""
        try:
            conn = self.conn
            turns = [R.turn_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.TURN_COLS)} FROM turn WHERE session_id = ? AND case_id = ? AND repeat_index = ? "
                "ORDER BY follow_up_index, position, id", [session_id, case_id, repeat_index])]
            ids = [t.id for t in turns]
            marks = ", ".join("?" * len(ids))
            outputs = [R.output_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.READ['output'])} FROM output WHERE turn_id IN ({marks}) AND contestant = ? "
                "ORDER BY id", [*ids, contestant])] if ids else []
            out_ids = [o.id for o in outputs]
            checks = [R.check_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.CHECK_COLS)} FROM check_result WHERE output_id IN "
                f"({', '.join('?' * len(out_ids))}) ORDER BY id", out_ids)] if out_ids else []
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "read") from None
        return turns, outputs, checks

    def ensure_turn(self, rec: TurnRecord) -> TurnRecord:
        """The turn of a run for (session, case, repeat, follow-up): the one
        already recorded (by any process), else `rec`, saved at the next position."""
        def step(conn: sqlite3.Connection) -> TurnRecord:
            row = conn.execute(
                f"SELECT {R.cols(R.TURN_COLS)} FROM turn WHERE session_id = ? AND case_id = ? AND repeat_index = ? "
                "AND follow_up_index = ? ORDER BY position, id LIMIT 1",
                [rec.session_id, rec.case_id, rec.repeat_index, rec.follow_up_index]).fetchone()
            if row is not None:
                return R.turn_from(row)
            (last,) = conn.execute("SELECT max(position) FROM turn WHERE session_id = ?", [rec.session_id]).fetchone()
            new = rec.model_copy(update={"position": 0 if last is None else last + 1})
            conn.execute(R.insert_sql("turn", R.TURN_COLS), R.turn_row(new))
            return new
        return self._write(f"save turn {rec.id}", step)


def connect_readonly(path: str | os.PathLike, **kw: Any) -> sqlite3.Connection:
    """A read-only connection to the database at `path` that never writes
    beside it. A WAL database in a read-only place (a mounted share, a folder
    we cannot write) cannot get its -shm file; nobody can write there either,
    so it is read as immutable, which is safe unless a -wal file beside it
    holds commits not yet in the file: that is refused (sqlite3.OperationalError),
    since immutable reading would silently leave them out."""
    path = Path(path)
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, **kw)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise sqlite3.OperationalError(f"its write-ahead log ({wal.name}) holds changes not yet in the file, and "
                                       "it is in a read-only place; copy both files somewhere writable")
    return sqlite3.connect(uri + "&immutable=1", uri=True, **kw)


def _not_a_database(exc: BaseException) -> bool:
    """SQLite found the file is not a database (SQLITE_NOTADB): a foreign file, left as it was."""
    return getattr(exc, "sqlite_errorname", None) == "SQLITE_NOTADB" or "file is not a database" in str(exc)


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at `path`, None if there is none."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_dev, st.st_ino


def _retry_busy(store: Store, action: str, attempt: Callable[[], T]) -> T:
    """Run `attempt` again while the database is busy (another process holds
    the write lock), backing off up to WRITE_RETRY_S; any other failure, or
    still busy then, is the store's error for `action`."""
    deadline = time.monotonic() + WRITE_RETRY_S
    delay = 0.005
    while True:
        try:
            return attempt()
        except sqlite3.Error as exc:
            if _is_busy(exc) and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
                continue
            raise store._translate(exc, action) from None


def _begin_immediate(store: Store) -> None:
    """BEGIN IMMEDIATE with the same busy retry as single writes."""
    store._check_writable("write")
    _retry_busy(store, "start a write", lambda: store.conn.execute("BEGIN IMMEDIATE"))


def _superseding(conn: sqlite3.Connection, rec: VoteRecord) -> VoteRecord:
    """A person's vote as it is saved, under the write lock: one current
    vote per rater per judged unit (a case, or a chat turn) and set of models
    judged. A current vote of the same rater on the same unit and models
    (cast by another process on this database a moment earlier, whose queue
    did not know of it) is superseded by this one, and recorded as such (so
    a merge elsewhere supersedes it too). Judges' votes (both orders, several
    prompts) are left as cast."""
    if rec.rater_kind != "human" or rec.retracted_at is not None:
        return rec
    models = sorted(rec.mapping.values())
    # the unit's turns first (the `turn_case` index), then their votes (`vote_turn`):
    # a scan of the session's votes made each vote cost more than the last
    earlier = [vid for vid, mapping in conn.execute(
        f"SELECT v.id, v.mapping FROM vote v WHERE v.turn_id IN ({UNIT_TURNS_SQL}) "
        "AND +v.session_id = ? AND v.rater = ? AND v.rater_kind = 'human' AND v.current = 1 AND v.id != ? "
        "ORDER BY v.created, v.id",
        [rec.turn_id, rec.session_id, rec.rater, rec.id]) if _models_judged(mapping) == models]
    others = [vid for vid in earlier if vid != rec.supersedes]
    if not others:
        return rec
    conn.executemany("UPDATE vote SET current = 0 WHERE id = ?", [(vid,) for vid in others])
    conn.executemany("UPDATE vote_contestant SET current = 0 WHERE vote_id = ?", [(vid,) for vid in others])
    return rec if rec.supersedes else rec.model_copy(update={"supersedes": others[-1]})


def _models_judged(mapping: Any) -> list[str] | None:
    try:
        found = json.loads(mapping)
        return sorted(found.values()) if isinstance(found, dict) else None
    except (TypeError, ValueError):
        return None
