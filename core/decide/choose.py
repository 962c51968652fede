"""The decision's arithmetic: P(best) for a traffic mix, the limits, the
recommendation, routing per category and the Pareto frontiers.

Why a module of its own: it is a plain function of figures the report
already has (per-category `RatingResult`s with their bootstrap rounds, the
engineering and check rows), so the report (for the mix of its own votes)
and `lineup decide` (for a mix and limits it is given) both call it, and the
tests can feed it directly. The meaning of every field is documented in
`core.decide.model`.

How P(best) carries the uncertainty: each category's ratings come with
their own bootstrap rounds (`core.stats.ratings.rate`, seeded per category with
`core.stats.ratings.stream_seed`, so the categories' draws are independent); round
r of the mix is the share-weighted sum of round r of every category, and a
model's P(best) is the share of rounds it tops among the feasible models.
Two models "cannot be told apart" when the `confidence` interval of their
round-by-round difference includes 0 (a paired comparison: what two models
share, the same categories' draws, cancels out).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from core.decide.model import CheckRate, Decision, DecisionModel, Engineering, Limits, Route
from core.stats.quantiles import percentile
from core.stats.ratings import MIN_VOTES_TO_RANK, RatingResult

#: Mix scores of one round closer than this (Elo points) are equal: the fits
#: converge to 4e-5 Elo (`core.stats.ratings.fit_pairs`), so two models with the
#: same record in a round (frequent in small resampled sets) come out equal
#: only up to the path each fit took; such a round is split between them
#: (P(best)) and their difference counts as 0 (tie groups), whatever the
#: last digits say.
TIE_ELO = 1e-3

#: The limits, each with how a model's figure is read and how it is said.
LIMIT_NAMES = {
    "max_p95_ttft_ms": ("p95_ttft_ms", "p95 time to first token", "ms", "max"),
    "max_p95_duration_ms": ("p95_duration_ms", "p95 duration", "ms", "max"),
    "max_cost_per_1k": ("cost_per_1k", "cost per 1,000 answers", "$", "max"),
    "min_pass_rate": ("pass_rate", "check pass rate", "", "min"),
}


def normalise_mix(mix: Mapping[str, float]) -> dict[str, float]:
    """Shares scaled to sum to 1 (ValueError for a negative share or no positive one)."""
    for name, share in mix.items():
        if not math.isfinite(share) or share < 0:
            raise ValueError(f"{name}: a share must be a finite number of 0 or more, not {share!r}")
    total = sum(mix.values())
    if total <= 0:
        raise ValueError("the mix needs at least one category with a share above 0")
    return {name: share / total for name, share in mix.items()}


def _figure(value: float | None, limit_key: str) -> str:
    _, _, unit, _ = LIMIT_NAMES[limit_key]
    if value is None:
        return "-"
    if unit == "$":
        return f"${value:,.4g}"
    if unit == "ms":
        return f"{value:,.0f} ms"
    return f"{100 * value:.1f}%"


def _model_figures(name: str, eng: Engineering | None, check: CheckRate | None) -> DecisionModel:
    row = DecisionModel(name=name, p_best=None, feasible=True)
    if eng is not None:
        row.answers = eng.completed
        if eng.ttft_ms is not None:
            row.p95_ttft_ms, row.p50_ttft_ms = eng.ttft_ms.p95, eng.ttft_ms.p50
        if eng.duration_ms is not None:
            row.p95_duration_ms, row.p50_duration_ms = eng.duration_ms.p95, eng.duration_ms.p50
        if eng.cost is not None and eng.cost_known:
            row.cost_per_1k = 1000.0 * eng.cost / eng.cost_known
        row.cost_estimated = eng.tokens_estimated > 0
    if check is not None and check.total:
        row.pass_rate, row.checks = check.rate, check.total
    return row


def _feasibility(row: DecisionModel, limits: Limits) -> list[str]:
    """Why the model breaks the limits (empty: it does not)."""
    why = []
    for key, (attr, what, _, side) in LIMIT_NAMES.items():
        limit = getattr(limits, key)
        if limit is None:
            continue
        value = getattr(row, attr)
        if value is None:
            why.append(f"no {what} recorded to check against the limit of {_figure(limit, key)}")
        elif (side == "max" and value > limit) or (side == "min" and value < limit):
            bound = "above the limit of" if side == "max" else "below the minimum of"
            why.append(f"{what} {_figure(value, key)} is {bound} {_figure(limit, key)}")
    return why


def _default_mix_categories(categories: Mapping[str, RatingResult], votes: Mapping[str, int],
                             models: Sequence[str] | None) -> list[str]:
    """The categories of the mix made of the votes: those where every model
    (`models`, else each model rated in some category) is rated. One vote in
    a category where nobody has enough (a chat turn without a category) would
    otherwise leave no model rated in every category of the mix, and no
    P(best). When no category rates every model, all of them (the decision
    then says which models are not scored where)."""
    pool = list(models) if models is not None else sorted(
        {n for c in votes for n in categories[c].replicate_models if _column(categories[c], n) is not None})
    full = [c for c in votes if pool and all(_column(categories[c], n) is not None for n in pool)]
    return full or list(votes)


def _column(result: RatingResult, name: str) -> int | None:
    """The model's column in the result's rounds, when it is ranked there (as
    the report ranks: enough votes, `core.stats.ratings.MIN_VOTES_TO_RANK`, so that
    one lucky win never tops a decision either) in the result's main
    (largest) component; else None."""
    try:
        k = result.replicate_models.index(name)
    except ValueError:
        return None
    if result.component_of is None or int(result.component_of[k]) != 0:
        return None
    if not any(m.name == name and m.ranked for m in result.models):
        return None
    return k


def _p_best(scores: np.ndarray) -> np.ndarray:
    """Share of rounds (rows) each column tops; a tie (within TIE_ELO) splits the round."""
    if scores.shape[1] == 0:
        return np.zeros(0)
    top = scores.max(axis=1, keepdims=True)
    at_top = scores >= top - TIE_ELO
    return (at_top / at_top.sum(axis=1, keepdims=True)).mean(axis=0)


def _tied(scores: np.ndarray, best: int, confidence: float) -> np.ndarray:
    """Columns whose difference to `best`, round by round, has a `confidence`
    interval that includes 0 (the best itself included; within TIE_ELO)."""
    diff = scores[:, [best]] - scores
    low = percentile(diff, (1.0 - confidence) / 2.0 * 100.0, axis=0)
    return low <= TIE_ELO


def _cheapest(names: Sequence[str], cost: Mapping[str, float | None], fallback: str) -> str:
    known = {n: c for n in names if (c := cost.get(n)) is not None}
    if not known:
        return fallback
    return min(known, key=lambda n: (known[n], names.index(n)))


def _frontier(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """Names not dominated: nothing at most as costly (x) and at least as good
    (y), better on one of the two."""
    out = []
    for name, (x, y) in points.items():
        if not any((x2 <= x and y2 >= y and (x2 < x or y2 > y)) for other, (x2, y2) in points.items()
                   if other != name):
            out.append(name)
    return sorted(out, key=lambda n: points[n][0])


def decide(categories: Mapping[str, RatingResult], engineering: Sequence[Engineering],
           checks: Sequence[CheckRate], *, mix: Mapping[str, float] | None = None, mix_source: str | None = None,
           limits: Limits | None = None, models: Sequence[str] | None = None, confidence: float = 0.95,
           rounds: int = 0, seed: int | None = 0) -> Decision:
    """The decision for `mix` (category -> share; None: each category's share
    of the votes) within `limits`, among `models` (None: every rated model).
    `categories`: the ratings of each category's votes, with their rounds.

    In steps: the mix's shares, each model's figures and feasibility, the
    mix score per bootstrap round, P(best) and the recommendation, routing
    per category, the cost and latency frontiers."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    limits = limits or Limits()
    votes = {c: r.n_votes for c, r in categories.items() if r.n_votes}
    out = Decision(confidence=confidence, rounds=rounds, seed=seed, limits=limits,
                   votes_by_category=dict(sorted(votes.items())))
    shares = _mix_shares(out, categories, votes, mix, mix_source, models)
    rows = _model_rows(out, categories, shares, engineering, checks, models, limits)
    cost = {n: r.cost_per_1k for n, r in rows.items()}
    if not shares:
        out.message = "No votes in the mix's categories: no P(best)."
        out.models = list(rows.values())
        return out
    n_rounds = min((0 if (reps := categories[c].replicates) is None else reps.shape[0]) for c in shares)
    if n_rounds == 0:
        out.message = "No bootstrap rounds: P(best) needs them (--bootstrap N, N > 0)."
        out.models = list(rows.values())
        return out
    out.rounds = n_rounds
    scored, scores, point = _mix_scores(out, categories, shares, rows, n_rounds, confidence)
    _recommend(out, rows, scored, scores, point, cost, limits, confidence)
    out.routing = _routing(categories, shares, rows, cost, out.recommendation, confidence, n_rounds)
    routed = [(r.share, cost.get(r.choose)) for r in out.routing if r.choose is not None]
    if (out.recommendation is not None and cost.get(out.recommendation) is not None
            and len(routed) == len(out.routing) and all(c is not None for _, c in routed)):
        out.routing_cost_per_1k = sum(w * (c or 0.0) for w, c in routed)
        out.routing_saving = sum(r.saving or 0.0 for r in out.routing)
    _frontiers(out, rows, scored)
    out.models = sorted(rows.values(), key=lambda r: (r.p_best is None, -(r.p_best or 0.0),
                                                      r.rating is None, -(r.rating or 0.0), r.name))
    return out


