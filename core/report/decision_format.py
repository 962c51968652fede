"""How the decision and the other sections of issue 13 (model against
model, style control, public and online scores) are said, the same in every
rendering: the sentences, the figures, the rows of their tables.

Why a module of its own: the terminal, Markdown, HTML and TUI renderings
each escape text their own way (`core.ground.text`), but say the same thing; these
functions return plain strings (recorded names inside them stay untrusted:
each renderer escapes the whole string)."""

from __future__ import annotations

import math

from core.decide.model import Decision, DecisionModel
from core.report.format import fmt, pct
from core.report.matchups import MatchupCell, Matchups
from core.stats.style import StyleControl


def money(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "$0"
    return f"${x:,.2f}" if abs(x) >= 1 else f"${x:,.4f}"


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f} ms"


def share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def p_best(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def interval(lo: float | None, hi: float | None, digits: int = 0) -> str:
    if lo is None or hi is None:
        return "-"
    return f"{lo:.{digits}f} .. {hi:.{digits}f}"


def headline(d: Decision) -> str:
    """The decision in one sentence (said to be among demo models when it is)."""
    return ("DEMO models only (synthetic answers): " if d.demo else "") + _headline(d)


def _headline(d: Decision) -> str:
    if d.recommendation is None:
        return d.message or "No recommendation."
    conf = f"{100 * d.confidence:.0f}%"
    if d.recommendation == d.best:
        others = [n for n in d.tied_with_best if n != d.best]
        text = f"Recommendation: {d.recommendation}, the best for this mix (P(best) {p_best(_p(d, d.best))})"
        if others:
            text += f"; not told apart at {conf} from {', '.join(others)}, none of them cheaper"
        return text + "."
    text = (f"Recommendation: {d.recommendation}, the cheapest model that cannot be told apart at {conf} from the "
            f"best, {d.best} (P(best) {p_best(_p(d, d.best))})")
    if d.saving_vs_best is not None:
        text += f"; it saves {money(d.saving_vs_best)} per 1,000 answers"
        if d.saving_vs_best_share is not None:
            text += f" ({share(d.saving_vs_best_share)} of the best's cost)"
    return text + "."


def _p(d: Decision, name: str | None) -> float | None:
    return next((m.p_best for m in d.models if m.name == name), None)


def mix_line(d: Decision) -> str:
    parts = ", ".join(f"{c} {share(w)}" for c, w in d.mix.items())
    return f"Traffic mix ({d.mix_source}): {parts or 'none'}."


def limits_line(d: Decision) -> str:
    lim = d.limits
    parts = []
    if lim.max_p95_ttft_ms is not None:
        parts.append(f"p95 TTFT ≤ {ms(lim.max_p95_ttft_ms)}")
    if lim.max_p95_duration_ms is not None:
        parts.append(f"p95 duration ≤ {ms(lim.max_p95_duration_ms)}")
    if lim.max_cost_per_1k is not None:
        parts.append(f"cost ≤ {money(lim.max_cost_per_1k)} per 1,000 answers")
    if lim.min_pass_rate is not None:
        parts.append(f"check pass rate ≥ {pct(lim.min_pass_rate)}")
    return "Limits: " + ("; ".join(parts) if parts else "none") + "."


def method_line(d: Decision) -> str:
    style = " style-adjusted" if d.style_control else ""
    return (f"P(best): share of {d.rounds:,} bootstrap rounds (seed {d.seed}) in which the model has the highest "
            f"mix score (share-weighted{style} ratings of the categories) among the feasible models.")


MODEL_HEADER = ("model", "P(best)", "mix score", "interval", "p95 TTFT", "p95 duration", "cost / 1k", "pass rate",
                "feasible")


def model_row(m: DecisionModel) -> list[str]:
    cost = money(m.cost_per_1k) + (" (est.)" if m.cost_estimated and m.cost_per_1k is not None else "")
    feasible = "yes" if m.feasible else "no: " + (m.why_infeasible or "")
    if m.missing_categories:
        feasible += "; not scored: too few votes in " + ", ".join(m.missing_categories)
    return [m.name, p_best(m.p_best), fmt(m.rating), interval(m.ci_low, m.ci_high), ms(m.p95_ttft_ms),
            ms(m.p95_duration_ms), cost, pct(m.pass_rate), feasible]


ROUTE_HEADER = ("category", "share", "votes", "route to", "P(best) there", "best there", "saving / 1k")


def route_rows(d: Decision) -> list[list[str]]:
    return [[r.category, share(r.share), str(r.votes), r.choose or "-", p_best(r.p_best), r.best or "-",
             money(r.saving)] for r in d.routing]


def routing_line(d: Decision) -> str:
    if d.routing_saving is None or d.recommendation is None:
        return "Routing: no saving to compute (a cost was not recorded, or there is no recommendation)."
    return (f"Routing each category as above costs {money(d.routing_cost_per_1k)} per 1,000 answers against "
            f"{money(d.single_cost_per_1k)} for {d.recommendation} alone: a saving of {money(d.routing_saving)}.")


def frontier_line(d: Decision) -> str:
    cost = " → ".join(d.pareto_cost) or "-"
    lat = " → ".join(d.pareto_latency) or "-"
    return f"Pareto frontier, quality against cost: {cost}; against p95 duration: {lat}."


def matchup_text(c: MatchupCell | None) -> str:
    """One cell of the model-against-model matrix: W-T-L and the predicted win probability."""
    if c is None:
        return ""
    met = f"{c.wins}-{c.ties}-{c.losses}" if c.wins + c.ties + c.losses else "-"
    pred = "" if c.predicted is None else f" {100 * c.predicted:.0f}%"
    return met + pred


def matchup_grid(mu: Matchups) -> list[list[MatchupCell | None]]:
    cells = {(c.model, c.opponent): c for c in mu.cells}
    return [[cells.get((a, b)) for b in mu.models] for a in mu.models]


MATCHUP_LEGEND = ("Row against column: wins-ties-losses of the row model, then the win probability the ratings "
                  "predict (a tie counting half).")


def axis_range(values: list[float]) -> tuple[float, float]:
    """A padded range for a chart's axis of costs or latencies (not from 0:
    what matters is how the models differ). Values that differ only by
    rounding (sums of the same costs in another order) count as equal: a
    range of a few ulps would make tick steps too small to advance."""
    lo, hi = min(values), max(values)
    scale = max(abs(lo), abs(hi), 1e-9)
    pad = (hi - lo) * 0.1 if hi - lo > 1e-6 * scale else max(abs(hi) * 0.05, 1e-9)
    return max(0.0, lo - pad), hi + pad


def ticks(lo: float, hi: float, step: float, most: int = 50) -> list[float]:
    """The multiples of `step` from `lo` to `hi` (at most `most` of them)."""
    first = math.ceil(lo / step) * step
    count = int(math.floor((hi - first) / step + 1e-9)) + 1 if hi >= first else 0
    return [first + k * step for k in range(max(0, min(count, most)))]


def style_recipe(sc: StyleControl) -> str:
    """The recipe line every rendering prints above the style coefficients."""
    return f"Recipe: {sc.recipe} ({sc.recipe_text}); length counted in {sc.length_unit}."


def style_about(sc: StyleControl) -> str:
    scaled = ("standardised (mean 0, standard deviation 1)" if sc.recipe == "lmarena"
              else "scaled to a root mean square of 1")
    return ("Bradley-Terry with style covariates (normalised differences of length, headers, list items and bold "
            f"spans, {scaled}), as Chatbot Arena's style control. A coefficient is the change in log-odds of "
            f"winning per {style_unit(sc)} of the difference.")


def style_unit(sc: StyleControl) -> str:
    return "standard deviation" if sc.recipe == "lmarena" else "root mean square"
