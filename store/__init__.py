"""The record: one SQLite file (sqlite-utils) that keeps every session, turn,
output, vote, tag and check result, so comparisons can be replayed, re-run
and counted later. ARCHITECTURE.md ("The record") says how it is laid out."""

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
    TagRecord,
    TurnRecord,
    VoteRecord,
)
from store.schema import SCHEMA_VERSION
from store.writer import AsyncStore

__all__ = [
    "AsyncStore", "CheckResultRecord", "ContestantRecord", "LoadedSession", "ModelVoteCount",
    "OutputRecord", "RevealRecord", "SCHEMA_VERSION", "SearchHit", "SessionRecord", "SessionSummary", "Store",
    "StoreError", "TagRecord", "TurnRecord", "VoteRecord", "default_db_path",
]
