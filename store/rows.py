"""Records <-> table rows. One place knows the column layout, so the Store,
the importer and the merger all write exactly the same rows."""

from __future__ import annotations

import json
import sqlite3
import re
import sys
from array import array
from typing import Any, TypeVar

from pydantic import BaseModel

from store.records import (
    AnswerTrace,
    BlindGuessRecord,
    CheckResultRecord,
    ContestantRecord,
    GoldCheckRecord,
    OutputRecord,
    RevealRecord,
    ScoreRecord,
    SessionRecord,
    TagRecord,
    TurnRecord,
    VoteRecord,
    outcome_of,
)

M = TypeVar("M", bound=BaseModel)


_SURROGATE = re.compile("[\ud800-\udfff]")


def sqlite_text(value: Any) -> Any:
    """`value`, with text made storable: a lone surrogate (from a model's
    `\\ud800` escape, an import, a log) is not UTF-8 and would make SQLite
    refuse the whole row, so it becomes U+FFFD. Everything else is unchanged."""
    if isinstance(value, str) and _unstorable(value):
        return _SURROGATE.sub("\ufffd", value)
    return value


def _unstorable(text: str) -> bool:
    """Whether `text` holds a lone surrogate. ASCII is passed by `isascii`;
    other text by trying the UTF-8 encoding SQLite will do (C speed, 3x a regex scan)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _safe(row: tuple) -> tuple:
    """A row every text field of which SQLite can store (see `sqlite_text`)."""
    for v in row:
        if v.__class__ is str and _unstorable(v):
            return tuple([sqlite_text(x) for x in row])
    return row


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str | None, default: Any = None) -> Any:
    return default if text is None else json.loads(text)


def pack_ints(values: list[int]) -> bytes:
    """Chunk timings as a small blob: one type byte ("H" uint16, "I" uint32,
    "q" int64: the narrowest that fits) then little-endian integers. A stream
    under 65 s costs two bytes a chunk; replaying a long session decodes
    thousands of these, ~20x faster than JSON."""
    if not values:
        return b""
    lo, hi = min(values), max(values)
    code = "H" if lo >= 0 and hi < 1 << 16 else "I" if lo >= 0 and hi < 1 << 32 else "q"
    arr = array(code, values)
    if sys.byteorder == "big":
        arr.byteswap()
    return code.encode() + arr.tobytes()


def unpack_ints(blob: bytes | str | None) -> list[int]:
    if not blob:
        return []
    if isinstance(blob, str):  # a JSON list (rows written by hand)
        return json.loads(blob)
    arr = array(chr(blob[0]))
    arr.frombytes(blob[1:])
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tolist()


SESSION_COLS = ("id", "created", "kind", "title", "system", "params", "seed", "blind", "revealed_at",
                "sample_set_name", "sample_set_hash", "rerun_of", "meta", "is_demo")
CONTESTANT_COLS = ("session_id", "alias", "position", "label", "provider", "model", "base_url",
                   "params", "price", "is_demo", "variant_of", "system", "template", "tools")
TURN_COLS = ("id", "session_id", "position", "case_id", "category", "user_message", "images",
             "follow_up_index", "repeat_index", "created")
OUTPUT_COLS = ("id", "session_id", "turn_id", "contestant", "label", "attempt", "status", "text",
               "reasoning", "error_kind", "error_message", "finish_reason", "sent_at", "ttft_ms",
               "duration_ms", "chunk_ms", "chunk_chars", "input_tokens", "output_tokens",
               "tokens_estimated", "reasoning_tokens", "cost", "is_demo", "created", "trace", "streamed",
               "served_model", "system_fingerprint", "origin", "cached_from", "request_key", "prompt", "connect_ms", "updated", "writer")
VOTE_COLS = ("id", "session_id", "turn_id", "rater", "choice", "winner", "ranking", "mapping",
             "positions", "created", "revealed_at", "note", "supersedes", "current", "retracted_at",
             "rater_kind", "judge", "judge_prompt_hash", "judge_rubric", "judge_reason", "judge_cost",
             "judge_input_tokens", "judge_output_tokens", "choice_reason")
TAG_COLS = ("id", "output_id", "tag", "rater", "note", "auto", "created", "removed_at")
SCORE_COLS = ("id", "output_id", "dimension", "value", "rater", "rater_kind", "created")
CHECK_COLS = ("id", "output_id", "check_name", "spec", "passed", "detail")
REVEAL_COLS = ("id", "session_id", "turn_id", "rater", "created")
VOTE_CONTESTANT_COLS = ("vote_id", "label", "alias", "position", "outcome", "current")
GOLD_COLS = ("id", "session_id", "turn_id", "rater", "source", "model", "degradation", "better", "choice",
             "positions", "correct", "created", "retracted_at")
GUESS_COLS = ("id", "vote_id", "session_id", "rater", "label", "actual", "guess", "options", "created")


def insert_sql(table: str, cols: tuple[str, ...], verb: str = "INSERT") -> str:
    return f"{verb} INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"


def session_row(r: SessionRecord) -> tuple:
    return _safe((r.id, r.created, r.kind, r.title, r.system, dumps(r.params), r.seed, int(r.blind),
                  r.revealed_at, r.sample_set_name, r.sample_set_hash, r.rerun_of, dumps(r.meta),
                  int(r.is_demo)))


def contestant_row(session_id: str, c: ContestantRecord) -> tuple:
    return _safe((session_id, c.alias, c.position, c.label, c.provider, c.model, c.base_url,
                  dumps(c.params), None if c.price is None else dumps(c.price), int(c.is_demo),
                  c.variant_of, c.system, c.template, None if c.tools is None else dumps(c.tools)))


def turn_row(r: TurnRecord) -> tuple:
    return _safe((r.id, r.session_id, r.position, r.case_id, r.category, r.user_message, dumps(r.images),
                  r.follow_up_index, r.repeat_index, r.created))


def output_row(r: OutputRecord, updated: float | None = None, writer: str | None = None) -> tuple:
    return _safe((r.id, r.session_id, r.turn_id, r.contestant, r.label, r.attempt, r.status, r.text,
                  r.reasoning, r.error_kind, r.error_message, r.finish_reason, r.sent_at, r.ttft_ms,
                  r.duration_ms, pack_ints(r.chunk_ms), pack_ints(r.chunk_chars), r.input_tokens,
                  r.output_tokens, int(r.tokens_estimated), r.reasoning_tokens, r.cost, int(r.is_demo),
                  r.created, None if r.trace is None else dumps(r.trace.model_dump(mode="json")), int(r.streamed),
                  r.served_model, r.system_fingerprint, r.origin, r.cached_from, r.request_key, r.prompt,
                  r.connect_ms, updated, writer))


def vote_row(r: VoteRecord, current: int = 1) -> tuple:
    return _safe((r.id, r.session_id, r.turn_id, r.rater, r.choice, r.winner,
                  None if r.ranking is None else dumps(r.ranking), dumps(r.mapping), dumps(r.positions),
                  r.created, r.revealed_at, r.note, r.supersedes, current, r.retracted_at,
                  r.rater_kind, r.judge, r.judge_prompt_hash, r.judge_rubric, r.judge_reason, r.judge_cost,
                  r.judge_input_tokens, r.judge_output_tokens,
                  None if r.choice_reason is None else dumps(r.choice_reason)))


def vote_contestant_rows(vote_id: str, choice: str, mapping: dict[str, str], positions: list[str] | tuple[str, ...],
                         current: int) -> list[tuple]:
    """A vote's rows of `vote_contestant` (VOTE_CONTESTANT_COLS): one per
    label, with its screen position and what the vote says of it (`outcome_of`)."""
    return [
        (vote_id, label, alias,
         positions.index(label) if label in positions else None,
         outcome_of(choice, mapping, label), int(current))
        for label, alias in mapping.items()
    ]


def vote_contestants(r: VoteRecord, current: int = 1) -> list[tuple]:
    return [_safe(row) for row in vote_contestant_rows(r.id, r.choice, r.mapping, r.positions, current)]


def tag_row(r: TagRecord, removed_at: float | None = None) -> tuple:
    return _safe((r.id, r.output_id, r.tag, r.rater, r.note, int(r.auto), r.created, removed_at))


def score_row(r: ScoreRecord) -> tuple:
    return _safe((r.id, r.output_id, r.dimension, r.value, r.rater, r.rater_kind, r.created))


def check_row(r: CheckResultRecord) -> tuple:
    return _safe((r.id, r.output_id, r.check, dumps(r.spec), int(r.passed), r.detail))


def reveal_row(r: RevealRecord) -> tuple:
    return _safe((r.id, r.session_id, r.turn_id, r.rater, r.created))


def gold_row(r: GoldCheckRecord) -> tuple:
    return _safe((r.id, r.session_id, r.turn_id, r.rater, r.source, r.model, r.degradation, r.better, r.choice,
                  dumps(r.positions), int(r.correct), r.created, r.retracted_at))


def guess_row(r: BlindGuessRecord) -> tuple:
    return _safe((r.id, r.vote_id, r.session_id, r.rater, r.label, r.actual, r.guess, dumps(r.options), r.created))


# ---- rows -> records (rows come from `SELECT <COLS>` in the column order above)

def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """A record from a row we wrote ourselves, every field present: no
    re-validation (what `model_construct` does, minus its per-field loop;
    replaying a 1000-turn session builds thousands of these)."""
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", values)
    object.__setattr__(obj, "__pydantic_fields_set__", set(values))
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def session_from(row: tuple, contestants: list[ContestantRecord]) -> SessionRecord:
    d = dict(zip(SESSION_COLS, row, strict=True))
    d.pop("is_demo")
    d["params"], d["meta"], d["blind"] = json.loads(d["params"]), json.loads(d["meta"]), bool(d["blind"])
    return SessionRecord(contestants=contestants, **d)


def contestant_from(row: tuple) -> ContestantRecord:
    d = dict(zip(CONTESTANT_COLS, row, strict=True))
    d.pop("session_id")
    d["params"], d["price"], d["is_demo"] = json.loads(d["params"]), loads(d["price"]), bool(d["is_demo"])
    d["tools"] = loads(d["tools"])
    return ContestantRecord(**d)


def turn_from(row: tuple) -> TurnRecord:
    d = dict(zip(TURN_COLS, row, strict=True))
    d["images"] = json.loads(d["images"])
    return trusted(TurnRecord, d)


_OUTPUT_READ = OUTPUT_COLS[:-2]


def output_from(row: tuple) -> OutputRecord:
    (id_, session_id, turn_id, contestant, label, attempt, status, text, reasoning, error_kind, error_message,
     finish_reason, sent_at, ttft_ms, duration_ms, chunk_ms, chunk_chars, input_tokens, output_tokens,
     tokens_estimated, reasoning_tokens, cost, is_demo, created, trace, streamed, served_model, system_fingerprint,
     origin, cached_from, request_key, prompt, connect_ms) = row
    return trusted(OutputRecord, {
        "id": id_, "session_id": session_id, "turn_id": turn_id, "contestant": contestant, "label": label,
        "attempt": attempt, "status": status, "text": text, "reasoning": reasoning, "error_kind": error_kind,
        "error_message": error_message, "finish_reason": finish_reason, "sent_at": sent_at, "ttft_ms": ttft_ms,
        "duration_ms": duration_ms, "chunk_ms": unpack_ints(chunk_ms),
        "chunk_chars": unpack_ints(chunk_chars), "input_tokens": input_tokens, "output_tokens": output_tokens,
        "tokens_estimated": bool(tokens_estimated), "reasoning_tokens": reasoning_tokens, "cost": cost,
        "is_demo": bool(is_demo), "created": created,
        "trace": None if trace is None else AnswerTrace.model_validate_json(trace), "streamed": bool(streamed),
        "served_model": served_model, "system_fingerprint": system_fingerprint, "origin": origin,
        "cached_from": cached_from, "request_key": request_key, "prompt": prompt, "connect_ms": connect_ms})


_VOTE_READ = tuple(c for c in VOTE_COLS if c not in ("winner", "current"))


def vote_from(row: tuple) -> VoteRecord:
    d = dict(zip(_VOTE_READ, row, strict=True))
    d["ranking"], d["mapping"], d["positions"] = loads(d["ranking"]), json.loads(d["mapping"]), json.loads(d["positions"])
    d["choice_reason"] = loads(d["choice_reason"])
    return trusted(VoteRecord, d)


_TAG_READ = TAG_COLS[:-1]


def tag_from(row: tuple) -> TagRecord:
    d = dict(zip(_TAG_READ, row, strict=True))
    d["auto"] = bool(d["auto"])
    return trusted(TagRecord, d)


def score_from(row: tuple) -> ScoreRecord:
    return trusted(ScoreRecord, dict(zip(SCORE_COLS, row, strict=True)))


def check_from(row: tuple) -> CheckResultRecord:
    d = dict(zip(CHECK_COLS, row, strict=True))
    d["check"] = d.pop("check_name")
    d["spec"], d["passed"] = json.loads(d["spec"]), bool(d["passed"])
    return trusted(CheckResultRecord, {k: d[k] for k in CheckResultRecord.model_fields})


def reveal_from(row: tuple) -> RevealRecord:
    return trusted(RevealRecord, dict(zip(REVEAL_COLS, row, strict=True)))


def cols(names: tuple[str, ...], prefix: str = "") -> str:
    return ", ".join(prefix + n for n in names)


READ = {
    "output": _OUTPUT_READ,
    "vote": _VOTE_READ,
    "tag": _TAG_READ,
}


# ---------------------------------------------------------------------- row writers
# (the Store's and the importer's; `verb` "INSERT OR IGNORE" makes a merge idempotent)

def insert_session(conn: sqlite3.Connection, rec: SessionRecord, verb: str = "INSERT") -> bool:
    cur = conn.execute(insert_sql("session", SESSION_COLS, verb), session_row(rec))
    if cur.rowcount:
        conn.executemany(insert_sql("contestant", CONTESTANT_COLS, verb),
                         [contestant_row(rec.id, c) for c in rec.contestants])
    return cur.rowcount > 0


UPSERT_OUTPUT = (insert_sql("output", OUTPUT_COLS) + " ON CONFLICT(id) DO UPDATE SET "
                  + ", ".join(f"{c} = excluded.{c}" for c in OUTPUT_COLS[1:]))


def upsert_output(conn: sqlite3.Connection, rec: OutputRecord, now: float, only_unfinished: bool = False) -> None:
    where = " WHERE output.status IN ('streaming', 'interrupted')" if only_unfinished else ""
    conn.execute(UPSERT_OUTPUT + where, output_row(rec, now, None))


def insert_vote(conn: sqlite3.Connection, rec: VoteRecord, verb: str = "INSERT") -> bool:
    replaced_by = conn.execute("SELECT 1 FROM vote WHERE supersedes = ? LIMIT 1", [rec.id]).fetchone()
    current = 0 if replaced_by or rec.retracted_at is not None else 1
    cur = conn.execute(insert_sql("vote", VOTE_COLS, verb), vote_row(rec, current))
    if not cur.rowcount:
        return False
    conn.executemany(insert_sql("vote_contestant", VOTE_CONTESTANT_COLS, verb), vote_contestants(rec, current))
    if rec.supersedes:
        conn.execute("UPDATE vote SET current = 0 WHERE id = ?", [rec.supersedes])
        conn.execute("UPDATE vote_contestant SET current = 0 WHERE vote_id = ?", [rec.supersedes])
    return True

