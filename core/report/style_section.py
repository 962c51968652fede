"""The report's style control (`lineup report --style-control`, and `lineup
decide --style-control` per category): the texts of the answers each vote
judged, their style counts, and the fit of `core.stats.style`.

Why a module of its own: it is the one place that joins votes to the texts
they judged (read by `store.report_queries.voted_threads`); the fit itself
knows nothing of the store. Votes that judged an answer with no recorded
text (Arena battles imported without their conversations) cannot carry a
style and are left out of the fit, and counted (`without_answers`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.stats import ratings as R
from core.stats.style import (
    DEFAULT_RECIPE,
    StyleControl,
    counts_for,
    length_unit,
    lmarena_counts,
    style_control,
    style_counts,
    token_counter,
)
from store import report_queries as Q
from store.db import Store


def style_for(store: Store, bs: R.BattleSet, vote_ids: Sequence[str], raw: R.RatingResult | None, *,
              rounds: int, seed: int | None, recipe: str = DEFAULT_RECIPE) -> tuple[StyleControl, R.RatingResult] | None:
    """The style fit of the votes of `bs` (`vote_ids[v]`: the id of its vote
    v) by `recipe` (`core.stats.style.RECIPES`), beside their plain ratings
    `raw` (computed here when None or when some votes had to be left out).
    None when no vote has its answers."""
    threads = Q.voted_threads(store, vote_ids)
    tokens = token_counter() if recipe == "lmarena" else None
    cache: dict[tuple[str, ...], tuple[float, float, float, float]] = {}
    per_vote: list[dict[str, tuple[float, ...]] | None] = []
    shown_at: list[dict[str, int]] = []
    names = bs.models
    needed: list[set[str]] = [set() for _ in range(bs.n_votes)]
    for v, a, b in zip(bs.vote.tolist(), bs.a.tolist(), bs.b.tolist(), strict=True):
        needed[v].update((names[a], names[b]))
    for v, vid in enumerate(vote_ids):
        thread = threads.get(vid)
        answers = thread.answers if thread is not None else {}
        if not needed[v] <= answers.keys():
            per_vote.append(None)
            continue
        found: dict[str, tuple[float, ...]] = {}
        for model in needed[v]:
            turns = tuple(answers[model]) if recipe == "lmarena" else (answers[model][-1],)
            if turns not in cache:
                cache[turns] = lmarena_counts(turns, tokens) if recipe == "lmarena" else style_counts(turns[0])
            found[model] = cache[turns]
        per_vote.append(found)
        shown_at.append({m: k for k, m in enumerate(thread.shown)} if thread is not None else {})
    keep = np.array([p is not None for p in per_vote], dtype=bool)
    if not keep.any():
        return None
    left_out = int((~keep).sum())
    if left_out:
        bs = bs.subset(np.flatnonzero(keep))
        per_vote = [p for p in per_vote if p is not None]
        raw = None
    if raw is None:
        raw = R.rate(bs, rounds=rounds, seed=seed)
    ca, cb = counts_for(bs, per_vote)   # type: ignore[arg-type]  # None left out above
    # model a left of model b as the rater saw it (a vote whose order does not read: as stored)
    first = np.ones(bs.a.size, dtype=bool)
    for r, (v, a, b) in enumerate(zip(bs.vote.tolist(), bs.a.tolist(), bs.b.tolist(), strict=True)):
        at_a, at_b = shown_at[v].get(bs.models[a]), shown_at[v].get(bs.models[b])
        if at_a is not None and at_b is not None:
            first[r] = at_a < at_b
    summary, adjusted = style_control(bs, ca, cb, raw, rounds=rounds, seed=seed, recipe=recipe,
                                      a_shown_first=first, unit=length_unit(tokens) if recipe == "lmarena" else "words")
    summary.without_answers = left_out
    if left_out:
        summary.warnings.append(f"{left_out} vote{'s' if left_out != 1 else ''} left out of style control: "
                                "an answer they judged has no recorded text")
    return summary, adjusted
