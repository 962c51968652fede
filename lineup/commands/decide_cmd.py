"""`lineup decide`: which model to ship for a traffic mix, within latency,
cost and check limits, and how sure that is (P(best)); the cheapest model
that cannot be told apart from the best, routing per category, and the
Pareto frontiers of quality against cost and latency. The decision itself
is `core.decide`; heavy imports happen inside `run`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lineup.commands import DEFAULT_STYLE_RECIPE, STYLE_RECIPES


def configure(parser: argparse.ArgumentParser) -> None:
    mix = parser.add_mutually_exclusive_group()
    mix.add_argument("--mix", nargs="+", metavar="CATEGORY=SHARE",
                     help="the traffic mix: each category's share (any positive numbers, scaled to sum to 1; "
                          "default: each category's share of the votes)")
    mix.add_argument("--mix-from", metavar="LOGS",
                     help="take the mix from request logs: each stratum's share of the records (with --by), "
                          "the strata `lineup sample` shows")
    parser.add_argument("--by", metavar="FIELD", help="the logs' field whose values are the categories (--mix-from)")
    parser.add_argument("--max-p95-ttft-ms", type=float, metavar="N", help="limit: p95 time to first token")
    parser.add_argument("--max-p95-duration-ms", type=float, metavar="N", help="limit: p95 duration of an answer")
    parser.add_argument("--max-cost-per-1k", type=float, metavar="N", help="limit: cost per 1,000 answers")
    parser.add_argument("--min-pass-rate", type=float, metavar="R", help="limit: share of check results passed (0-1)")
    parser.add_argument("--models", nargs="+", metavar="ALIAS", help="choose among these models only")
    parser.add_argument("--confidence", type=float, default=0.95, metavar="C",
                        help="how sure \"cannot be told apart\" must be, and the intervals (default 0.95)")
    parser.add_argument("--style-control", action="store_true",
                        help="decide on style-adjusted ratings (length and Markdown formatting accounted for)")
    parser.add_argument("--style-recipe", choices=STYLE_RECIPES, default=DEFAULT_STYLE_RECIPE, metavar="RECIPE",
                        help="with --style-control: lmarena (default) reproduces lmarena's published style control "
                             "(features (a - b) / (a + b + 1) over the conversation, standardised; length in tokens "
                             "where a tokenizer is installed, else words); lineup keeps lineup's first form "
                             "((a - b) / (a + b) of the voted answer)")
    parser.add_argument("--session", action="append", default=[], metavar="ID",
                        help="only these sessions (id or unique prefix; repeatable)")
    parser.add_argument("--include-demo", action="store_true", help="count votes and answers of demo models")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="bootstrap rounds (default 1000)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="bootstrap seed (default 0)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the decision as JSON")
    out.add_argument("--md", metavar="FILE", help="write the decision as Markdown")
    out.add_argument("--html", metavar="FILE", help="write the decision as a self-contained HTML page")


def _limits(args: argparse.Namespace):
    from core.decide.model import Limits
    from core.ground.errors import UsageError

    for name in ("max_p95_ttft_ms", "max_p95_duration_ms", "max_cost_per_1k"):
        value = getattr(args, name)
        if value is not None and not value >= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be 0 or more, not {value}")
    if args.min_pass_rate is not None and not 0.0 <= args.min_pass_rate <= 1.0:
        raise UsageError(f"--min-pass-rate must be between 0 and 1 (a share), not {args.min_pass_rate}")
    return Limits(max_p95_ttft_ms=args.max_p95_ttft_ms, max_p95_duration_ms=args.max_p95_duration_ms,
                  max_cost_per_1k=args.max_cost_per_1k, min_pass_rate=args.min_pass_rate)


def run(args: argparse.Namespace) -> int:
    from lineup.commands import config_prices, db_path, open_readonly, resolve_sessions, single_threaded_blas

    single_threaded_blas()
    from core.decide.mix import mix_from_logs, parse_mix
    from core.ground.errors import UsageError
    from core.exchange.logs import LogError
    from core.report import ReportFilters

    if args.bootstrap < 1:
        raise UsageError("--bootstrap must be at least 1: P(best) is counted over the bootstrap rounds")
    if not 0.0 < args.confidence < 1.0:
        raise UsageError(f"--confidence must be between 0 and 1, not {args.confidence}")
    if args.by and not args.mix_from:
        raise UsageError("--by goes with --mix-from LOGS")
    limits = _limits(args)
    mix = source = None
    try:
        if args.mix:
            mix, source = parse_mix(args.mix), "shares given"
        elif args.mix_from:
            if not args.by:
                raise UsageError("--mix-from needs --by FIELD: the field whose values are the categories")
            mix, source = mix_from_logs(args.mix_from, args.by)
    except LogError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    path = db_path(args)
    if not path.exists():
        raise UsageError(f"no database at {path}: nothing to decide on. Compare models with `lineup run`, "
                         "then vote.")
    store = open_readonly(path)
    from core.report.decision import build_decision

    try:
        sessions = resolve_sessions(store, args.session)
        filters = ReportFilters(sessions=sessions, include_demo=args.include_demo)
        decision = build_decision(store, filters, mix=mix, mix_source=source, limits=limits, models=args.models,
                                  confidence=args.confidence, rounds=args.bootstrap, seed=args.seed,
                                  prices=config_prices(args), style_control=args.style_control,
                                  style_recipe=args.style_recipe)
    finally:
        store.close()
    if mix is not None:
        known = set(decision.votes_by_category)
        unknown = [c for c in mix if c not in known]
        if unknown and not known & set(mix):
            from core.ground.text import one_line

            raise UsageError(f"no votes in any category of the mix ({one_line(', '.join(unknown))}); the "
                             f"votes' categories are: {one_line(', '.join(sorted(known))) or 'none'}")
    if args.json:
        print(decision.to_json())
        return 0
    if args.md or args.html:
        from core.report.decision_html import render_decision_html
        from core.report.decision_markdown import render_decision_markdown

        target = args.md or args.html
        text = render_decision_markdown(decision) if args.md else render_decision_html(decision)
        try:
            Path(target).expanduser().write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"lineup decide: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"wrote {target}")
        return 0
    from core.report.decision_terminal import print_decision

    print_decision(decision)
    return 0
