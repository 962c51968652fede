"""The read-only copy of a database that `lineup serve` publishes with
Datasette, and the metadata lineup ships for it.

Why a module of its own: Datasette serves every table of the file it is
given, and any SQL against it, so hiding tables or adding views over the
owner's database would not keep a blind mapping out of sight. What is served
is therefore a derived copy, made fresh at each start, holding only an
allow-list of tables and, of those, only what the owner has seen named:
sessions that are not blind or were revealed, and of a blind session revealed
judged unit by judged unit (a run's case in the vote queue, a chat's turn)
the units revealed so far, with its models. A blind session with nothing
revealed (its contestants, answers' labels, votes' mappings) is not in the
file at all, nor is any unit still hidden (its prompt, answers and votes), nor
are the package mappings (`share_map`, `share_package`), run claims or the
full-text indexes. The copy is opened immutable and read-only.

The unit rule is `core.stats.votes.reveal_state`'s (a unit is revealed once a vote
on it was revealed or the rater revealed it without voting), written here in
SQL over `records.UNIT_KEY_SQL`, since the store cannot import the core.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from store.records import UNIT_KEY_SQL
from store.rows import unpack_ints

#: Sessions published whole: not blind, or blind and revealed as a whole.
WHOLE = "(SELECT id FROM src.session WHERE blind = 0 OR revealed_at IS NOT NULL)"

#: (session, judged unit) revealed one by one: by a revealed vote on it, or by the rater without a vote
REVEALED_UNITS = (f"SELECT v.session_id, {UNIT_KEY_SQL} FROM src.vote v JOIN src.turn t ON t.id = v.turn_id "
                  "WHERE v.revealed_at IS NOT NULL "
                  f"UNION SELECT r.session_id, {UNIT_KEY_SQL} FROM src.reveal r JOIN src.turn t ON t.id = r.turn_id")

#: The turns published (made first, as temp.shown_turn): all of a whole session, the revealed units of another.
SHOWN_TURNS = (f"SELECT t.id, t.session_id, {UNIT_KEY_SQL} AS unit, t.session_id IN {WHOLE} AS whole "
               f"FROM src.turn t WHERE t.session_id IN {WHOLE} OR (t.session_id, {UNIT_KEY_SQL}) IN ({REVEALED_UNITS})")

SHOWN = "(SELECT id FROM temp.shown_turn)"
SHOWN_SESSIONS = f"(SELECT id FROM src.session WHERE id IN {WHOLE} OR id IN (SELECT session_id FROM temp.shown_turn))"
SHOWN_OUTPUTS = f"(SELECT id FROM src.output WHERE turn_id IN {SHOWN})"

#: table -> the rows of it that are published
TABLES: dict[str, str] = {
    "session": f"id IN {SHOWN_SESSIONS}",
    "contestant": f"session_id IN {SHOWN_SESSIONS}",
    "turn": f"id IN {SHOWN}",
    "output": f"turn_id IN {SHOWN}",
    "vote": f"turn_id IN {SHOWN}",
    "vote_contestant": f"vote_id IN (SELECT id FROM src.vote WHERE turn_id IN {SHOWN})",
    "tag": f"output_id IN {SHOWN_OUTPUTS}",
    "check_result": f"output_id IN {SHOWN_OUTPUTS}",
    "score": f"output_id IN {SHOWN_OUTPUTS}",
}


@dataclass(frozen=True)
class Published:
    """What a published copy holds and what it left out, and why. A unit is
    a run's case (all its follow-ups and repeats judged together) or a chat's turn."""

    rows: dict[str, int]                            # table -> rows published
    partial_sessions: int = 0                       # blind sessions published in part: their revealed units
    shown_units: tuple[int, int] = (0, 0)           # ... their (cases, turns) published
    hidden_units: tuple[int, int] = (0, 0)          # ... and those left out, still hidden
    hidden_sessions: int = 0                        # blind sessions with nothing revealed: left out whole

    def shown(self) -> str:
        """How many sessions are published, and which in part."""
        line = _count(self.rows["session"], "session")
        if self.partial_sessions:
            line += (f" ({self.partial_sessions} of them blind, in part: the {_units(self.shown_units)} "
                     "revealed so far)")
        return line

    def left_out(self) -> str:
        """What is left out until it is revealed ("" when nothing is)."""
        left = []
        if self.hidden_sessions:
            left.append(f"{_count(self.hidden_sessions, 'blind session')} with nothing revealed")
        if any(self.hidden_units):
            left.append(f"{_units(self.hidden_units)} of {_count(self.partial_sessions, 'blind session')} "
                        "not revealed yet")
        return ", ".join(left)

    def summary(self) -> str:
        left = self.left_out()
        return self.shown() + (f"; left out until revealed: {left}" if left else "")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _units(units: tuple[int, int]) -> str:
    cases, turns = units
    return " and ".join(_count(n, noun) for n, noun in ((cases, "case"), (turns, "turn")) if n) or "0 cases"


VIEWS: dict[str, str] = {
    "answers": """SELECT o.id, o.session_id, t.case_id, t.category, o.contestant AS model, o.status,
        datetime(o.created, 'unixepoch') AS created_utc, o.ttft_ms, o.duration_ms, o.connect_ms,
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
    "session": "A chat or a run: a blind one appears here once revealed, in part (the cases or turns revealed "
               "so far) or whole",
    "contestant": "The models of a session (alias, provider, model, label shown)",
    "turn": "A prompt of a session (case id, category, text)",
    "output": "One answer of one model to one turn (times in ms, epoch seconds)",
    "vote": "A judgement: choice by label, winner by alias, the label->alias mapping",
    "vote_contestant": "Each vote's outcome per model",
    "tag": "Failure-mode tags set on answers",
    "check_result": "Automated checks of answers",
    "score": "Scores of answers on a set's dimensions, 1-5, by people (human) and grading models (judge); "
             "a rater's latest on an answer and dimension counts",
    "output_chunk": "Per-chunk timings of each answer, decoded from output.chunk_ms / chunk_chars "
                    "(ms since the request was sent, characters in the chunk)",
}


