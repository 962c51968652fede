"""`lineup share SESSION... -o FILE [--reasoning]`: a blind vote package of
these sessions for other raters (`core.exchange.share` says what goes in: the cases
and answers, nothing that tells a model apart), its mapping kept in this
database for `lineup import FILE`."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sessions", nargs="+", metavar="SESSION", help="session ids or unique prefixes")
    parser.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the package to write (a SQLite file; never over an existing file)")
    parser.add_argument("--reasoning", action="store_true",
                        help="include the answers' reasoning (left out by default: whether there is any, "
                             "and how it reads, tells models apart)")


def run(args: argparse.Namespace) -> int:
    from core.answering.config import ConfigError, load_config
    from core.ground.errors import UsageError
    from core.exchange.share import ShareError, share_sessions
    from core.ground.text import one_line
    from lineup.commands import open_store
    from store import StoreError

    try:   # the custom tags go with the package, so raters tag with the same taxonomy
        tags = load_config(args.config).tags
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    store = open_store(args, write=True)
    try:
        summary = share_sessions(store, args.sessions, args.output, tags=tags, reasoning=args.reasoning)
    except (ShareError, StoreError) as exc:
        if isinstance(exc, StoreError) and not str(exc).startswith("no session") and "ambiguous" not in str(exc):
            raise
        raise UsageError(f"{exc}; no package was written") from None
    finally:
        store.close()
    path = one_line(summary.path)
    # the commands on lines of their own: whole to be copied, and the prose around them
    # never cut mid-word where a narrow terminal wraps a long line
    print(f"{path}: package {summary.package_id} with {summary.sessions} session"
          f"{'s' if summary.sessions != 1 else ''}, {summary.cases} case{'s' if summary.cases != 1 else ''}, "
          f"{summary.answers} answers\n"
          f"a rater votes with (or in a browser: lineup rate FILE):\n  lineup vote {path} --rater NAME\n"
          f"then, back here, with the file the rater returns:\n  lineup import FILE")
    return 0
