"""The report: everything the record says about the models, as one pydantic
structure with JSON, Markdown and HTML renderings.

Why here and not in the store: the store keeps records; this module decides
what they mean (ratings from `core.ratings`, failure modes, latency, cost,
checks, stability). It reads the database with plain SQL through
`Store.conn` (read-only queries): one pass over each table, narrow columns,
no answer text except for repeats (stability), each distinct vote worked out
once, and the answers' side read in a thread while the ratings are computed
(100k votes, 200k answers: about 1.4 s for the whole command, 0.54 s of it
the ratings).

What counts:
- votes: current ones only (superseded votes dropped); votes involving a demo
  contestant are left out unless `include_demo`;
- filters: sessions (ids or unique prefixes), turn category, rater (votes and
  tags), since (a vote's or an output's creation time);
- answers: the latest attempt per (turn, contestant); requests: every attempt
  that finished (complete, error, cancelled, interrupted).
All text that came from a model, a config or a rater is untrusted: the
renderers escape it (HTML, Markdown) and the CLI prints it as plain text.
"""

from __future__ import annotations

import json
import math
import operator
import sqlite3
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from core import ratings as R
from core import votes as V
from core.structured import HEADER as STRUCTURED_HEADER
from core.structured import StructuredRow, structured_rows
from core.structured import table_rows as structured_table
from core.text import html_text, markdown_inline
from store.bounds import COST_MAX, MS_MAX

# --------------------------------------------------------------------------- structure


class ReportFilters(BaseModel):
    sessions: list[str] = Field(default_factory=list, description="session ids (resolved)")
    category: str | None = None
    rater: str | None = None
    since: float | None = Field(default=None, description="epoch seconds")
    include_demo: bool = False


class ModelRow(BaseModel):
    """One model's rating line. See `core.ratings.ModelRating` for the exact
    definitions of the interval, the rank range and the open flags."""

    name: str
    rating: float
    ci_low: float | None
    ci_high: float | None
    rank_low: int | None = Field(description="None when not ranked")
    rank_high: int | None
    votes: int
    wins: int
    ties: int
    losses: int
    component: int = 0
    group: int = 0
    open_low: bool = False
    open_high: bool = False
    notes: list[str] = Field(default_factory=list)
    ranked: bool = Field(default=True, description=f"at least {R.MIN_VOTES_TO_RANK} votes; fewer: listed "
                                                   "after the ranked models, with no rank")


class GapRow(BaseModel):
    upper: str
    lower: str
    gap: float
    separated: bool
    more_votes: int | None = Field(description="rough number of further votes, in the same mix, "
                                               "that would separate the two at the current gap; None: "
                                               "not enough votes to say (see core.ratings.Gap)")


class RatingTable(BaseModel):
    models: list[ModelRow] = Field(default_factory=list)
    groups: list[list[str]] = Field(default_factory=list)
    gaps: list[GapRow] = Field(default_factory=list)
    components: list[list[str]] = Field(default_factory=list)
    n_votes: int = 0
    n_battles: int = 0
    warnings: list[str] = Field(default_factory=list)


class PositionRow(BaseModel):
    position: int = Field(description="0 = leftmost on screen")
    votes: int = Field(description="votes with a single winner where this position was shown")
    wins: int
    win_rate: float
    ci_low: float = Field(description="Wilson 95% interval")
    ci_high: float
    expected: float = Field(description="win rate without position bias (mean of 1/contestants)")


class PositionBias(BaseModel):
    rows: list[PositionRow] = Field(default_factory=list)
    decisive_votes: int = 0
    no_winner_votes: int = 0


class RaterAgreement(BaseModel):
    rater: str
    repeated: int = Field(description="pairs of this rater's votes on the same prompt and models")
    agreed: int
    rate: float | None


class Consistency(BaseModel):
    """Votes on the same prompt (case id, else prompt text) and the same set of
    models: does the same rater give the same answer twice, and do raters agree?"""

    raters: list[RaterAgreement] = Field(default_factory=list)
    inter_rater_pairs: int = 0
    inter_rater_agreed: int = 0
    inter_rater_rate: float | None = None


class TagStat(BaseModel):
    count: int
    rate: float = Field(description="share of the model's answers with this tag")


class FailureModes(BaseModel):
    model: str
    answers: int
    tagged: int = Field(description="answers with at least one tag")
    tags: dict[str, TagStat] = Field(default_factory=dict)


class Quantiles(BaseModel):
    n: int
    p5: float
    p25: float
    p50: float
    p75: float
    p95: float


class Engineering(BaseModel):
    model: str
    requests: int
    completed: int
    errors: int
    error_rate: float | None
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    cancelled: int = 0
    interrupted: int = 0
    ttft_ms: Quantiles | None = None
    duration_ms: Quantiles | None = None
    output_tokens_per_s_p50: float | None = Field(
        default=None, description="output tokens / (duration - time to first token), median")
    input_tokens: int = 0
    output_tokens: int = 0
    mean_output_tokens: float | None = None
    tokens_estimated: int = Field(default=0, description="answers whose token counts are estimates")
    cost: float | None = Field(default=None, description="recorded cost, else from prices; None if unknown")
    cost_known: int = Field(default=0, description="answers with a known cost")


class CheckRate(BaseModel):
    model: str
    category: str | None = None
    check: str | None = None
    passed: int
    total: int
    rate: float


class StabilityRow(BaseModel):
    """Spread over repeats (`lineup run --repeat N`) of the same case."""

    model: str
    cases: int = Field(description="cases answered at least twice")
    runs: int
    exact_match_rate: float | None = Field(default=None, description="mean over cases")
    mean_similarity: float | None = None
    min_similarity: float | None = Field(default=None, description="worst pair over all cases")
    flaky_checks: int = Field(default=0, description="checks that passed in some repeats and failed in others")
    checks: int = 0
    pass_rate_sd_mean: float | None = Field(
        default=None, description="per case: sd over repeats of the share of checks passed; mean over cases")
    pass_rate_sd_max: float | None = None


