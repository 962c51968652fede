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


def run(args: argparse.Namespace) -> int:
    import anyio
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    from lineup.cli import UsageError, store_error_in
    from lineup.config import ConfigError, load_config, missing_key, resolve_models
    from lineup.events import SamplingParams
    from lineup.runner import Runner, format_eta, summary_rows
    from lineup.sampleset import SampleSetError, load_sample_set
    from lineup.commands import open_store
    from lineup.store import AsyncStore

    err = Console(stderr=True, highlight=False, markup=False)
    out = Console(highlight=False, markup=False)
    try:
        config = load_config(args.config, probe_ollama=True)
        models = resolve_models(config, args.models) if args.models else list(config.models.values())
        sample_set = load_sample_set(args.set)
    except (ConfigError, SampleSetError) as exc:
        raise UsageError(str(exc)) from None
    if not models:
        raise UsageError("no models: name them with -m ALIAS (see `lineup models`)")
    missing = [(m.alias, missing_key(m)) for m in models if missing_key(m)]
    if missing:   # before any request, and before a session is recorded
        where = f" (config: {config.source})" if config.source else ""
        raise UsageError("; ".join(f"model {alias!r} needs its API key in the environment variable {var}, "
                                   "which is not set" for alias, var in missing) + where)
    try:
        params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.repeat < 1 or args.concurrency < 1:
        raise UsageError("--repeat and --concurrency must be at least 1")
    store = open_store(args, write=True)

    def table(progress) -> Table:
        t = Table(title=Text(f"{sample_set.name}: {progress.finished}/{progress.total}  "
                             f"ETA {format_eta(progress.eta_s())}"), title_justify="left")
        for col in ("model", "done", "failed", "errors"):
            t.add_column(col, justify="right" if col in ("done", "failed") else "left")
        for alias, tally in progress.tallies.items():
            errors = ", ".join(f"{k} {v}" for k, v in sorted(tally.errors.items())) or "-"
            t.add_row(Text(alias), str(tally.done), str(tally.failed), Text(errors))
        return t

    live = None if args.quiet or not err.is_terminal else Live(console=err, auto_refresh=False)

    def on_progress(progress) -> None:
        if live is not None:
            live.update(table(progress), refresh=True)

    async def main():
        astore = AsyncStore(store)
        runner = Runner(astore, sample_set, models, repeat=args.repeat, concurrency=args.concurrency,
                        params=params, defaults=config.defaults, system=args.system,
                        new_session=args.new, on_progress=on_progress)
        try:
            return await runner.run(), False
        except BaseException as exc:
            if runner.progress is None or store_error_in(exc) is not None:
                raise   # a failing database is reported as such (exit 1), not as "stopped"
            return runner.progress, True
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
    if progress.resumed:
        err.print(f"resumed session {progress.session_id}: {progress.already_done} conversations were already done")
    summary = Table(title=Text(f"session {progress.session_id}"), title_justify="left")
    for col in ("model", "answers", "failed", "errors", "TTFT p50", "tok/s p50", "cost"):
        summary.add_column(col, justify="left" if col in ("model", "errors") else "right")
    for row in summary_rows(progress):
        summary.add_row(
            Text(row["model"]), str(row["answers"]), str(row["failed"]),
            Text(", ".join(f"{k} {v}" for k, v in sorted(row["errors"].items())) or "-"),
            f"{row['ttft_p50_ms']:.0f} ms" if row["ttft_p50_ms"] is not None else "-",
            f"{row['tokens_per_s_p50']:.1f}" if row["tokens_per_s_p50"] is not None else "-",
            f"${row['cost']:.4f}" if row["cost"] is not None else "-",
        )
    out.print(summary)
    if interrupted:
        err.print(f"stopped: {progress.finished}/{progress.total} done. Run the same command again to resume.")
        return 130
    failed = sum(t.failed for t in progress.tallies.values())
    err.print(f"vote on it: lineup vote {progress.session_id}")
    return 1 if failed and failed == progress.total else 0
