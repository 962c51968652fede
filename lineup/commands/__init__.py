"""One module per command: `configure(parser)` and `run(args) -> int`.

What several commands share lives here (the database, sessions named on the
command line, checked flags, prices, the BLAS setting) or, for the commands
that send a set's requests, in `running`; a command never imports another
command's module."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: `core.stats.style.RECIPES` and its default, named here so that parsing the
#: command line loads no numpy (tests/test_style_recipe.py checks they agree).
STYLE_RECIPES = ("lmarena", "lineup")
DEFAULT_STYLE_RECIPE = "lmarena"


#: A terminal narrower than this shows session ids as their shortest unique
#: prefixes (`lineup sessions`, `lineup drift --report`).
WIDE_COLUMNS = 120


def narrow_terminal() -> bool:
    """Standard output is a terminal narrower than `WIDE_COLUMNS`."""
    import shutil
    import sys

    return sys.stdout.isatty() and shutil.get_terminal_size().columns < WIDE_COLUMNS


def for_terminal(text: str, stream: Any = None) -> str:
    """`text` wrapped at word boundaries to the terminal's width when `stream`
    (default stdout) is one: a terminal cuts a long line anywhere, a word or
    a variable's name in two. Piped, as it is."""
    stream = sys.stdout if stream is None else stream
    if not stream.isatty():
        return text
    import shutil
    import textwrap

    width = max(20, shutil.get_terminal_size().columns - 1)
    return "\n".join(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False) or line
                     for line in text.split("\n"))


def db_path(args: argparse.Namespace) -> Path:
    """`--db`, else `LINEUP_DB`, else the default."""
    from store import default_db_path

    return Path(args.db).expanduser() if getattr(args, "db", None) else default_db_path()


def open_store(args: argparse.Namespace, *, write: bool):
    """This command's database: `--db`, else `LINEUP_DB`, else the default.

    A writing command creates it when missing and refuses a read-only file
    before anything is recorded; a reading command never creates one and
    works on a read-only file. Either way a file that is not a lineup
    database (or is from a newer lineup) is bad input: `UsageError`, exit 2.
    """
    from core.ground.errors import UsageError
    from store import Store, StoreError

    try:
        store = Store.open(db_path(args), create=write)
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


def open_readonly(path: Path):
    """A database a reading command only reads (`report`, `decide`): opened
    read-only, so it never takes a write lock; not lineup's, or from a newer
    lineup, is a `UsageError`."""
    from core.ground.errors import UsageError
    from store import Store, StoreError

    try:
        return Store.open(path, readonly=True)
    except StoreError as exc:   # not SQLite, not lineup's, from a newer lineup: bad input
        raise UsageError(str(exc)) from None


def resolve_sessions(store, refs, *, flag: str | None = None) -> list[str]:
    """The session ids that `refs` (ids, unique prefixes, `last`) name; one
    that names none or several is a `UsageError` (`--flag: ...` when given)."""
    from core.ground.errors import UsageError
    from store import StoreError

    try:
        return [store.resolve_session(ref) for ref in refs]
    except StoreError as exc:
        raise UsageError(f"{flag}: {exc}" if flag else str(exc)) from None


def single_threaded_blas() -> None:
    """The fits solve thousands of tiny systems; a multi-threaded BLAS only adds
    contention (measured: the 100k-vote report ran ~2x slower on a busy 2-core
    machine). Effective only if numpy is not loaded yet; an explicit setting wins."""
    if "numpy" not in sys.modules:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")


def config_prices(args: argparse.Namespace) -> Mapping[str, Any]:
    """alias -> Price from the config, for answers with no recorded cost. The
    default config is read when first asked for (most answers have a cost
    or their session recorded its price, and loading the config machinery
    is a tenth of a report's start); one named with `--config` at once, so
    that a broken one is said. A broken config only costs the prices: the
    command still runs."""
    prices = _ConfigPrices(args)
    if getattr(args, "config", None) is not None:
        prices._load()
    return prices


class _ConfigPrices(Mapping[str, Any]):
    """`config_prices`' mapping: the config is loaded on first use."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self._prices: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        if self._prices is None:
            from core.answering.config import ConfigError, load_config

            try:
                config = load_config(self._args.config)
            except ConfigError as exc:
                print(f"lineup {getattr(self._args, 'command', None) or 'report'}: config not used for prices "
                      f"({exc})", file=sys.stderr)
                self._prices = {}
            else:
                self._prices = {alias: m.price for alias, m in config.models.items() if m.price is not None}
        return self._prices

    def __getitem__(self, alias: str) -> Any:
        return self._load()[alias]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())
