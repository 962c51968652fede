"""The rows of scores from outside lineup (tables `leaderboard_score` and
`online_metric`, migration `m008_public_scores`): written by `lineup import
--leaderboard / --online`, read by the report. The parsing and the figures
are `core.stats.public_scores`; this module is only their SQL."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from store.db import Store

LEADERBOARD_COLS = ("model", "score", "ci_low", "ci_high", "source", "date", "file", "line")
ONLINE_COLS = ("model", "metric", "value", "n", "period", "higher_is_better", "file", "line")


def _write(store: Store, table: str, cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
    now = time.time()
    sql = (f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}, imported) "
           f"VALUES ({', '.join('?' * (len(cols) + 1))})")
    with store.batch():    # all or nothing
        store.conn.executemany(sql, [tuple(r) + (now,) for r in rows])
    return len(rows)


def write_leaderboard(store: Store, rows: Sequence[Sequence[Any]]) -> int:
    """Rows in `LEADERBOARD_COLS` order; returns how many."""
    return _write(store, "leaderboard_score", LEADERBOARD_COLS, rows)


def write_online(store: Store, rows: Sequence[Sequence[Any]]) -> int:
    """Rows in `ONLINE_COLS` order; returns how many."""
    return _write(store, "online_metric", ONLINE_COLS, rows)


def _read(store: Store, table: str, cols: Sequence[str], order: str) -> list[dict[str, Any]]:
    conn = store.conn
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone():
        return []     # a database from before the migration, opened read-only
    cur = conn.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}")
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def read_leaderboard(store: Store) -> list[dict[str, Any]]:
    return _read(store, "leaderboard_score", LEADERBOARD_COLS, "source, date, model")


def read_online(store: Store) -> list[dict[str, Any]]:
    return _read(store, "online_metric", ONLINE_COLS, "metric, period, model")
