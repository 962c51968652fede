"""Building a decision from the store: `build_decision(store, filters, ...)`.

Why a module of its own: `lineup decide` needs only part of the report (the
ratings of each category, with their rounds; speed, cost and check figures),
so it reads and computes just that, through the report's own reads and
builders (`core.report.patterns`, `core.report.start.start_breakdown`,
`core.report.figures`): the same votes, the same per-category bootstraps
(same seeds), the same engineering figures as `lineup report`. With
`style_control`, each category's ratings are its style-adjusted ones
(`core.report.style_section`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from core.stats import ratings as R
from core.stats.style import DEFAULT_RECIPE
from core.decide.choose import decide
from core.decide.model import Decision, Limits
from core.report import figures
from core.report.start import (
    RATING_THREADS,
    ReportFilters,
    breakdown_codes,
    kept_draws,
    read_votes_in_scope,
    scope_of,
    start_breakdown,
)
from core.report.patterns import battle_set
from core.report.style_section import style_for
from store import report_queries as Q
from store.db import Store


def build_decision(store: Store, filters: ReportFilters | None = None, *, mix: Mapping[str, float] | None = None,
                   mix_source: str | None = None, limits: Limits | None = None, models: Sequence[str] | None = None,
                   confidence: float = 0.95, rounds: int = R.DEFAULT_ROUNDS, seed: int | None = 0,
                   prices: Mapping[str, Any] | None = None, style_control: bool = False,
                   style_recipe: str = DEFAULT_RECIPE, cache: bool = True) -> Decision:
    """Read the store and decide (see `core.decide.choose.decide`)."""
    filters, votes, demo_skipped, problems, demo = read_votes_in_scope(store, filters or ReportFilters(),
                                                                       with_ids=style_control)
    scope = scope_of(filters)
    with ThreadPoolExecutor(RATING_THREADS, "lineup-decide-ratings") as pool:
        bs, used, bad = battle_set(votes)
        draws = kept_draws(cache, rounds, seed)
        found = start_breakdown(pool, bs, votes, used, "by_category", rounds, seed, draws) if bs.n_votes else {}
        whole = pool.submit(R.rate, bs, rounds=rounds, seed=seed, cache=draws) if None in found.values() else None
        # while the ratings compute: the answers' side
        outputs = Q.read_outputs(store, scope)
        engineering = figures.engineering(outputs, lambda: Q.recorded_prices(store), prices or {})
        checks = figures.checks(outputs, Q.check_rows(store, scope))[0]
        results = {name: (whole.result() if fut is None and whole is not None else fut.result())  # type: ignore[union-attr]
                   for name, fut in found.items()}
    style = {}
    if style_control and votes.ids is not None:
        index, code = breakdown_codes(votes, used, "by_category")
        for name, result in list(results.items()):
            idx = np.flatnonzero(code == index[name])
            sub = bs if idx.size == bs.n_votes else bs.subset(idx)
            ids = [votes.ids[used[i]] for i in idx.tolist()]
            sub_seed = seed if idx.size == bs.n_votes else R.stream_seed(seed, name)
            styled = style_for(store, sub, ids, result, rounds=rounds, seed=sub_seed, recipe=style_recipe)
            if styled is None:
                problems.append(f"category {name}: no vote has the texts of the answers it judged; "
                                "its plain ratings are used")
                continue
            style[name], results[name] = styled
    decision = decide(results, engineering, checks, mix=mix, mix_source=mix_source, limits=limits, models=models,
                      confidence=confidence, rounds=rounds, seed=seed)
    decision.warnings = problems + bad + decision.warnings
    if demo_skipped and not filters.include_demo:
        decision.warnings.append(f"{demo_skipped} demo-model votes left out (--include-demo counts them)")
    decision.demo = demo
    if style_control:
        decision.style_control = True
        decision.style_by_category = style
    return decision