class Report(BaseModel):
    generated_at: float
    database: str | None = None
    filters: ReportFilters
    message: str | None = Field(default=None, description="why there are no ratings, when there are none")
    rounds: int
    seed: int | None
    votes_used: int = 0
    votes_demo_excluded: int = 0
    models: list[ModelRow] = Field(default_factory=list)
    groups: list[list[str]] = Field(default_factory=list)
    gaps: list[GapRow] = Field(default_factory=list)
    components: list[list[str]] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    by_category: dict[str, RatingTable] = Field(default_factory=dict)
    by_rater: dict[str, RatingTable] = Field(default_factory=dict)
    position_bias: PositionBias = Field(default_factory=PositionBias)
    consistency: Consistency = Field(default_factory=Consistency)
    failure_modes: list[FailureModes] = Field(default_factory=list)
    engineering: list[Engineering] = Field(default_factory=list)
    checks: list[CheckRate] = Field(default_factory=list)
    checks_by_category: list[CheckRate] = Field(default_factory=list)
    structured: list[StructuredRow] = Field(default_factory=list, description="structured output per model")
    stability: list[StabilityRow] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing at all to show (no votes, answers or checks)."""
        return not (self.models or self.engineering or self.checks or self.structured)

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)

    def to_markdown(self) -> str:
        return render_markdown(self)

    def to_html(self) -> str:
        return render_html(self)


# --------------------------------------------------------------------------- reading


NO_CATEGORY = "(none)"


def _where(filters: ReportFilters, *, time_col: str, rater_col: str | None,
           session_col: str, category_col: str) -> tuple[str, list[Any]]:
    clauses, params = [], []
    if filters.sessions:
        clauses.append(f"{session_col} IN ({','.join('?' * len(filters.sessions))})")
        params.extend(filters.sessions)
    if filters.category is not None:
        clauses.append(f"{category_col} = ?")
        params.append(filters.category)
    if filters.rater is not None and rater_col:
        clauses.append(f"{rater_col} = ?")
        params.append(filters.rater)
    if filters.since is not None:
        clauses.append(f"{time_col} >= ?")
        params.append(filters.since)
    return (" AND " + " AND ".join(clauses)) if clauses else "", params


def _demo_contestants(conn) -> set[tuple[str, str]]:
    return {(s, a) for s, a in conn.execute("SELECT session_id, alias FROM contestant WHERE is_demo = 1")}


class _JsonCache(dict):
    """Parsed JSON by its text: a session's votes share one mapping and a few
    position orders, so 100k votes parse a few hundred strings. The parsed
    values are shared: treat them as read-only."""

    def __missing__(self, text: str) -> Any:
        value = self[text] = json.loads(text)
        return value


# The prompt a vote or an answer is about: the case id, else the prompt text
# (SQL for Python's `case_id if case_id else user_message`).
_PROMPT_SQL = "CASE WHEN length(t.case_id) THEN t.case_id ELSE t.user_message END"


class _Pattern:
    """One distinct (choice, ranking, mapping, positions) as stored. Why: what
    a vote means depends only on these four texts, and 100k votes carry a few
    thousand distinct ones, so each is read, checked and decomposed once.
    `error` is set when the texts do not parse (the vote is unreadable)."""

    __slots__ = ("choice", "ranking", "mapping", "positions", "error", "models", "_battles")

    def __init__(self, key: tuple, cache: _JsonCache):
        choice, ranking, mapping, positions = key
        self.choice = choice
        self.error: str | None = None
        self._battles: list[R.Battle] | None = None
        try:
            self.ranking = cache[ranking] if ranking else None
            self.mapping = cache[mapping]
            self.positions = cache[positions] if positions else []
            self.models = frozenset(self.mapping.values())     # the set of models shown
        except (TypeError, ValueError, AttributeError) as exc:
            self.error = str(exc)

    def label_of(self, choice: str) -> str | None:
        return V.label_of(self.mapping, choice)

    def contestants(self) -> list[str]:
        return V.models_shown(self.mapping, self.positions)

    def winner(self) -> str | None:
        if self.choice in V.TIE_CHOICES:
            return None
        return V.model_of(self.mapping, self.choice)

    def verdict(self) -> str:
        if self.choice == "tie":
            return "tie"
        if self.choice in ("both_bad", "all_bad"):
            return "bad"
        return "win:" + str(self.winner())

    def battles(self, vote_id: Any = None) -> list[R.Battle]:
        """The pairwise outcomes (`core.votes.battles_of`); ValueError
        (naming the vote) when the choice or the ranking does not fit the mapping."""
        if self._battles is None:
            self._battles = V.battles_of(self.choice, self.ranking, self.mapping, self.positions, vote_id)
        return self._battles

    def battle_error(self) -> bool:
        try:
            self.battles()
        except ValueError:
            return True
        return False


class _Votes:
    """The votes that count, in creation (id) order, as codes: `pattern[k]`
    indexes `patterns`, `meta[k]` indexes `metas` ((category, rater, prompt))."""

    def __init__(self, patterns: list[_Pattern], metas: list[tuple], pattern: np.ndarray, meta: np.ndarray,
                 ids: list | None):
        self.patterns, self.metas, self.pattern, self.meta, self.ids = patterns, metas, pattern, meta, ids

    def __len__(self) -> int:
        return int(self.pattern.size)


def _index(values: Iterable[Any]) -> tuple[np.ndarray, list[Any]]:
    """Codes (equal values, equal codes; numbered in order of first
    appearance) and the distinct values."""
    values = list(values)
    index = {v: k for k, v in enumerate(dict.fromkeys(values))}
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), list(index)


def _read_votes(conn, filters: ReportFilters, *, with_ids: bool = False) -> tuple[_Votes, int, list[str]]:
    """Current, not superseded, readable votes (demo ones left out unless
    asked). One narrow row per vote: the four texts that say what it means as
    one key, (category, rater, prompt) as another, so that 100k votes are a few
    thousand distinct keys to read. The vote ids are read only when some vote
    needs naming in a warning (then the whole read is redone with them)."""
    where, params = _where(filters, time_col="v.created", rater_col="v.rater",
                           session_col="v.session_id", category_col="t.category")
    demo = set() if filters.include_demo else _demo_contestants(conn)
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
                            f"json_array(t.category, v.rater, {_PROMPT_SQL}){extra}{tail}", params).fetchall()
        pcode, pat_keys = _index(map(operator.itemgetter(0), rows))
        mcode, metas = _index(map(operator.itemgetter(1), rows))
        pat_keys = [tuple(json.loads(k)) for k in pat_keys]
        metas = [tuple(json.loads(k)) for k in metas]
        rest = 2
    except sqlite3.OperationalError:   # no JSON functions, or a BLOB where text belongs: plain columns
        rows = conn.execute(f"SELECT v.choice, v.ranking, v.mapping, v.positions, t.category, v.rater, "
                            f"{_PROMPT_SQL}{extra}{tail}", params).fetchall()
        pcode, pat_keys = _index(r[:4] for r in rows)
        mcode, metas = _index(r[4:7] for r in rows)
        rest = 7
    cache = _JsonCache()
    patterns = [_Pattern(key, cache) for key in pat_keys]
    if not with_ids and any(p.error is not None or p.battle_error() for p in patterns):
        return _read_votes(conn, filters, with_ids=True)     # warnings name votes
    ids = [r[-1] for r in rows] if with_ids else None
    readable = np.array([p.error is None for p in patterns], dtype=bool)
    keep = readable[pcode]
    problems = []
    if ids is not None:
        problems = [f"vote {ids[k]}: unreadable ({patterns[pcode[k]].error}); left out"
                    for k in np.flatnonzero(~keep).tolist()]
    skipped_demo = 0
    if demo:
        for k, r in enumerate(rows):
            if r[rest] is not None and keep[k] and any((r[rest], alias) in demo
                                                       for alias in patterns[pcode[k]].mapping.values()):
                keep[k] = False
                skipped_demo += 1
    kept_ids = [ids[k] for k in np.flatnonzero(keep).tolist()] if ids is not None else None
    return _Votes(patterns, metas, pcode[keep], mcode[keep], kept_ids), skipped_demo, problems


def _rating_table(result: R.RatingResult) -> RatingTable:
    return RatingTable(
        models=[ModelRow(**{k: getattr(m, k) for k in ModelRow.model_fields}) for m in result.models],
        groups=result.groups,
        gaps=[GapRow(upper=g.upper, lower=g.lower, gap=g.gap, separated=g.separated,
                     more_votes=g.more_votes) for g in result.gaps],
        components=result.components, n_votes=result.n_votes, n_battles=result.n_battles,
        warnings=result.warnings)


_wilson = R.wilson_interval


def _pattern_counts(votes: _Votes) -> list[tuple[_Pattern, int]]:
    """Each pattern with its number of votes, in order of first appearance."""
    if not len(votes):
        return []
    uniq, first, counts = np.unique(votes.pattern, return_index=True, return_counts=True)
    order = np.argsort(first)
    return [(votes.patterns[int(p)], int(n)) for p, n in zip(uniq[order], counts[order])]


def _position_bias(votes: _Votes) -> PositionBias:
    wins: Counter[int] = Counter()
    shown: Counter[int] = Counter()
    expected: defaultdict[int, float] = defaultdict(float)
    decisive = no_winner = 0
    for v, n in _pattern_counts(votes):          # votes that read the same count the same
        lab = None if v.choice in R.TIE_CHOICES else v.label_of(v.choice)
        if lab is None or lab not in v.positions:
            no_winner += n
            continue
        decisive += n
        k = len(v.positions)
        for pos in range(k):
            shown[pos] += n
            expected[pos] += n / k
        wins[v.positions.index(lab)] += n
    rows = []
    for pos in sorted(shown):
        lo, hi = _wilson(wins[pos], shown[pos])
        rows.append(PositionRow(position=pos, votes=shown[pos], wins=wins[pos],
                                win_rate=wins[pos] / shown[pos], ci_low=lo, ci_high=hi,
                                expected=expected[pos] / shown[pos]))
    return PositionBias(rows=rows, decisive_votes=decisive, no_winner_votes=no_winner)


def _group_counts(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group ids (0..G-1, one per row) of the rows' key tuples, and each group's size."""
    gid = np.zeros(keys[0].size, dtype=np.int64)
    for key in keys:
        _, gid = np.unique(gid * (int(key.max()) + 1 if key.size else 1) + key, return_inverse=True)
        gid = gid.reshape(-1)
    return gid, np.bincount(gid)


