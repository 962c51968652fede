"""The per-category bootstraps behind `lineup decide` (and the report's
breakdowns) against the straightforward path written here from scratch.

`core.stats.ratings.rate` fits all rounds of a category together (batched damped
Newton started one shared chord step from the point fit, rounds dropping out
when converged) and sums the resampled counts per pair in integers. Here each
category is done the plain way: the same multinomial draws over the unique
(lower model, higher model, outcome of the lower) classes, a row and its
mirror image being one class (the documented resampling, same seed), the per-pair counts added up by hand, and every round fitted by
an undamped full Newton iteration run to 1e-12, then put on the Elo scale.
Ratings, interval bounds, every bootstrap round and P(best) for a mix must
agree within TOL_ELO (both converge to the same fit: here the largest
difference is about 1e-12), and P(best) exactly up to a round that would
flip. Rounds in which two models' scores agree up to such noise split
P(best) between them (`core.decide.choose.TIE_ELO`).
"""

from __future__ import annotations

import numpy as np
import pytest

from core.decide.choose import TIE_ELO, decide
from core.stats.ratings import BattleSet, rate, stream_seed

TOL_ELO = 1e-6
LAM = (400.0 / 4000.0) ** 2          # the default prior: prior_sd 4000 Elo points
ALPHA = np.log(10.0)


