"""The report as tables in a terminal (what `lineup report` prints).

Why a module of its own: a renderer is a plain function of the model
(`print_report(report)`), and Rich is loaded only when tables are printed
(`--json` never imports this). Every recorded string goes in as a Rich
`Text` built from `core.ground.text.one_line` (never markup), so a name holding
`[bold]` or an escape sequence prints as it is, made visible."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from core.stats.ratings import Gap, ModelRating
from core.report import agreement as AG
from core.report.decision_terminal import print_decision_section, print_matchups, print_style
from core.report.format import fmt, fmt_ci, fmt_rank, fold_at, gap_hint, pct
from core.report.model import DEMO_NOTE, Report
from core.report.public_section import print_public
from core.report.stretch import Block, stretch_blocks
from core.report.tables import CELL, EDGE, natural_widths
from core.report import dimensions as DIM
from core.report.structured import HEADER as STRUCTURED_HEADER
from core.report.structured import table_rows as structured_table
from core.ground.text import one_line


def _t(value: Any) -> Text:
    """A recorded value as inert text on one line."""
    return Text(one_line(value))


def _left_if(left: bool) -> JustifyMethod:
    return "left" if left else "right"


def print_report(report: Report, console: Console | None = None) -> None:
    """Rich tables on `console` (default: standard output; piped into a file,
    160 columns wide so that every column has room and names are never cut),
    one section after another, each drawn by its own function."""
    if console is None:
        console = Console(highlight=False, soft_wrap=False)
        if not console.is_terminal:
            console = Console(highlight=False, soft_wrap=False, width=160)

    if report.demo:
        console.print(Text(one_line(DEMO_NOTE), style="bold reverse"))
    if report.message:
        console.print(Text(report.message))
    for warning in report.warnings:
        console.print(Text("warning: " + one_line(warning), style="yellow"))

    if report.models:
        _ratings_table(console, f"Ratings ({report.votes_used} vote{'s' if report.votes_used != 1 else ''}, "
                                f"{report.rounds} bootstrap round{'s' if report.rounds != 1 else ''}, "
                                f"seed {report.seed})", report.models, report.gaps)
    if report.style is not None:
        print_style(report.style, console)
    print_matchups(report.matchups, console)
    print_public(report.public, console)
    if report.decision is not None and report.models:
        console.print(Text("Decision, for the mix of these votes (`lineup decide` for your own mix and limits)",
                           style="bold underline"))
        print_decision_section(report.decision, console)
    for label, tables in (("category", report.by_category), ("rater", report.by_rater)):
        if len(tables) > 1:
            for name, tab in tables.items():
                _ratings_table(console, f"Ratings, {label} {name}", tab.models, tab.gaps)
    for section in (_print_position_bias, _print_consistency, _print_agreement, _print_failure_modes,
                    _print_engineering, _print_checks, _print_structured, _print_dimensions, _print_stability):
        section(report, console)
    print_blocks(stretch_blocks(report), console)


def _ratings_table(console: Console, title: str, models: Sequence[ModelRating], gaps: Sequence[Gap]) -> None:
    """A ratings table, each model's notes and the gaps not separated under it."""
    table = Table(title=Text(one_line(title)), title_justify="left")
    header = ("rank", "model", "rating", "95% CI", "votes", "W", "T", "L", "group")
    for col in header:
        table.add_column(col, justify=_left_if(col == "model"), no_wrap=col != "model", overflow="fold")
    rows = [[fmt_rank(m), one_line(m.name), fmt(m.rating), fmt_ci(m), str(m.votes), str(m.wins), str(m.ties),
             str(m.losses), str(m.group + 1)] for m in models]
    # what the figures leave the names (each column its text, padding either side and a border):
    # a longer name is broken after its "/" or "-", not mid-word
    room = console.width - EDGE - CELL - sum(w + CELL for k, w in enumerate(natural_widths(header, rows)) if k != 1)
    for r in rows:
        if cell_len(r[1]) > room >= 8:      # at most three lines: a record's name may be any length
            r[1] = fold_at(set_cell_size(r[1], 3 * room - 1) + "…" if cell_len(r[1]) > 3 * room else r[1], room)
        table.add_row(*(Text(c) for c in r))
    console.print(table)
    for m in models:   # notes under the table: a column of prose squeezes the figures
        if m.notes:
            console.print(_t(f"  {m.name}: " + "; ".join(m.notes)))
    for g in gaps:
        if not g.separated:
            console.print(_t("  " + gap_hint(g)))