def _consistency(votes: _Votes) -> Consistency:
    """Votes on the same prompt (case id, else prompt text) and the same set of
    models: pairs with the same verdict, counted from tallies per (prompt and
    models, rater, verdict) rather than pair by pair."""
    if not len(votes):
        return Consistency()
    ms_of_pat = _index(p.models if p.error is None else None for p in votes.patterns)[0]
    verdict_of_pat = _index(p.verdict() if p.error is None else "" for p in votes.patterns)[0]
    prompt_of_meta = _index(m[2] for m in votes.metas)[0]
    rater_names = sorted({m[1] for m in votes.metas})
    rater_index = {r: k for k, r in enumerate(rater_names)}
    rater_of_meta = np.array([rater_index[m[1]] for m in votes.metas], dtype=np.int64)

    group = _group_counts(prompt_of_meta[votes.meta], ms_of_pat[votes.pattern])[0]
    rater = rater_of_meta[votes.meta]
    verdict = verdict_of_pat[votes.pattern]

    def pairs(n: np.ndarray) -> np.ndarray:
        return n * (n - 1) // 2

    gr, n_gr = _group_counts(group, rater)               # votes per (prompt, rater)
    grd, n_grd = _group_counts(group, rater, verdict)    # ... with the same verdict
    _, n_gd = _group_counts(group, verdict)
    n_g = np.bincount(group)
    rater_of_gr = np.zeros(n_gr.size, dtype=np.int64)
    rater_of_gr[gr] = rater
    rater_of_grd = np.zeros(n_grd.size, dtype=np.int64)
    rater_of_grd[grd] = rater
    repeated = np.zeros(len(rater_names), dtype=np.int64)
    np.add.at(repeated, rater_of_gr, pairs(n_gr))
    agreed = np.zeros(len(rater_names), dtype=np.int64)
    np.add.at(agreed, rater_of_grd, pairs(n_grd))
    listed = np.zeros(len(rater_names), dtype=bool)
    listed[rater_of_gr[n_gr >= 2]] = True
    same_pairs, same_agree = int(pairs(n_gr).sum()), int(pairs(n_grd).sum())
    inter_pairs = int(pairs(n_g).sum()) - same_pairs
    inter_agreed = int(pairs(n_gd).sum()) - same_agree
    return Consistency(
        raters=[RaterAgreement(rater=r, repeated=int(repeated[k]), agreed=int(agreed[k]),
                               rate=int(agreed[k]) / int(repeated[k]) if repeated[k] else None)
                for k, r in enumerate(rater_names) if listed[k]],
        inter_rater_pairs=inter_pairs, inter_rater_agreed=inter_agreed,
        inter_rater_rate=inter_agreed / inter_pairs if inter_pairs else None)


def _quantiles(values: Sequence[float]) -> Quantiles | None:
    if not len(values):
        return None
    q = np.percentile(np.asarray(values, dtype=float), [5, 25, 50, 75, 95])
    return Quantiles(n=len(values), p5=q[0], p25=q[1], p50=q[2], p75=q[3], p95=q[4])


_STATUS_SQL = ("CASE o.status WHEN 'complete' THEN 0 WHEN 'error' THEN 1 WHEN 'cancelled' THEN 2 "
               "WHEN 'interrupted' THEN 3 ELSE 4 END")


class _Outputs:
    """Every finished attempt (requests) as numpy columns (nan: NULL): what the
    engineering figures and the answer counts need, and no text. `models`:
    (name, row indices in creation order); `kinds`: error kinds per model;
    `answers`: (turn, model) answers per model; `stale`: ids of attempts that
    are not their (turn, model)'s answer; `raw`: the recorded (input tokens,
    output tokens, cost, session) per row when some cost was not recorded."""

    models: list[tuple[str, np.ndarray]]
    status: np.ndarray
    estimated: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft: np.ndarray
    duration: np.ndarray
    cost: np.ndarray
    kinds: dict[str, Counter]
    answers: dict[str, int]
    stale: set[str]
    raw: list[Sequence] | None = None


def _output_filter(filters: ReportFilters, *, turn: bool = True) -> tuple[str, str, list[Any]]:
    """(join, condition, params) for the attempts the report counts; the join
    with `turn` (always there: foreign keys) only when asked or filtering on it."""
    where, params = _where(filters, time_col="o.created", rater_col=None,
                           session_col="o.session_id", category_col="t.category")
    demo = "" if filters.include_demo else " AND o.is_demo = 0"
    join = " JOIN turn t ON t.id = o.turn_id" if turn or filters.category is not None else ""
    return join, "o.status != 'streaming'" + demo + where, params


# Status (3 bits), tokens estimated (1 bit), input tokens + 1 (30 bits) and
# output tokens + 1 (29 bits; 0: NULL) packed in one integer: a column costs
# about as much to fetch as a row, and 200k rows are the point. NULL when a
# value does not fit (or the cost was not recorded): then the plain read.
# Timings and costs outside `store.bounds` (an infinity, a negative
# time: a bad row) read as not recorded; `build_report` warns about them.
_TIMING_SQL = ", ".join(f"CASE WHEN o.{c} BETWEEN 0 AND {MS_MAX!r} THEN o.{c} END"
                        for c in ("ttft_ms", "duration_ms"))
_COST_SQL = f"CASE WHEN o.cost BETWEEN 0 AND {COST_MAX!r} THEN o.cost END"
_PACKED_SQL = (
    "CASE WHEN typeof(o.input_tokens) IN ('integer', 'null') AND typeof(o.output_tokens) IN ('integer', 'null') "
    f"AND typeof(o.tokens_estimated) = 'integer' AND {_COST_SQL} IS NOT NULL "
    "AND ifnull(o.input_tokens, 0) BETWEEN 0 AND 1073741822 AND ifnull(o.output_tokens, 0) BETWEEN 0 AND 536870910 "
    f"THEN ((({_STATUS_SQL}) * 2 + (o.tokens_estimated != 0)) << 59) "
    "| ((ifnull(o.input_tokens, -1) + 1) << 29) | (ifnull(o.output_tokens, -1) + 1) END")


def _columns(rows: list[tuple], n: int) -> list[list]:
    """Rows -> columns (an itemgetter per column is far quicker than zip(*rows))."""
    width = len(rows[0]) if rows else n
    return [list(map(operator.itemgetter(k), rows)) for k in range(width)]


def _read_outputs(conn, filters: ReportFilters, *, plain: bool = False) -> _Outputs:
    out = _Outputs()
    join, cond, params = _output_filter(filters, turn=False)
    if plain:   # any value, NULL costs, ties in creation time: SQLite orders, every column as it is
        rows = conn.execute(
            f"SELECT o.contestant, {_STATUS_SQL}, {_TIMING_SQL}, {_COST_SQL}, o.turn_id, "
            "o.input_tokens, o.output_tokens, o.tokens_estimated, "
            f"CASE WHEN {_COST_SQL} IS NULL THEN o.session_id END "
            f"FROM output o{join} WHERE {cond} ORDER BY o.created, o.id", params).fetchall()
    else:
        rows = conn.execute(f"SELECT o.contestant, {_PACKED_SQL}, {_TIMING_SQL}, {_COST_SQL}, o.turn_id, "
                            f"o.created FROM output o{join} WHERE {cond}", params).fetchall()
    cols = _columns(rows, 10)
    del rows
    names = cols[0]
    index = {name: k for k, name in enumerate(sorted(set(names)))}
    code = np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
    if plain:
        out.status = np.array(cols[1], dtype=np.int64)
        out.estimated = np.array([bool(x) for x in cols[8]], dtype=bool)
        out.input_tokens = np.array(cols[6], dtype=float)
        out.output_tokens = np.array(cols[7], dtype=float)
        out.raw = [cols[6], cols[7], cols[4], cols[9]]
        order = np.argsort(code, kind="stable")
    else:
        try:
            packed = np.array(cols[1], dtype=np.int64)
        except TypeError:                      # a NULL: some value does not fit
            return _read_outputs(conn, filters, plain=True)
        created = np.array(cols[6], dtype=float)
        order = np.lexsort((created, code))    # creation order within each model
        if np.any((code[order][1:] == code[order][:-1]) & (created[order][1:] == created[order][:-1])):
            return _read_outputs(conn, filters, plain=True)   # (created, id) ties: SQLite orders
        out.status = packed >> 60
        out.estimated = ((packed >> 59) & 1).astype(bool)
        tokens = np.stack([(packed >> 29) & (2 ** 30 - 1), packed & (2 ** 29 - 1)]).astype(float) - 1.0
        tokens[tokens < 0] = np.nan
        out.input_tokens, out.output_tokens = tokens
    out.ttft = np.array(cols[2], dtype=float)           # None -> nan
    out.duration = np.array(cols[3], dtype=float)
    out.cost = np.array(cols[4], dtype=float)
    bounds = np.searchsorted(code[order], np.arange(len(index) + 1))
    out.models = [(name, order[bounds[k]:bounds[k + 1]]) for name, k in index.items()]
    out.kinds = defaultdict(Counter)
    if np.any(out.status == 1):
        for model, kind, n in conn.execute(
                "SELECT o.contestant, ifnull(nullif(o.error_kind, ''), 'unknown'), count(*) "
                f"FROM output o{join} WHERE {cond} AND o.status = 'error' GROUP BY 1, 2", params):
            out.kinds[model][kind] += n
    turns = cols[5]
    out.answers, dup_turns = {}, set()
    for name, idx in out.models:
        mine = list(map(turns.__getitem__, idx.tolist()))
        out.answers[name] = len(set(mine))
        if out.answers[name] != len(mine):      # retries: some (turn, model) has several attempts
            dup_turns.update(t for t, n in Counter(mine).items() if n > 1)
    out.stale = _stale_attempts(conn, filters, sorted(dup_turns)) if dup_turns else set()
    return out


