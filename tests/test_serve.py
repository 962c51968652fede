"""`lineup serve`: Datasette started on loopback over the published copy
(`store.publish`); its pages, views and canned queries answer through the
JSON API, and a blind session not yet revealed (its contestants, labels,
mappings) is not in anything it serves, nor are the package mappings."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from store import Store
from store.publish import QUERIES, write_published_copy
from tests.server import free_port
from tests.share_support import owner, share_package  # noqa: F401  (the fixture: a database of two runs)

pytest.importorskip("datasette")



def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _serving(url: str) -> bool:
    try:
        _get(url)
        return True
    except (urllib.error.URLError, ConnectionError):
        return False


def _wait_until_serving(proc: subprocess.Popen, url: str) -> None:
    """Up to 30 s for `lineup serve` to answer at url (its output shown if it ends first)."""
    for _ in range(300):
        if _serving(url):
            return
        if proc.poll() is not None:
            pytest.fail(proc.stdout.read().decode())
        time.sleep(0.1)


def _hidden_strings(db: Path, sid: str) -> list[str]:
    with Store.open(db) as store:
        ls = store.load_session(sid)
    # the shown session has the same models (so their names are there); its prompt is another one
    return [sid, "Question number 9", "secret-other-session-title", *(o.id for o in ls.outputs), *(v.id for v in ls.votes)]


def _prepare(owner_db, tmp_path):
    db, shown, hidden = owner_db   # the run with checks is shown; the other one stays blind, unrevealed
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE session SET blind = 1, revealed_at = NULL WHERE id = ?", [hidden])
        conn.execute("UPDATE session SET blind = 1, revealed_at = 1700000000 WHERE id = ?", [shown])
    assert share_package(db, tmp_path / "pkg.db", hidden) == 0       # a share_map now holds the hidden session's mapping
    return db, hidden, shown


def test_the_published_copy_leaves_out_unrevealed_sessions(owner, tmp_path):
    db, hidden, shown = _prepare(owner, tmp_path)
    copy = tmp_path / "pub.db"
    published = write_published_copy(db, copy)
    assert published.rows["session"] == 1
    assert published.summary() == "1 session; left out until revealed: 1 blind session with nothing revealed"
    raw = copy.read_bytes().decode("latin-1")
    for s in _hidden_strings(db, hidden):
        assert s not in raw, s
    conn = sqlite3.connect(copy)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert not names & {"share_map", "share_package", "run_claim", "output_fts"}
    assert {"answers", "chunk_timings", "votes_readable"} <= names
    assert conn.execute("SELECT count(*) FROM chunk_timings").fetchone()[0] > 0
    conn.close()


def test_lineup_serve_answers_on_loopback_without_blind_mappings(owner, tmp_path):
    db, hidden, shown = _prepare(owner, tmp_path)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lineup", "serve", "--db", str(db), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(proc, f"{base}/lineup.json")
        tables = {t["name"] for t in _get(f"{base}/lineup.json")["tables"]}
        assert "share_map" not in tables and {"session", "output", "vote"} <= tables
        sessions = _get(f"{base}/lineup/session.json?_shape=array")
        assert [s["id"] for s in sessions] == [shown]
        for name in QUERIES:
            rows = _get(f"{base}/lineup/{name}.json?_shape=array")
            assert isinstance(rows, list), name
        assert _get(f"{base}/lineup/check_pass_rates.json?_shape=array")[0]["check_name"] == "contains"
        assert _get(f"{base}/lineup/slowest_answers.json?_shape=array")
        assert _get(f"{base}/lineup/answers.json?_shape=array")[0]["created_utc"].startswith("20")
        # any SQL against it finds nothing of the hidden session
        everything = json.dumps([_get(f"{base}/lineup/{t}.json?_shape=array&_size=max") for t in sorted(tables)])
        for s in _hidden_strings(db, hidden):
            assert s not in everything, s
        meta = _get(f"{base}/-/metadata.json")
        assert "blind" in meta["databases"]["lineup"]["tables"]["session"]["description"]
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_stopping_lineup_serve_stops_datasette_and_removes_the_copy(owner, tmp_path, sig):
    """A service manager's stop (SIGTERM) or a closed terminal (SIGHUP) reaches
    `lineup serve` alone, not Datasette, its child: it must stop serving and
    delete the published copy, not leave a server and the copy behind."""
    import os
    import signal

    db, hidden, shown = _prepare(owner, tmp_path)
    port = free_port()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "lineup", "serve", "--db", str(db), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "TMPDIR": str(tmp)})
    url = f"http://127.0.0.1:{port}/lineup.json"
    try:
        _wait_until_serving(proc, url)
        assert [p.name for p in tmp.iterdir()]           # the published copy, while it serves
        proc.send_signal(getattr(signal, sig))
        code = proc.wait(20)
        assert not _serving(url)
        assert list(tmp.iterdir()) == []
        assert code == 128 + getattr(signal, sig)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)          # whatever is left of the group (Datasette)
        except ProcessLookupError:
            pass
        proc.wait(10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_killed_lineup_serve_takes_datasette_with_it(owner, tmp_path):
    """kill -9 cannot be handled: Datasette must still not outlive lineup
    (the published copy stays on disk then; nothing can remove it)."""
    import os
    import signal

    db, hidden, shown = _prepare(owner, tmp_path)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lineup", "serve", "--db", str(db), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/lineup.json"
    try:
        _wait_until_serving(proc, url)
        proc.kill()
        proc.wait(10)
        for _ in range(100):                              # Datasette's own shutdown takes a moment
            if not _serving(url):
                break
            time.sleep(0.1)
        assert not _serving(url)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _queue_votes(db: Path, sid: str, cases: int) -> None:
    """The blind vote queue over run `sid`, judging `cases` cases, each revealed after its vote."""
    import random

    import anyio

    from core.answering.vote_queue import VoteQueue
    from store import AsyncStore

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="r", session_id=sid, rng=random.Random(3))
        await queue.load()
        for _ in range(cases):
            queue.advance()
            await queue.vote("A")
        await store.aclose()

    anyio.run(go)


def test_a_run_revealed_case_by_case_publishes_its_revealed_cases(tmp_path):
    """Runs are blind and the queue reveals per case: the cases judged (and
    revealed) are published with their models; a case still hidden is not in
    the copy (prompt, answers, votes); once every case is, the whole run is."""
    from tests.tui_sessions import CASES, make_run

    db = tmp_path / "runs.db"
    sid = make_run(db, CASES, blind=True)
    _queue_votes(db, sid, 2)
    with Store.open(db) as store:
        ls = store.load_session(sid)
    judged = {v.turn_id for v in ls.votes}
    assert len(judged) == 2 and all(v.revealed_at for v in ls.votes)
    shown_cases = {t.case_id for t in ls.turns if t.id in judged}
    (hidden_case,) = {"c1", "c2", "c3"} - shown_cases
    copy = tmp_path / "pub.db"
    published = write_published_copy(db, copy)
    conn = sqlite3.connect(copy)
    assert [r[0] for r in conn.execute("SELECT id FROM session")] == [sid]
    assert {r[0] for r in conn.execute("SELECT alias FROM contestant")} == {"kestrel", "heron", "plover"}
    assert {r[0] for r in conn.execute("SELECT case_id FROM turn")} == shown_cases
    assert {r[0] for r in conn.execute("SELECT DISTINCT t.case_id FROM output o JOIN turn t ON t.id = o.turn_id")} \
        == shown_cases
    assert {r[0] for r in conn.execute("SELECT turn_id FROM vote")} == judged
    assert conn.execute("SELECT count(*) FROM vote_contestant").fetchone()[0] == 6
    conn.close()
    raw = copy.read_bytes().decode("latin-1")
    hidden = [t for t in ls.turns if t.case_id == hidden_case]
    for needle in [*(t.id for t in hidden), *(t.user_message for t in hidden),
                   *(o.id for o in ls.outputs if o.turn_id in {t.id for t in hidden}), f"to {hidden_case} "]:
        assert needle not in raw, needle
    assert published.partial_sessions == 1 and published.hidden_units == (1, 0) and published.shown_units == (2, 0)
    assert published.summary() == ("1 session (1 of them blind, in part: the 2 cases revealed so far); "
                                   "left out until revealed: 1 case of 1 blind session not revealed yet")

    _queue_votes(db, sid, 1)                    # the last case: the whole run
    copy.unlink()
    published = write_published_copy(db, copy)
    assert published.summary() == "1 session"
    with sqlite3.connect(copy) as conn:
        assert conn.execute("SELECT count(*) FROM turn").fetchone()[0] == len(ls.turns)
        assert conn.execute("SELECT count(*) FROM vote").fetchone()[0] == 3


def test_lineup_serve_says_what_it_publishes_and_what_it_left_out(tmp_path):
    """The line `lineup serve` prints counts the revealed cases, not "0 sessions"."""
    from tests.tui_sessions import CASES, make_run

    db = tmp_path / "runs.db"
    sid = make_run(db, CASES, blind=True)
    make_run(db, CASES, blind=True)             # a second run, nothing judged
    _queue_votes(db, sid, 1)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lineup", "serve", "--db", str(db), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        lines = [proc.stdout.readline().decode() for _ in range(2)]
        _wait_until_serving(proc, f"http://127.0.0.1:{port}/lineup.json")
        turns = _get(f"http://127.0.0.1:{port}/lineup/turn.json?_shape=array")
    finally:
        proc.terminate()
        proc.wait(10)
    assert lines[0].startswith("serving 1 session (1 of them blind, in part: the 1 case revealed so far) "
                               f"read-only at http://127.0.0.1:{port}/lineup"), lines
    assert lines[1] == ("left out until revealed (blind: vote on them or reveal them, then restart): "
                        "1 blind session with nothing revealed, 2 cases of 1 blind session not revealed yet\n")
    assert [t["case_id"] for t in turns] == [next(t.case_id for t in _load_turns(db, sid) if t.id in _voted(db, sid))]


def _load_turns(db, sid):
    with Store.open(db) as store:
        return store.load_session(sid).turns


def _voted(db, sid):
    with Store.open(db) as store:
        return {v.turn_id for v in store.load_session(sid).votes}
