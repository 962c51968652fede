"""Bradley-Terry ratings with bootstrap intervals, the Chatbot Arena recipe.

Why a module of its own: the statistics must be checkable without a database
or a UI, so this file is pure numpy. `core.report` feeds it votes from the
store; the tests and `benchmarks/bench_ratings.py` feed it arrays. Its
results (`ModelRating`, `Gap`) are pydantic models because the report's JSON
carries them as they are: one definition of a rating line, not two. Past
600 lines because the fit, its bootstrap (plain and per category, batched),
the groups of models that cannot be told apart and the interval helpers are
one piece of statistics, checked together against the reference recipe.

The recipe (FastChat `compute_bt` / `compute_bootstrap_bt`):
- every vote becomes pairwise outcomes (`decompose_vote`);
- the Bradley-Terry model P(i beats j) = 1 / (1 + 10 ** ((R_j - R_i) / 400)) is
  fitted by maximum likelihood with the logistic loss; a tie counts as half a win
  each way (score 0.5), which is the same as two half-weight rows;
- ratings are reported on the Elo scale: 400 points per factor of 10 in the
  odds, mean 1000 (Chatbot Arena additionally anchors one named model; we don't);
- 95% intervals are bootstrap percentiles (2.5% / 97.5%, linear interpolation)
  over rounds that resample *votes* with replacement (default 1000 rounds,
  seeded `numpy.random.Generator`, reproducible).

Where we differ from FastChat, on purpose:
- A weak Gaussian prior on the ratings (`prior_sd`, default 4000 Elo points:
  a penalty of lam/2 * sum(theta**2) with lam = (400 / prior_sd)**2 = 0.01 on
  the natural scale, summed over votes). FastChat has none, so a model that
  never loses has no maximum-likelihood rating and L-BFGS just stops somewhere.
  With the prior every fit is finite and unique and Newton's method is well
  posed. The reported scale is then anchored so that the mean rating of each
  connected group of models is exactly 1000 (over the models whose rating is
  identified, see `_identification`, when some are not). Its
  pull on a model with n votes is about lam * theta / (n * 1.3) natural units:
  under 0.01 Elo points at a few hundred votes.
- Models whose maximum-likelihood rating does not exist are *reported* as such
  (`open_high` / `open_low`, see `ModelRating`); their interval bound on the
  open side is None (unbounded) rather than an artefact of the prior.
- Disconnected comparison graphs are rated per connected component: each
  component has mean 1000, models in different components are never ranked
  against each other, and `RatingResult.components` says so.
- Speed: rounds are drawn as multinomial counts over the *unique* vote
  patterns (what FastChat does for unique rows), a row and its mirror image
  being one pattern ("a beat b" and "b lost to a" add the same comparison
  and score to the same pair, so resampling votes draws the same per-pair
  statistics; FastChat draws over rows as written, twice as many classes,
  the same distribution but other draws from the same seed), reduced to
  per-pair sufficient statistics (comparisons, score; summed in integers),
  and all rounds are solved together by a batched, damped Newton method
  started one shared chord step from the full-data fit (`_chord_start`),
  each round dropping out when converged (`fit_pairs`).
  The draws themselves (`Generator.multinomial`, about 75 us per round for
  10,000 votes over 570 patterns; numpy's exact sampler, whose cost grows
  with the votes once patterns hold few each) are then most of a
  bootstrap's time. Drawn rounds can be kept between runs (a `DrawStore`,
  found by `draws_key`: the patterns, seed, rounds, this file and numpy's
  version), so votes rated before are not drawn again; the store itself
  (files, signing) is the report's (`core.report.draw_cache`).

Length: the fit, the bootstrap, the identification of open ratings and the
result table are one statistical recipe whose parts share private helpers
(`_patterns`, `_components`, `_anchor`); split across modules they would
have to export them.
"""

from __future__ import annotations

import functools
import hashlib
import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

# What a vote means, its pairwise outcomes included, is decided in one place.
from core.stats.quantiles import percentile
from core.stats.votes import TIE_CHOICES, Battle, decompose_vote  # noqa: F401  (re-exported)

ALPHA = math.log(10.0)   # natural-log odds per unit of theta (base 10)
SCALE = 400.0            # Elo points per unit of theta
INIT_RATING = 1000.0     # the mean rating of every connected component
DEFAULT_PRIOR_SD = 4000.0
DEFAULT_ROUNDS = 1000
#: A model with fewer votes keeps its row (rating, interval) but gets no rank:
#: a single lucky win must not put it at the top of the table.
MIN_VOTES_TO_RANK = 10
#: "More votes to separate" is estimated only when it means something: both
#: models ranked, a gap of at least MIN_GAP Elo points, and an answer of at most
#: MAX_VOTE_MULTIPLE times the votes so far (further out, the gap itself is noise).
MIN_GAP = 1.0
MAX_VOTE_MULTIPLE = 100

#: The score of model_a in a battle: a win, a tie, a loss.
OUTCOME_SCORE = {"a": 1.0, "tie": 0.5, "b": 0.0}