def _latest(rows) -> dict[tuple[Any, Any], tuple]:
    """rows (id, turn_id, contestant, attempt, ...) in creation order -> the latest
    attempt per (turn, contestant): the answer people saw."""
    latest: dict[tuple[Any, Any], tuple] = {}
    for r in rows:
        key = (r[1], r[2])
        if key not in latest or r[3] >= latest[key][3]:
            latest[key] = r
    return latest


def _stale_attempts(conn, filters: ReportFilters, turns: list[str]) -> set[str]:
    join, cond, params = _output_filter(filters)
    stale: set[str] = set()
    for start in range(0, len(turns), 500):
        chunk = turns[start:start + 500]
        rows = conn.execute(
            f"SELECT o.id, o.turn_id, o.contestant, o.attempt FROM output o{join} "
            f"WHERE {cond} AND o.turn_id IN ({','.join('?' * len(chunk))}) ORDER BY o.created, o.id",
            params + chunk).fetchall()
        keep = {r[0] for r in _latest(rows).values()}
        stale.update(r[0] for r in rows if r[0] not in keep)
    return stale


def _prices(conn) -> dict[tuple[str, str], dict]:
    out = {}
    for sid, alias, price in conn.execute("SELECT session_id, alias, price FROM contestant WHERE price IS NOT NULL"):
        try:
            out[(sid, alias)] = json.loads(price)
        except ValueError:
            continue
    return out


def _cost(cost: Any, input_tokens: Any, output_tokens: Any, session_id: Any, contestant: str,
          recorded_prices: Mapping, config_prices: Mapping) -> float | None:
    if cost is not None:
        return float(cost)
    if input_tokens is None and output_tokens is None:
        return None
    price = recorded_prices.get((session_id, contestant)) or config_prices.get(contestant)
    if price is None:
        return None
    if hasattr(price, "cost"):
        return float(price.cost(input_tokens, output_tokens))
    try:
        return ((input_tokens or 0) * float(price.get("input_per_mtok", 0))
                + (output_tokens or 0) * float(price.get("output_per_mtok", 0))) / 1e6
    except (TypeError, ValueError, AttributeError):
        return None


def _int_sum(values: np.ndarray) -> int:
    """Exact sum of integer counts held as float64 (nan = missing)."""
    total = np.nansum(values)
    if np.nansum(np.abs(values)) < 2.0 ** 53:     # every partial sum exact
        return int(total)
    return sum(int(x) for x in values.tolist() if x == x)


def _engineering(conn, outputs: _Outputs, config_prices: Mapping) -> list[Engineering]:
    """Per model, from the columns; percentiles and speeds with numpy. The cost
    is summed one answer after another in creation order, as it always was."""
    o = outputs
    status, ttft, dur, out_f = o.status, o.ttft, o.duration, o.output_tokens
    has_ttft, has_dur, has_out = ~np.isnan(ttft), ~np.isnan(dur), ~np.isnan(out_f)
    with np.errstate(invalid="ignore"):
        timed = (status == 0) & (out_f != 0) & has_out & has_ttft & has_dur & (dur > ttft)
    recorded = None
    rows = []
    for model, idx in o.models:
        st = status[idx]
        done = st == 0
        n_err = int(np.count_nonzero(st == 1))
        m = idx[timed[idx]]
        speed = np.sort(out_f[m] / ((dur[m] - ttft[m]) / 1000.0))
        done_out = idx[done & has_out[idx]]
        cost = o.cost[idx]
        if np.isnan(cost).any():   # not recorded: from the session's price, else the config's
            if recorded is None:
                recorded = _prices(conn)
            in_raw, out_raw, cost_raw, session = o.raw
            costs = [x for x in (_cost(cost_raw[k], in_raw[k], out_raw[k], session[k], model, recorded,
                                       config_prices) for k in idx.tolist()) if x is not None]
        else:
            costs = cost.tolist()
        requests = int(idx.size)
        rows.append(Engineering(
            model=model, requests=requests, completed=int(np.count_nonzero(done)), errors=n_err,
            error_rate=n_err / requests if requests else None,
            errors_by_kind=dict(sorted(o.kinds[model].items())),
            cancelled=int(np.count_nonzero(st == 2)), interrupted=int(np.count_nonzero(st == 3)),
            ttft_ms=_quantiles(ttft[idx[done & has_ttft[idx]]]),
            duration_ms=_quantiles(dur[idx[done & has_dur[idx]]]),
            output_tokens_per_s_p50=_median(speed),
            input_tokens=_int_sum(o.input_tokens[idx]), output_tokens=_int_sum(out_f[idx]),
            mean_output_tokens=_int_sum(out_f[done_out]) / int(done_out.size) if done_out.size else None,
            tokens_estimated=int(np.count_nonzero(o.estimated[idx])),
            cost=sum(costs) if costs else None, cost_known=len(costs)))
    return rows


def _median(xs: Sequence[float]) -> float | None:
    """Median of values already sorted."""
    if not len(xs):
        return None
    mid = len(xs) // 2
    return float(xs[mid]) if len(xs) % 2 else (float(xs[mid - 1]) + float(xs[mid])) / 2


