"""Report digests: the votes and answers of a session, and of groups of
sessions, as the report reads them, packed once and kept in the database
beside the record (`report_digest`, `report_group`; migration m022).

Why: a report on 100k votes and 200k answers spent most of its time turning
rows into Python objects. A digest holds rows as the report needs them
(numpy columns, codes into the distinct texts), so a report reads a few
blobs and stitches them together (`whole`).

Kept with the record: triggers delete the digest of a session, and of the
group it is in, in the same transaction as any change to what they were
made from, so a digest in the tables is never stale. A writing `Store`
rebuilds what is missing when it closes (`refresh`, under the write lock,
best effort): the sessions' digests, then each group whose digest is gone
(up to `GROUP_SIZE` sessions, so a close rewrites a group, not the whole
record). A reader builds what it misses from the rows in memory, so a
missing digest, a read-only file or a failed refresh costs time, never a
figure. `store.report_queries` turns the digest into the report's columns;
`tests/test_report_digests.py` checks every stored digest against the rows
after each kind of write, merge and import.

Untrusted: a blob comes from a file like any other field. Each is signed
with a key of this user's (`store.digest_keys`, made on first use, 0600): a
digest made elsewhere, or changed since, is not read (a file from someone
else is reported from its rows, whatever digests it carries) and the next
writer here replaces it. A signed blob is still parsed with bounds on every
length and code, never unpickled; one that does not parse is ignored. A
value the quick read would not take (text where a number belongs, a BLOB in
a vote's texts, a token count out of range) marks the digest not quick, and
the report reads from the rows as it always did.
"""

from __future__ import annotations

import hmac
import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from store import bounds
from store.digest_keys import FORMAT, PREFIX_BYTES, Key, key, mac
from store.records import PROMPT_SQL

BAD_NAMED = 3
GROUP_SIZE = 64
MAX_ID_BYTES = 256

#: Status codes, here and in `store.report_queries` (which takes them from here).
STATUS_CODES = {"complete": 0, "error": 1, "cancelled": 2, "interrupted": 3}
OTHER_STATUS = 4
#: The largest token counts a digest holds (`store.report_queries`' quick read takes no more).
MAX_TOKENS = 2 ** 30 - 2

# The columns of a digest, in the order they are packed: name -> dtype. Token
# counts: -1 is NULL. `v_id`: the vote ids, as bytes of the widest.
OUTPUT_ARRAYS = {"o_session": "<i4", "o_model": "<i4", "o_status": "|i1", "o_turn": "<i4", "o_category": "<i4",
                 "o_kind": "<i4", "o_ttft": "<f8", "o_duration": "<f8", "o_cost": "<f8", "o_created": "<f8",
                 "o_input": "<i4", "o_output": "<i4", "o_estimated": "|b1", "o_cached": "|b1", "o_real": "|b1"}
VOTE_ARRAYS = {"v_session": "<i4", "v_key": "<i4", "v_meta": "<i4", "v_kind": "<i4", "v_created": "<f8"}
# list name -> the array coding into it, and whether -1 (none) is allowed
_CODED = {"models": ("o_model", False), "categories": ("o_category", True), "kinds": ("o_kind", True),
          "keys": ("v_key", False), "metas": ("v_meta", False), "rater_kinds": ("v_kind", False)}
_OUTPUT_LISTS = ("models", "categories", "kinds")


class NotQuick(Exception):
    """A value the quick read does not take."""


@dataclass
class Digest:
    """Answers (every attempt that is not streaming) and current, not
    superseded votes of some sessions. Answers: per row the session, model,
    status code, turn, the turn's category, error kind (codes), timings,
    cost, creation time, token counts, whether `tokens_estimated`, reused
    from the cache, not a demo answer (`is_demo = 0`). Votes, in id order:
    the session, the JSON text of (choice, ranking, mapping, positions) and
    of (category, rater, prompt) as codes, the rater kind, the creation time,
    the id. `turns_json`: the turns `o_turn` codes into, decoded when asked.
    `demo[k]`: session k has a demo contestant. `outputs_quick` /
    `votes_quick`: False when a value needs the plain read. `bad`: answers
    (streaming ones too) holding a number out of range (`store.bounds`),
    `bad_ids` the first `BAD_NAMED` of them by id."""

    sessions: list[str] = field(default_factory=list)
    demo: list[bool] = field(default_factory=list)
    lists: dict[str, list[Any]] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    v_id: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype="S1"))
    turns_json: str = "[]"
    n_turns: int = 0
    outputs_quick: bool = True
    votes_quick: bool = True
    bad: int = 0
    bad_ids: list[str] = field(default_factory=list)

    def ids(self) -> list[str]:
        return [i.decode() for i in self.v_id.tolist()]

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


