"""The report: everything the record says about the models, as one pydantic
structure with JSON, Markdown and HTML renderings.

Why here and not in the store: the store keeps records; this module decides
what they mean (ratings from `lineup.ratings`, failure modes, latency, cost,
checks, stability). It reads the database with plain SQL through
`Store.conn` (read-only queries), so the report stays one pass over each table.

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

import html
import json
import math
import re
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from lineup import ratings as R

# --------------------------------------------------------------------------- structure


class ReportFilters(BaseModel):
    sessions: list[str] = Field(default_factory=list, description="session ids (resolved)")
    category: str | None = None
    rater: str | None = None
    since: float | None = Field(default=None, description="epoch seconds")
    include_demo: bool = False


class ModelRow(BaseModel):
    """One model's rating line. See `lineup.ratings.ModelRating` for the exact
    definitions of the interval, the rank range and the open flags."""

    name: str
    rating: float
    ci_low: float | None
    ci_high: float | None
    rank_low: int
    rank_high: int
    votes: int
    wins: int
    ties: int
    losses: int
    component: int = 0
    group: int = 0
    open_low: bool = False
    open_high: bool = False
    notes: list[str] = Field(default_factory=list)


class GapRow(BaseModel):
    upper: str
    lower: str
    gap: float
    separated: bool
    more_votes: int | None = Field(description="rough number of further votes, in the same mix, "
                                               "that would separate the two at the current gap")


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
    stability: list[StabilityRow] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing at all to show (no votes, answers or checks)."""
        return not (self.models or self.engineering or self.checks)

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


class _Vote:
    __slots__ = ("id", "session", "rater", "choice", "ranking", "mapping", "positions", "category", "prompt",
                 "_key")

    def __init__(self, row: tuple, cache: _JsonCache):
        (self.id, self.session, self.rater, self.choice, ranking, mapping, positions,
         self.category, case_id, message) = row
        self.ranking = cache[ranking] if ranking else None
        self.mapping = cache[mapping]
        self.positions = cache[positions] if positions else []
        self.prompt = case_id if case_id else message
        self._key = (self.choice, ranking, mapping, positions)

    def label_of(self, choice: str) -> str | None:
        if choice in self.mapping:
            return choice
        folded = [k for k in self.mapping if k.casefold() == choice.casefold()]
        return folded[0] if len(folded) == 1 else None

    def contestants(self) -> list[str]:
        order = [lab for lab in self.positions if lab in self.mapping]
        order += [lab for lab in self.mapping if lab not in order]
        return [self.mapping[lab] for lab in order]

    def winner(self) -> str | None:
        if self.choice in R.TIE_CHOICES:
            return None
        lab = self.label_of(self.choice)
        return None if lab is None else self.mapping[lab]

    def battles(self) -> list[R.Battle]:
        choice = self.choice if self.choice in R.TIE_CHOICES else self.winner()
        if choice is None:
            raise ValueError(f"vote {self.id}: choice {self.choice!r} is not one of the labels "
                             f"{sorted(self.mapping)}")
        ranking = None
        if self.ranking:
            ranking = []
            for lab in self.ranking:
                real = self.label_of(lab)
                if real is None:
                    raise ValueError(f"vote {self.id}: ranking label {lab!r} is not in the mapping")
                ranking.append(self.mapping[real])
        return R.decompose_vote(self.contestants(), choice, ranking)


