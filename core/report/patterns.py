"""The votes the report counts, as patterns: each distinct (choice, ranking,
mapping, positions) read, checked and decomposed once.

Why a module of its own: what a vote means depends only on those four
texts, and 100k votes carry a few thousand distinct ones, so the ratings,
position bias and rater consistency all work on codes into the patterns
rather than on 100k records. What a vote means is decided by `core.stats.votes`
(labels through the vote's own mapping, pairwise outcomes, verdicts); this
module only applies it once per pattern, leaves out unreadable votes (with a
warning naming each) and votes involving a demo model (unless asked), and
builds the `BattleSet` the ratings take.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from core.stats import ratings as R
from core.stats import votes as V
from store import report_queries as Q
from store.db import Store


class _JsonCache(dict[str, Any]):
    """Parsed JSON by its text: a session's votes share one mapping and a few
    position orders, so 100k votes parse a few hundred strings. The parsed
    values are shared: treat them as read-only."""

    def __missing__(self, text: str) -> Any:
        value = self[text] = json.loads(text)
        return value


class Pattern:
    """One distinct (choice, ranking, mapping, positions) as stored. `error`
    is set when the texts do not parse (the vote is unreadable)."""

    __slots__ = ("choice", "ranking", "mapping", "positions", "error", "models", "_battles")

    def __init__(self, key: tuple[Any, ...], cache: _JsonCache):
        choice, ranking, mapping, positions = key
        self.choice = choice
        self.error: str | None = None
        self._battles: list[V.Battle] | None = None
        self.ranking: Any = None
        self.mapping: Any = {}
        self.positions: Any = []
        self.models: frozenset[str] = frozenset()
        try:
            self.ranking = cache[ranking] if ranking else None
            self.mapping = cache[mapping]
            self.positions = cache[positions] if positions else []
            self.models = frozenset(self.mapping.values())     # the set of models shown
        except (TypeError, ValueError, AttributeError) as exc:
            self.error = str(exc)

    def label_of(self, choice: str) -> str | None:
        return V.label_of(self.mapping, choice)

    def verdict(self) -> str:
        return V.verdict(self.choice, self.mapping)

    def battles(self, vote_id: Any = None) -> list[V.Battle]:
        """The pairwise outcomes (`core.stats.votes.battles_of`); ValueError
        (naming the vote) when the choice or the ranking does not fit the mapping."""
        if self._battles is None:
            self._battles = V.battles_of(self.choice, self.ranking, self.mapping, self.positions, vote_id)
        return self._battles

    def battle_error(self) -> bool:
        try:
            self.battles()
        except ValueError:
            return True
        return False


class Votes:
    """The votes that count, in creation (id) order, as codes: `pattern[k]`
    indexes `patterns`, `meta[k]` indexes `metas` ((category, rater, prompt))."""

    def __init__(self, patterns: list[Pattern], metas: list[tuple[Any, ...]], pattern: np.ndarray,
                 meta: np.ndarray, ids: list[Any] | None):
        self.patterns, self.metas, self.pattern, self.meta, self.ids = patterns, metas, pattern, meta, ids

    def __len__(self) -> int:
        return int(self.pattern.size)


def read_votes(store: Store, scope: Q.Scope, *, with_ids: bool = False) -> tuple[Votes, int, list[str]]:
    """Current, not superseded, readable votes (demo ones left out unless
    asked), the number of demo votes left out, and a warning per unreadable
    vote. The vote ids are read only when some vote needs naming in a warning
    (then the whole read is redone with them)."""
    demo = set() if scope.include_demo else Q.demo_contestants(store)
    rows = Q.read_votes(store, scope, with_ids=with_ids, demo=bool(demo))
    cache = _JsonCache()
    patterns = [Pattern(key, cache) for key in rows.keys]
    if not with_ids and any(p.error is not None or p.battle_error() for p in patterns):
        return read_votes(store, scope, with_ids=True)     # warnings name votes
    ids = rows.ids
    readable = np.array([p.error is None for p in patterns], dtype=bool)
    keep = readable[rows.key]
    problems = []
    if ids is not None:
        problems = [f"vote {ids[k]}: unreadable ({patterns[rows.key[k]].error}); left out"
                    for k in np.flatnonzero(~keep).tolist()]
    skipped_demo = 0
    if rows.demo_session is not None:
        for k, session in enumerate(rows.demo_session):
            if session is not None and keep[k] and any((session, alias) in demo
                                                       for alias in patterns[rows.key[k]].mapping.values()):
                keep[k] = False
                skipped_demo += 1
    kept_ids = [ids[k] for k in np.flatnonzero(keep).tolist()] if ids is not None else None
    return Votes(patterns, rows.metas, rows.key[keep], rows.meta[keep], kept_ids), skipped_demo, problems


def pattern_counts(votes: Votes) -> list[tuple[Pattern, int]]:
    """Each pattern with its number of votes, in order of first appearance."""
    if not len(votes):
        return []
    uniq, first, counts = np.unique(votes.pattern, return_index=True, return_counts=True)
    order = np.argsort(first)
    return [(votes.patterns[int(p)], int(n)) for p, n in zip(uniq[order], counts[order], strict=True)]


def battle_set(votes: Votes) -> tuple[R.BattleSet, np.ndarray, list[str]]:
    """Votes -> pairwise outcomes, built with numpy from each pattern's
    decomposition (what `BattleSet.from_votes` gives for the votes one by one:
    same rows per vote, models in order of first appearance), the index
    (into `votes`) of the votes that made it, in BattleSet vote order, and a
    warning per vote whose choice or ranking does not fit its mapping."""
    problems: list[str] = []
    if not len(votes):
        return R.BattleSet.from_votes([]), np.zeros(0, dtype=np.int64), problems
    rows_of: dict[int, list[V.Battle]] = {}
    bad = np.zeros(len(votes.patterns), dtype=bool)
    # bincount, not np.unique: numpy's plain unique imports numpy.ma (~40 ms) to ask is_masked
    for p in np.flatnonzero(np.bincount(votes.pattern, minlength=len(votes.patterns))).tolist():
        pat = votes.patterns[p]
        if pat.battle_error():
            bad[p] = True
        else:
            rows_of[p] = pat.battles()
    if bad.any():   # one warning per vote, in vote order, naming it
        for k in np.flatnonzero(bad[votes.pattern]).tolist():
            try:
                votes.patterns[votes.pattern[k]].battles(votes.ids[k] if votes.ids is not None else None)
            except ValueError as exc:
                problems.append(f"{exc}; left out")
    names: dict[str, int] = {}
    start = np.zeros(len(votes.patterns), dtype=np.int64)
    length = np.zeros(len(votes.patterns), dtype=np.int64)
    flat_a: list[int] = []
    flat_b: list[int] = []
    flat_s: list[float] = []
    for p, battles in rows_of.items():
        start[p], length[p] = len(flat_a), len(battles)
        for bt in battles:
            flat_a.append(names.setdefault(bt.model_a, len(names)))
            flat_b.append(names.setdefault(bt.model_b, len(names)))
            flat_s.append(R.OUTCOME_SCORE[bt.outcome])
    used = np.flatnonzero(length[votes.pattern] > 0)
    if not used.size:
        return R.BattleSet.from_votes([]), used, problems
    pv = votes.pattern[used]
    n_rows = length[pv]
    vote = np.repeat(np.arange(used.size, dtype=np.int64), n_rows)
    row = np.repeat(start[pv] - (np.cumsum(n_rows) - n_rows), n_rows) + np.arange(int(n_rows.sum()))
    a = np.asarray(flat_a, dtype=np.int64)[row]
    b = np.asarray(flat_b, dtype=np.int64)[row]
    score = np.asarray(flat_s, dtype=np.float64)[row]
    both = np.concatenate([a, b])
    seen, first = np.unique(both, return_index=True)
    order = seen[np.argsort(first)]           # first appearance: model_a column, then model_b
    new_of = np.empty(len(names), dtype=np.int64)
    new_of[order] = np.arange(order.size)
    name_of = list(names)
    bs = R.BattleSet(tuple(name_of[g] for g in order.tolist()), new_of[a], new_of[b], score, vote)
    return bs, used, problems
