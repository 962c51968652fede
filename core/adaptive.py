"""The adaptive vote queue's choice (`lineup vote --adaptive`): which (case,
pair of models) to serve next so that each vote does the most for the
ranking, and when the top of the ranking is settled.

Why a module of its own: the choice is a small statistical policy, checked
without a UI or a store (`tests/test_adaptive.py`, and
`benchmarks/bench_adaptive.py` measures the votes it saves against a
uniform queue); `core.vote_queue` serves what it picks and records why.

The policy, after every vote, from people's votes so far (Bradley-Terry with
sandwich standard errors, `core.ppi.wald_ratings` without a judge):
- until every model has `WARMUP` comparisons, the pair of the least-compared
  models (every model needs a place in the ranking first);
- then the pair whose order is least certain, weighted to the top of the
  ranking: for each pair the probability that its order is the other way
  round, P = Phi(-|gap| / se(gap)), doubled for a pair with the current
  leader (the top is what a team ships) and halved for a pair that is not
  next to each other in the ranking;
- for that pair, a case it has not been voted on yet, from the category with
  the fewest votes so far (cases voted on least first), the model shown
  left less often on the left (positions balanced), a seeded draw between
  equals.
The reason (the pair, its P, the rule that chose it) goes with the vote
(`VoteRecord.choice_reason`), so an analysis can account for the choice.

The stop: the leader is ahead of every other model at the chosen confidence
(the gap's two-sided interval, with their covariance, excludes 0) and each
of the two has `MIN_VOTES_TO_RANK` comparisons. Checking after every vote
makes the confidence slightly optimistic (a sequential look); the report's
bootstrap is the figure to quote.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from core.ppi import Items, WaldRatings, wald_ratings, z_value
from core.ratings import MIN_VOTES_TO_RANK

#: Comparisons each model gets before the choice turns to the ranking's uncertainty.
WARMUP = 4


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
    for a, b, _ in battles:
        counts[a] += 1
        counts[b] += 1
    names = sorted(set(models) | set(counts))
    rated = sorted(counts)
    if len(battles) < 2 or len(rated) < 2 or not _connected(rated, battles):
        return Standing(sorted(names, key=lambda m: (-counts[m], m)), comparisons=dict(counts))
    index = {m: i for i, m in enumerate(rated)}
    fit = wald_ratings(len(rated), Items.of([index[a] for a, _, _ in battles], [index[b] for _, b, _ in battles],
                                            [s for _, _, s in battles]))
    ranked = sorted(rated, key=lambda m: -float(fit.rating[index[m]]))
    return Standing(ranked + [m for m in names if m not in counts], fit, rated, dict(counts))


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


def stop_message(st: Standing, level: float = 0.95, *, named: bool = True) -> str | None:
    """"You can stop: A is ahead of B with 95% confidence" once the leader is
    separated from every other model (see the module docstring); None before.
    `named` False (names hidden until the end): the top model unnamed."""
    if st.fit is None or len(st.rated) < 2:
        return None
    leader = st.models[0]
    runner = st.models[1]
    if min(st.comparisons.get(leader, 0), st.comparisons.get(runner, 0)) < MIN_VOTES_TO_RANK:
        return None
    z = z_value(level)
    for other in st.models[1:]:
        if other not in st.index:
            return None
        d, se = st.gap(leader, other)
        if d <= z * se:
            return None
    pct = f"{level:.0%}"
    if named:
        return f"you can stop: {leader} is ahead of {runner} (and every other model) with {pct} confidence"
    return f"you can stop: the top model is ahead of every other with {pct} confidence (names at the end)"


@dataclass
class AdaptivePlanner:
    """The candidates left, people's comparisons so far, and the choice of
    the next one. `rng` breaks ties between equals (seeded: reproducible)."""

    candidates: list[Candidate]
    battles: dict[str, tuple[str, str, float]] = field(default_factory=dict)    # vote id -> comparison
    rng: random.Random = field(default_factory=random.Random)
    left_count: Counter = field(default_factory=Counter)
    category_votes: Counter = field(default_factory=Counter)
    case_votes: Counter = field(default_factory=Counter)
    skipped: set = field(default_factory=set)

    @property
    def models(self) -> list[str]:
        return sorted({m for c in self.candidates for m in c.pair} | {m for a, b, _ in self.battles.values()
                                                                        for m in (a, b)})

    def standing(self) -> Standing:
        return standing(list(self.battles.values()), self.models)

    def priorities(self, st: Standing) -> dict[tuple[str, str], tuple[float, str]]:
        """pair -> (priority, the rule that gave it)."""
        open_pairs = {c.pair for c in self.candidates}
        out: dict[tuple[str, str], tuple[float, str]] = {}
        least = min((st.comparisons.get(m, 0) for m in self.models), default=0)
        if least < WARMUP or st.fit is None:
            for x, y in open_pairs:
                need = WARMUP - min(st.comparisons.get(x, 0), st.comparisons.get(y, 0))
                out[(x, y)] = (float(max(need, 0)) + 1.0 / (1 + st.comparisons.get(x, 0) + st.comparisons.get(y, 0)),
                               "warm-up: the least-compared models")
            return out
        rank = {m: i for i, m in enumerate(st.models)}
        leader = st.models[0]
        for x, y in open_pairs:
            upper, lower = (x, y) if rank[x] < rank[y] else (y, x)
            p = misorder(st, upper, lower)
            if leader in (x, y):
                p, rule = 2.0 * p, "the top of the ranking: the leader's order against this model is uncertain"
            elif abs(rank[x] - rank[y]) == 1:
                rule = "neighbours in the ranking whose order is uncertain"
            else:
                p, rule = 0.5 * p, "models apart in the ranking whose order is uncertain"
            out[(x, y)] = (p, rule)
        return out

    def next(self) -> Choice | None:
        """The next (case, pair) to serve, or None when none is left."""
        live = [c for c in self.candidates if c.key not in self.skipped or
                all(d.key in self.skipped for d in self.candidates)]
        if not live:
            return None
        st = self.standing()
        prio = self.priorities(st)
        best = max(prio[c.pair][0] for c in live)
        pairs = sorted({c.pair for c in live if prio[c.pair][0] >= best - 1e-12})
        pair = pairs[self.rng.randrange(len(pairs))]
        options = [c for c in live if c.pair == pair]
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
                                  "category": chosen.category, "left": left, "open_items": len(live)}
        if st.fit is not None and x in st.index and y in st.index:
            d, se = st.gap(x, y)
            reason["gap"], reason["gap_se"] = round(d, 3), round(se, 3)
        return Choice(chosen, left, reason)

    def served(self, choice: Choice) -> None:
        """`choice` is on screen: it leaves the candidates."""
        self.candidates = [c for c in self.candidates if c is not choice.candidate]

    def skip(self, choice: Choice) -> None:
        """Back in the candidates, served only when nothing else is left."""
        self.candidates.append(choice.candidate)
        self.skipped.add(choice.candidate.key)

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
        self.candidates.insert(0, choice.candidate)