def _read_votes(conn, filters: ReportFilters) -> tuple[list[_Vote], int, list[str]]:
    where, params = _where(filters, time_col="v.created", rater_col="v.rater",
                           session_col="v.session_id", category_col="t.category")
    rows = conn.execute(
        "SELECT v.id, v.session_id, v.rater, v.choice, v.ranking, v.mapping, v.positions, "
        "t.category, t.case_id, t.user_message FROM vote v JOIN turn t ON t.id = v.turn_id "
        # "+": a table scan beats walking the `current` index when most votes are current
        "WHERE +v.current = 1" + where, params).fetchall()
    rows.sort(key=lambda r: r[0])       # ULIDs: creation order, whatever the file's physical order
    replaced = {r[0] for r in conn.execute("SELECT supersedes FROM vote WHERE supersedes IS NOT NULL")}
    demo = set() if filters.include_demo else _demo_contestants(conn)
    votes, skipped_demo, problems = [], 0, []
    cache = _JsonCache()
    for row in rows:
        if row[0] in replaced:
            continue
        try:
            vote = _Vote(row, cache)
        except (TypeError, ValueError) as exc:
            problems.append(f"vote {row[0]}: unreadable ({exc}); left out")
            continue
        if demo and any((vote.session, alias) in demo for alias in vote.mapping.values()):
            skipped_demo += 1
            continue
        votes.append(vote)
    return votes, skipped_demo, problems


def _rating_table(result: R.RatingResult) -> RatingTable:
    return RatingTable(
        models=[ModelRow(**{k: getattr(m, k) for k in ModelRow.model_fields}) for m in result.models],
        groups=result.groups,
        gaps=[GapRow(upper=g.upper, lower=g.lower, gap=g.gap, separated=g.separated,
                     more_votes=g.more_votes) for g in result.gaps],
        components=result.components, n_votes=result.n_votes, n_battles=result.n_battles,
        warnings=result.warnings)


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo, hi = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if k == 0 else lo), (1.0 if k == n else hi)


def _position_bias(votes: Sequence[_Vote]) -> PositionBias:
    wins: Counter[int] = Counter()
    shown: Counter[int] = Counter()
    expected: defaultdict[int, float] = defaultdict(float)
    decisive = no_winner = 0
    seen: Counter[tuple] = Counter()
    first: dict[tuple, _Vote] = {}
    for v in votes:                     # votes that read the same count the same
        key = v._key
        seen[key] += 1
        first.setdefault(key, v)
    for key, n in seen.items():
        v = first[key]
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


def _verdict(v: _Vote) -> str:
    if v.choice == "tie":
        return "tie"
    if v.choice in ("both_bad", "all_bad"):
        return "bad"
    return "win:" + str(v.winner())


def _consistency(votes: Sequence[_Vote]) -> Consistency:
    """Counts pairs of votes with the same verdict from verdict tallies (linear,
    not quadratic, in the number of votes on one prompt)."""
    tally: defaultdict[tuple, Counter] = defaultdict(Counter)      # key -> (rater, verdict) counts
    for v in votes:
        tally[(v.prompt, frozenset(v.mapping.values()))][(v.rater, _verdict(v))] += 1
    same: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    inter = [0, 0]

    def pairs(n: int) -> int:
        return n * (n - 1) // 2

    for counts in tally.values():
        per_rater: Counter = Counter()
        per_verdict: Counter = Counter()
        for (rater, verdict), n in counts.items():
            per_rater[rater] += n
            per_verdict[verdict] += n
        same_pairs = same_agree = 0
        for rater, n in per_rater.items():
            agree = sum(pairs(k) for (r, _), k in counts.items() if r == rater)
            if n >= 2:
                same[rater][0] += pairs(n)
                same[rater][1] += agree
            same_pairs += pairs(n)
            same_agree += agree
        total = sum(per_rater.values())
        inter[0] += pairs(total) - same_pairs
        inter[1] += sum(pairs(k) for k in per_verdict.values()) - same_agree
    return Consistency(
        raters=[RaterAgreement(rater=r, repeated=n, agreed=k, rate=k / n if n else None)
                for r, (n, k) in sorted(same.items())],
        inter_rater_pairs=inter[0], inter_rater_agreed=inter[1],
        inter_rater_rate=inter[1] / inter[0] if inter[0] else None)


def _quantiles(values: Sequence[float]) -> Quantiles | None:
    if not values:
        return None
    q = np.percentile(np.asarray(values, dtype=float), [5, 25, 50, 75, 95])
    return Quantiles(n=len(values), p5=q[0], p25=q[1], p50=q[2], p75=q[3], p95=q[4])


