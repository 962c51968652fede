"""The record: one SQLite file (sqlite-utils) that keeps every session, turn,
output, vote, tag and check result, so comparisons can be replayed, re-run
and counted later. ARCHITECTURE.md ("The record") says how it is laid out.

The names below are loaded on first use (PEP 562), so that a module that needs
one small part of the store (`store.bounds`, `store.ids`) does not pay for
the rest (pydantic's record classes, the Store): every command's start-up
time depends on it (benchmarks/bench_startup.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from store.db import Store, StoreError, default_db_path
    from store.records import (
        CheckResultRecord,
        ContestantRecord,
        LoadedSession,
        ModelVoteCount,
        OutputRecord,
        RevealRecord,
        SearchHit,
        SessionRecord,
        SessionSummary,
        ScoreRecord,
        TagRecord,
        TurnRecord,
        VoteRecord,
    )
    from store.schema import SCHEMA_VERSION
    from store.writer import AsyncStore

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "Store": "store.db", "StoreError": "store.db", "default_db_path": "store.db",
    "SCHEMA_VERSION": "store.schema", "AsyncStore": "store.writer",
    **{name: "store.records" for name in (
        "CheckResultRecord", "ContestantRecord", "LoadedSession", "ModelVoteCount", "OutputRecord",
        "RevealRecord", "ScoreRecord", "SearchHit", "SessionRecord", "SessionSummary", "TagRecord", "TurnRecord",
        "VoteRecord")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
