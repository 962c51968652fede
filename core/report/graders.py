"""The report's rubric graders beside people (`core.answering.rubric`): where a
person's vote compares two answers that a rubric grader graded on the same
turn, the grades say which is better (a higher grade; equal grades a tie),
and that verdict is set beside the person's, as a pairwise judge's is
(`core.report.judge`): agreement with an interval, the confusion table, and
a flag below the team's threshold (`--min-judge-agreement`).

Why a module of its own: a rubric grades one answer, not a pair; this is
the one place that turns its grades into pairwise verdicts to compare with
people. A pass/fail rubric says "tie" whenever both answers pass (or both
fail), so its agreement with people, who rarely tie, is low unless the
rubric separates answers the way people do: that is what it measures.
"""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import combinations

import numpy as np
from pydantic import BaseModel, Field

from core.stats import calibration as C
from core.stats.ratings import wilson_interval
from core.stats.votes import pair_score
from store import report_queries as Q
from store.db import Store

#: Fewer comparisons, and no agreement is given.
MIN_COMPARISONS = 10


class GraderAgreement(BaseModel):
    """One rubric check, as graded by one grader, against people's votes."""

    check: str
    grader: str
    graded: int = Field(default=0, description="answers it graded in scope")
    comparisons: int = Field(default=0, description="a person's vote on a pair of answers it graded both of")
    agreed: int = 0
    rate: float | None = None
    ci_low: float | None = Field(default=None, description="Wilson 95% interval")
    ci_high: float | None = None
    categories: list[str] = Field(default_factory=lambda: list(C.CATEGORIES))
    confusion: list[list[int]] = Field(default_factory=list, description="rows: people, columns: the grades")
    min_agreement: float | None = None
    unreliable: bool = False
    message: str | None = None


def grader_agreement(store: Store, scope: Q.Scope, min_agreement: float) -> list[GraderAgreement]:
    """Each (rubric check, grader) with its agreement with people's votes."""
    grades: dict[tuple[str, str], dict[tuple[str, str], float]] = defaultdict(dict)
    for turn, model, name, spec in Q.rubric_rows(store, scope):
        try:
            d = json.loads(spec)
            score, grader = float(d["score"]), str(d["graded_by"])
        except (ValueError, KeyError, TypeError):
            continue
        grades[(str(name), grader)][(turn, model)] = score
    if not grades:
        return []
    human: list[tuple[str, tuple[str, str], float]] = []
    for (_vid, turn, _cat, _who, kind, _ph, choice, ranking, mapping, positions, _sid) in \
            Q.pair_vote_rows(store, scope, ""):
        if kind != "human":
            continue
        try:
            mapping = json.loads(mapping) if isinstance(mapping, str) else mapping
            positions = (json.loads(positions) if isinstance(positions, str) else positions) or []
            ranking = json.loads(ranking) if isinstance(ranking, str) else ranking
            if not isinstance(mapping, dict):
                continue
            for x, y in combinations(sorted(set(mapping.values())), 2):
                s = pair_score(choice, ranking, mapping, positions, (x, y))
                if s is not None:
                    human.append((turn, (x, y), s))
        except (ValueError, TypeError):
            continue
    out = []
    for (name, grader), by_answer in sorted(grades.items()):
        row = GraderAgreement(check=name, grader=grader, graded=len(by_answer), min_agreement=min_agreement)
        people, graded = [], []
        for turn, (x, y), s in human:
            gx, gy = by_answer.get((turn, x)), by_answer.get((turn, y))
            if gx is None or gy is None:
                continue
            people.append(C.category(s))
            graded.append(C.category(1.0 if gx > gy else 0.0 if gx < gy else 0.5))
        row.comparisons = len(people)
        if row.comparisons < MIN_COMPARISONS:
            row.message = (f"only {row.comparisons} of people's votes compare two answers it graded on the same "
                           f"turn ({MIN_COMPARISONS} needed)")
            out.append(row)
            continue
        x_arr, y_arr = np.array(people, dtype=np.int64), np.array(graded, dtype=np.int64)
        row.agreed = int(np.sum(x_arr == y_arr))
        row.rate = row.agreed / row.comparisons
        row.ci_low, row.ci_high = wilson_interval(row.agreed, row.comparisons)
        row.confusion = C.confusion(x_arr, y_arr).tolist()
        row.unreliable = row.rate < min_agreement
        out.append(row)
    return out
