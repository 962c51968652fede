"""Building the report from the store: `build_report(store, filters)`.

Why a module of its own: this is where the reads (`store.report_queries`),
the vote patterns (`core.report.patterns`), the ratings (`core.stats.ratings`) and
the figures (`core.report.figures`) meet to fill the model
(`core.report.model`); nothing here reads SQL or draws anything.

What counts:
- votes: current ones only (superseded votes dropped); votes involving a demo
  contestant are left out unless `include_demo`, or unless every vote in
  scope involves one: then they are all counted and the report is marked
  `demo` (a newcomer trying the demo models sees them, labelled as such);
- filters: sessions (ids or unique prefixes), turn category, rater (votes and
  tags), since (a vote's or an output's creation time);
- answers: the latest attempt per (turn, contestant); requests: every attempt
  that finished (complete, error, cancelled, interrupted).

Speed (100k votes, 20 models, 200k answers): the ratings of the whole, of
each category and of each rater are independent (each draws its own seeded
bootstrap), so they run in two threads, started as soon as the votes are
read (`core.report.start`, which a command calls before importing this
module); meanwhile this thread reads the answers' side and scans for values
out of range. The ratings are numpy work that mostly runs without the GIL,
the reading mostly holds it, so the two overlap instead of contending (two
reading threads would: their per-row hand-offs of the GIL cost more than
they save). Every figure is computed exactly as by one thread.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from core.stats import ratings as R
from core.decide.choose import decide
from core.stats.public_scores import public_scores
from core.report import figures
from core.report.agreement import Agreement, agreement
from core.report.dimensions import dimension_report
from core.report.graders import grader_agreement
from core.report.judge import DEFAULT_MIN_AGREEMENT
from core.report.judge import judge_report as judge_section
from core.report.matchups import matchups
from core.report.model import RatingTable, Report, ReportFilters
from core.report.patterns import Votes, read_votes
from core.report.rater_quality import rater_quality
from core.report.start import Started, scope_of, start_ratings
from core.report.style_section import style_for
from core.report.variants import variant_groups
from core.stats.style import DEFAULT_RECIPE, RECIPE_TEXT, StyleControl
from store import public_scores as P
from store import report_queries as Q
from store.db import Store

def rating_table(result: R.RatingResult) -> RatingTable:
    return RatingTable(models=result.models, groups=result.groups, gaps=result.gaps,
                       components=result.components, n_votes=result.n_votes, n_battles=result.n_battles,
                       warnings=result.warnings)


def build_report(store: Store, filters: ReportFilters | None = None, *, rounds: int = R.DEFAULT_ROUNDS,
                 seed: int | None = 0, prices: Mapping[str, Any] | None = None,
                 breakdowns: bool = True, judge: str | None = None, judge_prompt: str | None = None,
                 style_control: bool = False, min_judge_agreement: float | None = None,
                 style_recipe: str = DEFAULT_RECIPE, cache: bool = True, started: Started | None = None) -> Report:
    """Read the store and compute everything. `prices`: alias -> `Price` from
    the config, used when an answer has no recorded cost and its session
    recorded no price. `breakdowns=False` skips per-category / per-rater ratings;
    `style_control` adds the style fit (`core.stats.style`, by `style_recipe`) of the answers the votes judged.
    `judge`: an LLM judge's alias, for its section (calibration against
    people's votes, combined ratings); `judge_prompt` a prefix of the hash of
    the prompt to read (default: its newest); `min_judge_agreement` the
    agreement with people below which the judge is flagged (default
    `core.report.judge.DEFAULT_MIN_AGREEMENT`). `cache`: read the bootstrap's
    rounds back where these votes were rated before (`core.report.draw_cache`).
    `started`: the votes and ratings `core.report.start.start_ratings` began
    with these filters and arguments (it raises ValueError on others), or
    None to begin them here."""
    filters = filters or ReportFilters()
    if started is None:
        started = start_ratings(store, filters, rounds=rounds, seed=seed, breakdowns=breakdowns,
                                with_ids=style_control, cache=cache)
    elif started.asked != (filters, rounds, seed, breakdowns, style_control, cache):
        started.close()
        raise ValueError("build_report: `started` was begun with other filters or arguments")
    filters, votes, bs, used = started.filters, started.votes, started.bs, started.used
    problems = started.problems + started.bad
    scope = scope_of(filters)
    with started.pool as pool:
        report = Report(generated_at=time.time(), database=str(getattr(store, "path", "") or "") or None,
                        filters=filters, rounds=rounds, seed=seed, votes_demo_excluded=started.demo_skipped,
                        demo=started.demo)
        # The votes' own figures beside the ratings (numpy, mostly without the GIL)
        # and, in this thread, the answers' side read from the store.
        voted = pool.submit(_vote_figures, votes, rounds, seed)
        overall, breakdown = started.overall, started.breakdown
        (report.failure_modes, report.engineering, report.checks, report.checks_by_category,
         report.stability, report.structured) = _answer_figures(store, scope, prices if prices is not None else {})
        n_bad, named = Q.outputs_out_of_range(store, filters.sessions)
        report.position_bias, report.consistency, report.agreement = voted.result()
        whole = overall.result()
        table = rating_table(whole)
        results: dict[str, dict[str, R.RatingResult]] = {}
        for attr, found in breakdown.items():
            results[attr] = {name: whole if fut is None else fut.result() for name, fut in found.items()}
            setattr(report, attr, {name: table if fut is None else rating_table(results[attr][name])
                                   for name, fut in found.items()})
    report.models, report.groups, report.gaps = table.models, table.groups, table.gaps
    report.components = table.components
    report.votes_used = bs.n_votes
    report.warnings = table.warnings[:] if bs.n_votes else []
    report.warnings += problems
    report.warnings += report.agreement.warnings
    if n_bad:
        report.warnings.append(f"{n_bad} answer{'s' if n_bad != 1 else ''} with a time, duration or cost out of "
                               f"range (left out of the figures): {', '.join(named)}"
                               f"{' ...' if n_bad > len(named) else ''}")
    report.message = _message(store, report, filters)
    _stretch(store, scope, report, judge, judge_prompt, rounds, seed, min_judge_agreement)
    if bs.n_votes:
        report.matchups = matchups(bs, whole)
    if style_control and bs.n_votes and votes.ids is not None:
        styled = style_for(store, bs, [votes.ids[k] for k in used.tolist()], whole, rounds=rounds, seed=seed,
                           recipe=style_recipe)
        report.style = styled[0] if styled else StyleControl(
            recipe=style_recipe, recipe_text=RECIPE_TEXT[style_recipe],
            warnings=["no vote has the texts of the answers it judged: style control needs them"])
    if bs.n_votes:
        report.public = public_scores(P.read_leaderboard(store), P.read_online(store), whole)
    report.variants = variant_groups(report.models, Q.variant_bases(store, scope))
    if "by_category" in results:
        report.decision = decide(results["by_category"], report.engineering, report.checks, rounds=rounds,
                                 seed=seed)
        report.decision.demo = started.demo
    return report


def _stretch(store: Store, scope: Q.Scope, report: Report, judge: str | None, judge_prompt: str | None,
             rounds: int, seed: int | None, min_judge_agreement: float | None = None) -> None:
    """Issue 14's sections: how many judges' votes the figures leave out, the
    judge's section when asked, rater quality (gold pairs, blinding audit)."""
    from dataclasses import replace

    report.judge_votes_excluded = len(read_votes(store, replace(scope, rater=None, rater_kind="judge"))[0])
    if judge is not None:
        threshold = {} if min_judge_agreement is None else {"min_agreement": min_judge_agreement}
        report.judge = judge_section(store, scope, judge, rounds=rounds, seed=seed, prompt_hash=judge_prompt,
                                     **threshold)
    report.graders = grader_agreement(store, scope, DEFAULT_MIN_AGREEMENT if min_judge_agreement is None
                                      else min_judge_agreement)
    report.rater_quality = rater_quality(store, scope)
    report.dimensions = dimension_report(store, scope, rounds, seed, DEFAULT_MIN_AGREEMENT if min_judge_agreement
                                         is None else min_judge_agreement)