@dataclass(frozen=True)
class BattleSet:
    """Pairwise outcomes as arrays, grouped by the vote they came from.

    Model indices follow the order of first appearance (model_a column, then
    model_b), as pandas.factorize does in FastChat; they order the patterns
    the bootstrap draws over, so the same votes give the same rounds.
    `score` is 1.0 when a won, 0.5 for a tie, 0.0 when b won. Rows sharing a
    `vote` value are resampled together; `vote` is 0..n_votes-1.
    """

    models: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    vote: np.ndarray

    @property
    def n_votes(self) -> int:
        return int(self.vote.max()) + 1 if self.vote.size else 0

    @classmethod
    def from_votes(cls, votes: Iterable[Sequence[Battle]]) -> "BattleSet":
        """One entry per vote: the battles `decompose_vote` gave for it."""
        ma: list[str] = []
        mb: list[str] = []
        sc: list[float] = []
        vo: list[int] = []
        k = 0
        for battles in votes:
            if not battles:
                continue
            for bt in battles:
                ma.append(bt.model_a)
                mb.append(bt.model_b)
                sc.append(OUTCOME_SCORE[bt.outcome])
                vo.append(k)
            k += 1
        return cls.from_arrays(ma, mb, sc, vo)

    @classmethod
    def from_arrays(cls, model_a: Sequence[str], model_b: Sequence[str],
                    outcome: Sequence, vote: Sequence[int] | None = None) -> "BattleSet":
        """`outcome`: "a"/"b"/"tie" (also FastChat's "model_a"/"model_b"/"tie*")
        or scores 1/0.5/0. Without `vote`, each row is its own vote."""
        ma = list(model_a)
        mb = list(model_b)
        if len(ma) != len(mb) or len(ma) != len(outcome):
            raise ValueError("model_a, model_b and outcome must have the same length")
        index: dict[str, int] = {}
        for name in ma + mb:
            if name not in index:
                index[name] = len(index)
        a = np.fromiter((index[m] for m in ma), dtype=np.int64, count=len(ma))
        b = np.fromiter((index[m] for m in mb), dtype=np.int64, count=len(mb))
        if np.any(a == b):
            i = int(np.flatnonzero(a == b)[0])
            raise ValueError(f"row {i}: a model cannot battle itself ({ma[i]!r})")
        score = _scores(outcome)
        if vote is None:
            v = np.arange(len(ma), dtype=np.int64)
        else:
            v = np.asarray(vote, dtype=np.int64)
            if v.shape != a.shape:
                raise ValueError("vote must have one entry per row")
            _, v = np.unique(v, return_inverse=True)   # 0..n_votes-1
        return cls(tuple(index), a, b, score, v)


    def subset(self, votes: np.ndarray) -> "BattleSet":
        """The outcomes of some votes (boolean mask over votes, or vote indices),
        with models re-indexed in order of first appearance as from_arrays does."""
        keep_vote = np.zeros(self.n_votes, dtype=bool)
        keep_vote[np.asarray(votes)] = True
        rows = keep_vote[self.vote]
        a, b = self.a[rows], self.b[rows]
        first = np.concatenate([a, b])
        _, where = np.unique(first, return_index=True)
        old = first[np.sort(where)]                   # old model indices, first appearance
        new_of = np.full(len(self.models), -1, dtype=np.int64)
        new_of[old] = np.arange(old.size)
        _, v = np.unique(self.vote[rows], return_inverse=True)
        return BattleSet(tuple(self.models[i] for i in old), new_of[a], new_of[b], self.score[rows],
                         v.astype(np.int64))


