"""The provider batches of `lineup run --batch`, as the record keeps them.

A batch job is written (state "prepared", with every request it holds)
before anything is sent, marked "submitted" with the provider's batch id the
moment the provider has it, and "collected" once every result is saved; so a
run killed at any point finds its batches here and resumes them instead of
submitting them again. Each answer collected is written in the same
transaction as the item that names it. (`core.answering.batch_run` drives this; the
tables are created by migration m008.)"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from store import rows as R
from store.db import Store
from store.rows import upsert_output
from store.ids import new_ulid
from store.records import OutputRecord

JobState = Literal["prepared", "submitted", "ended", "collected", "failed"]
OPEN_STATES = ("prepared", "submitted", "ended")


class BatchItem(BaseModel):
    """One request of a batch: which turn and contestant it answers."""

    custom_id: str
    turn_id: str
    contestant: str
    attempt: int = 1
    request_key: str | None = None
    output_id: str | None = None


class BatchJob(BaseModel):
    id: str = Field(default_factory=new_ulid)
    session_id: str
    contestant: str
    provider: str
    base_url: str
    round: int
    state: JobState = "prepared"
    remote_id: str | None = None
    input_file_id: str | None = None
    remote_status: str | None = None
    counts: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    created: float = Field(default_factory=time.time)
    submitted: float | None = None
    ended: float | None = None
    items: list[BatchItem] = Field(default_factory=list)


_JOB_COLS = ("id", "session_id", "contestant", "provider", "base_url", "round", "state", "remote_id",
             "input_file_id", "remote_status", "counts", "error", "created", "submitted", "ended")
_ITEM_COLS = ("batch_id", "custom_id", "turn_id", "contestant", "attempt", "request_key", "output_id")


def create_job(store: Store, job: BatchJob) -> None:
    """Record a job and its requests, before it is submitted (one transaction)."""
    def step(conn: sqlite3.Connection) -> None:
        conn.execute(R.insert_sql("batch_job", _JOB_COLS), _job_row(job))
        conn.executemany(R.insert_sql("batch_item", _ITEM_COLS),
                         [(job.id, i.custom_id, i.turn_id, i.contestant, i.attempt, i.request_key, i.output_id)
                          for i in job.items])
    store._write(f"record batch {job.id}", step)


def update_job(store: Store, job_id: str, **fields: Any) -> None:
    """Change some columns of a job (`counts` as a dict)."""
    bad = [k for k in fields if k not in _JOB_COLS[2:]]
    if bad:
        raise ValueError(f"not a batch job column: {', '.join(bad)}")
    values = [R.dumps(v) if k == "counts" else v for k, v in fields.items()]
    sql = f"UPDATE batch_job SET {', '.join(k + ' = ?' for k in fields)} WHERE id = ?"
    store._write(f"update batch {job_id}", lambda conn: conn.execute(sql, [*values, job_id]))


def collect(store: Store, job_id: str, custom_id: str, output: OutputRecord) -> None:
    """Save one result's answer and link its item to it, in one transaction."""
    def step(conn: sqlite3.Connection) -> None:
        upsert_output(conn, output, time.time())
        conn.execute("UPDATE batch_item SET output_id = ? WHERE batch_id = ? AND custom_id = ?",
                     [output.id, job_id, custom_id])
    store._write(f"save batch answer {output.id}", step)


def jobs(store: Store, session_id: str, states: tuple[str, ...] = OPEN_STATES) -> list[BatchJob]:
    """The session's jobs in `states`, oldest first, with their items."""
    try:
        conn = store.conn
        marks = ", ".join("?" * len(states))
        found = []
        for row in conn.execute(f"SELECT {R.cols(_JOB_COLS)} FROM batch_job WHERE session_id = ? "
                                f"AND state IN ({marks}) ORDER BY created, id", [session_id, *states]).fetchall():
            d = dict(zip(_JOB_COLS, row, strict=True))
            d["counts"] = json.loads(d["counts"]) if d["counts"] else {}
            items = [BatchItem(**dict(zip(_ITEM_COLS[1:], r, strict=True))) for r in conn.execute(
                f"SELECT {R.cols(_ITEM_COLS[1:])} FROM batch_item WHERE batch_id = ? ORDER BY custom_id", [d["id"]])]
            found.append(BatchJob(**d, items=items))
    except sqlite3.DatabaseError as exc:
        raise store._translate(exc, "read") from None
    return found


def _job_row(job: BatchJob) -> tuple:
    return (job.id, job.session_id, job.contestant, job.provider, job.base_url, job.round, job.state,
            job.remote_id, job.input_file_id, job.remote_status, R.dumps(job.counts), job.error, job.created,
            job.submitted, job.ended)
