"""One module per command: `configure(parser)` and `run(args) -> int`."""

from __future__ import annotations

import argparse


def open_store(args: argparse.Namespace, *, write: bool):
    """This command's database: `--db`, else `LINEUP_DB`, else the default.

    A writing command creates it when missing and refuses a read-only file
    before anything is recorded; a reading command never creates one and
    works on a read-only file. Either way a file that is not a lineup
    database (or is from a newer lineup) is bad input: `UsageError`, exit 2.
    """
    from core.ground.errors import UsageError
    from store import Store, StoreError, default_db_path

    try:
        store = Store.open(args.db or default_db_path(), create=write)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    if write and store.readonly:
        store.close()
        raise UsageError(f"{store.path} is read-only: nothing can be recorded there "
                         "(lineup replay, report, sessions and export still work)")
    return store


def checked_params(values: dict, *, where: str = "flag"):
    """`SamplingParams(**values)` (None values left out), or a `UsageError`
    naming each bad value: as its flag (`--temperature: must be between 0 and
    2`) when `where` is "flag", else as `WHERE: field: problem`."""
    from pydantic import ValidationError

    from core.ground.errors import UsageError
    from providers.events import SamplingParams, params_problems

    try:
        return SamplingParams(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        problems = params_problems(exc)
        if where == "flag":
            raise UsageError("; ".join(f"--{field.replace('_', '-')}: {what}" for field, what in problems)) from None
        raise UsageError("; ".join(f"{where}: {field}: {what}" for field, what in problems)) from None


def checked_rater(name: str | None) -> str | None:
    """`--rater NAME`, stripped: 1 to 80 printable characters, else a
    `UsageError`; None when not given (then `LINEUP_RATER`, else the login
    name: `core.answering.sessions.default_rater`)."""
    from core.ground.errors import UsageError
    from core.stats.votes import rater_problem

    if name is None:
        return None
    name = name.strip()
    problem = rater_problem(name)
    if problem:
        raise UsageError(f"--rater: {problem}")
    return name
