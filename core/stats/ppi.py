"""Bradley-Terry ratings with sandwich (Wald) intervals, from people's votes
alone or combined with an LLM judge's by prediction-powered inference.

Why a module of its own: combining a judge's verdicts with people's votes
must give an interval that stays valid whatever the judge's quality, which
is a statistical argument of its own (pure numpy, checkable without a
database): `tests/test_ppi.py` measures the coverage on simulated judges.

Prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan, Zrnic,
"Prediction-powered inference", Science 2023) with power tuning (PPI++,
Angelopoulos, Duchi, Zrnic 2023). An item is one pair of models on one case.
The judge gave its verdict `f` on all N judged items; on n of them a person
also voted, `y`. The Bradley-Terry fit minimises

    L(theta) = lam/N * sum_all l(theta; f) + 1/n * sum_both [l(theta; y) - lam * l(theta; f)]

(l the logistic loss of one comparison, ties count half, as in
`core.stats.ratings`). Its expectation is the loss of people's votes whatever the
judge says, so the estimate targets the ratings people's votes would give;
the judge only changes the variance: the correction term's variance is
small when the judge agrees with people, and lam (chosen on a grid in [0, 1]
to minimise the estimated variance; lam = 0 is people's votes alone) keeps a
poor judge from widening the interval. Because l is linear in the outcome,
the loss is a Bradley-Terry loss with per-pair weights and scores, fitted by
`core.stats.ratings.fit_pairs`; the covariance is the sandwich H^-1 V H^-1, V
summing the gradients' covariance within each group of items (both votes;
judge only). Intervals are Wald intervals on the Elo scale, mean 1000.

Assumption, said in the report: the items people voted on are a random
sample of the judged items (an adaptive queue that chooses items by what was
voted before makes that only approximately true).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.stats.ratings import ALPHA, DEFAULT_PRIOR_SD, INIT_RATING, SCALE, PairData, fit_pairs

#: The grid of lam (weight of the judge) searched for the smallest variance.
LAMBDA_GRID = tuple(np.round(np.linspace(0.0, 1.0, 21), 2).tolist())


def z_value(level: float) -> float:
    """The two-sided normal quantile for `level` (0.95 -> 1.96)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2.0)


@dataclass(frozen=True)
class Items:
    """Comparisons as arrays over model indices: `a`, `b` the two models,
    `score` the outcome for `a` (1 win, 0.5 tie, 0 loss)."""

    a: np.ndarray
    b: np.ndarray
    score: np.ndarray

    @classmethod
    def of(cls, a: Sequence[int], b: Sequence[int], score: Sequence[float]) -> "Items":
        return cls(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64), np.asarray(score, dtype=np.float64))

    @property
    def size(self) -> int:
        return int(self.a.size)


@dataclass(frozen=True)
class WaldRatings:
    """Ratings on the Elo scale (mean 1000), their standard errors and the
    covariance of the ratings (Elo points squared); `lam` the judge's weight
    (0: people's votes alone)."""

    rating: np.ndarray
    se: np.ndarray
    cov: np.ndarray
    lam: float
    n_labeled: int
    n_judged: int

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        z = z_value(level)
        return self.rating - z * self.se, self.rating + z * self.se

    def diff_se(self, i: int, j: int) -> float:
        """Standard error of rating[i] - rating[j] (their covariance counts)."""
        v = self.cov[i, i] + self.cov[j, j] - 2.0 * self.cov[i, j]
        return math.sqrt(max(v, 0.0))


