"""Two runs of a set compared case by case: `lineup diff` and `lineup gate`.

A team keeps its set and re-runs it as models change (a new snapshot behind
the same name, a cheaper model, a new prompt); each run alone says little
about whether the new one is worse. This module pairs two recorded runs unit
by unit (case id, follow-up and repeat) for one model on each side and says,
with the uncertainty attached, what changed:

- whether the answer came back at all, each check's pass rate, and each
  category's (a conversation passes a category when all its checks pass):
  paired tests, McNemar's, exact (binomial) when fewer than 25 pairs
  disagree, two-sided. An answer that did not complete fails the checks its
  other side recorded;
- answers that changed: exactly, and by a word-level similarity;
- time to first token and duration, p50 and p95, with a seeded paired
  bootstrap interval of each difference (answers without timings, reused
  from the cache or from a batch, are left out);
- cost, and, where the two were voted against a common opponent (or each
  other), the Bradley-Terry rating difference with its bootstrap interval.

The gate: a test regresses when the candidate is worse and its p-value,
adjusted by Holm's method across every test of the gate (all checks, all
categories, completion, of all compared pairs), is below alpha; latency
regresses, when a threshold is given, when the p95 rose by more than it and
the interval of the difference lies above zero. Ratings are shown, not gated.

The outcome is one pydantic model (`DiffReport`): its JSON is the stable
shape CI reads (`SCHEMA`). No SQL here: the records come from the store's
`load_session`; the tables are drawn by the commands (`lineup.commands.comparing`).

Past 600 lines because the JSON shape, the statistics and the pairing are
one contract: the shape documents what the tests compute, and the gate's
family of tests (Holm) spans every part of it.
"""

from __future__ import annotations

import difflib
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from core.ground.errors import UsageError
from core.answering.runner import _latest_outputs
from core.stats.quantiles import percentile
from core.stats.votes import Battle, battles_of, reveal_state
from store.records import CheckResultRecord, LoadedSession, OutputRecord

SCHEMA = "lineup.diff/1"
#: Below this many discordant pairs McNemar's test is the exact binomial one.
EXACT_BELOW = 25
#: Words compared per answer by the exact sequence ratio; longer answers use the bag-of-words bound.
SIMILARITY_WORDS = 5000
BOOTSTRAP_ROUNDS = 2000

Scope = Literal["answered", "check", "category"]
UnitKey = tuple[str, int, int]          # case id, follow-up index, repeat index
ConvKey = tuple[str, int]               # case id, repeat index


# --------------------------------------------------------------------------- the JSON shape


class Side(BaseModel):
    session_id: str
    alias: str
    model: str
    served_models: list[str] = Field(description="model ids the provider returned, most frequent first")
    fingerprints: list[str] = Field(default_factory=list)


class PairedTest(BaseModel):
    """One paired pass/fail comparison (McNemar)."""

    scope: Scope
    name: str = Field(description="the check's name, the category, or 'answered'")
    pairs: int = Field(description="units with an outcome on both sides")
    baseline_pass_rate: float | None
    candidate_pass_rate: float | None
    regressions: int = Field(description="passed in the baseline, failed in the candidate")
    improvements: int = Field(description="failed in the baseline, passed in the candidate")
    method: Literal["exact", "chi2", "none"] = Field(description="none: no discordant pair, p = 1")
    p_value: float
    p_adjusted: float = Field(description="Holm-adjusted over every test of the report")
    regressed: bool
    improved: bool


class Interval(BaseModel):
    low: float
    high: float


class LatencyDiff(BaseModel):
    metric: Literal["ttft_ms", "duration_ms"]
    pairs: int
    baseline_p50: float | None = None
    candidate_p50: float | None = None
    p50_diff: float | None = None
    p50_ci: Interval | None = None
    baseline_p95: float | None = None
    candidate_p95: float | None = None
    p95_diff: float | None = None
    p95_ci: Interval | None = None
    p95_change_pct: float | None = Field(default=None, description="(candidate - baseline) / baseline p95, %")
    regressed: bool = False


