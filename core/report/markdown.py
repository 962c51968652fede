"""The report as Markdown: a heading, the warnings, the rating tables (per
category and per rater when there are several), position bias, rater
consistency, failure modes, speed/errors/cost, checks and stability.

Why a module of its own: a renderer is a plain function of the model
(`render_markdown(report)`), so the model needs no renderer and no renderer
needs another. Every recorded string (model names, categories, tags, checks,
warnings that quote them) goes through `core.ground.text.markdown_inline`: a pipe
or a backtick in a name cannot break the table, an escape cannot reach the
reader's terminal."""

from __future__ import annotations

from collections.abc import Sequence

from core.stats.ratings import Gap, ModelRating
from core.report import agreement as AG
from core.report.decision_markdown import decision_lines, matchups_lines, style_lines
from core.report.format import fmt, fmt_ci, fmt_rank, pct
from core.report.model import DEMO_NOTE, Report
from core.report.public_section import public_lines
from core.report.stretch import Block, stretch_blocks
from core.report import dimensions as DIM
from core.report.structured import HEADER as STRUCTURED_HEADER
from core.report.structured import table_rows as structured_table
from core.ground.text import markdown_inline


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _md_ratings(table_models: Sequence[ModelRating], gaps: Sequence[Gap]) -> list[str]:
    lines = _md_table(
        ["rank", "model", "rating", "95% interval", "votes", "W", "T", "L", "group", "notes"],
        [[fmt_rank(m), markdown_inline(m.name), fmt(m.rating), fmt_ci(m), str(m.votes), str(m.wins), str(m.ties),
          str(m.losses), str(m.group + 1), markdown_inline("; ".join(m.notes))] for m in table_models])
    close = [g for g in gaps if not g.separated]
    if close:
        lines.append("Adjacent models not yet separated (rough further votes needed at the current gap):")
        lines.append("")
        lines += [f"- {markdown_inline(g.upper)} vs {markdown_inline(g.lower)}: gap {g.gap:.0f}, "
                  f"{'not enough votes to estimate' if g.more_votes is None else f'~{g.more_votes:,} more votes'}"
                  for g in close]
        lines.append("")
    return lines