def _failure_modes(conn, outputs: _Outputs, filters: ReportFilters) -> list[FailureModes]:
    n_answers = outputs.answers
    join, cond, params = _output_filter(filters)
    sql = ("SELECT g.output_id, g.tag, o.contestant FROM tag g JOIN output o ON o.id = g.output_id "
           f"{join} WHERE g.removed_at IS NULL AND {cond}")
    if filters.rater is not None:
        sql += " AND g.rater = ?"
        params.append(filters.rater)
    tagged: defaultdict[str, defaultdict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    any_tag: defaultdict[str, set[str]] = defaultdict(set)
    for output_id, tag, model in conn.execute(sql, params):
        if output_id in outputs.stale:
            continue
        tagged[model][tag].add(output_id)
        any_tag[model].add(output_id)
    rows = []
    for model in sorted(n_answers):
        n = n_answers[model]
        tags = {t: TagStat(count=len(ids), rate=len(ids) / n)
                for t, ids in sorted(tagged[model].items(), key=lambda kv: (-len(kv[1]), kv[0]))}
        rows.append(FailureModes(model=model, answers=n, tagged=len(any_tag[model]), tags=tags))
    return rows


def _checks(conn, outputs: _Outputs, filters: ReportFilters
            ) -> tuple[list[CheckRate], list[CheckRate], dict[str, list[tuple[str, dict, bool, str | None]]],
                       list[StructuredRow]]:
    structured: list[tuple[str, dict, bool]] = []
    by_model: defaultdict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    by_cat: defaultdict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    per_output: defaultdict[str, list[tuple[str, dict, bool, str | None]]] = defaultdict(list)
    join, cond, params = _output_filter(filters)
    for output_id, name, spec, passed, detail, model, category in conn.execute(
            "SELECT c.output_id, c.check_name, c.spec, c.passed, c.detail, o.contestant, t.category "
            f"FROM check_result c JOIN output o ON o.id = c.output_id{join} "
            f"WHERE {cond} ORDER BY c.rowid", params):
        if output_id in outputs.stale:
            continue
        cat = category or NO_CATEGORY
        for table, key in ((by_model, (model, name)), (by_cat, (model, cat))):
            table[key][0] += int(bool(passed))
            table[key][1] += 1
        try:
            spec_d = json.loads(spec) if spec else {}
        except ValueError:
            spec_d = {}
        per_output[output_id].append((name, spec_d, bool(passed), detail))
        if isinstance(spec_d, dict) and spec_d.get("type") == "structured_output":
            structured.append((model, spec_d, bool(passed)))
    overall: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (model, _), (k, n) in by_model.items():
        overall[model][0] += k
        overall[model][1] += n
    checks = [CheckRate(model=m, passed=k, total=n, rate=k / n) for m, (k, n) in sorted(overall.items())]
    checks += [CheckRate(model=m, check=c, passed=k, total=n, rate=k / n)
               for (m, c), (k, n) in sorted(by_model.items())]
    cats = [CheckRate(model=m, category=c, passed=k, total=n, rate=k / n)
            for (m, c), (k, n) in sorted(by_cat.items())]
    return checks, cats, per_output, structured_rows(structured)


def _repeated_answers(conn, filters: ReportFilters) -> list[tuple]:
    """The answers (id, turn, contestant, attempt, status, session, prompt,
    follow-up, repeat) to prompts asked more than once (repeat_index), in the
    order their (turn, contestant) first appears; none without repeats."""
    if not conn.execute("SELECT min(repeat_index) != max(repeat_index) FROM turn").fetchone()[0]:
        return []
    join, cond, params = _output_filter(filters)
    rows = conn.execute(
        "SELECT o.id, o.turn_id, o.contestant, o.attempt, o.status, o.session_id, "
        f"{_PROMPT_SQL}, t.follow_up_index, t.repeat_index "
        f"FROM output o{join} WHERE {cond} "
        f"AND ({_PROMPT_SQL}, t.follow_up_index) IN (SELECT {_PROMPT_SQL}, t.follow_up_index FROM turn t "
        "GROUP BY 1, 2 HAVING count(DISTINCT t.repeat_index) > 1) "
        "ORDER BY o.created, o.id", params).fetchall()
    return list(_latest(rows).values())


def _stability(conn, answers: Sequence[tuple], per_output: Mapping[str, list]) -> list[StabilityRow]:
    """Groups the answers to the same case (session, case id or prompt,
    follow-up) by model across repeat_index, and measures their spread with
    `core.stability` when present, else from the check results alone."""
    groups: defaultdict[tuple, dict[int, tuple]] = defaultdict(dict)
    for o in answers:
        oid, _, contestant, _, status, session, prompt, follow_up, repeat = o
        if status != "complete":
            continue
        groups[(contestant, session, prompt, follow_up)][repeat] = o
    groups = {k: v for k, v in groups.items() if len(v) >= 2}
    if not groups:
        return []
    try:
        from core import stability as stab
        from core.checks import CheckOutcome
    except ImportError:   # evalsets module absent: spread of check pass rates only
        stab = None
    texts: dict[str, str] = {}
    if stab is not None:
        ids = [o[0] for runs in groups.values() for o in runs.values()]
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            texts.update(conn.execute(f"SELECT id, text FROM output WHERE id IN ({','.join('?' * len(chunk))})",
                                      chunk).fetchall())
    per_model: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for (model, *_), runs in groups.items():
        ordered = [runs[k][0] for k in sorted(runs)]
        shares = [sum(c[2] for c in per_output.get(oid, [])) / len(per_output[oid])
                  for oid in ordered if per_output.get(oid)]
        sd = _sd(shares) if len(shares) >= 2 else None
        item: dict[str, Any] = {"runs": len(ordered), "sd": sd}
        if stab is not None:
            outcomes = [[CheckOutcome(type=str(spec.get("type", name)), name=name, spec=spec, passed=passed,
                                      score=1.0 if passed else 0.0, detail=detail or "")
                         for name, spec, passed, detail in per_output.get(oid, [])] for oid in ordered]
            res = stab.stability([texts.get(oid, "") for oid in ordered], outcomes)
            item.update(exact=res.exact_match_rate, sim=res.mean_similarity, min_sim=res.min_similarity,
                        flaky=res.flaky_checks, checks=len(res.checks))
        else:
            n_checks = max((len(per_output.get(oid, [])) for oid in ordered), default=0)
            flaky = 0
            for i in range(n_checks):
                verdicts = {per_output[oid][i][2] for oid in ordered if len(per_output.get(oid, [])) > i}
                flaky += len(verdicts) > 1
            item.update(exact=None, sim=None, min_sim=None, flaky=flaky, checks=n_checks)
        per_model[model].append(item)
    rows = []
    for model in sorted(per_model):
        items = per_model[model]
        sds = [i["sd"] for i in items if i["sd"] is not None]
        exact = [i["exact"] for i in items if i["exact"] is not None]
        sims = [i["sim"] for i in items if i["sim"] is not None]
        mins = [i["min_sim"] for i in items if i["min_sim"] is not None]
        rows.append(StabilityRow(
            model=model, cases=len(items), runs=sum(i["runs"] for i in items),
            exact_match_rate=sum(exact) / len(exact) if exact else None,
            mean_similarity=sum(sims) / len(sims) if sims else None,
            min_similarity=min(mins) if mins else None,
            flaky_checks=sum(i["flaky"] for i in items), checks=sum(i["checks"] for i in items),
            pass_rate_sd_mean=sum(sds) / len(sds) if sds else None,
            pass_rate_sd_max=max(sds) if sds else None))
    return rows


def _sd(xs: Sequence[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def _battle_set(votes: _Votes) -> tuple[R.BattleSet, np.ndarray, list[str]]:
    """Votes -> pairwise outcomes, built with numpy from each pattern's
    decomposition (what `BattleSet.from_votes` gives for the votes one by one:
    same rows per vote, models in order of first appearance), and the index
    (into `votes`) of the votes that made it, in BattleSet vote order."""
    problems: list[str] = []
    if not len(votes):
        return R.BattleSet.from_votes([]), np.zeros(0, dtype=np.int64), problems
    rows_of: dict[int, list[R.Battle]] = {}
    bad = np.zeros(len(votes.patterns), dtype=bool)
    for p in np.unique(votes.pattern).tolist():
        pat = votes.patterns[p]
        if pat.battle_error():
            bad[p] = True
        else:
            rows_of[p] = pat.battles()
    if bad.any():   # one warning per vote, in vote order, naming it
        for k in np.flatnonzero(bad[votes.pattern]).tolist():
            try:
                votes.patterns[votes.pattern[k]].battles(votes.ids[k] if votes.ids is not None else None)
            except ValueError as exc:
                problems.append(f"{exc}; left out")
    names: dict[str, int] = {}
    start = np.zeros(len(votes.patterns), dtype=np.int64)
    length = np.zeros(len(votes.patterns), dtype=np.int64)
    flat_a: list[int] = []
    flat_b: list[int] = []
    flat_s: list[float] = []
    for p, battles in rows_of.items():
        start[p], length[p] = len(flat_a), len(battles)
        for bt in battles:
            flat_a.append(names.setdefault(bt.model_a, len(names)))
            flat_b.append(names.setdefault(bt.model_b, len(names)))
            flat_s.append(R._SCORE[bt.outcome])
    used = np.flatnonzero(length[votes.pattern] > 0)
    if not used.size:
        return R.BattleSet.from_votes([]), used, problems
    pv = votes.pattern[used]
    n_rows = length[pv]
    vote = np.repeat(np.arange(used.size, dtype=np.int64), n_rows)
    row = np.repeat(start[pv] - (np.cumsum(n_rows) - n_rows), n_rows) + np.arange(int(n_rows.sum()))
    a = np.asarray(flat_a, dtype=np.int64)[row]
    b = np.asarray(flat_b, dtype=np.int64)[row]
    score = np.asarray(flat_s, dtype=np.float64)[row]
    both = np.concatenate([a, b])
    seen, first = np.unique(both, return_index=True)
    order = seen[np.argsort(first)]           # first appearance: model_a column, then model_b
    new_of = np.empty(len(names), dtype=np.int64)
    new_of[order] = np.arange(order.size)
    name_of = list(names)
    bs = R.BattleSet(tuple(name_of[g] for g in order.tolist()), new_of[a], new_of[b], score, vote)
    return bs, used, problems


def build_report(store, filters: ReportFilters | None = None, *, rounds: int = R.DEFAULT_ROUNDS,
                 seed: int | None = 0, prices: Mapping[str, Any] | None = None,
                 breakdowns: bool = True) -> Report:
    """Read the store and compute everything. `prices`: alias -> `Price` from
    the config, used when an answer has no recorded cost and its session
    recorded no price. `breakdowns=False` skips per-category / per-rater ratings."""
    filters = filters or ReportFilters()
    conn = store.conn
    votes, demo_skipped, problems = _read_votes(conn, filters)
    report = Report(generated_at=time.time(), database=str(getattr(store, "path", "") or "") or None,
                    filters=filters, rounds=rounds, seed=seed, votes_demo_excluded=demo_skipped)

    # The answers' side of the report only reads the store: in a thread, its
    # SQLite work overlaps the ratings' numpy work (both run without the GIL).
    answers = _Background(_answer_figures, conn, filters, prices if prices is not None else {})
    bs, used, bad = _battle_set(votes)
    problems += bad
    overall = R.rate(bs, rounds=rounds, seed=seed)
    table = _rating_table(overall)
    report.models, report.groups, report.gaps = table.models, table.groups, table.gaps
    report.components = table.components
    report.votes_used = bs.n_votes
    report.warnings = table.warnings[:] if bs.n_votes else []
    report.warnings += problems
    bad, named = store.out_of_range(filters.sessions or None, tables=("output",))
    if bad:
        report.warnings.append(f"{bad} answer{'s' if bad != 1 else ''} with a time, duration or cost out of range "
                               f"(left out of the figures): {', '.join(named)}{' ...' if bad > len(named) else ''}")

    if breakdowns and bs.n_votes:
        meta_used = votes.meta[used]
        for attr, key in (("by_category", lambda m: m[0] or NO_CATEGORY), ("by_rater", lambda m: m[1])):
            name_of_meta = [key(m) for m in votes.metas]
            index = {name: k for k, name in enumerate(sorted(set(name_of_meta)))}
            code = np.array([index[n] for n in name_of_meta], dtype=np.int64)[meta_used]
            present = np.bincount(code, minlength=len(index))
            tables = {}
            for name, k in index.items():
                if not present[k]:
                    continue
                if present[k] == used.size:
                    tables[name] = table          # the same votes: the same table
                    continue
                sub = np.flatnonzero(code == k)
                tables[name] = _rating_table(R.rate(bs.subset(sub), rounds=rounds, seed=seed))
            setattr(report, attr, tables)
    report.position_bias = _position_bias(votes)
    report.consistency = _consistency(votes)

    (report.failure_modes, report.engineering, report.checks, report.checks_by_category,
     report.stability, report.structured) = answers.result()
    report.message = _message(conn, report, filters)
    return report


def _answer_figures(conn, filters: ReportFilters, prices: Mapping[str, Any]) -> tuple:
    """Failure modes, engineering, checks (overall, by category), stability and structured output."""
    outputs = _read_outputs(conn, filters)
    failure_modes = _failure_modes(conn, outputs, filters)
    engineering = _engineering(conn, outputs, prices)
    checks, by_category, per_output, structured = _checks(conn, outputs, filters)
    return (failure_modes, engineering, checks, by_category,
            _stability(conn, _repeated_answers(conn, filters), per_output), structured)


class _Background:
    """`fn(conn, ...)` in a thread; `result()` waits for it (and re-raises).
    Meanwhile the caller must not use the connection. A connection bound to
    its thread (check_same_thread) is used from the caller's thread instead."""

    def __init__(self, fn, *args):
        self._fn, self._args = fn, args
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="lineup-report-answers", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn(*self._args)
        except BaseException as exc:   # handed to result()
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if isinstance(self._error, sqlite3.ProgrammingError) and "thread" in str(self._error):
            return self._fn(*self._args)
        if self._error is not None:
            raise self._error
        return self._value


def _message(conn, report: Report, filters: ReportFilters) -> str | None:
    if report.models:
        return None
    sessions = conn.execute("SELECT count(*) FROM session").fetchone()[0]
    if sessions == 0:
        return ("The database has no sessions yet: nothing to report. Compare models with "
                "`lineup chat` or `lineup run`, then vote.")
    if report.votes_demo_excluded and not filters.include_demo:
        return (f"Only demo-model votes match ({report.votes_demo_excluded}): demo models are left out "
                "of reports. Add --include-demo to see them anyway.")
    demo_only = conn.execute("SELECT count(*) FROM contestant WHERE is_demo = 0").fetchone()[0] == 0
    if demo_only and not filters.include_demo:
        return ("Only demo models in this database: demo outputs are left out of reports. "
                "Add --include-demo to see them anyway.")
    filtered = any(v is not None and v != [] for v in (filters.sessions, filters.category, filters.rater,
                                                         filters.since))
    if filtered:
        return "No votes match these filters: no ratings."
    return "No votes yet: no ratings. Vote with `lineup vote` or in `lineup chat`."


# --------------------------------------------------------------------------- rendering helpers



def fmt(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}f}"


def fmt_ci(row: ModelRow) -> str:
    """Bounds; an open side shows as infinite, a bound never computed (no
    bootstrap) as "n/a"."""
    lo = ("-inf" if row.open_low else "n/a") if row.ci_low is None else f"{row.ci_low:.0f}"
    hi = ("+inf" if row.open_high else "n/a") if row.ci_high is None else f"{row.ci_high:.0f}"
    return f"{lo} .. {hi}"


def fmt_rank(row: ModelRow) -> str:
    """The rank range; "-" for a model with too few votes to rank."""
    if row.rank_low is None or row.rank_high is None:
        return "-"
    return str(row.rank_low) if row.rank_low == row.rank_high else f"{row.rank_low}-{row.rank_high}"


NOT_ENOUGH_VOTES = "not enough votes to estimate how many more would separate them"


def more_votes_text(g: GapRow) -> str:
    """What the estimate says, in words: a number only where it means something."""
    if g.more_votes is None:
        return NOT_ENOUGH_VOTES
    return f"~{g.more_votes:,} more votes (same mix) would separate them at this gap"


def gap_hint(g: GapRow) -> str:
    """One not-yet-separated pair, as every rendering of the report says it."""
    return f"{g.upper} vs {g.lower}: gap {g.gap:.0f}, not yet separated; {more_votes_text(g)}"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


# --------------------------------------------------------------------------- markdown


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _md_ratings(table_models: Sequence[ModelRow], gaps: Sequence[GapRow]) -> list[str]:
    lines = _md_table(
        ["rank", "model", "rating", "95% interval", "votes", "W", "T", "L", "group", "notes"],
        [[fmt_rank(m), markdown_inline(m.name), fmt(m.rating), fmt_ci(m), str(m.votes), str(m.wins), str(m.ties),
          str(m.losses), str(m.group + 1), markdown_inline("; ".join(m.notes))] for m in table_models])
    close = [g for g in gaps if not g.separated]
    if close:
        lines.append("Adjacent models not yet separated (rough further votes needed at the current gap):")
        lines.append("")
        lines += [f"- {markdown_inline(g.upper)} vs {markdown_inline(g.lower)}: gap {g.gap:.0f}, "
                  f"{'not enough votes to estimate' if g.more_votes is None else f'~{g.more_votes:,} more votes'}"
                  for g in close]
        lines.append("")
    return lines


def render_markdown(r: Report) -> str:
    lines = ["# lineup report", ""]
    lines.append(f"Votes used: {r.votes_used}; bootstrap rounds: {r.rounds}; seed: {r.seed}. "
                 "Ratings: Bradley-Terry, Elo scale (mean 1000), 95% bootstrap intervals; a rank range "
                 "covers every rank the intervals allow.")
    lines.append("")
    if r.message:
        lines += [f"> {markdown_inline(r.message)}", ""]
    for w in r.warnings:
        lines += [f"- warning: {markdown_inline(w)}"]
    if r.warnings:
        lines.append("")
    if r.models:
        lines += ["## Ratings", ""] + _md_ratings(r.models, r.gaps)
        ties = "; ".join("{" + ", ".join(markdown_inline(n) for n in g) + "}" for g in r.groups if len(g) > 1)
        lines += ["Cannot be told apart (overlapping intervals): " + (ties or "none"), ""]
    for title, tables in (("By category", r.by_category), ("By rater", r.by_rater)):
        if len(tables) > 1:
            lines += [f"## {title}", ""]
            for name, t in tables.items():
                lines += [f"### {markdown_inline(name)}", ""] + _md_ratings(t.models, t.gaps)
    if r.position_bias.rows:
        lines += ["## Position bias", ""]
        lines += _md_table(["position", "votes", "wins", "win rate", "95% interval", "expected"],
                           [[str(p.position + 1), str(p.votes), str(p.wins), pct(p.win_rate),
                             f"{pct(p.ci_low)} .. {pct(p.ci_high)}", pct(p.expected)]
                            for p in r.position_bias.rows])
    c = r.consistency
    if c.raters or c.inter_rater_pairs:
        lines += ["## Rater consistency", ""]
        lines += _md_table(["rater", "judged twice", "same verdict", "rate"],
                           [[markdown_inline(x.rater), str(x.repeated), str(x.agreed), pct(x.rate)] for x in c.raters])
        if c.inter_rater_pairs:
            lines += [f"Between raters: {c.inter_rater_agreed} of {c.inter_rater_pairs} pairs agree "
                      f"({pct(c.inter_rater_rate)}).", ""]
    if any(f.tags for f in r.failure_modes):
        lines += ["## Failure modes", ""]
        lines += _md_table(["model", "answers", "tagged", "tags (count, rate)"],
                           [[markdown_inline(f.model), str(f.answers), pct(f.tagged / f.answers if f.answers else None),
                             markdown_inline(", ".join(f"{t} {s.count} ({100 * s.rate:.0f}%)" for t, s in f.tags.items()))]
                            for f in r.failure_modes])
    if r.engineering:
        lines += ["## Speed, errors and cost", ""]
        lines += _md_table(
            ["model", "requests", "errors", "TTFT p50", "TTFT p95", "tok/s p50", "duration p50",
             "tokens in/out", "cost"],
            [[markdown_inline(e.model), str(e.requests),
              f"{pct(e.error_rate)}" + (f" ({markdown_inline(', '.join(f'{k} {v}' for k, v in e.errors_by_kind.items()))})"
                                        if e.errors_by_kind else ""),
              fmt(e.ttft_ms.p50 if e.ttft_ms else None) + " ms", fmt(e.ttft_ms.p95 if e.ttft_ms else None) + " ms",
              fmt(e.output_tokens_per_s_p50, 1), fmt(e.duration_ms.p50 if e.duration_ms else None) + " ms",
              f"{e.input_tokens:,} / {e.output_tokens:,}", "-" if e.cost is None else f"${e.cost:.4f}"]
             for e in r.engineering])
    if r.checks:
        lines += ["## Automated checks", ""]
        lines += _md_table(["model", "check", "passed", "rate"],
                           [[markdown_inline(x.model), markdown_inline(x.check or "all"), f"{x.passed}/{x.total}", pct(x.rate)]
                            for x in r.checks])
        if r.checks_by_category:
            lines += _md_table(["model", "category", "passed", "rate"],
                               [[markdown_inline(x.model), markdown_inline(x.category), f"{x.passed}/{x.total}", pct(x.rate)]
                                for x in r.checks_by_category])
    if r.structured:
        lines += ["## Structured output", "",
                  "Answers to cases with a `response_format`: valid against the schema, mean field completeness, "
                  "and each failure mode (an answer may have several), with Wilson 95% intervals.", ""]
        lines += _md_table(STRUCTURED_HEADER, [[markdown_inline(row[0]), *row[1:]]   # figures are ours: as they are
                                               for row in structured_table(r.structured)])
    if r.stability:
        lines += ["## Stability over repeats", ""]
        lines += _md_table(["model", "cases", "runs", "identical", "similarity (mean/min)", "flaky checks",
                            "pass-rate sd (mean/max)"],
                           [[markdown_inline(s.model), str(s.cases), str(s.runs), pct(s.exact_match_rate),
                             f"{fmt(s.mean_similarity, 2)} / {fmt(s.min_similarity, 2)}",
                             f"{s.flaky_checks}/{s.checks}",
                             f"{fmt(s.pass_rate_sd_mean, 2)} / {fmt(s.pass_rate_sd_max, 2)}"]
                            for s in r.stability])
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- html

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child,td.l,th.l{text-align:left}.warn{background:#fff4e0;padding:.5em 1em;border-left:4px solid #e8a33d}
.msg{background:#eef4ff;padding:.7em 1em;border-left:4px solid #4a78c2}svg text{font:12px system-ui,sans-serif}
.small{color:#666;font-size:.9em}
"""


def _svg_ratings(models: Sequence[ModelRow]) -> str:
    if not models:
        return ""
    lo = min([m.ci_low for m in models if m.ci_low is not None] + [m.rating for m in models])
    hi = max([m.ci_high for m in models if m.ci_high is not None] + [m.rating for m in models])
    pad = max(10.0, (hi - lo) * 0.05)
    lo, hi = lo - pad, hi + pad
    label_w, plot_w, row_h = 220, 620, 24
    height = row_h * len(models) + 40

    def x(v: float) -> float:
        return label_w + (v - lo) / (hi - lo) * plot_w

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 20}" height="{height}" '
             'role="img" aria-label="ratings with 95% intervals">']
    step = _nice_step((hi - lo) / 6)
    tick = math.ceil(lo / step) * step
    while tick <= hi:
        parts.append(f'<line x1="{x(tick):.1f}" y1="10" x2="{x(tick):.1f}" y2="{height - 25}" stroke="#eee"/>'
                     f'<text x="{x(tick):.1f}" y="{height - 8}" text-anchor="middle" fill="#666">{tick:.0f}</text>')
        tick += step
    colours = ["#4a78c2", "#c2574a", "#4aa36b", "#8a5ac2", "#c29a4a", "#4ab0c2"]
    for k, m in enumerate(models):
        y = 22 + k * row_h
        col = colours[m.group % len(colours)]
        a = x(m.ci_low) if m.ci_low is not None else label_w
        b = x(m.ci_high) if m.ci_high is not None else label_w + plot_w
        parts.append(f'<text x="{label_w - 8}" y="{y + 4}" text-anchor="end">{html_text(m.name)}</text>')
        dash = ' stroke-dasharray="4 3"' if (m.ci_low is None or m.ci_high is None) else ""
        parts.append(f'<line x1="{a:.1f}" y1="{y}" x2="{b:.1f}" y2="{y}" stroke="{col}" stroke-width="2"{dash}/>')
        for end, open_ in ((a, m.ci_low is None), (b, m.ci_high is None)):
            if not open_:
                parts.append(f'<line x1="{end:.1f}" y1="{y - 5}" x2="{end:.1f}" y2="{y + 5}" stroke="{col}" stroke-width="2"/>')
        parts.append(f'<circle cx="{x(m.rating):.1f}" cy="{y}" r="4" fill="{col}"><title>{html_text(m.name)}: '
                     f'{m.rating:.0f} ({html_text(fmt_ci(m))})</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def _nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _svg_failures(rows: Sequence[FailureModes]) -> str:
    tags = sorted({t for f in rows for t in f.tags})
    if not tags:
        return ""
    label_w, plot_w, bar_h = 220, 500, 14
    colours = ["#c2574a", "#4a78c2", "#4aa36b", "#8a5ac2", "#c29a4a", "#4ab0c2", "#777", "#b04ab0",
               "#2d6a4f", "#9c6644", "#3d5a80", "#e07a5f"]
    top = max(s.rate for f in rows for s in f.tags.values()) or 1.0
    y = 10
    parts = []
    for f in rows:
        if not f.tags:
            continue
        parts.append(f'<text x="0" y="{y + 12}" font-weight="bold">{html_text(f.model)} '
                     f'<tspan fill="#666" font-weight="normal">({f.answers} answers)</tspan></text>')
        y += 18
        for t in tags:
            s = f.tags.get(t)
            if s is None:
                continue
            w = s.rate / top * plot_w
            col = colours[tags.index(t) % len(colours)]
            parts.append(f'<text x="{label_w - 8}" y="{y + 11}" text-anchor="end">{html_text(t)}</text>'
                         f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{col}"/>'
                         f'<text x="{label_w + w + 6:.1f}" y="{y + 11}" fill="#444">{s.count} ({100 * s.rate:.0f}%)</text>')
            y += bar_h + 4
        y += 8
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 120}" height="{y + 10}" '
            f'role="img" aria-label="failure modes per model">' + "".join(parts) + "</svg>")


def _svg_latency(rows: Sequence[Engineering], attr: str, title: str) -> str:
    data = [(e.model, getattr(e, attr)) for e in rows if getattr(e, attr) is not None]
    if not data:
        return ""
    hi = max(q.p95 for _, q in data) * 1.05 or 1.0
    label_w, plot_w, row_h = 220, 560, 26
    height = row_h * len(data) + 40

    def x(v: float) -> float:
        return label_w + v / hi * plot_w

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 30}" height="{height}" '
             f'role="img" aria-label="{html_text(title)}">']
    step = _nice_step(hi / 6)
    tick = 0.0
    while tick <= hi:
        parts.append(f'<line x1="{x(tick):.1f}" y1="8" x2="{x(tick):.1f}" y2="{height - 25}" stroke="#eee"/>'
                     f'<text x="{x(tick):.1f}" y="{height - 8}" text-anchor="middle" fill="#666">{tick:g}</text>')
        tick += step
    for k, (model, q) in enumerate(data):
        y = 20 + k * row_h
        parts.append(f'<text x="{label_w - 8}" y="{y + 4}" text-anchor="end">{html_text(model)}</text>'
                     f'<line x1="{x(q.p5):.1f}" y1="{y}" x2="{x(q.p95):.1f}" y2="{y}" stroke="#888"/>'
                     f'<rect x="{x(q.p25):.1f}" y="{y - 7}" width="{max(1.0, x(q.p75) - x(q.p25)):.1f}" height="14" '
                     f'fill="#cfe0f7" stroke="#4a78c2"/>'
                     f'<line x1="{x(q.p50):.1f}" y1="{y - 7}" x2="{x(q.p50):.1f}" y2="{y + 7}" stroke="#1d3f7a" '
                     f'stroke-width="2"><title>{html_text(model)}: p50 {q.p50:.0f} ms, p95 {q.p95:.0f} ms, n={q.n}</title></line>')
    parts.append("</svg>")
    return "".join(parts)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells must already be escaped."""
    out = ["<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in header) + "</tr></thead><tbody>"]
    out += ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows]
    return "".join(out) + "</tbody></table>"


def _html_ratings(models: Sequence[ModelRow], gaps: Sequence[GapRow]) -> str:
    parts = [_svg_ratings(models), _html_table(
        ["model", "rank", "rating", "95% interval", "votes", "W", "T", "L", "group", "notes"],
        [[html_text(m.name), fmt_rank(m), fmt(m.rating), html_text(fmt_ci(m)), str(m.votes), str(m.wins), str(m.ties),
          str(m.losses), str(m.group + 1), html_text("; ".join(m.notes))] for m in models])]
    close = [g for g in gaps if not g.separated]
    if close:
        parts.append("<p class=small>Not yet separated (rough further votes, same mix, at the current gap): "
                     + "; ".join(f"{html_text(g.upper)} vs {html_text(g.lower)}: gap {g.gap:.0f}, "
                                 f"{'not enough votes to estimate' if g.more_votes is None else f'~{g.more_votes:,}'}"
                                 for g in close) + "</p>")
    return "".join(parts)


def render_html(r: Report) -> str:
    """A self-contained page: inline CSS and SVG, no script, every piece of
    recorded text escaped."""
    body = ["<h1>lineup report</h1>",
            f"<p class=small>{r.votes_used} votes, {r.rounds} bootstrap rounds, seed {html_text(r.seed)}. "
            "Bradley-Terry on the Elo scale (mean 1000), 95% bootstrap intervals; dashed whiskers are open "
            "(no finite rating on that side).</p>"]
    if r.message:
        body.append(f'<p class="msg">{html_text(r.message)}</p>')
    body += [f'<p class="warn">{html_text(w)}</p>' for w in r.warnings]
    if r.models:
        body += ["<h2>Ratings</h2>", _html_ratings(r.models, r.gaps)]
    for title, tables in (("By category", r.by_category), ("By rater", r.by_rater)):
        if len(tables) > 1:
            body.append(f"<h2>{title}</h2>")
            for name, t in tables.items():
                body += [f"<h3>{html_text(name)}</h3>", _html_ratings(t.models, t.gaps)]
    if r.position_bias.rows:
        body += ["<h2>Position bias</h2>", _html_table(
            ["position", "votes", "wins", "win rate", "95% interval", "expected"],
            [[str(p.position + 1), str(p.votes), str(p.wins), pct(p.win_rate),
              f"{pct(p.ci_low)} .. {pct(p.ci_high)}", pct(p.expected)] for p in r.position_bias.rows])]
    c = r.consistency
    if c.raters or c.inter_rater_pairs:
        body += ["<h2>Rater consistency</h2>", _html_table(
            ["rater", "judged twice", "same verdict", "rate"],
            [[html_text(x.rater), str(x.repeated), str(x.agreed), pct(x.rate)] for x in c.raters])]
        if c.inter_rater_pairs:
            body.append(f"<p>Between raters: {c.inter_rater_agreed} of {c.inter_rater_pairs} pairs agree "
                        f"({pct(c.inter_rater_rate)}).</p>")
    if any(f.tags for f in r.failure_modes):
        body += ["<h2>Failure modes</h2>", _svg_failures(r.failure_modes)]
    if r.engineering:
        body += ["<h2>Speed, errors and cost</h2>",
                 "<h3>Time to first token (ms): p5-p95 whisker, p25-p75 box, median line</h3>",
                 _svg_latency(r.engineering, "ttft_ms", "time to first token"),
                 "<h3>Duration (ms)</h3>", _svg_latency(r.engineering, "duration_ms", "duration"),
                 _html_table(["model", "requests", "error rate", "errors by kind", "TTFT p50", "TTFT p95",
                              "tok/s p50", "tokens in / out", "cost"],
                             [[html_text(e.model), str(e.requests), pct(e.error_rate),
                               html_text(", ".join(f"{k} {v}" for k, v in e.errors_by_kind.items())),
                               fmt(e.ttft_ms.p50 if e.ttft_ms else None),
                               fmt(e.ttft_ms.p95 if e.ttft_ms else None),
                               fmt(e.output_tokens_per_s_p50, 1), f"{e.input_tokens:,} / {e.output_tokens:,}",
                               "-" if e.cost is None else f"${e.cost:.4f}"] for e in r.engineering])]
    if r.checks:
        body += ["<h2>Automated checks</h2>", _html_table(
            ["model", "check", "passed", "rate"],
            [[html_text(x.model), html_text(x.check or "all"), f"{x.passed}/{x.total}", pct(x.rate)] for x in r.checks])]
        if r.checks_by_category:
            body.append(_html_table(["model", "category", "passed", "rate"],
                                    [[html_text(x.model), html_text(x.category), f"{x.passed}/{x.total}", pct(x.rate)]
                                     for x in r.checks_by_category]))
    if r.structured:
        body += ["<h2>Structured output</h2>", "<p>Answers to cases with a <code>response_format</code>: valid "
                 "against the schema, mean field completeness, and each failure mode (an answer may have several), "
                 "with Wilson 95% intervals.</p>", _html_table(
                     STRUCTURED_HEADER, [[html_text(c) for c in row] for row in structured_table(r.structured)])]
    if r.stability:
        body += ["<h2>Stability over repeats</h2>", _html_table(
            ["model", "cases", "runs", "identical", "similarity mean / min", "flaky checks",
             "pass-rate sd mean / max"],
            [[html_text(s.model), str(s.cases), str(s.runs), pct(s.exact_match_rate),
              f"{fmt(s.mean_similarity, 2)} / {fmt(s.min_similarity, 2)}", f"{s.flaky_checks}/{s.checks}",
              f"{fmt(s.pass_rate_sd_mean, 2)} / {fmt(s.pass_rate_sd_max, 2)}"] for s in r.stability])]
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>lineup report</title><style>{_CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
