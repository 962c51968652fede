"""`lineup load SET -m A -m B --levels 1,4,16 [--requests N]`: the same
cases at each concurrency level, every answer recorded (a session of kind
`load`), then per model and level TTFT and duration p50/p95, tokens/s,
errors by kind and the growth from the first level (`core.answering.load`).
`lineup load --report SESSION` shows a recorded profile again."""

from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("set", nargs="?", metavar="SET.jsonl", help="sample set (JSONL); each case's opening request")
    p.add_argument("-m", "--model", dest="models", action="append", default=[], metavar="ALIAS",
                   help="a model alias (repeat for each model; default: every configured model)")
    p.add_argument("--levels", default="1,4,16", metavar="L,L,...",
                   help="concurrency levels: requests of one model in flight at once (default 1,4,16)")
    p.add_argument("--requests", type=int, metavar="N",
                   help="requests per model and level (default: one per case, and at least twice the highest level; "
                        "the cases cycle when N is larger than the set)")
    p.add_argument("--exceed-server-limit", action="store_true",
                   help="go above a server's `concurrency` (configured, or the default: 1 for a local server); "
                        "without it a level above that limit is refused")
    p.add_argument("--retries", type=int, default=0, metavar="N",
                   help="retries per request (default 0: a load test counts a refusal instead of hiding it)")
    p.add_argument("--system", help="system prompt for cases that have none")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--seed", type=int, help="sampling seed sent with each request")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                   help="bootstrap rounds for the p95 intervals (default 1000, seed 0)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON (schema lineup.load/1)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.add_argument("--report", metavar="SESSION", help="show the figures of a recorded load profile (id or prefix)")


