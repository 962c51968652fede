"""The adaptive vote queue's choice (`lineup vote --adaptive`): which (case,
pair of models) to serve next so that each vote does the most for the top
of the ranking, and when the top is settled.

Why a module of its own: the choice and the stop are a small statistical
policy, checked without a UI or a store (`tests/test_adaptive.py` measures
the stop's false-stop rate on planted ties, and `benchmarks/bench_adaptive.py`
the votes it saves against a uniform queue under the same stop); 
`core.answering.vote_queue` serves what it picks and records why.

The ranking so far, after every vote, from people's votes: Bradley-Terry
with sandwich standard errors (`core.stats.ppi.wald_ratings` without a judge).

The stop ("you can stop: A is ahead of B (and every other model) with 95%
confidence") is honest however often it is looked at and whichever pairs
were served:
- each claim "the leader L is ahead of X" is a sequential test: the gap d
  with standard error s crosses the normal-mixture boundary (Robbins; Howard,
  Ramdas, McAuliffe, Sekhon, "Time-uniform, nonparametric, nonasymptotic
  confidence sequences", 2021)
      (d/s)^2 >= (1 + s^2/tau^2) * (2 ln(1/a) + ln(1 + tau^2/s^2)),  d > 0,
  which a Gaussian estimate of a gap that is really <= 0 crosses *ever*, at
  any vote, with probability at most a/2 (Ville's inequality on the mixture
  martingale, halved by its symmetry). `TAU` (100 Elo points) tunes the
  boundary to gaps of tens of points; any value keeps the guarantee;
- multiplicity: the leader must be ahead of each of the other K-1 models,
  each test at a = 2 (1 - confidence) / (K - 1) (Bonferroni). A false stop
  (the model named on top is not the best) needs the test "L ahead of the
  true best" to cross for some L, so its probability is at most
  1 - confidence, summed over every L and every look;
- the normal approximation needs votes behind it (a 6-0 start has a
  sandwich error near 0): the leader and the runner-up each have
  `MIN_VOTES_TO_RANK` comparisons and the leader has `MIN_PAIR_VOTES`
  direct votes against every other model.
The guarantee is as good as the Bradley-Terry normal approximation; the
tests measure it on seeded simulations (planted equal top two: false stops
under the nominal 5%).

The choice, after every vote:
- until every model has `WARMUP` comparisons, the pair of the least-compared
  models (every model needs a place in the ranking first);
- then the top (best-arm identification in the manner of LUCB,
  Kalyanakrishnan et al. 2012): the stop waits on the leader's challenger,
  the model whose test is furthest from the stop (the smallest progress
  min(z / boundary, direct votes / `MIN_PAIR_VOTES`)); a leader that is not
  the best is found out there too. If the pair is short of direct votes,
  that pair; otherwise the pair whose vote is expected to narrow the
  leader-challenger gap most (its variance drops by
  w (c' S e)^2 / (1 + w e' S e), Sherman-Morrison on the gap's covariance S,
  c and e the two contrasts, w one vote's Fisher information at the current
  ratings): usually the pair itself, and once its cases are used up, the
  challenger against the models that tie it to the leader;
- for that pair, a case it has not been voted on yet, from the category with
  the fewest votes so far (cases voted on least first), the model shown
  left less often on the left (positions balanced), a seeded draw between
  equals.
The reason (the pair, its priority, the rule that chose it) goes with the
vote (`VoteRecord.choice_reason`), so an analysis can account for the choice.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from core.stats.ppi import Items, WaldRatings, wald_ratings
from core.stats.ratings import ALPHA, MIN_VOTES_TO_RANK, SCALE

#: Comparisons each model gets before the choice turns to the ranking's uncertainty.
WARMUP = 4
#: Direct votes the leader needs against each other model before the stop.
MIN_PAIR_VOTES = 8
#: The normal-mixture boundary's scale (Elo points): tightest for gaps of this order.
TAU = 100.0


@dataclass(frozen=True)
class Candidate:
    """A (case, pair) that may be served: `key` names the case (any hashable),
    `pair` the two models (in name order), `category` for balance."""

    key: Hashable
    pair: tuple[str, str]
    category: str | None = None


@dataclass(frozen=True)
class Choice:
    candidate: Candidate
    left: str                   # the model shown first (label A)
    reason: dict[str, Any]


@dataclass
class Standing:
    """The ranking so far: `models` by rating (descending; models without a
    rating yet last), the fit over `rated` (in its index order), comparisons each."""

    models: list[str]
    fit: WaldRatings | None = None
    rated: list[str] = field(default_factory=list)
    comparisons: dict[str, int] = field(default_factory=dict)
    pair_votes: dict[tuple[str, str], int] = field(default_factory=dict)    # (name order) -> direct votes

    def direct(self, x: str, y: str) -> int:
        """Direct comparisons between two models."""
        return self.pair_votes.get((x, y) if x < y else (y, x), 0)

    @property
    def index(self) -> dict[str, int]:
        return {m: i for i, m in enumerate(self.rated)}

    def gap(self, upper: str, lower: str) -> tuple[float, float]:
        """(rating difference, its standard error) of two rated models."""
        assert self.fit is not None
        i, j = self.index[upper], self.index[lower]
        return float(self.fit.rating[i] - self.fit.rating[j]), self.fit.diff_se(i, j)


def standing(battles: Sequence[tuple[str, str, float]], models: Sequence[str]) -> Standing:
    """People's comparisons (model a, model b, score of a) -> the ranking so far."""
    counts: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for a, b, _ in battles:
        counts[a] += 1
        counts[b] += 1
        pairs[(a, b) if a < b else (b, a)] += 1
    names = sorted(set(models) | set(counts))
    rated = sorted(counts)
    if len(battles) < 2 or len(rated) < 2 or not _connected(rated, battles):
        return Standing(sorted(names, key=lambda m: (-counts[m], m)), comparisons=dict(counts),
                        pair_votes=dict(pairs))
    index = {m: i for i, m in enumerate(rated)}
    fit = wald_ratings(len(rated), Items.of([index[a] for a, _, _ in battles], [index[b] for _, b, _ in battles],
                                            [s for _, _, s in battles]))
    ranked = sorted(rated, key=lambda m: -float(fit.rating[index[m]]))
    return Standing(ranked + [m for m in names if m not in counts], fit, rated, dict(counts), dict(pairs))