class AnswerChanges(BaseModel):
    pairs: int = Field(description="units answered (complete) on both sides")
    identical: int
    identical_rate: float | None
    mean_similarity: float | None
    median_similarity: float | None


class CostDiff(BaseModel):
    """Recorded costs of the paired answers that made a request (cached ones cost nothing and are left out)."""

    pairs: int
    baseline_total: float | None
    candidate_total: float | None
    baseline_per_answer: float | None
    candidate_per_answer: float | None
    change_pct: float | None


class RatingDiff(BaseModel):
    baseline_rating: float | None = None
    candidate_rating: float | None = None
    diff: float | None = None
    ci: Interval | None = None
    votes: int = 0
    note: str | None = None


class CaseChange(BaseModel):
    case_id: str
    repeat: int
    follow_up: int | None = Field(description="None for a conversation-level change (checks, completion)")
    category: str | None
    change: Literal["newly_failing", "newly_passing", "changed"]
    checks: list[str] = Field(default_factory=list, description="what flipped (check names, 'answered')")
    similarity: float | None = None
    exact: bool | None = None
    baseline_replay: str
    candidate_replay: str


class Comparison(BaseModel):
    baseline: Side
    candidate: Side
    paired_units: int
    baseline_only: int
    candidate_only: int
    tests: list[PairedTest]
    answers: AnswerChanges
    latency: list[LatencyDiff]
    cost: CostDiff
    rating: RatingDiff | None
    cases: list[CaseChange]
    hidden_cases: int = Field(description="changed cases not listed: blind and not yet revealed")


class DiffReport(BaseModel):
    schema_: str = Field(default=SCHEMA, alias="schema")
    alpha: float
    correction: Literal["holm"] = "holm"
    tests: int = Field(description="tests in the Holm family")
    max_p95_regression_pct: float | None
    seed: int
    comparisons: list[Comparison]
    regressions: list[str] = Field(description="what regressed, one line each (empty: nothing did)")

    model_config = {"populate_by_name": True}

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)


# --------------------------------------------------------------------------- statistics


def mcnemar(regressions: int, improvements: int) -> tuple[float, Literal["exact", "chi2", "none"]]:
    """Two-sided p-value of McNemar's test on the discordant counts: the exact
    binomial test below `EXACT_BELOW` discordant pairs, else the chi-square
    with continuity correction."""
    b, c = regressions, improvements
    n = b + c
    if n == 0:
        return 1.0, "none"
    if n < EXACT_BELOW:
        k = min(b, c)
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
        return min(1.0, 2 * tail), "exact"
    chi2 = (abs(b - c) - 1) ** 2 / n
    return math.erfc(math.sqrt(chi2 / 2)), "chi2"


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone), in input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def similarity(a: str, b: str) -> float:
    """Word-level similarity in [0, 1]: difflib's ratio over the words (1 for
    equal texts); past `SIMILARITY_WORDS` words, its bag-of-words upper bound."""
    if a == b:
        return 1.0
    wa, wb = a.split(), b.split()
    if not wa and not wb:
        return 1.0 if a.strip() == b.strip() else 0.0
    matcher = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    if max(len(wa), len(wb)) > SIMILARITY_WORDS:
        return matcher.quick_ratio()
    return matcher.ratio()


