"""What every command that sends a set's requests shares (`run`, `drift`,
`load`, `judge`, `replay --rerun`): the inputs checked before anything is
recorded, the keys, the run itself with its progress display, and Ctrl-C."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from signal import Handlers
    from types import FrameType

    # what `signal.signal` takes and gives back
    SignalHandler = Callable[[int, FrameType | None], Any] | int | Handlers | None


def require_keys(config, models) -> None:
    """Every model's key is in the environment: checked before any request,
    and before a session is recorded."""
    from core.answering.config import missing_key
    from core.ground.errors import UsageError

    missing = [(m.alias, missing_key(m)) for m in models if missing_key(m)]
    if missing:
        where = f" (config: {config.source})" if config.source else ""
        raise UsageError("; ".join(f"model {alias!r} needs its API key in the environment variable {var}, "
                                   "which is not set" for alias, var in missing) + where)


def run_inputs(args: argparse.Namespace):
    """(config, models, sample set, sampling params) of a command that runs a
    set (`run`, `drift`, `load`): each checked, exit 2 naming what is wrong, every
    model's key in the environment before anything is recorded."""
    from core.answering.config import ConfigError, load_config, resolve_models, variant_matrix
    from core.ground.errors import UsageError
    from core.answering.sampleset import SampleSetError, load_sample_set
    from core.stats.votes import labels_for
    from lineup.commands import checked_params

    try:
        config = load_config(args.config, probe_ollama=True)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    aliases = list(args.models)
    names = [n.strip() for n in (getattr(args, "variants", None) or "").split(",") if n.strip()]
    if getattr(args, "variants", None) is not None and not names:
        raise UsageError("--variants: name at least one variant (--variants terse,detailed)")
    try:
        if names:   # the matrix: every model with every variant
            aliases = variant_matrix(config, aliases or list(config.models), names)
        models = resolve_models(config, aliases) if aliases else list(config.models.values())
    except ConfigError as exc:
        raise UsageError(f"{'--variants' if names else '-m/--model'}: {exc}") from None
    try:
        sample_set = load_sample_set(args.set)
    except SampleSetError as exc:
        raise UsageError(str(exc)) from None
    problems = sample_set.template_problems(models)   # before any request: every case fills every template
    if problems:
        raise UsageError(str(SampleSetError(problems)))
    if not models:
        raise UsageError("no models: name them with -m ALIAS (see `lineup models`)")
    try:
        labels_for(len(models))
    except ValueError as exc:
        raise UsageError(f"-m/--model: {exc}" if args.models else f"{exc}: name some with -m ALIAS") from None
    require_keys(config, models)
    params = checked_params({"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed})
    return config, models, sample_set, params


def resolve_graders(args: argparse.Namespace, config, sample_set, models):
    """The `core.answering.rubric.Graders` for the set's rubric checks (None
    when it has none): each grader named (`judge`, `--grader`, the set's
    header) a known alias with its key in the environment, checked before
    anything is recorded (exit 2 naming what is missing)."""
    from core.answering.config import ConfigError, resolve_models
    from core.answering.rubric import Graders, grader_aliases
    from core.ground.errors import UsageError

    default = getattr(args, "grader", None) or sample_set.header.grader
    needed, missing = grader_aliases(sample_set.cases, default)
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise UsageError(f"{getattr(args, 'set', sample_set.name)}: rubric checks of case(s) {shown} name no grader: give one with --grader ALIAS, "
                         "a \"judge\" in the check, or a first line {\"set\": {\"grader\": ALIAS}}")
    if not needed:
        return None
    try:
        graders = resolve_models(config, needed)
    except ConfigError as exc:
        raise UsageError(f"grader: {exc}") from None
    require_keys(config, graders)
    _warn_kin(graders, models)
    secrets = [s for m in [*models, *graders] for s in m.secrets()]
    return Graders({g.alias: g for g in graders}, default, secrets=secrets)


def _warn_kin(graders, models) -> None:
    """A grader of a contestant's own family grades its kin (models tend to
    prefer their family's answers): said, not refused."""
    from rich.console import Console

    from core.answering.identity import family_of
    from core.ground.text import one_line

    err = Console(stderr=True, highlight=False, markup=False)
    for g in graders:
        own = family_of(g.provider, g.model, g.base_url)
        kin = sorted(m.alias for m in models if m.alias != g.alias and family_of(m.provider, m.model, m.base_url) == own)
        if own and kin and not g.is_demo:
            err.print(one_line(f"warning: the grader {g.alias} is of the same family ({own}) as {', '.join(kin)}: "
                               "it grades its own kin"))


def check_repeats(args: argparse.Namespace) -> None:
    from core.ground.errors import UsageError

    if args.repeat < 1 or args.concurrency < 1:
        raise UsageError("--repeat and --concurrency must be at least 1")


def run_live(main, live):
    """`anyio.run(main)` with the progress display `live` (None: quiet) shown
    while it runs and stopped however it ends (`run`, `load`)."""
    import anyio

    if live is not None:
        live.start()
    try:
        return anyio.run(main)
    finally:
        if live is not None:
            live.stop()


def use_cache(args: argparse.Namespace, config) -> bool:
    """--cache, else not with --refresh, else the config's [run] cache."""
    if getattr(args, "refresh", False):
        return False
    return bool(args.cache) if getattr(args, "cache", None) is not None else config.run_cache


def add_no_exec(p: argparse.ArgumentParser) -> None:
    """`--no-exec`, for the commands that run a set's checks."""
    p.add_argument("--no-exec", action="store_true",
                   help="run no code: leave the checks that execute code (the answers' code against a case's "
                        "tests, the set's own Python checks) unrun and unrecorded; the same command without it "
                        "runs only them later (for a set or answers you do not trust)")


def execute(args: argparse.Namespace, config, models, sample_set, params, *, repeat: int, concurrency: int,
            system: str | None, new: bool, quiet: bool, rerun_of: str | None = None, cache: bool = False,
            canary: bool = False, batch: float | None = None) -> int:
    """Run `sample_set` (a set file, or the cases of a recorded run being
    re-run) with a progress display; the exit code of `lineup run`.

    Ctrl-C and SIGTERM are lineup's own from here to the last line printed
    (`StopSignals`): the first one stops the run wherever it is (before it
    starts, while it runs, while it closes), later ones only say it is
    stopping. None of them raises KeyboardInterrupt into the middle of the
    event loop or a store write."""
    from rich.console import Console

    graders = resolve_graders(args, config, sample_set, models)
    err = Console(stderr=True, highlight=False, markup=False)
    out = Console(highlight=False, markup=False)
    with StopSignals(err) as stop:
        return _execute(args, config, models, sample_set, params, repeat=repeat, concurrency=concurrency,
                        system=system, new=new, quiet=quiet, rerun_of=rerun_of, cache=cache, canary=canary,
                        batch=batch, err=err, out=out, stop=stop, graders=graders)


def _execute(args, config, models, sample_set, params, *, repeat, concurrency, system, new, quiet, rerun_of,
             cache, canary, batch, err, out, stop: "StopSignals", graders=None) -> int:
    import anyio
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    from core.answering.runner import Runner, format_eta, summary_rows
    from core.ground.text import one_line
    from lineup.commands import open_store
    from store import AsyncStore

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

    live = None if quiet or not err.is_terminal or batch is not None else Live(console=err, auto_refresh=False)

    def on_progress(progress) -> None:
        if live is not None:
            live.update(table(progress), refresh=True)

    async def main():
        astore = AsyncStore(store)
        options = dict(repeat=repeat, concurrency=concurrency, params=params, defaults=config.defaults,
                       system=system, new_session=new, rerun_of=rerun_of, cache=cache, canary=canary,
                       graders=graders, run_code=not getattr(args, "no_exec", False), on_progress=on_progress)
        if batch is not None:
            from core.answering.batch_run import BatchRunner

            def said(line: str) -> None:
                if not quiet:
                    err.print(Text(one_line(line)))

            runner: Runner = BatchRunner(astore, sample_set, models, poll_s=batch, on_batch=said, **options)
        else:
            runner = Runner(astore, sample_set, models, **options)
        try:
            with anyio.CancelScope() as scope:
                stop.attach(scope)   # a signal that came before this cancels it at once
                await runner.run()
            progress = runner.progress
            if progress is None:   # stopped before the session was open
                return None, True
            # a signal that came once everything was done stopped nothing
            return progress, stop.requested and progress.finished + progress.elsewhere < progress.total
        finally:
            stop.detach()
            with anyio.CancelScope(shield=True):
                if graders is not None:
                    await graders.aclose()
                await astore.aclose()

    progress, interrupted = run_live(main, live)
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
    for row in summary_rows(progress):
        if row["logged_latency_p50_ms"] is not None:
            err.print(f"{row['model']}: production's answers (origin logged, no request made); latency p50 "
                      f"{row['logged_latency_p50_ms']:.0f} ms as logged, not measured (not in TTFT or tok/s)")
    unexecuted = sum(t.unexecuted for t in progress.tallies.values())
    if unexecuted:
        err.print(f"{unexecuted} check{'s' if unexecuted != 1 else ''} that run code not run (--no-exec: the "
                  "answers' code tests, the set's Python checks) and not recorded; the same command without "
                  "--no-exec runs only them (the answers are kept)")
    cached = sum(row["cached"] for row in summary_rows(progress))
    if cached:
        err.print(f"{cached} answers came from the cache (no request made; left out of latency, speed and cost)")
    if interrupted:
        err.print(f"stopped: {progress.finished}/{progress.total} done. Run the same command again to resume.")
        return 130
    if progress.stopped:
        err.print(Text(one_line(f"exit 1: stopped early: {progress.stopped}")))
        return 1
    if progress.elsewhere:
        pids = ", ".join(sorted({o.split(":")[1] for o in progress.others if o.count(":") >= 1}))
        err.print(f"{progress.elsewhere} conversations were being run by another lineup process "
                  f"(pid {pids}) on this database; they are left to it")
    if progress.failed:
        err.print(f"exit 1: {progress.failed} of {progress.total} conversations failed after retries "
                  "(see the errors column); run the same command again to retry them")
        return 1
    if len(progress.tallies) > 1:
        err.print(f"vote on it: lineup vote {progress.session_id}")
    else:       # nothing to compare, so nothing blind and nothing to vote on
        err.print(f"one model, nothing to vote on: its checks, speed and cost are in "
                  f"lineup report --session {progress.session_id}")
    return 0


class StopSignals:
    """SIGINT and SIGTERM while a run is open, handled by a plain signal
    handler that never raises: it records the signal and, once the event
    loop runs the run (`attach`), cancels the run's scope through the loop.

    Why not `anyio.open_signal_receiver` around the run alone: outside it
    (opening the store, starting the loop, and from the moment the receiver
    closes, which is right after the first signal) Python's default handler
    raised KeyboardInterrupt at whatever bytecode was running. A second
    Ctrl-C (or one during start-up or shutdown) then broke anyio's cancel
    scopes (a RuntimeError traceback), killed the process by SIGINT, or
    interrupted the event loop's shutdown before anyio's worker thread was
    told to stop, so the interpreter waited for that thread forever at exit.
    """

    def __init__(self, err) -> None:
        self.err = err
        self.signals: list[int] = []
        self._cancel: Callable[[], None] | None = None
        self._previous: dict[int, SignalHandler] = {}

    @property
    def requested(self) -> bool:
        return bool(self.signals)

    def __enter__(self) -> "StopSignals":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        for sig, handler in self._previous.items():
            # After a stop the process is on its way out: a further Ctrl-C must
            # not turn into a traceback, nor (Python's finalisation puts back
            # the default action of every handled signal) kill it by SIGINT
            # after it has said what it did. Ignored stays ignored to the end.
            signal.signal(sig, signal.SIG_IGN if self.signals else handler)

    def _handle(self, signum, frame) -> None:
        self.signals.append(signum)
        if len(self.signals) == 2:
            try:
                self.err.print("stopping: closing the answers in flight, then it exits (the record stays whole)")
            except Exception:
                pass
        cancel = self._cancel
        if cancel is not None:
            cancel()

    def attach(self, scope) -> None:
        """From inside the event loop: `scope` is what a signal cancels."""
        import anyio.lowlevel

        token = anyio.lowlevel.current_token()

        def cancel() -> None:   # a signal handler may run inside the loop's own code: go through the loop
            try:
                token.backend_class.run_sync_soon(scope.cancel, (), token.native_token)
            except Exception:
                pass

        self._cancel = cancel
        if self.signals:
            scope.cancel()

    def detach(self) -> None:
        self._cancel = None
