"""The report's first step: the votes the filters select, read, and their
ratings' bootstraps started in worker threads (`start_ratings`).

Why a module of its own: it imports only the store's reads, the vote
patterns and the ratings (numpy), not the sections or the data model. So a
command can start the bootstraps, most of whose time is numpy without the
GIL, and load the rest of the report while they run: on 100k votes the
report's other modules take about as long to import as one bootstrap takes
to draw (`lineup report`, `lineup decide`; `build_report(started=...)`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, Field

from core.stats import ratings as R
from core.report.patterns import Votes, battle_set, read_votes
from store import report_queries as Q
from store.db import Store

#: Ratings computed at the same time (each is numpy work that mostly releases the GIL).
RATING_THREADS = min(2, os.cpu_count() or 1)

#: The category of turns that have none, in the per-category tables.
NO_CATEGORY = "(none)"


class ReportFilters(BaseModel):
    sessions: list[str] = Field(default_factory=list, description="session ids (resolved)")
    category: str | None = None
    rater: str | None = None
    since: float | None = Field(default=None, description="epoch seconds")
    include_demo: bool = False


def scope_of(filters: ReportFilters) -> Q.Scope:
    return Q.Scope(sessions=tuple(filters.sessions), category=filters.category, rater=filters.rater,
                   since=filters.since, include_demo=filters.include_demo)


def read_votes_in_scope(store: Store, filters: ReportFilters, *,
                        with_ids: bool = False) -> tuple[ReportFilters, Votes, int, list[str], bool]:
    """The votes the filters select: (the filters used, the votes, demo votes
    left out, warnings, demo). Demo votes are left out unless asked for, but
    when every vote in scope is on demo models they are read instead and the
    filters include them (`demo` True): an empty report after trying lineup
    on its demo models says nothing, a report marked demo shows what it does."""
    votes, demo_skipped, problems = read_votes(store, scope_of(filters), with_ids=with_ids)
    if len(votes) or not demo_skipped or filters.include_demo:
        return filters, votes, demo_skipped, problems, False
    filters = filters.model_copy(update={"include_demo": True})
    votes, _, problems = read_votes(store, scope_of(filters), with_ids=with_ids)
    return filters, votes, 0, problems, True


Rated = Future[R.RatingResult]

#: How the votes are split for each breakdown: (category, rater, prompt) -> its name.
BREAKDOWNS: dict[str, Callable[[tuple], str]] = {"by_category": lambda m: m[0] or NO_CATEGORY,
                                                 "by_rater": lambda m: m[1]}


def breakdown_codes(votes: Votes, used: np.ndarray, attr: str) -> tuple[dict[str, int], np.ndarray]:
    """The parts of a breakdown ({name: code}, sorted by name) and the code of
    each vote of the `BattleSet` (`used`: its votes' indices into `votes`)."""
    key = BREAKDOWNS[attr]
    name_of_meta = [key(m) for m in votes.metas]
    index = {name: k for k, name in enumerate(sorted(set(name_of_meta)))}
    code = np.array([index[n] for n in name_of_meta], dtype=np.int64)[votes.meta[used]]
    return index, code


def kept_draws(wanted: bool, rounds: int, seed: int | None) -> R.DrawStore | None:
    """The user's kept bootstrap rounds, when wanted and they can be: a
    seeded bootstrap (a fresh stream is new draws by design)."""
    if not wanted or rounds <= 0 or seed is None:
        return None
    from core.report.draw_cache import open_draw_cache

    return open_draw_cache()


def start_breakdown(pool: ThreadPoolExecutor, bs: R.BattleSet, votes: Votes, used: np.ndarray, attr: str,
                    rounds: int, seed: int | None, cache: R.DrawStore | None = None) -> dict[str, Rated | None]:
    """The ratings of each part of the votes (`attr`: "by_category" or
    "by_rater"), started in `pool`: {name: its ratings, or None when its votes
    are all the votes (the whole's table)}. A category's bootstrap is seeded
    from (seed, its name) (`core.stats.ratings.stream_seed`), so that categories
    draw independently of each other: P(best) for a mix combines them round
    by round (`core.decide.choose`)."""
    index, code = breakdown_codes(votes, used, attr)
    present = np.bincount(code, minlength=len(index))
    found: dict[str, Rated | None] = {}
    for name, k in index.items():
        if present[k]:
            # None: the same votes as the whole, so the same table
            sub_seed = R.stream_seed(seed, name) if attr == "by_category" else seed
            found[name] = None if present[k] == used.size else pool.submit(
                _rate_part, bs, np.flatnonzero(code == k), rounds, sub_seed, cache)
    return found


def _rate_part(bs: R.BattleSet, votes: np.ndarray, rounds: int, seed: int | None,
               cache: R.DrawStore | None) -> R.RatingResult:
    """The ratings of some of the votes; the subset taken in the worker, beside the others."""
    return R.rate(bs.subset(votes), rounds=rounds, seed=seed, cache=cache)


@dataclass
class Started:
    """The votes read and their ratings under way (`start_ratings`): what
    `build_report(started=...)` goes on from. It owns the worker threads:
    `build_report` shuts them down, or `close` does when it is not called."""

    filters: ReportFilters
    votes: Votes
    demo_skipped: int
    problems: list[str]
    demo: bool
    bs: R.BattleSet
    used: np.ndarray
    bad: list[str]
    pool: ThreadPoolExecutor
    overall: Rated
    breakdown: dict[str, dict[str, Rated | None]]
    asked: tuple = field(default=())   # (filters, rounds, seed, breakdowns, with_ids, cache): build_report checks it

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def start_ratings(store: Store, filters: ReportFilters, *, rounds: int = R.DEFAULT_ROUNDS,
                  seed: int | None = 0, breakdowns: bool = True, with_ids: bool = False,
                  cache: bool = True, pool_name: str = "lineup-report-ratings") -> Started:
    """Read the votes in scope and start their ratings: the whole and, with
    `breakdowns`, each category and each rater, two at a time in worker
    threads. `cache`: read rounds kept from an earlier run back
    (`core.report.draw_cache`)."""
    asked = (filters, rounds, seed, breakdowns, with_ids, cache)
    filters, votes, demo_skipped, problems, demo = read_votes_in_scope(store, filters, with_ids=with_ids)
    pool = ThreadPoolExecutor(RATING_THREADS, pool_name)
    try:
        bs, used, bad = battle_set(votes)
        draws = kept_draws(cache, rounds, seed)
        overall = pool.submit(R.rate, bs, rounds=rounds, seed=seed, cache=draws)
        breakdown: dict[str, dict[str, Rated | None]] = {}
        if breakdowns and bs.n_votes:
            for attr in BREAKDOWNS:
                breakdown[attr] = start_breakdown(pool, bs, votes, used, attr, rounds, seed, draws)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    return Started(filters, votes, demo_skipped, problems, demo, bs, used, bad, pool, overall, breakdown,
                   asked)
