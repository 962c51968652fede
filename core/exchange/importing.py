"""Import into a Store: our own JSONL export, Chatbot Arena battle records,
or another lineup database (a teammate's votes, merged by
`store.imports.merge_database`).

A file is read (through `core.ground.inputs`) and checked completely before
anything is written, and then written in one transaction
(`store.imports.write_imported`): a malformed line, reported with its
number, means nothing from that file is imported. Re-importing adds nothing:
our records keep their ULIDs, Arena records get ids derived from their
content."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.exchange.export import EXPORT_FORMAT, EXPORT_VERSION
from core.ground.inputs import InputError, decode, loads, open_input, read_input, shown_name, split_lines
from core.stats.votes import make_votes, record_problem
from store import bounds
from store.db import SQLITE_HEADER, Store
from store.ids import derived_ulid  # noqa: F401  (also this module's API: imported records' ids)
from store.imports import ImportFileError, ImportSummary, merge_database, write_imported
from store.records import (
    CheckResultRecord,
    ContestantRecord,
    OutputRecord,
    RevealRecord,
    SessionRecord,
    ScoreRecord,
    TagRecord,
    TurnRecord,
    VoteRecord,
)

ARENA_WINNERS = {"model_a": "A", "model_b": "B", "tie": "tie", "tie (bothbad)": "both_bad"}


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
    scores: list[ScoreRecord] = Field(default_factory=list)
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
        problem = record_problem(v)
        if problem:
            raise ValueError(problem)
    owned: list[TagRecord | CheckResultRecord | ScoreRecord] = [*line.tags, *line.checks, *line.scores]
    for x in owned:
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
        assert turn_id is not None   # ex_a or ex_b holds an exchange: the loop made a turn
        records += make_votes(sid, [turn_id], ARENA_WINNERS[b.winner], mapping={"A": b.model_a, "B": b.model_b},
                              positions=["A", "B"], rater=b.judge or "arena", revealed=True, now=at,
                              ids=[derived_ulid(ms, f"{key}:vote")])
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
        from core.exchange.share import import_package, looks_like_package

        if looks_like_package(path):    # a blind vote package: its votes, mapped back (or refused whole)
            return import_package(store, path)
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
            for lineno, raw_line in split_lines(raw, shown):
                if isinstance(raw_line, InputError):
                    raise raw_line
                text = decode(raw_line, shown, lineno)
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
    sessions: list[SessionRecord] = []
    rows: list[Any] = []
    for line in ours:
        sessions.append(line.session)
        rows += [line.turn, line.output, *line.votes, *line.tags, *line.checks, *line.scores, *line.reveals]
    if arena:
        session, recs = _arena_records(arena, source_hash, time.time())
        sessions.append(session)
        rows += recs
    gone = store.deleted_sessions()
    summary.deleted_here = sorted({s.id for s in sessions if s.id in gone})
    summary.added = write_imported(store, sessions, rows, str(path))
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
                             ("checks", "check_result", line.checks), ("scores", "score", line.scores)):
        parts += [(table, f"{key}[{i}]", r.model_dump()) for i, r in enumerate(recs)]
    for table, name, data in parts:
        problem = bounds.record_problem(table, data, name=name)
        if problem:
            raise ValueError(problem)


