"""Report digests: each session's votes and answers as the report reads them,
packed once and kept in the database beside the record (`report_digest`).

Why: a report on 100k votes and 200k answers spent most of its time turning
rows into Python objects. A digest holds one session's rows as the report
needs them (numpy columns, codes into the distinct texts), so the report
reads a blob per session and stitches them together.

Kept with the record: triggers (schema m022) delete a session's digest in
the same transaction as any change to what it was made from, so a digest
in the table is never stale; a writing `Store` rebuilds the missing ones
when it closes (`refresh`, best effort, under the write lock). A reader
builds the digests it misses from the rows in memory (`for_sessions`), so a
missing digest, a read-only file or a failed refresh costs time, never a
figure. `store.report_queries` turns digests into the report's columns; a
test rebuilds every stored digest after each kind of write, merge and
import and compares.

Untrusted: the blob comes from a file like any other field. It is parsed
with bounds on every length and code, never unpickled; a blob that does not
parse is ignored and rebuilt from the rows. A value the quick read would not
take (text where a number belongs, a BLOB in a vote's texts) marks the
digest not quick, and the report then reads that part from the rows as it
always did.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from store import bounds

FORMAT = 1
MAGIC = b"LND" + bytes([FORMAT])   # a digest of another format is rebuilt
BAD_NAMED = 3

#: Status codes (`store.report_queries.STATUS_CODES`, repeated so the store's
#: digest does not import the report's reads).
STATUS_CODES = {"complete": 0, "error": 1, "cancelled": 2, "interrupted": 3}
OTHER_STATUS = 4

# The columns of a digest, in the order they are packed: name -> dtype.
OUTPUT_ARRAYS = {"o_session": "<i4", "o_model": "<i4", "o_status": "<i4", "o_turn": "<i4", "o_category": "<i4", "o_kind": "<i4",
                 "o_ttft": "<f8", "o_duration": "<f8", "o_cost": "<f8", "o_created": "<f8", "o_input": "<f8",
                 "o_output": "<f8", "o_estimated": "<f8", "o_cached": "|b1", "o_real": "|b1"}
VOTE_ARRAYS = {"v_session": "<i4", "v_key": "<i4", "v_meta": "<i4", "v_kind": "<i4", "v_created": "<f8"}
# list name -> the arrays coding into it (-1: none, where allowed)
_CODED = {"models": ("o_model", False), "categories": ("o_category", True),
          "kinds": ("o_kind", True), "keys": ("v_key", False), "metas": ("v_meta", False),
          "rater_kinds": ("v_kind", False)}


class NotQuick(Exception):
    """A value the quick read does not take."""


@dataclass
class Digest:
    """Answers (every attempt that is not streaming) and current, not
    superseded votes of one session, or of several (`merge`). Answers: per
    row the session, model, status code, turn, the turn's category, error
    kind (codes), timings, cost, creation time, token counts, the
    `tokens_estimated` flag (nan: NULL), reused from the cache, not a demo
    answer (`is_demo = 0`). Votes, in id order: the session, the JSON text of
    (choice, ranking, mapping, positions) and of (category, rater, prompt) as
    codes, the rater kind, the creation time; `ids` and `turn_ids` as JSON
    text, decoded when asked. `demo[k]`: session k has a demo contestant.
    `outputs_quick` / `votes_quick`: False when a value needs the plain read.
    `bad`: answers (streaming ones too) holding a number out of range
    (`store.bounds`), `bad_ids` the first `BAD_NAMED` of them by id."""

    sessions: list[str] = field(default_factory=list)
    demo: list[bool] = field(default_factory=list)
    lists: dict[str, list[Any]] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    ids_json: str = "[]"
    turns_json: str = "[]"
    n_turns: int = 0
    first_id: str | None = None
    last_id: str | None = None
    outputs_quick: bool = True
    votes_quick: bool = True
    bad: int = 0
    bad_ids: list[str] = field(default_factory=list)

    def ids(self) -> list[str]:
        return json.loads(self.ids_json)

    def turn_ids(self) -> list[str]:
        """The turns `o_turn` codes into (ValueError: not the list the codes were checked against)."""
        turns = json.loads(self.turns_json)
        if not isinstance(turns, list) or len(turns) != self.n_turns or not all(isinstance(t, str) for t in turns):
            raise ValueError("the digest's turns do not parse")
        return turns

    @property
    def n_outputs(self) -> int:
        return int(self.arrays["o_model"].size)

    @property
    def n_votes(self) -> int:
        return int(self.arrays["v_key"].size)


# --------------------------------------------------------------------------- building


def _float(value: Any) -> float:
    if value is None:
        return float("nan")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NotQuick
    try:
        return float(value)
    except OverflowError:
        raise NotQuick from None


class _Codes(dict[Any, int]):
    def __missing__(self, value: Any) -> int:
        code = self[value] = len(self)
        return code


@dataclass
class _Building:
    session_id: str
    models: _Codes = field(default_factory=_Codes)
    turns: _Codes = field(default_factory=_Codes)
    categories: _Codes = field(default_factory=_Codes)
    kinds: _Codes = field(default_factory=_Codes)
    keys: _Codes = field(default_factory=_Codes)
    metas: _Codes = field(default_factory=_Codes)
    rater_kinds: _Codes = field(default_factory=_Codes)
    out: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in OUTPUT_ARRAYS})
    vote: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in VOTE_ARRAYS})
    ids: list[Any] = field(default_factory=list)
    outputs_quick: bool = True
    votes_quick: bool = True
    bad: int = 0
    bad_ids: list[str] = field(default_factory=list)


def _chunks(ids: Sequence[str] | None, size: int = 500) -> Iterable[tuple[str, list[str]]]:
    if ids is None:
        yield "", []
        return
    for start in range(0, len(ids), size):
        part = list(ids[start:start + size])
        yield f" AND {{col}} IN ({','.join('?' * len(part))})", part


_OUTPUT_SQL = ("SELECT o.session_id, o.contestant, o.status, o.turn_id, t.category, t.session_id, "
               "CASE WHEN o.status = 'error' THEN ifnull(nullif(o.error_kind, ''), 'unknown') END, "
               "o.ttft_ms, o.duration_ms, o.cost, o.created, o.input_tokens, o.output_tokens, o.tokens_estimated, "
               "o.origin = 'cache', o.is_demo = 0, t.id IS NOT NULL "
               "FROM output o LEFT JOIN turn t ON t.id = o.turn_id WHERE o.status != 'streaming'{where}")
# `store.report_queries.read_votes`'s row, with the session, rater kind and creation time
_VOTE_SQL = ("SELECT v.session_id, json_array(v.choice, v.ranking, v.mapping, v.positions), "
             "json_array(t.category, v.rater, CASE WHEN length(t.case_id) THEN t.case_id ELSE t.user_message END), "
             "v.rater_kind, v.created, v.id FROM vote v JOIN turn t ON t.id = v.turn_id "
             "WHERE +v.current = 1 AND v.id NOT IN (SELECT supersedes FROM vote WHERE supersedes IS NOT NULL)"
             "{where} ORDER BY v.id")


def build(conn: sqlite3.Connection, session_ids: Sequence[str] | None = None) -> dict[str, Digest]:
    """The digests of these sessions (None: of every session with a row), from the rows."""
    building: dict[str, _Building] = {}
    if session_ids is not None:
        for sid in session_ids:
            building[sid] = _Building(sid)

    def slot(sid: Any) -> _Building:
        found = building.get(sid)
        if found is None:
            found = building[sid] = _Building(sid)
        return found

    for where, params in _chunks(session_ids):
        for row in conn.execute(_OUTPUT_SQL.format(where=where.format(col="o.session_id")), params):
            b = slot(row[0])
            if not b.outputs_quick:
                continue
            try:
                _add_output(b, row)
            except NotQuick:
                b.outputs_quick = False
    for where, params in _chunks(session_ids):
        try:
            rows = conn.execute(_VOTE_SQL.format(where=where.format(col="v.session_id")), params).fetchall()
        except sqlite3.OperationalError:      # a BLOB in a vote's texts: the plain read, for these sessions
            for sid in params or [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM vote")]:
                slot(sid).votes_quick = False
            continue
        for row in rows:
            b = slot(row[0])
            if not b.votes_quick:
                continue
            try:
                _add_vote(b, row)
            except NotQuick:
                b.votes_quick = False
    cond = bounds.sql_out_of_range("output", "s")
    for where, params in _chunks(session_ids):
        for sid, oid in conn.execute(f"SELECT s.session_id, s.id FROM output s WHERE ({cond})"
                                     f"{where.format(col='s.session_id')} ORDER BY s.id", params):
            b = slot(sid)
            b.bad += 1
            if len(b.bad_ids) < BAD_NAMED:
                b.bad_ids.append(str(oid))
    demo = {r[0] for r in conn.execute("SELECT DISTINCT session_id FROM contestant WHERE is_demo = 1")}
    return {sid: _finish(b, sid in demo) for sid, b in building.items() if isinstance(sid, str)}


def _add_output(b: _Building, row: Sequence[Any]) -> None:
    (session, model, status, turn, category, turn_session, kind, ttft, duration, cost, created, inp, outp, est,
     cached, real, has_turn) = row
    if not isinstance(model, str) or not isinstance(turn, str) or not isinstance(category, (str, type(None))) \
            or not isinstance(kind, (str, type(None))) or (has_turn and turn_session != session):
        raise NotQuick   # (an answer on another session's turn: turns are numbered per session)
    o = b.out
    o["o_model"].append(b.models[model])
    o["o_status"].append(STATUS_CODES.get(status, OTHER_STATUS) if isinstance(status, str) else OTHER_STATUS)
    o["o_turn"].append(b.turns[turn])
    o["o_category"].append(b.categories[category] if has_turn else -1)
    o["o_kind"].append(-1 if kind is None else b.kinds[kind])
    for name, value in (("o_ttft", ttft), ("o_duration", duration), ("o_cost", cost), ("o_created", created),
                        ("o_input", inp), ("o_output", outp), ("o_estimated", est)):
        o[name].append(_float(value))
    o["o_cached"].append(cached == 1)
    o["o_real"].append(real == 1)


def _add_vote(b: _Building, row: Sequence[Any]) -> None:
    _, key, meta, rater_kind, created, vote_id = row
    if not isinstance(vote_id, str) or (b.ids and vote_id < b.ids[-1]) or not isinstance(rater_kind, str):
        raise NotQuick
    v = b.vote
    v["v_key"].append(b.keys[key])
    v["v_meta"].append(b.metas[meta])
    v["v_kind"].append(b.rater_kinds[rater_kind])
    v["v_created"].append(_float(created))
    b.ids.append(vote_id)


def _finish(b: _Building, demo: bool) -> Digest:
    d = Digest([b.session_id], [demo], outputs_quick=b.outputs_quick, votes_quick=b.votes_quick, bad=b.bad,
               bad_ids=b.bad_ids)
    for name in _CODED:
        d.lists[name] = list(getattr(b, name)) if (b.outputs_quick if name in ("models", "categories", "kinds")
                                                   else b.votes_quick) else []
    turns = list(b.turns) if b.outputs_quick else []
    d.turns_json, d.n_turns = json.dumps(turns), len(turns)
    b.out["o_session"] = [0] * len(b.out["o_model"])
    b.vote["v_session"] = [0] * len(b.vote["v_key"])
    for name, dtype in OUTPUT_ARRAYS.items():
        d.arrays[name] = np.array(b.out[name] if b.outputs_quick else [], dtype=dtype)
    for name, dtype in VOTE_ARRAYS.items():
        d.arrays[name] = np.array(b.vote[name] if b.votes_quick else [], dtype=dtype)
    ids = b.ids if b.votes_quick else []
    d.ids_json = json.dumps(ids)
    d.first_id, d.last_id = (ids[0], ids[-1]) if ids else (None, None)
    return d


def _join_json(texts: Iterable[str]) -> str:
    """JSON lists joined into one, as text (each from `json.dumps`)."""
    return "[" + ", ".join(t[1:-1] for t in texts if t != "[]") + "]"


def merge(parts: Sequence[Digest]) -> Digest:
    """One digest of several (sessions in the order given; votes in id order).
    Not quick where any part is not."""
    out = Digest([s for d in parts for s in d.sessions], [x for d in parts for x in d.demo],
                 outputs_quick=all(d.outputs_quick for d in parts), votes_quick=all(d.votes_quick for d in parts),
                 bad=sum(d.bad for d in parts), bad_ids=sorted(i for d in parts for i in d.bad_ids)[:BAD_NAMED])
    codes = {name: _Codes() for name in _CODED}
    luts: list[dict[str, np.ndarray]] = []
    for d in parts:
        luts.append({name: np.array([codes[name][x] for x in d.lists[name]] + [-1], dtype=np.int64)
                     for name in _CODED})
    out.lists = {name: list(c) for name, c in codes.items()}
    session_at = np.cumsum([0] + [len(d.sessions) for d in parts])
    turn_at = np.cumsum([0] + [d.n_turns for d in parts])
    coded = {array: name for name, (array, _) in _CODED.items()}
    for names, shift in ((OUTPUT_ARRAYS, {"o_session": session_at, "o_turn": turn_at}),
                         (VOTE_ARRAYS, {"v_session": session_at})):
        for name, dtype in names.items():
            pieces = []
            for k, d in enumerate(parts):
                a = d.arrays[name]
                if name in coded:
                    a = luts[k][coded[name]][a]
                elif name in shift:
                    a = a.astype(np.int64) + int(shift[name][k])
                pieces.append(a)
            out.arrays[name] = np.concatenate(pieces).astype(dtype) if pieces else np.zeros(0, dtype=dtype)
    out.turns_json, out.n_turns = _join_json(d.turns_json for d in parts), int(turn_at[-1])
    voted = sorted((d.first_id, d.last_id or "", k) for k, d in enumerate(parts) if d.first_id is not None)
    if all(a[1] < b[0] for a, b in zip(voted, voted[1:], strict=False)):    # id ranges apart: one after another
        vote_at = np.cumsum([0] + [d.n_votes for d in parts])
        order = np.concatenate([np.arange(parts[k].n_votes) + int(vote_at[k]) for *_, k in voted]) \
            if voted else np.zeros(0, dtype=np.int64)
        out.ids_json = _join_json(parts[k].ids_json for *_, k in voted)
    else:                                  # interleaved: sort every vote by id
        ids = [i for d in parts for i in d.ids()]
        order = np.argsort(np.array(ids, dtype=str), kind="stable")
        out.ids_json = json.dumps([ids[k] for k in order.tolist()])
    for name in VOTE_ARRAYS:
        out.arrays[name] = out.arrays[name][order]
    out.first_id = voted[0][0] if voted else None
    out.last_id = max(v[1] for v in voted) if voted else None
    return out


# --------------------------------------------------------------------------- packing


def encode(d: Digest) -> bytes:
    arrays = [*OUTPUT_ARRAYS, *VOTE_ARRAYS]
    turns = d.turns_json.encode()
    header = {"format": FORMAT, "sessions": d.sessions, "demo": d.demo, "outputs_quick": d.outputs_quick,
              "votes_quick": d.votes_quick, "first_id": d.first_id, "last_id": d.last_id, "lists": d.lists,
              "bad": d.bad, "bad_ids": d.bad_ids, "sizes": [int(d.arrays[a].size) for a in arrays],
              "n_turns": d.n_turns, "turns_bytes": len(turns)}
    head = json.dumps(header).encode()
    body = b"".join(np.ascontiguousarray(d.arrays[a], dtype=dtype).tobytes()
                    for a, dtype in {**OUTPUT_ARRAYS, **VOTE_ARRAYS}.items())
    return b"".join([MAGIC, len(head).to_bytes(4, "little"), head, body, turns, d.ids_json.encode()])


def decode(blob: Any) -> Digest | None:
    """The digest in `blob`, or None when it does not parse as one (any
    length, type or code out of place)."""
    try:
        return _decode(blob)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, RecursionError):
        return None


def _all(values: Any, *types: type) -> bool:
    return isinstance(values, list) and set(map(type, values)) <= set(types)


def _count(n: Any) -> bool:
    return type(n) is int and n >= 0


def _decode(blob: Any) -> Digest | None:
    if not isinstance(blob, bytes) or blob[:4] != MAGIC or len(blob) < 8:
        return None
    n_head = int.from_bytes(blob[4:8], "little")
    if 8 + n_head > len(blob):
        return None
    header = json.loads(blob[8:8 + n_head].decode())
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    d = Digest()
    d.sessions, d.demo = header["sessions"], header["demo"]
    if not _all(d.sessions, str) or not _all(d.demo, bool) or len(d.sessions) != len(d.demo):
        return None
    for flag in ("outputs_quick", "votes_quick"):
        if type(header[flag]) is not bool:
            return None
        setattr(d, flag, header[flag])
    d.first_id, d.last_id = header["first_id"], header["last_id"]
    if not _all([d.first_id, d.last_id], str, type(None)):
        return None
    d.bad, d.bad_ids = header["bad"], header["bad_ids"]
    if not _count(d.bad) or not _all(d.bad_ids, str) or len(d.bad_ids) > min(d.bad, BAD_NAMED):
        return None
    lists = header["lists"]
    if not isinstance(lists, dict) or set(lists) != set(_CODED):
        return None
    if not all(_all(lists[name], str) for name in ("models", "kinds", "keys", "metas")) \
            or not all(_all(lists[name], str, type(None)) for name in ("categories", "rater_kinds")):
        return None
    d.lists = lists
    names = [*OUTPUT_ARRAYS, *VOTE_ARRAYS]
    sizes = header["sizes"]
    if not _all(sizes, int) or len(sizes) != len(names) or not all(map(_count, sizes)):
        return None
    at = 8 + n_head
    dtypes = {**OUTPUT_ARRAYS, **VOTE_ARRAYS}
    for name, n in zip(names, sizes, strict=True):
        dtype = np.dtype(dtypes[name])
        end = at + n * dtype.itemsize
        if end > len(blob):
            return None
        d.arrays[name] = np.frombuffer(blob, dtype=dtype, count=n, offset=at)
        at = end
    n_out, n_vote = sizes[0], sizes[len(OUTPUT_ARRAYS)]
    if any(d.arrays[a].size != n_out for a in OUTPUT_ARRAYS) or any(d.arrays[a].size != n_vote
                                                                    for a in VOTE_ARRAYS):
        return None
    d.n_turns, turns_bytes = header["n_turns"], header["turns_bytes"]
    if not _count(d.n_turns) or not _count(turns_bytes) or at + turns_bytes > len(blob):
        return None
    ranges = {**{array: (len(lists[name]), none_ok) for name, (array, none_ok) in _CODED.items()},
              "o_turn": (d.n_turns, False), "o_session": (len(d.sessions), False),
              "v_session": (len(d.sessions), False), "o_status": (OTHER_STATUS + 1, False)}
    for array, (n, none_ok) in ranges.items():
        codes = d.arrays[array]
        if codes.size and (int(codes.max()) >= n or int(codes.min()) < (-1 if none_ok else 0)):
            return None
    d.turns_json = blob[at:at + turns_bytes].decode()
    d.ids_json = blob[at + turns_bytes:].decode()
    if (n_vote == 0) != (d.first_id is None) or (d.first_id is None) != (d.last_id is None):
        return None
    return d


# --------------------------------------------------------------------------- reading and keeping


def _stored(conn: sqlite3.Connection, session_ids: Sequence[str] | None) -> dict[str, Digest]:
    found: dict[str, Digest] = {}
    for where, params in _chunks(session_ids):
        for sid, blob in conn.execute(f"SELECT session_id, data FROM report_digest WHERE 1"
                                      f"{where.format(col='session_id')}", params):
            d = decode(blob)
            if d is not None and d.sessions == [sid]:
                found[sid] = d
    return found


def _snapshot(conn: sqlite3.Connection, read: Any) -> Any:
    """`read()` in one read transaction: each digest and each row of the same moment."""
    began = not conn.in_transaction
    if began:
        conn.execute("BEGIN")
    try:
        return read()
    finally:
        if began and conn.in_transaction:
            conn.execute("COMMIT")


def for_sessions(conn: sqlite3.Connection, session_ids: Sequence[str] | None = None) -> dict[str, Digest]:
    """Every session's digest (or these sessions'): stored where stored and
    readable, built from the rows for the rest (not saved: a reader may not
    write)."""
    return _snapshot(conn, lambda: _for_sessions(conn, session_ids))


def _for_sessions(conn: sqlite3.Connection, session_ids: Sequence[str] | None) -> dict[str, Digest]:
    if not _has_table(conn):
        return build(conn, session_ids)
    found = _stored(conn, session_ids)
    wanted = list(session_ids) if session_ids is not None else [r[0] for r in conn.execute("SELECT id FROM session")]
    todo = [s for s in wanted if s not in found]
    if todo:
        # more than half missing: one pass over the tables beats a query per chunk of sessions
        built = build(conn, None if session_ids is None and len(todo) * 2 > len(wanted) else todo)
        found.update((sid, d) for sid, d in built.items() if sid not in found)
    return found


def whole(conn: sqlite3.Connection) -> Digest:
    """Every session's rows as one digest: the stored one when a writer has
    kept it (`report_digest_all`, deleted by any change to the record), else
    merged from the sessions' digests."""
    def read() -> Digest:
        if _has_table(conn):
            row = conn.execute("SELECT data FROM report_digest_all").fetchone()
            found = decode(row[0]) if row is not None else None
            if found is not None:
                return found
        parts = _for_sessions(conn, None)
        return merge([parts[sid] for sid in sorted(parts)])

    return _snapshot(conn, read)


