"""The drift watch: what changed in a model over its canary runs.

A provider can change the model behind a name without a word (a new
snapshot, a new serving stack). `lineup drift SET -m A` records canary runs
(ordinary runs marked `canary` in their meta, deterministic by default);
this module reads them back, per model and set, in the order they ran, and
says for each run what differs from the run before it:

- the model id and `system_fingerprint` the provider returned (recorded with
  every answer, `providers.events.ServedBy`): a change is a fact, flagged as
  it is, no test needed;
- the share of answers that changed (paired by case, follow-up and repeat),
  only on deterministic settings (temperature 0, or a seed): flagged when it
  is significantly above the share that changed between the earlier runs
  (one-sided Fisher's exact test; the first pair has nothing to compare with);
- the check pass rate (conversations passing all their checks; McNemar's
  test, `core.decide.compare.mcnemar`), and time to first token and duration (an
  exact sign test on the paired timings, flagged only when the median also
  moved by more than `latency_pct` and at least `MIN_LATENCY_CHANGE_MS`).

Tests are Holm-adjusted per model over all its runs and kinds. Each flag
names the run where the change appeared. The JSON (`SCHEMA`) is stable.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from core.decide.compare import RunAnswers, holm, mcnemar, side_of
from store.records import LoadedSession

SCHEMA = "lineup.drift/1"
#: A latency move smaller than this is never flagged, whatever its share:
#: a loopback or cached answer's few milliseconds double on a busy machine.
MIN_LATENCY_CHANGE_MS = 50.0
FlagKind = Literal["served_model", "fingerprint", "configured_model", "answers", "checks", "ttft_ms", "duration_ms"]


class RunPoint(BaseModel):
    session_id: str
    created: float
    answers: int = Field(description="complete answers")
    model: str = Field(description="the model the config named for this run")
    served_models: dict[str, int] = Field(description="model ids the provider returned -> answers")
    fingerprints: dict[str, int]
    deterministic: bool = Field(description="temperature 0 or a seed: answers are expected to repeat")
    compared: int | None = Field(default=None, description="answers paired with the previous run")
    changed: int | None = None
    change_rate: float | None = None
    pass_rate: float | None = Field(default=None, description="conversations passing all their checks")
    ttft_p50_ms: float | None = None
    duration_p50_ms: float | None = None


class Flag(BaseModel):
    kind: FlagKind
    session_id: str = Field(description="the run where the change appeared")
    run: int = Field(description="its index among the model's canary runs, 0 = the first")
    detail: str
    p_value: float | None = None
    p_adjusted: float | None = None


class ModelDrift(BaseModel):
    alias: str
    sample_set: str
    runs: list[RunPoint]
    flags: list[Flag]


class DriftReport(BaseModel):
    schema_: str = Field(default=SCHEMA, alias="schema")
    alpha: float
    latency_pct: float
    models: list[ModelDrift]

    model_config = {"populate_by_name": True}


def is_canary(loaded_or_meta: dict) -> bool:
    return bool(loaded_or_meta.get("canary"))


def _deterministic(params: dict) -> bool:
    return params.get("temperature") == 0 or params.get("seed") is not None


def fisher_greater(x1: int, n1: int, x2: int, n2: int) -> float:
    """One-sided Fisher's exact test: P(at least x1 of the x1 + x2 changes fall
    in the first group of n1, out of n1 + n2), i.e. the first rate is higher."""
    total, k = n1 + n2, x1 + x2
    if k == 0 or n1 == 0:
        return 1.0
    denom = math.comb(total, k)
    return min(1.0, sum(math.comb(n1, i) * math.comb(n2, k - i) for i in range(x1, min(n1, k) + 1)) / denom)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _point(run: RunAnswers) -> RunPoint:
    s = run.loaded.session
    c = next(x for x in s.contestants if x.alias == run.alias)
    done = [o for o in run.answers.values() if o.status == "complete"]
    passes = [all(v.values()) and run.conversations.get(k, False) for k, v in run.checks.items() if v]
    return RunPoint(
        session_id=s.id, created=s.created, answers=len(done), model=c.model,
        served_models=dict(Counter(o.served_model for o in done if o.served_model).most_common()),
        fingerprints=dict(Counter(o.system_fingerprint for o in done if o.system_fingerprint).most_common()),
        deterministic=_deterministic({**s.params, **c.params}),
        pass_rate=sum(passes) / len(passes) if passes else None,
        ttft_p50_ms=_median([o.ttft_ms for o in done if o.ttft_ms is not None]),
        duration_p50_ms=_median([o.duration_ms for o in done if o.duration_ms is not None]))


def _names(counts: dict[str, int]) -> str:
    return ", ".join(counts) or "none"


def model_drift(runs: Sequence[LoadedSession], alias: str, *, alpha: float = 0.05,
                latency_pct: float = 25.0) -> ModelDrift:
    """The drift of `alias` over `runs` (canary sessions, oldest first)."""
    sides = [side_of(r, alias) for r in runs]
    points = [_point(s) for s in sides]
    facts: list[Flag] = []
    tests: list[tuple[Flag, float]] = []
    ref_changed = ref_compared = 0
    for k in range(1, len(sides)):
        prev, cur, p_prev, p = sides[k - 1], sides[k], points[k - 1], points[k]
        sid = p.session_id
        if p.model != p_prev.model:
            facts.append(Flag(kind="configured_model", session_id=sid, run=k,
                              detail=f"the config names another model: {p_prev.model} -> {p.model}"))
        if p.served_models and p_prev.served_models and set(p.served_models) != set(p_prev.served_models):
            facts.append(Flag(kind="served_model", session_id=sid, run=k,
                              detail=f"served model {_names(p_prev.served_models)} -> {_names(p.served_models)}"))
        if p.fingerprints and p_prev.fingerprints and set(p.fingerprints) != set(p_prev.fingerprints):
            facts.append(Flag(kind="fingerprint", session_id=sid, run=k,
                              detail=f"system_fingerprint {_names(p_prev.fingerprints)} -> {_names(p.fingerprints)}"))
        units = sorted(u for u in set(prev.answers) & set(cur.answers)
                       if prev.answers[u].status == cur.answers[u].status == "complete")
        changed = sum(prev.answers[u].text != cur.answers[u].text for u in units)
        p.compared, p.changed = len(units), changed
        p.change_rate = changed / len(units) if units else None
        if units and p.deterministic and p_prev.deterministic:
            if ref_compared:
                pv = fisher_greater(changed, len(units), ref_changed, ref_compared)
                tests.append((Flag(kind="answers", session_id=sid, run=k, p_value=pv, detail=(
                    f"{changed} of {len(units)} answers changed ({100 * changed / len(units):.0f}%) against "
                    f"{ref_changed} of {ref_compared} ({100 * ref_changed / ref_compared:.0f}%) between the runs "
                    "before")), pv))
            ref_changed += changed
            ref_compared += len(units)
        convs = [cv for cv in set(prev.checks) & set(cur.checks) if prev.checks[cv] and cur.checks[cv]]
        worse = better = 0
        for cv in convs:
            a = all(prev.checks[cv].values()) and prev.conversations.get(cv, False)
            b = all(cur.checks[cv].values()) and cur.conversations.get(cv, False)
            worse += a and not b
            better += b and not a
        if worse or better:
            pv, _ = mcnemar(worse, better)
            tests.append((Flag(kind="checks", session_id=sid, run=k, p_value=pv, detail=(
                f"check pass rate {_pct(p_prev.pass_rate)} -> {_pct(p.pass_rate)} ({worse} conversations worse, "
                f"{better} better)")), pv))
        metrics: tuple[Literal["ttft_ms", "duration_ms"], ...] = ("ttft_ms", "duration_ms")
        for metric in metrics:
            pairs = [(getattr(prev.answers[u], metric), getattr(cur.answers[u], metric)) for u in units]
            pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
            up = sum(b > a for a, b in pairs)
            down = sum(b < a for a, b in pairs)
            before, after = _median([a for a, _ in pairs]), _median([b for _, b in pairs])
            if not pairs or before is None or after is None or before <= 0:
                continue
            moved = 100.0 * (after - before) / before
            pv, _ = mcnemar(up, down)
            if abs(moved) > latency_pct and abs(after - before) >= MIN_LATENCY_CHANGE_MS:
                tests.append((Flag(kind=metric, session_id=sid, run=k, p_value=pv, detail=(
                    f"{metric} median {before:,.0f} -> {after:,.0f} ms ({moved:+.0f}%; {up} of {len(pairs)} "
                    "answers slower)")), pv))
    adjusted = holm([pv for _, pv in tests])
    flags = list(facts)
    for (flag, _), adj in zip(tests, adjusted, strict=True):
        if adj < alpha:
            flags.append(flag.model_copy(update={"p_adjusted": adj}))
    flags.sort(key=lambda f: (f.run, f.kind))
    name = runs[0].session.sample_set_name or "?"
    return ModelDrift(alias=alias, sample_set=name, runs=points, flags=flags)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def drift_report(canaries: Sequence[LoadedSession], *, models: Sequence[str] = (), alpha: float = 0.05,
                 latency_pct: float = 25.0) -> DriftReport:
    """Every (model, sample set) of the canary sessions given (any order)."""
    groups: dict[tuple[str, str], list[LoadedSession]] = {}
    for loaded in sorted(canaries, key=lambda x: (x.session.created, x.session.id)):
        for c in loaded.session.contestants:
            if models and c.alias not in models:
                continue
            key = (c.alias, loaded.session.sample_set_name or "")   # an edited set is still the same set
            groups.setdefault(key, []).append(loaded)
    return DriftReport(alpha=alpha, latency_pct=latency_pct, models=[
        model_drift(runs, alias, alpha=alpha, latency_pct=latency_pct)
        for (alias, _), runs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[1][0].session.created))])