def _vote_figures(votes: Votes, rounds: int, seed: int | None) -> tuple[Any, Any, Agreement]:
    """Position bias, rater consistency and agreement: the votes alone."""
    return figures.position_bias(votes), figures.consistency(votes), rater_agreement(votes, rounds, seed)


def rater_agreement(votes: Votes, rounds: int, seed: int | None) -> Agreement:
    """Krippendorff's alpha between raters: a unit per (prompt, set of models shown)."""
    # A verdict per distinct pattern and a (prompt, rater) per distinct meta, not per vote: 100k votes
    # are a few thousand of each. `agreement` keeps a rater's last verdict in a unit, orders units and
    # raters by first appearance, and pairs only units two raters judged: one row per (prompt, rater,
    # models shown) of such a unit, where it first appears, with the verdict of its last vote, is the
    # same input for it (tests/test_report_digests.py), and its list of raters is every rater's.
    verdicts = [None if p.error is not None else (p.models, p.verdict()) for p in votes.patterns]
    metas = [(m[2], m[1]) for m in votes.metas]
    readable = np.array([found is not None for found in verdicts] + [False], dtype=bool)
    kept = np.flatnonzero(readable[votes.pattern]) if len(votes) else np.zeros(0, dtype=np.int64)
    shown = np.flatnonzero(np.bincount(votes.meta[kept], minlength=len(metas)))   # not np.unique: see patterns
    raters = sorted({metas[m][1] for m in shown.tolist()})
    rows = []
    if kept.size:
        asked, _ = Q.codes(metas)                                  # (prompt, rater) of each meta
        prompt, _ = Q.codes(m[0] for m in metas)
        shown, _ = Q.codes(found[0] if found is not None else None for found in verdicts)
        width = int(shown.max()) + 1
        pattern, meta = votes.pattern[kept], votes.meta[kept]
        key = asked[meta] * width + shown[pattern]                # (prompt, rater, models shown)
        _, first = np.unique(key, return_index=True)
        _, from_end = np.unique(key[::-1], return_index=True)
        last = key.size - 1 - from_end
        unit = (prompt[meta] * width + shown[pattern])[first]    # each key's (prompt, models shown)
        units, n_raters = np.unique(unit, return_counts=True)
        pairable = n_raters[np.searchsorted(units, unit)] >= 2
        for k in np.argsort(first, kind="stable").tolist():
            if pairable[k]:
                a, b = int(first[k]), int(last[k])
                models, _ = verdicts[int(pattern[a])]             # type: ignore[misc]
                rows.append(((metas[int(meta[a])][0], models), metas[int(meta[a])][1],
                             verdicts[int(pattern[b])][1]))        # type: ignore[index]
    out = agreement(rows, rounds=min(rounds, 1000), seed=seed)
    out.raters = raters
    return out


