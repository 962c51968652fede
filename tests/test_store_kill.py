"""Crash and kill, with real processes and SIGKILL.

- a vote loop killed at a random moment keeps every vote it acknowledged;
- `lineup run` killed mid-run: the file passes integrity_check, every complete
  answer is intact, and the same command resumes with no duplicate answers;
- an Arena import killed mid-way imports all of the file or none of it;
- a power-cut simulation: a process that SIGKILLs itself before SQL statement
  number n of a fixed sequence of store writes (so also inside a transaction,
  between BEGIN and COMMIT) leaves exactly the writes it acknowledged.

Every wait has a timeout; these bounds are hang guards, not speed assertions.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from store import Store

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

REPO = Path(__file__).resolve().parents[1]
GUARD_S = 60.0


def _env(db: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["LINEUP_DB"] = str(db)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _integrity(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def _read_lines_until(proc: subprocess.Popen, want: int, timeout: float = GUARD_S) -> list[str]:
    """Read stdout lines until `want` of them arrived (bounded)."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while len(lines) < want:
        left = deadline - time.monotonic()
        assert left > 0, f"child too slow: {lines[-3:]}"
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            continue
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"child ended early (rc {proc.wait(5)}): {err[-2000:]}")
        lines.append(line.strip())
    return lines


def _kill(proc: subprocess.Popen) -> list[str]:
    """SIGKILL, then whatever the child had already printed (it was acknowledged)."""
    proc.kill()
    out, _ = proc.communicate(timeout=GUARD_S)
    return [line.strip() for line in out.splitlines() if line.strip()]


# ---------------------------------------------------------------------- votes

VOTER = textwrap.dedent("""
    import sys, anyio
    from providers.demo import DEMO_MODELS
    from core.answering.sessions import ChatSession
    from store import AsyncStore

    async def main():
        store = await AsyncStore.open(sys.argv[1])
        session = await ChatSession.create(store, DEMO_MODELS[:2], blind=True)
        print("SESSION", session.id, flush=True)
        for i in range(10_000):
            await session.send(f"question {i}: what is {i} + {i}?")
            vote = await session.vote(["A", "B", "tie"][i % 3], note=f"n{i}")
            print("VOTE", vote.id, flush=True)   # printed only once the vote is committed

    anyio.run(main)
""")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_during_a_vote_loop_keeps_every_acknowledged_vote(tmp_path, seed):
    rng = random.Random(seed)
    db = tmp_path / "votes.db"
    proc = subprocess.Popen([sys.executable, "-c", VOTER, str(db)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=_env(db, LINEUP_DEMO_SPEED="0"))
    try:
        lines = _read_lines_until(proc, 1 + rng.randint(3, 25))
        time.sleep(rng.uniform(0, 0.05))   # somewhere inside the next send/vote
        lines += _kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    session_id = lines[0].split()[1]
    acked = [line.split()[1] for line in lines if line.startswith("VOTE ")]
    assert len(acked) >= 3
    _integrity(db)
    with Store.open(db) as store:
        loaded = store.load_session(session_id)
    stored = {v.id: v for v in loaded.votes}
    assert set(acked) <= set(stored), "an acknowledged vote was lost"
    assert len(stored) - len(acked) in (0, 1)   # at most the one in flight, never half of one
    for n, vid in enumerate(acked):
        assert stored[vid].note == f"n{n}" and stored[vid].choice == ["A", "B", "tie"][n % 3]
        assert set(stored[vid].mapping) == {"A", "B"}
    # every answer of every voted turn is complete; the cut one (if any) is not left "streaming"
    voted_turns = {stored[v].turn_id for v in acked}
    for out in loaded.outputs:
        assert out.status != "streaming"
        if out.turn_id in voted_turns:
            assert out.status == "complete" and out.text


# ---------------------------------------------------------------------- lineup run

def _complete_outputs(db: Path) -> list[tuple]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT id, turn_id, contestant, text, status FROM output "
                            "WHERE status = 'complete' ORDER BY id").fetchall()
    except sqlite3.OperationalError:   # not created yet
        return []
    finally:
        conn.close()