def write_published_copy(db: str | Path, out: str | Path) -> Published:
    """Write the publishable copy of `db` to `out` (a new file)."""
    out = Path(out)
    conn = sqlite3.connect(f"file:{quote(str(out.resolve()))}", uri=True)
    try:
        conn.execute("ATTACH DATABASE ? AS src", [f"file:{quote(str(Path(db).resolve()))}?mode=ro"])
        conn.execute(f"CREATE TEMP TABLE shown_turn AS {SHOWN_TURNS}")
        counts: dict[str, int] = {}
        present = {r[0] for r in conn.execute("SELECT name FROM src.sqlite_master WHERE type = 'table'")}
        for table, where in TABLES.items():
            if table not in present:    # a file read as it is, from before the table (`score`)
                continue
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
        published = _left_out(conn, counts)
        conn.execute("DROP TABLE temp.shown_turn")
        conn.execute("DETACH DATABASE src")
        for name, sql in VIEWS.items():
            conn.execute(f'CREATE VIEW "{name}" AS {sql}')
        conn.commit()
        return published
    finally:
        conn.close()


def _left_out(conn: sqlite3.Connection, rows: dict[str, int]) -> Published:
    """Count the blind sessions published in part (some unit still hidden: one
    with every unit revealed is published whole), their units shown and hidden,
    and the blind sessions left out whole."""
    partial = (f"(SELECT session_id FROM temp.shown_turn WHERE NOT whole INTERSECT "
               f"SELECT session_id FROM src.turn WHERE id NOT IN {SHOWN})")

    def units(where: str) -> tuple[int, int]:
        cases, turns = conn.execute(
            f"SELECT count(*) FILTER (WHERE unit LIKE 'case%'), count(*) FILTER (WHERE unit NOT LIKE 'case%') "
            f"FROM (SELECT DISTINCT t.session_id, {UNIT_KEY_SQL} AS unit FROM src.turn t "
            f"WHERE t.session_id IN {partial} AND {where})").fetchone()
        return cases, turns

    hidden = conn.execute("SELECT count(*) FROM src.session").fetchone()[0] - rows["session"]
    return Published(rows=rows, partial_sessions=conn.execute(f"SELECT count(*) FROM {partial}").fetchone()[0],
                     shown_units=units(f"t.id IN {SHOWN}"), hidden_units=units(f"t.id NOT IN {SHOWN}"),
                     hidden_sessions=hidden)


def metadata(name: str) -> dict[str, Any]:
    """Datasette metadata for the copy served as database `name`."""
    return {"title": "lineup", "description": "Read-only view of a lineup database (blind sessions "
            "show only what was revealed: their cases or turns revealed so far)", "databases": {name: {
                "tables": {t: {"description": d} for t, d in DESCRIPTIONS.items()},
                "queries": QUERIES}}}
