"""`lineup replay SESSION [--rerun -m X -m Y]`: a saved session read-only,
or the same user turns re-run against other models as a new linked session."""

from __future__ import annotations

import argparse

from lineup.commands.running import add_no_exec


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", help="session id (or a unique prefix)")
    p.add_argument("--rerun", action="store_true",
                   help="send the session's user turns to other models (a new session of kind 'rerun')")
    p.add_argument("-m", "--model", dest="models", action="append", default=[], metavar="ALIAS",
                   help="with --rerun: a model alias (repeat; default: the original session's models)")
    add_no_exec(p)   # with --rerun: the recorded checks run again


def run(args: argparse.Namespace) -> int:
    from core.answering.config import load_config, resolve_models
    from core.ground.errors import UsageError
    from lineup.commands import checked_params, open_store
    from providers.events import SamplingParams
    from store import StoreError, default_db_path

    db = args.db or default_db_path()
    if args.models and not args.rerun:
        raise UsageError("-m only goes with --rerun")
    with open_store(args, write=False) as store:
        try:
            original = store.get_session(args.session)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
    config = load_config(args.config)   # a ConfigError is a UsageError: exit 2
    if original.kind == "run" and args.rerun:
        aliases = args.models or [c.alias for c in sorted(original.contestants, key=lambda c: c.position)]
        params = {k: v for k, v in original.params.items() if k in SamplingParams.model_fields and k != "seed"}
        return _rerun_run(args, config, resolve_models(config, aliases), original, params)
    from lineup.launch import run_app
    from tui.app import ChatOptions, ReplayOptions  # the TUI only for what is interactive

    if not args.rerun:
        return run_app(db, config, replay=ReplayOptions(original.id))
    aliases = args.models or [c.alias for c in sorted(original.contestants, key=lambda c: c.position)]
    models = resolve_models(config, aliases)
    params = {k: v for k, v in original.params.items() if k in SamplingParams.model_fields and k != "seed"}
    opts = ChatOptions(models=models, blind=original.blind, system=original.system,
                       params=checked_params(params, where=f"session {original.id}"), seed=original.seed,
                       rerun_of=original.id)
    return run_app(db, config, chat=opts)


def _rerun_run(args: argparse.Namespace, config, models, original, params: dict) -> int:
    """A `run` session re-runs as a run: case by case, each contestant in its
    own thread, with the recorded case ids, categories, follow-ups and checks
    (not as one chat that interleaves every case)."""
    from pydantic import ValidationError
    from rich.console import Console

    from core.ground.errors import UsageError
    from core.answering.runner import CONTESTANT_FIELDS, field_changes, sample_set_from_run
    from core.answering.sampleset import _validation_problems
    from core.ground.text import one_line
    from lineup.commands import checked_params, open_store
    from lineup.commands.running import execute, require_keys

    require_keys(config, models)
    with open_store(args, write=False) as store:
        loaded = store.load_session(original.id)
    try:
        sample_set, lost = sample_set_from_run(loaded)
    except ValidationError as exc:   # recorded by an older lineup that let it through (a case's params)
        raise UsageError("; ".join(_validation_problems(f"session {original.id}", exc))) from None
    problems = sample_set.template_problems(models)   # a variant's template: every case gives its variables
    if problems:
        raise UsageError("\n".join(problems))
    err = Console(stderr=True, highlight=False, markup=False)
    for what in lost:
        err.print(one_line(f"not re-sent: {what}"))
    had = {c.alias: c for c in original.contestants}
    # parameters are merged with the run's, so the run itself compares them
    same = tuple(name for name in CONTESTANT_FIELDS if name != "params")
    for what in (w for m in models if m.alias in had for w in field_changes(m.alias, had[m.alias], m, same)):
        err.print(one_line(f"since the original, {what} (the re-run uses the config as it is now)"))
    seed = original.params.get("seed")
    return execute(args, config, models, sample_set,
                   checked_params({**params, "seed": seed}, where=f"session {original.id}"),
                   repeat=int(original.meta.get("repeat") or 1), concurrency=8, system=original.system,
                   new=False, quiet=False, rerun_of=original.id)
