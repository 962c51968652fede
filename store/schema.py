"""The database schema, as sqlite-utils `Migrations` (set "lineup").

Plain tables with obvious names so the file reads well in Datasette; JSON
columns only where the shape varies (params, mapping, images). The schema
version is the number of applied migrations; it is mirrored in
`PRAGMA user_version` so a newer file is recognised before anything is read.
Never edit a migration that has shipped: add a new one."""

from __future__ import annotations

import json

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

# "LNUP": marks the file as a lineup database (PRAGMA application_id).
APPLICATION_ID = 0x4C4E5550
MIGRATION_SET = "lineup"

migrations = Migrations(MIGRATION_SET)


@migrations(name="m001_core")
def m001_core(db: Database) -> None:
    """Sessions, contestants, turns, outputs, votes, tags, check results."""
    for sql in (
        """CREATE TABLE session (
            id TEXT PRIMARY KEY,
            created REAL NOT NULL,
            kind TEXT NOT NULL,
            title TEXT,
            system TEXT,
            params TEXT NOT NULL DEFAULT '{}',      -- JSON
            seed INTEGER,
            blind INTEGER NOT NULL DEFAULT 0,
            revealed_at REAL,
            sample_set_name TEXT,
            sample_set_hash TEXT,
            rerun_of TEXT,
            meta TEXT NOT NULL DEFAULT '{}',        -- JSON
            is_demo INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE contestant (
            session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
            alias TEXT NOT NULL,
            position INTEGER NOT NULL,
            label TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            base_url TEXT,
            params TEXT NOT NULL DEFAULT '{}',      -- JSON
            price TEXT,                             -- JSON
            is_demo INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (session_id, alias)
        )""",
        """CREATE TABLE turn (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            case_id TEXT,
            category TEXT,
            user_message TEXT NOT NULL,
            images TEXT NOT NULL DEFAULT '[]',      -- JSON [{path, sha256, mime}]
            follow_up_index INTEGER NOT NULL DEFAULT 0,
            repeat_index INTEGER NOT NULL DEFAULT 0,
            created REAL NOT NULL
        )""",
        "CREATE INDEX turn_session ON turn(session_id, position)",
        """CREATE TABLE output (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
            turn_id TEXT NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
            contestant TEXT NOT NULL,
            label TEXT NOT NULL,
            attempt INTEGER NOT NULL DEFAULT 1,
            status TEXT NOT NULL,
            text TEXT NOT NULL DEFAULT '',
            reasoning TEXT,
            error_kind TEXT,
            error_message TEXT,
            finish_reason TEXT,
            sent_at REAL,
            ttft_ms REAL,
            duration_ms REAL,
            chunk_ms BLOB NOT NULL DEFAULT X'',     -- ms since sent, per chunk (packed: rows.pack_ints)
            chunk_chars BLOB NOT NULL DEFAULT X'',  -- characters per chunk (packed)
            input_tokens INTEGER,
            output_tokens INTEGER,
            tokens_estimated INTEGER NOT NULL DEFAULT 0,
            reasoning_tokens INTEGER,
            cost REAL,
            is_demo INTEGER NOT NULL DEFAULT 0,
            created REAL NOT NULL,
            updated REAL,                           -- last checkpoint
            writer TEXT                             -- host:pid of the process streaming it
        )""",
        "CREATE INDEX output_turn ON output(turn_id)",
        "CREATE INDEX output_session ON output(session_id, id)",
        "CREATE INDEX output_status ON output(status) WHERE status = 'streaming'",
        """CREATE TABLE vote (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
            turn_id TEXT NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
            rater TEXT NOT NULL,
            choice TEXT NOT NULL,                   -- a label, or tie / both_bad / all_bad
            winner TEXT,                            -- the alias chosen, NULL for tie / bad
            ranking TEXT,                           -- JSON labels best -> worst
            mapping TEXT NOT NULL,                  -- JSON label -> alias, as shown
            positions TEXT NOT NULL,                -- JSON labels left -> right
            created REAL NOT NULL,
            revealed_at REAL,
            note TEXT,
            supersedes TEXT,                        -- the vote this one replaces
            current INTEGER NOT NULL DEFAULT 1      -- 0 once a later vote supersedes it
        ) WITHOUT ROWID""",
        "CREATE INDEX vote_session ON vote(session_id)",
        "CREATE INDEX vote_turn ON vote(turn_id)",
        "CREATE INDEX vote_supersedes ON vote(supersedes) WHERE supersedes IS NOT NULL",
        """CREATE TABLE tag (
            id TEXT PRIMARY KEY,
            output_id TEXT NOT NULL REFERENCES output(id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            rater TEXT NOT NULL,
            note TEXT,
            auto INTEGER NOT NULL DEFAULT 0,
            created REAL NOT NULL,
            removed_at REAL                         -- removal keeps the row, so merges do not revive it
        )""",
        "CREATE INDEX tag_output ON tag(output_id)",
        "CREATE INDEX tag_tag ON tag(tag)",
        """CREATE TABLE check_result (
            id TEXT PRIMARY KEY,
            output_id TEXT NOT NULL REFERENCES output(id) ON DELETE CASCADE,
            check_name TEXT NOT NULL,
            spec TEXT NOT NULL DEFAULT '{}',        -- JSON
            passed INTEGER NOT NULL,
            detail TEXT
        )""",
        "CREATE INDEX check_result_output ON check_result(output_id)",
    ):
        db.execute(sql)


