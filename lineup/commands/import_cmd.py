"""`lineup import FILE`: our JSONL export, Chatbot Arena battles (JSON array
or JSONL), or another lineup database, merged idempotently. All or nothing:
a bad line (reported with its number) means nothing from FILE is imported."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a lineup .jsonl export, Arena battles (.json/.jsonl), or a lineup .db")


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from core.errors import UsageError
    from core.importing import import_file
    from core.inputs import InputError, open_input, shown_name
    from lineup.commands import open_store
    from store import StoreError
    from store.db import SQLITE_HEADER
    from store.imports import ImportFileError

    source = Path(args.file)
    shown = shown_name(source)
    try:   # refused before the database is opened (or created): a FIFO, a device, too large
        with open_input(source, limit=0) as f:
            head = f.read(16)
        if head != SQLITE_HEADER:
            open_input(source).close()
    except InputError as exc:
        raise UsageError(f"{exc}; nothing was imported") from None
    store = open_store(args, write=True)
    try:
        summary = import_file(store, source)
    except ImportFileError as exc:
        raise UsageError(f"{exc}; nothing was imported") from None
    except StoreError as exc:
        print(f"lineup import: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    if summary.format == "empty":
        raise UsageError(f"{shown}: no records in it (an empty file?); nothing was imported")
    added = {k: v for k, v in summary.added.items() if v}
    if not added:
        print(f"{shown}: nothing new to import ({summary.records} records already present)")
    else:
        parts = ", ".join(f"{n} {table.replace('_', ' ')}{'s' if n != 1 else ''}" for table, n in added.items())
        print(f"{shown} ({summary.format}): imported {parts}")
    if summary.deleted_here:
        from core.text import one_line

        n = len(summary.deleted_here)
        print(f"{shown}: left out {n} session{'s' if n != 1 else ''} deleted here "
              f"({one_line(', '.join(summary.deleted_here[:3]))}{' ...' if n > 3 else ''})")
    return 0
