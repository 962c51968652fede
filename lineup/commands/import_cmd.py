"""`lineup import FILE`: our JSONL export, Chatbot Arena battles (JSON array
or JSONL), or another lineup database, merged idempotently. All or nothing:
a bad line (reported with its number) means nothing from FILE is imported.
`--leaderboard CSV` and `--online CSV`: public leaderboard scores and online
canary metrics, shown in the report beside the ratings (`core.stats.public_scores`)."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", nargs="?",
                        help="a lineup .jsonl export, Arena battles (.json/.jsonl), or a lineup .db")
    parser.add_argument("--leaderboard", metavar="CSV",
                        help="public scores: columns model, score, optional ci_low, ci_high, source, date")
    parser.add_argument("--online", metavar="CSV",
                        help="online canary metrics: columns model, metric, value, n, optional period, "
                             "higher_is_better")


def _import_public(args: argparse.Namespace) -> int:
    from pathlib import Path

    from core.ground.errors import UsageError
    from core.stats.public_scores import PublicScoreError, parse_leaderboard, parse_online
    from lineup.commands import open_store
    from store import public_scores as P

    parsed = []
    try:
        if args.leaderboard:
            parsed.append(("leaderboard", Path(args.leaderboard), parse_leaderboard(Path(args.leaderboard))))
        if args.online:
            parsed.append(("online", Path(args.online), parse_online(Path(args.online))))
    except PublicScoreError as exc:
        raise UsageError(f"{exc}; nothing was imported") from None
    store = open_store(args, write=True)
    try:
        for kind, path, rows in parsed:
            n = (P.write_leaderboard if kind == "leaderboard" else P.write_online)(store, rows)
            what = "public scores" if kind == "leaderboard" else "online metric rows"
            print(f"{path.name}: imported {n} {what}")
    finally:
        store.close()
    return 0


def run(args: argparse.Namespace) -> int:
    from core.ground.errors import UsageError

    if args.leaderboard or args.online:
        if args.file:
            raise UsageError("give FILE, or --leaderboard / --online, not both")
        return _import_public(args)
    if not args.file:
        raise UsageError("nothing to import: give FILE, --leaderboard CSV or --online CSV")
    import sys
    from pathlib import Path

    from core.exchange.importing import import_file
    from core.ground.inputs import InputError, open_input, shown_name
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
        parts = ", ".join(_count(n, table.replace("_", " ")) for table, n in added.items())
        print(f"{shown} ({summary.format}): imported {parts}")
    if summary.deleted_here:
        from core.ground.text import one_line

        n = len(summary.deleted_here)
        print(f"{shown}: left out {n} session{'s' if n != 1 else ''} deleted here "
              f"({one_line(', '.join(summary.deleted_here[:3]))}{' ...' if n > 3 else ''})")
    return 0


def _count(n: int, noun: str) -> str:
    """"1 vote", "2 blind guesses": the rows added of one table, in words."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun}{'es' if noun.endswith(('s', 'x', 'ch', 'sh')) else 's'}"
