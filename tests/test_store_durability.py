"""Crash safety and concurrency with real processes: SIGKILL mid-stream and
mid-batch, and two processes writing one database at once."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from store import Store

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

STREAMER = textwrap.dedent("""
    import sys, anyio
    from store import AsyncStore, OutputRecord, TurnRecord
    from tests.synthetic import synthetic_session

    async def main():
        s, turns, outs, votes = synthetic_session(turns=3, seed=7)
        astore = await AsyncStore.open(sys.argv[1])
        await astore.create_session(s)
        for t in turns:
            await astore.add_turn(t)
        for o in outs:
            await astore.finish_output(o)
        for v in votes[:2]:
            await astore.add_vote(v)
        live = TurnRecord(session_id=s.id, position=3, user_message="tell me a long story")
        await astore.add_turn(live)
        out = OutputRecord(session_id=s.id, turn_id=live.id, contestant="model-0", label="model-0")
        await astore.start_output(out)
        text, chunk_ms, chunk_chars = "", [], []
        for k in range(1000):
            piece = f"part{k} "
            text += piece
            chunk_ms.append(100 + 10 * k)
            chunk_chars.append(len(piece))
            if k % 3 == 2:  # a checkpoint every few chunks, like once a second
                await astore.checkpoint_output(out.id, text, None, chunk_ms, chunk_chars)
                print("CHECKPOINT", k, s.id, out.id, flush=True)
                sys.stdin.readline()  # wait for the parent: it may kill us here, mid-stream

    anyio.run(main)
""")

BATCHER = textwrap.dedent("""
    import sys
    from store import Store
    from tests.synthetic import synthetic_session, write_synthetic

    store = Store.open(sys.argv[1])
    write_synthetic(store, *synthetic_session(turns=2, seed=1))
    with store.batch():
        for seed in range(2, 40):
            write_synthetic(store, *synthetic_session(turns=5, seed=seed))
            if seed == 20:
                print("IN BATCH", flush=True)
                sys.stdin.readline()
""")

WRITER = textwrap.dedent("""
    import os, sys, time
    from store import Store, TagRecord
    from tests.synthetic import synthetic_session

    db, gate, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    while not os.path.exists(gate):
        time.sleep(0.001)
    store = Store.open(db)   # both may find no database yet: the migration is serialised too
    s, turns, outs, votes = synthetic_session(turns=40, contestants=2, seed=seed)
    store.create_session(s)
    by_turn = {}
    for o in outs:
        by_turn.setdefault(o.turn_id, []).append(o)
    for t, v in zip(turns, votes):
        store.add_turn(t)                  # every record its own short transaction
        for o in by_turn[t.id]:
            store.start_output(o.model_copy(update={"status": "streaming", "text": ""}))
            store.checkpoint_output(o.id, o.text[:10], None, o.chunk_ms[:1], o.chunk_chars[:1])
            store.finish_output(o)
        store.add_vote(v)
        store.add_tag(TagRecord(output_id=by_turn[t.id][0].id, tag="too_verbose"))
    store.close()
    print("done", s.id, flush=True)
