"""The database schema, as sqlite-utils `Migrations` (set "lineup").

Plain tables with obvious names so the file reads well in Datasette; JSON
columns only where the shape varies (params, mapping, images). The schema
version is the number of applied migrations; it is mirrored in
`PRAGMA user_version` so a newer file is recognised before anything is read.
Never edit a migration that has shipped: add a new one."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

# "LNUP": marks the file as a lineup database (PRAGMA application_id).
APPLICATION_ID = 0x4C4E5550
MIGRATION_SET = "lineup"

# The migrations in order, registered by `_migration`. Kept as plain functions
# so that importing the store does not import sqlite-utils (and numpy, which
# sqlite-utils imports whenever it is installed): only a database that needs
# migrating loads it, through `build_migrations`.
_STEPS: list[tuple[str, Callable[[Database], None]]] = []


def _migration(*, name: str) -> Callable[[Callable[[Database], None]], Callable[[Database], None]]:
    def register(fn: Callable[[Database], None]) -> Callable[[Database], None]:
        if any(n == name for n, _ in _STEPS):
            raise ValueError(f"migration {name!r} is registered twice")
        _STEPS.append((name, fn))
        return fn
    return register


@functools.cache
def build_migrations() -> Migrations:
    """The sqlite-utils `Migrations` of set "lineup", in order."""
    from sqlite_utils.migrations import Migrations

    migrations = Migrations(MIGRATION_SET)
    for name, fn in _STEPS:
        migrations(name=name)(fn)
    return migrations


@_migration(name="m001_core")
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


@_migration(name="m002_search")
def m002_search(db: Database) -> None:
    """Full-text search over prompts and outputs (FTS5, kept up to date by triggers)."""
    db.table("turn").enable_fts(["user_message"], create_triggers=True)
    db.table("output").enable_fts(["text"], create_triggers=True)


@_migration(name="m003_vote_contestant")
def m003_vote_contestant(db: Database) -> None:
    """One row per (vote, contestant) so "votes per model" is an index scan,
    not a JSON parse of every vote. Backfilled from `vote.mapping` with the
    rows `Store.add_vote` writes (`rows.vote_contestant_rows`, whose outcome is
    the record's own rule, `records.outcome_of`): not a frozen copy, so a
    change to that rule that could change a stored row needs a migration that
    recomputes the table. (Matching the choice to its label ignoring case,
    as every view reads a vote, can only change a row written by hand:
    lineup writes a choice exactly as one of the vote's labels, and the store
    refuses any other, `records.vote_problem`.)"""
    from store.rows import VOTE_CONTESTANT_COLS, vote_contestant_rows

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


@_migration(name="m004_vote_retraction")
def m004_vote_retraction(db: Database) -> None:
    """A vote can be withdrawn (undo in the vote queue): it stays in the
    record with `retracted_at` and stops counting (`current = 0`)."""
    db.execute("ALTER TABLE vote ADD COLUMN retracted_at REAL")


@_migration(name="m005_runner_claims")
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


@_migration(name="m006_reveal")
def m006_reveal(db: Database) -> None:
    """A judged unit (a case, a chat turn) revealed by the rater without a
    vote: one row per turn whose models were shown, by whom and when. A
    unit is revealed once a vote on it was revealed or it has such a row
    (`core.stats.votes.reveal_state`)."""
    db.execute("""CREATE TABLE reveal (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
        turn_id TEXT NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
        rater TEXT NOT NULL,
        created REAL NOT NULL
    ) WITHOUT ROWID""")
    db.execute("CREATE INDEX reveal_session ON reveal(session_id)")


@_migration(name="m007_output_trace")
def m007_output_trace(db: Database) -> None:
    """How an answer of several requests came about (a tool loop: each step's
    text, its calls with their arguments and the scripted results fed back,
    why it stopped) and how structured output was asked for: JSON
    (`store.records.AnswerTrace`), NULL for a plain answer."""
    db.execute("ALTER TABLE output ADD COLUMN trace TEXT")


@_migration(name="m008_output_streamed")
def m008_output_streamed(db: Database) -> None:
    """Whether an answer came as a stream (1, every answer before this) or as
    one whole response body to a stream request (0: a gateway that does not
    stream; such an answer has a duration but no time to first token)."""
    db.execute("ALTER TABLE output ADD COLUMN streamed INTEGER NOT NULL DEFAULT 1")


@_migration(name="m009_served_cache_batch")
def m009_served_cache_batch(db: Database) -> None:
    """What the provider said served each answer, how each answer came, and
    the provider batches of `lineup run --batch`.

    On `output`: `served_model` and `system_fingerprint` as the stream
    reported them (`providers.events.ServedBy`; NULL before this, or where a
    protocol has none); `origin`: "stream" (every answer before this),
    "cache" (reused from the identical request's earlier answer, `cached_from`,
    by `lineup run --cache`: no request made, so no timings and no cost) or
    "batch" (through a provider's batch API: no time to first token);
    `request_key`: the hash of everything that determines the answer
    (`core.answering.cache.request_key`), what the cache looks up.

    `batch_job`: one provider batch (one model, one round of a run: the
    opening turns, then each follow-up), recorded before it is submitted so a
    run killed at any point resumes it instead of submitting it again;
    `remote_id` is the provider's batch id once created. `batch_item`: the
    requests in it, by `custom_id`, each naming the turn and contestant it
    answers and, once collected, the output written."""
    for sql in (
        "ALTER TABLE output ADD COLUMN served_model TEXT",
        "ALTER TABLE output ADD COLUMN system_fingerprint TEXT",
        "ALTER TABLE output ADD COLUMN origin TEXT NOT NULL DEFAULT 'stream'",
        "ALTER TABLE output ADD COLUMN cached_from TEXT",
        "ALTER TABLE output ADD COLUMN request_key TEXT",
        "CREATE INDEX output_request_key ON output(request_key) WHERE request_key IS NOT NULL",
        """CREATE TABLE batch_job (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
            contestant TEXT NOT NULL,
            provider TEXT NOT NULL,                 -- openai | anthropic
            base_url TEXT NOT NULL,
            round INTEGER NOT NULL,                 -- the follow-up index its requests answer
            state TEXT NOT NULL,                    -- prepared | submitted | ended | collected | failed
            remote_id TEXT,                         -- the provider's batch id, once created
            input_file_id TEXT,                     -- OpenAI: the uploaded JSONL
            remote_status TEXT,                     -- as the provider last said it
            counts TEXT,                            -- JSON, the provider's request counts at the last poll
            error TEXT,
            created REAL NOT NULL,
            submitted REAL,
            ended REAL
        )""",
        "CREATE INDEX batch_job_session ON batch_job(session_id, state)",
        """CREATE TABLE batch_item (
            batch_id TEXT NOT NULL REFERENCES batch_job(id) ON DELETE CASCADE,
            custom_id TEXT NOT NULL,
            turn_id TEXT NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
            contestant TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            request_key TEXT,
            output_id TEXT,                         -- the answer written from its result, once collected
            PRIMARY KEY (batch_id, custom_id)
        ) WITHOUT ROWID""",
    ):
        db.execute(sql)


@_migration(name="m010_chat_workbench")
def m010_chat_workbench(db: Database) -> None:
    """What the chat workbench keeps:

    - `deleted_session`: a tombstone per deleted session (its rows are gone),
      so that a merge or an import never brings it back;
    - `image`: the bytes of each image attached to a chat prompt, once per
      content hash (`turn.images` names them by `sha256`), so that a resumed
      session or a re-sent turn sends the same image even if its file moved;
    - `output.prompt`: the user message an attempt answered when the prompt
      was edited and re-sent (NULL: the turn's `user_message`)."""
    db.execute("""CREATE TABLE deleted_session (
        id TEXT PRIMARY KEY,
        deleted_at REAL NOT NULL
    ) WITHOUT ROWID""")
    db.execute("""CREATE TABLE image (
        sha256 TEXT PRIMARY KEY,
        mime TEXT NOT NULL,
        size INTEGER NOT NULL,
        data BLOB NOT NULL
    )""")
    db.execute("ALTER TABLE output ADD COLUMN prompt TEXT")


@_migration(name="m011_judge")
def m011_judge(db: Database) -> None:
    """Who cast a vote: a person (`rater_kind` 'human', every vote before this)
    or an LLM judge ('judge': `lineup judge`), with what the judge was asked
    (its alias, the hash of its instructions and template, the rubric that
    replaced the default instructions), its reply (the reason and verdict as
    it came, keys scrubbed) and what the request cost. Judge votes never count
    in a human figure unless asked (`core.stats.votes.HUMAN`)."""
    for sql in (
        "ALTER TABLE vote ADD COLUMN rater_kind TEXT NOT NULL DEFAULT 'human'",
        "ALTER TABLE vote ADD COLUMN judge TEXT",
        "ALTER TABLE vote ADD COLUMN judge_prompt_hash TEXT",
        "ALTER TABLE vote ADD COLUMN judge_rubric TEXT",
        "ALTER TABLE vote ADD COLUMN judge_reason TEXT",
        "ALTER TABLE vote ADD COLUMN judge_cost REAL",
        "ALTER TABLE vote ADD COLUMN judge_input_tokens INTEGER",
        "ALTER TABLE vote ADD COLUMN judge_output_tokens INTEGER",
        "CREATE INDEX vote_judge ON vote(judge, turn_id) WHERE judge IS NOT NULL",
    ):
        db.execute(sql)


@_migration(name="m012_adaptive_queue")
def m012_adaptive_queue(db: Database) -> None:
    """Why the vote queue served the item a vote is on (`lineup vote
    --adaptive`: the pair it chose and why, as JSON; NULL for the plain
    queue), so an analysis can account for how items were chosen."""
    db.execute("ALTER TABLE vote ADD COLUMN choice_reason TEXT")


@_migration(name="m013_rater_quality")
def m013_rater_quality(db: Database) -> None:
    """Rater quality. `gold_check`: a pair with a known better answer (the
    sample set's `gold` answers, or a real answer against a degraded copy of
    it) judged in the vote queue: what the rater chose and whether it was the
    better one; never a vote, never in a rating. `blind_guess`: after a vote,
    the rater's guess of which model wrote an answer (the blinding audit)."""
    db.execute("""CREATE TABLE gold_check (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
        turn_id TEXT NOT NULL REFERENCES turn(id) ON DELETE CASCADE,
        rater TEXT NOT NULL,
        source TEXT NOT NULL,                   -- case (the set's gold answers) / degraded (a planted copy)
        model TEXT,                             -- degraded: the model whose answer was copied
        degradation TEXT,                       -- degraded: how the copy was spoiled
        better TEXT NOT NULL,                   -- the label of the better answer
        choice TEXT NOT NULL,                   -- what the rater chose: a label, tie, both_bad
        positions TEXT NOT NULL,                -- JSON labels left -> right
        correct INTEGER NOT NULL,
        created REAL NOT NULL,
        retracted_at REAL
    ) WITHOUT ROWID""")
    db.execute("CREATE INDEX gold_check_rater ON gold_check(rater)")
    db.execute("""CREATE TABLE blind_guess (
        id TEXT PRIMARY KEY,
        vote_id TEXT NOT NULL REFERENCES vote(id) ON DELETE CASCADE,
        session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
        rater TEXT NOT NULL,
        label TEXT NOT NULL,                    -- the answer asked about
        actual TEXT NOT NULL,                   -- the model that wrote it
        guess TEXT,                             -- the model guessed; NULL: "no idea"
        options TEXT NOT NULL,                  -- JSON: the models offered
        created REAL NOT NULL
    ) WITHOUT ROWID""")
    db.execute("CREATE INDEX blind_guess_vote ON blind_guess(vote_id)")


@_migration(name="m014_share")
def m014_share(db: Database) -> None:
    """Blind vote packages (`lineup share`, `core.exchange.share`). In the owner's
    database: each package shared (`share_package`) and, per package, which
    opaque id stands for which session, turn, answer and contestant, with the
    content hash of each turn and answer as shared (`share_map`: the blind
    mapping; never published, `core.publish`). In a package file: the one
    row saying what it is (`package_info`); its other tables hold only the
    opaque records."""
    db.execute("""CREATE TABLE share_package (
        id TEXT PRIMARY KEY,
        created REAL NOT NULL,
        origin TEXT NOT NULL,                   -- this database's share identity
        sessions TEXT NOT NULL,                 -- JSON: the owner's session ids
        file_name TEXT,                         -- where it was written (for the owner's own reference)
        options TEXT NOT NULL DEFAULT '{}'      -- JSON: what went in (reasoning or not)
    ) WITHOUT ROWID""")
    db.execute("""CREATE TABLE share_map (
        package_id TEXT NOT NULL REFERENCES share_package(id) ON DELETE CASCADE,
        kind TEXT NOT NULL,                     -- session / turn / output / contestant
        shared_id TEXT NOT NULL,                -- the id in the package
        owner_id TEXT NOT NULL,                 -- the id here (a contestant: its alias)
        session_id TEXT NOT NULL,               -- the owner's session it belongs to
        digest TEXT,                            -- sha256 of a turn's or an answer's content as shared
        PRIMARY KEY (package_id, kind, shared_id)
    ) WITHOUT ROWID""")
    db.execute("""CREATE TABLE package_info (
        id TEXT PRIMARY KEY,                    -- the package id (share_package.id in the owner's database)
        origin TEXT NOT NULL,                   -- the owner's database share identity
        created REAL NOT NULL,
        format INTEGER NOT NULL,                -- core.exchange.share.PACKAGE_FORMAT
        seed TEXT NOT NULL,                     -- the per-case shuffle seed of the vote queue
        tags TEXT NOT NULL DEFAULT '[]'         -- JSON: the failure-mode tags offered
    ) WITHOUT ROWID""")


@_migration(name="m015_public_scores")
def m015_public_scores(db: Database) -> None:
    """Scores from outside lineup, shown beside its own ratings
    (`core.stats.public_scores`): public leaderboard scores (`lineup import
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


@_migration(name="m016_rater_links")
def m016_rater_links(db: Database) -> None:
    """Team raters in a browser (`lineup rate`, `core.answering.raters`): a team is a
    set of sessions served to named raters with an overlap; each rater's (and
    the owner's) link is kept only as the SHA-256 of its token; each unit
    (a case of a session) goes to `overlap` raters (`rater_assignment`).
    Never published (`store.publish` copies an allow-list)."""
    db.execute("""CREATE TABLE rater_team (
        id TEXT PRIMARY KEY,
        created REAL NOT NULL,
        sessions TEXT NOT NULL,                 -- JSON: session ids, sorted
        overlap INTEGER NOT NULL                -- raters per unit
    ) WITHOUT ROWID""")
    db.execute("""CREATE TABLE rater_link (
        token_hash TEXT PRIMARY KEY,            -- sha256 hex of the token in the link
        team_id TEXT NOT NULL REFERENCES rater_team(id) ON DELETE CASCADE,
        rater TEXT NOT NULL,                    -- the rater's name ('' for the owner's link)
        role TEXT NOT NULL,                     -- 'rater' or 'owner'
        created REAL NOT NULL
    ) WITHOUT ROWID""")
    db.execute("CREATE UNIQUE INDEX rater_link_one ON rater_link(team_id, role, rater)")
    db.execute("""CREATE TABLE rater_assignment (
        team_id TEXT NOT NULL REFERENCES rater_team(id) ON DELETE CASCADE,
        unit TEXT NOT NULL,                     -- core.answering.vote_queue.QueueItem.key
        rater TEXT NOT NULL,
        created REAL NOT NULL,
        PRIMARY KEY (team_id, unit, rater)
    ) WITHOUT ROWID""")


@_migration(name="m017_contestant_variant")
def m017_contestant_variant(db: Database) -> None:
    """A contestant that is a variant (`[variants.NAME]` in the config): the
    model alias it is a variant of, its own system prompt and its prompt
    template, so that a variant is a contestant of its own in every view and
    a change to its prompt is never resumed as the same contestant."""
    for column in ("variant_of", "system", "template"):
        db.execute(f"ALTER TABLE contestant ADD COLUMN {column} TEXT")


@_migration(name="m018_contestant_variant_tools")
def m018_contestant_variant_tools(db: Database) -> None:
    """A variant's tools (`tools = FILE` in `[variants.NAME]`), as the JSON of
    its tools file: tools change what a contestant answers as much as its
    prompt does, so they are part of the contestant (NULL: none)."""
    db.execute("ALTER TABLE contestant ADD COLUMN tools TEXT")


@_migration(name="m019_score")
def m019_score(db: Database) -> None:
    """Scores of answers on a set's declared dimensions, 1-5, by people and
    grading models (`store.records.ScoreRecord`). Rows are never changed: a
    rater's latest score of an answer on a dimension is the one that counts."""
    db.execute("""CREATE TABLE score (
        id TEXT PRIMARY KEY,
        output_id TEXT NOT NULL REFERENCES output(id) ON DELETE CASCADE,
        dimension TEXT NOT NULL,
        value INTEGER NOT NULL,                 -- 1-5
        rater TEXT NOT NULL,
        rater_kind TEXT NOT NULL,               -- 'human' or 'judge'
        created REAL NOT NULL
    )""")
    db.execute("CREATE INDEX score_output ON score(output_id, dimension, rater)")


@_migration(name="m020_output_connect")
def m020_output_connect(db: Database) -> None:
    """The time an answer's request spent opening its connection (DNS, TCP,
    TLS; 0 on a kept-alive one), kept apart so `ttft_ms` runs from a ready
    connection as a production client's does (NULL: not measured)."""
    db.execute("ALTER TABLE output ADD COLUMN connect_ms REAL")



@_migration(name="m021_turn_case")
def m021_turn_case(db: Database) -> None:
    """The turns of a case and repeat in a session by index: saving a vote
    looks up its unit's earlier votes, which scanned the session's votes."""
    db.execute("CREATE INDEX turn_case ON turn(session_id, case_id, repeat_index)")


@_migration(name="m022_report_digest")
def m022_report_digest(db: Database) -> None:
    """Digests of what the report reads (`store.digests`): one per session,
    one per group of sessions; and the triggers that delete a session's
    digest and its group's in the same transaction as any change to what
    they were made from: the session's answers, votes, turns, contestants,
    a vote another session's vote supersedes, a turn another session's
    answers or votes are on. What is missing is rebuilt from the rows."""
    db.execute("""CREATE TABLE report_digest (
        session_id TEXT PRIMARY KEY,
        data BLOB NOT NULL,
        turns TEXT NOT NULL
    )""")
    db.execute("""CREATE TABLE report_group (
        grp INTEGER PRIMARY KEY,
        data BLOB NOT NULL,
        turns TEXT NOT NULL
    )""")
    db.execute("""CREATE TABLE report_group_member (
        session_id TEXT PRIMARY KEY,
        grp INTEGER NOT NULL
    )""")
    drop = ("DELETE FROM report_group WHERE grp IN (SELECT grp FROM report_group_member WHERE session_id IN ({0})); "
            "DELETE FROM report_digest WHERE session_id IN ({0})")
    rows = {"output": "SELECT {r}.session_id", "contestant": "SELECT {r}.session_id", "session": "SELECT {r}.id",
            "vote": "SELECT {r}.session_id UNION ALL SELECT session_id FROM vote WHERE id = {r}.supersedes",
            "turn": ("SELECT {r}.session_id UNION ALL SELECT session_id FROM vote WHERE turn_id = {r}.id "
                     "UNION ALL SELECT session_id FROM output WHERE turn_id = {r}.id")}
    for table, which in rows.items():
        for event, refs in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",))):
            body = "; ".join(drop.format(which.format(r=r)) for r in refs)
            db.execute(f"CREATE TRIGGER report_digest_{table}_{event.lower()} AFTER {event} ON {table} "
                       f"BEGIN {body}; END")


MIGRATION_NAMES: tuple[str, ...] = tuple(name for name, _ in _STEPS)
SCHEMA_VERSION = len(MIGRATION_NAMES)
