"""Prediction-powered Bradley-Terry (`core.stats.ppi`) on simulated people and
judges: its 95% intervals cover the true ratings in about 95% of seeded
repetitions whatever the judge's quality, are narrower than people's
intervals alone when the judge agrees with people 80% of the time, and do
not widen much with a judge no better than a coin."""

from __future__ import annotations

import numpy as np
import pytest

from core.stats import ratings as R
from core.stats.ppi import Items, wald_ratings

TRUE = np.array([1120.0, 1060.0, 1000.0, 820.0])
TRUE_CENTRED = TRUE - TRUE.mean() + 1000.0
M = TRUE.size


def simulate(rng: np.random.Generator, n_people: int, n_judge_only: int, agree: float
             ) -> tuple[Items, np.ndarray, Items]:
    """People's outcomes drawn from the true Bradley-Terry ratings on random
    pairs; the judge gives people's outcome with probability `agree`, else the
    opposite one."""
    def draw(k: int):
        a = rng.integers(0, M, k)
        b = (a + rng.integers(1, M, k)) % M
        p = 1.0 / (1.0 + 10.0 ** ((TRUE[b] - TRUE[a]) / 400.0))
        y = (rng.random(k) < p).astype(float)
        f = np.where(rng.random(k) < agree, y, 1.0 - y)
        return a, b, y, f

    a, b, y, f = draw(n_people)
    ua, ub, _, uf = draw(n_judge_only)
    return Items.of(a, b, y), f, Items.of(ua, ub, uf)


def _coverage(agree: float, reps: int = 200) -> tuple[float, float, float]:
    """(coverage of the PPI intervals, their mean width, people-only Wald mean width)."""
    covered, width, human = [], [], []
    for rep in range(reps):
        labeled, f, unlabeled = simulate(np.random.default_rng(rep), 300, 3000, agree)
        fit = wald_ratings(M, labeled, f, unlabeled)
        lo, hi = fit.interval()
        covered.append(np.mean((lo <= TRUE_CENTRED) & (TRUE_CENTRED <= hi)))
        width.append(np.mean(hi - lo))
        hlo, hhi = wald_ratings(M, labeled).interval()
        human.append(np.mean(hhi - hlo))
    return float(np.mean(covered)), float(np.mean(width)), float(np.mean(human))


@pytest.mark.slow
def test_ppi_covers_the_true_ratings_and_is_narrower_when_the_judge_agrees_80_percent():
    coverage, width, human_wald = _coverage(0.8)
    # people's own intervals as the report draws them: bootstrap percentiles (20 repetitions)
    boot = []
    for rep in range(20):
        labeled, _, _ = simulate(np.random.default_rng(rep), 300, 3000, 0.8)
        bs = R.BattleSet.from_arrays([str(x) for x in labeled.a], [str(x) for x in labeled.b], labeled.score)
        boot.append(np.mean([m.ci_high - m.ci_low for m in R.rate(bs, rounds=300, seed=0).models]))
    print(f"PPI, judge agreeing 80%: coverage {coverage:.3f} over 200 seeded repetitions x 4 models; mean width "
          f"{width:.0f} Elo vs people only {human_wald:.0f} (Wald) / {np.mean(boot):.0f} (bootstrap)")
    assert 0.92 <= coverage <= 0.98
    assert width < 0.9 * human_wald and width < 0.9 * float(np.mean(boot))


@pytest.mark.slow
def test_ppi_stays_valid_with_a_useless_judge():
    coverage, width, human_wald = _coverage(0.5, reps=150)
    print(f"PPI, judge agreeing 50% (a coin): coverage {coverage:.3f}; width {width:.0f} vs people only {human_wald:.0f}")
    assert 0.92 <= coverage <= 0.98
    assert width < 1.05 * human_wald       # lambda goes to ~0: people's votes alone


def test_people_only_wald_matches_the_bootstrap_and_lambda_is_reported():
    labeled, f, unlabeled = simulate(np.random.default_rng(5), 2000, 0, 1.0)
    fit = wald_ratings(M, labeled)
    bs = R.BattleSet.from_arrays([str(x) for x in labeled.a], [str(x) for x in labeled.b], labeled.score)
    boot = {m.name: m for m in R.rate(bs, rounds=500, seed=0).models}
    for i in range(M):
        m = boot[str(i)]
        assert abs(fit.rating[i] - m.rating) < 1.0                     # the same fit (the same prior)
        assert abs((m.ci_high - m.ci_low) / (2 * 1.96 * fit.se[i]) - 1) < 0.15
    assert fit.lam == 0.0 and fit.n_judged == 0
    perfect = wald_ratings(M, labeled, labeled.score.copy(), simulate(np.random.default_rng(6), 10, 5000, 1.0)[2])
    assert perfect.lam == 1.0 and perfect.se.mean() < fit.se.mean()
