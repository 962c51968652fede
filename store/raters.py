"""The SQL of team raters in a browser (`lineup rate`): teams, the hashed
links of their raters and owner, and which rater each unit went to. What a
link is, how units are assigned and what progress means is `core.answering.raters`';
nothing here knows a token, only its hash."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence

from store.db import Store


def find_team(store: Store, sessions: Sequence[str], overlap: int) -> str | None:
    """The id of the team over exactly these sessions with this overlap, if any."""
    row = store.conn.execute("SELECT id FROM rater_team WHERE sessions = ? AND overlap = ? ORDER BY created LIMIT 1",
                             [json.dumps(sorted(sessions)), overlap]).fetchone()
    return row[0] if row else None


def create_team(store: Store, team_id: str, sessions: Sequence[str], overlap: int) -> None:
    store._write(f"create the rater team {team_id}", lambda conn: conn.execute(
        "INSERT INTO rater_team (id, created, sessions, overlap) VALUES (?, ?, ?, ?)",
        [team_id, time.time(), json.dumps(sorted(sessions)), overlap]))


def team_raters(store: Store, team_id: str) -> list[str]:
    """The raters who hold a link to this team, in the order they were added."""
    return [r for (r,) in store.conn.execute(
        "SELECT rater FROM rater_link WHERE team_id = ? AND role = 'rater' ORDER BY created, rater", [team_id])]


def set_link(store: Store, team_id: str, rater: str, role: str, token_hash: str) -> None:
    """Give `rater` (the owner: role 'owner', rater '') this link, replacing
    the one they had: the old link stops working."""
    def step(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM rater_link WHERE team_id = ? AND role = ? AND rater = ?", [team_id, role, rater])
        conn.execute("INSERT INTO rater_link (token_hash, team_id, rater, role, created) VALUES (?, ?, ?, ?, ?)",
                     [token_hash, team_id, rater, role, time.time()])
    store._write(f"issue a link of the rater team {team_id}", step)


def link_of(store: Store, token_hash: str) -> tuple[str, str, str] | None:
    """(team id, rater, role) of the link with this token hash, or None."""
    row = store.conn.execute("SELECT team_id, rater, role FROM rater_link WHERE token_hash = ?",
                             [token_hash]).fetchone()
    return (row[0], row[1], row[2]) if row else None


def assignments(store: Store, team_id: str) -> list[tuple[str, str]]:
    """(unit, rater) of every assignment of the team, oldest first."""
    return [(u, r) for u, r in store.conn.execute(
        "SELECT unit, rater FROM rater_assignment WHERE team_id = ? ORDER BY created, unit, rater", [team_id])]


def add_assignments(store: Store, team_id: str, rows: Iterable[tuple[str, str]]) -> int:
    """Record (unit, rater) assignments in one transaction; those already
    there are kept. Returns how many were new."""
    rows = list(rows)
    now = time.time()

    def step(conn: sqlite3.Connection) -> int:
        before = conn.total_changes
        conn.executemany("INSERT OR IGNORE INTO rater_assignment (team_id, unit, rater, created) VALUES (?, ?, ?, ?)",
                         [(team_id, u, r, now) for u, r in rows])
        return conn.total_changes - before

    return store._write(f"assign units of the rater team {team_id}", step) if rows else 0
