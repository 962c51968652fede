"""The offline side of a canary (`lineup canary report`): the recorded votes
between the incumbent and the candidate, per category, as the report reads
and decomposes them. It lives with the report because it reads votes the
report's way; the canary's statistics (`core.decide.canary`) take its result."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from core.decide.canary import OfflinePair
from core.report.patterns import read_votes
from store.report_queries import Scope


def offline_pairs(store: Any, incumbent: str, candidate: str, *, sessions: Sequence[str] = (),
                  rater_kind: str = "human") -> dict[str, OfflinePair]:
    """Per category, the pairwise outcomes of the recorded votes between the
    two models (`core.stats.votes`' decomposition, so N-way votes and rankings count
    as the report counts them)."""
    votes, _, _ = read_votes(store, Scope(sessions=tuple(sessions), include_demo=True, rater_kind=rater_kind))
    out: dict[str, OfflinePair] = defaultdict(OfflinePair)
    pair = {incumbent, candidate}
    for k in range(len(votes)):
        pattern = votes.patterns[int(votes.pattern[k])]
        if not pair <= pattern.models:
            continue
        category = str(votes.metas[int(votes.meta[k])][0])
        try:
            battles = pattern.battles()
        except ValueError:
            continue
        for b in battles:
            if {b.model_a, b.model_b} != pair:
                continue
            row = out[category]
            if b.outcome == "tie":
                row.ties += 1
            elif (b.model_a if b.outcome == "a" else b.model_b) == candidate:
                row.candidate_wins += 1
            else:
                row.incumbent_wins += 1
    return dict(out)
