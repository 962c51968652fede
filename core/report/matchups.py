"""Model against model: the win / tie / loss counts of every pair that met,
and the win probability the fitted ratings predict for every pair of the
same component (met or not), with its bootstrap interval.

Why a module of its own: the counts come from the pairwise outcomes the
ratings were fitted on (`core.stats.ratings.BattleSet`) and the predictions from
the fit and its rounds (`RatingResult.replicates`); every renderer draws the
result as a matrix. The prediction is Bradley-Terry's
P(i beats j) = 1 / (1 + 10 ** ((R_j - R_i) / 400)), where, as in the fit, a
tie counts as half a win: it is the expected score of i against j.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from core.stats.quantiles import percentile
from core.stats.ratings import SCALE, BattleSet, RatingResult


class MatchupCell(BaseModel):
    model: str
    opponent: str
    wins: int = Field(description="pairwise outcomes the model won against the opponent")
    ties: int
    losses: int
    predicted: float | None = Field(description="P(model beats opponent) from the ratings, a tie counting "
                                                "half; None across components (never compared, even indirectly)")
    ci_low: float | None = Field(default=None, description="bootstrap 95% interval of `predicted`")
    ci_high: float | None = None


class Matchups(BaseModel):
    models: list[str] = Field(default_factory=list, description="rows and columns, in the ratings table's order")
    cells: list[MatchupCell] = Field(default_factory=list,
                                     description="one per ordered pair (model, opponent) that met or is predicted")

    def cell(self, model: str, opponent: str) -> MatchupCell | None:
        for c in self.cells:
            if c.model == model and c.opponent == opponent:
                return c
        return None


def _win_prob(ri: np.ndarray, rj: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.power(10.0, (rj - ri) / SCALE))


def matchups(bs: BattleSet, result: RatingResult, level: float = 0.95) -> Matchups:
    names = list(bs.models)
    m = len(names)
    if m == 0 or result.point is None or result.component_of is None:
        return Matchups()
    won, lost, tie = bs.score == 1.0, bs.score == 0.0, bs.score == 0.5

    def cells_of(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return np.bincount(rows * m + cols, minlength=m * m).reshape(m, m)

    wins = cells_of(bs.a[won], bs.b[won]) + cells_of(bs.b[lost], bs.a[lost])
    ties = cells_of(bs.a[tie], bs.b[tie])
    ties = ties + ties.T
    order = [names.index(r.name) for r in result.models if r.name in names]
    comp = result.component_of
    tail = (1.0 - level) / 2.0 * 100.0
    bounds = None
    if result.replicates is not None:        # every pair's interval at once (the same numbers, cell by cell)
        rep = result.replicates
        bounds = percentile(_win_prob(rep[:, :, None], rep[:, None, :]), [tail, 100.0 - tail], axis=0)
    cells: list[MatchupCell] = []
    for i in order:
        for j in order:
            if i == j:
                continue
            met = wins[i, j] + wins[j, i] + ties[i, j]
            same = comp[i] == comp[j]
            if not met and not same:
                continue
            pred = lo = hi = None
            if same:
                pred = float(_win_prob(result.point[i], result.point[j]))
                if bounds is not None:
                    lo, hi = float(bounds[0, i, j]), float(bounds[1, i, j])
            cells.append(MatchupCell(model=names[i], opponent=names[j], wins=int(wins[i, j]), ties=int(ties[i, j]),
                                     losses=int(wins[j, i]), predicted=pred, ci_low=lo, ci_high=hi))
    return Matchups(models=[names[i] for i in order], cells=cells)