def test_sigkill_during_lineup_run_then_resume(tmp_path):
    cases = 12
    set_path = tmp_path / "set.jsonl"
    set_path.write_text("".join(json.dumps({"id": f"c{i}", "category": "math", "prompt": f"What is {i} * 7?",
                                            "follow_ups": ["Explain it in one line."] if i % 3 == 0 else []})
                                + "\n" for i in range(cases)))
    db = tmp_path / "run.db"
    models = ["demo/concise", "demo/thorough", "demo/thinker"]
    cmd = [sys.executable, "-m", "lineup", "run", str(set_path), "--quiet", "--concurrency", "3",
           "--temperature", "0"]
    for m in models:
        cmd += ["-m", m]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=_env(db, LINEUP_DEMO_SPEED="4"))
    try:
        deadline = time.monotonic() + GUARD_S
        while len(_complete_outputs(db)) < 5:
            assert proc.poll() is None, f"run ended before the kill: {proc.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, "no answers recorded in time"
            time.sleep(0.02)
        proc.kill()
        proc.communicate(timeout=GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    _integrity(db)
    before = _complete_outputs(db)
    assert len(before) >= 5
    turns_planned = sum(2 if i % 3 == 0 else 1 for i in range(cases))
    assert len(before) < turns_planned * len(models), "the kill came too late to test anything"

    again = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=GUARD_S * 2,
                           env=_env(db, LINEUP_DEMO_SPEED="0"))
    assert again.returncode == 0, again.stderr
    assert "resumed session" in again.stderr and "Traceback" not in again.stderr
    _integrity(db)
    after = _complete_outputs(db)
    assert set(before) <= set(after), "a complete answer changed or vanished"
    pairs = [(turn, who) for _, turn, who, _, _ in after]
    assert len(pairs) == len(set(pairs)), "a (turn, model) has two complete answers"
    conn = sqlite3.connect(db)
    try:
        (sessions,) = conn.execute("SELECT count(*) FROM session").fetchone()
        (turns,) = conn.execute("SELECT count(*) FROM turn").fetchone()
        dup_turns = conn.execute("SELECT case_id, repeat_index, follow_up_index, count(*) FROM turn "
                                 "GROUP BY 1, 2, 3 HAVING count(*) > 1").fetchall()
        streaming = conn.execute("SELECT count(*) FROM output WHERE status = 'streaming'").fetchone()[0]
    finally:
        conn.close()
    assert sessions == 1 and turns == turns_planned and dup_turns == []
    assert len(after) == turns_planned * len(models)
    assert streaming == 0


# ---------------------------------------------------------------------- import

def _arena_file(path: Path, n: int) -> None:
    rng = random.Random(5)
    names = [f"model-{i}" for i in range(12)]
    with open(path, "w") as fh:
        for i in range(n):
            a, b = rng.sample(names, 2)
            fh.write(json.dumps({"question_id": f"q{i}", "model_a": a, "model_b": b,
                                 "winner": rng.choice(["model_a", "model_b", "tie", "tie (bothbad)"]),
                                 "judge": f"j{i % 7}", "tstamp": 1.7e9 + i,
                                 "conversation_a": [{"role": "user", "content": f"prompt {i}"},
                                                    {"role": "assistant", "content": f"answer a {i} " * 5}],
                                 "conversation_b": [{"role": "user", "content": f"prompt {i}"},
                                                    {"role": "assistant", "content": f"answer b {i} " * 5}]})
                     + "\n")


def _counts(db: Path) -> dict[str, int]:
    with Store.open(db, readonly=True) as store:
        return store.counts()


