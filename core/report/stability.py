"""How stable a model is on one case when asked the same thing repeatedly
(`lineup run --repeat N`): pure functions over the answer texts and their
check outcomes, cheap enough to compute for every case at report time.

- exact-match rate: the share of answer *pairs* that are identical after
  normalisation (case, Unicode form and whitespace ignored); 1.0 = deterministic.
- modal share: the share of runs that gave the most common answer.
- mean pairwise similarity: token-set Jaccard of each pair of answers, averaged
  (order-insensitive and linear in the text length, unlike an edit distance).
- check pass-rate variance: per check, the pass rate p over the runs and its
  Bernoulli variance p(1-p) (0 = always the same verdict, 0.25 = a coin flip),
  plus the variance of the numeric scores.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from statistics import fmean, pvariance

from pydantic import BaseModel, ConfigDict, Field

from core.answering.checks import CheckOutcome

_TOKEN = re.compile(r"\w+")


def normalise(text: str) -> str:
    """Text compared for exact match: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def tokens(text: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(normalise(text)))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets are identical (1.0)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def similarity(a: str, b: str) -> float:
    """Token-set Jaccard similarity of two answers (0..1)."""
    return jaccard(tokens(a), tokens(b))


class CheckStability(BaseModel):
    model_config = ConfigDict(frozen=True)
    index: int = Field(description="position of the check in the case's checks")
    name: str
    runs: int
    pass_rate: float
    pass_variance: float = Field(description="p(1-p) of the pass/fail verdict")
    score_mean: float
    score_variance: float = Field(description="population variance of the scores")


class StabilityResult(BaseModel):
    """The spread of N answers to the same case from the same model."""

    model_config = ConfigDict(frozen=True)
    runs: int
    distinct_answers: int
    exact_match_rate: float | None = Field(description="share of identical pairs; None with fewer than 2 runs")
    modal_share: float | None
    mean_similarity: float | None = Field(description="mean pairwise token-set Jaccard; None with fewer than 2 runs")
    min_similarity: float | None
    checks: tuple[CheckStability, ...] = ()
    mean_pass_variance: float | None = Field(default=None, description="mean of the checks' pass variances")
    flaky_checks: int = Field(default=0, description="checks that passed in some runs and failed in others")


def exact_match_rate(answers: Sequence[str]) -> float | None:
    """Share of answer pairs identical after `normalise` (None below 2 answers)."""
    n = len(answers)
    if n < 2:
        return None
    counts = Counter(normalise(a) for a in answers)
    same = sum(c * (c - 1) // 2 for c in counts.values())
    return same / (n * (n - 1) // 2)


def pairwise_similarities(answers: Sequence[str]) -> list[float]:
    toks = [tokens(a) for a in answers]
    return [jaccard(a, b) for a, b in itertools.combinations(toks, 2)]


def check_stability(outcomes_per_run: Sequence[Sequence[CheckOutcome]]) -> list[CheckStability]:
    """Per check position: pass rate and variances over the runs that have it."""
    width = max((len(o) for o in outcomes_per_run), default=0)
    out = []
    for i in range(width):
        column = [run[i] for run in outcomes_per_run if i < len(run)]
        p = fmean(1.0 if o.passed else 0.0 for o in column)
        scores = [o.score for o in column]
        out.append(CheckStability(
            index=i, name=column[0].name, runs=len(column), pass_rate=p, pass_variance=p * (1 - p),
            score_mean=fmean(scores), score_variance=pvariance(scores),
        ))
    return out


def stability(answers: Sequence[str], outcomes_per_run: Sequence[Sequence[CheckOutcome]] = ()) -> StabilityResult:
    """The spread of repeated answers to one case (`outcomes_per_run[k]` are the
    check outcomes of `answers[k]`, in the case's check order)."""
    n = len(answers)
    normed = Counter(normalise(a) for a in answers)
    sims = pairwise_similarities(answers)
    checks = check_stability(outcomes_per_run)
    return StabilityResult(
        runs=n,
        distinct_answers=len(normed),
        exact_match_rate=exact_match_rate(answers),
        modal_share=(max(normed.values()) / n) if n >= 2 else None,
        mean_similarity=fmean(sims) if sims else None,
        min_similarity=min(sims) if sims else None,
        checks=tuple(checks),
        mean_pass_variance=fmean(c.pass_variance for c in checks) if checks else None,
        flaky_checks=sum(1 for c in checks if 0.0 < c.pass_rate < 1.0),
    )