def _scores(outcome: Sequence) -> np.ndarray:
    arr = np.asarray(outcome)
    if arr.dtype.kind in "fiub":
        score = arr.astype(np.float64)
    else:
        lut = {"a": 1.0, "model_a": 1.0, "b": 0.0, "model_b": 0.0}
        score = np.array([lut.get(str(o), 0.5 if str(o).startswith("tie") or str(o) == "both_bad"
                                  else np.nan) for o in arr], dtype=np.float64)
    bad = ~np.isin(score, (0.0, 0.5, 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"row {i}: outcome {arr[i]!r} is not a, b, tie or 1/0.5/0")
    return score


# --------------------------------------------------------------------------- fitting


@dataclass(frozen=True)
class PairData:
    """Sufficient statistics: for pair k = (i[k] < j[k]), `n[..., k]` comparisons
    and `s[..., k]` the score of i (wins + ties/2). Leading axis: bootstrap round."""

    i: np.ndarray
    j: np.ndarray
    n: np.ndarray
    s: np.ndarray


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def _loss(theta: np.ndarray, pd: PairData, n: np.ndarray, s: np.ndarray, lam: float) -> np.ndarray:
    x = ALPHA * (theta[:, pd.i] - theta[:, pd.j])
    ll = s * _log_sigmoid(x) + (n - s) * _log_sigmoid(-x)
    return -ll.sum(axis=1) + 0.5 * lam * np.einsum("rk,rk->r", theta, theta)


def fit_pairs(pd: PairData, n_models: int, *, lam: float, theta0: np.ndarray | None = None,
              tol: float = 1e-7, max_iter: int = 200) -> np.ndarray:
    """Penalised Bradley-Terry fit of every round at once: (R, P) -> theta (R, n_models).

    Damped Newton: the Hessian of the loss is the graph Laplacian weighted by
    alpha^2 * n * p * (1 - p) plus lam * I (positive definite), so each step is
    one batched `np.linalg.solve`. A long step (over `trust` natural units,
    40 Elo points) must lower its round's loss or is halved (backtracking) for
    that round only; short steps are taken as they are (the loss is then
    nearly quadratic: that is where Newton converges quadratically and where
    warm-started bootstrap rounds start).

    Converged rounds drop out: a round stops once the step it took was at
    most `tol`, so its last digits are those of the converged fit (a stop
    predicted from quadratic convergence would save one solve per round, but
    moves ratings by up to `tol` and with them every comparison made at an
    exact tie: group boundaries, chart marks, split rounds of P(best)).
    """
    trust = 0.1
    n_obs = np.atleast_2d(pd.n).astype(np.float64)
    s_obs = np.atleast_2d(pd.s).astype(np.float64)
    rounds = n_obs.shape[0]
    theta = np.zeros((rounds, n_models)) if theta0 is None else \
        np.array(np.broadcast_to(theta0, (rounds, n_models)), dtype=np.float64)
    if n_models == 0:
        return theta
    P = pd.i.size
    inc = np.zeros((P, n_models))           # incidence: +1 at i, -1 at j
    inc[np.arange(P), pd.i] = 1.0
    inc[np.arange(P), pd.j] = -1.0
    inc_t = np.ascontiguousarray(inc.T)
    absinc = np.abs(inc)
    upper, lower = pd.i * n_models + pd.j, pd.j * n_models + pd.i
    diag = np.arange(n_models) * (n_models + 1)
    active = np.arange(rounds)
    for _ in range(max_iter):
        if active.size == 0:
            break
        every = active.size == rounds
        th = theta if every else theta[active]
        na = n_obs if every else n_obs[active]
        sa = s_obs if every else s_obs[active]
        x = th @ inc_t                      # theta_i - theta_j, exactly (one +1, one -1 a column)
        x *= ALPHA
        p = np.exp(-x)
        p += 1.0
        np.reciprocal(p, out=p)
        grad = lam * th - ALPHA * (sa - na * p) @ inc
        c = na * p
        c *= 1.0 - p
        c *= ALPHA * ALPHA
        # built one matrix entry a row (each a contiguous run over the rounds):
        # scattering columns of a (rounds, n*n) array costs five times as much
        hess_t = np.zeros((n_models * n_models, active.size))
        c_t = c.T
        hess_t[upper] = -c_t
        hess_t[lower] = -c_t
        hess_t[diag] = (c @ absinc + lam).T
        step = np.linalg.solve(hess_t.T.reshape(-1, n_models, n_models), grad[..., None])[..., 0]
        cand = th - step
        size = np.abs(step).max(axis=1)
        t = np.ones(active.size)
        long = np.flatnonzero(size > trust)
        if long.size:
            th_l, na_l, sa_l = th[long], na[long], sa[long]
            old = _loss(th_l, pd, na_l, sa_l, lam)
            new = _loss(cand[long], pd, na_l, sa_l, lam)
            bad = new > old + 1e-12 * np.abs(old)
            for _ in range(60):
                if not bad.any():
                    break
                t[long[bad]] *= 0.5
                cand[long[bad]] = th_l[bad] - t[long[bad], None] * step[long[bad]]
                new[bad] = _loss(cand[long[bad]], pd, na_l[bad], sa_l[bad], lam)
                bad = new > old + 1e-12 * np.abs(old)
        theta[active] = cand
        active = active[t * size > tol]
    return theta


def pair_data(bs: BattleSet, weights: np.ndarray | None = None) -> PairData:
    """Per-pair statistics of the whole set (weights: per row, default 1)."""
    w = np.ones(bs.a.size) if weights is None else np.asarray(weights, dtype=np.float64)
    lo = np.minimum(bs.a, bs.b)
    hi = np.maximum(bs.a, bs.b)
    s_lo = np.where(bs.a < bs.b, bs.score, 1.0 - bs.score)
    m = len(bs.models)
    key = lo * m + hi
    n_all = np.bincount(key, weights=w, minlength=m * m)
    s_all = np.bincount(key, weights=w * s_lo, minlength=m * m)
    seen = np.flatnonzero(np.bincount(key, minlength=m * m))
    return PairData(seen // m, seen % m, n_all[seen][None, :], s_all[seen][None, :])


@dataclass(frozen=True)
class _Patterns:
    """Unique vote patterns (the rows one vote decomposed into) and how often
    each occurred; `entries` maps them onto pairs for the sufficient statistics."""

    counts: np.ndarray          # (U,) occurrences of each pattern
    entry_pattern: np.ndarray   # (E,) pattern of each (pattern, pair) entry, sorted by pair
    entry_n: np.ndarray         # (E,) comparisons that pattern adds to the pair
    entry_s: np.ndarray         # (E,) score of the pair's lower index
    pair_starts: np.ndarray     # (P,) first entry of each pair
    pairs: PairData             # pair indices (n, s unused here)
    #: entry_n and twice entry_s as integers (exact sums of counts); entry_n2
    #: is None when every entry adds one comparison (one row per vote).
    entry_n2: np.ndarray | None = None
    entry_s2: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    #: entry_pattern is 0, 1, 2, ... (one entry a pattern, as with one row per
    #: vote): the counts are read as they are, without a copy
    in_order: bool = False


def _patterns(bs: BattleSet) -> _Patterns:
    """The votes' distinct patterns, each row written the one way the fit
    reads it: (lower model index, higher, score of the lower). A row and its
    mirror image ("a beat b" and "b lost to a") add the same comparison and
    score to the same pair, so they are one outcome, and a vote is one
    pattern however its models were placed. Resampling votes draws the same
    per-pair statistics either way; with half as many classes the draws
    (`bootstrap_thetas`) take about 0.6 of the time."""
    m = len(bs.models)
    lo, hi = np.minimum(bs.a, bs.b), np.maximum(bs.a, bs.b)
    code = np.rint(bs.score * 2).astype(np.int64)              # FastChat: a=2, tie=1, b=0
    code = np.where(bs.a < bs.b, code, 2 - code)               # ... of the lower index
    row_key = (lo * m + hi) * 3 + code                         # lexicographic in (lo, hi, code)
    order = np.lexsort((row_key, bs.vote))
    v_sorted, k_sorted = bs.vote[order], row_key[order]
    n_votes = bs.n_votes
    starts = np.searchsorted(v_sorted, np.arange(n_votes))
    width = int(np.diff(np.append(starts, v_sorted.size)).max())
    if width == 1:   # one row per vote: patterns are rows; keys are < 3 m^2
        all_counts = np.bincount(k_sorted, minlength=3 * m * m)
        keys = np.flatnonzero(all_counts)
        counts = all_counts[keys]
        keys = keys[:, None]
    else:
        mat = np.full((n_votes, width), -1, dtype=np.int64)
        col = np.arange(v_sorted.size) - starts[v_sorted]
        mat[v_sorted, col] = k_sorted
        keys, counts = np.unique(mat, axis=0, return_counts=True)
    # entries: (pattern, pair) with their n and s
    pat_idx, col_idx = np.nonzero(keys >= 0)
    k = keys[pat_idx, col_idx]
    s_lo = (k % 3) / 2.0
    pair_key = k // 3                                          # lo * m + hi
    uniq_pairs, pair_inv = np.unique(pair_key, return_inverse=True)
    # merge duplicates of (pattern, pair) and sort by pair
    ek = pair_inv * keys.shape[0] + pat_idx
    ek_u, ek_inv = np.unique(ek, return_inverse=True)
    e_n = np.bincount(ek_inv, minlength=ek_u.size).astype(np.float64)
    e_s = np.bincount(ek_inv, weights=s_lo, minlength=ek_u.size)
    e_pair = ek_u // keys.shape[0]
    e_pat = ek_u % keys.shape[0]
    pair_starts = np.searchsorted(e_pair, np.arange(uniq_pairs.size))
    pairs = PairData(uniq_pairs // m, uniq_pairs % m, np.empty(0), np.empty(0))
    e_n2 = np.rint(e_n).astype(np.int64)
    return _Patterns(counts.astype(np.int64), e_pat, e_n, e_s, pair_starts, pairs,
                     None if bool(np.all(e_n2 == 1)) else e_n2, np.rint(2.0 * e_s).astype(np.int64),
                     in_order=bool(np.array_equal(e_pat, np.arange(keys.shape[0]))))


def _pair_stats_from_counts(pt: _Patterns, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """counts (R, U) of each pattern -> (n, s) per pair, shape (R, P).

    Summed in integers (comparisons, and twice the score: ties are halves),
    exact, then made floats: the bootstrap's second cost after the draws."""
    x = counts if pt.in_order else counts.take(pt.entry_pattern, axis=1)
    n = np.add.reduceat(x * pt.entry_n2 if pt.entry_n2 is not None else x, pt.pair_starts, axis=1)
    s2 = np.add.reduceat(x * pt.entry_s2, pt.pair_starts, axis=1)
    return n.astype(np.float64), s2 * 0.5


class DrawStore(Protocol):
    """Where the bootstrap's fitted rounds are kept between runs
    (`core.report.draw_cache`), by `draws_key`: `get` gives them back as they
    were put, or None."""

    def get(self, key: bytes, shape: tuple[int, int]) -> np.ndarray | None: ...

    def put(self, key: bytes, draws: np.ndarray) -> None: ...


@functools.cache
def _code_fingerprint() -> bytes | None:
    """This file's bytes, hashed: kept draws are the draws of this code (the
    fit, the sampling, the constants are all here), so any edit is a miss."""
    try:
        return hashlib.blake2b(Path(__file__).read_bytes(), digest_size=16).digest()
    except OSError:
        return None


def draws_key(pt: _Patterns, n_models: int, rounds: int, seed: int, lam: float, theta0: np.ndarray,
              max_cells: int) -> bytes | None:
    """What `bootstrap_thetas` draws is a function of these and of this code
    and numpy (the random streams, the solver): their hash, or None when this
    code cannot be fingerprinted."""
    code = _code_fingerprint()
    if code is None:
        return None
    h = hashlib.blake2b(digest_size=32, person=b"lineup-draws")
    parts = [code, np.__version__.encode(), repr((n_models, rounds, int(seed), float(lam), max_cells)).encode()]
    for arr in (pt.counts, pt.entry_pattern, pt.entry_n, pt.entry_s, pt.pair_starts, pt.pairs.i, pt.pairs.j,
                theta0):
        arr = np.ascontiguousarray(arr)
        parts += [arr.dtype.str.encode(), repr(arr.shape).encode(), arr.tobytes()]
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()


def bootstrap_thetas(bs: BattleSet, rounds: int, seed: int | np.random.Generator | None,
                     *, lam: float, theta0: np.ndarray | None = None,
                     max_cells: int = 8_000_000, cache: DrawStore | None = None) -> np.ndarray:
    """(rounds, n_models) thetas, each round refitted on votes resampled with
    replacement. Votes are drawn as multinomial counts over the unique vote
    patterns, mirror images merged (`_patterns`): the same distribution of
    per-pair statistics as resampling votes one by one, at the cost of the
    number of distinct patterns. Rounds are processed in chunks so that
    memory stays bounded; the random stream does not depend on the chunking.
    With `cache` and an integer seed, rounds fitted before on the same
    patterns are read back instead of drawn again (`draws_key`)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    pt = _patterns(bs)
    n_models = len(bs.models)
    total = int(pt.counts.sum())
    pvals = pt.counts / pt.counts.sum()
    if theta0 is None:
        n0, s0 = _pair_stats_from_counts(pt, pt.counts[None, :])
        theta0 = fit_pairs(PairData(pt.pairs.i, pt.pairs.j, n0, s0), n_models, lam=lam)[0]
    key = None
    if cache is not None and type(seed) is int:
        key = draws_key(pt, n_models, rounds, seed, lam, theta0, max_cells)
        kept = cache.get(key, (rounds, n_models)) if key is not None else None
        if kept is not None:
            return kept
    per_round = max(pt.counts.size, pt.entry_pattern.size, n_models * n_models)
    chunk = max(1, min(rounds, max_cells // max(per_round, 1)))
    out = np.empty((rounds, n_models))
    n_full, _ = _pair_stats_from_counts(pt, pt.counts[None, :])
    for start in range(0, rounds, chunk):
        size = min(chunk, rounds - start)
        counts = rng.multinomial(total, pvals, size=size)
        n, s = _pair_stats_from_counts(pt, counts)
        pd = PairData(pt.pairs.i, pt.pairs.j, n, s)
        out[start:start + size] = fit_pairs(pd, n_models, lam=lam,
                                            theta0=_chord_start(pd, n_full[0], n_models, theta0, lam))
    if key is not None and cache is not None:
        cache.put(key, out)
    return out


def _chord_start(pd: PairData, n_full: np.ndarray, n_models: int, theta0: np.ndarray,
                 lam: float) -> np.ndarray:
    """Where each bootstrap round's Newton fit starts: one step from the
    full-data fit `theta0` along the full data's Hessian there (a chord step:
    the same matrix for every round, inverted once), instead of a solve per
    round. A resampled round's Hessian differs from it by the counts' noise,
    so the step lands typically 10-20 times closer to the round's fit than theta0
    is and the fit needs one Newton solve fewer. A round whose step would be
    long (over 0.1 natural units) starts from theta0 as before. Only the
    starting point changes: each round still converges to its own fit."""
    if pd.i.size == 0:
        return np.broadcast_to(theta0, pd.n.shape[:1] + (n_models,))
    x = ALPHA * (theta0[pd.i] - theta0[pd.j])
    p = 1.0 / (1.0 + np.exp(-x))
    w = (ALPHA * ALPHA) * n_full * p * (1.0 - p)
    hess = np.diag(np.bincount(pd.i, w, n_models) + np.bincount(pd.j, w, n_models) + lam)
    hess[pd.i, pd.j] -= w
    hess[pd.j, pd.i] -= w
    inc = np.zeros((pd.i.size, n_models))
    inc[np.arange(pd.i.size), pd.i] = 1.0
    inc[np.arange(pd.i.size), pd.j] = -1.0
    grad = lam * theta0 - ALPHA * (pd.s - pd.n * p) @ inc
    step = grad @ np.linalg.inv(hess)
    start = theta0 - step
    long = np.abs(step).max(axis=1) > 0.1
    start[long] = theta0
    return start


# --------------------------------------------------------------------------- results


class ModelRating(BaseModel):
    """One model's line in the table, in the ratings and in the report's JSON
    (the one definition of a model's rating line).

    rating: the (penalised) maximum-likelihood rating, Elo scale, mean 1000
      within its component (over its identified core, see `_identification`).
    ci_low / ci_high: bootstrap 2.5% / 97.5% percentiles; None when that side is
      open (see open_low / open_high).
    rank_low / rank_high: the best and worst rank (1 = best) consistent with
      the intervals, among the ranked models of the component:
        rank_low  = 1 + #{other ranked models m : m.ci_low > my ci_high}
                    (models certainly better than me, plus one)
        rank_high = #{ranked models m, me included : m.ci_high >= my ci_low}
                    (= number of ranked models minus those certainly worse than me)
      An open bound counts as +/- infinity. This is Chatbot Arena's "rank (UB)"
      for rank_low. None for a model that is not ranked.
    ranked: the model has at least MIN_VOTES_TO_RANK votes. One that has
      fewer is listed after the ranked models of its component, with its
      rating and interval, a note saying so, and no rank.
    open_high: no maximum-likelihood rating exists because, within its
      component, the model's strongly connected group never lost (nor tied) to
      the rest: the rating shown is a lower bound kept finite by the prior and
      ci_high is None. open_low: the mirror (never won nor tied).
    wins / ties / losses: pairwise outcomes (an N-way pick gives N-1 wins);
    votes: the votes the model took part in.
    """

    name: str
    rating: float
    ci_low: float | None
    ci_high: float | None
    rank_low: int | None = Field(description="None when not ranked")
    rank_high: int | None
    votes: int
    wins: int
    ties: int
    losses: int
    component: int = 0
    group: int = 0
    open_low: bool = False
    open_high: bool = False
    notes: list[str] = Field(default_factory=list)
    ranked: bool = Field(default=True, description=f"at least {MIN_VOTES_TO_RANK} votes; fewer: listed "
                                                   "after the ranked models, with no rank")


class Gap(BaseModel):
    """Models next to each other in the table (ranked ones by rating, then
    those with too few votes to rank), within a component, and how far apart
    they are: `upper` is the one rated higher, `gap` >= 0.

    more_votes: roughly how many more votes (in the same mix as so far) would
    make the two intervals stop overlapping if the gap stayed as it is. The
    intervals are about +/- z * sd with sd ~ 1/sqrt(votes), so the overlap ends
    when the gap d exceeds h = (upper.rating - upper.ci_low) + (lower.ci_high -
    lower.rating); that needs the votes multiplied by (h / d)^2, i.e.
    more_votes = votes_in_component * ((h / d)^2 - 1). 0 when already
    separated. None ("not enough votes" to say) unless the estimate means
    something: both models ranked (MIN_VOTES_TO_RANK votes each), a gap of at
    least MIN_GAP, both bounds finite, bootstrap rounds run, and (h / d)^2 at
    most MAX_VOTE_MULTIPLE. Rough by design: the gap will move as votes
    arrive, and targeted votes between the two models would need fewer.
    """

    upper: str
    lower: str
    gap: float
    separated: bool
    more_votes: int | None = Field(description="rough number of further votes, in the same mix, "
                                               "that would separate the two at the current gap; None: "
                                               "not enough votes to say")


@dataclass
class RatingResult:
    models: list[ModelRating]          # by component, then rating descending
    groups: list[list[str]]            # models that cannot be told apart
    gaps: list[Gap]
    components: list[list[str]]        # connected comparison groups; >1 means not jointly rated
    n_votes: int
    n_battles: int
    rounds: int
    seed: int | None
    warnings: list[str] = field(default_factory=list)
    #: The bootstrap's ratings, one row per round, one column per model of the
    #: `BattleSet` (its `models` order, `replicate_models`), on the reported
    #: scale (Elo, each component's core at mean 1000); None without rounds.
    #: What P(best) and predicted win probabilities are computed from
    #: (`core.decide`, `core.report.matchups`): the same draws as the intervals.
    replicates: np.ndarray | None = None
    replicate_models: tuple[str, ...] = ()
    #: The point ratings in the same column order, and each model's component.
    point: np.ndarray | None = None
    component_of: np.ndarray | None = None

    @property
    def connected(self) -> bool:
        return len(self.components) <= 1


def _components(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(i.tolist(), j.tolist(), strict=True):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    roots = [find(x) for x in range(n)]
    ids: dict[int, int] = {}
    return np.array([ids.setdefault(r, len(ids)) for r in roots], dtype=np.int64)


def _sccs(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Strongly connected components (iterative Tarjan); returns a label per node."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        adj[u].append(v)
    index = [-1] * n
    low = [0] * n
    on = [False] * n
    stack: list[int] = []
    label = [-1] * n
    counter = 0
    comp = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            v, pi = work.pop()
            if pi == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on[v] = True
            recurse = False
            for k in range(pi, len(adj[v])):
                w = adj[v][k]
                if index[w] == -1:
                    work.append((v, k + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if on[w]:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on[w] = False
                    label[w] = comp
                    if w == v:
                        break
                comp += 1
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return label


def _identification(n: int, pd: PairData, comp: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which models have a finite maximum-likelihood rating: (open_low, open_high, core).

    Edge u -> v when u scored (won or tied) against v at least once. The MLE
    exists iff each connected component is strongly connected in this graph.
    When it is not, the *core* of the component is its strongly connected
    group with the most pairwise outcomes inside it (at least two models):
    its ratings stay finite relative to each other, and the scale is anchored
    on it (mean 1000 over the core). Every other group is open:
    - open_high when it cannot be reached from the core (nobody in the core,
      nor below it, ever beat or tied it): the MLE sends it to +infinity;
    - open_low when it cannot reach the core: it goes to -infinity;
    - both when neither (it only met other open groups).
    Without a core of two or more models (e.g. a strict order with no upset),
    every model of the component is open on the side(s) where the MLE diverges
    and the scale is anchored on the whole component.
    """
    n_obs, s_obs = pd.n[0], pd.s[0]
    edges: list[tuple[int, int]] = []
    for i, j, nn, ss in zip(pd.i.tolist(), pd.j.tolist(), n_obs.tolist(), s_obs.tolist(), strict=True):
        if nn <= 0:
            continue
        if ss > 0:
            edges.append((i, j))
        if ss < nn:
            edges.append((j, i))
    label = np.array(_sccs(n, edges), dtype=np.int64)
    n_scc = int(label.max()) + 1 if n else 0
    internal = np.zeros(n_scc)
    for i, j, nn in zip(pd.i.tolist(), pd.j.tolist(), n_obs.tolist(), strict=True):
        if label[i] == label[j]:
            internal[label[i]] += nn
    size = np.bincount(label, minlength=n_scc)
    succ: list[set[int]] = [set() for _ in range(n_scc)]
    pred: list[set[int]] = [set() for _ in range(n_scc)]
    for u, v in edges:
        if label[u] != label[v]:
            succ[label[u]].add(int(label[v]))
            pred[label[v]].add(int(label[u]))

    def reach(start: int, nxt: list[set[int]]) -> set[int]:
        seen, todo = {start}, [start]
        while todo:
            for w in nxt[todo.pop()]:
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return seen

    open_low = np.zeros(n, dtype=bool)
    open_high = np.zeros(n, dtype=bool)
    core = np.zeros(n, dtype=bool)
    for c in range(int(comp.max()) + 1 if n else 0):
        members = np.flatnonzero(comp == c)
        sccs = sorted(set(label[members].tolist()))
        if len(sccs) == 1:
            core[members] = True
            continue
        best = max(sccs, key=lambda k: (internal[k], size[k], -k))
        if size[best] >= 2:
            below = reach(best, succ)     # the core scored against them (transitively)
            above = reach(best, pred)     # they scored against the core (transitively)
            for x in members:
                k = int(label[x])
                if k == best:
                    core[x] = True
                    continue
                open_high[x] = k not in below
                open_low[x] = k not in above
        else:
            core[members] = True          # no anchor: the component's mean, everything open
            for x in members:
                k = int(label[x])
                has_in, has_out = bool(pred[k]), bool(succ[k])
                open_high[x] = not has_in or (has_in and has_out)
                open_low[x] = not has_out or (has_in and has_out)
    return open_low, open_high, core


def _anchor(theta: np.ndarray, comp: np.ndarray, core: np.ndarray) -> np.ndarray:
    """Shift each component so that its core has mean 0 (Elo mean 1000); works
    on (n,) or (rounds, n). A pure change of gauge: the likelihood only sees
    differences within a component."""
    out = np.array(theta, dtype=np.float64, copy=True)
    for c in range(int(comp.max()) + 1):
        members = comp == c
        anchor = out[..., members & core].mean(axis=-1, keepdims=True)
        out[..., members] -= anchor
    return out


def rate(bs: BattleSet, *, rounds: int = DEFAULT_ROUNDS, seed: int | None = 0,
         prior_sd: float = DEFAULT_PRIOR_SD, level: float = 0.95,
         min_votes: int = MIN_VOTES_TO_RANK, cache: DrawStore | None = None) -> RatingResult:
    """Ratings, intervals, ranks, groups and gaps for a set of votes; a model
    with fewer than `min_votes` votes is not ranked (see `ModelRating`).
    `cache`: where the bootstrap's rounds are kept between runs (`bootstrap_thetas`)."""
    if rounds < 0:
        raise ValueError("rounds must be >= 0")
    n_models = len(bs.models)
    if bs.a.size == 0:
        return RatingResult([], [], [], [], 0, 0, rounds, seed,
                            ["no votes with a pairwise outcome"])
    lam = (SCALE / prior_sd) ** 2
    full = pair_data(bs)
    theta = fit_pairs(full, n_models, lam=lam)[0]
    comp = _components(n_models, full.i, full.j)
    sizes = np.bincount(comp)
    rank_of = np.empty_like(sizes)
    rank_of[np.argsort(-sizes, kind="stable")] = np.arange(sizes.size)
    comp = rank_of[comp]                     # largest component first
    open_low, open_high, core = _identification(n_models, full, comp)
    rating = _anchor(theta, comp, core) * SCALE + INIT_RATING
    boot: np.ndarray | None = None
    if rounds > 0:
        boot = bootstrap_thetas(bs, rounds, seed, lam=lam, theta0=theta, cache=cache)
        boot = _anchor(boot, comp, core) * SCALE + INIT_RATING
    return result_of(bs, rating, boot, comp, open_low, open_high, rounds=rounds, seed=seed, level=level,
                     min_votes=min_votes)


def result_of(bs: BattleSet, rating: np.ndarray, boot: np.ndarray | None, comp: np.ndarray,
              open_low: np.ndarray, open_high: np.ndarray, *, rounds: int, seed: int | None,
              level: float = 0.95, min_votes: int = MIN_VOTES_TO_RANK) -> RatingResult:
    """The table of a fit: ratings (reported scale, per model of `bs`), their
    bootstrap rounds (or None), components and open sides -> intervals,
    ranks, groups, gaps and notes. `rate` ends here; so does a fit with
    covariates (`core.stats.style`), whose ratings read like any others."""
    n_models = len(bs.models)
    warnings: list[str] = []
    if boot is not None:
        tail = (1.0 - level) / 2.0 * 100.0
        lo_b, hi_b = percentile(boot, [tail, 100.0 - tail], axis=0)
    else:
        lo_b = np.full(n_models, np.nan)
        hi_b = np.full(n_models, np.nan)
        warnings.append("no bootstrap rounds: intervals, ranks ranges and groups are not computed")

    # per-model counts
    wins = np.bincount(bs.a, weights=(bs.score == 1.0), minlength=n_models) + \
        np.bincount(bs.b, weights=(bs.score == 0.0), minlength=n_models)
    losses = np.bincount(bs.a, weights=(bs.score == 0.0), minlength=n_models) + \
        np.bincount(bs.b, weights=(bs.score == 1.0), minlength=n_models)
    ties = np.bincount(bs.a, weights=(bs.score == 0.5), minlength=n_models) + \
        np.bincount(bs.b, weights=(bs.score == 0.5), minlength=n_models)
    if bs.n_votes == bs.a.size:   # one row per vote
        votes = np.bincount(bs.a, minlength=n_models) + np.bincount(bs.b, minlength=n_models)
    else:
        # (model, vote) pairs, each counted once; sorted by hand, as numpy's plain unique imports numpy.ma
        mv = np.sort(np.concatenate([bs.a * bs.n_votes + bs.vote, bs.b * bs.n_votes + bs.vote]))
        mv = mv[np.concatenate([[True], mv[1:] != mv[:-1]])]
        votes = np.bincount(mv // bs.n_votes, minlength=n_models)
    comp_of_vote = np.zeros(bs.n_votes, dtype=np.int64)
    comp_of_vote[bs.vote] = comp[bs.a]
    votes_per_comp = np.bincount(comp_of_vote, minlength=int(comp.max()) + 1)

    ci_lo = np.where(open_low | np.isnan(lo_b), -np.inf, lo_b)
    ci_hi = np.where(open_high | np.isnan(hi_b), np.inf, hi_b)
    components: list[list[str]] = []
    models: list[ModelRating] = []
    groups: list[list[str]] = []
    gaps: list[Gap] = []
    ranked = votes >= min_votes
    for c in range(int(comp.max()) + 1):
        members = np.flatnonzero(comp == c)
        members = members[np.argsort(-rating[members], kind="stable")]
        components.append([bs.models[x] for x in members])
        comp_votes = int(votes_per_comp[c])
        # groups: connected components of the interval-overlap graph
        # (sweep by lower bound; a model joins the open group while its lower
        # bound does not exceed the highest upper bound seen so far)
        by_low = members[np.argsort(ci_lo[members], kind="stable")]
        group_of: dict[int, int] = {}
        reach = np.nan
        for x in by_low:
            if np.isnan(reach) or ci_lo[x] > reach or rounds == 0:
                groups.append([])
                reach = -np.inf
            groups[-1].append(bs.models[x])
            group_of[int(x)] = len(groups) - 1
            reach = max(reach, ci_hi[x])
        # the table: ranked models by rating, then those with too few votes
        table = np.concatenate([members[ranked[members]], members[~ranked[members]]])
        rankable = members[ranked[members]]
        for x in table:
            notes: list[str] = []
            if open_high[x] and open_low[x]:
                notes.append("not identified (groups never met on equal terms)")
            elif open_high[x]:
                notes.append("lower bound: never lost or tied to the models below")
            elif open_low[x]:
                notes.append("upper bound: never won or tied against the models above")
            if not ranked[x]:
                n = int(votes[x])
                notes.append(f"{'one vote only' if n == 1 else f'only {n} votes'}: "
                             f"not ranked until it has {min_votes}")
                rank_low = rank_high = None
            elif rounds:
                rank_low = 1 + int(np.sum(ci_lo[rankable] > ci_hi[x]))
                rank_high = int(np.sum(ci_hi[rankable] >= ci_lo[x]))
            else:
                rank_low, rank_high = 1, len(rankable)
            models.append(ModelRating(
                name=bs.models[x], rating=float(rating[x]),
                ci_low=None if not np.isfinite(ci_lo[x]) else float(ci_lo[x]),
                ci_high=None if not np.isfinite(ci_hi[x]) else float(ci_hi[x]),
                rank_low=rank_low, rank_high=rank_high,
                votes=int(votes[x]), wins=int(wins[x]), ties=int(ties[x]), losses=int(losses[x]),
                component=c, group=group_of[int(x)],
                open_low=bool(open_low[x]), open_high=bool(open_high[x]), notes=notes, ranked=bool(ranked[x])))
        for a, b in zip(table[:-1], table[1:], strict=True):
            up, dn = (a, b) if rating[a] >= rating[b] else (b, a)
            d = float(rating[up] - rating[dn])
            separated = bool(ci_lo[up] > ci_hi[dn])
            h = float((rating[up] - ci_lo[up]) + (ci_hi[dn] - rating[dn]))
            more: int | None = None
            if not (ranked[up] and ranked[dn]) or rounds == 0:
                more = None
            elif separated:
                more = 0
            elif d >= MIN_GAP and math.isfinite(h) and (h / d) ** 2 <= MAX_VOTE_MULTIPLE:
                more = int(math.ceil(comp_votes * max((h / d) ** 2 - 1.0, 0.0)))
            gaps.append(Gap(upper=bs.models[up], lower=bs.models[dn], gap=d, separated=separated,
                            more_votes=more))
    # renumber groups in the order of the table
    order: dict[int, int] = {}
    for mr in models:
        order.setdefault(mr.group, len(order))
    groups = [groups[g] for g in sorted(order, key=order.__getitem__)]
    for mr in models:
        mr.group = order[mr.group]
    groups = [sorted(g, key=lambda name: next(i for i, m in enumerate(models) if m.name == name))
              for g in groups]
    if len(components) > 1:
        warnings.append(
            f"the comparison graph is disconnected ({len(components)} groups of models never "
            "compared with each other): each group is rated on its own (mean 1000) and ranks "
            "are within the group; ratings from different groups are not comparable")
    if open_high.any() or open_low.any():
        names = [bs.models[x] for x in np.flatnonzero(open_high | open_low)]
        warnings.append("no finite maximum-likelihood rating for " + ", ".join(names) +
                        " (never lost or never won against part of the field): shown as bounds "
                        "kept finite by the prior, with open intervals")
    return RatingResult(models, groups, gaps, components, bs.n_votes, int(bs.a.size),
                        rounds, seed, warnings, replicates=boot, replicate_models=bs.models, point=rating,
                        component_of=comp)


def stream_seed(seed: int | None, name: str) -> int | None:
    """The seed of the bootstrap of one part of the votes (a category): drawn
    from (seed, name), so that the parts' bootstraps are independent of each
    other (the same seed for every part would draw the same uniforms for
    each, correlating their rounds) and each stays the same however many
    other parts there are. None stays None (a fresh stream)."""
    if seed is None:
        return None
    entropy = [int(seed) % (1 << 64), zlib.crc32(name.encode("utf-8", "surrogatepass"))]
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0])


def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score 95% interval of k successes in n trials ((0, 1) for none)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo, hi = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if k == 0 else lo), (1.0 if k == n else hi)