def _tokens(value: Any) -> int:
    """A token count as the quick read takes it (-1: NULL)."""
    if value is None:
        return -1
    number = _float(value)
    if not 0 <= number <= MAX_TOKENS or number != int(number):
        raise NotQuick
    return int(number)


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
    ids: list[bytes] = field(default_factory=list)
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
             f"json_array(t.category, v.rater, {PROMPT_SQL}), "
             "v.rater_kind, v.created, v.id FROM vote v JOIN turn t ON t.id = v.turn_id "
             "WHERE +v.current = 1 AND v.id NOT IN (SELECT supersedes FROM vote WHERE supersedes IS NOT NULL)"
             "{where} ORDER BY v.id")


def build(conn: sqlite3.Connection, session_ids: Sequence[str] | None = None) -> dict[str, Digest]:
    """The digests of these sessions (None: of every session with a row), from the rows."""
    building: dict[str, _Building] = {sid: _Building(sid) for sid in session_ids or ()}

    def slot(sid: Any) -> _Building:
        found = building.get(sid)
        if found is None:
            found = building[sid] = _Building(sid)
        return found

    def take(rows: Iterable[Sequence[Any]], add: Callable[[_Building, Sequence[Any]], None], quick: str) -> None:
        """Each row into its session's digest, until a value the quick read does not take."""
        for row in rows:
            b = slot(row[0])
            if getattr(b, quick):
                try:
                    add(b, row)
                except NotQuick:
                    setattr(b, quick, False)

    for where, params in _chunks(session_ids):
        take(conn.execute(_OUTPUT_SQL.format(where=where.format(col="o.session_id")), params), _add_output,
             "outputs_quick")
    for where, params in _chunks(session_ids):
        try:
            rows = conn.execute(_VOTE_SQL.format(where=where.format(col="v.session_id")), params).fetchall()
        except sqlite3.OperationalError:      # a BLOB in a vote's texts: the plain read, for these sessions
            for sid in params or [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM vote")]:
                slot(sid).votes_quick = False
            continue
        take(rows, _add_vote, "votes_quick")
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
    if est is None or _float(est) != int(est):
        raise NotQuick   # the quick read takes whole numbers only
    o = b.out
    o["o_model"].append(b.models[model])
    o["o_status"].append(STATUS_CODES.get(status, OTHER_STATUS) if isinstance(status, str) else OTHER_STATUS)
    o["o_turn"].append(b.turns[turn])
    o["o_category"].append(b.categories[category] if has_turn else -1)
    o["o_kind"].append(-1 if kind is None else b.kinds[kind])
    for name, value in (("o_ttft", ttft), ("o_duration", duration), ("o_cost", cost), ("o_created", created)):
        o[name].append(_float(value))
    o["o_input"].append(_tokens(inp))
    o["o_output"].append(_tokens(outp))
    o["o_estimated"].append(est != 0)
    o["o_cached"].append(cached == 1)
    o["o_real"].append(real == 1)


def _add_vote(b: _Building, row: Sequence[Any]) -> None:
    _, key, meta, rater_kind, created, vote_id = row
    if not isinstance(vote_id, str) or not isinstance(rater_kind, str):
        raise NotQuick
    raw = vote_id.encode()
    if not raw or len(raw) > MAX_ID_BYTES or b"\0" in raw or (b.ids and raw <= b.ids[-1]):
        raise NotQuick   # ids are compared as zero-padded bytes
    v = b.vote
    v["v_key"].append(b.keys[key])
    v["v_meta"].append(b.metas[meta])
    v["v_kind"].append(b.rater_kinds[rater_kind])
    v["v_created"].append(_float(created))
    b.ids.append(raw)


def _finish(b: _Building, demo: bool) -> Digest:
    d = Digest([b.session_id], [demo], outputs_quick=b.outputs_quick, votes_quick=b.votes_quick, bad=b.bad,
               bad_ids=b.bad_ids)
    for name in _CODED:
        d.lists[name] = list(getattr(b, name)) if (b.outputs_quick if name in _OUTPUT_LISTS else b.votes_quick) \
            else []
    turns = list(b.turns) if b.outputs_quick else []
    d.turns_json, d.n_turns = json.dumps(turns), len(turns)
    b.out["o_session"] = [0] * len(b.out["o_model"])
    b.vote["v_session"] = [0] * len(b.vote["v_key"])
    for name, dtype in OUTPUT_ARRAYS.items():
        d.arrays[name] = np.array(b.out[name] if b.outputs_quick else [], dtype=dtype)
    for name, dtype in VOTE_ARRAYS.items():
        d.arrays[name] = np.array(b.vote[name] if b.votes_quick else [], dtype=dtype)
    d.v_id = _id_array(b.ids if b.votes_quick else [])
    return d


def _id_array(ids: Sequence[bytes]) -> np.ndarray:
    width = max(1, max(map(len, ids), default=1))
    return np.array(ids, dtype=f"S{width}")


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
    luts = [{name: np.array([codes[name][x] for x in d.lists[name]] + [-1], dtype=np.int64) for name in _CODED}
            for d in parts]
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
    width = max([d.v_id.itemsize for d in parts] + [1])
    ids = np.concatenate([d.v_id.astype(f"S{width}") for d in parts]) if parts else np.zeros(0, dtype="S1")
    voted = sorted((d.v_id[0], d.v_id[-1], k) for k, d in enumerate(parts) if d.n_votes)
    if all(a[1] < b[0] for a, b in zip(voted, voted[1:], strict=False)):    # id ranges apart: one after another
        vote_at = np.cumsum([0] + [d.n_votes for d in parts])
        order = np.concatenate([np.arange(parts[k].n_votes) + int(vote_at[k]) for *_, k in voted]) \
            if voted else np.zeros(0, dtype=np.int64)
    else:                                                                   # interleaved: sort them all
        order = np.argsort(ids, kind="stable")
    for name in VOTE_ARRAYS:
        out.arrays[name] = out.arrays[name][order]
    out.v_id = ids[order]
    return out


# --------------------------------------------------------------------------- packing

def encode(d: Digest, k: Key) -> tuple[bytes, str]:
    """(the blob, the turns' JSON), signed with `k`: the turns are read only
    when needed, so they are kept in a column of their own."""
    arrays = [*OUTPUT_ARRAYS, *VOTE_ARRAYS]
    header = {"format": FORMAT, "sessions": d.sessions, "demo": d.demo, "outputs_quick": d.outputs_quick,
              "votes_quick": d.votes_quick, "lists": d.lists, "bad": d.bad, "bad_ids": d.bad_ids,
              "sizes": [int(d.arrays[a].size) for a in arrays], "id_width": d.v_id.itemsize, "n_turns": d.n_turns}
    head = json.dumps(header).encode()
    body = b"".join([len(head).to_bytes(4, "little"), head,
                     *(np.ascontiguousarray(d.arrays[a], dtype=dtype).tobytes()
                       for a, dtype in {**OUTPUT_ARRAYS, **VOTE_ARRAYS}.items()), d.v_id.tobytes()])
    return k.prefix + mac(k, body, d.turns_json.encode()) + body, d.turns_json


def decode(blob: Any, turns: Any, k: Key | None) -> Digest | None:
    """The digest in `blob` (with its turns' JSON, checked when decoded), or
    None when it was not signed with `k` as it is, or does not parse as one
    (any length, type or code out of place)."""
    if k is None or not isinstance(blob, bytes) or not isinstance(turns, str) or len(blob) < PREFIX_BYTES + 4 \
            or blob[:len(k.prefix)] != k.prefix:
        return None
    body = blob[PREFIX_BYTES:]
    try:
        if not hmac.compare_digest(blob[len(k.prefix):PREFIX_BYTES], mac(k, body, turns.encode())):
            return None
        return _decode(body, turns)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, RecursionError,
            UnicodeError):
        return None