def _groups(n_models: int, labeled: Items, f_labeled: np.ndarray | None, unlabeled: Items | None, lam: float
            ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per group of items: (a, b, c, d) with the item's gradient
    alpha * (c * sigmoid(x) - d) * (e_a - e_b): c its weight, d its weighted score."""
    n = labeled.size
    groups = []
    n_all = n + (unlabeled.size if unlabeled is not None else 0)
    if f_labeled is None:       # people's votes alone
        c = np.full(n, 1.0 / n)
        groups.append((labeled.a, labeled.b, c, labeled.score / n))
        return groups
    c = np.full(n, lam / n_all + (1.0 - lam) / n)
    d = lam * f_labeled / n_all + labeled.score / n - lam * f_labeled / n
    groups.append((labeled.a, labeled.b, c, d))
    if unlabeled is not None and unlabeled.size:
        groups.append((unlabeled.a, unlabeled.b, np.full(unlabeled.size, lam / n_all), lam * unlabeled.score / n_all))
    return groups


def _fit(n_models: int, groups, lam_prior: float) -> np.ndarray:
    a = np.concatenate([g[0] for g in groups])
    b = np.concatenate([g[1] for g in groups])
    c = np.concatenate([g[2] for g in groups])
    d = np.concatenate([g[3] for g in groups])
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    d_lo = np.where(a < b, d, c - d)          # the score of the lower index
    key = lo * n_models + hi
    n_all = np.bincount(key, weights=c, minlength=n_models * n_models)
    s_all = np.bincount(key, weights=d_lo, minlength=n_models * n_models)
    seen = np.flatnonzero(np.bincount(key, minlength=n_models * n_models))
    pd = PairData(seen // n_models, seen % n_models, n_all[seen][None, :], s_all[seen][None, :])
    return fit_pairs(pd, n_models, lam=lam_prior)[0]


def _covariance(n_models: int, groups, theta: np.ndarray, lam_prior: float) -> np.ndarray:
    """The sandwich covariance of theta (natural units)."""
    hess = lam_prior * np.eye(n_models)
    meat = np.zeros((n_models, n_models))
    for a, b, c, d in groups:
        if not a.size:
            continue
        x = ALPHA * (theta[a] - theta[b])
        p = 1.0 / (1.0 + np.exp(-x))
        w = ALPHA * ALPHA * c * p * (1.0 - p)
        e = np.zeros((a.size, n_models))
        e[np.arange(a.size), a] = 1.0
        e[np.arange(a.size), b] = -1.0
        hess += (e * w[:, None]).T @ e
        g = (ALPHA * (c * p - d))[:, None] * e           # per-item gradients
        centred = g - g.mean(axis=0, keepdims=True)
        meat += a.size * (centred.T @ centred) / max(a.size - 1, 1)
    h_inv = np.linalg.inv(hess)
    return h_inv @ meat @ h_inv


def _anchor_matrix(n_models: int) -> np.ndarray:
    """Ratings relative to their mean (the report's mean 1000)."""
    return np.eye(n_models) - np.full((n_models, n_models), 1.0 / n_models)


def wald_ratings(n_models: int, labeled: Items, f_labeled: np.ndarray | None = None,
                 unlabeled: Items | None = None, *, lam: float | None = None,
                 prior_sd: float = DEFAULT_PRIOR_SD) -> WaldRatings:
    """Bradley-Terry ratings with sandwich intervals. `labeled`: people's
    comparisons; with `f_labeled` (the judge's outcome on each of them) and
    `unlabeled` (the judge's comparisons no person voted on), prediction-powered:
    `lam` fixed, or None to pick the one with the smallest variance on
    `LAMBDA_GRID`. Without them, people's votes alone. All models must be
    connected through the comparisons for the ratings to mean anything."""
    if labeled.size < 2:
        raise ValueError("prediction-powered ratings need at least two people's comparisons")
    n_judged = labeled.size + (unlabeled.size if unlabeled is not None else 0)
    lam_prior = (SCALE / prior_sd) ** 2 / labeled.size    # the report's prior, per comparison of a mean loss
    anchor = _anchor_matrix(n_models)
    grid: Sequence[float] = (0.0,) if f_labeled is None else ((lam,) if lam is not None else LAMBDA_GRID)
    best: WaldRatings | None = None
    for value in grid:
        groups = _groups(n_models, labeled, f_labeled, unlabeled, float(value))
        theta = _fit(n_models, groups, lam_prior)
        cov = anchor @ _covariance(n_models, groups, theta, lam_prior) @ anchor.T * SCALE * SCALE
        rating = (anchor @ theta) * SCALE + INIT_RATING
        found = WaldRatings(rating, np.sqrt(np.clip(np.diag(cov), 0.0, None)), cov, float(value),
                            labeled.size, n_judged if f_labeled is not None else 0)
        if best is None or float(np.trace(cov)) < float(np.trace(best.cov)) - 1e-12:
            best = found
    assert best is not None
    return best
