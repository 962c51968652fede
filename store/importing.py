"""Import into a Store: our own JSONL export, Chatbot Arena battle records,
or another lineup database (a teammate's votes) merged idempotently.

A file is read and checked completely before anything is written, and then
written in one transaction: a malformed line (reported with its number)
means nothing from that file is imported. Re-importing adds nothing: our
records keep their ULIDs, Arena records get ids derived from their content."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lineup.inputs import InputError, decode, loads, open_input, read_input, shown_name, split_lines
from lineup.store import bounds, rows as R
from lineup.store.db import SQLITE_HEADER, Store, StoreError, insert_session, insert_vote, upsert_output
from lineup.store.exporting import EXPORT_FORMAT, EXPORT_VERSION
from lineup.store.records import (
    CheckResultRecord, ContestantRecord, OutputRecord, RevealRecord, SessionRecord, TagRecord, TurnRecord,
    VoteRecord,
)

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
TABLES = ("session", "contestant", "turn", "output", "vote", "vote_contestant", "tag", "check_result", "reveal")
ARENA_WINNERS = {"model_a": "A", "model_b": "B", "tie": "tie", "tie (bothbad)": "both_bad"}


class ImportFileError(StoreError):
    """Bad import input (not the database's fault): names the file and the line or item."""


class ImportSummary(BaseModel):
    source: str
    format: Literal["lineup-jsonl", "arena", "lineup-db", "mixed", "empty"]
    records: int = 0                     # lines / battles / sessions read
    added: dict[str, int] = Field(default_factory=dict)

    @property
    def total_added(self) -> int:
        return sum(self.added.values())


def derived_ulid(ms: int, key: str) -> str:
    """A ULID whose random part comes from `key`: the same record gets the same id on every import."""
    ms = max(0, min(int(ms), (1 << 48) - 1))
    value = (ms << 80) | int.from_bytes(hashlib.sha256(key.encode()).digest()[:10], "big")
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in range(25, -1, -1))


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err.get("loc", ()))
    return f"{loc}: {err.get('msg')}" if loc else str(err.get("msg"))


# ---------------------------------------------------------------------- our JSONL

class ExportLine(BaseModel):
    model_config = ConfigDict(extra="ignore")
    format: Literal["lineup.output"]
    version: int
    session: SessionRecord
    turn: TurnRecord
    output: OutputRecord
    votes: list[VoteRecord] = Field(default_factory=list)
    tags: list[TagRecord] = Field(default_factory=list)
    checks: list[CheckResultRecord] = Field(default_factory=list)
    reveals: list[RevealRecord] = Field(default_factory=list)


def _parse_export_line(obj: dict) -> ExportLine:
    line = ExportLine.model_validate(obj)
    if line.version > EXPORT_VERSION:
        raise ValueError(f"written by a newer lineup (export version {line.version}; this one reads "
                         f"up to {EXPORT_VERSION})")
    sid = line.session.id
    if line.turn.session_id != sid or line.output.session_id != sid or line.output.turn_id != line.turn.id:
        raise ValueError("session, turn and output ids do not match each other")
    for v in line.votes:
        if v.session_id != sid or v.turn_id != line.turn.id:
            raise ValueError(f"vote {v.id} does not belong to this turn")
        problem = R.validate_vote(v)
        if problem:
            raise ValueError(problem)
    for x in (*line.tags, *line.checks):
        if x.output_id != line.output.id:
            raise ValueError(f"{x.id} does not belong to output {line.output.id}")
    for r in line.reveals:
        if r.session_id != sid or r.turn_id != line.turn.id:
            raise ValueError(f"reveal {r.id} does not belong to this turn")
    return line


# ---------------------------------------------------------------------- Chatbot Arena