def _has_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'report_digest_all'").fetchone() \
        is not None


MISSING_SQL = ("SELECT id FROM session WHERE id NOT IN (SELECT session_id FROM report_digest "
               "WHERE substr(data, 1, 4) = ?) UNION ALL SELECT NULL WHERE NOT EXISTS "
               "(SELECT 1 FROM report_digest_all WHERE substr(data, 1, 4) = ?)")


def refresh(conn: sqlite3.Connection) -> int:
    """Build and store the digests missing now, and the whole, in one write
    transaction (the caller's `BEGIN IMMEDIATE`): the rows read are the rows
    of that moment, and no write can land between the read and the save.
    How many sessions' digests were built."""
    todo = [r[0] for r in conn.execute(MISSING_SQL, [MAGIC, MAGIC]) if r[0] is not None]
    built = build(conn, todo) if todo else {}
    conn.executemany("INSERT OR REPLACE INTO report_digest (session_id, data) VALUES (?, ?)",
                     [(sid, encode(built[sid])) for sid in todo if sid in built])
    parts = _for_sessions(conn, None)
    conn.execute("INSERT OR REPLACE INTO report_digest_all (id, data) VALUES (1, ?)",
                 [encode(merge([parts[sid] for sid in sorted(parts)]))])
    return len(built)