def synthetic(n_votes: int, n_models: int, n_cats: int, seed: int):
    """Votes from planted per-category strengths, close enough that P(best)
    is split between models (so that a wrong round would show)."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(0.0, 0.08, size=(n_cats, n_models))
    cat = rng.integers(0, n_cats, size=n_votes)
    a = rng.integers(0, n_models, size=n_votes)
    b = (a + rng.integers(1, n_models, size=n_votes)) % n_models
    p = 1.0 / (1.0 + np.exp(-ALPHA * (strength[cat, a] - strength[cat, b])))
    u = rng.random(n_votes)
    score = np.where(u < 0.15, 0.5, np.where(u < 0.15 + 0.85 * p, 1.0, 0.0))
    names = [f"m{k}" for k in range(n_models)]
    parts = {}
    for k in range(n_cats):
        rows = np.flatnonzero(cat == k)
        parts[f"cat-{k}"] = BattleSet.from_arrays([names[i] for i in a[rows]], [names[i] for i in b[rows]],
                                                  score[rows].tolist())
    return parts


def newton(wins: np.ndarray, games: np.ndarray) -> np.ndarray:
    """Penalised Bradley-Terry by plain Newton, all rounds at once:
    wins[r, i, j] = score of i against j, games[r, i, j] = comparisons.
    Returns theta (R, m) on the natural scale, each round centred."""
    rounds, m, _ = wins.shape
    theta = np.zeros((rounds, m))
    for _ in range(100):
        d = ALPHA * (theta[:, :, None] - theta[:, None, :])
        p = 1.0 / (1.0 + np.exp(-d))
        grad = LAM * theta - ALPHA * (wins - games * p).sum(axis=2)
        w = ALPHA ** 2 * games * p * (1.0 - p)
        hess = -w + np.eye(m) * (w.sum(axis=2)[:, :, None] + LAM)
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        theta -= step
        if np.abs(step).max() < 1e-12:
            break
    return theta - theta.mean(axis=1, keepdims=True)


def plain_category(bs: BattleSet, rounds: int, seed: int | None):
    """(point ratings, rounds x models ratings) the straightforward way."""
    m = len(bs.models)
    code = np.rint(bs.score * 2).astype(np.int64)
    lo, hi = np.minimum(bs.a, bs.b), np.maximum(bs.a, bs.b)
    code_lo = np.where(bs.a < bs.b, code, 2 - code)    # a row and its mirror image: one class
    keys, counts = np.unique((lo * m + hi) * 3 + code_lo, return_counts=True)
    draws = np.random.default_rng(seed).multinomial(int(counts.sum()), counts / counts.sum(), size=rounds)
    a, b, c = (keys // 3) // m, (keys // 3) % m, keys % 3

    def stats(cnt: np.ndarray):
        r = cnt.shape[0]
        wins = np.zeros((r, m, m))
        games = np.zeros((r, m, m))
        for k in range(keys.size):
            games[:, a[k], b[k]] += cnt[:, k]
            games[:, b[k], a[k]] += cnt[:, k]
            wins[:, a[k], b[k]] += cnt[:, k] * c[k] / 2.0
            wins[:, b[k], a[k]] += cnt[:, k] * (2 - c[k]) / 2.0
        return wins, games

    point = newton(*stats(counts[None, :]))[0] * 400.0 + 1000.0
    boot = newton(*stats(draws)) * 400.0 + 1000.0
    return point, boot


@pytest.mark.parametrize("seed", [0, 7])
def test_per_category_bootstraps_match_the_straightforward_path(seed):
    rounds = 300
    parts = synthetic(6000, 7, 4, seed)
    results = {}
    for name, bs in parts.items():
        sub_seed = stream_seed(seed, name)
        res = rate(bs, rounds=rounds, seed=sub_seed)
        point, boot = plain_category(bs, rounds, sub_seed)
        assert res.replicates is not None and res.point is not None
        assert list(res.replicate_models) == list(bs.models)
        np.testing.assert_allclose(res.point, point, atol=TOL_ELO, rtol=0)
        np.testing.assert_allclose(res.replicates, boot, atol=TOL_ELO, rtol=0)
        lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
        for row in res.models:
            k = bs.models.index(row.name)
            assert row.ci_low == pytest.approx(lo[k], abs=TOL_ELO)
            assert row.ci_high == pytest.approx(hi[k], abs=TOL_ELO)
        results[name] = (res, boot)

    mix = {"cat-0": 0.4, "cat-1": 0.3, "cat-2": 0.2, "cat-3": 0.1}
    decision = decide({n: r for n, (r, _) in results.items()}, [], [], mix=mix, rounds=rounds, seed=seed)
    names = sorted(parts["cat-0"].models)
    scores = np.zeros((rounds, len(names)))
    for cat, share in mix.items():
        models = results[cat][0].replicate_models
        scores += share * results[cat][1][:, [models.index(n) for n in names]]
    top = scores >= scores.max(axis=1, keepdims=True)
    expected = (top / top.sum(axis=1, keepdims=True)).mean(axis=0)
    got = {m.name: m.p_best for m in decision.models}
    assert max(expected) < 0.9                     # P(best) is really split
    for n, e in zip(names, expected, strict=True):
        assert got[n] == pytest.approx(e, abs=1.0 / rounds + 1e-12)


def test_rounds_equal_up_to_fit_noise_split_p_best_and_tie():
    """A model whose every round equals another's up to noise far below the
    fit's tolerance (as two fits of one record along different paths come
    out) shares P(best) with it and is tied with it, whichever way the last
    digits fall; a real difference of a few Elo points still counts."""
    rounds = 200
    parts = synthetic(3000, 3, 1, 3)
    res = rate(parts["cat-0"], rounds=rounds, seed=1)
    assert res.replicates is not None and res.point is not None
    reps = res.replicates
    best = int(np.argmax(res.point))
    other = [k for k in range(3) if k != best]
    noise = np.random.default_rng(0).uniform(-1e-6, 1e-6, rounds)
    assert 1e-6 < TIE_ELO / 100                   # far below the rule, far above the last digits
    reps[:, other[0]] = reps[:, best] + noise
    reps[:, other[1]] = reps[:, best] - 5.0
    decision = decide({"cat-0": res}, [], [], mix={"cat-0": 1.0}, rounds=rounds, seed=0)
    p = {m.name: m.p_best for m in decision.models}
    names = res.replicate_models
    assert p[names[best]] == pytest.approx(0.5) and p[names[other[0]]] == pytest.approx(0.5)
    assert p[names[other[1]]] == 0.0
    assert set(decision.tied_with_best) == {names[best], names[other[0]]}
