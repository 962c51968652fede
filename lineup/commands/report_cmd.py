"""`lineup report`: ratings with intervals, failure modes, speed, cost and
checks, from the record. Tables in the terminal; `--json`, `--md FILE` and
`--html FILE` to share. The report itself is `core.report` (built by
`build_report`, drawn by its renderers); heavy imports (numpy, rich) happen
inside `run`, Rich only when tables are printed."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path

#: `core.stats.style.RECIPES` and its default, named here so that parsing the
#: command line loads no numpy (tests/test_style_recipe.py checks they agree).
STYLE_RECIPES = ("lmarena", "lineup")
DEFAULT_STYLE_RECIPE = "lmarena"


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


def _single_threaded_blas() -> None:
    """The fits solve thousands of tiny systems; a multi-threaded BLAS only adds
    contention (measured: the 100k-vote report ran ~2x slower on a busy 2-core
    machine). Effective only if numpy is not loaded yet; an explicit setting wins."""
    if "numpy" not in sys.modules:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")


def run(args: argparse.Namespace) -> int:
    _single_threaded_blas()
    from core.ground.errors import UsageError
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
        if args.judge_prompt and not args.judge:
            raise UsageError("--judge-prompt goes with --judge JUDGE")
        if not args.tui:
            report = build_report(store, filters, rounds=args.bootstrap, seed=args.seed,
                                  prices=_config_prices(args), judge=args.judge, judge_prompt=args.judge_prompt,
                                  style_control=args.style_control,
                                  style_recipe=args.style_recipe)
    finally:
        store.close()
    if args.tui:
        return _run_tui(args, path, filters)

    from core.report import render_html, render_markdown

    for target, render in ((args.md, render_markdown), (args.html, render_html)):
        if target:
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


def _config_prices(args: argparse.Namespace) -> dict:
    """alias -> Price from the config, for answers with no recorded cost. A
    broken config only costs the prices: the report still runs."""
    from core.answering.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"lineup report: config not used for prices ({exc})", file=sys.stderr)
        return {}
    return {alias: m.price for alias, m in config.models.items() if m.price is not None}
