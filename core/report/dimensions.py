"""Scored dimensions in the report (issue 29 item 4): per model and dimension,
people's and judges' 1-5 scores apart, the mean with a bootstrap 95%
interval, the spread across repeats, and the agreement between raters on the
same answers (Krippendorff's alpha, interval metric).

Why a module of its own: scores are neither votes nor checks (a rater scores
one answer on a declared dimension, `core.answering.dimensions`), and every
renderer shows the same two tables; this is those tables. The interval
resamples answers (an answer scored by several raters is one unit), seeded.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from typing import Any

from pydantic import BaseModel, Field

from core.report.agreement import agreement
from store import report_queries as Q
from store.db import Store


class DimensionScore(BaseModel):
    """One model's scores on one dimension by one kind of rater."""

    model: str
    dimension: str
    rater_kind: str = Field(description="human (people in the vote queue) or judge (rubric graders)")
    scores: int = Field(description="current scores (a rater's latest on an answer)")
    answers: int = Field(description="answers scored")
    mean: float
    ci_low: float | None = Field(default=None, description="bootstrap 95% interval over answers")
    ci_high: float | None = None
    repeat_sd: float | None = Field(default=None, description="sd of the per-repeat means, with 2+ repeats")
    repeats: int = 0


class DimensionAgreement(BaseModel):
    """Krippendorff's alpha (interval) between raters of one kind on one dimension."""

    dimension: str
    rater_kind: str
    raters: int = 0
    units: int = Field(default=0, description="answers scored by at least two raters")
    alpha: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class DimensionReport(BaseModel):
    scores: list[DimensionScore] = Field(default_factory=list)
    agreement: list[DimensionAgreement] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.scores


def _interval(per_answer: list[float], rounds: int, seed: int | None) -> tuple[float | None, float | None]:
    if len(per_answer) < 2 or rounds <= 0:
        return None, None
    rng = random.Random(seed)
    n = len(per_answer)
    draws = sorted(sum(per_answer[rng.randrange(n)] for _ in range(n)) / n for _ in range(rounds))
    return draws[int(0.025 * (rounds - 1))], draws[int(round(0.975 * (rounds - 1)))]


def dimension_figures(rows: list[tuple[Any, ...]], rounds: int = 1000, seed: int | None = 0) -> DimensionReport:
    """The tables from `store.report_queries.score_rows`."""
    rounds = min(rounds, 1000)
    groups: dict[tuple[str, str, str], list[tuple[str, float, int]]] = defaultdict(list)
    units: dict[tuple[str, str], list[tuple[str, str, float]]] = defaultdict(list)
    for output_id, model, dimension, value, rater, kind, repeat in rows:
        groups[(model, dimension, kind)].append((output_id, float(value), int(repeat or 0)))
        units[(dimension, kind)].append((output_id, rater, float(value)))
    out = DimensionReport()
    for (model, dimension, kind), items in sorted(groups.items()):
        by_answer: dict[str, list[float]] = defaultdict(list)
        by_repeat: dict[int, list[float]] = defaultdict(list)
        for output_id, value, repeat in items:
            by_answer[output_id].append(value)
            by_repeat[repeat].append(value)
        per_answer = [sum(v) / len(v) for v in by_answer.values()]
        lo, hi = _interval(per_answer, rounds, seed)
        repeat_means = [sum(v) / len(v) for v in by_repeat.values()]
        out.scores.append(DimensionScore(
            model=model, dimension=dimension, rater_kind=kind, scores=len(items), answers=len(by_answer),
            mean=sum(v for _, v, _ in items) / len(items), ci_low=lo, ci_high=hi, repeats=len(by_repeat),
            repeat_sd=statistics.stdev(repeat_means) if len(repeat_means) >= 2 else None))
    for (dimension, kind), scored in sorted(units.items()):
        agreed = agreement(scored, rounds=rounds, seed=seed, metric="interval")
        out.agreement.append(DimensionAgreement(dimension=dimension, rater_kind=kind, raters=len(agreed.raters),
                                                units=agreed.units, alpha=agreed.alpha, ci_low=agreed.ci_low,
                                                ci_high=agreed.ci_high))
    return out


def dimension_report(store: Store, scope: Q.Scope, rounds: int = 1000, seed: int | None = 0) -> DimensionReport:
    return dimension_figures(Q.score_rows(store, scope), rounds, seed)


SCORE_HEADER = ["model", "dimension", "rater", "mean (95% CI)", "scores", "answers", "sd over repeats"]
AGREEMENT_HEADER = ["dimension", "rater", "raters", "answers", "alpha (95% CI)"]


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def score_cells(r: DimensionReport) -> list[list[str]]:
    """The scores table's cells as plain strings (each renderer escapes them)."""
    rows = []
    for s in r.scores:
        ci = f" ({_num(s.ci_low)}-{_num(s.ci_high)})" if s.ci_low is not None else ""
        spread = f"{_num(s.repeat_sd)} ({s.repeats} repeats)" if s.repeat_sd is not None else "-"
        rows.append([s.model, s.dimension, "people" if s.rater_kind == "human" else "judges",
                     f"{s.mean:.2f}{ci}", str(s.scores), str(s.answers), spread])
    return rows


def agreement_cells(r: DimensionReport) -> list[list[str]]:
    rows = []
    for a in r.agreement:
        ci = f" ({_num(a.ci_low)}-{_num(a.ci_high)})" if a.ci_low is not None else ""
        rows.append([a.dimension, "people" if a.rater_kind == "human" else "judges", str(a.raters), str(a.units),
                     f"{_num(a.alpha)}{ci}" if a.alpha is not None else "- (fewer than two raters on an answer)"])
    return rows