def parse_levels(text: str) -> list[int]:
    from core.ground.errors import UsageError
    from core.answering.load import check_levels

    levels = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise UsageError(f"--levels: {part!r} is not a whole number (give levels like 1,4,16)")
        levels.append(int(part))
    try:
        return check_levels(levels)
    except ValueError as exc:
        raise UsageError(f"--levels: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from core.ground.errors import UsageError

    if args.bootstrap < 0:
        raise UsageError("--bootstrap must be 0 or more")
    if args.report:
        if args.set:
            raise UsageError("--report reads a recorded profile: give it no SET")
        return report(args)
    if not args.set:
        raise UsageError("give the sample set (lineup load SET.jsonl -m ALIAS --levels 1,4,16), or --report SESSION")
    return profile(args)


def profile(args: argparse.Namespace) -> int:
    from core.ground.errors import UsageError
    from core.answering.load import over_server_limit
    from lineup.commands.running import StopSignals, run_inputs

    levels = parse_levels(args.levels)
    if args.requests is not None and args.requests < 1:
        raise UsageError(f"--requests must be at least 1, not {args.requests}")
    if args.requests is not None and args.requests < max(levels):
        raise UsageError(f"--requests {args.requests} is below the highest of --levels ({max(levels)}): "
                         "that level would never have that many requests in flight")
    if not 0 <= args.retries <= 10:
        raise UsageError(f"--retries must be between 0 and 10, not {args.retries}")
    config, models, sample_set, params = run_inputs(args)
    over = over_server_limit(models, levels)
    if over and not args.exceed_server_limit:
        alias, cap, top = over[0]
        raise UsageError(
            f"--levels: level {top} is above the {cap} request{'s' if cap != 1 else ''} at once the server of "
            f"{alias!r} takes (its `concurrency`; the default is 1 for a local server, 4 for a hosted one). "
            "Pass --exceed-server-limit to send up to the level anyway (that is what a load test is for), "
            "or set `concurrency` on the model")
    from rich.console import Console

    err = Console(stderr=True, highlight=False, markup=False)
    with StopSignals(err) as stop:
        return _profile(args, config, models, sample_set, params, levels, err, stop)


def _profile(args, config, models, sample_set, params, levels, err, stop) -> int:
    import anyio
    from rich.live import Live
    from rich.text import Text

    from core.answering.load import LoadRunner, load_report
    from core.ground.text import one_line
    from lineup.commands import open_store
    from lineup.commands.running import run_live
    from store import AsyncStore

    store = open_store(args, write=True)
    live = None if args.quiet or not err.is_terminal else Live(console=err, auto_refresh=False)

    def on_progress(progress) -> None:
        if live is not None:
            where = "" if progress.current is None else \
                f"  level {progress.current[0]}, {one_line(progress.current[1])}"
            live.update(Text(f"load {one_line(sample_set.name, 60)}: {progress.finished}/{progress.total}{where}"),
                        refresh=True)

    async def main():
        astore = AsyncStore(store)
        runner = LoadRunner(astore, sample_set, models, levels=levels, requests=args.requests, params=params,
                            defaults=config.defaults, system=args.system,
                            exceed_server_limit=args.exceed_server_limit, retries=args.retries,
                            on_progress=on_progress)
        try:
            with anyio.CancelScope() as scope:
                stop.attach(scope)
                await runner.run()
            if runner.progress is None:
                return None, True
            loaded = await astore.load_session(runner.progress.session_id)
            return loaded, stop.requested and runner.progress.finished < runner.progress.total
        finally:
            stop.detach()
            with anyio.CancelScope(shield=True):
                await astore.aclose()

    loaded, interrupted = run_live(main, live)
    if loaded is None:
        err.print("interrupted before the load profile started; nothing recorded beyond the session")
        return 130
    show(load_report(loaded, bootstrap=args.bootstrap), args.json)
    if interrupted:
        err.print(f"stopped: what was recorded is kept in session {loaded.session.id} "
                  f"(lineup load --report {loaded.session.id})")
        return 130
    return 0


def report(args: argparse.Namespace) -> int:
    from core.ground.errors import UsageError
    from core.answering.load import load_report
    from lineup.commands import open_store, resolve_sessions

    with open_store(args, write=False) as store:
        loaded = store.load_session(resolve_sessions(store, [args.report], flag="--report")[0])
    if loaded.session.kind != "load":
        raise UsageError(f"--report: session {loaded.session.id} is a {loaded.session.kind} session, "
                         "not a load profile (lineup sessions --kind load)")
    show(load_report(loaded, bootstrap=args.bootstrap), args.json)
    return 0


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _interval(low: float | None, high: float | None, spec: str = ",.0f") -> str:
    """As the report writes one ("5,121 .. 5,818"), beside the figure it bounds ("5,794")."""
    return "" if low is None or high is None else f"{low:{spec}} .. {high:{spec}}"


def show(result, as_json: bool) -> None:
    """The figures: JSON (`core.answering.load.SCHEMA`), or a table per model on stdout."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from core.ground.text import json_line, one_line

    if as_json:
        print(json_line(result.model_dump(mode="json", by_alias=True)))
        return
    console = Console(highlight=False, markup=False)
    pct = f"{100 * result.confidence:.0f}%"
    for m in result.models:
        cap = "no server limit" if m.server_concurrency is None else f"server concurrency {m.server_concurrency}"
        over = ", exceeded on purpose" if result.exceed_server_limit else ""
        table = Table(title=Text(one_line(f"{m.alias}: {result.requests} requests per level ({cap}{over})")),
                      title_justify="left")
        for col in ("level", "done", "errors", "TTFT p50", "TTFT p95", "dur p50", "dur p95", "tok/s",
                    "ans/s"):
            table.add_column(col, justify="left" if col == "errors" else "right")
        growth = Table(title=Text(one_line(f"{m.alias}: p95 and its growth from level "
                                           f"{result.levels[0] if result.levels else '-'}, {pct} intervals")),
                       title_justify="left")
        for col in ("level", "of", "p95 ms", "interval", "growth", "interval "):
            growth.add_column(col, justify="left" if col == "of" else "right")
        for f in m.levels:
            errors = ", ".join(f"{k} {v}" for k, v in f.errors.items())
            if f.error_rate is not None and f.errors:
                errors += f" ({100 * f.error_rate:.0f}%)"
            if f.stopped:
                errors = "; ".join(x for x in (errors, f"{f.stopped} stopped") if x)
            table.add_row(
                str(f.level), f"{f.complete}/{f.sent}", Text(one_line(errors or "-")), _ms(f.ttft_ms.p50),
                _ms(f.ttft_ms.p95), _ms(f.duration_ms.p50), _ms(f.duration_ms.p95),
                "-" if f.tokens_per_s_p50 is None else f"{f.tokens_per_s_p50:,.1f}",
                "-" if f.answers_per_s is None else f"{f.answers_per_s:,.2f}")
            for name, q, g in (("TTFT", f.ttft_ms, f.ttft_p95_growth),
                               ("duration", f.duration_ms, f.duration_p95_growth)):
                growth.add_row(str(f.level), name, _ms(q.p95), _interval(q.p95_low, q.p95_high),
                               "-" if g is None else f"x{g.ratio:.2f}",
                               "" if g is None else _interval(g.low, g.high, ".2f"))
        console.print(table)
        console.print(growth)
    console.print(Text(f"session {result.session_id}: times in ms; tok/s: output tokens per second after the "
                       "first token (median); ans/s: answers per second over the level; growth: p95 at the level "
                       f"/ p95 at level {result.levels[0] if result.levels else '-'}. Kept out of ratings, the "
                       "vote queue and the report unless named with --session."))
