"""One session read in pages, for exports whose memory must not grow with
the session (`core.exchange.export`; issue 32: a 100k-answer export held
every answer at once).

`SessionReader` opens one read transaction (a consistent snapshot however
long the export takes, while other processes write) and hands out:

- `pages(size)`: the session's turns in order (`position`, `id`), `size` at
  a time, each with the outputs, votes, tags, checks and reveals on those
  turns, as a `LoadedSession` of that slice (the lists in the orders
  `Store.load_session` gives them, so a slice reads as the whole would);
- `vote_rows(size)`: every vote in `load_session`'s order (`created`, `id`)
  with its turn and the turn's index in the session, through one cursor;
- what a slice cannot know alone: the votes some vote replaces
  (`superseded`), the judged units and those revealed (`unit_count`,
  `revealed_units`). These grow with the session, but as ids and short
  keys, not records (a few MB for 100k answers).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

from store import rows as R
from store.db import Store
from store.reads import gc_paused
from store.records import (
    UNIT_KEY_SQL,
    CheckResultRecord,
    LoadedSession,
    SessionRecord,
    ScoreRecord,
    TagRecord,
    TurnRecord,
    VoteRecord,
)

#: Turns per page: outputs, votes, tags and checks of this many turns are held at once.
PAGE_TURNS = 256
#: Votes per fetch of `vote_rows`.
PAGE_VOTES = 1024
#: Ids in one `IN (...)` (SQLite's oldest limit on parameters is 999).
_IDS_PER_QUERY = 500


@dataclass(slots=True)
class VoteRow:
    """A vote with its turn (None when the turn is not in the session) and that turn's index."""

    vote: VoteRecord
    turn: TurnRecord | None
    index: int | None


