"""The reads the report makes, in the store because the store owns the schema.

Why a module of its own: the report (`core.report`) decides what the record
means; this module knows where it is and how to get it out fast. Each read is
one pass over a table with narrow columns and no answer text (except the
answers to repeated prompts, for stability), and hands back what the report
needs as numpy columns or plain rows, never SQL:

- `read_votes`: the current, not superseded votes, as codes into their
  distinct (choice, ranking, mapping, positions) texts and their distinct
  (category, rater, prompt): 100k votes carry a few thousand distinct texts;
- `read_outputs`: every finished attempt as numpy columns, grouped by model,
  in creation order, with error kinds, answer counts and the attempts that
  are not their (turn, model)'s answer (`stale`);
- tags, check results, repeated answers and their texts, prices, counts.

`Scope` is the report's filter as the store applies it. Without named
sessions it leaves out the sessions of `store.records.UNJUDGED_KINDS` (a
`lineup load` profile): their latency under forced concurrency is not the
models' latency; naming such a session brings it in. numpy is imported
here, not in `store/__init__`, so only the report pays for it. To read off
the writer thread of a running app, `AsyncStore.read`. Past 600 lines
because every read the report makes is here, beside the schema it reads
(style control's answers by conversation, `voted_threads`, included).
"""

from __future__ import annotations

import bisect
import json
import operator
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from store import digests as D
from store.bounds import COST_MAX, MS_MAX
from store.db import Store
from store.records import PROMPT_SQL, UNJUDGED_KINDS


@dataclass(frozen=True)
class Scope:
    """Which records count: sessions (ids, resolved), a turn category, a rater
    (votes and tags), a creation time (votes and answers), demo models or not."""

    sessions: tuple[str, ...] = ()
    category: str | None = None
    rater: str | None = None
    since: float | None = None
    include_demo: bool = False
    rater_kind: str = "human"      # whose votes: people's ("human") or LLM judges' ("judge")


def _where(scope: Scope, *, time_col: str, rater_col: str | None, session_col: str,
           category_col: str) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if scope.sessions:
        clauses.append(f"{session_col} IN ({','.join('?' * len(scope.sessions))})")
        params.extend(scope.sessions)
    else:
        clauses.append(f"{session_col} NOT IN (SELECT id FROM session WHERE kind IN "
                       f"({','.join('?' * len(UNJUDGED_KINDS))}))")
        params.extend(sorted(UNJUDGED_KINDS))
    if scope.category is not None:
        clauses.append(f"{category_col} = ?")
        params.append(scope.category)
    if scope.rater is not None and rater_col:
        clauses.append(f"{rater_col} = ?")
        params.append(scope.rater)
    if scope.since is not None:
        clauses.append(f"{time_col} >= ?")
        params.append(scope.since)
    return (" AND " + " AND ".join(clauses)) if clauses else "", params


def codes(values: Iterable[Any]) -> tuple[np.ndarray, list[Any]]:
    """Codes (equal values, equal codes; numbered in order of first
    appearance) and the distinct values."""
    values = list(values)
    index = {v: k for k, v in enumerate(dict.fromkeys(values))}
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), list(index)


# --------------------------------------------------------------------------- votes


def demo_contestants(store: Store) -> set[tuple[str, str]]:
    """(session, alias) of every demo contestant."""
    return {(s, a) for s, a in store.conn.execute("SELECT session_id, alias FROM contestant WHERE is_demo = 1")}


@dataclass
class VoteRows:
    """The votes that count (current, not superseded), in creation (id) order.
    `key[k]` indexes `keys`, the distinct (choice, ranking, mapping,
    positions) texts as stored; `meta[k]` indexes `metas`, the distinct
    (category, rater, prompt). `demo_session[k]`: the vote's session when that
    session has a demo contestant (None elsewhere; the list is None when demo
    votes are not left out or there are none). `ids`: when asked for."""

    keys: list[tuple[Any, ...]]
    key: np.ndarray
    metas: list[tuple[Any, ...]]
    meta: np.ndarray
    demo_session: list[Any] | None
    ids: list[Any] | None

    def __len__(self) -> int:
        return int(self.key.size)


