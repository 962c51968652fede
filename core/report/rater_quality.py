"""The report's rater-quality section: each rater's accuracy on gold pairs
(pairs with a known better answer, mixed into the vote queue) and the
blinding audit (how well raters told which model wrote an answer).

Why a module of its own: neither is a vote nor enters a rating; both say how
far the votes can be trusted. The section's pydantic models (under
`rater_quality` in the report's JSON) are here beside the code that fills them.

- Gold accuracy: the share of gold pairs where the rater picked the better
  answer (a tie or "both bad" counts as a miss, `core.stats.votes.gold_correct`),
  with its Wilson 95% interval. Chance is 1/2 (a rater who picks a side
  without reading); a rater whose interval reaches down to 1/2 cannot be told
  from chance and is flagged, once they have judged `MIN_GOLD` gold pairs.
- Blinding index, per pair of models: on the guesses where the rater named
  one of the two and the answer came from one of the two (a forced choice
  between them), 2 * (share named right) - 1: 0 is chance (the blinding
  held), 1 always identified, -1 always the wrong one; with the Wilson
  interval mapped the same way. "No idea" answers are counted apart.
"""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import combinations

from pydantic import BaseModel, Field

from core.stats.ratings import wilson_interval
from core.stats.votes import pair_of
from store import report_queries as Q
from store.db import Store

#: Gold pairs a rater judges before being flagged (or cleared) as at chance.
MIN_GOLD = 10
CHANCE = 0.5


class GoldRow(BaseModel):
    rater: str
    gold_pairs: int
    correct: int
    accuracy: float | None
    ci_low: float | None = Field(default=None, description="Wilson 95% interval")
    ci_high: float | None = None
    at_chance: bool = Field(default=False, description=f"interval reaches {CHANCE} (chance), with {MIN_GOLD}+ pairs")
    note: str = ""


class BlindingRow(BaseModel):
    model_a: str
    model_b: str
    guesses: int = Field(description="guesses naming one of the two, of an answer by one of the two")
    correct: int
    index: float | None = Field(description="2 * share right - 1: 0 chance, 1 always identified")
    ci_low: float | None = None
    ci_high: float | None = None
    no_idea: int = 0


class RaterQuality(BaseModel):
    gold: list[GoldRow] = Field(default_factory=list)
    blinding: list[BlindingRow] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.gold or self.blinding)


def rater_quality(store: Store, scope: Q.Scope) -> RaterQuality:
    out = RaterQuality()
    per: dict[str, list[bool]] = defaultdict(list)
    for rater, _source, correct, _choice in Q.gold_rows(store, scope):
        per[rater].append(bool(correct))
    for rater in sorted(per):
        n, k = len(per[rater]), sum(per[rater])
        lo, hi = wilson_interval(k, n)
        row = GoldRow(rater=rater, gold_pairs=n, correct=k, accuracy=k / n, ci_low=lo, ci_high=hi)
        if n < MIN_GOLD:
            row.note = f"only {n} gold pair{'s' if n != 1 else ''}: too few to tell from chance ({MIN_GOLD} needed)"
        elif lo <= CHANCE:
            row.at_chance = True
            row.note = "at chance: cannot be told from picking a side without reading"
        out.gold.append(row)
    pairs: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])   # guesses, correct, no idea
    for _rater, actual, guess, options in Q.guess_rows(store, scope):
        try:
            offered = [o for o in json.loads(options) if isinstance(o, str)]
        except (TypeError, ValueError):
            continue
        for x, y in combinations(sorted(set(offered)), 2):
            if actual not in (x, y):
                continue
            cell = pairs[pair_of(x, y)]
            if guess is None:
                cell[2] += 1
            elif guess in (x, y):
                cell[0] += 1
                cell[1] += int(guess == actual)
    for (x, y), (n, k, no_idea) in sorted(pairs.items()):
        if n:
            lo, hi = wilson_interval(k, n)
            out.blinding.append(BlindingRow(model_a=x, model_b=y, guesses=n, correct=k, index=2 * k / n - 1,
                                            ci_low=2 * lo - 1, ci_high=2 * hi - 1, no_idea=no_idea))
        else:
            out.blinding.append(BlindingRow(model_a=x, model_b=y, guesses=0, correct=0, index=None, no_idea=no_idea))
    return out