def _all(values: Any, *types: type) -> bool:
    return isinstance(values, list) and set(map(type, values)) <= set(types)


def _count(n: Any) -> bool:
    return type(n) is int and n >= 0


def _decode(blob: bytes, turns: str) -> Digest | None:
    n_head = int.from_bytes(blob[:4], "little")
    if 4 + n_head > len(blob):
        return None
    header = json.loads(blob[4:4 + n_head].decode())
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    d = Digest(turns_json=turns)
    d.sessions, d.demo = header["sessions"], header["demo"]
    if not _all(d.sessions, str) or not _all(d.demo, bool) or len(d.sessions) != len(d.demo):
        return None
    for flag in ("outputs_quick", "votes_quick"):
        if type(header[flag]) is not bool:
            return None
        setattr(d, flag, header[flag])
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
    sizes, width = header["sizes"], header["id_width"]
    if not _all(sizes, int) or len(sizes) != len(names) or not all(map(_count, sizes)) \
            or not _count(width) or not 1 <= width <= MAX_ID_BYTES:
        return None
    at = 4 + n_head
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
    if len(blob) != at + n_vote * width:
        return None
    d.v_id = np.frombuffer(blob, dtype=f"S{width}", count=n_vote, offset=at)
    d.n_turns = header["n_turns"]
    if not _count(d.n_turns):
        return None
    ranges = {**{array: (len(lists[name]), none_ok) for name, (array, none_ok) in _CODED.items()},
              "o_turn": (d.n_turns, False), "o_session": (len(d.sessions), False),
              "v_session": (len(d.sessions), False), "o_status": (OTHER_STATUS + 1, False),
              "o_input": (MAX_TOKENS + 1, True), "o_output": (MAX_TOKENS + 1, True)}
    for array, (n, none_ok) in ranges.items():
        codes = d.arrays[array]
        if codes.size and (int(codes.max()) >= n or int(codes.min()) < (-1 if none_ok else 0)):
            return None
    if n_vote > 1 and not bool((d.v_id[1:] > d.v_id[:-1]).all()):
        return None                                   # votes in id order, each id once
    return d