def read_votes(store: Store, scope: Scope, *, with_ids: bool = False, demo: bool = False,
               sql: bool = False) -> VoteRows:
    """People's votes only, or judges' only (`scope.rater_kind`). One narrow row per vote: the four texts that say what it means as one
    key, (category, rater, prompt) as another, so that 100k votes are a few
    thousand distinct keys to read. `demo`: also read each vote's session
    where it has a demo contestant. From the sessions' digests
    (`store.digests`) unless one needs the plain read, or `sql` (the tests'
    reference)."""
    if not sql:
        found = _votes_from_digest(store, scope, with_ids=with_ids, demo=demo)
        if found is not None:
            return found
    conn = store.conn
    where, params = _where(scope, time_col="v.created", rater_col="v.rater",
                           session_col="v.session_id", category_col="t.category")
    where = " AND v.rater_kind = ?" + where
    params = [scope.rater_kind, *params]
    extra = ""
    if demo:   # the session only where it has a demo contestant (NULL, i.e. free, elsewhere)
        extra += (", CASE WHEN v.session_id IN (SELECT session_id FROM contestant WHERE is_demo = 1) "
                  "THEN v.session_id END")
    if with_ids:
        extra += ", v.id"
    tail = (" FROM vote v JOIN turn t ON t.id = v.turn_id "
            # "+": a table scan beats walking the `current` index when most votes are current
            "WHERE +v.current = 1 AND v.id NOT IN (SELECT supersedes FROM vote WHERE supersedes IS NOT NULL)"
            + where + " ORDER BY v.id")         # ULIDs: creation order
    try:   # json_array: an unambiguous single key per tuple of texts
        rows = conn.execute(f"SELECT json_array(v.choice, v.ranking, v.mapping, v.positions), "
                            f"json_array(t.category, v.rater, {PROMPT_SQL}){extra}{tail}", params).fetchall()
        key, json_keys = codes(map(operator.itemgetter(0), rows))
        meta, json_metas = codes(map(operator.itemgetter(1), rows))
        keys = [tuple(json.loads(k)) for k in json_keys]
        metas = [tuple(json.loads(k)) for k in json_metas]
        rest = 2
    except sqlite3.OperationalError:   # no JSON functions, or a BLOB where text belongs: plain columns
        rows = conn.execute(f"SELECT v.choice, v.ranking, v.mapping, v.positions, t.category, v.rater, "
                            f"{PROMPT_SQL}{extra}{tail}", params).fetchall()
        key, keys = codes(r[:4] for r in rows)
        meta, metas = codes(r[4:7] for r in rows)
        rest = 7
    return VoteRows(keys, key, metas, meta,
                    [r[rest] for r in rows] if demo else None,
                    [r[-1] for r in rows] if with_ids else None)


# --------------------------------------------------------------------------- answers

#: Status codes of `OutputColumns.status`.
STATUS_CODES, OTHER_STATUS = D.STATUS_CODES, D.OTHER_STATUS   # (the digests code statuses too)
_STATUS_SQL = ("CASE o.status " + " ".join(f"WHEN '{s}' THEN {c}" for s, c in STATUS_CODES.items())
               + f" ELSE {OTHER_STATUS} END")


@dataclass
class OutputColumns:
    """Every finished attempt (requests) as numpy columns (nan: NULL): what the
    engineering figures and the answer counts need, and no text. `models`:
    (name, row indices in creation order), by name; `status`: `STATUS_CODES`;
    timings and costs outside `store.bounds` read as not recorded; `kinds`:
    error kinds per model; `answers`: (turn, model) answers per model;
    `stale`: ids of attempts that are not their (turn, model)'s answer;
    `raw`: the recorded (input tokens, output tokens, cost, session) per row
    when some cost was not recorded (it is then priced from the tokens);
    `cached`: answers reused from the response cache (`core.answering.cache`), which
    made no request, so the engineering figures leave them out."""

    models: list[tuple[str, np.ndarray]]
    status: np.ndarray
    estimated: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft: np.ndarray
    duration: np.ndarray
    cost: np.ndarray
    kinds: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    answers: dict[str, int] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)
    raw: list[list[Any]] | None = None
    cached: np.ndarray | None = None


def _output_filter(scope: Scope, *, turn: bool = True) -> tuple[str, str, list[Any]]:
    """(join, condition, params) for the attempts the report counts; the join
    with `turn` (always there: foreign keys) only when asked or filtering on it."""
    where, params = _where(scope, time_col="o.created", rater_col=None,
                           session_col="o.session_id", category_col="t.category")
    demo = "" if scope.include_demo else " AND o.is_demo = 0"
    join = " JOIN turn t ON t.id = o.turn_id" if turn or scope.category is not None else ""
    return join, "o.status != 'streaming'" + demo + where, params


_TIMING_SQL = ", ".join(f"CASE WHEN o.{c} BETWEEN 0 AND {MS_MAX!r} THEN o.{c} END"
                        for c in ("ttft_ms", "duration_ms"))
_COST_SQL = f"CASE WHEN o.cost BETWEEN 0 AND {COST_MAX!r} THEN o.cost END"
# The largest token counts the quick read takes (what the packed form of
# earlier versions held); larger ones, and anything but whole numbers, go
# through the plain read.
_MAX_INPUT_TOKENS = D.MAX_TOKENS
_MAX_OUTPUT_TOKENS = 2 ** 29 - 2


def _columns(rows: list[tuple[Any, ...]], n: int) -> list[list[Any]]:
    """Rows -> columns (an itemgetter per column is far quicker than zip(*rows))."""
    width = len(rows[0]) if rows else n
    return [list(map(operator.itemgetter(k), rows)) for k in range(width)]


class _NotQuick(Exception):
    """A value the quick read does not take (text where a number belongs, a
    token count that is not a whole number in range, a cost not recorded,
    two attempts of a model created at the same time): the plain read."""


def _floats(values: list[Any]) -> np.ndarray:
    try:
        return np.array(values, dtype=float)        # None -> nan
    except (TypeError, ValueError, OverflowError):
        raise _NotQuick from None