class ArenaBattle(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model_a: str = Field(min_length=1)
    model_b: str = Field(min_length=1)
    winner: str
    tstamp: float | None = None
    judge: str | None = None
    turn: int | None = None
    question_id: str | None = None
    conversation_a: list[dict] | None = None
    conversation_b: list[dict] | None = None

    @field_validator("winner")
    @classmethod
    def _known_winner(cls, value: str) -> str:
        if value not in ARENA_WINNERS:
            raise ValueError(f"{value!r} is not one of {', '.join(ARENA_WINNERS)}")
        return value


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal: [text, [images]] or parts
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "\n".join(parts)
    return "" if content is None else str(content)


def _exchanges(conversation: list[dict] | None) -> list[tuple[str, str | None]]:
    """(user message, the assistant answer that followed or None)."""
    out: list[tuple[str, str | None]] = []
    for m in conversation or []:
        role = m.get("role")
        if role == "user":
            out.append((_content(m), None))
        elif role == "assistant" and out and out[-1][1] is None:
            out[-1] = (out[-1][0], _content(m))
    return out


def _arena_records(battles: list[ArenaBattle], source_hash: str, now: float) -> tuple[SessionRecord, list]:
    """One "import" session per file: contestants are all the models met, one
    turn per user message, an output per answer, the vote on the last turn."""
    stamps = [b.tstamp for b in battles if b.tstamp is not None]
    created = min(stamps) if stamps else now
    sid = derived_ulid(int(min(stamps) * 1000) if stamps else 0, f"arena-session:{source_hash}")
    models = sorted({b.model_a for b in battles} | {b.model_b for b in battles})
    session = SessionRecord(
        id=sid, created=created, kind="import", title=f"Chatbot Arena battles ({len(battles)})",
        contestants=[ContestantRecord(alias=m, provider="arena", model=m, label=m, position=i)
                     for i, m in enumerate(models)],
        blind=True, revealed_at=max(stamps) if stamps else now,
        meta={"source": "chatbot_arena", "sha256": source_hash, "battles": len(battles)})
    records: list = []
    position = 0
    for i, b in enumerate(battles):
        key = f"arena:{source_hash}:{i}"
        ms = int(b.tstamp * 1000) if b.tstamp is not None else 0
        at = b.tstamp if b.tstamp is not None else created
        ex_a, ex_b = _exchanges(b.conversation_a), _exchanges(b.conversation_b)
        if not ex_a and not ex_b:
            ex_a = [("", None)]
        turn_id = None
        for j in range(max(len(ex_a), len(ex_b))):
            prompt = (ex_a[j] if j < len(ex_a) else ex_b[j])[0]
            turn_id = derived_ulid(ms, f"{key}:turn:{j}")
            records.append(TurnRecord(id=turn_id, session_id=sid, position=position, case_id=b.question_id,
                                      user_message=prompt, follow_up_index=j, created=at))
            position += 1
            for label, model, ex in (("A", b.model_a, ex_a), ("B", b.model_b, ex_b)):
                if j < len(ex) and ex[j][1] is not None:
                    records.append(OutputRecord(
                        id=derived_ulid(ms, f"{key}:out:{j}:{label}"), session_id=sid, turn_id=turn_id,
                        contestant=model, label=label, status="complete", text=ex[j][1], created=at))
        records.append(VoteRecord(
            id=derived_ulid(ms, f"{key}:vote"), session_id=sid, turn_id=turn_id, rater=b.judge or "arena",
            choice=ARENA_WINNERS[b.winner], mapping={"A": b.model_a, "B": b.model_b}, positions=["A", "B"],
            created=at, revealed_at=at))
    return session, records


# ---------------------------------------------------------------------- files

def import_file(store: Store, path: str | os.PathLike) -> ImportSummary:
    """Import `path` (lineup JSONL, Arena JSON/JSONL, or a lineup .db) into `store`."""
    path = Path(path)
    shown = shown_name(path)
    try:
        with open_input(path, limit=0) as fh:   # a database is read by SQLite, in pages
            head = fh.read(16)
    except InputError as exc:
        raise ImportFileError(str(exc)) from None
    if head == SQLITE_HEADER:
        return merge_database(store, path)
    ours: list[ExportLine] = []
    arena: list[ArenaBattle] = []
    try:
        raw = read_input(path)
        if raw.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"["):
            items = loads(decode(raw, shown), shown)
            for n, item in enumerate(items, 1):
                _classify(item, ours, arena, f"{shown}: item {n}")
            records = len(items)
        else:
            records = 0
            for lineno, line in split_lines(raw, shown):
                if isinstance(line, InputError):
                    raise line
                text = decode(line, shown, lineno)
                if not text.strip():
                    continue
                _classify(loads(text, shown, lineno), ours, arena, f"{shown}:{lineno}")
                records += 1
    except InputError as exc:
        raise ImportFileError(str(exc)) from None
    fmt = "empty" if not (ours or arena) else "mixed" if ours and arena else "lineup-jsonl" if ours else "arena"
    summary = ImportSummary(source=str(path), format=fmt, records=records)
    if not records:
        return summary
    source_hash = hashlib.sha256(
        "\n".join(b.model_dump_json() for b in arena).encode()).hexdigest() if arena else ""
    before = _counts(store.conn)
    with store.batch():
        conn = store.conn
        try:
            for line in ours:
                _write_export_line(conn, line)
            if arena:
                session, recs = _arena_records(arena, source_hash, time.time())
                insert_session(conn, session, "INSERT OR IGNORE")
                for rec in recs:
                    _write_record(conn, rec)
        except sqlite3.Error as exc:
            raise store._translate(exc, f"import {path}") from None
    after = _counts(store.conn)
    summary.added = {t: after[t] - before[t] for t in TABLES if t != "vote_contestant"}
    return summary