def _connected(models: list[str], battles: Sequence[tuple[str, str, float]]) -> bool:
    parent = {m: m for m in models}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, _ in battles:
        parent[find(a)] = find(b)
    return len({find(m) for m in models}) == 1


def misorder(st: Standing, upper: str, lower: str) -> float:
    """P(the two are the other way round), from the gap and its standard error."""
    if st.fit is None or upper not in st.index or lower not in st.index:
        return 0.5
    d, se = st.gap(upper, lower)
    if se <= 0:
        return 0.0 if d else 0.5
    return NormalDist().cdf(-abs(d) / se)


def boundary(se: float, a: float, tau: float = TAU) -> float:
    """The z (gap / se) the normal-mixture boundary asks of a gap with
    standard error `se` for a two-sided level `a` (see the module docstring)."""
    r = (tau / se) ** 2
    return math.sqrt((1.0 + 1.0 / r) * (2.0 * math.log(1.0 / a) + math.log1p(r)))


def pair_level(level: float, n_models: int) -> float:
    """Each of the leader's K-1 tests: a = 2 (1 - level) / (K - 1) (one-sided
    claims, Bonferroni over the leader's comparisons)."""
    return min(1.0, 2.0 * (1.0 - level) / max(n_models - 1, 1))


def progress(st: Standing, leader: str, other: str, level: float) -> float:
    """How far the test "leader ahead of other" is towards the stop: the least
    of z / boundary and direct votes / `MIN_PAIR_VOTES` (1 or more: done)."""
    direct = st.direct(leader, other) / MIN_PAIR_VOTES
    if st.fit is None or leader not in st.index or other not in st.index:
        return 0.0
    d, se = st.gap(leader, other)
    if se <= 0:
        return 0.0
    return min(d / se / boundary(se, pair_level(level, len(st.models))), direct)


def separated(st: Standing, level: float = 0.95) -> bool:
    """The leader is ahead of every other model by the sequential test at
    `level` (the module docstring), with the votes it needs."""
    if st.fit is None or len(st.rated) < 2 or len(st.rated) < len(st.models):
        return False
    leader, runner = st.models[0], st.models[1]
    if min(st.comparisons.get(leader, 0), st.comparisons.get(runner, 0)) < MIN_VOTES_TO_RANK:
        return False
    return all(progress(st, leader, other, level) >= 1.0 for other in st.models[1:])


