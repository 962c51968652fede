"""`lineup export [SESSION] --format jsonl|csv|md [-o FILE]`: one session
(default: the latest) as the re-importable JSONL record, a CSV of its votes,
or a Markdown transcript."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", nargs="?", help="session id or a unique prefix (default: the latest)")
    parser.add_argument("--format", "-f", choices=("jsonl", "csv", "md"), default="jsonl",
                        help="jsonl: one record per output; csv: one row per vote; md: transcript")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")


def run(args: argparse.Namespace) -> int:
    import os
    import sys
    from pathlib import Path

    from core.ground.errors import UsageError
    from core.exchange.export import stored_export
    from core.ground.files import write_stdout, write_text_atomic
    from core.ground.text import one_line
    from lineup.cli import stdout_failed
    from lineup.commands import open_store
    from store import StoreError

    store = open_store(args, write=False)
    path = store.path
    out = Path(args.output) if args.output and args.output != "-" else None
    # Read and written page by page (`stored_export`): the session is never held whole.
    try:
        session_id = args.session or store.latest_session_id()
        if session_id is None:
            raise UsageError(f"no sessions in {path}")
        if out is not None and out.exists() and path.exists() and os.path.samefile(out, path):
            raise UsageError(f"{out} is the database itself; choose another output file")
        with stored_export(store, session_id, args.format) as (session, pieces):
            bad, named = store.out_of_range([session.id])
            if bad:   # rows written by an older lineup or by hand: exported as they are, and said
                print(f"lineup export: warning: {bad} record{'s' if bad != 1 else ''} of session {session.id} "
                      f"hold a time, duration, count or cost out of range (times shown as raw numbers): "
                      f"{one_line(', '.join(named))}{' ...' if bad > len(named) else ''}", file=sys.stderr)
            if out is None:
                try:
                    write_stdout(pieces)
                except OSError as exc:   # a full disk behind `>`, or a reader that went away
                    return stdout_failed("export", exc)
                return 0
            try:
                write_text_atomic(out, pieces)
            except OSError as exc:
                print(f"lineup export: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
                return 1
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    print(f"exported session {session.id} ({args.format}) to {out}", file=sys.stderr)
    return 0
