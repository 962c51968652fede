"""A team's progress (`lineup rate`'s owner view), read from the record the
way the queue and the report read it: a rater's units left are those
`build_items` would still serve them (no current vote of theirs, not
revealed to them); agreement is the report's Krippendorff's alpha
(`rater_agreement`) over the team's sessions. The team itself (who rates
what) is `core.answering.raters`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.answering.dimensions import dimensions_of
from core.answering.raters import Team
from core.answering.vote_queue import build_items
from core.report.agreement import Agreement, pair_rows, summary_line
from core.report.build import rater_agreement
from core.report.patterns import read_votes
from store import raters as SR
from store.records import current_scores
from store.report_queries import Scope

if TYPE_CHECKING:
    from store.db import Store
    from store.records import LoadedSession

@dataclass
class RaterProgress:
    rater: str
    assigned: int
    done: int
    left: int
    scores: int = 0          # the answers' scores on the sessions' dimensions that count now


@dataclass
class TeamProgress:
    raters: list[RaterProgress]
    agreement: Agreement
    scored: bool = False     # some session asks for scores on dimensions (`lineup run --dimension`)

    def lines(self) -> list[str]:
        """Plain text (the terminal escapes it; the owner's page too)."""
        out = [f"{p.rater}: {p.done} done, {p.left} left of {p.assigned}"
               + (f", {p.scores} score{'s' if p.scores != 1 else ''}" if self.scored else "") for p in self.raters]
        out.append(summary_line(self.agreement))
        out += [f"  {row[0]}: alpha {row[2]} over {row[1]} prompts" for row in pair_rows(self.agreement)]
        return out


def team_progress(store: Store, team: Team, loaded: Sequence[LoadedSession]) -> TeamProgress:
    """Per rater: units assigned, done, left, scores given; agreement as the
    report computes it."""
    existing = SR.assignments(store, team.id)
    scored = Counter(s.rater for ls in loaded for s in current_scores(ls.scores) if s.rater_kind == "human")
    rows = []
    for rater in team.raters:
        mine = {u for u, r in existing if r == rater}
        open_ = {item.key for ls in loaded for item in build_items(ls, rater=rater)}
        left = len(mine & open_)
        rows.append(RaterProgress(rater=rater, assigned=len(mine), done=len(mine) - left, left=left,
                                  scores=scored[rater]))
    votes = read_votes(store, Scope(sessions=tuple(team.sessions)))[0]
    return TeamProgress(raters=rows, agreement=rater_agreement(votes, rounds=0, seed=0),
                        scored=any(dimensions_of(ls.session.meta) for ls in loaded))
