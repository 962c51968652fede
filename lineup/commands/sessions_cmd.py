"""`lineup sessions`: list saved sessions, newest first. Blind sessions show
"hidden" instead of their contestants until every judged unit (case or turn)
is revealed, and "k of n revealed" once some are. `--delete ID` deletes one
(asking first on a terminal; `--yes` without one), leaving a tombstone so
that no merge or import brings it back."""

from __future__ import annotations

import argparse

KINDS = ("chat", "run", "rerun", "import", "load")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kind", choices=KINDS, help="only sessions of this kind")
    parser.add_argument("--search", metavar="TEXT", help="only sessions whose title, prompts or answers contain TEXT")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="at most N sessions")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--delete", metavar="ID", help="delete this session (id or unique prefix) and all it holds; "
                                                       "a tombstone keeps merges and imports from bringing it back")
    parser.add_argument("--yes", action="store_true", help="with --delete: do not ask (needed without a terminal)")


def delete(args: argparse.Namespace) -> int:
    """`--delete ID`: say what goes, ask (on a terminal), delete, say it is done."""
    import sys

    from core.ground.errors import UsageError
    from core.ground.text import one_line
    from lineup.commands import open_store
    from store import StoreError

    store = open_store(args, write=True)
    try:
        try:
            sid = store.resolve_session(args.delete)
            summary = next(s for s in store.list_sessions() if s.id == sid)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        what = (f"session {sid} ({summary.kind}, {summary.turns} turn{'s' if summary.turns != 1 else ''}, "
                f"{summary.votes} vote{'s' if summary.votes != 1 else ''}"
                + (f", {one_line(summary.title, 60)!s}" if summary.title else "") + ")")
        if not args.yes:
            if not sys.stdin.isatty():
                raise UsageError(f"not deleting {what} without a terminal to confirm: add --yes")
            answer = input(f"Delete {what} and everything recorded in it? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("Nothing deleted.")
                return 0
        try:
            store.delete_session(sid)
        except StoreError as exc:
            print(f"lineup sessions: {exc}", file=sys.stderr)
            return 1
    finally:
        store.close()
    print(f"Deleted {what}; a tombstone keeps merges and imports from bringing it back.")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.delete:
        return delete(args)
    import json
    import sys
    from pathlib import Path

    from core.ground.text import format_time, one_line
    from lineup.commands import open_store
    from store import StoreError, default_db_path
    from store.bounds import finite_or_none, time_ok

    path = Path(args.db or default_db_path())
    if not path.exists():
        print("[]" if args.json else f"No sessions yet (no database at {path}).")
        return 0
    store = open_store(args, write=False)
    try:
        sessions = store.list_sessions(limit=args.limit, kind=args.kind, search=args.search)
    except StoreError as exc:
        print(f"lineup sessions: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    bad = [s.id for s in sessions if not time_ok(s.created)]
    if bad:   # a row written by an older lineup or by hand: listed, and said
        print(f"lineup sessions: warning: {len(bad)} session{'s' if len(bad) != 1 else ''} with a creation time "
              f"out of range (shown as the raw number): {one_line(', '.join(bad[:3]))}"
              f"{' ...' if len(bad) > 3 else ''}", file=sys.stderr)
    if args.json:
        rows = [{**s.model_dump(mode="json"), "created": finite_or_none(s.created)} for s in sessions]
        print(json.dumps(rows, indent=2, ensure_ascii=True))
        return 0
    if not sessions:
        print("No sessions match." if (args.kind or args.search) else "No sessions yet.")
        return 0
    from rich.console import Console, JustifyMethod
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("id", "left"), ("date", "left"), ("kind", "left"), ("contestants", "left"), ("turns", "right"),
        ("votes", "right"))
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=name in ("id", "date"))
    show_titles = any(s.title for s in sessions)
    if show_titles:
        table.add_column("title")
    for s in sessions:
        who = s.reveal_note if s.contestants is None else ", ".join(s.contestants)
        kind = s.kind + (" (demo)" if s.is_demo else "")
        cells = [Text(one_line(s.id)), Text(format_time(s.created, "%Y-%m-%d %H:%M", utc=False)), Text(kind),
                 Text(one_line(who)), Text(str(s.turns)),
                 # people's votes; a judge's verdicts apart, never added to them
                 Text(str(s.votes) + (f" (+{s.judge_votes} judge)" if s.judge_votes else ""))]
        if show_titles:
            cells.append(Text(one_line(s.title or "")))
        table.add_row(*cells)
    # piped or captured: no terminal width to fit, so never cut a name short
    width = None if sys.stdout.isatty() else 400
    Console(highlight=False, markup=False, emoji=False, width=width).print(table)
    return 0