def stop_message(st: Standing, level: float = 0.95, *, named: bool = True) -> str | None:
    """"You can stop: A is ahead of B with 95% confidence" once the leader is
    separated from every other model (`separated`); None before.
    `named` False (names hidden until the end): the top model unnamed."""
    if not separated(st, level):
        return None
    leader, runner = st.models[0], st.models[1]
    pct = f"{level:.0%}"
    if named:
        return f"you can stop: {leader} is ahead of {runner} (and every other model) with {pct} confidence"
    return f"you can stop: the top model is ahead of every other with {pct} confidence (names at the end)"


class AdaptivePlanner:
    """The candidates left, people's comparisons so far, and the choice of
    the next one. `rng` breaks ties between equals (seeded: reproducible);
    `level` is the confidence the stop asks for (the choice works towards it).

    The open candidates are kept by pair (the choice picks a pair first), so
    a choice costs the cases of one pair, not every (case, pair) of a large
    prompt set; `candidates` is their list, in the order they came."""

    def __init__(self, candidates: Sequence[Candidate], battles: dict[str, tuple[str, str, float]] | None = None,
                 rng: random.Random | None = None, level: float = 0.95) -> None:
        self.battles: dict[str, tuple[str, str, float]] = battles if battles is not None else {}  # vote id -> comparison
        self.rng = rng if rng is not None else random.Random()
        self.level = level
        self.left_count: Counter[str] = Counter()
        self.category_votes: Counter[str | None] = Counter()
        self.case_votes: Counter[Hashable] = Counter()
        self.skipped: set[Hashable] = set()
        self._open: dict[tuple[str, str], dict[int, Candidate]] = {}
        self._seq = 0
        self._front = 0
        self.candidates = list(candidates)
        self._names = sorted({m for c in candidates for m in c.pair})
        self._standing: Standing | None = None
        self._fitted = 0

    @property
    def candidates(self) -> list[Candidate]:
        """The open candidates (a copy: change them with `served`, `skip`, `restore`)."""
        return [c for _, c in sorted((n, c) for by in self._open.values() for n, c in by.items())]

    @candidates.setter
    def candidates(self, items: Sequence[Candidate]) -> None:
        self._open = {}
        for c in items:
            self._add(c)

    def _add(self, c: Candidate, *, front: bool = False) -> None:
        if front:
            self._front -= 1
            n = self._front
        else:
            self._seq += 1
            n = self._seq
        self._open.setdefault(c.pair, {})[n] = c

    @property
    def remaining(self) -> int:
        """How many candidates are open."""
        return sum(len(by) for by in self._open.values())

    @property
    def models(self) -> list[str]:
        return sorted(set(self._names) | {m for a, b, _ in self.battles.values() for m in (a, b)})

    def standing(self) -> Standing:
        """The ranking from the comparisons so far (fitted once per change of them)."""
        key = hash(tuple(self.battles.items()))
        if self._standing is None or self._fitted != key:
            self._standing, self._fitted = standing(list(self.battles.values()), self.models), key
        return self._standing

    def priorities(self, st: Standing) -> dict[tuple[str, str], tuple[float, str]]:
        """pair -> (priority, the rule that gave it)."""
        open_pairs = [pair for pair, by in self._open.items() if by]
        out: dict[tuple[str, str], tuple[float, str]] = {}
        least = min((st.comparisons.get(m, 0) for m in self.models), default=0)
        if least < WARMUP or st.fit is None or len(st.rated) < len(st.models):
            for x, y in open_pairs:
                need = WARMUP - min(st.comparisons.get(x, 0), st.comparisons.get(y, 0))
                out[(x, y)] = (float(max(need, 0)) + 1.0 / (1 + st.comparisons.get(x, 0) + st.comparisons.get(y, 0)),
                               "warm-up: the least-compared models")
            return out
        assert st.fit is not None
        leader = st.models[0]
        steps = {o: (st.direct(leader, o) / MIN_PAIR_VOTES, progress(st, leader, o, self.level))
                 for o in st.models[1:]}
        challenger = min(steps, key=lambda o: (steps[o][1], o))
        direct_pair = (leader, challenger) if leader < challenger else (challenger, leader)
        short_of_direct = steps[challenger][0] <= steps[challenger][1]
        index, cov = st.index, st.fit.cov
        target = np.zeros(len(st.rated))
        target[index[leader]], target[index[challenger]] = 1.0, -1.0
        var = float(target @ cov @ target)
        for x, y in open_pairs:
            if short_of_direct and (x, y) == direct_pair:
                out[(x, y)] = (3.0, "the top: the direct votes the stop needs between the leader and its "
                                    "least separated challenger")
                continue
            e = np.zeros(len(st.rated))
            e[index[x]], e[index[y]] = 1.0, -1.0
            d = float(st.fit.rating[index[x]] - st.fit.rating[index[y]])
            p = 1.0 / (1.0 + 10.0 ** (-d / SCALE))
            w = (ALPHA / SCALE) ** 2 * p * (1.0 - p)     # one vote's information on the Elo scale
            ce, ee = float(target @ cov @ e), float(e @ cov @ e)
            gain = w * ce * ce / (1.0 + w * ee) / var if var > 0 else 0.0
            out[(x, y)] = (1.0 + min(gain, 1.0), "the top: the vote that narrows the gap between the leader "
                                                 "and its least separated challenger most")
        return out

    def next(self) -> Choice | None:
        """The next (case, pair) to serve, or None when none is left."""
        live: dict[tuple[str, str], Any] = {pair: by.values() for pair, by in self._open.items() if by}
        if self.skipped:        # a skipped case only when nothing else is left
            fresh = {pair: [c for c in cs if c.key not in self.skipped] for pair, cs in live.items()}
            live = {pair: cs for pair, cs in fresh.items() if cs} or live
        if not live:
            return None
        st = self.standing()
        prio = self.priorities(st)
        best = max(prio[pair][0] for pair in live)
        pairs = sorted(pair for pair in live if prio[pair][0] >= best - 1e-12)
        pair = pairs[self.rng.randrange(len(pairs))]
        options = list(live[pair])
        fewest = min(self.case_votes[c.key] for c in options)
        options = [c for c in options if self.case_votes[c.key] == fewest]
        low_cat = min(self.category_votes[c.category] for c in options)
        options = [c for c in options if self.category_votes[c.category] == low_cat]
        chosen = options[self.rng.randrange(len(options))]
        x, y = pair
        if self.left_count[x] != self.left_count[y]:
            left = x if self.left_count[x] < self.left_count[y] else y
        else:
            left = pair[self.rng.randrange(2)]
        p, rule = prio[pair]
        reason: dict[str, Any] = {"mode": "adaptive", "pair": list(pair), "rule": rule, "priority": round(p, 6),
                                  "comparisons": {m: st.comparisons.get(m, 0) for m in pair},
                                  "category": chosen.category, "left": left,
                                  "open_items": sum(len(cs) for cs in live.values())}
        if st.fit is not None and x in st.index and y in st.index:
            d, se = st.gap(x, y)
            reason["gap"], reason["gap_se"] = round(d, 3), round(se, 3)
        return Choice(chosen, left, reason)

    def served(self, choice: Choice) -> None:
        """`choice` is on screen: it leaves the candidates."""
        by = self._open.get(choice.candidate.pair, {})
        for n, c in list(by.items()):
            if c is choice.candidate:
                del by[n]
                break

    def skip(self, choice: Choice) -> None:
        """Back in the candidates, served only when nothing else is left."""
        self._add(choice.candidate)
        self.skipped.add(choice.candidate.key)

    def restore(self, candidate: Candidate) -> None:
        """A candidate served but not voted on comes back, first in the order."""
        self._add(candidate, front=True)

    def record(self, vote_id: str, choice: Choice, score_of_first: float | None) -> None:
        """A vote on `choice` (the score of `pair[0]`; None: it said nothing about the pair)."""
        x, y = choice.candidate.pair
        if score_of_first is not None:
            self.battles[vote_id] = (x, y, score_of_first)
        self.left_count[choice.left] += 1
        self.category_votes[choice.candidate.category] += 1
        self.case_votes[choice.candidate.key] += 1

    def retract(self, vote_id: str, choice: Choice) -> None:
        """The vote is withdrawn: its comparison goes, the candidate comes back."""
        self.battles.pop(vote_id, None)
        self.left_count[choice.left] -= 1
        self.category_votes[choice.candidate.category] -= 1
        self.case_votes[choice.candidate.key] -= 1
        self.restore(choice.candidate)