def _mix_shares(out: Decision, categories: Mapping[str, RatingResult], votes: Mapping[str, int],
                mix: Mapping[str, float] | None, mix_source: str | None,
                models: Sequence[str] | None) -> dict[str, float]:
    """The categories the decision weighs and their shares (each category's
    share of the votes by default), saying what was left out and why."""
    if mix is None:
        in_mix = _default_mix_categories(categories, votes, models)
        left = [c for c in sorted(votes) if c not in in_mix]
        if left:
            out.left_out_categories = left
            n_left = sum(votes[c] for c in left)
            out.warnings.append(
                f"left out of the mix: {', '.join(left)} ({n_left} vote{'s' if n_left != 1 else ''}, "
                f"{100 * n_left / sum(votes.values()):.0f}% of them): not every model is rated there (fewer "
                f"than {MIN_VOTES_TO_RANK} votes, or none connecting it to the others); `--mix` weighs it anyway")
        total = sum(votes[c] for c in in_mix)
        shares = {c: votes[c] / total for c in sorted(in_mix)} if total else {}
        out.mix_source = "the votes (each category's share of them)"
    else:
        shares = normalise_mix(mix)
        out.mix_source = mix_source or "shares given"
    out.mix = dict(shares)
    unrated = [c for c, w in shares.items() if w > 0 and c not in votes]
    if unrated:
        out.unrated_categories = unrated
        kept = {c: w for c, w in shares.items() if c in votes and w > 0}
        lost = sum(shares[c] for c in unrated)
        out.warnings.append(
            f"no votes at all in {', '.join(unrated)} ({100 * lost:.0f}% of the mix): nothing can be said "
            "about any model there, so the decision covers the rest of the mix, scaled up")
        shares = normalise_mix(kept) if kept else {}
    return {c: w for c, w in shares.items() if w > 0}


