"""The Store's reads (a base class of `store.db.Store`): sessions by id or
prefix, a whole session, the sessions list, prompt history, search, the
checks a report or an export runs on numbers out of range, counts.

Why apart from `store/db.py`: that file owns the one connection every write
goes through (retry, transaction, file identity); these only read through
`self.conn` and translate errors with `self._translate`."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from store import rows as R
from store.errors import StoreError
from store.records import (
    UNIT_KEY_SQL,
    LoadedSession,
    ModelVoteCount,
    SearchHit,
    SessionRecord,
    SessionSummary,
)

if TYPE_CHECKING:
    from pathlib import Path


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Building thousands of records trips the cyclic GC again and again
    (it rescans everything each time); none of them form cycles. Pausing it
    halves the time to load a long session."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Reads:
    conn: sqlite3.Connection
    path: Path

    def _translate(self, exc: BaseException, action: str) -> Exception:
        """The error to raise for `exc` (the Store's own, naming the file)."""
        raise NotImplementedError


    def _resolve_session(self, session_id: str) -> str:
        given = session_id.strip()
        for exact in dict.fromkeys((given, given.upper())):   # as written first: an id from a merged file
            if self.conn.execute("SELECT 1 FROM session WHERE id = ?", [exact]).fetchone():
                return exact
        sid = given.upper()
        if sid and sid.isalnum():
            found = [r[0] for r in self.conn.execute(
                "SELECT id FROM session WHERE id >= ? AND id < ? ORDER BY id LIMIT 6", [sid, sid + "~"])]
            if len(found) == 1:
                return found[0]
            if found:
                raise StoreError(f"session id {session_id!r} is ambiguous in {self.path}: "
                                 f"{', '.join(found[:5])}{' ...' if len(found) > 5 else ''}")
        gone = self.conn.execute("SELECT deleted_at FROM deleted_session WHERE id = ?", [sid]).fetchone()
        if gone is not None:
            raise StoreError(f"session {session_id!r} was deleted from {self.path} "
                             f"({time.strftime('%Y-%m-%d %H:%M', time.localtime(gone[0]))})")
        raise StoreError(f"no session {session_id!r} in {self.path}")

    def resolve_session(self, session_id: str) -> str:
        """The full id of a session given its id or a unique prefix."""
        try:
            return self._resolve_session(session_id)
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "read") from None

    def short_ids(self, ids: Sequence[str], minimum: int = 8) -> dict[str, str]:
        """Each id's shortest prefix, of `minimum` characters or more, that
        names its session alone in this database (what `resolve_session`
        takes): one more character than it shares with either neighbour in id
        order. An id a prefix cannot name (not capitals and digits) stays whole."""
        out: dict[str, str] = {}
        for sid in ids:
            if not (sid.isalnum() and sid.isascii() and sid == sid.upper()):
                out[sid] = sid
                continue
            before = self.conn.execute("SELECT max(id) FROM session WHERE id < ?", [sid]).fetchone()[0]
            after = self.conn.execute("SELECT min(id) FROM session WHERE id > ?", [sid]).fetchone()[0]
            shared = max(len(os.path.commonprefix([sid, other])) for other in (before or "", after or ""))
            out[sid] = sid[:max(minimum, shared + 1)]
        return out

    def latest_session_id(self, kind: str | None = None) -> str | None:
        sql = "SELECT id FROM session" + (" WHERE kind = ?" if kind else "") + " ORDER BY created DESC, id DESC LIMIT 1"
        row = self.conn.execute(sql, [kind] if kind else []).fetchone()
        return row[0] if row else None

    def _session_record(self, sid: str) -> SessionRecord:
        row = self.conn.execute(f"SELECT {R.cols(R.SESSION_COLS)} FROM session WHERE id = ?", [sid]).fetchone()
        contestants = [R.contestant_from(r) for r in self.conn.execute(
            f"SELECT {R.cols(R.CONTESTANT_COLS)} FROM contestant WHERE session_id = ? ORDER BY position, alias",
            [sid])]
        return R.session_from(row, contestants)

    def get_session(self, session_id: str) -> SessionRecord:
        try:
            return self._session_record(self._resolve_session(session_id))
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "read") from None

    def load_session(self, session_id: str) -> LoadedSession:
        """Everything recorded about one session, for replay and export."""
        with gc_paused():
            return self._load_session(session_id)

    def _load_session(self, session_id: str) -> LoadedSession:
        try:
            conn = self.conn
            sid = self._resolve_session(session_id)
            session = self._session_record(sid)
            turns = [R.turn_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.TURN_COLS)} FROM turn WHERE session_id = ? ORDER BY position, id", [sid])]
            outputs = [R.output_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.READ['output'])} FROM output WHERE session_id = ? ORDER BY id", [sid])]
            votes = [R.vote_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.READ['vote'])} FROM vote WHERE session_id = ? ORDER BY created, id", [sid])]
            tags = [R.tag_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.READ['tag'], 'tag.')} FROM tag JOIN output ON output.id = tag.output_id "
                "WHERE output.session_id = ? AND tag.removed_at IS NULL ORDER BY tag.created, tag.id", [sid])]
            checks = [R.check_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.CHECK_COLS, 'c.')} FROM check_result c JOIN output ON output.id = c.output_id "
                "WHERE output.session_id = ? ORDER BY c.id", [sid])]
            reveals = [R.reveal_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.REVEAL_COLS)} FROM reveal WHERE session_id = ? ORDER BY created, id", [sid])]
            scores = [R.score_from(r) for r in conn.execute(
                f"SELECT {R.cols(R.SCORE_COLS, 's.')} FROM score s JOIN output ON output.id = s.output_id "
                "WHERE output.session_id = ? ORDER BY s.created, s.id", [sid])]
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "read") from None
        return LoadedSession.model_construct(session=session, turns=turns, outputs=outputs, votes=votes,
                                             tags=tags, checks=checks, reveals=reveals, scores=scores)

    def list_sessions(self, limit: int | None = None, kind: str | None = None,
                      search: str | None = None) -> list[SessionSummary]:
        """Newest first. `search` matches titles, prompts and outputs."""
        where: list[str] = []
        params: list[Any] = []
        if kind:
            where.append("s.kind = ?")
            params.append(kind)
        if search:
            ids = {h.session_id for h in self.search(search, limit=None)}
            like = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            ids.update(r[0] for r in self.conn.execute(
                "SELECT id FROM session WHERE title LIKE ? ESCAPE '\\' OR id LIKE ? ESCAPE '\\'", [like, like]))
            if not ids:
                return []
            where.append(f"s.id IN ({','.join('?' * len(ids))})")
            params.extend(sorted(ids))
        sql = ("SELECT s.id, s.created, s.kind, s.title, s.blind, s.revealed_at, s.is_demo, "
               "(SELECT json_group_array(alias) FROM (SELECT alias FROM contestant c "
               "  WHERE c.session_id = s.id ORDER BY position, alias)), "
               "(SELECT count(*) FROM turn t WHERE t.session_id = s.id), "
               "(SELECT count(*) FROM vote v WHERE v.session_id = s.id AND v.current = 1 AND v.rater_kind = 'human'), "
               "(SELECT count(*) FROM vote v WHERE v.session_id = s.id AND v.current = 1 AND v.rater_kind != 'human'), "
               # judged units, counted where some may still be hidden (blind, not revealed as a whole)
               "CASE WHEN s.blind AND s.revealed_at IS NULL THEN "
               f"(SELECT count(DISTINCT {UNIT_KEY_SQL}) FROM turn t WHERE t.session_id = s.id) END, "
               # revealed: by a revealed vote, or by the rater without a vote
               "CASE WHEN s.blind AND s.revealed_at IS NULL THEN "
               f"(SELECT count(DISTINCT unit) FROM (SELECT {UNIT_KEY_SQL} AS unit FROM vote v "
               "  JOIN turn t ON t.id = v.turn_id WHERE v.session_id = s.id AND v.revealed_at IS NOT NULL "
               f"  UNION ALL SELECT {UNIT_KEY_SQL} FROM reveal r JOIN turn t ON t.id = r.turn_id "
               "  WHERE r.session_id = s.id)) "
               "END "
               "FROM session s" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY s.created DESC, s.id DESC")
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        try:
            out = []
            for (sid, created, k, title, blind, _revealed, demo, aliases, turns, votes, judge_votes, units,
                 revealed_units) in self.conn.execute(sql, params):
                # units None: not blind, or revealed as a whole
                hidden = units is not None and (not units or revealed_units < units)
                out.append(SessionSummary(id=sid, created=created, kind=k, title=title,
                                          contestants=None if hidden else json.loads(aliases),
                                          turns=turns, votes=votes, is_demo=bool(demo), blind=bool(blind),
                                          units=units, revealed_units=revealed_units, judge_votes=judge_votes))
            return out
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "list sessions") from None

    def prompt_history(self, limit: int = 500, session_id: str | None = None) -> list[str]:
        """Prompts typed in chats (chat and rerun sessions, not runs or imports),
        newest first, each once; only those of `session_id` when given."""
        where = "s.kind IN ('chat', 'rerun')" if session_id is None else "t.session_id = ?"
        params: list[Any] = [] if session_id is None else [self._resolve_session(session_id)]
        try:
            rows = self.conn.execute(
                "SELECT t.user_message, max(t.created) AS last FROM turn t JOIN session s ON s.id = t.session_id "
                f"WHERE {where} AND t.user_message != '' GROUP BY t.user_message ORDER BY last DESC LIMIT ?",
                [*params, int(limit)]).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "read the prompt history") from None
        return [r[0] for r in rows]

    def search(self, text: str, limit: int | None = 100) -> list[SearchHit]:
        """Full-text search over prompts and outputs (words matched as typed, all required)."""
        words = re.findall(r"\w+", text)
        if not words:
            return []
        query = " ".join('"' + w + '"' for w in words)
        sql = ("SELECT * FROM ("
               "SELECT t.session_id, t.id, NULL, 'prompt', snippet(turn_fts, 0, '[', ']', '…', 12), turn_fts.rank "
               "FROM turn_fts JOIN turn t ON t.rowid = turn_fts.rowid WHERE turn_fts MATCH ? "
               "UNION ALL "
               "SELECT o.session_id, o.turn_id, o.id, 'output', snippet(output_fts, 0, '[', ']', '…', 12), "
               "output_fts.rank FROM output_fts JOIN output o ON o.rowid = output_fts.rowid "
               "WHERE output_fts MATCH ?) ORDER BY 6")
        params: list[Any] = [query, query]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        try:
            return [SearchHit(session_id=s, turn_id=t, output_id=o, kind=k, snippet=snip)
                    for s, t, o, k, snip, _ in self.conn.execute(sql, params)]
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "search") from None

    # ------------------------------------------------------------------ report queries

    def votes_per_model(self, session_ids: list[str] | None = None,
                        exclude_demo: bool = False, rater_kind: str = "human") -> list[ModelVoteCount]:
        """Current votes each model (alias) took part in, with outcomes; most
        votes first. People's votes only unless `rater_kind` says "judge"."""
        where, params = ["current = 1", "vote_id IN (SELECT id FROM vote WHERE rater_kind = ?)"], [rater_kind]
        if session_ids is not None:
            ids = [self._resolve_session(s) for s in session_ids]
            where.append(f"vote_id IN (SELECT id FROM vote WHERE session_id IN ({','.join('?' * len(ids))}))")
            params.extend(ids)
        if exclude_demo:
            where.append("vote_id NOT IN (SELECT v.id FROM vote v JOIN session s ON s.id = v.session_id "
                         "WHERE s.is_demo = 1)")
        sql = ("SELECT alias, count(*), sum(outcome = 'win'), sum(outcome = 'loss'), sum(outcome = 'tie'), "
               "sum(outcome = 'bad') FROM vote_contestant WHERE " + " AND ".join(where)
               + " GROUP BY alias ORDER BY 2 DESC, alias")
        try:
            return [ModelVoteCount(alias=a, votes=n, wins=w, losses=lo, ties=t, bad=b)
                    for a, n, w, lo, t, b in self.conn.execute(sql, params)]
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "count votes") from None

    def query(self, sql: str, params: list[Any] | tuple = ()) -> list[dict[str, Any]]:
        """Rows of a read query as dicts (for reports that want plain SQL)."""
        try:
            cur = self.conn.execute(sql, params)
            names = [d[0] for d in cur.description or ()]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "query") from None

    def out_of_range(self, session_ids: list[str] | None = None, limit: int = 3,
                     tables: tuple[str, ...] = ("session", "turn", "output", "vote", "tag")) -> tuple[int, list[str]]:
        """Rows holding a number outside `store.bounds` (written by an
        older lineup or by hand): how many, and up to `limit` of them named
        ("output 01J..."). Readers warn with it instead of failing."""
        from store import bounds

        where = {"session": "s.id", "turn": "s.session_id", "output": "s.session_id", "vote": "s.session_id",
                 "tag": "(SELECT o.session_id FROM output o WHERE o.id = s.output_id)"}
        total = 0
        named: list[str] = []
        try:
            for table in tables:
                sid_col = where[table]
                cond = bounds.sql_out_of_range(table, "s")
                params: list[Any] = []
                if session_ids is not None:
                    cond = f"({cond}) AND {sid_col} IN ({','.join('?' * len(session_ids))})"
                    params = list(session_ids)
                (n,) = self.conn.execute(f"SELECT count(*) FROM {table} s WHERE {cond}", params).fetchone()
                total += n
                if n and len(named) < limit:
                    named += [f"{table} {r[0]}" for r in self.conn.execute(
                        f"SELECT s.id FROM {table} s WHERE {cond} ORDER BY s.id LIMIT ?",
                        [*params, limit - len(named)])]
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc, "read") from None
        return total, named

    def counts(self) -> dict[str, int]:
        """Rows per table (tests, import summaries)."""
        return {t: self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("session", "contestant", "turn", "output", "vote", "tag", "check_result")}
