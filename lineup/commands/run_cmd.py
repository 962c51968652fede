"""`lineup run SET.jsonl -m A -m B [--repeat N] [--concurrency K]`."""

from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("set", metavar="SET.jsonl", help="sample set (JSONL, one case per line)")
    p.add_argument("-m", "--model", dest="models", action="append", default=[], metavar="ALIAS",
                   help="a model alias (repeat for each contestant; default: every configured model)")
    p.add_argument("--repeat", type=int, default=1, help="answers per case and model (default 1)")
    p.add_argument("--concurrency", type=int, default=8, help="conversations in flight at once (default 8)")
    p.add_argument("--system", help="system prompt for cases that have none")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--new", action="store_true", help="start a new run even if an identical one can be resumed")
    p.add_argument("--quiet", action="store_true", help="no progress display")


def require_keys(config, models) -> None:
    """Every model's key is in the environment: checked before any request,
    and before a session is recorded."""
    from lineup.cli import UsageError
    from lineup.config import missing_key

    missing = [(m.alias, missing_key(m)) for m in models if missing_key(m)]
    if missing:
        where = f" (config: {config.source})" if config.source else ""
        raise UsageError("; ".join(f"model {alias!r} needs its API key in the environment variable {var}, "
                                   "which is not set" for alias, var in missing) + where)


def run(args: argparse.Namespace) -> int:
    from lineup.cli import UsageError
    from lineup.commands import checked_params
    from lineup.config import ConfigError, load_config, resolve_models
    from lineup.sampleset import SampleSetError, load_sample_set

    try:
        config = load_config(args.config, probe_ollama=True)
        models = resolve_models(config, args.models) if args.models else list(config.models.values())
        sample_set = load_sample_set(args.set)
    except (ConfigError, SampleSetError) as exc:
        raise UsageError(str(exc)) from None
    if not models:
        raise UsageError("no models: name them with -m ALIAS (see `lineup models`)")
    require_keys(config, models)
    params = checked_params({"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed})
    if args.repeat < 1 or args.concurrency < 1:
        raise UsageError("--repeat and --concurrency must be at least 1")
    return execute(args, config, models, sample_set, params, repeat=args.repeat, concurrency=args.concurrency,
                   system=args.system, new=args.new, quiet=args.quiet)


def execute(args: argparse.Namespace, config, models, sample_set, params, *, repeat: int, concurrency: int,
            system: str | None, new: bool, quiet: bool, rerun_of: str | None = None) -> int:
    """Run `sample_set` (a set file, or the cases of a recorded run being
    re-run) with a progress display; the exit code of `lineup run`."""
    import signal

    import anyio
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    from lineup.commands import open_store
    from lineup.runner import Runner, format_eta, summary_rows
    from lineup.store import AsyncStore
    from lineup.text import one_line

    err = Console(stderr=True, highlight=False, markup=False)
    out = Console(highlight=False, markup=False)
    store = open_store(args, write=True)

    def table(progress) -> Table:
        # the set's name, aliases and error kinds come from files and servers: one_line, always
        t = Table(title=Text(f"{one_line(sample_set.name, 80)}: {progress.finished}/{progress.total}  "
                             f"ETA {format_eta(progress.eta_s())}"), title_justify="left")
        for col in ("model", "done", "failed", "errors"):
            t.add_column(col, justify="right" if col in ("done", "failed") else "left")
        for alias, tally in progress.tallies.items():
            errors = ", ".join(f"{k} {v}" for k, v in sorted(tally.errors.items())) or "-"
            t.add_row(Text(one_line(alias)), str(tally.done), str(tally.failed), Text(one_line(errors)))
        return t

    live = None if quiet or not err.is_terminal else Live(console=err, auto_refresh=False)

    def on_progress(progress) -> None:
        if live is not None:
            live.update(table(progress), refresh=True)

    async def main():
        astore = AsyncStore(store)
        runner = Runner(astore, sample_set, models, repeat=repeat, concurrency=concurrency,
                        params=params, defaults=config.defaults, system=system,
                        new_session=new, rerun_of=rerun_of, on_progress=on_progress)
        stopped: list[int] = []

        async def on_signal(scope: anyio.CancelScope) -> None:
            # Ctrl-C and SIGTERM alike: stop the run, close the open answers as
            # cancelled, keep everything. Handled by the event loop (woken
            # through its signal fd), whichever thread the signal landed on.
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    stopped.append(signum)
                    scope.cancel()
                    return

        try:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(on_signal, scope)
                    await runner.run()
                    tg.cancel_scope.cancel()
            if stopped and runner.progress is None:
                raise KeyboardInterrupt
            return runner.progress, bool(stopped)
        finally:
            with anyio.CancelScope(shield=True):
                await astore.aclose()

    if live is not None:
        live.start()
    try:
        progress, interrupted = anyio.run(main)
    except KeyboardInterrupt:
        progress, interrupted = None, True
    finally:
        if live is not None:
            live.stop()
    if progress is None:
        err.print("interrupted before the run started; nothing recorded beyond the session")
        return 130
    if progress.drift is not None:
        old_id, changes = progress.drift
        err.print(one_line(f"not resuming session {old_id}: the models changed since ({'; '.join(changes)}); "
                           f"started session {progress.session_id}"))
    elif progress.resumed:
        err.print(f"resumed session {progress.session_id}: {progress.already_done} conversations were already done")
    summary = Table(title=Text(f"session {progress.session_id}"), title_justify="left")
    for col in ("model", "answers", "failed", "errors", "TTFT p50", "tok/s p50", "cost"):
        summary.add_column(col, justify="left" if col in ("model", "errors") else "right")
    for row in summary_rows(progress):
        summary.add_row(
            Text(one_line(row["model"])), str(row["answers"]), str(row["failed"]),
            Text(one_line(", ".join(f"{k} {v}" for k, v in sorted(row["errors"].items())) or "-")),
            f"{row['ttft_p50_ms']:.0f} ms" if row["ttft_p50_ms"] is not None else "-",
            f"{row['tokens_per_s_p50']:.1f}" if row["tokens_per_s_p50"] is not None else "-",
            f"${row['cost']:.4f}" if row["cost"] is not None else "-",
        )
    out.print(summary)
    if interrupted:
        err.print(f"stopped: {progress.finished}/{progress.total} done. Run the same command again to resume.")
        return 130
    if progress.elsewhere:
        pids = ", ".join(sorted({o.split(":")[1] for o in progress.others if o.count(":") >= 1}))
        err.print(f"{progress.elsewhere} conversations were being run by another lineup process "
                  f"(pid {pids}) on this database; they are left to it")
    if progress.failed:
        err.print(f"exit 1: {progress.failed} of {progress.total} conversations failed after retries "
                  "(see the errors column); run the same command again to retry them")
        return 1
    err.print(f"vote on it: lineup vote {progress.session_id}")
    return 0
