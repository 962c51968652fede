"""The read-only copy of a database that `lineup serve` publishes with
Datasette, and the metadata lineup ships for it.

Why a module of its own: Datasette serves every table of the file it is
given, and any SQL against it, so hiding tables or adding views over the
owner's database would not keep a blind mapping out of sight. What is served
is therefore a derived copy, made fresh at each start, holding only an
allow-list of tables and, of those, only sessions that are not blind or
were revealed: a blind session still waiting for its reveal (its contestants,
answers' labels, votes' mappings) is not in the file at all, nor are the
package mappings (`share_map`, `share_package`), run claims or the full-text
indexes. The copy is opened immutable and read-only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from store.rows import unpack_ints

#: Sessions that may be published: not blind, or blind and revealed.
VISIBLE = "(SELECT id FROM src.session WHERE blind = 0 OR revealed_at IS NOT NULL)"

#: table -> the rows of it that are published
TABLES: dict[str, str] = {
    "session": f"id IN {VISIBLE}",
    "contestant": f"session_id IN {VISIBLE}",
    "turn": f"session_id IN {VISIBLE}",
    "output": f"session_id IN {VISIBLE}",
    "vote": f"session_id IN {VISIBLE}",
    "vote_contestant": f"vote_id IN (SELECT id FROM src.vote WHERE session_id IN {VISIBLE})",
    "tag": f"output_id IN (SELECT id FROM src.output WHERE session_id IN {VISIBLE})",
    "check_result": f"output_id IN (SELECT id FROM src.output WHERE session_id IN {VISIBLE})",
}

VIEWS: dict[str, str] = {
    "answers": """SELECT o.id, o.session_id, t.case_id, t.category, o.contestant AS model, o.status,
        datetime(o.created, 'unixepoch') AS created_utc, o.ttft_ms, o.duration_ms,
        (SELECT count(*) FROM output_chunk c WHERE c.output_id = o.id) AS chunks,
        CASE WHEN o.duration_ms > o.ttft_ms AND o.output_tokens > 0
             THEN round(o.output_tokens * 1000.0 / (o.duration_ms - o.ttft_ms), 1) END AS tokens_per_s,
        o.input_tokens, o.output_tokens, o.cost, o.error_kind, o.text
        FROM output o JOIN turn t ON t.id = o.turn_id""",
    "chunk_timings": """SELECT c.output_id, o.contestant AS model, c.chunk, c.ms, c.chars
        FROM output_chunk c JOIN output o ON o.id = c.output_id""",
    "votes_readable": """SELECT v.id, v.session_id, t.case_id, t.category, v.rater, v.choice, v.winner,
        datetime(v.created, 'unixepoch') AS created_utc, v.note FROM vote v JOIN turn t ON t.id = v.turn_id
        WHERE v.current = 1""",
}

QUERIES: dict[str, dict[str, str]] = {
    "votes_per_model_and_category": {
        "title": "Votes per model and category",
        "sql": """SELECT vc.alias AS model, coalesce(t.category, '(none)') AS category, vc.outcome, count(*) AS votes
            FROM vote_contestant vc JOIN vote v ON v.id = vc.vote_id JOIN turn t ON t.id = v.turn_id
            WHERE vc.current = 1 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"""},
    "failure_modes_by_model": {
        "title": "Failure modes (tags) by model",
        "sql": """SELECT o.contestant AS model, g.tag, count(*) AS answers FROM tag g JOIN output o ON o.id = g.output_id
            WHERE g.removed_at IS NULL GROUP BY 1, 2 ORDER BY 1, 3 DESC"""},
    "slowest_answers": {
        "title": "Slowest answers",
        "sql": """SELECT id, model, case_id, duration_ms, ttft_ms, created_utc FROM answers
            WHERE duration_ms IS NOT NULL ORDER BY duration_ms DESC LIMIT 50"""},
    "check_pass_rates": {
        "title": "Check pass rates by model",
        "sql": """SELECT o.contestant AS model, c.check_name, sum(c.passed) AS passed, count(*) AS total,
            round(100.0 * sum(c.passed) / count(*), 1) AS pass_pct FROM check_result c
            JOIN output o ON o.id = c.output_id GROUP BY 1, 2 ORDER BY 1, 2"""},
}

DESCRIPTIONS: dict[str, str] = {
    "session": "A chat or a run: blind sessions appear here only once revealed",
    "contestant": "The models of a session (alias, provider, model, label shown)",
    "turn": "A prompt of a session (case id, category, text)",
    "output": "One answer of one model to one turn (times in ms, epoch seconds)",
    "vote": "A judgement: choice by label, winner by alias, the label->alias mapping",
    "vote_contestant": "Each vote's outcome per model",
    "tag": "Failure-mode tags set on answers",
    "check_result": "Automated checks of answers",
    "output_chunk": "Per-chunk timings of each answer, decoded from output.chunk_ms / chunk_chars "
                    "(ms since the request was sent, characters in the chunk)",
}


def write_published_copy(db: str | Path, out: str | Path) -> dict[str, int]:
    """Write the publishable copy of `db` to `out` (a new file); rows per table."""
    out = Path(out)
    conn = sqlite3.connect(f"file:{quote(str(out.resolve()))}", uri=True)
    try:
        conn.execute("ATTACH DATABASE ? AS src", [f"file:{quote(str(Path(db).resolve()))}?mode=ro"])
        counts: dict[str, int] = {}
        for table, where in TABLES.items():
            conn.execute(f'CREATE TABLE "{table}" AS SELECT * FROM src."{table}" WHERE {where}')
            counts[table] = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        conn.execute("CREATE TABLE output_chunk (output_id TEXT NOT NULL, chunk INTEGER NOT NULL, ms INTEGER, "
                     "chars INTEGER, PRIMARY KEY (output_id, chunk))")
        rows = conn.execute("SELECT id, chunk_ms, chunk_chars FROM output").fetchall()
        conn.executemany("INSERT INTO output_chunk VALUES (?, ?, ?, ?)",
                         [(oid, i, ms, chars[i] if i < len(chars) else None)
                          for oid, ms_blob, chars_blob in rows
                          for ms_list, chars in [(unpack_ints(ms_blob), unpack_ints(chars_blob))]
                          for i, ms in enumerate(ms_list)])
        counts["output_chunk"] = conn.execute("SELECT count(*) FROM output_chunk").fetchone()[0]
        conn.commit()
        conn.execute("DETACH DATABASE src")
        for name, sql in VIEWS.items():
            conn.execute(f'CREATE VIEW "{name}" AS {sql}')
        conn.commit()
        return counts
    finally:
        conn.close()


def metadata(name: str) -> dict[str, Any]:
    """Datasette metadata for the copy served as database `name`."""
    return {"title": "lineup", "description": "Read-only view of a lineup database (unrevealed blind sessions "
            "are left out)", "databases": {name: {
                "tables": {t: {"description": d} for t, d in DESCRIPTIONS.items()},
                "queries": QUERIES}}}