@migrations(name="m002_search")
def m002_search(db: Database) -> None:
    """Full-text search over prompts and outputs (FTS5, kept up to date by triggers)."""
    db.table("turn").enable_fts(["user_message"], create_triggers=True)
    db.table("output").enable_fts(["text"], create_triggers=True)


@migrations(name="m003_vote_contestant")
def m003_vote_contestant(db: Database) -> None:
    """One row per (vote, contestant) so "votes per model" is an index scan,
    not a JSON parse of every vote. Backfilled from `vote.mapping`."""
    db.execute("""CREATE TABLE vote_contestant (
        vote_id TEXT NOT NULL REFERENCES vote(id) ON DELETE CASCADE,
        label TEXT NOT NULL,
        alias TEXT NOT NULL,
        position INTEGER,                       -- index on screen, left -> right
        outcome TEXT NOT NULL,                  -- win / loss / tie / bad
        current INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (vote_id, label)
    ) WITHOUT ROWID""")
    db.execute("CREATE INDEX vote_contestant_model ON vote_contestant(current, alias, outcome)")
    db.execute("""CREATE VIEW current_vote AS
        SELECT vote.*, turn.category, turn.case_id, turn.position AS turn_position
        FROM vote JOIN turn ON turn.id = vote.turn_id WHERE vote.current = 1""")
    rows = db.execute("SELECT id, choice, mapping, positions, current FROM vote").fetchall()
    for vote_id, choice, mapping, positions, current in rows:
        for row in vote_contestant_rows(vote_id, choice, json.loads(mapping), json.loads(positions), current):
            db.execute(f"INSERT OR IGNORE INTO vote_contestant ({', '.join(VOTE_CONTESTANT_COLS)}) "
                       "VALUES (?,?,?,?,?,?)", row)


@migrations(name="m004_vote_retraction")
def m004_vote_retraction(db: Database) -> None:
    """A vote can be withdrawn (undo in the vote queue): it stays in the
    record with `retracted_at` and stops counting (`current = 0`)."""
    db.execute("ALTER TABLE vote ADD COLUMN retracted_at REAL")


@migrations(name="m005_runner_claims")
def m005_runner_claims(db: Database) -> None:
    """Which process runs which unit of a `lineup run` (one contestant through
    one case and repeat), so that two processes on the same database and set
    share the work instead of doing it twice. `owner` is host:pid:start of the
    process holding it (NULL once released); `done` once its answers and
    checks are all saved."""
    db.execute("""CREATE TABLE run_claim (
        session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
        unit TEXT NOT NULL,
        owner TEXT,
        claimed REAL,
        done INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (session_id, unit)
    ) WITHOUT ROWID""")


@migrations(name="m006_reveal")
def m006_reveal(db: Database) -> None:
    """A judged unit (a case, a chat turn) revealed by the rater without a
    vote: one row per turn whose models were shown, by whom and when. A
    unit is revealed once a vote on it was revealed or it has such a row
    (`core.votes.reveal_state`)."""
    db.execute("""CREATE TABLE reveal (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
        turn_id TEXT NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
        rater TEXT NOT NULL,
        created REAL NOT NULL
    ) WITHOUT ROWID""")
    db.execute("CREATE INDEX reveal_session ON reveal(session_id)")


@migrations(name="m007_output_trace")
def m007_output_trace(db: Database) -> None:
    """How an answer of several requests came about (a tool loop: each step's
    text, its calls with their arguments and the scripted results fed back,
    why it stopped) and how structured output was asked for: JSON
    (`store.records.AnswerTrace`), NULL for a plain answer."""
    db.execute("ALTER TABLE output ADD COLUMN trace TEXT")


@migrations(name="m008_public_scores")
def m008_public_scores(db: Database) -> None:
    """Scores from outside lineup, shown beside its own ratings
    (`core.public_scores`): public leaderboard scores (`lineup import
    --leaderboard`) and online canary metrics (`lineup import --online`).
    Importing the same (model, source, date) or (model, metric, period)
    again replaces the row."""
    db.execute("""CREATE TABLE leaderboard_score (
        model TEXT NOT NULL, score REAL NOT NULL, ci_low REAL, ci_high REAL,
        source TEXT NOT NULL DEFAULT '', date TEXT NOT NULL DEFAULT '',
        file TEXT, line INTEGER, imported REAL NOT NULL,
        PRIMARY KEY (model, source, date))""")
    db.execute("""CREATE TABLE online_metric (
        model TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, n INTEGER NOT NULL,
        period TEXT NOT NULL DEFAULT '', higher_is_better INTEGER NOT NULL DEFAULT 1,
        file TEXT, line INTEGER, imported REAL NOT NULL,
        PRIMARY KEY (model, metric, period))""")


def outcome_for(label: str, choice: str) -> str:
    if choice == "tie":
        return "tie"
    if choice in ("both_bad", "all_bad"):
        return "bad"
    return "win" if label == choice else "loss"


VOTE_CONTESTANT_COLS = ("vote_id", "label", "alias", "position", "outcome", "current")


def vote_contestant_rows(vote_id: str, choice: str, mapping: dict, positions: list | tuple,
                         current: int) -> list[tuple]:
    return [
        (vote_id, label, alias,
         positions.index(label) if label in positions else None,
         outcome_for(label, choice), int(current))
        for label, alias in mapping.items()
    ]


MIGRATION_NAMES: tuple[str, ...] = tuple(m.name for m in migrations._migrations)
SCHEMA_VERSION = len(MIGRATION_NAMES)