def _answer_figures(store: Store, scope: Q.Scope, prices: Mapping[str, Any]) -> tuple[Any, ...]:
    """Failure modes, engineering, checks (overall, by category), stability and structured output."""
    outputs = Q.read_outputs(store, scope)
    failure_modes = figures.failure_modes(outputs, Q.tag_rows(store, scope))
    engineering = figures.engineering(outputs, lambda: Q.recorded_prices(store), prices)
    checks, by_category, per_output, structured = figures.checks(outputs, Q.check_rows(store, scope))
    stability = figures.stability(Q.repeated_answers(store, scope), per_output,
                                  lambda ids: Q.answer_texts(store, ids))
    return failure_modes, engineering, checks, by_category, stability, structured


def _message(store: Store, report: Report, filters: ReportFilters) -> str | None:
    if report.models:
        return None
    if Q.session_count(store) == 0:
        return ("The database has no sessions yet: nothing to report. Compare models with "
                "`lineup chat` or `lineup run`, then vote.")
    if report.votes_demo_excluded and not filters.include_demo:
        return (f"Only demo-model votes match ({report.votes_demo_excluded}): demo models are left out "
                "of reports. Add --include-demo to see them anyway.")
    if Q.real_contestant_count(store) == 0 and not filters.include_demo:
        return ("Only demo models in this database: demo outputs are left out of reports. "
                "Add --include-demo to see them anyway.")
    filtered = any(v is not None and v != [] for v in (filters.sessions, filters.category, filters.rater,
                                                         filters.since))
    if filtered:
        return "No votes match these filters: no ratings."
    return "No votes yet: no ratings. Vote with `lineup vote` or in `lineup chat`."
