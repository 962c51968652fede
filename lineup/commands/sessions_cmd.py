"""`lineup sessions`: list saved sessions, newest first. Blind sessions show
"hidden" instead of their contestants until every judged unit (case or turn)
is revealed, and "k of n revealed" once some are. `--delete ID` deletes one
(asking first on a terminal; `--yes` without one), leaving a tombstone so
that no merge or import brings it back."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from store import SessionSummary

KINDS = ("chat", "run", "rerun", "import", "load")
PIPED_ROWS = 100      # the table's default length when no terminal says how many rows fit
SPARE_LINES = 3       # a terminal's lines the table leaves: its header, the "more" line, the next prompt


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kind", choices=KINDS, help="only sessions of this kind")
    parser.add_argument("--search", metavar="TEXT", help="only sessions whose title, prompts or answers contain TEXT")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="at most N sessions (0: all). The table's default: on a terminal, as many as fit "
                             f"its height; piped, the newest {PIPED_ROWS}; a last line says how many more there are. "
                             "--json lists all")
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

    from core.ground.text import one_line
    from lineup.commands import narrow_terminal, open_store
    from store import StoreError, default_db_path
    from store.bounds import finite_or_none, time_ok

    path = Path(args.db or default_db_path())
    if not path.exists():
        print("[]" if args.json else f"No sessions yet (no database at {path}).")
        return 0
    if args.limit is not None and args.limit < 0:
        from core.ground.errors import UsageError

        raise UsageError("--limit must be 0 (all) or more")
    store = open_store(args, write=False)
    short: dict[str, str] | None = None
    try:
        sessions = store.list_sessions(limit=args.limit or None, kind=args.kind, search=args.search)
        if not args.json and narrow_terminal():
            # a narrow terminal: each id as the shortest prefix that names it (commands take one),
            # so that the kinds and contestants keep room to be read
            short = store.short_ids([s.id for s in sessions[:rows_shown(len(sessions), args.limit is not None)]])
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
    print_table(sessions, limited=args.limit is not None, short=short)
    return 0


def rows_shown(n: int, limited: bool) -> int:
    """How many of n sessions the table draws: all when `--limit` chose them,
    else on a terminal those that fit its height, piped the newest PIPED_ROWS."""
    import shutil
    import sys

    if limited:
        return n
    if sys.stdout.isatty():
        return max(shutil.get_terminal_size().lines - SPARE_LINES, 1)
    return PIPED_ROWS


def print_table(sessions: list[SessionSummary], limited: bool, short: dict[str, str] | None = None) -> None:
    """The table, newest first. Drawing is what costs (Rich measures every
    cell), so unless `--limit` chose the length it draws only what is read:
    on a terminal the rows that fit its height, one line each (long cells cut
    with an ellipsis), piped the newest PIPED_ROWS (never cut: no width to
    fit); then a line says how many are not shown. `short`: ids shown as
    their unique prefixes (a narrow terminal)."""
    import sys

    from rich.console import Console, JustifyMethod
    from rich.table import Table
    from rich.text import Text

    from core.ground.text import format_time, one_line

    terminal = sys.stdout.isatty()
    room = rows_shown(len(sessions), limited)
    hidden = max(len(sessions) - room, 0)
    shown = sessions[:room]
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("id", "left"), ("date", "left"), ("kind", "left"), ("contestants", "left"), ("turns", "right"),
        ("votes", "right"))
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=name in ("id", "date"))
    show_titles = any(s.title for s in shown)
    if show_titles:
        table.add_column("title")
    def cell(text: str) -> Text:
        # on a terminal one line a row, so that the rows counted to fit do fit: the columns
        # still narrow as before (contestants and title first), each cell is cut, not wrapped
        return Text(text, no_wrap=True, overflow="ellipsis") if terminal else Text(text)

    for s in shown:
        who = s.reveal_note if s.contestants is None else ", ".join(s.contestants)
        kind = s.kind + (" (demo)" if s.is_demo else "")
        sid = (short or {}).get(s.id, s.id)
        cells = [cell(one_line(sid)), cell(format_time(s.created, "%Y-%m-%d %H:%M", utc=False)), cell(kind),
                 cell(one_line(who)), cell(str(s.turns)),
                 # people's votes; a judge's verdicts apart, never added to them
                 cell(str(s.votes) + (f" (+{s.judge_votes} judge)" if s.judge_votes else ""))]
        if show_titles:
            cells.append(cell(one_line(s.title or "")))
        table.add_row(*cells)
    # piped or captured: no terminal width to fit, so never cut a name short
    width = None if terminal else 400
    Console(highlight=False, markup=False, emoji=False, width=width).print(table)
    if hidden:
        print(f"... {hidden} more session{'s' if hidden != 1 else ''} not shown (--limit N; 0 for all)")