def _read_outputs(conn, filters: ReportFilters) -> list[dict[str, Any]]:
    where, params = _where(filters, time_col="o.created", rater_col=None,
                           session_col="o.session_id", category_col="t.category")
    demo = "" if filters.include_demo else " AND o.is_demo = 0"
    cur = conn.execute(
        "SELECT o.id, o.session_id, o.turn_id, o.contestant, o.attempt, o.status, o.error_kind, "
        "o.ttft_ms, o.duration_ms, o.input_tokens, o.output_tokens, o.tokens_estimated, o.cost, "
        "t.category, t.case_id, t.user_message, t.follow_up_index, t.repeat_index "
        "FROM output o JOIN turn t ON t.id = o.turn_id WHERE o.status != 'streaming'" + demo + where
        + " ORDER BY o.created, o.id", params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _prices(conn) -> dict[tuple[str, str], dict]:
    out = {}
    for sid, alias, price in conn.execute("SELECT session_id, alias, price FROM contestant WHERE price IS NOT NULL"):
        try:
            out[(sid, alias)] = json.loads(price)
        except ValueError:
            continue
    return out


def _cost(o: Mapping[str, Any], recorded_prices: Mapping, config_prices: Mapping) -> float | None:
    if o["cost"] is not None:
        return float(o["cost"])
    if o["input_tokens"] is None and o["output_tokens"] is None:
        return None
    price = recorded_prices.get((o["session_id"], o["contestant"])) or config_prices.get(o["contestant"])
    if price is None:
        return None
    if hasattr(price, "cost"):
        return float(price.cost(o["input_tokens"], o["output_tokens"]))
    try:
        return ((o["input_tokens"] or 0) * float(price.get("input_per_mtok", 0))
                + (o["output_tokens"] or 0) * float(price.get("output_per_mtok", 0))) / 1e6
    except (TypeError, ValueError, AttributeError):
        return None


def _engineering(outputs: Sequence[Mapping[str, Any]], recorded_prices, config_prices) -> list[Engineering]:
    per: defaultdict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for o in outputs:
        per[o["contestant"]].append(o)
    rows = []
    for model in sorted(per):
        outs = per[model]
        done = [o for o in outs if o["status"] == "complete"]
        errors = [o for o in outs if o["status"] == "error"]
        ttft = [o["ttft_ms"] for o in done if o["ttft_ms"] is not None]
        dur = [o["duration_ms"] for o in done if o["duration_ms"] is not None]
        speed = sorted(o["output_tokens"] / ((o["duration_ms"] - o["ttft_ms"]) / 1000.0) for o in done
                       if o["output_tokens"] and o["duration_ms"] is not None and o["ttft_ms"] is not None
                       and o["duration_ms"] > o["ttft_ms"])
        costs = [c for c in (_cost(o, recorded_prices, config_prices) for o in outs) if c is not None]
        out_tokens = [o["output_tokens"] for o in done if o["output_tokens"] is not None]
        rows.append(Engineering(
            model=model, requests=len(outs), completed=len(done), errors=len(errors),
            error_rate=len(errors) / len(outs) if outs else None,
            errors_by_kind=dict(sorted(Counter(o["error_kind"] or "unknown" for o in errors).items())),
            cancelled=sum(o["status"] == "cancelled" for o in outs),
            interrupted=sum(o["status"] == "interrupted" for o in outs),
            ttft_ms=_quantiles(ttft), duration_ms=_quantiles(dur),
            output_tokens_per_s_p50=_median(speed),
            input_tokens=sum(o["input_tokens"] or 0 for o in outs),
            output_tokens=sum(o["output_tokens"] or 0 for o in outs),
            mean_output_tokens=sum(out_tokens) / len(out_tokens) if out_tokens else None,
            tokens_estimated=sum(bool(o["tokens_estimated"]) for o in outs),
            cost=sum(costs) if costs else None, cost_known=len(costs)))
    return rows


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _answers(outputs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The latest attempt per (turn, contestant): the answer people saw."""
    latest: dict[tuple[str, str], Mapping[str, Any]] = {}
    for o in outputs:
        key = (o["turn_id"], o["contestant"])
        if key not in latest or o["attempt"] >= latest[key]["attempt"]:
            latest[key] = o
    return latest


def _failure_modes(conn, answers: Mapping[tuple[str, str], Mapping[str, Any]],
                   filters: ReportFilters) -> list[FailureModes]:
    model_of = {o["id"]: o["contestant"] for o in answers.values()}
    n_answers = Counter(o["contestant"] for o in answers.values())
    sql = "SELECT output_id, tag FROM tag WHERE removed_at IS NULL"
    params: list[Any] = []
    if filters.rater is not None:
        sql += " AND rater = ?"
        params.append(filters.rater)
    tagged: defaultdict[str, defaultdict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    any_tag: defaultdict[str, set[str]] = defaultdict(set)
    for output_id, tag in conn.execute(sql, params):
        model = model_of.get(output_id)
        if model is None:
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


def _checks(conn, answers: Mapping[tuple[str, str], Mapping[str, Any]]
            ) -> tuple[list[CheckRate], list[CheckRate], dict[str, list[tuple[str, dict, bool, str | None]]]]:
    info = {o["id"]: o for o in answers.values()}
    by_model: defaultdict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    by_cat: defaultdict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    per_output: defaultdict[str, list[tuple[str, dict, bool, str | None]]] = defaultdict(list)
    for output_id, name, spec, passed, detail in conn.execute(
            "SELECT output_id, check_name, spec, passed, detail FROM check_result ORDER BY rowid"):
        o = info.get(output_id)
        if o is None:
            continue
        model, cat = o["contestant"], o["category"] or NO_CATEGORY
        for table, key in ((by_model, (model, name)), (by_cat, (model, cat))):
            table[key][0] += int(bool(passed))
            table[key][1] += 1
        try:
            spec_d = json.loads(spec) if spec else {}
        except ValueError:
            spec_d = {}
        per_output[output_id].append((name, spec_d, bool(passed), detail))
    overall: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (model, _), (k, n) in by_model.items():
        overall[model][0] += k
        overall[model][1] += n
    checks = [CheckRate(model=m, passed=k, total=n, rate=k / n) for m, (k, n) in sorted(overall.items())]
    checks += [CheckRate(model=m, check=c, passed=k, total=n, rate=k / n)
               for (m, c), (k, n) in sorted(by_model.items())]
    cats = [CheckRate(model=m, category=c, passed=k, total=n, rate=k / n)
            for (m, c), (k, n) in sorted(by_cat.items())]
    return checks, cats, per_output


def _stability(conn, answers: Mapping[tuple[str, str], Mapping[str, Any]],
               per_output: Mapping[str, list]) -> list[StabilityRow]:
    """Groups the answers to the same case (session, case id or prompt,
    follow-up) by model across repeat_index, and measures their spread with
    `lineup.stability` when present, else from the check results alone."""
    groups: defaultdict[tuple, dict[int, Mapping[str, Any]]] = defaultdict(dict)
    for o in answers.values():
        if o["status"] != "complete":
            continue
        key = (o["contestant"], o["session_id"], o["case_id"] or o["user_message"], o["follow_up_index"])
        groups[key][o["repeat_index"]] = o
    groups = {k: v for k, v in groups.items() if len(v) >= 2}
    if not groups:
        return []
    try:
        from lineup import stability as stab
        from lineup.checks import CheckOutcome
    except ImportError:   # evalsets module absent: spread of check pass rates only
        stab = None
    texts: dict[str, str] = {}
    if stab is not None:
        ids = [o["id"] for runs in groups.values() for o in runs.values()]
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            texts.update(conn.execute(f"SELECT id, text FROM output WHERE id IN ({','.join('?' * len(chunk))})",
                                      chunk).fetchall())
    per_model: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for (model, *_), runs in groups.items():
        ordered = [runs[k] for k in sorted(runs)]
        shares = [sum(c[2] for c in per_output.get(o["id"], [])) / len(per_output[o["id"]])
                  for o in ordered if per_output.get(o["id"])]
        sd = _sd(shares) if len(shares) >= 2 else None
        item: dict[str, Any] = {"runs": len(ordered), "sd": sd}
        if stab is not None:
            outcomes = [[CheckOutcome(type=str(spec.get("type", name)), name=name, spec=spec, passed=passed,
                                      score=1.0 if passed else 0.0, detail=detail or "")
                         for name, spec, passed, detail in per_output.get(o["id"], [])] for o in ordered]
            res = stab.stability([texts.get(o["id"], "") for o in ordered], outcomes)
            item.update(exact=res.exact_match_rate, sim=res.mean_similarity, min_sim=res.min_similarity,
                        flaky=res.flaky_checks, checks=len(res.checks))
        else:
            n_checks = max((len(per_output.get(o["id"], [])) for o in ordered), default=0)
            flaky = 0
            for i in range(n_checks):
                verdicts = {per_output[o["id"]][i][2] for o in ordered if len(per_output.get(o["id"], [])) > i}
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


def _battle_set(votes: Sequence[_Vote]) -> tuple[R.BattleSet, list[_Vote], list[str]]:
    """Votes -> pairwise outcomes (and the votes that made it, in BattleSet
    vote order); votes that read the same (choice, ranking, mapping,
    positions) decompose once."""
    battles, used, problems = [], [], []
    memo: dict[tuple, list[R.Battle]] = {}
    for v in votes:
        got = memo.get(v._key)
        if got is None:
            try:
                got = memo[v._key] = v.battles()
            except ValueError as exc:
                problems.append(f"{exc}; left out")
                continue
        if got:
            battles.append(got)
            used.append(v)
    return R.BattleSet.from_votes(battles), used, problems


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

    bs, used, bad = _battle_set(votes)
    problems += bad
    overall = R.rate(bs, rounds=rounds, seed=seed)
    table = _rating_table(overall)
    report.models, report.groups, report.gaps = table.models, table.groups, table.gaps
    report.components = table.components
    report.votes_used = bs.n_votes
    report.warnings = table.warnings[:] if bs.n_votes else []
    report.warnings += problems

    if breakdowns and bs.n_votes:
        for attr, key in (("by_category", lambda v: v.category or NO_CATEGORY), ("by_rater", lambda v: v.rater)):
            split: defaultdict[str, list[int]] = defaultdict(list)
            for k, v in enumerate(used):
                split[key(v)].append(k)
            tables = {}
            for name in sorted(split):
                sub = split[name]
                if len(sub) == len(used):
                    tables[name] = table          # the same votes: the same table
                    continue
                tables[name] = _rating_table(R.rate(bs.subset(np.asarray(sub)), rounds=rounds, seed=seed))
            setattr(report, attr, tables)
    report.position_bias = _position_bias(votes)
    report.consistency = _consistency(votes)

    outputs = _read_outputs(conn, filters)
    answers = _answers(outputs)
    report.failure_modes = _failure_modes(conn, answers, filters)
    report.engineering = _engineering(outputs, _prices(conn), prices or {})
    report.checks, report.checks_by_category, per_output = _checks(conn, answers)
    report.stability = _stability(conn, answers, per_output)
    report.message = _message(conn, report, filters)
    return report


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


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def plain(text: Any) -> str:
    """Text safe for a terminal: control characters (escape sequences among
    them) and bidi/format characters shown as visible escapes."""
    s = str(text)
    s = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)
    return "".join(ch if unicodedata.category(ch) != "Cf" else f"\\u{ord(ch):04x}" for ch in s)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")


def md(text: Any) -> str:
    """Markdown-inert text (table-safe: no pipes, no newlines, no HTML)."""
    s = plain(text).replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", s)


def h(text: Any) -> str:
    return html.escape(plain(text), quote=True)


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
    return str(row.rank_low) if row.rank_low == row.rank_high else f"{row.rank_low}-{row.rank_high}"


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
        [[fmt_rank(m), md(m.name), fmt(m.rating), fmt_ci(m), str(m.votes), str(m.wins), str(m.ties),
          str(m.losses), str(m.group + 1), md("; ".join(m.notes))] for m in table_models])
    close = [g for g in gaps if not g.separated]
    if close:
        lines.append("Adjacent models not yet separated (rough further votes needed at the current gap):")
        lines.append("")
        lines += [f"- {md(g.upper)} vs {md(g.lower)}: gap {g.gap:.0f}, "
                  f"{'unknown' if g.more_votes is None else f'~{g.more_votes:,}'} more votes" for g in close]
        lines.append("")
    return lines


def render_markdown(r: Report) -> str:
    lines = ["# lineup report", ""]
    lines.append(f"Votes used: {r.votes_used}; bootstrap rounds: {r.rounds}; seed: {r.seed}. "
                 "Ratings: Bradley-Terry, Elo scale (mean 1000), 95% bootstrap intervals; a rank range "
                 "covers every rank the intervals allow.")
    lines.append("")
    if r.message:
        lines += [f"> {md(r.message)}", ""]
    for w in r.warnings:
        lines += [f"- warning: {md(w)}"]
    if r.warnings:
        lines.append("")
    if r.models:
        lines += ["## Ratings", ""] + _md_ratings(r.models, r.gaps)
        ties = "; ".join("{" + ", ".join(md(n) for n in g) + "}" for g in r.groups if len(g) > 1)
        lines += ["Cannot be told apart (overlapping intervals): " + (ties or "none"), ""]
    for title, tables in (("By category", r.by_category), ("By rater", r.by_rater)):
        if len(tables) > 1:
            lines += [f"## {title}", ""]
            for name, t in tables.items():
                lines += [f"### {md(name)}", ""] + _md_ratings(t.models, t.gaps)
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
                           [[md(x.rater), str(x.repeated), str(x.agreed), pct(x.rate)] for x in c.raters])
        if c.inter_rater_pairs:
            lines += [f"Between raters: {c.inter_rater_agreed} of {c.inter_rater_pairs} pairs agree "
                      f"({pct(c.inter_rater_rate)}).", ""]
    if any(f.tags for f in r.failure_modes):
        lines += ["## Failure modes", ""]
        lines += _md_table(["model", "answers", "tagged", "tags (count, rate)"],
                           [[md(f.model), str(f.answers), pct(f.tagged / f.answers if f.answers else None),
                             md(", ".join(f"{t} {s.count} ({100 * s.rate:.0f}%)" for t, s in f.tags.items()))]
                            for f in r.failure_modes])
    if r.engineering:
        lines += ["## Speed, errors and cost", ""]
        lines += _md_table(
            ["model", "requests", "errors", "TTFT p50", "TTFT p95", "tok/s p50", "duration p50",
             "tokens in/out", "cost"],
            [[md(e.model), str(e.requests),
              f"{pct(e.error_rate)}" + (f" ({md(', '.join(f'{k} {v}' for k, v in e.errors_by_kind.items()))})"
                                        if e.errors_by_kind else ""),
              fmt(e.ttft_ms.p50 if e.ttft_ms else None) + " ms", fmt(e.ttft_ms.p95 if e.ttft_ms else None) + " ms",
              fmt(e.output_tokens_per_s_p50, 1), fmt(e.duration_ms.p50 if e.duration_ms else None) + " ms",
              f"{e.input_tokens:,} / {e.output_tokens:,}", "-" if e.cost is None else f"${e.cost:.4f}"]
             for e in r.engineering])
    if r.checks:
        lines += ["## Automated checks", ""]
        lines += _md_table(["model", "check", "passed", "rate"],
                           [[md(x.model), md(x.check or "all"), f"{x.passed}/{x.total}", pct(x.rate)]
                            for x in r.checks])
        if r.checks_by_category:
            lines += _md_table(["model", "category", "passed", "rate"],
                               [[md(x.model), md(x.category), f"{x.passed}/{x.total}", pct(x.rate)]
                                for x in r.checks_by_category])
    if r.stability:
        lines += ["## Stability over repeats", ""]
        lines += _md_table(["model", "cases", "runs", "identical", "similarity (mean/min)", "flaky checks",
                            "pass-rate sd (mean/max)"],
                           [[md(s.model), str(s.cases), str(s.runs), pct(s.exact_match_rate),
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
        parts.append(f'<text x="{label_w - 8}" y="{y + 4}" text-anchor="end">{h(m.name)}</text>')
        dash = ' stroke-dasharray="4 3"' if (m.ci_low is None or m.ci_high is None) else ""
        parts.append(f'<line x1="{a:.1f}" y1="{y}" x2="{b:.1f}" y2="{y}" stroke="{col}" stroke-width="2"{dash}/>')
        for end, open_ in ((a, m.ci_low is None), (b, m.ci_high is None)):
            if not open_:
                parts.append(f'<line x1="{end:.1f}" y1="{y - 5}" x2="{end:.1f}" y2="{y + 5}" stroke="{col}" stroke-width="2"/>')
        parts.append(f'<circle cx="{x(m.rating):.1f}" cy="{y}" r="4" fill="{col}"><title>{h(m.name)}: '
                     f'{m.rating:.0f} ({h(fmt_ci(m))})</title></circle>')
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
        parts.append(f'<text x="0" y="{y + 12}" font-weight="bold">{h(f.model)} '
                     f'<tspan fill="#666" font-weight="normal">({f.answers} answers)</tspan></text>')
        y += 18
        for t in tags:
            s = f.tags.get(t)
            if s is None:
                continue
            w = s.rate / top * plot_w
            col = colours[tags.index(t) % len(colours)]
            parts.append(f'<text x="{label_w - 8}" y="{y + 11}" text-anchor="end">{h(t)}</text>'
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
             f'role="img" aria-label="{h(title)}">']
    step = _nice_step(hi / 6)
    tick = 0.0
    while tick <= hi:
        parts.append(f'<line x1="{x(tick):.1f}" y1="8" x2="{x(tick):.1f}" y2="{height - 25}" stroke="#eee"/>'
                     f'<text x="{x(tick):.1f}" y="{height - 8}" text-anchor="middle" fill="#666">{tick:g}</text>')
        tick += step
    for k, (model, q) in enumerate(data):
        y = 20 + k * row_h
        parts.append(f'<text x="{label_w - 8}" y="{y + 4}" text-anchor="end">{h(model)}</text>'
                     f'<line x1="{x(q.p5):.1f}" y1="{y}" x2="{x(q.p95):.1f}" y2="{y}" stroke="#888"/>'
                     f'<rect x="{x(q.p25):.1f}" y="{y - 7}" width="{max(1.0, x(q.p75) - x(q.p25)):.1f}" height="14" '
                     f'fill="#cfe0f7" stroke="#4a78c2"/>'
                     f'<line x1="{x(q.p50):.1f}" y1="{y - 7}" x2="{x(q.p50):.1f}" y2="{y + 7}" stroke="#1d3f7a" '
                     f'stroke-width="2"><title>{h(model)}: p50 {q.p50:.0f} ms, p95 {q.p95:.0f} ms, n={q.n}</title></line>')
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
        [[h(m.name), fmt_rank(m), fmt(m.rating), h(fmt_ci(m)), str(m.votes), str(m.wins), str(m.ties),
          str(m.losses), str(m.group + 1), h("; ".join(m.notes))] for m in models])]
    close = [g for g in gaps if not g.separated]
    if close:
        parts.append("<p class=small>Not yet separated (rough further votes, same mix, at the current gap): "
                     + "; ".join(f"{h(g.upper)} vs {h(g.lower)}: gap {g.gap:.0f}, "
                                 f"{'unknown' if g.more_votes is None else f'~{g.more_votes:,}'}"
                                 for g in close) + "</p>")
    return "".join(parts)


def render_html(r: Report) -> str:
    """A self-contained page: inline CSS and SVG, no script, every piece of
    recorded text escaped."""
    body = ["<h1>lineup report</h1>",
            f"<p class=small>{r.votes_used} votes, {r.rounds} bootstrap rounds, seed {h(r.seed)}. "
            "Bradley-Terry on the Elo scale (mean 1000), 95% bootstrap intervals; dashed whiskers are open "
            "(no finite rating on that side).</p>"]
    if r.message:
        body.append(f'<p class="msg">{h(r.message)}</p>')
    body += [f'<p class="warn">{h(w)}</p>' for w in r.warnings]
    if r.models:
        body += ["<h2>Ratings</h2>", _html_ratings(r.models, r.gaps)]
    for title, tables in (("By category", r.by_category), ("By rater", r.by_rater)):
        if len(tables) > 1:
            body.append(f"<h2>{title}</h2>")
            for name, t in tables.items():
                body += [f"<h3>{h(name)}</h3>", _html_ratings(t.models, t.gaps)]
    if r.position_bias.rows:
        body += ["<h2>Position bias</h2>", _html_table(
            ["position", "votes", "wins", "win rate", "95% interval", "expected"],
            [[str(p.position + 1), str(p.votes), str(p.wins), pct(p.win_rate),
              f"{pct(p.ci_low)} .. {pct(p.ci_high)}", pct(p.expected)] for p in r.position_bias.rows])]
    c = r.consistency
    if c.raters or c.inter_rater_pairs:
        body += ["<h2>Rater consistency</h2>", _html_table(
            ["rater", "judged twice", "same verdict", "rate"],
            [[h(x.rater), str(x.repeated), str(x.agreed), pct(x.rate)] for x in c.raters])]
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
                             [[h(e.model), str(e.requests), pct(e.error_rate),
                               h(", ".join(f"{k} {v}" for k, v in e.errors_by_kind.items())),
                               fmt(e.ttft_ms.p50 if e.ttft_ms else None),
                               fmt(e.ttft_ms.p95 if e.ttft_ms else None),
                               fmt(e.output_tokens_per_s_p50, 1), f"{e.input_tokens:,} / {e.output_tokens:,}",
                               "-" if e.cost is None else f"${e.cost:.4f}"] for e in r.engineering])]
    if r.checks:
        body += ["<h2>Automated checks</h2>", _html_table(
            ["model", "check", "passed", "rate"],
            [[h(x.model), h(x.check or "all"), f"{x.passed}/{x.total}", pct(x.rate)] for x in r.checks])]
        if r.checks_by_category:
            body.append(_html_table(["model", "category", "passed", "rate"],
                                    [[h(x.model), h(x.category), f"{x.passed}/{x.total}", pct(x.rate)]
                                     for x in r.checks_by_category]))
    if r.stability:
        body += ["<h2>Stability over repeats</h2>", _html_table(
            ["model", "cases", "runs", "identical", "similarity mean / min", "flaky checks",
             "pass-rate sd mean / max"],
            [[h(s.model), str(s.cases), str(s.runs), pct(s.exact_match_rate),
              f"{fmt(s.mean_similarity, 2)} / {fmt(s.min_similarity, 2)}", f"{s.flaky_checks}/{s.checks}",
              f"{fmt(s.pass_rate_sd_mean, 2)} / {fmt(s.pass_rate_sd_max, 2)}"] for s in r.stability])]
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>lineup report</title><style>{_CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