def paired_bootstrap(a: np.ndarray, b: np.ndarray, qs: Sequence[float], rounds: int,
                     rng: np.random.Generator) -> list[tuple[float, float]]:
    """95% percentile intervals of percentile_q(b) - percentile_q(a) for each q,
    resampling pairs (one resample serves every q)."""
    n = a.size
    diffs = np.empty((len(qs), rounds))
    step = max(1, 2_000_000 // max(n, 1))
    for start in range(0, rounds, step):
        size = min(step, rounds - start)
        idx = rng.integers(0, n, size=(size, n))
        diffs[:, start:start + size] = percentile(b[idx], qs, axis=1) - percentile(a[idx], qs, axis=1)
    return [(float(lo), float(hi)) for lo, hi in percentile(diffs, [2.5, 97.5], axis=1).T]


# --------------------------------------------------------------------------- reading one side


@dataclass
class RunAnswers:
    """One side: a model's answers in a recorded run, by unit."""

    loaded: LoadedSession
    alias: str
    answers: dict[UnitKey, OutputRecord] = field(default_factory=dict)
    category: dict[str, str | None] = field(default_factory=dict)
    checks: dict[ConvKey, dict[str, bool]] = field(default_factory=dict)
    conversations: dict[ConvKey, bool] = field(default_factory=dict)   # every answer complete
    hidden: set[ConvKey] = field(default_factory=set)

    @property
    def session_id(self) -> str:
        return self.loaded.session.id


def side_of(loaded: LoadedSession, alias: str) -> RunAnswers:
    run = RunAnswers(loaded, alias)
    turns = {t.id: t for t in loaded.turns if t.case_id}
    if not turns:
        raise UsageError(f"session {loaded.session.id} has no sample-set cases: diff and gate compare runs "
                         "(lineup run)")
    mine = [o for o in loaded.outputs if o.contestant == alias and o.turn_id in turns]
    latest = _latest_outputs(mine)
    reveal = reveal_state(loaded)
    several = len(loaded.session.contestants) > 1
    by_conv: defaultdict[ConvKey, list[bool]] = defaultdict(list)
    for t in turns.values():
        assert t.case_id is not None
        conv = (t.case_id, t.repeat_index)
        run.category[t.case_id] = t.category
        out = latest.get((t.id, alias))
        if out is not None:
            run.answers[(t.case_id, t.follow_up_index, t.repeat_index)] = out
        by_conv[conv].append(out is not None and out.status == "complete")
        if several and not reveal.turn(t.id):
            run.hidden.add(conv)
    run.conversations = {k: all(v) for k, v in by_conv.items()}
    checks_of: defaultdict[str, list[CheckResultRecord]] = defaultdict(list)
    for c in loaded.checks:
        checks_of[c.output_id].append(c)
    for (case_id, _k, repeat), out in run.answers.items():
        results = run.checks.setdefault((case_id, repeat), {})
        seen: Counter[str] = Counter()
        for c in checks_of.get(out.id, ()):
            seen[c.check] += 1
            name = c.check if seen[c.check] == 1 else f"{c.check} #{seen[c.check]}"
            results[name] = results.get(name, True) and c.passed
    return run


def _served(run: RunAnswers) -> tuple[list[str], list[str]]:
    models = Counter(o.served_model for o in run.answers.values() if o.served_model)
    prints = Counter(o.system_fingerprint for o in run.answers.values() if o.system_fingerprint)
    return [m for m, _ in models.most_common()], [f for f, _ in prints.most_common()]


# --------------------------------------------------------------------------- pairing


def pairs_of(a: LoadedSession, b: LoadedSession, models: Sequence[str] = ()) -> list[tuple[str, str]]:
    """Which contestant of `a` is compared with which of `b`: `models` as
    "BASE[:CAND]" (CAND defaults to BASE); else the only model on each side;
    else every alias the two runs share. UsageError naming what is missing."""
    have_a = [c.alias for c in sorted(a.session.contestants, key=lambda c: c.position)]
    have_b = [c.alias for c in sorted(b.session.contestants, key=lambda c: c.position)]
    out: list[tuple[str, str]] = []
    for spec in models:
        base, _, cand = spec.partition(":")
        cand = cand or base
        if base not in have_a:
            raise UsageError(f"--model {spec}: session {a.session.id} has no model {base!r} "
                             f"(it has {', '.join(sorted(have_a))})")
        if cand not in have_b:
            raise UsageError(f"--model {spec}: session {b.session.id} has no model {cand!r} "
                             f"(it has {', '.join(sorted(have_b))})")
        out.append((base, cand))
    if out:
        return out
    if len(have_a) == 1 and len(have_b) == 1:
        return [(have_a[0], have_b[0])]
    shared = [x for x in have_a if x in have_b]
    if shared and a.session.id != b.session.id:
        return [(x, x) for x in shared]
    raise UsageError(f"say which models to compare: --model BASELINE_ALIAS:CANDIDATE_ALIAS (session "
                     f"{a.session.id} has {', '.join(sorted(have_a))}; {b.session.id} has {', '.join(sorted(have_b))})")


def replay_command(session_id: str) -> str:
    return f"lineup replay {session_id}"


# --------------------------------------------------------------------------- one comparison


@dataclass
class _Tally:
    scope: Scope
    name: str
    a_pass: int = 0
    b_pass: int = 0
    pairs: int = 0
    regressions: int = 0
    improvements: int = 0

    def add(self, a: bool, b: bool) -> None:
        self.pairs += 1
        self.a_pass += a
        self.b_pass += b
        self.regressions += a and not b
        self.improvements += b and not a


def _tests(base: RunAnswers, cand: RunAnswers, convs: list[ConvKey]
           ) -> tuple[list[_Tally], dict[ConvKey, tuple[list[str], list[str]]]]:
    """The paired tallies, and per conversation what regressed / improved."""
    tallies: dict[tuple[Scope, str], _Tally] = {}
    flips: dict[ConvKey, tuple[list[str], list[str]]] = {}

    def tally(scope: Scope, name: str) -> _Tally:
        key = (scope, name)
        if key not in tallies:
            tallies[key] = _Tally(scope, name)
        return tallies[key]

    for conv in convs:
        a_ok, b_ok = base.conversations[conv], cand.conversations[conv]
        worse: list[str] = []
        better: list[str] = []
        tally("answered", "answered").add(a_ok, b_ok)
        if a_ok != b_ok:
            (worse if a_ok else better).append("answered")
        ca, cb = base.checks.get(conv, {}), cand.checks.get(conv, {})
        names = sorted(set(ca) | set(cb))
        compared: list[str] = []
        for name in names:
            if name in ca and name in cb:
                pa, pb = ca[name], cb[name]
            elif name in ca and not b_ok:      # the candidate did not answer: it fails what was checked
                pa, pb = ca[name], False
            elif name in cb and not a_ok:
                pa, pb = False, cb[name]
            else:
                continue   # checked on one side only while both answered (the set changed): not comparable
            compared.append(name)
            tally("check", name).add(pa, pb)
            if pa != pb:
                (worse if pa else better).append(name)
        if compared:
            category = cand.category.get(conv[0]) or base.category.get(conv[0]) or "uncategorised"
            all_a = a_ok and all(ca.get(n, False) for n in compared)
            all_b = b_ok and all(cb.get(n, False) for n in compared)
            tally("category", category).add(all_a, all_b)
        if worse or better:
            flips[conv] = (worse, better)
    return list(tallies.values()), flips


def _latency(base: RunAnswers, cand: RunAnswers, units: list[UnitKey], metric: Literal["ttft_ms", "duration_ms"],
             rng: np.random.Generator, rounds: int, threshold_pct: float | None) -> LatencyDiff:
    a_vals, b_vals = [], []
    for u in units:
        oa, ob = base.answers[u], cand.answers[u]
        va, vb = getattr(oa, metric), getattr(ob, metric)
        if oa.status == ob.status == "complete" and va is not None and vb is not None:
            a_vals.append(float(va))
            b_vals.append(float(vb))
    out = LatencyDiff(metric=metric, pairs=len(a_vals))
    if len(a_vals) < 2:
        return out
    a, b = np.array(a_vals), np.array(b_vals)
    intervals = paired_bootstrap(a, b, (50, 95), rounds, rng)
    for q, name, (low, high) in zip((50, 95), ("p50", "p95"), intervals, strict=True):
        pa, pb = float(percentile(a, q)), float(percentile(b, q))
        setattr(out, f"baseline_{name}", pa)
        setattr(out, f"candidate_{name}", pb)
        setattr(out, f"{name}_diff", pb - pa)
        setattr(out, f"{name}_ci", Interval(low=low, high=high))
    assert out.baseline_p95 is not None and out.p95_diff is not None and out.p95_ci is not None
    if out.baseline_p95 > 0:
        out.p95_change_pct = 100.0 * out.p95_diff / out.baseline_p95
    if threshold_pct is not None and out.p95_change_pct is not None:
        out.regressed = out.p95_change_pct > threshold_pct and out.p95_ci.low > 0
    return out


def _answers(base: RunAnswers, cand: RunAnswers, units: list[UnitKey]) -> tuple[AnswerChanges, dict[UnitKey, float]]:
    sims: dict[UnitKey, float] = {}
    for u in units:
        oa, ob = base.answers[u], cand.answers[u]
        if oa.status == ob.status == "complete":
            sims[u] = similarity(oa.text, ob.text)
    values = list(sims.values())
    identical = sum(1 for u in sims if base.answers[u].text == cand.answers[u].text)
    return AnswerChanges(
        pairs=len(values), identical=identical, identical_rate=identical / len(values) if values else None,
        mean_similarity=statistics.fmean(values) if values else None,
        median_similarity=statistics.median(values) if values else None), sims


def _cost(base: RunAnswers, cand: RunAnswers, units: list[UnitKey]) -> CostDiff:
    a_costs, b_costs = [], []
    for u in units:
        oa, ob = base.answers[u], cand.answers[u]
        if oa.cost is None or ob.cost is None or "cache" in (oa.origin, ob.origin):
            continue
        a_costs.append(oa.cost)
        b_costs.append(ob.cost)
    n = len(a_costs)
    at, bt = (sum(a_costs), sum(b_costs)) if n else (None, None)
    return CostDiff(pairs=n, baseline_total=at, candidate_total=bt,
                    baseline_per_answer=at / n if at is not None else None,
                    candidate_per_answer=bt / n if bt is not None else None,
                    change_pct=100.0 * (bt - at) / at if at and bt is not None else None)


def _rating(base: RunAnswers, cand: RunAnswers, rounds: int, seed: int) -> RatingDiff | None:
    """Bradley-Terry over the revealed votes of both sessions, the two sides
    renamed apart (the same alias in two runs is two players) and linked
    through the opponents they share (the same alias is the same opponent);
    None when neither session has a vote."""
    from core.stats.ratings import DEFAULT_PRIOR_SD, SCALE, BattleSet, bootstrap_thetas, fit_pairs, pair_data

    sessions = {base.session_id: base.loaded}
    sessions.setdefault(cand.session_id, cand.loaded)
    renames: dict[str, dict[str, str]] = {sid: {} for sid in sessions}
    renames[base.session_id][base.alias] = "baseline"
    renames[cand.session_id][cand.alias] = "candidate"
    votes = []
    for sid, loaded in sessions.items():
        reveal = reveal_state(loaded)
        for v in loaded.current_votes():
            if not reveal.vote(v):
                continue   # a vote not yet revealed says nothing here yet
            try:
                battles = battles_of(v.choice, v.ranking, v.mapping, v.positions, v.id)
            except ValueError:
                continue
            ren = renames[sid]

            def player(name: str, ren: dict[str, str] = ren) -> str:
                return ren.get(name, "opponent " + name)

            votes.append([Battle(player(b.model_a), player(b.model_b), b.outcome) for b in battles])
    if not votes:
        return None
    bs = BattleSet.from_votes(votes)
    if "baseline" not in bs.models or "candidate" not in bs.models:
        return RatingDiff(votes=bs.n_votes, note="one side was never voted")
    lam = (SCALE / DEFAULT_PRIOR_SD) ** 2
    pd = pair_data(bs)
    i, j = bs.models.index("baseline"), bs.models.index("candidate")
    if not _linked(len(bs.models), pd.i, pd.j, i, j):
        return RatingDiff(votes=bs.n_votes, note="no votes link the two (no common opponent)")
    theta = fit_pairs(pd, len(bs.models), lam=lam)[0]
    boot = bootstrap_thetas(bs, rounds, seed, lam=lam, theta0=theta)
    diffs = (boot[:, j] - boot[:, i]) * SCALE
    low, high = percentile(diffs, [2.5, 97.5])
    centre = float(theta.mean())
    return RatingDiff(baseline_rating=1000 + (theta[i] - centre) * SCALE,
                      candidate_rating=1000 + (theta[j] - centre) * SCALE,
                      diff=float((theta[j] - theta[i]) * SCALE), ci=Interval(low=float(low), high=float(high)),
                      votes=bs.n_votes)


def _linked(n: int, i: np.ndarray, j: np.ndarray, x: int, y: int) -> bool:
    parent = list(range(n))

    def find(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for a, b in zip(i.tolist(), j.tolist(), strict=True):
        parent[find(a)] = find(b)
    return find(x) == find(y)


@dataclass
class _Pending:
    """A comparison before the Holm adjustment (which spans all of them)."""

    comparison: Comparison
    tallies: list[_Tally]


def _compare(base: RunAnswers, cand: RunAnswers, *, rng: np.random.Generator, rounds: int, seed: int,
             threshold_pct: float | None, top: int) -> _Pending:
    units = sorted(set(base.answers) & set(cand.answers))
    convs = sorted(set(base.conversations) & set(cand.conversations))
    tallies, flips = _tests(base, cand, convs)
    answers, sims = _answers(base, cand, units)
    latency = [_latency(base, cand, units, m, rng, rounds, threshold_pct) for m in ("ttft_ms", "duration_ms")]
    cases: list[CaseChange] = []
    hidden = 0

    def listed(conv: ConvKey) -> bool:
        nonlocal hidden
        if conv in base.hidden or conv in cand.hidden:
            hidden += 1
            return False
        return True

    replay_a, replay_b = replay_command(base.session_id), replay_command(cand.session_id)
    for conv, (worse, better) in sorted(flips.items()):
        if not listed(conv):
            continue
        category = cand.category.get(conv[0]) or base.category.get(conv[0])
        if worse:
            cases.append(CaseChange(case_id=conv[0], repeat=conv[1], follow_up=None, category=category,
                                    change="newly_failing", checks=worse, baseline_replay=replay_a,
                                    candidate_replay=replay_b))
        if better:
            cases.append(CaseChange(case_id=conv[0], repeat=conv[1], follow_up=None, category=category,
                                    change="newly_passing", checks=better, baseline_replay=replay_a,
                                    candidate_replay=replay_b))
    changed = sorted((s, u) for u, s in sims.items() if base.answers[u].text != cand.answers[u].text)
    for s, u in changed:
        if len([c for c in cases if c.change == "changed"]) >= top:
            break
        if not listed((u[0], u[2])):
            continue
        cases.append(CaseChange(case_id=u[0], repeat=u[2], follow_up=u[1], category=cand.category.get(u[0]),
                                change="changed", similarity=round(s, 4), exact=False,
                                baseline_replay=replay_a, candidate_replay=replay_b))
    sa, sb = _served(base), _served(cand)
    cfg_a = next(c for c in base.loaded.session.contestants if c.alias == base.alias)
    cfg_b = next(c for c in cand.loaded.session.contestants if c.alias == cand.alias)
    comparison = Comparison(
        baseline=Side(session_id=base.session_id, alias=base.alias, model=cfg_a.model, served_models=sa[0],
                      fingerprints=sa[1]),
        candidate=Side(session_id=cand.session_id, alias=cand.alias, model=cfg_b.model, served_models=sb[0],
                       fingerprints=sb[1]),
        paired_units=len(units), baseline_only=len(set(base.answers) - set(cand.answers)),
        candidate_only=len(set(cand.answers) - set(base.answers)), tests=[], answers=answers, latency=latency,
        cost=_cost(base, cand, units), rating=_rating(base, cand, min(rounds, 1000), seed), cases=cases,
        hidden_cases=hidden)
    return _Pending(comparison, tallies)


def compare_runs(baseline: LoadedSession, candidate: LoadedSession, *, models: Sequence[str] = (),
                 alpha: float = 0.05, max_p95_regression_pct: float | None = None, seed: int = 0,
                 rounds: int = BOOTSTRAP_ROUNDS, top: int = 10) -> DiffReport:
    """Compare two recorded runs (see the module doc). UsageError for runs
    that cannot be compared (no cases, no model named, nothing in common)."""
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1 (got {alpha:g})")
    if max_p95_regression_pct is not None and not (math.isfinite(max_p95_regression_pct)
                                                    and max_p95_regression_pct >= 0):
        raise UsageError(f"--max-p95-regression must be a percentage of 0 or more (got {max_p95_regression_pct:g})")
    rng = np.random.default_rng(seed)
    pending = []
    for base_alias, cand_alias in pairs_of(baseline, candidate, models):
        base, cand = side_of(baseline, base_alias), side_of(candidate, cand_alias)
        if not set(base.answers) & set(cand.answers):
            raise UsageError(f"sessions {baseline.session.id} ({base_alias}) and {candidate.session.id} "
                             f"({cand_alias}) share no case: nothing to compare")
        pending.append(_compare(base, cand, rng=rng, rounds=rounds, seed=seed,
                                threshold_pct=max_p95_regression_pct, top=top))
    family = [(p, t, *mcnemar(t.regressions, t.improvements)) for p in pending for t in p.tallies]
    adjusted = holm([f[2] for f in family])
    regressions: list[str] = []
    for (p, t, pv, method), adj in zip(family, adjusted, strict=True):
        worse = t.regressions > t.improvements
        test = PairedTest(
            scope=t.scope, name=t.name, pairs=t.pairs,
            baseline_pass_rate=t.a_pass / t.pairs if t.pairs else None,
            candidate_pass_rate=t.b_pass / t.pairs if t.pairs else None,
            regressions=t.regressions, improvements=t.improvements, method=method, p_value=pv, p_adjusted=adj,
            regressed=worse and adj < alpha, improved=t.improvements > t.regressions and adj < alpha)
        p.comparison.tests.append(test)
    for p in pending:
        c = p.comparison
        who = f"{c.candidate.alias} vs {c.baseline.alias}"
        for test in c.tests:
            if test.regressed:
                assert test.baseline_pass_rate is not None and test.candidate_pass_rate is not None
                what = "answered" if test.scope == "answered" else f"{test.scope} {test.name}"
                regressions.append(f"{who}: {what} {100 * test.baseline_pass_rate:.0f}% -> "
                                   f"{100 * test.candidate_pass_rate:.0f}% ({test.regressions} cases worse, "
                                   f"{test.improvements} better; Holm-adjusted p = {test.p_adjusted:.2g})")
        for lat in c.latency:
            if lat.regressed:
                assert lat.p95_change_pct is not None and lat.p95_ci is not None
                regressions.append(f"{who}: {lat.metric} p95 {lat.baseline_p95:.0f} -> {lat.candidate_p95:.0f} ms "
                                   f"(+{lat.p95_change_pct:.0f}%, over {max_p95_regression_pct:g}%; 95% interval "
                                   f"of the difference {lat.p95_ci.low:+.0f}..{lat.p95_ci.high:+.0f} ms)")
    return DiffReport(alpha=alpha, tests=len(family), max_p95_regression_pct=max_p95_regression_pct, seed=seed,
                      comparisons=[p.comparison for p in pending], regressions=regressions)


def flagged_cases(report: DiffReport) -> Iterable[CaseChange]:
    for c in report.comparisons:
        yield from c.cases