def _classify(item: Any, ours: list, arena: list, where: str) -> None:
    if not isinstance(item, dict):
        raise ImportFileError(f"{where}: expected a JSON object, got {type(item).__name__}")
    try:
        if item.get("format") == EXPORT_FORMAT:
            line = _parse_export_line(item)
            _check_numbers(line)
            ours.append(line)
        elif "model_a" in item or "winner" in item:
            battle = ArenaBattle.model_validate(item)
            problem = bounds.record_problem(
                "arena", battle.model_dump(exclude={"conversation_a", "conversation_b"}), name="")
            if problem:
                raise ValueError(problem)
            arena.append(battle)
        else:
            raise ValueError("neither a lineup export record (format: lineup.output) nor a Chatbot Arena "
                             "battle (model_a, model_b, winner)")
    except ValidationError as exc:
        raise ImportFileError(f"{where}: {_first_error(exc)}") from None
    except ValueError as exc:
        raise ImportFileError(f"{where}: {exc}") from None


def _check_numbers(line: ExportLine) -> None:
    """Every number in the record within `bounds` (a time in 1990..2200, a
    finite non-negative duration...), else ValueError naming the field."""
    s = line.session
    parts: list[tuple[str, str, Any]] = [("session", "session", s.model_dump(exclude={"contestants"}))]
    parts += [("contestant", f"session.contestants[{i}]", c.model_dump()) for i, c in enumerate(s.contestants)]
    parts += [("turn", "turn", line.turn.model_dump()), ("output", "output", line.output.model_dump())]
    for key, table, recs in (("votes", "vote", line.votes), ("tags", "tag", line.tags),
                             ("checks", "check_result", line.checks)):
        parts += [(table, f"{key}[{i}]", r.model_dump()) for i, r in enumerate(recs)]
    for table, name, data in parts:
        problem = bounds.record_problem(table, data, name=name)
        if problem:
            raise ValueError(problem)


def _write_export_line(conn: sqlite3.Connection, line: ExportLine) -> None:
    insert_session(conn, line.session, "INSERT OR IGNORE")
    _write_record(conn, line.turn)
    _write_record(conn, line.output)
    for v in line.votes:
        _write_record(conn, v)
    for t in line.tags:
        _write_record(conn, t)
    for c in line.checks:
        _write_record(conn, c)
    for r in line.reveals:
        _write_record(conn, r)


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
}


def merge_database(store: Store, other: str | os.PathLike) -> ImportSummary:
    """Merge another lineup database into `store`: rows we lack are added,
    rows we have are kept (a finished output replaces an unfinished one; a
    removal or reveal is carried over). One transaction; idempotent."""
    other = Path(other)
    summary = ImportSummary(source=str(other), format="lineup-db")
    if store.path.exists() and other.exists() and os.path.samefile(store.path, other):
        return summary
    with tempfile.TemporaryDirectory(prefix="lineup-merge-") as tmp:
        copy = Path(tmp) / "other.db"
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
        except sqlite3.DatabaseError as exc:
            raise ImportFileError(f"{other} is corrupt ({exc}); it was left untouched") from None
        finally:
            src.close()
        summary.added = _merge_attached(store, copy, other)
    return summary


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
    uri = f"file:{quote(str(src.resolve()))}?mode=ro"
    try:
        source = sqlite3.connect(uri, uri=True)
        try:
            source.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            source.close()
            source = sqlite3.connect(uri + "&immutable=1", uri=True)
        target = sqlite3.connect(dst)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
    except sqlite3.DatabaseError as exc:
        raise ImportFileError(f"{src}: cannot read it as a database ({exc}); it was left untouched") from None


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
        before = _counts(conn)
        with store.batch():
            try:
                for table in TABLES:
                    c = ", ".join(cols[table])
                    conn.execute(f"INSERT OR IGNORE INTO main.{table} ({c}) SELECT {c} FROM other.{table}")
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
                # a vote superseded in either database is superseded here
                conn.execute("UPDATE main.vote SET current = 0 WHERE current = 1 AND id IN "
                             "(SELECT supersedes FROM main.vote WHERE supersedes IS NOT NULL)")
                conn.execute("UPDATE main.vote_contestant SET current = 0 WHERE current = 1 AND vote_id IN "
                             "(SELECT id FROM main.vote WHERE current = 0)")
            except sqlite3.Error as exc:
                raise store._translate(exc, f"import {other}") from None
        after = _counts(conn)
    finally:
        conn.execute("DETACH DATABASE other")
    return {t: after[t] - before[t] for t in TABLES if t != "vote_contestant"}