def render_markdown(r: Report) -> str:
    lines = ["# lineup report", ""]
    lines.append(f"Votes used: {r.votes_used}; bootstrap rounds: {r.rounds}; seed: {r.seed}. "
                 "Ratings: Bradley-Terry, Elo scale (mean 1000), 95% bootstrap intervals; a rank range "
                 "covers every rank the intervals allow.")
    lines.append("")
    if r.demo:
        lines += [f"> **{markdown_inline(DEMO_NOTE)}**", ""]
    if r.message:
        lines += [f"> {markdown_inline(r.message)}", ""]
    for w in r.warnings:
        lines += [f"- warning: {markdown_inline(w)}"]
    if r.warnings:
        lines.append("")
    if r.decision is not None and r.models:
        lines += decision_lines(r.decision)
    if r.models:
        lines += ["## Ratings", ""] + _md_ratings(r.models, r.gaps)
        ties = "; ".join("{" + ", ".join(markdown_inline(n) for n in g) + "}" for g in r.groups if len(g) > 1)
        lines += ["Cannot be told apart (overlapping intervals): " + (ties or "none"), ""]
    if r.style is not None:
        lines += style_lines(r.style)
    lines += matchups_lines(r.matchups)
    lines += public_lines(r.public)
    for title, tables in (("By category", r.by_category), ("By rater", r.by_rater)):
        if len(tables) > 1:
            lines += [f"## {title}", ""]
            for name, t in tables.items():
                lines += [f"### {markdown_inline(name)}", ""] + _md_ratings(t.models, t.gaps)
    if r.position_bias.rows:
        lines += ["## Position bias", ""]
        lines += _md_table(["position", "votes", "wins", "win rate", "95% interval", "expected"],
                           [[str(p.position + 1), str(p.votes), str(p.wins), pct(p.win_rate),
                             f"{pct(p.ci_low)} .. {pct(p.ci_high)}", pct(p.expected)]
                            for p in r.position_bias.rows])
    c = r.consistency
    if c.raters or c.inter_rater_pairs:
        lines += ["## Rater consistency", ""]
        lines += _md_table(["rater", "judged twice", "same verdict", "rate"],
                           [[markdown_inline(x.rater), str(x.repeated), str(x.agreed), pct(x.rate)] for x in c.raters])
        if c.inter_rater_pairs:
            lines += [f"Between raters: {c.inter_rater_agreed} of {c.inter_rater_pairs} pairs agree "
                      f"({pct(c.inter_rater_rate)}).", ""]
    if r.agreement.units:
        lines += ["## Agreement between raters", "", markdown_inline(AG.summary_line(r.agreement)), ""]
        lines += _md_table(AG.PAIR_HEADER, [[markdown_inline(c) for c in row] for row in AG.pair_rows(r.agreement)])
    if any(f.tags for f in r.failure_modes):
        lines += ["## Failure modes", ""]
        lines += _md_table(["model", "answers", "tagged", "tags (count, rate)"],
                           [[markdown_inline(f.model), str(f.answers), pct(f.tagged / f.answers if f.answers else None),
                             markdown_inline(", ".join(f"{t} {s.count} ({100 * s.rate:.0f}%)" for t, s in f.tags.items()))]
                            for f in r.failure_modes])
    if r.engineering:
        lines += ["## Speed, errors and cost", ""]
        lines += _md_table(
            ["model", "requests", "errors", "TTFT p50", "TTFT p95", "tok/s p50", "duration p50",
             "tokens in/out", "cost"],
            [[markdown_inline(e.model), str(e.requests),
              f"{pct(e.error_rate)}" + (f" ({markdown_inline(', '.join(f'{k} {v}' for k, v in e.errors_by_kind.items()))})"
                                        if e.errors_by_kind else ""),
              fmt(e.ttft_ms.p50 if e.ttft_ms else None) + " ms", fmt(e.ttft_ms.p95 if e.ttft_ms else None) + " ms",
              fmt(e.output_tokens_per_s_p50, 1), fmt(e.duration_ms.p50 if e.duration_ms else None) + " ms",
              f"{e.input_tokens:,} / {e.output_tokens:,}", "-" if e.cost is None else f"${e.cost:.4f}"]
             for e in r.engineering])
    if r.checks:
        lines += ["## Automated checks", ""]
        lines += _md_table(["model", "check", "passed", "rate"],
                           [[markdown_inline(x.model), markdown_inline(x.check or "all"), f"{x.passed}/{x.total}", pct(x.rate)]
                            for x in r.checks])
        if r.checks_by_category:
            lines += _md_table(["model", "category", "passed", "rate"],
                               [[markdown_inline(x.model), markdown_inline(x.category), f"{x.passed}/{x.total}", pct(x.rate)]
                                for x in r.checks_by_category])
    if r.structured:
        lines += ["## Structured output", "",
                  "Answers to cases with a `response_format`: valid against the schema, mean field completeness, "
                  "and each failure mode (an answer may have several), with Wilson 95% intervals.", ""]
        lines += _md_table(STRUCTURED_HEADER, [[markdown_inline(row[0]), *row[1:]]   # figures are ours: as they are
                                               for row in structured_table(r.structured)])
    if r.dimensions.scores:
        lines += ["## Scored dimensions", "",
                  "Scores from 1 to 5 on the sets' dimensions (a rater's latest on an answer), people and judges "
                  "apart: the mean with a bootstrap 95% interval over answers, and the sd of the per-repeat means.", ""]
        lines += _md_table(DIM.SCORE_HEADER, [[markdown_inline(c) for c in row]
                                              for row in DIM.score_cells(r.dimensions)])
        lines += ["Agreement between raters on the same answers (Krippendorff's alpha, interval metric):", ""]
        lines += _md_table(DIM.AGREEMENT_HEADER, [[markdown_inline(c) for c in row]
                                                  for row in DIM.agreement_cells(r.dimensions)])
        if r.dimensions.judges:
            lines += [DIM.JUDGES_NOTE, ""]
            lines += _md_table(DIM.JUDGE_HEADER, [[markdown_inline(c) for c in row]
                                                  for row in DIM.judge_cells(r.dimensions)])
            for title, header, rows in DIM.confusion_tables(r.dimensions):
                lines += [markdown_inline(title), ""]
                lines += _md_table(header, rows)
    if r.stability:
        lines += ["## Stability over repeats", ""]
        lines += _md_table(["model", "cases", "runs", "identical", "similarity (mean/min)", "flaky checks",
                            "pass-rate sd (mean/max)"],
                           [[markdown_inline(s.model), str(s.cases), str(s.runs), pct(s.exact_match_rate),
                             f"{fmt(s.mean_similarity, 2)} / {fmt(s.min_similarity, 2)}",
                             f"{s.flaky_checks}/{s.checks}",
                             f"{fmt(s.pass_rate_sd_mean, 2)} / {fmt(s.pass_rate_sd_max, 2)}"]
                            for s in r.stability])
    lines += _md_blocks(stretch_blocks(r))
    return "\n".join(lines).rstrip() + "\n"


def _md_blocks(blocks: Sequence[Block]) -> list[str]:
    """The judge and rater-quality sections (`core.report.stretch`), every string escaped."""
    lines: list[str] = []
    for b in blocks:
        if b.kind in ("h2", "h3"):
            lines += [f"{'##' if b.kind == 'h2' else '###'} {markdown_inline(b.text)}", ""]
        elif b.kind == "p":
            lines += [markdown_inline(b.text), ""]
        else:
            lines += _md_table([markdown_inline(h) for h in b.header],
                               [[markdown_inline(c) for c in row] for row in b.rows])
    return lines
