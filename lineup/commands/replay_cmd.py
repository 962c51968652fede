"""`lineup replay SESSION [--rerun -m X -m Y]`: a saved session read-only,
or the same user turns re-run against other models as a new linked session."""

from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", help="session id (or a unique prefix)")
    p.add_argument("--rerun", action="store_true",
                   help="send the session's user turns to other models (a new session of kind 'rerun')")
    p.add_argument("-m", "--model", dest="models", action="append", default=[], metavar="ALIAS",
                   help="with --rerun: a model alias (repeat; default: the original session's models)")


def run(args: argparse.Namespace) -> int:
    from lineup.cli import UsageError
    from lineup.commands import open_store
    from lineup.config import load_config, resolve_models
    from lineup.events import SamplingParams
    from lineup.store import StoreError, default_db_path
    from lineup.tui.app import ChatOptions, ReplayOptions
    from lineup.tui.launch import run_app

    db = args.db or default_db_path()
    if args.models and not args.rerun:
        raise UsageError("-m only goes with --rerun")
    with open_store(args, write=False) as store:
        try:
            original = store.get_session(args.session)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
    config = load_config(args.config)   # a ConfigError is a UsageError: exit 2
    if not args.rerun:
        return run_app(db, config, replay=ReplayOptions(original.id))
    aliases = args.models or [c.alias for c in sorted(original.contestants, key=lambda c: c.position)]
    models = resolve_models(config, aliases)
    params = {k: v for k, v in original.params.items() if k in SamplingParams.model_fields and k != "seed"}
    opts = ChatOptions(models=models, blind=original.blind, system=original.system,
                       params=SamplingParams(**params), seed=original.seed, rerun_of=original.id)
    return run_app(db, config, chat=opts)