def _bounded(values: np.ndarray, high: float) -> np.ndarray:
    """Values outside [0, high] read as not recorded (nan), as `BETWEEN` does."""
    with np.errstate(invalid="ignore"):
        out = np.where((values >= 0) & (values <= high), values, np.nan)
    return out


def _counts(values: list[Any], high: int) -> np.ndarray:
    """Whole numbers from 0 to `high`, or NULL (nan)."""
    arr = _floats(values)
    with np.errstate(invalid="ignore"):
        ok = np.isnan(arr) | ((arr >= 0) & (arr <= high) & (arr == np.floor(arr)))
    if not ok.all():
        raise _NotQuick
    return arr


def _unpriced(conn: sqlite3.Connection, turns: list[Any], cost: np.ndarray) -> tuple[list[Any], list[Any]]:
    """(cost, session) per row for the quick read when some cost is not
    recorded: the cost or None, and the session (through the answer's turn)
    where it is None, whose recorded prices price it."""
    costs = [None if c != c else c for c in cost.tolist()]
    session_of = dict(conn.execute("SELECT id, session_id FROM turn"))
    return costs, [session_of.get(t) if c is None else None for t, c in zip(turns, costs, strict=True)]


def read_outputs(store: Store, scope: Scope, *, plain: bool = False, sql: bool = False) -> OutputColumns:
    """The attempts the report counts, as columns. The quick read takes the
    stored values as they come (from the sessions' digests, `store.digests`,
    unless `sql`: the tests' reference) and checks them with numpy; any value
    it does not take (`_NotQuick`) means the plain read, where SQLite orders
    the rows and reads every column as it is."""
    if not plain and not sql:
        found = _outputs_from_digest(store, scope)
        if found is not None:
            return found
    conn = store.conn
    join, cond, params = _output_filter(scope, turn=False)
    if plain:
        rows = conn.execute(
            f"SELECT o.contestant, {_STATUS_SQL}, {_TIMING_SQL}, {_COST_SQL}, o.turn_id, "
            "o.input_tokens, o.output_tokens, o.tokens_estimated, "
            f"CASE WHEN {_COST_SQL} IS NULL THEN o.session_id END, o.origin = 'cache' "
            f"FROM output o{join} WHERE {cond} ORDER BY o.created, o.id", params).fetchall()
    else:
        rows = conn.execute(
            "SELECT o.contestant, o.status, o.ttft_ms, o.duration_ms, o.cost, o.turn_id, o.created, "
            f"o.input_tokens, o.output_tokens, o.tokens_estimated, o.origin = 'cache' FROM output o{join} "
            f"WHERE {cond}", params).fetchall()
    cols = _columns(rows, 11)
    del rows
    names = cols[0]
    index = {name: k for k, name in enumerate(sorted(set(names)))}
    code = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
    raw = None
    if plain:
        status = np.array(cols[1], dtype=np.int64)
        estimated = np.array([bool(x) for x in cols[8]], dtype=bool)
        input_tokens = np.array(cols[6], dtype=float)
        output_tokens = np.array(cols[7], dtype=float)
        ttft, duration, cost = (np.array(cols[k], dtype=float) for k in (2, 3, 4))   # None -> nan
        raw = [cols[6], cols[7], cols[4], cols[9]]
        order = np.argsort(code, kind="stable")
    else:
        try:
            cost = _bounded(_floats(cols[4]), COST_MAX)
            created = _floats(cols[6])
            order = np.lexsort((created, code))    # creation order within each model
            if np.any((code[order][1:] == code[order][:-1]) & (created[order][1:] == created[order][:-1])):
                raise _NotQuick                    # (created, id) ties: SQLite orders
            input_tokens = _counts(cols[7], _MAX_INPUT_TOKENS)
            output_tokens = _counts(cols[8], _MAX_OUTPUT_TOKENS)
            flags = _floats(cols[9])
            if np.isnan(flags).any() or not (flags == np.floor(flags)).all():
                raise _NotQuick
            ttft = _bounded(_floats(cols[2]), MS_MAX)
            duration = _bounded(_floats(cols[3]), MS_MAX)
        except _NotQuick:
            return read_outputs(store, scope, plain=True)
        lut = {s: STATUS_CODES.get(s, OTHER_STATUS) if isinstance(s, str) else OTHER_STATUS
               for s in set(cols[1])}
        status = np.fromiter(map(lut.__getitem__, cols[1]), dtype=np.int64, count=len(cols[1]))
        estimated = flags != 0
        if np.isnan(cost).any():                   # not recorded (or out of range): from the prices
            raw = [cols[7], cols[8], *_unpriced(conn, cols[5], cost)]
    bounds = np.searchsorted(code[order], np.arange(len(index) + 1))
    out = OutputColumns(models=[(name, order[bounds[k]:bounds[k + 1]]) for name, k in index.items()],
                        status=status, estimated=estimated, input_tokens=input_tokens,
                        output_tokens=output_tokens, ttft=ttft, duration=duration, cost=cost, raw=raw,
                        cached=np.array(cols[10], dtype=float) == 1)   # NULL origin: nan, not cached
    if np.any(status == 1):
        for model, kind, n in conn.execute(
                "SELECT o.contestant, ifnull(nullif(o.error_kind, ''), 'unknown'), count(*) "
                f"FROM output o{join} WHERE {cond} AND o.status = 'error' GROUP BY 1, 2", params):
            out.kinds[model][kind] += n
    turns = cols[5]
    dup_turns: set[Any] = set()
    for name, idx in out.models:
        mine = list(map(turns.__getitem__, idx.tolist()))
        out.answers[name] = len(set(mine))
        if out.answers[name] != len(mine):      # retries: some (turn, model) has several attempts
            dup_turns.update(t for t, n in Counter(mine).items() if n > 1)
    out.stale = _stale_attempts(store, scope, sorted(dup_turns)) if dup_turns else set()
    return out


