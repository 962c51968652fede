"""`lineup drift SET -m A [--every 6h]`: canary runs of a set (a run marked
canary, deterministic by default: temperature 0, seed 0), once or every so
often; `lineup drift --report`: what changed in each model over its canary
runs (`core.decide.drift`). The report reads the record only."""

from __future__ import annotations

import argparse
import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("set", nargs="?", metavar="SET.jsonl", help="the sample set to run as a canary")
    p.add_argument("-m", "--model", dest="models", action="append", default=[], metavar="ALIAS",
                   help="a model alias (repeat; with --report: only these models)")
    p.add_argument("--every", metavar="DURATION", help="run again every DURATION (e.g. 30m, 6h, 1d) until "
                                                       "stopped (Ctrl-C) or --times runs")
    p.add_argument("--times", type=int, metavar="N", help="with --every: stop after N runs")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0: deterministic)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--system", help="system prompt for cases that have none")
    p.add_argument("--repeat", type=int, default=1, help="answers per case and model (default 1)")
    p.add_argument("--grader", metavar="ALIAS", help="the model that grades the set's rubric checks that name no "
                                                     "judge of their own (default: the set's header)")
    p.add_argument("--concurrency", type=int, default=8, help="conversations in flight at once (default 8)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--report", action="store_true", help="report the drift over the recorded canary runs")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="with --report: significance level after Holm's correction per model (default 0.05)")
    p.add_argument("--latency-change", type=float, default=25.0, metavar="PCT",
                   help="with --report: flag latency only when its median moved by more than PCT%% (default 25)")
    p.add_argument("--json", action="store_true", help="with --report: print it as JSON (schema lineup.drift/1)")


def parse_every(text: str) -> float:
    from core.ground.errors import UsageError

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"--every: {text!r} is not a duration (a number and s, m, h or d: 30m, 6h, 1d)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def run(args: argparse.Namespace) -> int:
    from core.ground.errors import UsageError

    if args.report:
        if args.set:
            raise UsageError("--report reads the recorded canary runs: give it no SET (use -m to choose models)")
        return report(args)
    if not args.set:
        raise UsageError("give the sample set to run as a canary (lineup drift SET.jsonl -m ALIAS), "
                         "or --report")
    if args.times is not None and (args.times < 1 or not args.every):
        raise UsageError("--times N (at least 1) goes with --every")
    return canaries(args)


def canaries(args: argparse.Namespace) -> int:
    import sys
    import time

    from lineup.commands.running import check_repeats, execute, run_inputs

    interval = parse_every(args.every) if args.every else None
    config, models, sample_set, params = run_inputs(args)
    check_repeats(args)
    done = 0
    while True:
        started = time.monotonic()
        code = execute(args, config, models, sample_set, params, repeat=args.repeat, concurrency=args.concurrency,
                       system=args.system, new=True, quiet=args.quiet, canary=True)
        done += 1
        if code == 130 or interval is None or (args.times is not None and done >= args.times):
            return code
        wait = max(0.0, interval - (time.monotonic() - started))
        print(f"lineup drift: canary run {done} done (exit {code}); the next in {wait:.0f} s (Ctrl-C stops)",
              file=sys.stderr)
        time.sleep(wait)


def report(args: argparse.Namespace) -> int:
    from core.decide.drift import drift_report
    from core.ground.errors import UsageError
    from lineup.commands import narrow_terminal, open_store
    from store.runs import canary_session_ids

    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1 (got {args.alpha:g})")
    with open_store(args, write=False) as store:
        loaded = [store.load_session(sid) for sid in canary_session_ids(store)]
        result = drift_report(loaded, models=args.models, alpha=args.alpha, latency_pct=args.latency_change)
        # a narrow terminal: each run as the shortest prefix that names it (commands take one) and
        # its date without the year, so that what changed keeps room to be read
        short = store.short_ids([r.session_id for m in result.models for r in m.runs]) \
            if not args.json and narrow_terminal() else None
    if args.json:
        from core.ground.text import json_line

        print(json_line(result.model_dump(mode="json", by_alias=True)))
        return 0
    show(result, short)
    return 0


def show(result, short: dict[str, str] | None = None) -> None:
    """The runs of each model and what changed; `short`: run ids as their
    unique prefixes, dates without the year (a narrow terminal)."""
    from rich.console import Console
    from rich.text import Text

    from core.ground.text import format_time, one_line
    from core.report.tables import print_table

    console = Console(highlight=False, markup=False)
    if not result.models:
        console.print("No canary runs yet: record some with `lineup drift SET.jsonl -m ALIAS`.")
        return
    for m in result.models:
        rows = []
        for k, r in enumerate(m.runs):
            changed = "-" if r.change_rate is None else f"{100 * r.change_rate:.0f}%"
            if r.change_rate is not None and not r.deterministic:
                changed += " (sampled)"
            rows.append([str(k), (short or {}).get(r.session_id, r.session_id),
                         format_time(r.created, "%m-%d %H:%M" if short is not None else "%Y-%m-%d %H:%M"),
                         one_line(", ".join(r.served_models) or "-", 40), one_line(", ".join(r.fingerprints) or "-", 30),
                         changed, "-" if r.pass_rate is None else f"{100 * r.pass_rate:.0f}%",
                         "-" if r.ttft_p50_ms is None else f"{r.ttft_p50_ms:,.0f}",
                         "-" if r.duration_p50_ms is None else f"{r.duration_p50_ms:,.0f}"])
        # a table too wide for the terminal is split into tables that fit, each led by the run's number
        print_table(console, one_line(f"{m.alias} on {m.sample_set}: {len(m.runs)} canary runs"),
                    ["#", "run", "when", "served model", "fingerprint", "changed", "pass", "ttft p50", "dur p50"],
                    rows, left=("run", "when", "served model", "fingerprint"))
        if not m.flags:
            console.print(Text("no significant change"))
        for f in m.flags:
            p = "" if f.p_adjusted is None else f" (Holm-adjusted p = {f.p_adjusted:.2g})"
            console.print(Text(one_line(f"CHANGED at run {f.run} ({f.session_id}): {f.detail}{p}")), soft_wrap=True)
