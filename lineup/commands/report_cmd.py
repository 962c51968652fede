"""`lineup report`: ratings with intervals, failure modes, speed, cost and
checks, from the record. Tables in the terminal; `--json`, `--md FILE` and
`--html FILE` to share. Heavy imports (numpy, rich) happen inside `run`."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", action="append", default=[], metavar="ID",
                        help="only these sessions (id or unique prefix; repeatable)")
    parser.add_argument("--category", help="only turns of this category")
    parser.add_argument("--rater", help="only this rater's votes and tags")
    parser.add_argument("--since", metavar="DATE", help="only votes and answers from this date/time on "
                                                        "(ISO 8601, e.g. 2025-01-31 or 2025-01-31T14:00)")
    parser.add_argument("--include-demo", action="store_true", help="count votes and answers of demo models")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                        help="bootstrap rounds for the intervals (default 1000; 0 = none)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="bootstrap seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--md", metavar="FILE", help="write a Markdown report")
    parser.add_argument("--html", metavar="FILE", help="write a self-contained HTML page with charts")
    parser.add_argument("--tui", action="store_true",
                        help="open the report screen (charts) in the terminal app instead of printing")


def parse_since(text: str) -> float:
    """ISO date or date-time (local time when no offset) -> epoch seconds."""
    from core.errors import UsageError

    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--since: {text!r} is not a date (use e.g. 2025-01-31 or 2025-01-31T14:00)") from None
    return when.timestamp()


def _single_threaded_blas() -> None:
    """The fits solve thousands of tiny systems; a multi-threaded BLAS only adds
    contention (measured: the 100k-vote report ran ~2x slower on a busy 2-core
    machine). Effective only if numpy is not loaded yet; an explicit setting wins."""
    if "numpy" not in sys.modules:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")


def run(args: argparse.Namespace) -> int:
    _single_threaded_blas()
    from core.errors import UsageError
    from core.report import ReportFilters, build_report
    from store import Store, StoreError, default_db_path

    if args.bootstrap < 0:
        raise UsageError("--bootstrap must be 0 or more")
    if args.tui and (args.json or args.md or args.html):
        raise UsageError("--tui shows the report on screen: use it without --json, --md or --html")
    since = parse_since(args.since) if args.since else None
    path = Path(args.db).expanduser() if args.db else default_db_path()
    if not path.exists():
        print(f"No database at {path} yet: nothing to report. Compare models with `lineup chat` "
              "or `lineup run`, then vote.")
        return 0
    try:
        store = Store.open(path, readonly=True)
    except StoreError as exc:   # not SQLite, not lineup's, from a newer lineup: bad input
        raise UsageError(str(exc)) from None
    try:
        try:
            sessions = [store.resolve_session(s) for s in args.session]
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        filters = ReportFilters(sessions=sessions, category=args.category, rater=args.rater, since=since,
                                include_demo=args.include_demo)
        if not args.tui:
            report = build_report(store, filters, rounds=args.bootstrap, seed=args.seed,
                                  prices=_config_prices(args))
    finally:
        store.close()
    if args.tui:
        return _run_tui(args, path, filters)

    for target, text in ((args.md, report.to_markdown), (args.html, report.to_html)):
        if target:
            try:
                Path(target).expanduser().write_text(text(), encoding="utf-8")
            except OSError as exc:
                print(f"lineup report: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
                return 1
    if args.json:
        print(report.to_json())
        return 0
    print_report(report)
    for target in (args.md, args.html):
        if target:
            print(f"wrote {target}")
    return 0


def _run_tui(args: argparse.Namespace, path: Path, filters) -> int:
    """The app opened straight on the report screen (Textual imported only here)."""
    from core.config import Config, ConfigError, load_config
    from lineup.launch import run_app
    from tui.app import ReportOptions

    try:
        config = load_config(args.config)
    except ConfigError as exc:   # as for the printed report: only the prices are lost
        print(f"lineup report: config not used for prices ({exc})", file=sys.stderr)
        config = Config()
    options = ReportOptions(rounds=args.bootstrap, seed=args.seed, include_demo=filters.include_demo,
                            category=filters.category, sessions=filters.sessions, rater=filters.rater,
                            since=filters.since)
    return run_app(path, config, report=options)


def _config_prices(args: argparse.Namespace) -> dict:
    """alias -> Price from the config, for answers with no recorded cost. A
    broken config only costs the prices: the report still runs."""
    from core.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"lineup report: config not used for prices ({exc})", file=sys.stderr)
        return {}
    return {alias: m.price for alias, m in config.models.items() if m.price is not None}


def print_report(report) -> None:
    """Rich tables; every recorded string goes in as `Text` (never markup),
    with control characters made visible."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from core.report import fmt, fmt_ci, fmt_rank, gap_hint, pct
    from core.text import one_line

    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:   # piped into a file: room for every column, names never cut
        console = Console(highlight=False, soft_wrap=False, width=160)

    def t(value) -> Text:
        return Text(one_line(value))

    if report.message:
        console.print(Text(report.message))
    for warning in report.warnings:
        console.print(Text("warning: " + one_line(warning), style="yellow"))

    def ratings_table(title: str, models, gaps) -> None:
        table = Table(title=Text(one_line(title)), title_justify="left")
        for col, just in (("rank", "right"), ("model", "left"), ("rating", "right"), ("95% CI", "right"),
                          ("votes", "right"), ("W", "right"), ("T", "right"), ("L", "right"),
                          ("group", "right")):
            table.add_column(col, justify=just, no_wrap=col != "model", overflow="fold")
        for m in models:
            table.add_row(t(fmt_rank(m)), t(m.name), t(fmt(m.rating)), t(fmt_ci(m)), t(m.votes),
                          t(m.wins), t(m.ties), t(m.losses), t(m.group + 1))
        console.print(table)
        for m in models:   # notes under the table: a column of prose squeezes the figures
            if m.notes:
                console.print(t(f"  {m.name}: " + "; ".join(m.notes)))
        for g in gaps:
            if not g.separated:
                console.print(t("  " + gap_hint(g)))

    if report.models:
        ratings_table(f"Ratings ({report.votes_used} votes, {report.rounds} bootstrap rounds, seed {report.seed})",
                      report.models, report.gaps)
    for label, tables in (("category", report.by_category), ("rater", report.by_rater)):
        if len(tables) > 1:
            for name, tab in tables.items():
                ratings_table(f"Ratings, {label} {name}", tab.models, tab.gaps)
    if report.position_bias.rows:
        table = Table(title="Position bias (single-winner votes)", title_justify="left")
        for col in ("position", "votes", "wins", "win rate", "95% interval", "expected"):
            table.add_column(col, justify="right")
        for p in report.position_bias.rows:
            table.add_row(t(p.position + 1), t(p.votes), t(p.wins), t(pct(p.win_rate)),
                          t(f"{pct(p.ci_low)} .. {pct(p.ci_high)}"), t(pct(p.expected)))
        console.print(table)
    c = report.consistency
    if c.raters or c.inter_rater_pairs:
        table = Table(title="Rater consistency (same prompt and models judged twice)", title_justify="left")
        for col in ("rater", "judged twice", "same verdict", "rate"):
            table.add_column(col, justify="left" if col == "rater" else "right")
        for x in c.raters:
            table.add_row(t(x.rater), t(x.repeated), t(x.agreed), t(pct(x.rate)))
        if c.inter_rater_pairs:
            table.add_row(t("(between raters)"), t(c.inter_rater_pairs), t(c.inter_rater_agreed),
                          t(pct(c.inter_rater_rate)))
        console.print(table)
    if any(f.tags for f in report.failure_modes):
        table = Table(title="Failure modes (share of answers)", title_justify="left")
        table.add_column("model")
        table.add_column("answers", justify="right")
        table.add_column("tagged", justify="right")
        table.add_column("tags")
        for f in report.failure_modes:
            table.add_row(t(f.model), t(f.answers), t(pct(f.tagged / f.answers if f.answers else None)),
                          t(", ".join(f"{k} {s.count} ({100 * s.rate:.0f}%)" for k, s in f.tags.items())))
        console.print(table)
    if report.engineering:
        table = Table(title="Speed, errors and cost", title_justify="left")
        for col in ("model", "requests", "errors", "TTFT p50/p95 ms", "tok/s p50", "duration p50 ms",
                    "tokens out", "cost"):
            table.add_column(col, justify="left" if col == "model" else "right")
        for e in report.engineering:
            kinds = ", ".join(f"{k} {v}" for k, v in e.errors_by_kind.items())
            ttft = (f"{fmt(e.ttft_ms.p50)}/{fmt(e.ttft_ms.p95)}" if e.ttft_ms else "-")
            table.add_row(t(e.model), t(e.requests), t(pct(e.error_rate) + (f" ({kinds})" if kinds else "")),
                          t(ttft), t(fmt(e.output_tokens_per_s_p50, 1)),
                          t(fmt(e.duration_ms.p50 if e.duration_ms else None)), t(f"{e.output_tokens:,}"),
                          t("-" if e.cost is None else f"${e.cost:.4f}"))
        console.print(table)
    if report.checks:
        table = Table(title="Automated checks", title_justify="left")
        for col in ("model", "check", "passed", "rate"):
            table.add_column(col, justify="right" if col in ("passed", "rate") else "left")
        for x in report.checks:
            table.add_row(t(x.model), t(x.check or "all"), t(f"{x.passed}/{x.total}"), t(pct(x.rate)))
        for x in report.checks_by_category:
            table.add_row(t(x.model), t(f"category {x.category}"), t(f"{x.passed}/{x.total}"), t(pct(x.rate)))
        console.print(table)
    if report.structured:
        from core.structured import HEADER, table_rows

        table = Table(title="Structured output (Wilson 95% intervals)", title_justify="left")
        for col in HEADER:
            table.add_column(col, justify="left" if col == "model" else "right")
        for row in table_rows(report.structured):
            table.add_row(*(t(c) for c in row))
        console.print(table)
    if report.stability:
        table = Table(title="Stability over repeats", title_justify="left")
        for col in ("model", "cases", "runs", "identical", "similarity mean/min", "flaky checks",
                    "pass-rate sd mean/max"):
            table.add_column(col, justify="left" if col == "model" else "right")
        for s in report.stability:
            table.add_row(t(s.model), t(s.cases), t(s.runs), t(pct(s.exact_match_rate)),
                          t(f"{fmt(s.mean_similarity, 2)} / {fmt(s.min_similarity, 2)}"),
                          t(f"{s.flaky_checks}/{s.checks}"),
                          t(f"{fmt(s.pass_rate_sd_mean, 2)} / {fmt(s.pass_rate_sd_max, 2)}"))
        console.print(table)
