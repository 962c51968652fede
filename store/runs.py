"""Reads of runs beyond one session: the answer already recorded for a
request key (the response cache: `core.answering.cache` says what a key covers and how
a reused answer is recorded) and the canary runs of the drift watch."""

from __future__ import annotations

import sqlite3

from store import rows as R
from store.db import Store
from store.records import OutputRecord


def find_cached(store: Store, request_key: str) -> OutputRecord | None:
    """A complete answer recorded for `request_key`: the earliest one that
    came from the provider (streamed or batch), else one reused itself.
    Uses the partial index `output_request_key`."""
    try:
        row = store.conn.execute(
            f"SELECT {R.cols(R.READ['output'])} FROM output WHERE request_key = ? AND status = 'complete' "
            "ORDER BY origin = 'cache', created, id LIMIT 1", [request_key]).fetchone()
    except sqlite3.DatabaseError as exc:
        raise store._translate(exc, "read") from None
    return R.output_from(row) if row is not None else None


def canary_session_ids(store: Store) -> list[str]:
    """The runs `lineup drift` recorded (meta `canary`), oldest first."""
    try:
        rows = store.conn.execute(
            "SELECT id FROM session WHERE kind = 'run' AND json_extract(meta, '$.canary') = 1 "
            "ORDER BY created, id").fetchall()
    except sqlite3.DatabaseError as exc:
        raise store._translate(exc, "read") from None
    return [r[0] for r in rows]
