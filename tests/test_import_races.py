"""`lineup import` and `lineup vote` against the world, as processes: a full disk, kill -9, a concurrent writer, two
voters at once.

- an import onto a full disk says "disk full ... nothing of it was saved"
  (exit 1), never a `DETACH DATABASE ... locked` traceback; the full disk is
  a 3 MB tmpfs mounted in a private mount namespace (`unshare -m`), skipped
  where none can be made;
- an import killed (kill -9) leaves its copy of the source in the temporary
  folder; the next import removes the copies of processes that are gone,
  and leaves a running one's alone;
- the summary counts what the import itself inserted, not the rows another
  process wrote meanwhile;
- two vote queues on one database, one rater, one case: one current vote."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.synthetic import synthetic_session, write_synthetic
from store import Store

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 120
pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX processes")


def _env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def _lineup(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lineup", *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(env), timeout=TIMEOUT)


def _db(path: Path, *, sessions: int = 1, turns: int = 3, words: int = 60, seed: int = 0) -> Path:
    with Store.open(path) as store:
        for i in range(sessions):
            write_synthetic(store, *synthetic_session(turns=turns, words=words, seed=seed + i,
                                                      created=1.7e9 + seed + i))
    return path


def _counts(db: Path) -> dict[str, int]:
    with Store.open(db, readonly=True) as store:
        return store.counts()


# ---------------------------------------------------------------------- a full disk


def test_an_import_onto_a_full_disk_says_so_without_a_traceback(tmp_path):
    if not shutil.which("unshare"):
        pytest.skip("needs unshare(1) to mount a small file system")
    disk = tmp_path / "disk"
    disk.mkdir()
    probe = subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip()}")
    source = _db(tmp_path / "theirs.db", turns=600, words=300, seed=7)     # ~6 MB: more than the disk holds
    seed = _db(tmp_path / "mine.db")
    before = _counts(seed)
    lineup = " ".join(f"'{a}'" for a in [sys.executable, "-m", "lineup", "import", str(source),
                                         "--db", str(disk / "mine.db")])
    # the disk exists only in this namespace: copy the owner's database onto it, import, and copy it back
    script = (f"mount -t tmpfs -o size=3m tmpfs {disk} && cp {seed} {disk}/mine.db && "
              f"{lineup}; rc=$?; cp {disk}/mine.db {tmp_path}/after.db; exit $rc")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=_env(),
                          cwd=tmp_path, timeout=TIMEOUT)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "DETACH" not in proc.stderr, proc.stderr[-3000:]
    assert "disk full" in proc.stderr and "nothing of it was saved" in proc.stderr, proc.stderr
    after = tmp_path / "after.db"
    assert sqlite3.connect(after).execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert _counts(after) == before


# ---------------------------------------------------------------------- kill -9


def _work_folders(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("lineup-"))


def test_copies_left_by_a_killed_import_are_removed_by_the_next(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    source = _db(tmp_path / "theirs.db", turns=800, words=300, seed=3)
    owner = _db(tmp_path / "mine.db")
    killed = False
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-m", "lineup", "import", str(source), "--db", str(owner)],
                                cwd=tmp_path, env=_env({"TMPDIR": str(tmp)}), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if any((tmp / name / "other.db").exists() for name in _work_folders(tmp)):   # copying the source
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.0005)
        proc.wait(timeout=TIMEOUT)
        if proc.returncode == -signal.SIGKILL:
            killed = True
            break
        with sqlite3.connect(owner) as conn:           # it finished first: start again from nothing merged
            conn.execute("DELETE FROM session WHERE id NOT IN (SELECT id FROM session ORDER BY created LIMIT 1)")
    assert killed, "never caught the import while it copied"
    left = _work_folders(tmp)
    assert len(left) == 1, left              # its copy of the source, left behind
    # a running import's folder (this process's) is not touched
    live = tmp / f"lineup-merge-{os.getpid()}-{_start(os.getpid())}-live"
    live.mkdir()
    (tmp / "lineup-merge-notours").mkdir()
    again = _lineup(["import", str(_db(tmp_path / "small.db", seed=40)), "--db", str(owner)], cwd=tmp_path,
                    env={"TMPDIR": str(tmp)})
    assert again.returncode == 0, again.stderr
    assert left[0] not in _work_folders(tmp)
    assert _work_folders(tmp) == sorted([live.name, "lineup-merge-notours"])


def _start(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        return fh.read().decode().rsplit(")", 1)[1].split()[19]


# ---------------------------------------------------------------------- a concurrent writer


@pytest.mark.parametrize("fmt", ["db", "jsonl"])
def test_the_summary_counts_what_the_import_inserted_not_a_concurrent_writer(tmp_path, fmt):
    source = _db(tmp_path / "theirs.db", turns=5, seed=11)
    if fmt == "jsonl":
        export = _lineup(["export", "--format", "jsonl", "-o", str(tmp_path / "theirs.jsonl")], cwd=tmp_path,
                         env={"LINEUP_DB": str(source)})
        assert export.returncode == 0, export.stderr
        source = tmp_path / "theirs.jsonl"
    owner = _db(tmp_path / "mine.db")
    other = Store.open(owner)          # another process, say a `lineup run`, writing while the import runs
    try:
        with other.batch():
            write_synthetic(other, *synthetic_session(turns=2, seed=99, created=1.8e9))
            proc = subprocess.Popen([sys.executable, "-m", "lineup", "import", str(source), "--db", str(owner)],
                                    cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
            time.sleep(4)              # the import reads, counts, and waits for the write lock
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        other.close()
    assert proc.returncode == 0, err
    assert "imported 1 session, 2 contestants, 5 turns, 10 outputs, 5 votes" in out, out


# ---------------------------------------------------------------------- two voters


VOTER = """
import anyio, os, random, sys, time
from core.answering.vote_queue import VoteQueue
from store import AsyncStore

async def main(db, ready, go, choice):
    store = await AsyncStore.open(db)
    try:
        queue = VoteQueue(store, rater="alice", rng=random.Random(1))
        await queue.load()
        item = queue.advance()
        open(ready, "w").write(item.targets[0].id)
        while not os.path.exists(go):
            time.sleep(0.01)
        (vote,) = await queue.vote(choice, confirm=True)
        print(vote.id)
    finally:
        await store.aclose()

anyio.run(main, *sys.argv[1:])
"""


def test_two_vote_queues_on_one_database_leave_one_current_vote(tmp_path):
    db = tmp_path / "mine.db"
    with Store.open(db) as store:
        write_synthetic(store, *synthetic_session(turns=2, seed=5, votes=False))
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", VOTER, str(db), str(tmp_path / f"ready{i}"), str(go), choice],
                              cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, choice in enumerate(("tie", "both_bad"))]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready{i}").exists() for i in range(2)):   # both queues show the same case
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.02)
    assert len({(tmp_path / f"ready{i}").read_text() for i in range(2)}) == 1
    go.touch()
    ids = []
    for p in procs:
        out, err = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0, err
        ids.append(out.strip())
    with Store.open(db) as store:
        rows = store.conn.execute("SELECT id, current, supersedes FROM vote WHERE rater = 'alice'").fetchall()
        assert store.conn.execute("SELECT count(*) FROM vote_contestant WHERE current = 1").fetchone() == (2,)
    assert sorted(r[0] for r in rows) == sorted(ids)
    # whichever process came first, the second supersedes it
    (now,) = [r for r in rows if r[1] == 1]
    (before,) = [r for r in rows if r[1] == 0]
    assert now[2] == before[0] and before[2] is None