def test_sigkill_during_an_import_is_all_or_nothing(tmp_path):
    battles = tmp_path / "arena.jsonl"
    _arena_file(battles, 6000)
    # the whole import once, to learn its size and duration on this machine
    full_db = tmp_path / "full.db"
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "lineup", "import", str(battles)], capture_output=True,
                          text=True, cwd=REPO, env=_env(full_db), timeout=GUARD_S * 3)
    duration = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    full = _counts(full_db)
    assert full["vote"] == 6000

    outcomes = []
    for fraction in (0.5, 0.9, "wal"):
        db = tmp_path / f"kill-{fraction}.db"
        with Store.open(db) as store:   # something recorded before, which must survive
            from tests.synthetic import synthetic_session, write_synthetic

            write_synthetic(store, *synthetic_session(turns=2, seed=3))
        base = _counts(db)
        proc = subprocess.Popen([sys.executable, "-m", "lineup", "import", str(battles)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=REPO, env=_env(db))
        wal = Path(str(db) + "-wal")
        wal_before = wal.stat().st_size if wal.exists() else 0
        try:
            if fraction == "wal":   # inside the import's transaction: its pages are spilling into the WAL
                deadline = time.monotonic() + GUARD_S
                while proc.poll() is None and time.monotonic() < deadline:
                    if wal.exists() and wal.stat().st_size > wal_before + 512 * 1024:
                        break
                    time.sleep(0.005)
            else:
                try:
                    proc.wait(timeout=duration * fraction)
                except subprocess.TimeoutExpired:
                    pass
            proc.kill()
            proc.communicate(timeout=GUARD_S)
        finally:
            if proc.poll() is None:
                proc.kill()
        _integrity(db)
        got = _counts(db)
        expect_all = {k: base[k] + full[k] for k in base}
        assert got in (base, expect_all), (fraction, got)
        outcomes.append((fraction, proc.returncode, got == expect_all))
    # the WAL-triggered kill landed mid-transaction: killed, and nothing of the file is there
    assert outcomes[-1][1] == -signal.SIGKILL and outcomes[-1][2] is False, outcomes


# ---------------------------------------------------------------------- power cut

POWER_CUT = textwrap.dedent('''
    """A fixed sequence of store writes with fixed ids and times."""
    import os, signal, sys
    from store import Store
    from store.records import (CheckResultRecord, ContestantRecord, OutputRecord, SessionRecord,
                                      TagRecord, TurnRecord, VoteRecord)

    T = 1.75e9
    SID = "01JPOWERCVT0000000000000SS"

    def ident(tag, n):
        return f"01JPOWERCVT{tag}{n:014d}"

    def out(n, turn, who, status="complete", text=None):
        return OutputRecord(id=ident("O", n), session_id=SID, turn_id=turn, contestant=who, label=who[-1].upper(),
                            status=status, text=text if text is not None else f"answer {n} from {who}",
                            finish_reason="stop" if status == "complete" else None, created=T + n,
                            chunk_ms=[10, 20, 30], chunk_chars=[3, 4, 5])

    def turn(n):
        return TurnRecord(id=ident("T", n), session_id=SID, position=n, user_message=f"question {n}",
                          created=T + n)

    def vote(n, choice, t, supersedes=None):
        return VoteRecord(id=ident("V", n), session_id=SID, turn_id=ident("T", t), rater="tester",
                          choice=choice, mapping={"A": "model-a", "B": "model-b"}, positions=["B", "A"],
                          created=T + 100 + n, note=f"vote {n}", supersedes=supersedes)

    def batch(store):
        with store.batch():
            store.add_turn(turn(1))
            store.finish_output(out(2, ident("T", 1), "model-a"))
            store.finish_output(out(3, ident("T", 1), "model-b"))
            store.add_vote(vote(2, "A", 1))

    WRITES = [
        lambda s: s.create_session(SessionRecord(
            id=SID, created=T, kind="chat", title="power cut", blind=True, seed=1,
            contestants=[ContestantRecord(alias="model-a", provider="openai", model="ma", label="A", position=0),
                         ContestantRecord(alias="model-b", provider="openai", model="mb", label="B", position=1)])),
        lambda s: s.add_turn(turn(0)),
        lambda s: s.start_output(out(0, ident("T", 0), "model-a", "streaming", "")),
        lambda s: s.checkpoint_output(ident("O", 0), "answer 0 so", None, [10], [11]),
        lambda s: s.checkpoint_output(ident("O", 0), "answer 0 so far, more", None, [10, 20], [11, 11]),
        lambda s: s.finish_output(out(0, ident("T", 0), "model-a")),
        lambda s: s.finish_output(out(1, ident("T", 0), "model-b")),
        lambda s: s.add_vote(vote(0, "A", 0)),
        lambda s: s.add_tag(TagRecord(id=ident("G", 0), output_id=ident("O", 1), tag="too_verbose",
                                      rater="tester", created=T + 200)),
        lambda s: s.add_check_result(CheckResultRecord(id=ident("C", 0), output_id=ident("O", 0),
                                                       check="regex", passed=True, detail="ok")),
        lambda s: s.reveal_session(SID, T + 300),
        lambda s: s.add_vote(vote(1, "tie", 0, supersedes=ident("V", 0))),
        lambda s: s.remove_tag(ident("G", 0), T + 400),
        batch,
        lambda s: s.add_turn(turn(2)),
        lambda s: s.start_output(out(4, ident("T", 2), "model-b", "streaming", "")),
        lambda s: s.checkpoint_output(ident("O", 4), "half an answ", None, [5], [12]),
    ]

    class Tripwire:
        """The connection, but the process dies (SIGKILL) before statement number `at`."""

        def __init__(self, conn, at):
            self._conn, self.at, self.count = conn, at, 0

        def _tick(self):
            if self.count == self.at:
                os.kill(os.getpid(), signal.SIGKILL)
            self.count += 1

        def execute(self, *a, **k):
            self._tick()
            return self._conn.execute(*a, **k)

        def executemany(self, *a, **k):
            self._tick()
            return self._conn.executemany(*a, **k)

        def __getattr__(self, name):
            return getattr(self._conn, name)

    def play(store, at, on_ack):
        store.conn = Tripwire(store.conn, at)
        for i, write in enumerate(WRITES):
            write(store)
            on_ack(i)

    if __name__ == "__main__":
        store = Store.open(sys.argv[1])
        play(store, int(sys.argv[2]), lambda i: print("ACK", i, flush=True))
''')


def _snapshot(db: Path) -> dict[str, list]:
    """Every row a user could see, in a comparable form. A streaming output of
    a dead process reads as interrupted (what the store shows on reopening);
    bookkeeping columns (updated, writer) are left out."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        snap = {}
        for table in ("session", "contestant", "turn", "output", "vote", "vote_contestant", "tag", "check_result"):
            cur = conn.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cur.description]
            rows = []
            for row in cur.fetchall():
                rec = {k: v for k, v in zip(names, row, strict=True) if k not in ("updated", "writer", "created")
                       or table != "output"}
                if table == "output" and rec["status"] == "streaming":
                    rec["status"] = "interrupted"
                rows.append(json.dumps(rec, sort_keys=True, default=lambda b: b.hex()))
            snap[table] = sorted(rows)
        return snap
    finally:
        conn.close()


def test_power_cut_between_and_inside_store_writes(tmp_path):
    namespace: dict = {"__name__": "power_cut"}
    exec(compile(POWER_CUT, "power_cut", "exec"), namespace)
    # the reference: the same writes in this process, a snapshot after each
    ref_db = tmp_path / "ref.db"
    store = Store.open(ref_db)
    empty = _snapshot(ref_db)
    refs: list[dict] = []
    marks: list[int] = []
    tripwire = {}

    def ack(i):
        refs.append(_snapshot(ref_db))
        marks.append(tripwire["t"].count)

    real = store.conn
    tripwire["t"] = namespace["Tripwire"](real, -1)
    store.conn = tripwire["t"]
    for i, write in enumerate(namespace["WRITES"]):
        write(store)
        ack(i)
    store.conn = real
    store.close()
    total = marks[-1]
    assert total > 3 * len(refs), "expected several statements per write"

    script = tmp_path / "power_cut.py"
    script.write_text(POWER_CUT)
    rng = random.Random(11)
    # every write boundary (just before the next BEGIN), the statement after it,
    # and a seeded sample of points inside transactions
    points = sorted({0, total - 1, *marks[:-1], *(m + 1 for m in marks[:-1]), *rng.sample(range(total), 12)})
    for at in points:
        db = tmp_path / f"cut-{at}.db"
        Store.open(db).close()   # migrated already: the statements counted are the writes only
        proc = subprocess.run([sys.executable, str(script), str(db), str(at)], capture_output=True, text=True,
                              cwd=REPO, env=_env(db), timeout=GUARD_S)
        assert proc.returncode == -signal.SIGKILL, (at, proc.returncode, proc.stderr[-2000:])
        acked = [int(line.split()[1]) for line in proc.stdout.split("\n") if line.startswith("ACK")]
        assert acked == list(range(len(acked)))
        _integrity(db)
        with Store.open(db) as reopened:   # opens (and turns a dead stream into "interrupted")
            assert reopened.counts()["session"] in (0, 1)
        _integrity(db)
        want = refs[acked[-1]] if acked else empty
        assert _snapshot(db) == want, f"kill before statement {at}: state differs from the {len(acked)} acknowledged writes"
        if acked and acked[-1] >= 5:   # the checkpointed stream was finished: its final text won
            with Store.open(db, readonly=True) as s:
                o0 = next(o for o in s.load_session(namespace["SID"]).outputs if o.id.endswith("O00000000000000"))
            assert o0.status == "complete" and o0.text == "answer 0 from model-a"