class SessionReader:
    """See the module doc. Use as a context manager around every read."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.conn = store.conn
        self._session_id = session_id
        self.session: SessionRecord
        self._began = False

    def __enter__(self) -> "SessionReader":
        try:
            if not self.conn.in_transaction:
                self.conn.execute("BEGIN")
                self._began = True
            sid = self.store._resolve_session(self._session_id)
            self.session = self.store._session_record(sid)
        except sqlite3.DatabaseError as exc:
            self._end()
            raise self.store._translate(exc, "read") from None
        except BaseException:
            self._end()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._end()

    def _end(self) -> None:
        if self._began:
            self._began = False
            try:
                self.conn.execute("ROLLBACK")   # nothing was written: only the snapshot ends
            except sqlite3.Error:
                pass

    def _rows(self, sql: str, params: list) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self.store._translate(exc, "read") from None

    # -- what a page cannot know alone
    def superseded(self) -> set[str]:
        """Ids of the session's votes that another of its votes replaces."""
        return {r[0] for r in self._rows(
            "SELECT supersedes FROM vote WHERE session_id = ? AND supersedes IS NOT NULL", [self.session.id])}

    def unit_count(self) -> int:
        """Judged units (`records.unit_key`) among the session's turns."""
        return self._rows(f"SELECT count(DISTINCT {UNIT_KEY_SQL}) FROM turn t WHERE t.session_id = ?",
                          [self.session.id])[0][0]

    def revealed_units(self) -> set[str]:
        """The units revealed by a vote revealed on one of their turns, or by the rater without a vote."""
        sid = self.session.id
        return {r[0] for r in self._rows(
            f"SELECT {UNIT_KEY_SQL} FROM vote v JOIN turn t ON t.id = v.turn_id "
            "WHERE v.session_id = ? AND v.revealed_at IS NOT NULL AND t.session_id = ? "
            f"UNION SELECT {UNIT_KEY_SQL} FROM reveal r JOIN turn t ON t.id = r.turn_id "
            "WHERE r.session_id = ? AND t.session_id = ?", [sid, sid, sid, sid])}

    # -- the slices
    def pages(self, size: int | None = None) -> Iterator[LoadedSession]:
        """The session's turns `size` (`PAGE_TURNS`) at a time, each slice with everything on its turns."""
        size = size or PAGE_TURNS
        sid = self.session.id
        after: tuple[int, str] | None = None
        while True:
            with gc_paused():
                keyset = "" if after is None else " AND (position > ? OR (position = ? AND id > ?))"
                params: list = [sid] if after is None else [sid, after[0], after[0], after[1]]
                turns = [R.turn_from(r) for r in self._rows(
                    f"SELECT {R.cols(R.TURN_COLS)} FROM turn WHERE session_id = ?{keyset} "
                    "ORDER BY position, id LIMIT ?", [*params, size])]
                if not turns:
                    return
                after = (turns[-1].position, turns[-1].id)
                page = self._page(turns)
            yield page
            if len(turns) < size:
                return

    def _page(self, turns: list[TurnRecord]) -> LoadedSession:
        sid = self.session.id
        ids = [t.id for t in turns]
        marks = ",".join("?" * len(ids))
        outputs = [R.output_from(r) for r in self._rows(
            f"SELECT {R.cols(R.READ['output'])} FROM output WHERE session_id = ? AND turn_id IN ({marks}) "
            "ORDER BY id", [sid, *ids])]
        votes = [R.vote_from(r) for r in self._rows(
            f"SELECT {R.cols(R.READ['vote'])} FROM vote WHERE session_id = ? AND turn_id IN ({marks}) "
            "ORDER BY created, id", [sid, *ids])]
        tags: list[TagRecord] = []
        checks: list[CheckResultRecord] = []
        scores: list[ScoreRecord] = []
        for start in range(0, len(outputs), _IDS_PER_QUERY):   # a turn may hold many attempts
            out_ids = [o.id for o in outputs[start:start + _IDS_PER_QUERY]]
            out_marks = ",".join("?" * len(out_ids))
            tags += [R.tag_from(r) for r in self._rows(
                f"SELECT {R.cols(R.READ['tag'])} FROM tag WHERE output_id IN ({out_marks}) "
                "AND removed_at IS NULL", out_ids)]
            checks += [R.check_from(r) for r in self._rows(
                f"SELECT {R.cols(R.CHECK_COLS)} FROM check_result WHERE output_id IN ({out_marks})", out_ids)]
            scores += [R.score_from(r) for r in self._rows(
                f"SELECT {R.cols(R.SCORE_COLS)} FROM score WHERE output_id IN ({out_marks})", out_ids)]
        tags.sort(key=lambda t: (t.created, t.id))       # the orders of `load_session`
        checks.sort(key=lambda c: c.id)
        scores.sort(key=lambda s: (s.created, s.id))
        reveals = [R.reveal_from(r) for r in self._rows(
            f"SELECT {R.cols(R.REVEAL_COLS)} FROM reveal WHERE session_id = ? AND turn_id IN ({marks}) "
            "ORDER BY created, id", [sid, *ids])]
        return LoadedSession.model_construct(session=self.session, turns=turns, outputs=outputs, votes=votes,
                                             tags=tags, checks=checks, reveals=reveals, scores=scores)

    def vote_rows(self, size: int | None = None) -> Iterator[VoteRow]:
        """Every vote of the session in `load_session`'s order, with its turn and the turn's index,
        fetched `size` (`PAGE_VOTES`) at a time."""
        size = size or PAGE_VOTES
        sid = self.session.id
        vote_cols = R.cols(R.READ["vote"], "v.")
        turn_cols = R.cols(R.TURN_COLS, "t.")
        try:
            cursor = self.conn.execute(
                f"SELECT {vote_cols}, n.idx, {turn_cols} FROM vote v "
                "LEFT JOIN (SELECT id, row_number() OVER (ORDER BY position, id) - 1 AS idx "
                "           FROM turn WHERE session_id = ?) n ON n.id = v.turn_id "
                "LEFT JOIN turn t ON t.id = n.id "
                "WHERE v.session_id = ? ORDER BY v.created, v.id", [sid, sid])
            nv = len(R.READ["vote"])
            while True:
                with gc_paused():
                    batch = cursor.fetchmany(size)
                    out = [VoteRow(R.vote_from(r[:nv]), None if r[nv] is None else R.turn_from(r[nv + 1:]),
                                   r[nv]) for r in batch]
                yield from out
                if len(batch) < size:
                    return
        except sqlite3.DatabaseError as exc:
            raise self.store._translate(exc, "read") from None