def _print_position_bias(report: Report, console: Console) -> None:
    """Single-winner votes by screen position against chance."""
    if not report.position_bias.rows:
        return
    table = Table(title="Position bias (single-winner votes)", title_justify="left")
    for col in ("position", "votes", "wins", "win rate", "95% interval", "expected"):
        table.add_column(col, justify="right")
    for p in report.position_bias.rows:
        table.add_row(_t(p.position + 1), _t(p.votes), _t(p.wins), _t(pct(p.win_rate)),
                      _t(f"{pct(p.ci_low)} .. {pct(p.ci_high)}"), _t(pct(p.expected)))
    console.print(table)


def _print_consistency(report: Report, console: Console) -> None:
    """The same rater on the same prompt and models, and raters between them."""
    c = report.consistency
    if not (c.raters or c.inter_rater_pairs):
        return
    table = Table(title="Rater consistency (same prompt and models judged twice)", title_justify="left")
    for col in ("rater", "judged twice", "same verdict", "rate"):
        table.add_column(col, justify=_left_if(col == "rater"))
    for x in c.raters:
        table.add_row(_t(x.rater), _t(x.repeated), _t(x.agreed), _t(pct(x.rate)))
    if c.inter_rater_pairs:
        table.add_row(_t("(between raters)"), _t(c.inter_rater_pairs), _t(c.inter_rater_agreed),
                      _t(pct(c.inter_rater_rate)))
    console.print(table)


def _print_agreement(report: Report, console: Console) -> None:
    """Krippendorff's alpha between raters, and per pair."""
    if not report.agreement.units:
        return
    table = Table(title="Agreement between raters", title_justify="left",
                  caption=_t(AG.summary_line(report.agreement)), caption_justify="left")
    for i, col in enumerate(AG.PAIR_HEADER):
        table.add_column(col, justify=_left_if(i == 0))
    for row in AG.pair_rows(report.agreement):
        table.add_row(*(_t(c) for c in row))
    console.print(table)


def _print_failure_modes(report: Report, console: Console) -> None:
    """Tags as a share of each model's answers."""
    if not any(f.tags for f in report.failure_modes):
        return
    table = Table(title="Failure modes (share of answers)", title_justify="left")
    table.add_column("model")
    table.add_column("answers", justify="right")
    table.add_column("tagged", justify="right")
    table.add_column("tags")
    for f in report.failure_modes:
        table.add_row(_t(f.model), _t(f.answers), _t(pct(f.tagged / f.answers if f.answers else None)),
                      _t(", ".join(f"{k} {s.count} ({100 * s.rate:.0f}%)" for k, s in f.tags.items())))
    console.print(table)


def _print_engineering(report: Report, console: Console) -> None:
    """Speed, errors and cost per model."""
    if not report.engineering:
        return
    table = Table(title="Speed, errors and cost", title_justify="left")
    for col in ("model", "requests", "errors", "TTFT p50/p95 ms", "tok/s p50", "duration p50 ms",
                "tokens out", "cost"):
        table.add_column(col, justify=_left_if(col == "model"))
    for e in report.engineering:
        kinds = ", ".join(f"{k} {v}" for k, v in e.errors_by_kind.items())
        ttft = (f"{fmt(e.ttft_ms.p50)}/{fmt(e.ttft_ms.p95)}" if e.ttft_ms else "-")
        table.add_row(_t(e.model), _t(e.requests), _t(pct(e.error_rate) + (f" ({kinds})" if kinds else "")),
                      _t(ttft), _t(fmt(e.output_tokens_per_s_p50, 1)),
                      _t(fmt(e.duration_ms.p50 if e.duration_ms else None)), _t(f"{e.output_tokens:,}"),
                      _t("-" if e.cost is None else f"${e.cost:.4f}"))
    console.print(table)


