"""`lineup report`: ratings with intervals, failure modes, speed, cost and
checks, from the record. Tables in the terminal; `--json`, `--md FILE` and
`--html FILE` to share. The report itself is `core.report` (built by
`build_report`, drawn by its renderers); heavy imports (numpy, rich) happen
inside `run`, Rich only when tables are printed, and the ratings' bootstraps
start (`core.report.start`) before the rest of the report is imported."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from lineup.commands import DEFAULT_STYLE_RECIPE, STYLE_RECIPES

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
    parser.add_argument("--judge", metavar="JUDGE", help="an LLM judge's alias (`lineup judge -m JUDGE`): its "
                        "agreement with people's votes and ratings combined with them (PPI)")
    parser.add_argument("--judge-prompt", metavar="HASH", help="with --judge: the prompt hash (or a prefix) to read "
                        "(default: the judge's newest prompt)")
    parser.add_argument("--min-judge-agreement", type=float, default=0.6, metavar="RATE",
                        help="flag a judge or grader as unreliable when its agreement with people is below RATE "
                             "(0 to 1, default 0.6): the share of people's votes it agrees with, or for scored "
                             "dimensions the share of answers it scores within one point of people")
    parser.add_argument("--style-control", action="store_true",
                        help="also fit ratings with style covariates (answer length, Markdown headers, list items, "
                             "bold spans) and show each covariate's effect and the style-adjusted ratings")
    parser.add_argument("--style-recipe", choices=STYLE_RECIPES, default=DEFAULT_STYLE_RECIPE, metavar="RECIPE",
                        help="with --style-control: lmarena (default) reproduces lmarena's published style control "
                             "(features (a - b) / (a + b + 1) over the conversation, standardised; length in tokens "
                             "where a tokenizer is installed, else words); lineup keeps lineup's first form "
                             "((a - b) / (a + b) of the voted answer)")
    parser.add_argument("--tui", action="store_true",
                        help="open the report screen (charts) in the terminal app instead of printing")


def parse_since(text: str) -> float:
    """ISO date or date-time (local time when no offset) -> epoch seconds."""
    from core.ground.errors import UsageError

    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--since: {text!r} is not a date (use e.g. 2025-01-31 or 2025-01-31T14:00)") from None
    return when.timestamp()


def run(args: argparse.Namespace) -> int:
    from lineup.commands import config_prices, db_path, open_readonly, resolve_sessions, single_threaded_blas

    single_threaded_blas()
    from core.ground.errors import UsageError
    # only the votes' reads and the ratings: the bootstraps start before the rest of the report loads
    from core.report.start import ReportFilters, start_ratings

    if args.bootstrap < 0:
        raise UsageError("--bootstrap must be 0 or more")
    if args.tui and (args.json or args.md or args.html):
        raise UsageError("--tui shows the report on screen: use it without --json, --md or --html")
    since = parse_since(args.since) if args.since else None
    path = db_path(args)
    if not path.exists():
        print(f"No database at {path} yet: nothing to report. Compare models with `lineup chat` "
              "or `lineup run`, then vote.")
        return 0
    store = open_readonly(path)
    try:
        sessions = resolve_sessions(store, args.session)
        filters = ReportFilters(sessions=sessions, category=args.category, rater=args.rater, since=since,
                                include_demo=args.include_demo)
        if args.judge_prompt and not args.judge:
            raise UsageError("--judge-prompt goes with --judge JUDGE")
        if not 0.0 <= args.min_judge_agreement <= 1.0:   # NaN is refused too
            raise UsageError("--min-judge-agreement must be between 0 and 1 (a share of comparisons)")
        if not args.tui:
            started = start_ratings(store, filters, rounds=args.bootstrap, seed=args.seed,
                                    with_ids=args.style_control)
            try:
                from core.report.build import build_report   # loads while the bootstraps draw
                prices = config_prices(args)
            except BaseException:
                started.close()
                raise
            report = build_report(store, filters, rounds=args.bootstrap, seed=args.seed,
                                  prices=prices, judge=args.judge, judge_prompt=args.judge_prompt,
                                  style_control=args.style_control, min_judge_agreement=args.min_judge_agreement,
                                  style_recipe=args.style_recipe, started=started)
    finally:
        store.close()
    if args.tui:
        return _run_tui(args, path, filters)

    for target, kind in ((args.md, "markdown"), (args.html, "html")):
        if target:
            render = _renderer(kind)   # loaded only when asked for: `--json` needs neither
            try:
                Path(target).expanduser().write_text(render(report), encoding="utf-8")
            except OSError as exc:
                print(f"lineup report: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
                return 1
    if args.json:
        print(report.to_json())
        return 0
    from core.report.terminal import print_report

    print_report(report)
    for target in (args.md, args.html):
        if target:
            print(f"wrote {target}")
    return 0


def _renderer(kind: str):
    """`render_markdown` or `render_html`, imported on first use (the HTML one
    loads Rich and the charts: tens of milliseconds `--json` does not pay)."""
    if kind == "html":
        from core.report import render_html
        return render_html
    from core.report import render_markdown
    return render_markdown


def _run_tui(args: argparse.Namespace, path: Path, filters) -> int:
    """The app opened straight on the report screen (Textual imported only here)."""
    from core.answering.config import Config, ConfigError, load_config
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
