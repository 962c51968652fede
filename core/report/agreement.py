"""Inter-rater agreement: Krippendorff's alpha (nominal, or interval for
numeric scores such as a dimension's 1-5) over the verdicts of
several raters on the same prompt and models, with a bootstrap interval,
each rater's alpha against each other one, and a warning for a rater who
agrees with no one beyond chance.

Why a module of its own: when several people vote (`lineup share`, then
`lineup import` of their packages) the ratings are only worth what the
raters' agreement is worth; this is that figure, computed apart from the
ratings and the per-rater consistency (`figures.consistency`, plain pair
counts) so the report can say how far chance explains it.

A unit is one prompt (case id, else prompt text) shown with one set of
models; a rater's value in it is the verdict of that rater's last vote there
(`core.stats.votes.verdict`: which models won, whatever the labels); a unit counts
when at least two raters judged it. Alpha is 1 - D_o / D_e from the
coincidence matrix (Krippendorff 2011, "Computing Krippendorff's alpha-
reliability"); the interval resamples units with replacement (seeded).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

#: Units two raters must share before their pairwise alpha is figured.
MIN_SHARED_UNITS = 5


class RaterPair(BaseModel):
    raters: list[str] = Field(description="two rater names, sorted")
    units: int = Field(description="prompts and models both judged")
    alpha: float | None = None


class Agreement(BaseModel):
    """Krippendorff's alpha (nominal) between raters; None where undefined
    (fewer than two raters on any unit, or every value the same)."""

    raters: list[str] = Field(default_factory=list)
    units: int = Field(default=0, description="prompts and models judged by at least two raters")
    values: int = Field(default=0, description="verdicts in those units (one per rater and unit)")
    alpha: float | None = None
    ci_low: float | None = Field(default=None, description="bootstrap 95% interval over units")
    ci_high: float | None = None
    rounds: int = 0
    pairs: list[RaterPair] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


Unit = Sequence[str]
Metric = Literal["nominal", "interval"]


def krippendorff_alpha(units: Sequence[Unit] | Sequence[Sequence[float]], metric: Metric = "nominal") -> float | None:
    """Alpha of units, each the values the raters gave it (units with fewer
    than two values are not pairable and count for nothing). `metric`
    "interval": values are numbers and a disagreement weighs (c - k)^2."""
    if metric == "interval":
        return _interval_alpha([[float(v) for v in u] for u in units])
    o_same = 0.0                     # coincidences of a value with itself
    n_c: dict[object, float] = {}
    n = 0.0
    for values in units:
        m = len(values)
        if m < 2:
            continue
        counts: dict[object, int] = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        for value, k in counts.items():
            o_same += k * (k - 1) / (m - 1)
            n_c[value] = n_c.get(value, 0.0) + k
        n += m
    if n < 2:
        return None
    o_diff = n - o_same
    expected = n * n - sum(x * x for x in n_c.values())      # sum over c != k of n_c n_k
    if expected <= 0:
        return None
    return 1.0 - (n - 1) * o_diff / expected


def _interval_alpha(units: Sequence[Sequence[float]]) -> float | None:
    """1 - D_o / D_e with the squared difference: D_o sums, per unit, each
    ordered pair of its values over (m - 1); D_e every ordered pair of the
    pooled values, over n - 1 (Krippendorff 2011, section 3)."""
    observed = 0.0
    pooled: dict[float, int] = {}
    n = 0
    for values in units:
        m = len(values)
        if m < 2:
            continue
        observed += sum((a - b) ** 2 for a in values for b in values) / (m - 1)
        for v in values:
            pooled[v] = pooled.get(v, 0) + 1
        n += m
    if n < 2:
        return None
    expected = sum(nc * nk * (c - k) ** 2 for c, nc in pooled.items() for k, nk in pooled.items())
    if expected <= 0:
        return None
    return 1.0 - (n - 1) * observed / expected


def agreement(votes: Sequence[tuple[object, str, str]] | Sequence[tuple[object, str, float]], *,
              rounds: int = 1000, seed: int | None = 0, metric: Metric = "nominal") -> Agreement:
    """From (unit key, rater, verdict) in vote order (a rater's last verdict
    in a unit counts): alpha, its bootstrap interval, the pairwise alphas and
    the warnings."""
    by_unit: dict[object, dict[str, object]] = {}
    for unit, rater, verdict in votes:
        by_unit.setdefault(unit, {})[rater] = verdict
    raters = sorted({r for u in by_unit.values() for r in u})
    pairable = [u for u in by_unit.values() if len(u) >= 2]
    out = Agreement(raters=raters, units=len(pairable), values=sum(len(u) for u in pairable))
    if not pairable:
        return out
    units = [list(u.values()) for u in pairable]
    out.alpha = krippendorff_alpha(units, metric)      # type: ignore[arg-type]
    if out.alpha is not None and rounds > 0:
        rng = random.Random(seed)
        draws = [a for a in (krippendorff_alpha([units[rng.randrange(len(units))] for _ in units], metric)  # type: ignore[arg-type]
                             for _ in range(rounds)) if a is not None]
        if draws:
            draws.sort()
            out.ci_low = draws[int(0.025 * (len(draws) - 1))]
            out.ci_high = draws[int(round(0.975 * (len(draws) - 1)))]
            out.rounds = rounds
    for i, a in enumerate(raters):
        for b in raters[i + 1:]:
            shared = [[u[a], u[b]] for u in pairable if a in u and b in u]
            if shared:
                out.pairs.append(RaterPair(raters=[a, b], units=len(shared),
                                           alpha=krippendorff_alpha(shared, metric)  # type: ignore[arg-type]
                                           if len(shared) >= MIN_SHARED_UNITS
                                           else None))
    for r in raters:
        mine = [p for p in out.pairs if r in p.raters and p.alpha is not None]
        if len(mine) >= 2 and all(p.alpha is not None and p.alpha <= 0 for p in mine):
            out.warnings.append(
                f"rater {r} agrees with no other rater beyond chance (Krippendorff's alpha <= 0 against each of "
                f"{len(mine)} raters): check their instructions or leave their votes out (--rater)")
    return out


# --------------------------------------------------------------------------- what every renderer shows (plain text)

PAIR_HEADER = ("raters", "prompts both judged", "alpha")


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def summary_line(a: Agreement) -> str:
    """One sentence on the whole (plain text: each renderer escapes it)."""
    ci = f", 95% interval {_num(a.ci_low)} .. {_num(a.ci_high)} ({a.rounds} bootstrap rounds over prompts)" \
        if a.ci_low is not None else ""
    return (f"Krippendorff's alpha (nominal) {_num(a.alpha)}{ci}: {len(a.raters)} raters, {a.units} prompts judged "
            f"by at least two, {a.values} verdicts (1 = full agreement, 0 = what chance gives).")


def pair_rows(a: Agreement) -> list[list[str]]:
    return [[" & ".join(p.raters), str(p.units), _num(p.alpha) if p.alpha is not None
             else f"- (under {MIN_SHARED_UNITS})"] for p in a.pairs]
