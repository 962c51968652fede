"""Command-line entry point. Parsing only: each command lives in
`lineup.commands.<name>` with `configure(parser)` and `run(args) -> int`.
Commands import their heavy parts (Textual above all) inside `run`, so that
non-interactive commands never load the TUI."""

from __future__ import annotations

import argparse
import atexit
import importlib
import io
import os
import sys
import threading
from collections.abc import Collection
from typing import NoReturn

from core.ground.errors import (
    EXIT_CLOSED_PIPE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    UsageError,
    found_in,
    store_error_in,
)

# name -> one-line help. Order is the order shown in --help.
COMMANDS: dict[str, str] = {
    "chat": "side-by-side chat (the default command)",
    "models": "list configured model aliases; --check sends one tiny request each",
    "run": "run a sample set against several models",
    "vote": "blind voting queue over unvoted cases",
    "judge": "an LLM judges pairs of answers blind; its verdicts are kept apart from people's votes",
    "sessions": "list saved sessions",
    "replay": "open a saved session read-only, or re-run it against other models",
    "report": "ratings with confidence intervals, failure modes, latency and cost",
    "diff": "compare two runs case by case: pass rates, answers, latency, cost",
    "gate": "fail (exit 3) when a candidate run regressed significantly against a baseline",
    "drift": "canary runs of a set, and a report of what changed in a model over them",
    "load": "the same cases at several concurrency levels: latency, speed and errors as load grows",
    "decide": "which model to ship for a traffic mix and limits: P(best), recommendation, routing",
    "export": "export a session as JSONL, CSV or Markdown",
    "import": "import our JSONL export, Chatbot Arena battles, or another lineup database",
    "sample": "stratified sample of prompts from request logs or traces",
    "canary": "an online canary: the gateway's traffic split, then its outcomes, test and verdict from traces",
    "serve": "a read-only view of the database in Datasette (pip install lineup[serve])",
    "share": "a blind vote package of sessions for other raters (their votes come back with import)",
    "rate": "the blind vote queue in raters' browsers, a link each, with progress (pip install lineup[web])",
}

def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=os.environ.get("LINEUP_DB"),
                        help="database file (env LINEUP_DB; default: the user data dir)")
    parser.add_argument("--config", default=os.environ.get("LINEUP_CONFIG"),
                        help="config.toml (env LINEUP_CONFIG; default: the user config dir)")


def build_parser(configure: Collection[str] | None = None, *, width: int | None = None) -> argparse.ArgumentParser:
    """The parser; only the commands in `configure` (all when None) import
    their module and declare their options, so a command's start-up pays for
    itself alone. Every command is listed either way."""
    def formatter(prog: str) -> argparse.HelpFormatter:
        return argparse.HelpFormatter(prog, width=width)

    parser = argparse.ArgumentParser(
        prog="lineup", formatter_class=formatter,
        description="Several LLMs side by side on the same prompt, judged blind, every judgement kept as a record.",
        epilog="`lineup` alone opens the chat. `lineup COMMAND -h` for a command's options.")
    parser.add_argument("--version", action="version", version=f"lineup {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=formatter)
        _common(p)
        if configure is None or name in configure:
            module = _command_module(name)
            if module is not None:
                module.configure(p)
    return parser


def _version() -> str:
    from lineup import __version__

    return __version__


def _command_module(name: str):
    try:
        return importlib.import_module(f"lineup.commands.{name.replace('-', '_')}_cmd")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("lineup.commands."):
            return None
        raise


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that what is still buffered
    cannot fail again when Python flushes it at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _reliable_stdout() -> None:
    """Unbuffered (`python -u`, PYTHONUNBUFFERED), standard output is a text
    layer straight over the file, which takes a partial write (the disk
    filled, the reader left half way) as done and drops the rest without a
    word. Put a buffered layer between them, flushed at each line: it writes
    everything or raises."""
    out = sys.__stdout__
    if out is None or sys.stdout is not out or not isinstance(getattr(out, "buffer", None), io.FileIO):
        return
    try:
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(out.buffer), encoding=out.encoding, errors=out.errors,
                                      line_buffering=True)
    except (AttributeError, ValueError, OSError):
        pass


def stdout_failed(command: str, exc: OSError) -> int:
    """Standard output cannot be written: a closed pipe ends the command
    quietly (exit 141), anything else (a full disk) is said (exit 1)."""
    _silence_stdout()
    if isinstance(exc, BrokenPipeError):
        return EXIT_CLOSED_PIPE
    print(f"lineup {command}: cannot write to standard output: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_FAILURE


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "chat")
    try:   # building the parser imports the chosen command's module: a Ctrl-C here is still just a stop
        parser = build_parser(argv[:1])
        args = parser.parse_args(argv)
        module = _command_module(args.command)
    except KeyboardInterrupt:
        print("lineup: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    _reliable_stdout()
    if module is None:
        print(f"lineup: '{args.command}' is not available in this build", file=sys.stderr)
        return EXIT_FAILURE
    try:
        code = int(module.run(args) or 0)
    except UsageError as exc:
        # messages quote file names, case ids, model names: shown, never acted on
        from core.ground.text import neutralise

        print(f"lineup {args.command}: {neutralise(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"lineup {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BaseException as exc:
        pipe = found_in(exc, BrokenPipeError)
        if pipe is None and isinstance(exc, SystemExit) and isinstance(exc.__context__, BrokenPipeError):
            pipe = exc.__context__   # Rich's Console ends a broken pipe so (stdout already on /dev/null)
        if pipe is not None:
            return stdout_failed(args.command, pipe)
        if found_in(exc, OSError) is not None:
            try:   # a write to standard output failed (a full disk behind `>`): it fails again here
                sys.stdout.flush()
            except OSError as again:
                return stdout_failed(args.command, again)
        # A database that fails under us (disk full, locked for too long, made
        # read-only) is a runtime failure, reported in one line: exit 1.
        found = store_error_in(exc)
        if found is None:
            raise
        from core.ground.text import neutralise

        print(f"lineup {args.command}: {neutralise(str(found))}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        sys.stdout.flush()   # what is still buffered fails here, not in Python's exit
    except OSError as exc:
        return stdout_failed(args.command, exc)
    return code


def entry() -> NoReturn:
    """The `lineup` command (its script, `python -m lineup`): `main`, then `quick_exit`."""
    try:
        code: object = main()
    except SystemExit as exc:   # argparse: --help, --version, a usage error
        code = exc.code
    quick_exit(code)


def quick_exit(code: object) -> NoReturn:
    """End the process as `sys.exit(code)` would, without the interpreter's
    teardown: the exit handlers (`atexit`) run and standard output and error
    are flushed, then `os._exit`.

    Why: after its last line a process that loaded numpy, pydantic and the
    report freed their objects one by one, module by module: 70-90 ms of a
    0.5 s `lineup report --json`, waited for by whoever runs it (a script, a
    prompt). Nothing of lineup's is left to that teardown: stores are closed
    and files written by then. The usual exit is kept where the teardown
    could still matter: another thread still running (it is waited for), an
    exit code that is not a number, a flush that fails, Python's development
    mode (its warnings at teardown are what it is for)."""
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    if others or not isinstance(code, int | None) or sys.flags.dev_mode \
            or threading.current_thread() is not threading.main_thread() or not _flushed():
        raise SystemExit(code)
    atexit._run_exitfuncs()
    _flushed()                       # what the handlers wrote
    os._exit(int(code or 0))


def _flushed() -> bool:
    """Flush standard output and error (and the originals under them), each
    whatever the others did: whether all went."""
    ok = True
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            ok = False
    return ok
