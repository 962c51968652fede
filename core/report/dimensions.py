"""Scored dimensions in the report (issue 29 item 4): per model and dimension,
people's and judges' 1-5 scores apart, the mean with a bootstrap 95%
interval, the spread across repeats, and the agreement between raters on the
same answers (Krippendorff's alpha, interval metric); and each judge set
beside people on the answers both scored (issue 29 item 5): agreement within
one point with a Wilson interval, exact agreement, alpha, the judge's mean
lean, the confusion table, and a flag below the team's threshold.

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

from core.report.agreement import agreement, krippendorff_alpha
from core.report.judge import DEFAULT_MIN_AGREEMENT
from core.stats.ratings import wilson_interval
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


#: Fewer answers scored by both a judge and people, and no agreement is given.
MIN_SHARED_ANSWERS = 10
SCALE = ("1", "2", "3", "4", "5")


class JudgeBesidePeople(BaseModel):
    """One judge's scores on one dimension against people's on the same
    answers. People's value of an answer is their median (a half rounds up);
    the flag reads agreement within one point, the usual figure for a 1-5
    scale, since exact agreement on five points is rare even between people."""

    dimension: str
    judge: str
    answers: int = Field(default=0, description="answers scored by the judge and by at least one person")
    within_one: float | None = Field(default=None, description="share of answers where the judge is within 1 point")
    ci_low: float | None = Field(default=None, description="Wilson 95% interval of within_one")
    ci_high: float | None = None
    exact: float | None = Field(default=None, description="share of answers where the judge gives people's value")
    alpha: float | None = Field(default=None, description="Krippendorff's alpha (interval), judge and people")
    lean: float | None = Field(default=None, description="mean of judge minus people: + kinder than people")
    categories: list[str] = Field(default_factory=lambda: list(SCALE))
    confusion: list[list[int]] = Field(default_factory=list, description="rows: people, columns: the judge")
    min_agreement: float | None = None
    unreliable: bool = False
    message: str | None = None


class DimensionReport(BaseModel):
    scores: list[DimensionScore] = Field(default_factory=list)
    agreement: list[DimensionAgreement] = Field(default_factory=list)
    judges: list[JudgeBesidePeople] = Field(default_factory=list, description="each judge beside people")

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


def _judge_beside_people(dimension: str, judge: str, judged: dict[str, float], people: dict[str, list[float]],
                         min_agreement: float) -> JudgeBesidePeople:
    row = JudgeBesidePeople(dimension=dimension, judge=judge, min_agreement=min_agreement)
    pairs = [(int(statistics.median(people[o]) + 0.5), judged[o]) for o in judged if o in people]
    row.answers = len(pairs)
    if row.answers < MIN_SHARED_ANSWERS:
        row.message = f"only {row.answers} answers scored by it and by people ({MIN_SHARED_ANSWERS} needed)"
        return row
    near = sum(abs(j - p) <= 1 for p, j in pairs)
    row.within_one = near / row.answers
    row.ci_low, row.ci_high = wilson_interval(near, row.answers)
    row.exact = sum(j == p for p, j in pairs) / row.answers
    row.alpha = krippendorff_alpha([[p, j] for p, j in pairs], "interval")
    row.lean = sum(j - p for p, j in pairs) / row.answers
    row.confusion = [[sum(1 for p, j in pairs if p == a and round(j) == b) for b in range(1, 6)] for a in range(1, 6)]
    row.unreliable = row.within_one < min_agreement
    return row


def dimension_figures(rows: list[tuple[Any, ...]], rounds: int = 1000, seed: int | None = 0,
                      min_agreement: float = DEFAULT_MIN_AGREEMENT) -> DimensionReport:
    """The tables from `store.report_queries.score_rows`."""
    rounds = min(rounds, 1000)
    groups: dict[tuple[str, str, str], list[tuple[str, float, int]]] = defaultdict(list)
    units: dict[tuple[str, str], list[tuple[str, str, float]]] = defaultdict(list)
    people: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    judged: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for output_id, model, dimension, value, rater, kind, repeat in rows:
        groups[(model, dimension, kind)].append((output_id, float(value), int(repeat or 0)))
        units[(dimension, kind)].append((output_id, rater, float(value)))
        if kind == "human":
            people[dimension][output_id].append(float(value))
        else:
            judged[(dimension, rater)][output_id] = float(value)
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
    for (dimension, judge), judge_scores in sorted(judged.items()):
        if people.get(dimension):
            out.judges.append(_judge_beside_people(dimension, judge, judge_scores, people[dimension], min_agreement))
    return out


def dimension_report(store: Store, scope: Q.Scope, rounds: int = 1000, seed: int | None = 0,
                     min_agreement: float = DEFAULT_MIN_AGREEMENT) -> DimensionReport:
    return dimension_figures(Q.score_rows(store, scope), rounds, seed, min_agreement)


SCORE_HEADER = ["model", "dimension", "rater", "mean (95% CI)", "scores", "answers", "sd over repeats"]
AGREEMENT_HEADER = ["dimension", "rater", "raters", "answers", "alpha (95% CI)"]
JUDGES_NOTE = ("Judges beside people on the answers both scored: people's value is their median (a half rounds up); "
               "a judge is flagged below the threshold (--min-judge-agreement) of agreement within one point.")
JUDGE_HEADER = ["dimension", "judge", "answers", "within 1 point (95% CI)", "exact", "alpha", "judge - people",
                "flag"]


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


def judge_cells(r: DimensionReport) -> list[list[str]]:
    """Each judge beside people; the flag says why a row has no figures."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"

    rows = []
    for j in r.judges:
        ci = f" ({pct(j.ci_low)}-{pct(j.ci_high)})" if j.ci_low is not None else ""
        flag = (f"UNRELIABLE: below {pct(j.min_agreement)}" if j.unreliable else "") + (j.message or "")
        rows.append([j.dimension, j.judge, str(j.answers), f"{pct(j.within_one)}{ci}", pct(j.exact), _num(j.alpha),
                     "-" if j.lean is None else f"{j.lean:+.2f}", flag])
    return rows


def confusion_tables(r: DimensionReport) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) per judge with figures: people's value by row, the judge's by column."""
    return [(f"{j.dimension} ({j.judge}): rows people, columns the judge", ["people", *j.categories],
             [[c, *(str(k) for k in row)] for c, row in zip(j.categories, j.confusion, strict=True)])
            for j in r.judges if j.confusion]