def _model_rows(out: Decision, categories: Mapping[str, RatingResult], shares: Mapping[str, float],
                engineering: Sequence[Engineering], checks: Sequence[CheckRate], models: Sequence[str] | None,
                limits: Limits) -> dict[str, DecisionModel]:
    """A row per model considered (rated in the mix, or named): its
    engineering figures, check pass rate, and whether it keeps the limits."""
    eng = {e.model: e for e in engineering}
    overall_checks = {c.model: c for c in checks if c.check is None and c.category is None}
    names = sorted({n for c in shares for n in categories[c].replicate_models})
    if models is not None:
        wanted = list(dict.fromkeys(models))
        missing = [m for m in wanted if m not in names]
        if missing:
            out.warnings.append(f"no votes for {', '.join(missing)} in the mix's categories: not rated")
        names = wanted
    rows = {n: _model_figures(n, eng.get(n), overall_checks.get(n)) for n in names}
    for row in rows.values():
        why = _feasibility(row, limits)
        row.feasible = not why
        row.why_infeasible = "; ".join(why) or None
    return rows


def _mix_scores(out: Decision, categories: Mapping[str, RatingResult], shares: Mapping[str, float],
                rows: Mapping[str, DecisionModel], n_rounds: int, confidence: float
                ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The mix score (share-weighted rating) of every model rated in every
    category with a share: per bootstrap round, and its point value; each
    row gets its rating and interval."""
    cols: dict[str, dict[str, int]] = {}
    for n, row in rows.items():
        found = {c: _column(categories[c], n) for c in shares}
        row.missing_categories = [c for c, k in found.items() if k is None]
        if not row.missing_categories:
            cols[n] = {c: k for c, k in found.items() if k is not None}
    scored = list(cols)
    scores = np.zeros((n_rounds, len(scored)))
    point = np.zeros(len(scored))
    for j, n in enumerate(scored):
        for c, w in shares.items():
            r = categories[c]
            assert r.replicates is not None and r.point is not None
            scores[:, j] += w * r.replicates[:n_rounds, cols[n][c]]
            point[j] += w * r.point[cols[n][c]]
    tail = (1.0 - confidence) / 2.0 * 100.0
    if scored:
        lo, hi = percentile(scores, [tail, 100.0 - tail], axis=0)
        for j, n in enumerate(scored):
            rows[n].rating, rows[n].ci_low, rows[n].ci_high = float(point[j]), float(lo[j]), float(hi[j])
    partial = [n for n, row in rows.items() if row.missing_categories]
    if partial:
        out.warnings.append(f"not scored for this mix (fewer than {MIN_VOTES_TO_RANK} votes, or none connecting "
                            "them to the other models, in some of its categories): " + "; ".join(
                                f"{n} ({', '.join(rows[n].missing_categories)})" for n in partial))
    return scored, scores, point


def _recommend(out: Decision, rows: Mapping[str, DecisionModel], scored: list[str], scores: np.ndarray,
               point: np.ndarray, cost: Mapping[str, float | None], limits: Limits, confidence: float) -> None:
    """P(best) among the feasible models, the best, those tied with it, and
    the cheapest of them as the recommendation; with none feasible, the
    limit that rules out the most."""
    feasible = [j for j, n in enumerate(scored) if rows[n].feasible]
    p = _p_best(scores[:, feasible])
    for row in rows.values():
        row.p_best = 0.0 if not row.feasible else None
    for k, j in enumerate(feasible):
        rows[scored[j]].p_best = float(p[k])

    if feasible:
        best_j = max(feasible, key=lambda j: (rows[scored[j]].p_best or 0.0, point[j]))
        best = scored[best_j]
        sub = scores[:, feasible]
        tied_mask = _tied(sub, feasible.index(best_j), confidence)
        tied = [scored[j] for k, j in enumerate(feasible) if tied_mask[k]]
        tied.sort(key=lambda n: (n != best, -(rows[n].p_best or 0.0), -(rows[n].rating or 0.0)))
        out.best, out.tied_with_best = best, tied
        out.recommendation = _cheapest(tied, cost, best)
        c_best, c_rec = cost.get(best), cost.get(out.recommendation)
        if c_best is not None and c_rec is not None:
            out.saving_vs_best = c_best - c_rec
            out.saving_vs_best_share = (c_best - c_rec) / c_best if c_best > 0 else None
        out.single_cost_per_1k = c_rec
    elif scored:
        out.message = "No feasible model: every model breaks a limit."
        counts = {}
        for key in LIMIT_NAMES:
            if getattr(limits, key) is None:
                continue
            counts[key] = sum(1 for n in scored if _feasibility(rows[n], Limits(**{key: getattr(limits, key)})))
        if counts:
            key = max(counts, key=lambda k: counts[k])
            out.binding_limit = f"--{key.replace('_', '-')} {getattr(limits, key):g}"
            out.message += f" The binding limit: {out.binding_limit} (rules out {counts[key]} of {len(scored)})."
    else:
        out.message = "No model is rated in every category of the mix: no P(best)."


def _frontiers(out: Decision, rows: Mapping[str, DecisionModel], scored: list[str]) -> None:
    """The cost and latency frontiers of what may be shipped (feasible, scored)."""
    ok = [n for n in scored if rows[n].feasible]
    cost_points = {n: (rows[n].cost_per_1k, rows[n].rating) for n in ok if rows[n].cost_per_1k is not None}
    lat_points = {n: (rows[n].p95_duration_ms, rows[n].rating) for n in ok if rows[n].p95_duration_ms is not None}
    out.pareto_cost = _frontier(cost_points)          # type: ignore[arg-type]  # both known
    out.pareto_latency = _frontier(lat_points)        # type: ignore[arg-type]
    for n in out.pareto_cost:
        rows[n].on_cost_frontier = True
    for n in out.pareto_latency:
        rows[n].on_latency_frontier = True


def _routing(categories: Mapping[str, RatingResult], shares: Mapping[str, float],
             rows: Mapping[str, DecisionModel], cost: Mapping[str, float | None], single: str | None,
             confidence: float, n_rounds: int) -> list[Route]:
    routes = []
    for c, w in shares.items():
        r = categories[c]
        cand = [(n, k) for n in rows if rows[n].feasible and (k := _column(r, n)) is not None]
        route = Route(category=c, choose=None, p_best=None, saving=None, share=w, votes=r.n_votes)
        if cand and r.replicates is not None and r.point is not None:
            sub = r.replicates[:n_rounds, [k for _, k in cand]]
            p = _p_best(sub)
            names = [n for n, _ in cand]
            b = max(range(len(cand)), key=lambda i: (p[i], r.point[cand[i][1]]))   # type: ignore[index]
            tied_mask = _tied(sub, b, confidence)
            tied = [names[i] for i in range(len(cand)) if tied_mask[i]]
            tied.sort(key=lambda n: (n != names[b], -p[names.index(n)]))
            choose = _cheapest(tied, cost, names[b])
            route.best, route.tied, route.choose = names[b], tied, choose
            route.p_best = float(p[names.index(choose)])
            c_single, c_choose = cost.get(single) if single else None, cost.get(choose)
            if c_single is not None and c_choose is not None:
                route.saving = w * (c_single - c_choose)
        routes.append(route)
    return routes