# --------------------------------------------------------------------------- from digests


def _digest(store: Store, scope: Scope) -> tuple[D.Digest, np.ndarray]:
    """The digest of the sessions in scope (named ones, else every one), and
    which of its sessions count (without named sessions, all but
    `UNJUDGED_KINDS`); read once per state of the database (a report reads
    votes twice and answers once)."""
    conn = store.conn
    key = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes, scope.sessions)
    cached = getattr(store, "_digest_cache", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    if scope.sessions:
        named = sorted(set(scope.sessions))
        parts = D.for_sessions(conn, named)
        found = D.merge([parts[sid] for sid in named])
        counts = np.ones(len(found.sessions), dtype=bool)
    else:
        found = D.whole(conn)
        skip = {r[0] for r in conn.execute(f"SELECT id FROM session WHERE kind IN "
                                           f"({','.join('?' * len(UNJUDGED_KINDS))})", sorted(UNJUDGED_KINDS))}
        counts = np.array([sid not in skip for sid in found.sessions], dtype=bool)
    result = (found, counts)
    store._digest_cache = (key, result)   # type: ignore[attr-defined]
    return result


def outputs_out_of_range(store: Store, sessions: Sequence[str] = ()) -> tuple[int, list[str]]:
    """`Store.out_of_range` of the answers (of these sessions, or all), from
    the digests: how many answers hold a number out of range, and the first
    few by id named (`store.digests.BAD_NAMED`)."""
    found, _ = _digest(store, Scope(sessions=tuple(sessions)))
    return found.bad, [f"output {i}" for i in found.bad_ids]


def _first_appearance(tmp: np.ndarray, texts: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """Codes numbered in order of first appearance (as `codes` numbers them)
    from any codes `tmp` into `texts`, and the texts in that order."""
    if not tmp.size:
        return np.zeros(0, dtype=np.int64), []
    uniq, first, inverse = np.unique(tmp, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank[inverse.reshape(-1)], [texts[int(uniq[k])] for k in order.tolist()]


def _votes_from_digest(store: Store, scope: Scope, *, with_ids: bool, demo: bool) -> VoteRows | None:
    """`read_votes` from the digest (None: it needs the plain read)."""
    d, counts = _digest(store, scope)
    if not d.votes_quick:
        return None
    a = d.arrays
    mask = np.array([k == scope.rater_kind for k in d.lists["rater_kinds"]] + [False], dtype=bool)[a["v_kind"]]
    mask &= counts[a["v_session"]]
    if scope.category is not None or scope.rater is not None:
        parsed = [json.loads(m) for m in d.lists["metas"]]
        ok = np.array([(scope.category is None or m[0] == scope.category)
                       and (scope.rater is None or m[1] == scope.rater) for m in parsed] + [False], dtype=bool)
        mask &= ok[a["v_meta"]]
    if scope.since is not None:
        with np.errstate(invalid="ignore"):
            mask &= a["v_created"] >= scope.since
    idx = np.flatnonzero(mask)
    key, key_texts = _first_appearance(a["v_key"][idx], d.lists["keys"])
    meta, meta_texts = _first_appearance(a["v_meta"][idx], d.lists["metas"])
    sessions = None
    if demo:
        shown = [sid if is_demo else None for sid, is_demo in zip(d.sessions, d.demo, strict=True)]
        sessions = [shown[k] for k in a["v_session"][idx].tolist()]
    ids = None
    if with_ids:
        every = d.ids()
        ids = [every[k] for k in idx.tolist()]
    return VoteRows([tuple(json.loads(k)) for k in key_texts], key, [tuple(json.loads(m)) for m in meta_texts],
                    meta, sessions, ids)


#: (model, turn) pairs counted in an array of their own (32 MB at most), not by a sort.
_MAX_PAIR_BINS = 1 << 22


def _outputs_from_digest(store: Store, scope: Scope) -> OutputColumns | None:
    """`read_outputs`' quick read from the digest (None: it, or some value
    in scope, needs the read from the rows)."""
    d, counts = _digest(store, scope)
    if not d.outputs_quick:
        return None
    a = d.arrays
    mask = counts[a["o_session"]] if scope.include_demo else counts[a["o_session"]] & a["o_real"]
    if scope.category is not None:
        ok = np.array([c == scope.category for c in d.lists["categories"]] + [False], dtype=bool)
        mask &= ok[a["o_category"]]            # -1 (no turn): the last, False
    if scope.since is not None:
        with np.errstate(invalid="ignore"):
            mask &= a["o_created"] >= scope.since
    idx = np.flatnonzero(mask)
    models = d.lists["models"]
    present = np.bincount(a["o_model"][idx], minlength=len(models)) > 0
    names = sorted(m for m, here in zip(models, present.tolist(), strict=True) if here)
    index = {name: k for k, name in enumerate(names)}
    code = np.array([index.get(m, -1) for m in models] + [-1], dtype=np.int64)[a["o_model"][idx]]
    c = {col: a[col][idx] for col in ("o_status", "o_ttft", "o_duration", "o_cost", "o_created", "o_input",
                                      "o_output", "o_estimated", "o_cached", "o_turn", "o_kind")}
    cost = _bounded(c["o_cost"], COST_MAX)
    created = c["o_created"]
    order = np.lexsort((created, code))
    if np.any((code[order][1:] == code[order][:-1]) & (created[order][1:] == created[order][:-1])):
        return None                        # (created, id) ties: SQLite orders (the read from the rows)
    input_tokens, output_tokens = _token_column(c["o_input"]), _token_column(c["o_output"])
    if np.nanmax(input_tokens, initial=0) > _MAX_INPUT_TOKENS or np.nanmax(output_tokens, initial=0) > \
            _MAX_OUTPUT_TOKENS:
        return None
    status = c["o_status"].astype(np.int64)
    turn = c["o_turn"].astype(np.int64)
    raw = None
    turn_ids: list[str] | None = None
    if np.isnan(cost).any():               # not recorded (or out of range): from the prices
        turn_ids = _turn_ids(d)
        if turn_ids is None:
            return None
        turns = [turn_ids[k] for k in turn.tolist()]
        raw = [_whole(input_tokens), _whole(output_tokens), *_unpriced(store.conn, turns, cost)]
    bounds = np.searchsorted(code[order], np.arange(len(names) + 1))
    out = OutputColumns(models=[(name, order[bounds[k]:bounds[k + 1]]) for name, k in index.items()],
                        status=status, estimated=c["o_estimated"].astype(bool), input_tokens=input_tokens,
                        output_tokens=output_tokens, ttft=_bounded(c["o_ttft"], MS_MAX),
                        duration=_bounded(c["o_duration"], MS_MAX), cost=cost, raw=raw,
                        cached=c["o_cached"].astype(bool))
    errors = np.flatnonzero(status == 1)
    if errors.size:
        kinds = d.lists["kinds"]
        for k, kind in zip(code[errors].tolist(), c["o_kind"][errors].tolist(), strict=True):
            out.kinds[names[k]][kinds[kind]] += 1
    if not idx.size:
        return out
    width = max(d.n_turns, 1)
    if len(names) * width <= _MAX_PAIR_BINS:   # counted in place: a sort of 200k keys is ~10x slower
        n_attempts = np.bincount(code * width + turn, minlength=len(names) * width)
        pairs = np.flatnonzero(n_attempts)
        n_attempts = n_attempts[pairs]
    else:
        pairs, n_attempts = np.unique(code * width + turn, return_counts=True)
    per_model = np.bincount(pairs // width, minlength=len(names))
    for name, k in index.items():
        out.answers[name] = int(per_model[k])
    dup = pairs[n_attempts > 1]
    if dup.size:                           # retries: some (turn, model) has several attempts
        turn_ids = turn_ids or _turn_ids(d)
        if turn_ids is None:
            return None
        out.stale = _stale_attempts(store, scope, sorted({turn_ids[k] for k in (dup % width).tolist()}))
    return out


def _turn_ids(d: D.Digest) -> list[str] | None:
    """The digest's turns (None: they do not parse)."""
    try:
        return d.turn_ids()
    except ValueError:
        return None


def _token_column(values: np.ndarray) -> np.ndarray:
    """A digest's token counts (-1: NULL) as the quick read's column (nan: NULL)."""
    return np.where(values < 0, np.nan, values.astype(float))


def _whole(values: np.ndarray) -> list[Any]:
    """A column of whole numbers (nan: NULL) as the rows hold them."""
    return [None if x != x else int(x) for x in values.tolist()]


def latest_attempts(rows: Iterable[Sequence[Any]]) -> dict[tuple[Any, Any], Sequence[Any]]:
    """rows (id, turn_id, contestant, attempt, ...) in creation order -> the latest
    attempt per (turn, contestant): the answer people saw."""
    latest: dict[tuple[Any, Any], Sequence[Any]] = {}
    for r in rows:
        key = (r[1], r[2])
        if key not in latest or r[3] >= latest[key][3]:
            latest[key] = r
    return latest


def _stale_attempts(store: Store, scope: Scope, turns: list[Any]) -> set[str]:
    join, cond, params = _output_filter(scope)
    stale: set[str] = set()
    for start in range(0, len(turns), 500):
        chunk = turns[start:start + 500]
        rows = store.conn.execute(
            f"SELECT o.id, o.turn_id, o.contestant, o.attempt FROM output o{join} "
            f"WHERE {cond} AND o.turn_id IN ({','.join('?' * len(chunk))}) ORDER BY o.created, o.id",
            params + chunk).fetchall()
        keep = {r[0] for r in latest_attempts(rows).values()}
        stale.update(r[0] for r in rows if r[0] not in keep)
    return stale


def variant_bases(store: Store, scope: Scope) -> dict[str, str]:
    """alias -> the model alias it is a variant of, for the contestants of the
    sessions in scope that are variants (`[variants.NAME]`)."""
    sql = "SELECT alias, variant_of FROM contestant WHERE variant_of IS NOT NULL"
    params: list[Any] = []
    if scope.sessions:
        sql += f" AND session_id IN ({','.join('?' * len(scope.sessions))})"
        params.extend(scope.sessions)
    out: dict[str, str] = {}
    for alias, base in store.conn.execute(sql + " ORDER BY session_id, position", params):
        out.setdefault(alias, base)
    return out


def recorded_prices(store: Store) -> dict[tuple[str, str], Any]:
    """(session, alias) -> the price its session recorded (JSON as stored,
    parsed; unreadable ones left out)."""
    out = {}
    for sid, alias, price in store.conn.execute(
            "SELECT session_id, alias, price FROM contestant WHERE price IS NOT NULL"):
        try:
            out[(sid, alias)] = json.loads(price)
        except ValueError:
            continue
    return out


def tag_rows(store: Store, scope: Scope) -> Iterator[tuple[str, str, str]]:
    """(output id, tag, model) of every tag not removed, on the attempts in scope."""
    join, cond, params = _output_filter(scope)
    sql = ("SELECT g.output_id, g.tag, o.contestant FROM tag g JOIN output o ON o.id = g.output_id "
           f"{join} WHERE g.removed_at IS NULL AND {cond}")
    if scope.rater is not None:
        sql += " AND g.rater = ?"
        params.append(scope.rater)
    yield from store.conn.execute(sql, params)


def tagged_conversations(store: Store, tag: str) -> set[tuple[str, str]]:
    """(turn id, model) for every turn of a conversation (a case's turns in
    one repeat, or a chat turn) in which that model has an answer tagged
    `tag` (not removed): what a judge saw with the verdict on that turn."""
    return set(store.conn.execute(
        "SELECT t2.id, o.contestant FROM tag g JOIN output o ON o.id = g.output_id JOIN turn t ON t.id = o.turn_id "
        "JOIN turn t2 ON t2.session_id = t.session_id AND (t2.id = t.id OR (t.case_id IS NOT NULL AND "
        "t2.case_id = t.case_id AND t2.repeat_index = t.repeat_index)) "
        "WHERE g.tag = ? AND g.removed_at IS NULL", [tag]).fetchall())


def check_rows(store: Store, scope: Scope) -> Iterator[tuple[Any, ...]]:
    """(output id, check name, spec (JSON text), passed, detail, model,
    category) of every check result on the attempts in scope, in the order
    they were saved."""
    join, cond, params = _output_filter(scope)
    yield from store.conn.execute(
        "SELECT c.output_id, c.check_name, c.spec, c.passed, c.detail, o.contestant, t.category "
        f"FROM check_result c JOIN output o ON o.id = c.output_id{join} "
        f"WHERE {cond} ORDER BY c.rowid", params)


def rubric_rows(store: Store, scope: Scope) -> list[tuple[Any, ...]]:
    """(turn id, model, check name, spec (JSON text)) of every `rubric`
    check result on the attempts in scope (`core.report.graders`)."""
    join, cond, params = _output_filter(scope)
    return store.conn.execute(
        "SELECT o.turn_id, o.contestant, c.check_name, c.spec "
        f"FROM check_result c JOIN output o ON o.id = c.output_id{join} "
        f"WHERE {cond} AND c.spec LIKE '%rubric%' AND json_valid(c.spec) "   # LIKE first: cheap, most are not
        "AND json_extract(c.spec, '$.type') = 'rubric' ORDER BY c.rowid",
        params).fetchall()


def score_rows(store: Store, scope: Scope) -> list[tuple[Any, ...]]:
    """(output id, model, dimension, value, rater, rater kind, repeat index)
    of each current score on the answers in scope: a rater's latest (by time,
    then id) on an answer and dimension (`store.records.current_scores`)."""
    join, cond, params = _output_filter(scope)
    return store.conn.execute(
        "SELECT s.output_id, o.contestant, s.dimension, s.value, s.rater, s.rater_kind, t.repeat_index "
        f"FROM score s JOIN output o ON o.id = s.output_id{join} "
        f"WHERE {cond} AND s.value BETWEEN 1 AND 5 AND s.rater_kind IN ('human', 'judge') "
        "AND NOT EXISTS (SELECT 1 FROM score l WHERE l.output_id = s.output_id AND l.dimension = s.dimension "
        "AND l.rater = s.rater AND l.rater_kind = s.rater_kind AND (l.created, l.id) > (s.created, s.id)) "
        "ORDER BY s.created, s.id", params).fetchall()


def repeated_answers(store: Store, scope: Scope) -> list[Sequence[Any]]:
    """The answers (id, turn, contestant, attempt, status, session, prompt,
    follow-up, repeat) to prompts asked more than once (repeat_index), in the
    order their (turn, contestant) first appears; none without repeats."""
    conn = store.conn
    if not conn.execute("SELECT min(repeat_index) != max(repeat_index) FROM turn").fetchone()[0]:
        return []
    join, cond, params = _output_filter(scope)
    rows = conn.execute(
        "SELECT o.id, o.turn_id, o.contestant, o.attempt, o.status, o.session_id, "
        f"{PROMPT_SQL}, t.follow_up_index, t.repeat_index "
        f"FROM output o{join} WHERE {cond} "
        f"AND ({PROMPT_SQL}, t.follow_up_index) IN (SELECT {PROMPT_SQL}, t.follow_up_index FROM turn t "
        "GROUP BY 1, 2 HAVING count(DISTINCT t.repeat_index) > 1) "
        "ORDER BY o.created, o.id", params).fetchall()
    return list(latest_attempts(rows).values())


def answer_texts(store: Store, ids: Sequence[str]) -> dict[str, str]:
    """id -> text of these answers."""
    texts: dict[str, str] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start:start + 500])
        texts.update(store.conn.execute(
            f"SELECT id, text FROM output WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall())
    return texts


def session_count(store: Store) -> int:
    return int(store.conn.execute("SELECT count(*) FROM session").fetchone()[0])


def real_contestant_count(store: Store) -> int:
    """Contestants that are not demo models."""
    return int(store.conn.execute("SELECT count(*) FROM contestant WHERE is_demo = 0").fetchone()[0])


# --------------------------------------------------------------------------- judges and rater quality


def pair_vote_rows(store: Store, scope: Scope, judge_rater: str) -> list[tuple[Any, ...]]:
    """The current votes the judge calibration reads: people's (the scope's
    filters, its rater among them) and those of the rater `judge_rater`
    (the scope's filters but the rater): (id, turn id, category, rater,
    rater kind, judge prompt hash, choice, ranking, mapping, positions,
    session), in creation order. Demo votes are the caller's to leave out."""
    human = Scope(scope.sessions, scope.category, scope.rater, scope.since, scope.include_demo, "human")
    judge = Scope(scope.sessions, scope.category, None, scope.since, scope.include_demo, "judge")
    rows: list[tuple[Any, ...]] = []
    for part, extra, extra_params in ((human, "", []), (judge, " AND v.rater = ?", [judge_rater])):
        where, params = _where(part, time_col="v.created", rater_col="v.rater", session_col="v.session_id",
                               category_col="t.category")
        rows += store.conn.execute(
            "SELECT v.id, v.turn_id, t.category, v.rater, v.rater_kind, v.judge_prompt_hash, v.choice, v.ranking, "
            "v.mapping, v.positions, v.session_id FROM vote v JOIN turn t ON t.id = v.turn_id "
            "WHERE v.current = 1 AND v.rater_kind = ? AND v.id NOT IN "
            "(SELECT supersedes FROM vote WHERE supersedes IS NOT NULL)" + extra + where + " ORDER BY v.id",
            [part.rater_kind, *extra_params, *params]).fetchall()
    return rows


def judge_prompts(store: Store, judge_rater: str) -> list[tuple[str | None, int, float]]:
    """(prompt hash, current verdicts, latest time) of each prompt this judge was asked with, newest first."""
    return store.conn.execute(
        "SELECT judge_prompt_hash, count(*), max(created) FROM vote WHERE rater = ? AND rater_kind = 'judge' "
        "AND current = 1 GROUP BY 1 ORDER BY 3 DESC", [judge_rater]).fetchall()


def gold_rows(store: Store, scope: Scope) -> list[tuple[Any, ...]]:
    """(rater, source, correct, choice) of every gold pair judged and not withdrawn, in the scope."""
    where, params = _where(scope, time_col="g.created", rater_col="g.rater", session_col="g.session_id",
                           category_col="t.category")
    return store.conn.execute(
        "SELECT g.rater, g.source, g.correct, g.choice FROM gold_check g JOIN turn t ON t.id = g.turn_id "
        "WHERE g.retracted_at IS NULL" + where + " ORDER BY g.id", params).fetchall()


def guess_rows(store: Store, scope: Scope) -> list[tuple[Any, ...]]:
    """(rater, actual model, guessed model or None, models offered (JSON)) of
    every blinding-audit guess whose vote still counts, in the scope."""
    where, params = _where(scope, time_col="g.created", rater_col="g.rater", session_col="g.session_id",
                           category_col="t.category")
    return store.conn.execute(
        "SELECT g.rater, g.actual, g.guess, g.options FROM blind_guess g JOIN vote v ON v.id = g.vote_id "
        "JOIN turn t ON t.id = v.turn_id WHERE v.current = 1" + where + " ORDER BY g.id", params).fetchall()


def voted_answers(store: Store, vote_ids: Sequence[str]) -> dict[str, dict[str, str]]:
    """vote id -> {model: the text of its answer on the vote's turn} (the
    latest attempt, what the rater saw), for style control. A model without
    a recorded answer there is absent."""
    conn = store.conn
    turn_of: dict[str, str] = {}
    ids = list(vote_ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        turn_of.update(conn.execute(
            f"SELECT id, turn_id FROM vote WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall())
    turns = sorted(set(turn_of.values()))
    texts: dict[str, dict[str, str]] = defaultdict(dict)
    for start in range(0, len(turns), 500):
        chunk = turns[start:start + 500]
        rows = conn.execute(
            "SELECT o.id, o.turn_id, o.contestant, o.attempt, o.text FROM output o "
            f"WHERE o.turn_id IN ({','.join('?' * len(chunk))}) AND o.status != 'streaming' "
            "ORDER BY o.created, o.id", chunk).fetchall()
        for r in latest_attempts(rows).values():
            texts[r[1]][r[2]] = r[4] if isinstance(r[4], str) else ""
    return {v: texts.get(t, {}) for v, t in turn_of.items()}


@dataclass
class VotedThread:
    """One vote's answers for style control: the models left to right as the
    rater saw them (`shown`, from the vote's own positions and mapping; empty
    when those do not read), and per model its answers on the vote's
    conversation up to the voted turn, oldest first (`answers[model][-1]` is
    the voted turn's; a model without an answer there is absent; an earlier
    turn it has no answer on is skipped)."""

    shown: list[str] = field(default_factory=list)
    answers: dict[str, list[str]] = field(default_factory=dict)


def _shown_order(mapping: Any, positions: Any) -> list[str]:
    try:
        labels, aliases = json.loads(positions), json.loads(mapping)
    except (TypeError, ValueError):
        return []
    if not isinstance(labels, list) or not isinstance(aliases, dict):
        return []
    out = [aliases.get(label) for label in labels if isinstance(label, str)]
    return [a for a in out if isinstance(a, str)]


def voted_threads(store: Store, vote_ids: Sequence[str]) -> dict[str, VotedThread]:
    """vote id -> its `VotedThread`. A conversation is the turns of one
    (session, case, repeat) by follow-up index; for each earlier index the
    latest such turn placed before the voted one (Arena imports put each
    battle's turns together, under a question id that may repeat)."""
    conn = store.conn
    ids = list(vote_ids)
    votes: dict[str, tuple[str, list[str]]] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for vid, turn_id, mapping, positions in conn.execute(
                f"SELECT id, turn_id, mapping, positions FROM vote WHERE id IN ({','.join('?' * len(chunk))})",
                chunk).fetchall():
            votes[vid] = (turn_id, _shown_order(mapping, positions))
    voted = sorted({t for t, _ in votes.values()})
    info: dict[str, tuple[Any, ...]] = {}   # turn id -> (session, case, repeat, follow-up, position)
    for start in range(0, len(voted), 500):
        chunk = voted[start:start + 500]
        for r in conn.execute("SELECT id, session_id, case_id, repeat_index, follow_up_index, position FROM turn "
                              f"WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall():
            info[r[0]] = tuple(r[1:])
    # earlier turns, only where some voted turn is a follow-up
    earlier: dict[str, list[str]] = {t: [t] for t in info}
    sessions = sorted({i[0] for i in info.values() if i[3]})
    if sessions:
        lines: dict[tuple[Any, ...], dict[int, tuple[list[int], list[str]]]] = defaultdict(dict)
        for start in range(0, len(sessions), 500):
            chunk = sessions[start:start + 500]
            for r in conn.execute("SELECT id, session_id, case_id, repeat_index, follow_up_index, position FROM turn "
                                  f"WHERE session_id IN ({','.join('?' * len(chunk))}) ORDER BY position, id",
                                  chunk).fetchall():
                line = lines[(r[1], r[2], r[3])].setdefault(r[4], ([], []))
                line[0].append(r[5])
                line[1].append(r[0])
        for t, (session, case, repeat, follow, position) in info.items():
            chain = []
            thread = lines.get((session, case, repeat), {})
            for k in sorted(k for k in thread if k < follow):   # indices recorded, not a range: hostile counts
                positions, turn_ids = thread[k]
                at = bisect.bisect_left(positions, position)
                if at:
                    chain.append(turn_ids[at - 1])
            earlier[t] = chain + [t]
    wanted = sorted({t for chain in earlier.values() for t in chain})
    texts: dict[str, dict[str, str]] = defaultdict(dict)
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        rows = conn.execute(
            "SELECT o.id, o.turn_id, o.contestant, o.attempt, o.text FROM output o "
            f"WHERE o.turn_id IN ({','.join('?' * len(chunk))}) AND o.status != 'streaming' "
            "ORDER BY o.created, o.id", chunk).fetchall()
        for r in latest_attempts(rows).values():
            texts[r[1]][r[2]] = r[4] if isinstance(r[4], str) else ""
    out: dict[str, VotedThread] = {}
    for vid, (turn_id, shown) in votes.items():
        chain = earlier.get(turn_id, [turn_id])
        answers = {model: [texts[t][model] for t in chain if model in texts.get(t, {})]
                   for model in texts.get(turn_id, {})}
        out[vid] = VotedThread(shown=shown, answers=answers)
    return out
