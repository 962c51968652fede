"""`lineup vote [SESSION | PACKAGE] [--rater NAME] [--reveal each|end]
[--repeats separate|together]`: the blind queue over cases without a vote,
in the database or in a vote package (`lineup share`), which needs no
config and no network: its votes are saved in the package."""

from __future__ import annotations

import argparse
from pathlib import Path


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", nargs="?",
                   help="only this session (default: every session), or a vote package file from `lineup share`")
    p.add_argument("--rater", help="who is voting (default: LINEUP_RATER, else the login name)")
    p.add_argument("--reveal", choices=("each", "end"), default="each",
                   help="show the model names after each vote (default) or only at the end")
    p.add_argument("--repeats", choices=("separate", "together"), default="separate",
                   help="with `lineup run --repeat`: judge each repeat on its own (default) or all together")


def run(args: argparse.Namespace) -> int:
    from core.errors import UsageError
    from lineup.commands import open_store
    from lineup.launch import run_app
    from store import StoreError, default_db_path
    from tui.app import VoteOptions

    rater = _rater(args.rater)
    if args.session and Path(args.session).is_file():
        return _vote_package(Path(args.session), args, rater)
    from core.config import load_config

    db = args.db or default_db_path()
    session_id = None
    if args.session:
        with open_store(args, write=False) as store:
            try:
                session_id = store.resolve_session(args.session)
            except StoreError as exc:
                raise UsageError(str(exc)) from None
    config = load_config(args.config)   # a ConfigError is a UsageError: exit 2
    return run_app(db, config, vote=VoteOptions(session_id, reveal=args.reveal, repeats=args.repeats),
                   rater=rater)


def _rater(name: str | None) -> str | None:
    from core.errors import UsageError

    if name is None:
        return None
    name = name.strip()
    if not name or len(name) > 80 or any(not ch.isprintable() for ch in name):
        raise UsageError("--rater: a name of 1 to 80 printable characters")
    return name


def _vote_package(path: Path, args: argparse.Namespace, rater: str | None) -> int:
    """The queue over a package: no config is read and nothing is sent; the
    package's own tags and shuffle seed."""
    from core.config import Config
    from core.errors import UsageError
    from core.inputs import shown_name
    from core.share import package_tags
    from lineup.launch import run_app
    from store.imports import ImportFileError
    from store.share import package_info_at
    from tui.app import VoteOptions

    info = package_info_at(path)
    if info is None:
        raise UsageError(f"{shown_name(path)} is not a vote package from `lineup share` (to vote in a database, "
                         "give it with --db)")
    try:
        tags = package_tags(info, shown_name(path))
    except ImportFileError as exc:
        raise UsageError(str(exc)) from None
    return run_app(path, Config(tags=tags),
                   vote=VoteOptions(None, reveal=args.reveal, repeats=args.repeats, case_seed=info.seed),
                   rater=rater)
