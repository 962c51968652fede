"""The SQLite store: round trips, migrations, checkpoints, vote history,
the async writer, and `lineup sessions`."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading

import anyio
import pytest
from sqlite_utils import Database

from tests.synthetic import synthetic_session, write_synthetic
from lineup.cli import main
from store import (
    SCHEMA_VERSION,
    AsyncStore,
    CheckResultRecord,
    ContestantRecord,
    OutputRecord,
    SessionRecord,
    Store,
    StoreError,
    TagRecord,
    TurnRecord,
    VoteRecord,
    default_db_path,
)
from store.schema import APPLICATION_ID, MIGRATION_NAMES, build_migrations


@pytest.fixture
def db(tmp_path):
    return tmp_path / "lineup.db"


def full_session() -> SessionRecord:
    return SessionRecord(
        kind="run", title="everything", system="You are terse.", params={"temperature": 0.3, "stop": ["\n\n"]},
        seed=42, blind=True, sample_set_name="fmt", sample_set_hash="sha256:abc", rerun_of=None,
        meta={"note": "ünïcode ✓", "nested": {"x": [1, 2]}},
        contestants=[
            ContestantRecord(alias="gpt", provider="openai", model="gpt-4o", base_url="http://127.0.0.1:1/v1",
                             params={"temperature": 0.2}, price={"input_per_mtok": 2.5, "output_per_mtok": 10.0},
                             label="A", position=0),
            ContestantRecord(alias="demo-fast", provider="demo", model="fast", label="B", position=1, is_demo=True),
        ])


def test_round_trip_of_every_record_type(db):
    s = full_session()
    turn = TurnRecord(session_id=s.id, position=0, case_id="c1", category="code", user_message="Write *bold*",
                      images=[{"path": "img/a.png", "sha256": "ff00", "mime": "image/png"}], follow_up_index=1,
                      repeat_index=2)
    out = OutputRecord(session_id=s.id, turn_id=turn.id, contestant="gpt", label="A", attempt=2)
    final = out.model_copy(update=dict(
        status="complete", text="**hi** \x1b[31m", reasoning="thought", finish_reason="stop", sent_at=1.5e9,
        ttft_ms=123.5, duration_ms=900.25, chunk_ms=[120, 130, 130, 400], chunk_chars=[3, 1, 0, 7],
        input_tokens=12, output_tokens=4, tokens_estimated=True, reasoning_tokens=2, cost=0.0012, is_demo=False))
    err = OutputRecord(session_id=s.id, turn_id=turn.id, contestant="demo-fast", label="B", status="error",
                       error_kind="rate_limited", error_message="429 slow down", is_demo=True)
    vote = VoteRecord(session_id=s.id, turn_id=turn.id, rater="ana", choice="A", ranking=["A", "B"],
                      mapping={"A": "gpt", "B": "demo-fast"}, positions=["B", "A"], note="clearer")
    tag = TagRecord(output_id=out.id, tag="too_verbose", rater="ana", note="rambles", auto=True)
    check = CheckResultRecord(output_id=out.id, check="regex", spec={"pattern": "^h"}, passed=False, detail="no match")

    with Store.open(db) as store:
        store.create_session(s)
        store.add_turn(turn)
        store.start_output(out)
        store.finish_output(final)
        store.finish_output(err)  # never started: inserted
        store.add_vote(vote)
        store.add_tag(tag)
        store.add_check_result(check)
    with Store.open(db) as store:
        loaded = store.load_session(s.id)
    assert loaded.session == s
    assert loaded.turns == [turn]
    assert {o.id: o for o in loaded.outputs} == {final.id: final, err.id: err}
    assert loaded.votes == [vote] and loaded.current_votes() == [vote]
    assert loaded.tags == [tag]
    assert loaded.checks == [check]
    assert [o.label for o in loaded.outputs_for(turn.id)] == ["A", "B"]


def test_ids_made_in_one_millisecond_sort_in_the_order_they_were_made(db):
    # ids are ULIDs ordered by time; rows read back ORDER BY id (a case's checks, a rerun's
    # rebuilt check order) were shuffled when several were made in the same millisecond
    from store.ids import new_ulid

    ids = [new_ulid() for _ in range(20_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    s = full_session()
    turn = TurnRecord(session_id=s.id, position=0, user_message="x")
    out = OutputRecord(session_id=s.id, turn_id=turn.id, contestant="gpt", label="A")
    checks = [CheckResultRecord(output_id=out.id, check=f"c{i}", spec={}, passed=True) for i in range(50)]
    with Store.open(db) as store:
        store.create_session(s)
        store.add_turn(turn)
        store.start_output(out)
        for check in checks:
            store.add_check_result(check)
        assert [c.check for c in store.load_session(s.id).checks] == [f"c{i}" for i in range(50)]


def test_update_and_reveal_session(db):
    s, turns, outs, votes = synthetic_session(turns=2, blind=True)
    with Store.open(db) as store:
        write_synthetic(store, s, turns, outs, votes)
        assert store.list_sessions()[0].contestants is None  # blind, unrevealed
        new = store.update_session(s.id[:10], title="renamed", params={"temperature": 1.0})
        assert new.title == "renamed" and new.contestants == s.contestants
        store.update_session(s.id, contestants=[c.model_copy(update={"base_url": None}) for c in s.contestants])
        store.reveal_session(s.id, at=123.0)
        loaded = store.load_session(s.id)
        summary = store.list_sessions()[0]
    assert loaded.session.title == "renamed" and loaded.session.params == {"temperature": 1.0}
    assert all(c.base_url is None for c in loaded.session.contestants)
    assert loaded.session.revealed_at == 123.0
    assert all(v.revealed_at == 123.0 for v in loaded.votes)
    assert summary.contestants == ["model-0", "model-1"]


def test_migrations_from_an_empty_file(db):
    db.write_bytes(b"")
    with Store.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION == len(MIGRATION_NAMES)
        conn = store.conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        applied = [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations WHERE migration_set='lineup'")]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert applied == list(MIGRATION_NAMES)
    assert {"session", "contestant", "turn", "output", "vote", "vote_contestant", "tag", "check_result",
            "turn_fts", "output_fts"} <= tables
    with Store.open(db) as store:  # reopening applies nothing twice
        assert store.schema_version == SCHEMA_VERSION


def test_migrations_from_the_first_schema_version(db):
    """Data written with schema version 1 is readable, searchable and counted after the upgrade."""
    raw = Database(str(db))
    build_migrations().apply(raw, stop_before=MIGRATION_NAMES[1])
    raw.execute("PRAGMA user_version = 1")
    c = raw.conn
    c.execute("INSERT INTO session (id, created, kind, params, meta) VALUES ('S1', 1.0, 'chat', '{}', '{}')")
    c.execute("INSERT INTO contestant (session_id, alias, position, label, provider, model) "
              "VALUES ('S1', 'x', 0, 'x', 'openai', 'mx'), ('S1', 'y', 1, 'y', 'openai', 'my')")
    c.execute("INSERT INTO turn (id, session_id, position, user_message, created) "
              "VALUES ('T1', 'S1', 0, 'explain photosynthesis', 1.0)")
    c.execute("INSERT INTO output (id, session_id, turn_id, contestant, label, status, text, created) "
              "VALUES ('O1', 'S1', 'T1', 'x', 'x', 'complete', 'chlorophyll absorbs light', 1.0)")
    c.execute("INSERT INTO vote (id, session_id, turn_id, rater, choice, winner, mapping, positions, created) "
              "VALUES ('V1', 'S1', 'T1', 'me', 'x', 'x', '{\"x\":\"x\",\"y\":\"y\"}', '[\"x\",\"y\"]', 2.0)")
    c.commit()
    raw.close()
    with Store.open(db) as store:
        assert store.schema_version == SCHEMA_VERSION
        loaded = store.load_session("S1")
        assert loaded.outputs[0].text == "chlorophyll absorbs light"
        assert [h.kind for h in store.search("photosynthesis")] == ["prompt"]
        assert [h.output_id for h in store.search("chlorophyll")] == ["O1"]
        counts = {m.alias: (m.votes, m.wins, m.losses) for m in store.votes_per_model()}
    assert counts == {"x": (1, 1, 0), "y": (1, 0, 1)}


def test_checkpoint_then_interrupted_on_reopen(db):
    s, turns, _, _ = synthetic_session(turns=1)
    with Store.open(db) as store:
        store.create_session(s)
        store.add_turn(turns[0])
        out = OutputRecord(session_id=s.id, turn_id=turns[0].id, contestant="model-0", label="model-0")
        store.start_output(out)
        store.checkpoint_output(out.id, "Hello", None, [100], [5])
        store.checkpoint_output(out.id, "Hello, wor", "hmm", [100, 140], [5, 5])
        assert store.load_session(s.id).outputs[0].status == "streaming"
    # closed without finishing: it can never finish now
    with Store.open(db) as store:
        o = store.load_session(s.id).outputs[0]
    assert (o.status, o.text, o.reasoning, o.chunk_ms, o.chunk_chars) == ("interrupted", "Hello, wor", "hmm",
                                                                            [100, 140], [5, 5])


def test_streaming_output_of_a_live_process_is_left_alone(db):
    """Another process that is still streaming must not see its output marked interrupted."""
    s, turns, _, _ = synthetic_session(turns=1)
    with Store.open(db) as store:
        write_synthetic(store, s, turns, [], [])
        live = OutputRecord(session_id=s.id, turn_id=turns[0].id, contestant="model-0", label="model-0")
        dead = OutputRecord(session_id=s.id, turn_id=turns[0].id, contestant="model-1", label="model-1")
        store.start_output(live)
        store.start_output(dead)
        host = socket.gethostname()
        store.conn.execute("UPDATE output SET writer = ? WHERE id = ?", [f"{host}:{os.getppid()}", live.id])
        store.conn.execute("UPDATE output SET writer = ? WHERE id = ?", [f"{host}:999999999", dead.id])
        store._mine.clear()  # as if another process had started them
    with Store.open(db) as store:
        status = {o.id: o.status for o in store.load_session(s.id).outputs}
    assert status == {live.id: "streaming", dead.id: "interrupted"}


def test_vote_history_keeps_every_vote_and_counts_the_newest(db):
    s, turns, outs, _ = synthetic_session(turns=1, contestants=3)
    mapping = {c.label: c.alias for c in s.contestants}
    first = VoteRecord(session_id=s.id, turn_id=turns[0].id, choice="model-0", mapping=mapping,
                       positions=list(mapping), created=10.0)
    second = VoteRecord(session_id=s.id, turn_id=turns[0].id, choice="model-2", mapping=mapping,
                        positions=list(mapping), created=11.0, supersedes=first.id, note="changed my mind")
    third = VoteRecord(session_id=s.id, turn_id=turns[0].id, choice="tie", mapping=mapping,
                       positions=list(mapping), created=12.0, supersedes=second.id)
    with Store.open(db) as store:
        write_synthetic(store, s, turns, outs, [])
        for v in (first, second, third):
            store.add_vote(v)
        loaded = store.load_session(s.id)
        counts = {m.alias: (m.votes, m.wins, m.ties) for m in store.votes_per_model()}
        summary = store.list_sessions()[0]
        current = [r["id"] for r in store.query("SELECT id FROM current_vote")]
    assert [v.id for v in loaded.votes] == [first.id, second.id, third.id]
    assert loaded.current_votes() == [third]
    assert counts == {a: (1, 0, 1) for a in mapping.values()}
    assert summary.votes == 1 and current == [third.id]


def test_bad_vote_and_dangling_reference_are_refused(db):
    s, turns, outs, _ = synthetic_session(turns=1)
    with Store.open(db) as store:
        write_synthetic(store, s, turns, outs, [])
        with pytest.raises(StoreError, match="not one of the labels"):
            store.add_vote(VoteRecord(session_id=s.id, turn_id=turns[0].id, choice="Z",
                                      mapping={"A": "x", "B": "y"}, positions=["A", "B"]))
        with pytest.raises(StoreError, match="FOREIGN KEY"):
            store.add_turn(TurnRecord(session_id="NOSUCHSESSION", position=0, user_message="x"))
        with pytest.raises(StoreError, match="UNIQUE"):
            store.add_turn(turns[0])
        assert store.counts()["turn"] == 1 and store.counts()["vote"] == 0


def test_tags_can_be_removed_without_losing_others(db):
    s, turns, outs, _ = synthetic_session(turns=1)
    a = TagRecord(output_id=outs[0].id, tag="hallucination")
    b = TagRecord(output_id=outs[0].id, tag="truncated")
    with Store.open(db) as store:
        write_synthetic(store, s, turns, outs, [])
        store.add_tag(a)
        store.add_tag(b)
        assert store.remove_tag(a.id) is True
        assert store.remove_tag(a.id) is False
        assert store.load_session(s.id).tags == [b]


def test_list_sessions_filters_and_search(db):
    chat = synthetic_session(turns=1, seed=1, kind="chat", created=1.8e9)
    run = synthetic_session(turns=2, seed=2, kind="run", created=1.9e9)
    with Store.open(db) as store:
        for recs in (chat, run):
            write_synthetic(store, *recs)
        store.add_turn(TurnRecord(session_id=chat[0].id, position=1, user_message="what is a quokka"))
        assert [x.id for x in store.list_sessions()] == [run[0].id, chat[0].id]
        assert [x.id for x in store.list_sessions(kind="run")] == [run[0].id]
        assert [x.id for x in store.list_sessions(search="quokka")] == [chat[0].id]
        assert store.list_sessions(search="zzz-nothing") == []
        assert [x.id for x in store.list_sessions(limit=1)] == [run[0].id]
        hits = store.search("QUOKKA")
        assert len(hits) == 1 and "[quokka]" in hits[0].snippet
        assert store.search('"; DROP TABLE session; --') == []  # FTS syntax is never interpreted
        assert store.latest_session_id() == run[0].id


def test_load_session_by_prefix_missing_and_ambiguous(db):
    a = synthetic_session(seed=1, created=1.7e9)
    b = synthetic_session(seed=2, created=1.7e9)
    with Store.open(db) as store:
        write_synthetic(store, *a)
        write_synthetic(store, *b)
        assert store.load_session(a[0].id.lower()[:20]).session.id == a[0].id
        with pytest.raises(StoreError, match="no session 'NOPE'"):
            store.load_session("NOPE")
        common = os.path.commonprefix([a[0].id, b[0].id])
        with pytest.raises(StoreError, match="ambiguous"):
            store.load_session(common)


def test_batch_is_all_or_nothing(db):
    s, turns, outs, votes = synthetic_session(turns=3)
    with Store.open(db) as store:
        with pytest.raises(RuntimeError):
            with store.batch():
                store.create_session(s)
                for t in turns:
                    store.add_turn(t)
                raise RuntimeError("boom")
        assert store.counts()["session"] == 0 and store.counts()["turn"] == 0


def test_disk_full_is_a_clear_error_and_nothing_is_half_written(db):
    s, turns, outs, votes = synthetic_session(turns=1)
    with Store.open(db) as store:
        write_synthetic(store, s, turns, outs, votes)
        before = store.counts()
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages}")  # the "disk" is now full
        big = OutputRecord(session_id=s.id, turn_id=turns[0].id, contestant="model-0", label="model-0",
                           status="complete", text="x" * 200_000)
        with pytest.raises(StoreError, match="disk full"):
            store.finish_output(big)
        more = synthetic_session(turns=30, seed=9)
        with pytest.raises(StoreError, match="disk full"):
            write_synthetic(store, *more)
        assert store.counts() == before
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_default_db_path_honours_lineup_db(monkeypatch, tmp_path):
    monkeypatch.setenv("LINEUP_DB", str(tmp_path / "x.db"))
    assert default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("LINEUP_DB")
    p = default_db_path()
    assert p.name == "lineup.db" and p.parent.name == "lineup"


def test_async_store_runs_in_order_off_the_loop_and_coalesces_checkpoints(db):
    s, turns, _, _ = synthetic_session(turns=1)
    out = OutputRecord(session_id=s.id, turn_id=turns[0].id, contestant="model-0", label="model-0")
    vote = VoteRecord(session_id=s.id, turn_id=turns[0].id, choice="model-0",
                      mapping={"model-0": "model-0", "model-1": "model-1"}, positions=["model-0", "model-1"])
    executed: list[str] = []
    threads: set[int] = set()

    async def main_() -> None:
        astore = await AsyncStore.open(db)
        real = astore.store.checkpoint_output

        def counting(output_id, text, *rest):
            executed.append(text)
            threads.add(threading.get_ident())
            return real(output_id, text, *rest)

        astore.store.checkpoint_output = counting
        await astore.create_session(s)
        await astore.add_turn(turns[0])
        await astore.start_output(out)
        gate = threading.Event()

        async def hold() -> None:  # keeps the writer busy until the checkpoints are queued
            await astore.call(lambda st: gate.wait(5))

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await anyio.sleep(0.01)
            for i in range(10):
                tg.start_soon(astore.checkpoint_output, out.id, f"text {i}", None, [i], [1])
                await anyio.sleep(0)
            with anyio.CancelScope() as scope:  # a cancelled caller does not cancel the write
                scope.cancel()
                await astore.add_vote(vote)
            gate.set()
        loaded = await astore.load_session(s.id)
        assert loaded.outputs[0].text == "text 9" and loaded.outputs[0].chunk_ms == [9]
        assert [v.id for v in loaded.votes] == [vote.id]
        await astore.aclose()
        with pytest.raises(StoreError, match="closed"):
            await astore.add_turn(turns[0])

    anyio.run(main_)
    assert executed == ["text 9"]
    assert threads and threading.get_ident() not in threads


def test_async_store_errors_reach_the_caller(db):
    async def main_() -> None:
        async with await AsyncStore.open(db) as astore:
            with pytest.raises(StoreError, match="no session"):
                await astore.load_session("MISSING")
            assert await astore.list_sessions() == []

    anyio.run(main_)


# ---------------------------------------------------------------------- lineup sessions

def test_sessions_command_table_and_json(db, capsys):
    blind = synthetic_session(turns=2, blind=True, seed=1, created=1.8e9)
    open_ = synthetic_session(turns=3, seed=2, kind="run", created=1.9e9)
    with Store.open(db) as store:
        write_synthetic(store, *blind)
        write_synthetic(store, *open_)
    assert main(["sessions", "--db", str(db)]) == 0
    table = capsys.readouterr().out
    rows = {line.split()[0]: line for line in table.splitlines()[1:] if line.strip()}
    assert "hidden" in rows[blind[0].id] and "model-0" not in rows[blind[0].id]
    assert "model-0, model-1" in rows[open_[0].id] and " run " in rows[open_[0].id]
    assert main(["sessions", "--db", str(db), "--json", "--kind", "chat"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["id"], d["contestants"], d["turns"], d["votes"]) for d in data] == [(blind[0].id, None, 2, 2)]
    assert main(["sessions", "--db", str(db), "--json", "--search", "nothing-like-this"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_sessions_command_without_a_database(tmp_path, capsys):
    assert main(["sessions", "--db", str(tmp_path / "none.db")]) == 0
    assert "No sessions yet" in capsys.readouterr().out
    assert not (tmp_path / "none.db").exists()


def test_sessions_command_on_a_file_that_is_not_a_database(tmp_path, capsys):
    bad = tmp_path / "notes.db"
    bad.write_text("hello, not sqlite")
    assert main(["sessions", "--db", str(bad)]) == 2
    assert "not a SQLite database" in capsys.readouterr().err
    assert bad.read_text() == "hello, not sqlite"


def test_sqlite_connection_uses_wal_even_for_a_second_store(db):
    with Store.open(db) as one, Store.open(db) as two:
        s, turns, outs, votes = synthetic_session(turns=1)
        write_synthetic(one, s, turns, outs, votes)
        assert two.load_session(s.id).session == s  # committed writes visible at once
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_withdrawn_vote_is_kept_but_no_longer_counts(tmp_path):
    """Undo in the vote queue: the vote stays in the record with `retracted_at`,
    drops out of current votes and counts, and a merge carries the withdrawal."""
    from tests.synthetic import synthetic_session, write_synthetic
    from store.imports import merge_database

    made = synthetic_session(turns=2, contestants=2, seed=3)
    rec, votes = made[0], made[3]
    path, copy = tmp_path / "a.db", tmp_path / "b.db"
    with Store.open(copy) as other:          # a teammate's copy from before the undo
        write_synthetic(other, *made)
    with Store.open(path) as s:
        write_synthetic(s, *made)
        before = sum(c.votes for c in s.votes_per_model())
        assert s.retract_vote(votes[0].id) is True
        assert s.retract_vote(votes[0].id) is False          # once
        loaded = s.load_session(rec.id)
        assert votes[0].id not in {v.id for v in loaded.current_votes()}
        assert next(v for v in loaded.votes if v.id == votes[0].id).retracted_at is not None
        assert before - sum(c.votes for c in s.votes_per_model()) == 2   # both contestants lose it
        merge_database(s, copy)                                # merging the old copy does not revive it
        assert votes[0].id not in {v.id for v in s.load_session(rec.id).current_votes()}
    with Store.open(copy) as other:
        merge_database(other, path)                            # and the withdrawal travels
        assert votes[0].id not in {v.id for v in other.load_session(rec.id).current_votes()}
        assert sum(c.votes for c in other.votes_per_model()) == before - 2
