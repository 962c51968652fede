"""`lineup canary plan --incumbent A --candidate B --share 5`: the gateway
config (LiteLLM proxy) for an online canary.
`lineup canary report TRACES... --incumbent A --candidate B`: per arm and
category outcomes, an always-valid sequential test and its verdict, and the
offline result beside the online one (`core/decide/canary.py`)."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="canary_command", metavar="plan|report", required=True)
    plan = sub.add_parser("plan", help="write the gateway config that splits traffic between two models",
                          description="LiteLLM proxy's router config: a model group with the two arms weighted "
                                      "by --share, each arm's deployment id naming the experiment and arm")
    report = sub.add_parser("report", help="the canary's outcomes from its traces, the test and the verdict",
                            description="per arm and category: error rate, latency and TTFT percentiles, tokens, "
                                        "cost, feedback, with intervals; an always-valid sequential test of the "
                                        "candidate against the incumbent; the offline result beside the online")
    for p in (plan, report):
        p.add_argument("--db", default=argparse.SUPPRESS, help="database file (as for every command)")
        p.add_argument("--config", default=argparse.SUPPRESS, help="config.toml (as for every command)")
        p.add_argument("--incumbent", required=True, metavar="A",
                       help="the model in production: a lineup alias, or the gateway's model string")
        p.add_argument("--candidate", required=True, metavar="B", help="the model that would replace it")
        p.add_argument("--experiment", default=None, metavar="NAME",
                       help="the experiment's name: the model group clients call (default canary)")
    plan.add_argument("--share", type=float, required=True, metavar="PERCENT",
                      help="percent of requests sent to the candidate (0 < PERCENT < 100)")
    plan.add_argument("-o", "--output", metavar="config.yaml", help="write the config here (default: stdout)")
    report.add_argument("traces", nargs="+", metavar="TRACES",
                        help="trace exports: OpenTelemetry OTLP JSON, LangSmith runs, Langfuse, LiteLLM logs")
    report.add_argument("--metric", default="feedback", choices=["feedback", "errors", "latency", "ttft", "cost"],
                        help="what the sequential test compares (default feedback)")
    report.add_argument("--margin", type=float, default=0.0, metavar="M",
                        help="ship when the candidate is not worse than this, in the metric's units "
                             "(0.01 = 1 point of feedback; default 0: ship only when better)")
    report.add_argument("--alpha", type=float, default=0.05,
                        help="the test's level: a wrong ship (or stop) at most alpha/2 each, however often "
                             "the report is run (default 0.05)")
    report.add_argument("--category", metavar="PATH",
                        help="the field that holds a request's category (a path into its attributes or metadata)")
    report.add_argument("--feedback", metavar="FILE",
                        help="users' feedback joined on the trace id (JSONL or CSV: trace_id and score/thumbs)")
    report.add_argument("--feedback-field", metavar="PATH",
                        help="the field of a request that holds its feedback (thumbs or a score)")
    report.add_argument("--offline", action="store_true",
                        help="calibrate: the offline votes in the database for the same pair, per category")
    report.add_argument("--offline-pair", nargs=2, metavar=("A", "B"),
                        help="the pair's names offline when they differ (e.g. logged B)")
    report.add_argument("--session", action="append", default=[], metavar="ID",
                        help="with --offline: only these sessions' votes")
    report.add_argument("--judge-votes", action="store_true",
                        help="with --offline: an LLM judge's votes instead of people's")
    report.add_argument("--json", action="store_true", help="the report as JSON (schema lineup.canary/1)")


def run(args: argparse.Namespace) -> int:
    if args.canary_command == "plan":
        return _plan(args)
    return _report(args)


def _model_config(args: argparse.Namespace, name: str):
    """The lineup alias `name` from the config, or None (a gateway model string)."""
    from core.answering.config import ConfigError, load_config
    from core.ground.errors import UsageError

    try:
        config = load_config(args.config, probe_ollama=False)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return config.models.get(name)


def _plan(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from core.decide.canary import deployment, plan_config, to_yaml
    from core.ground.errors import UsageError
    from core.ground.text import one_line

    experiment = args.experiment or "canary"
    arms = [deployment(name, _model_config(args, name)) for name in (args.incumbent, args.candidate)]
    try:
        config = plan_config(experiment, arms[0], arms[1], args.share)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    text = (f"# lineup canary plan: {args.share:g}% of the requests to {experiment!r} go to the candidate.\n"
            f"# Each arm's deployment id ({experiment}-incumbent, {experiment}-candidate) is logged by LiteLLM\n"
            f"# as model_id: `lineup canary report` reads the arm from it.\n"
            f"# Sticky per user: LiteLLM picks per request; to keep a user on one arm, call the model group\n"
            f"# {experiment}-incumbent or {experiment}-candidate from the app, as core.decide.canary.sticky_arm says\n"
            f"# (sha256 of '{experiment}:USER' against the share).\n") + to_yaml(config) + "\n"
    if args.output:
        out = Path(args.output)
        if not out.parent.is_dir():
            raise UsageError(f"{one_line(out)}: the folder does not exist")
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)
        print(f"wrote the LiteLLM config to {one_line(out)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _report(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from core.decide.canary import canary_report, outcomes, read_feedback
    from core.report.tables import CELL, EDGE, natural_widths, print_table
    from core.report.offline import offline_pairs
    from core.ground.errors import UsageError
    from core.ground.text import one_line
    from core.exchange.traces import TraceError, read_calls

    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, got {args.alpha}")
    if args.margin < 0:
        raise UsageError("--margin must be 0 or more")
    try:
        calls, _files = read_calls(args.traces)
        feedback = read_feedback(args.feedback) if args.feedback else None
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    rows, other = outcomes(calls, incumbent=args.incumbent, candidate=args.candidate,
                           experiment=args.experiment or "canary", category=args.category, feedback=feedback,
                           feedback_field=args.feedback_field)
    if not rows:
        raise UsageError(f"no request of the traces was served by {args.incumbent!r} or {args.candidate!r} "
                         f"({len(calls)} LLM call(s) read)")
    offline = None
    if args.offline:
        from lineup.commands import open_store

        inc, cand = args.offline_pair or (args.incumbent, args.candidate)
        store = open_store(args, write=False)
        try:
            offline = offline_pairs(store, inc, cand, sessions=args.session,
                                    rater_kind="judge" if args.judge_votes else "human")
        finally:
            store.close()
    rep = canary_report(rows, incumbent=args.incumbent, candidate=args.candidate, experiment=args.experiment,
                        metric=args.metric, other_calls=other, offline=offline, alpha=args.alpha,
                        margin=args.margin)
    if args.json:
        print(rep.to_json())
        return 0
    console = Console(highlight=False, markup=False, soft_wrap=False)

    def iv(x, fmt: str = "{:.0f}") -> str:
        return "-" if x is None else f"{fmt.format(x.value)} [{fmt.format(x.low)}, {fmt.format(x.high)}]"

    def arm_table(title: str, arms) -> Table:
        """An arm a row; a terminal too narrow for that gets a figure a row and an arm a
        column (two arms fit 80 columns with every interval whole)."""
        header = ("arm", "requests", "errors %", "latency p50 ms", "latency p95 ms", "TTFT p50 ms", "tokens",
                  "cost", "feedback")
        rows = []
        for a in arms:
            name = args.incumbent if a.arm == "incumbent" else args.candidate
            err = "-" if a.errors is None else \
                f"{100 * a.errors.value:.1f} [{100 * a.errors.low:.1f}, {100 * a.errors.high:.1f}]"
            rows.append([one_line(f"{a.arm} ({name})", 60), str(a.requests), err, iv(a.latency_p50),
                         iv(a.latency_p95), iv(a.ttft_p50), "-" if a.tokens_mean is None else f"{a.tokens_mean:.0f}",
                         iv(a.cost_mean, "{:.5f}"),
                         iv(a.feedback, "{:.3f}") + (f" n={a.feedback_n}" if a.feedback_n else "")])
        t = Table(title=Text(one_line(title, 120)), title_justify="left")
        if EDGE + sum(w + CELL for w in natural_widths(header, rows)) <= console.width:
            for col in header:
                t.add_column(col, justify="left" if col == "arm" else "right")
            for r in rows:
                t.add_row(*(Text(c) for c in r))
            return t
        t.add_column("")
        for r in rows:
            t.add_column(Text(r[0]), justify="right")
        for k, col in enumerate(header[1:], start=1):
            t.add_row(col, *(Text(r[k]) for r in rows))
        return t

    console.print(arm_table(f"canary {args.experiment or 'canary'}: {rep.requests} request(s)"
                            + (f", {other} call(s) of other models left out" if other else ""), rep.arms))
    for cat, arms in rep.categories.items():
        if len(rep.categories) > 1:
            console.print(arm_table(f"category {cat}", arms))
    t = rep.test
    what = f"{args.metric}, candidate - incumbent, oriented so more is better"
    if t.difference is None or t.z is None:
        console.print(Text(one_line(f"test ({what}): {t.verdict}: {t.reason}")))
    else:
        console.print(Text(one_line(
            f"test ({what}): difference {t.difference:.4g}, always-valid interval [{t.low:.4g}, {t.high:.4g}], "
            f"z {t.z:.2f} against the boundary {t.boundary:.2f}")))
    console.print(Text(f"verdict: {t.verdict.upper()}: {t.reason}"))
    if rep.calibration is not None:
        cal = rep.calibration
        print_table(console, "offline against online, per category",
                    ["category", "online n", f"online {args.metric} diff", "offline votes", "offline win rate", ""],
                    [[one_line(c.category, 60), str(c.online_requests), iv(c.online, "{:.3f}"), str(c.offline_votes),
                      iv(c.offline, "{:.2f}"), c.agree] for c in cal.categories])
        if cal.spearman is None:
            console.print("rank correlation: too few categories with both results")
        else:
            span = f" [{cal.spearman_low:.2f}, {cal.spearman_high:.2f}]" if cal.spearman_low is not None else ""
            console.print(f"rank correlation offline-online (Spearman): {cal.spearman:.2f}{span}")
        if cal.disagreements:
            console.print(Text(one_line("offline and online disagree in: " + ", ".join(cal.disagreements), 300)))
    return 0