def _print_checks(report: Report, console: Console) -> None:
    """Automated checks per model, check and category."""
    if not report.checks:
        return
    table = Table(title="Automated checks", title_justify="left")
    for col in ("model", "check", "passed", "rate"):
        table.add_column(col, justify=_left_if(col not in ("passed", "rate")))
    for r in report.checks:
        table.add_row(_t(r.model), _t(r.check or "all"), _t(f"{r.passed}/{r.total}"), _t(pct(r.rate)))
    for r in report.checks_by_category:
        table.add_row(_t(r.model), _t(f"category {r.category}"), _t(f"{r.passed}/{r.total}"), _t(pct(r.rate)))
    console.print(table)


def _print_structured(report: Report, console: Console) -> None:
    """Structured output rates with Wilson intervals."""
    if not report.structured:
        return
    table = Table(title="Structured output (Wilson 95% intervals)", title_justify="left")
    for col in STRUCTURED_HEADER:
        table.add_column(col, justify=_left_if(col == "model"))
    for row in structured_table(report.structured):
        table.add_row(*(_t(c) for c in row))
    console.print(table)


def _print_dimensions(report: Report, console: Console) -> None:
    """Scores on the sets' dimensions, people and judges apart, and their agreement."""
    if not report.dimensions.scores:
        return
    for title, header, rows in (
            ("Scored dimensions (1-5; bootstrap 95% intervals)", DIM.SCORE_HEADER, DIM.score_cells(report.dimensions)),
            ("Agreement on scores (Krippendorff's alpha, interval)", DIM.AGREEMENT_HEADER,
             DIM.agreement_cells(report.dimensions)),
            *((("Judges beside people on the same answers", DIM.JUDGE_HEADER, DIM.judge_cells(report.dimensions)),)
              if report.dimensions.judges else ()),
            *DIM.confusion_tables(report.dimensions)):
        table = Table(title=Text(title), title_justify="left")      # a judge's name is in a confusion title
        for col in header:
            table.add_column(col, justify=_left_if(col in ("model", "dimension", "rater", "judge", "flag", "people")))
        for row in rows:
            table.add_row(*(_t(c) for c in row))
        console.print(table)


def _print_stability(report: Report, console: Console) -> None:
    """How much repeats of one case differ."""
    if not report.stability:
        return
    table = Table(title="Stability over repeats", title_justify="left")
    for col in ("model", "cases", "runs", "identical", "similarity mean/min", "flaky checks",
                "pass-rate sd mean/max"):
        table.add_column(col, justify=_left_if(col == "model"))
    for s in report.stability:
        table.add_row(_t(s.model), _t(s.cases), _t(s.runs), _t(pct(s.exact_match_rate)),
                      _t(f"{fmt(s.mean_similarity, 2)} / {fmt(s.min_similarity, 2)}"),
                      _t(f"{s.flaky_checks}/{s.checks}"),
                      _t(f"{fmt(s.pass_rate_sd_mean, 2)} / {fmt(s.pass_rate_sd_max, 2)}"))
    console.print(table)


def print_blocks(blocks: Sequence[Block], console: Console) -> None:
    """The judge and rater-quality sections (`core.report.stretch`) as Rich
    text and tables, every string inert (`one_line`, never markup)."""
    title: str | None = None
    for b in blocks:
        if b.kind == "h2":
            console.print(Text(one_line(b.text), style="bold"))
            title = None
        elif b.kind == "h3":
            title = b.text
        elif b.kind == "p":
            if title is not None:
                console.print(Text(one_line(title), style="italic"))
                title = None
            console.print(Text(one_line(b.text)))
        else:
            table = Table(title=Text(one_line(title)) if title else None, title_justify="left")
            title = None
            for i, h in enumerate(b.header):
                table.add_column(one_line(h), justify=_left_if(i == 0))
            for row in b.rows:
                table.add_row(*(_t(c) for c in row))
            console.print(table)
