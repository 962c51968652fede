"""`lineup vote [SESSION | PACKAGE] [--rater NAME] [--reveal each|end]
[--repeats separate|together] [--adaptive [--confidence P]] [--gold-rate R]
[--blinding-audit]`: the blind queue over cases without a vote, in the
database or in a vote package (`lineup share`), which needs no config and no
network: its votes are saved in the package. `--adaptive` serves the (case,
pair of models) that does the most for the ranking next and says when its
top is separated (`core.stats.adaptive`); `--gold-rate` mixes in gold pairs (an
answer against a spoiled copy of it) to measure each rater's accuracy
(`lineup report`, rater quality); `--blinding-audit` asks after each vote
which model wrote A."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", nargs="?",
                   help="only this session (default: every session), or a vote package file from `lineup share`")
    p.add_argument("--rater", help="who is voting (default: LINEUP_RATER, else the login name)")
    p.add_argument("--reveal", choices=("each", "end"), default="each",
                   help="show the model names after each vote (default) or only at the end")
    p.add_argument("--repeats", choices=("separate", "together"), default="separate",
                   help="with `lineup run --repeat`: judge each repeat on its own (default) or all together")
    p.add_argument("--adaptive", action="store_true",
                   help="serve next the pair of models whose order is least certain (two answers at a time) "
                        "and say when the top of the ranking is separated")
    p.add_argument("--confidence", type=float, default=0.95, metavar="P",
                   help="with --adaptive: the confidence at which the top counts as separated (default 0.95)")
    p.add_argument("--gold-rate", type=float, default=0.0, metavar="R",
                   help="after each case, with this chance, a gold pair: an answer against a spoiled copy of it, "
                        "recorded as a check of the rater, never a vote (default 0: none)")
    p.add_argument("--blinding-audit", action="store_true",
                   help="after each vote, before the names: which model do you think wrote A? (the report's "
                        "blinding index)")


def run(args: argparse.Namespace) -> int:
    from core.ground.errors import UsageError
    from lineup.commands import checked_rater, open_store, resolve_sessions
    from lineup.launch import run_app
    from store import default_db_path
    from tui.app import VoteOptions

    if not 0.5 < args.confidence < 1:
        raise UsageError(f"--confidence: a probability between 0.5 and 1, not {args.confidence}")
    if args.confidence != 0.95 and not args.adaptive:
        raise UsageError("--confidence goes with --adaptive")
    if not 0 <= args.gold_rate < 1:
        raise UsageError(f"--gold-rate: a chance from 0 up to (not including) 1, not {args.gold_rate}")
    rater = checked_rater(args.rater)
    if args.session and Path(args.session).is_file():
        if args.adaptive or args.gold_rate or args.blinding_audit:
            # a package holds no model identities to steer by, plant gold from or ask about
            raise UsageError("--adaptive, --gold-rate and --blinding-audit work on a database, not a vote package")
        return _vote_package(Path(args.session), args, rater)
    from core.answering.config import load_config

    db = args.db or default_db_path()
    session_id = None
    if args.session:
        with open_store(args, write=False) as store:
            session_id = resolve_sessions(store, [args.session])[0]
    config = load_config(args.config)   # a ConfigError is a UsageError: exit 2
    return run_app(db, config, vote=VoteOptions(session_id, reveal=args.reveal, repeats=args.repeats,
                                                         adaptive=args.adaptive, confidence=args.confidence,
                                                         gold_rate=args.gold_rate,
                                                         blinding_audit=args.blinding_audit),
                   rater=rater)


def _vote_package(path: Path, args: argparse.Namespace, rater: str | None) -> int:
    """The queue over a package: no config is read and nothing is sent; the
    package's own tags and shuffle seed."""
    from core.answering.config import Config
    from core.ground.errors import UsageError
    from core.ground.inputs import shown_name
    from core.exchange.share import package_tags
    from lineup.launch import run_app
    from store.imports import ImportFileError
    from store.share import package_info_at, settle_package
    from tui.app import VoteOptions

    info = package_info_at(path)
    if info is None:
        raise UsageError(f"{shown_name(path)} is not a vote package from `lineup share` (to vote in a database, "
                         "give it with --db)")
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        # the votes are saved in the package itself: say so before the queue opens, not at the first vote
        raise UsageError(f"{shown_name(path)} is read-only (the file or its folder): the votes are saved in the "
                         "package, so copy it somewhere you can write and vote there")
    try:
        tags = package_tags(info, shown_name(path))
    except ImportFileError as exc:
        raise UsageError(str(exc)) from None
    try:
        return run_app(path, Config(tags=tags),
                       vote=VoteOptions(None, reveal=args.reveal, repeats=args.repeats, case_seed=info.seed),
                       rater=rater)
    finally:
        settle_package(path)   # one file again, readable from a read-only share