# --------------------------------------------------------------------------- reading and keeping

T = TypeVar("T")


def _snapshot(conn: sqlite3.Connection, read: Callable[[], T]) -> T:
    """`read()` in one read transaction: every digest and row of the same moment."""
    began = not conn.in_transaction
    if began:
        conn.execute("BEGIN")
    try:
        return read()
    finally:
        if began and conn.in_transaction:
            conn.execute("COMMIT")


def _has_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'report_group'").fetchone() \
        is not None


def _stored(conn: sqlite3.Connection, session_ids: Sequence[str] | None, k: Key | None) -> dict[str, Digest]:
    found: dict[str, Digest] = {}
    if k is None:
        return found
    for where, params in _chunks(session_ids):
        for sid, blob, turns in conn.execute(f"SELECT session_id, data, turns FROM report_digest WHERE 1"
                                             f"{where.format(col='session_id')}", params):
            d = decode(blob, turns, k)
            if d is not None and d.sessions == [sid]:
                found[sid] = d
    return found


def _for_sessions(conn: sqlite3.Connection, session_ids: Sequence[str], k: Key | None) -> dict[str, Digest]:
    if not _has_tables(conn):
        return build(conn, session_ids)
    found = _stored(conn, session_ids, k)
    todo = [s for s in session_ids if s not in found]
    if todo:
        found.update(build(conn, todo))
    return found


def for_sessions(conn: sqlite3.Connection, session_ids: Sequence[str]) -> dict[str, Digest]:
    """These sessions' digests: stored where stored, signed here and
    readable, built from the rows for the rest (not saved: a reader may not
    write)."""
    k = key()
    return _snapshot(conn, lambda: _for_sessions(conn, session_ids, k))


