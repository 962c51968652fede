"""How well an LLM judge agrees with people, on the pairs both judged:
raw agreement, Cohen's kappa with a bootstrap interval, the confusion table.

Why a module of its own: these are plain statistics of two raters' labels
(pure numpy, checked against simulated judges of known agreement in
`tests/test_calibration.py`); the report (`core.report.judge`) decides which
votes go in, `core.stats.votes` what each says about a pair.

A verdict on a pair of models is one of three categories, read from the
score of the pair's first model (in name order, `core.stats.votes.pair_of`): it
won (1), a tie or both bad (0.5), it lost (0). Kappa is Cohen's (1960):
(observed agreement - chance agreement) / (1 - chance agreement), chance
from each rater's own marginals; its interval is the seeded percentile
bootstrap over the overlapping comparisons.
"""

from __future__ import annotations

import numpy as np

from core.stats.quantiles import percentile

#: The categories of a verdict on a pair, by the score of its first model.
CATEGORIES = ("first better", "tie", "second better")
_CODE = {1.0: 0, 0.5: 1, 0.0: 2}


def category(score: float) -> int:
    """0, 1 or 2 (`CATEGORIES`) for a pair score of 1, 0.5 or 0."""
    return _CODE[float(score)]


def confusion(x: np.ndarray, y: np.ndarray, k: int = len(CATEGORIES)) -> np.ndarray:
    """k x k counts: row = x's category, column = y's."""
    return np.bincount(np.asarray(x) * k + np.asarray(y), minlength=k * k).reshape(k, k)


def cohen_kappa(x: np.ndarray, y: np.ndarray, k: int = len(CATEGORIES)) -> float | None:
    """Cohen's kappa of two raters' categories on the same items; None when
    chance agreement is certain (both always say the same one thing)."""
    n = int(np.asarray(x).size)
    if n == 0:
        return None
    table = confusion(x, y, k) / n
    observed = float(np.trace(table))
    chance = float(table.sum(axis=1) @ table.sum(axis=0))
    if chance >= 1.0 - 1e-12:
        return None
    return (observed - chance) / (1.0 - chance)


def kappa_interval(x: np.ndarray, y: np.ndarray, *, rounds: int = 1000, seed: int | None = 0,
                   level: float = 0.95, k: int = len(CATEGORIES)) -> tuple[float, float] | None:
    """The percentile bootstrap interval of kappa (items resampled with
    replacement, seeded); None without rounds or when no round has a kappa."""
    x, y = np.asarray(x), np.asarray(y)
    n = x.size
    if rounds <= 0 or n == 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(rounds, n))
    codes = x[idx] * k + y[idx] + (np.arange(rounds) * k * k)[:, None]     # (rounds, n), a block per round
    counts = np.bincount(codes.ravel(), minlength=rounds * k * k).reshape(rounds, k, k) / n
    observed = np.trace(counts, axis1=1, axis2=2)
    chance = np.einsum("ri,ri->r", counts.sum(axis=2), counts.sum(axis=1))
    ok = chance < 1.0 - 1e-12
    if not ok.any():
        return None
    kappas = (observed[ok] - chance[ok]) / (1.0 - chance[ok])
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = percentile(kappas, [tail, 100.0 - tail])
    return float(lo), float(hi)