""")


def _spawn(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_sigkill_mid_stream_keeps_earlier_records_and_the_last_checkpoint(tmp_path):
    db = tmp_path / "crash.db"
    proc = _spawn(STREAMER, str(db))
    try:
        seen = []
        while len(seen) < 4:
            line = proc.stdout.readline()
            assert line, f"streamer died early: {proc.stderr.read()}"
            seen.append(line.split())
            if len(seen) < 4:
                proc.stdin.write("\n")
                proc.stdin.flush()
        _kill(proc)  # right after its 4th checkpoint, mid-stream
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _, k, session_id, output_id = seen[-1]
    expected = "".join(f"part{i} " for i in range(int(k) + 1))
    with Store.open(db) as store:
        loaded = store.load_session(session_id)
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert [t.position for t in loaded.turns] == [0, 1, 2, 3]
    assert len(loaded.votes) == 2
    done = [o for o in loaded.outputs if o.id != output_id]
    assert len(done) == 6 and all(o.status == "complete" and o.text for o in done)
    cut = next(o for o in loaded.outputs if o.id == output_id)
    assert cut.status == "interrupted"
    assert cut.text == expected
    assert cut.chunk_ms == [100 + 10 * i for i in range(int(k) + 1)]


def test_sigkill_mid_batch_commits_nothing_of_the_batch(tmp_path):
    db = tmp_path / "batch.db"
    proc = _spawn(BATCHER, str(db))
    try:
        assert proc.stdout.readline().strip() == "IN BATCH", proc.stderr.read()
        _kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Store.open(db) as store:
        assert store.counts()["session"] == 1 and store.counts()["turn"] == 2
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_two_writer_processes_at_once_both_succeed(tmp_path):
    db, gate = tmp_path / "shared.db", tmp_path / "go"
    procs = [_spawn(WRITER, str(db), str(gate), str(seed)) for seed in (1, 2)]
    gate.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(out.split()[1])
    with Store.open(db) as store:
        counts = store.counts()
        sessions = {s.id: s for s in store.list_sessions()}
        statuses = {r["status"] for r in store.query("SELECT DISTINCT status FROM output")}
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert set(sessions) == set(results)
    assert counts["turn"] == 80 and counts["output"] == 160 and counts["vote"] == 80 and counts["tag"] == 80
    assert all(s.turns == 40 and s.votes == 40 for s in sessions.values())
    assert statuses == {"complete"}


class _BusyOnce:
    """A connection whose first switch to WAL finds the database locked, as
    when another process creating the same file holds a lock SQLite will not
    wait for (waiting could deadlock): it fails at once instead of waiting."""

    def __init__(self, conn):
        self._conn, self.refused = conn, 0

    def execute(self, sql, *args):
        if sql == "PRAGMA journal_mode = WAL" and not self.refused:
            self.refused += 1
            raise sqlite3.OperationalError("database is locked")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_a_switch_to_wal_refused_at_once_is_retried_like_a_write(tmp_path, monkeypatch):
    """Two processes opening one new file at once: one failed to open ("still
    locked ... could not open") about once in twenty runs under load."""
    made: list[_BusyOnce] = []
    connect = Store._connect

    def busy_once(path, readonly, memory):
        made.append(_BusyOnce(connect(path, readonly, memory)))
        return made[-1]

    monkeypatch.setattr(Store, "_connect", staticmethod(busy_once))
    with Store.open(tmp_path / "new.db") as store:
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert made[0].refused == 1


def test_a_reader_opened_beside_a_writer_leaves_it_its_locks_and_its_log(tmp_path):
    """POSIX drops every lock a process holds on a file when it closes any
    descriptor of that file. Store.open read a file's header with Python's
    own open(), so each store opened beside a writer in the same process
    (the raters' server reads on a connection of its own) dropped the
    writer's SQLite locks; another process closing its connection then took
    itself for the last one, checkpointed and deleted the write-ahead log
    under the writer, and the server's next read failed (a short read: a
    rater's progress page answered 500)."""
    from tests.synthetic import synthetic_session, write_synthetic

    path = tmp_path / "lineup.db"
    writer = Store.open(path)
    try:
        write_synthetic(writer, *synthetic_session(turns=2, seed=1))
        reader = Store.open(path, readonly=True)
        reader.list_sessions()
        reader.close()
        subprocess.run([sys.executable, "-c", "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\n"
                        "c.execute('SELECT count(*) FROM sqlite_master').fetchone()\nc.close()", str(path)],
                       check=True, timeout=60)
        assert (tmp_path / "lineup.db-wal").exists()   # the writer still has its log: nobody took it for the last
        write_synthetic(writer, *synthetic_session(turns=2, seed=2))
        assert len(Store.open(path, readonly=True).list_sessions()) == 2
    finally:
        writer.close()