def _groups(conn: sqlite3.Connection, k: Key | None) -> list[Digest]:
    """The stored group digests signed here whose sessions are their group's members."""
    if k is None:
        return []
    members: dict[int, list[str]] = {}
    for grp, sid in conn.execute("SELECT grp, session_id FROM report_group_member ORDER BY grp, session_id"):
        members.setdefault(grp, []).append(sid)
    rows = conn.execute("SELECT grp, data, turns FROM report_group").fetchall()
    if len(rows) > 1:   # two at a time: hashlib and numpy leave the GIL to the other
        with ThreadPoolExecutor(2, "lineup-digests") as pool:
            decoded = list(pool.map(lambda row: decode(row[1], row[2], k), rows))
    else:               # one group (the common case): no threads to start
        decoded = [decode(row[1], row[2], k) for row in rows]
    return [d for (grp, *_), d in zip(rows, decoded, strict=True) if d is not None and d.sessions == members.get(grp)]


def whole(conn: sqlite3.Connection) -> Digest:
    """Every session's rows as one digest: the stored groups', and the
    sessions no stored group holds (their own digests, or built)."""
    k = key()

    def read() -> Digest:
        every = [r[0] for r in conn.execute("SELECT id FROM session ORDER BY id")]
        if not _has_tables(conn):
            built = build(conn, every)
            return merge([built[sid] for sid in every])
        groups = _groups(conn, k)
        held = {sid for d in groups for sid in d.sessions}
        rest = [sid for sid in every if sid not in held]
        if len(rest) * 2 > len(every):     # mostly missing: one pass over the tables
            built = build(conn, None)
            parts = [built.get(sid) or build(conn, [sid])[sid] for sid in rest]
        else:
            found = _for_sessions(conn, rest, k)
            parts = [found[sid] for sid in rest]
        kept = set(every)
        return merge([d for d in groups if set(d.sessions) <= kept] + parts)

    return _snapshot(conn, read)


def refresh(conn: sqlite3.Connection, k: Key) -> int:
    """Inside the caller's write transaction (`BEGIN IMMEDIATE`: the rows
    read are the rows of that moment, no write lands between the read and
    the save): build and store the sessions' digests that are missing (or
    not signed with `k`), put sessions in no group into the newest group (a
    new one past `GROUP_SIZE`), and build each group whose digest is missing.
    How many sessions' digests were built."""
    todo = [r[0] for r in conn.execute("SELECT id FROM session WHERE id NOT IN (SELECT session_id FROM "
                                       "report_digest WHERE substr(data, 1, 12) = ?) ORDER BY id", [k.prefix])]
    built = build(conn, todo) if todo else {}
    conn.executemany("INSERT OR REPLACE INTO report_digest (session_id, data, turns) VALUES (?, ?, ?)",
                     [(sid, *encode(built[sid], k)) for sid in todo if sid in built])
    conn.execute("DELETE FROM report_group_member WHERE session_id NOT IN (SELECT id FROM session)")
    loose = [r[0] for r in conn.execute("SELECT id FROM session WHERE id NOT IN "
                                        "(SELECT session_id FROM report_group_member) ORDER BY id")]
    if loose:
        newest, size = conn.execute("SELECT ifnull(max(grp), 0), count(*) FROM report_group_member WHERE grp = "
                                    "(SELECT max(grp) FROM report_group_member)").fetchone()
        for sid in loose:
            if size >= GROUP_SIZE:
                newest, size = newest + 1, 0
            conn.execute("INSERT INTO report_group_member (session_id, grp) VALUES (?, ?)", [sid, newest])
            conn.execute("DELETE FROM report_group WHERE grp = ?", [newest])
            size += 1
    stale = [r[0] for r in conn.execute("SELECT DISTINCT grp FROM report_group_member WHERE grp NOT IN "
                                        "(SELECT grp FROM report_group WHERE substr(data, 1, 12) = ?) ORDER BY grp",
                                        [k.prefix])]
    for grp in stale:
        sids = [r[0] for r in conn.execute("SELECT session_id FROM report_group_member WHERE grp = ? "
                                           "ORDER BY session_id", [grp])]
        parts = _for_sessions(conn, sids, k)
        conn.execute("INSERT OR REPLACE INTO report_group (grp, data, turns) VALUES (?, ?, ?)",
                     [grp, *encode(merge([parts[sid] for sid in sids]), k)])
    return len(built)
