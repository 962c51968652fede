"""`lineup run` keeps the record true: two processes on one
database share the work, a changed config is not resumed into the old
session, missing check results are run on resume, one bad answer or check
does not stop the run, exit codes say whether every answer came back, and
SIGTERM closes the open answers like Ctrl-C. Real processes, real HTTP on
loopback; every wait has a bound (hang guards, not speed assertions)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from lineup.cli import main
from store import Store
from tests.run_support import config_file, sample_set
from tests.server import RawReply, Reply, TestServer

REPO = Path(__file__).resolve().parents[1]
GUARD_S = 90.0


def _env(db: Path, config: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(LINEUP_DB=str(db), LINEUP_CONFIG=str(config), PYTHONUNBUFFERED="1",
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def _rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# ---------------------------------------------------------------------- two processes

def test_two_processes_on_one_database_never_duplicate_work(tmp_path):
    """16 cases x 2 models, two `lineup run` at once: 32 answers, not 64."""
    db = tmp_path / "run.db"
    set_path = sample_set(tmp_path / "set.jsonl", 16)
    with TestServer() as srv:
        # slow enough that both processes are running at the same time
        srv.script(Reply(text="an answer in a few chunks", chunk_chars=5, delay=0.05))
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"concurrency": 2}, "m1": {"concurrency": 2}})
        Store.open(db).close()   # created up front: both start from the same empty file
        cmd = [sys.executable, "-m", "lineup", "run", str(set_path), "-m", "m0", "-m", "m1", "--quiet"]
        procs = [subprocess.Popen(cmd, cwd=REPO, env=_env(db, config), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        results = [p.communicate(timeout=GUARD_S) for p in procs]
        requests = len(srv.requests)
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert "Traceback" not in err
    assert _rows(db, "SELECT count(*) FROM session") == [(1,)]
    assert _rows(db, "SELECT count(*) FROM turn") == [(16,)]
    assert _rows(db, "SELECT count(*) FROM output WHERE status = 'complete'") == [(32,)]
    assert _rows(db, "SELECT count(*) FROM output") == [(32,)]
    assert requests == 32
    # both took part or one did all of it; either way the other said what happened
    joined = results[0][1] + results[1][1]
    assert "another lineup process" in joined or "already done" in joined or requests == 32


def test_a_claim_left_by_a_killed_process_is_taken_over(tmp_path):
    """SIGKILL mid-run leaves claims behind; the next run takes them over."""
    db = tmp_path / "run.db"
    set_path = sample_set(tmp_path / "set.jsonl", 6)
    with TestServer() as srv:
        srv.script(Reply(text="slow answer " * 10, chunk_chars=3, delay=0.05))
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"concurrency": 2}})
        cmd = [sys.executable, "-m", "lineup", "run", str(set_path), "-m", "m0", "--quiet"]
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(db, config), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + GUARD_S
        while True:
            assert time.monotonic() < deadline and proc.poll() is None, "run ended or stalled before the kill"
            try:
                if _rows(db, "SELECT count(*) FROM run_claim WHERE owner IS NOT NULL")[0][0] >= 2:
                    break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.05)
        proc.kill()
        proc.communicate(timeout=GUARD_S)
        srv.script(Reply(text="quick"))
        again = subprocess.run(cmd, cwd=REPO, env=_env(db, config), capture_output=True, text=True,
                               timeout=GUARD_S)
    assert again.returncode == 0, again.stderr
    assert "another lineup process" not in again.stderr
    complete = _rows(db, "SELECT turn_id, count(*) FROM output WHERE status = 'complete' GROUP BY 1")
    assert len(complete) == 6 and {n for _, n in complete} == {1}


# ---------------------------------------------------------------------- config drift

@pytest.mark.parametrize("change", ["model", "base_url", "temperature", "provider", "system"])
def test_a_changed_model_config_is_not_resumed_into_the_old_session(tmp_path, monkeypatch, capsys, change):
    db = tmp_path / "run.db"
    monkeypatch.setenv("LINEUP_DB", str(db))
    set_path = sample_set(tmp_path / "set.jsonl", 2)
    with TestServer() as srv, TestServer() as other:
        srv.script(Reply(text="from the first"))
        other.script(Reply(text="from the second"))
        config = tmp_path / "config.toml"
        monkeypatch.setenv("LINEUP_CONFIG", str(config))
        first = {"model": "first-model", "params": {"temperature": 0.2}}
        config_file(config, srv, {"m": first})
        run = ["run", str(set_path), "-m", "m", "--quiet"]
        first_run = run + (["--system", "the first system prompt"] if change == "system" else [])
        assert main(first_run) == 0
        capsys.readouterr()
        changed = {"model": {"model": "second-model", "params": {"temperature": 0.2}},
                   "base_url": {"model": "first-model", "base_url": other.base_url("openai"),
                                "params": {"temperature": 0.2}},
                   "temperature": {"model": "first-model", "params": {"temperature": 0.9}},
                   "provider": {"provider": "anthropic", "model": "first-model", "base_url": srv.base_url("anthropic"),
                                "api_key_env": "", "params": {"temperature": 0.2}},
                   "system": first}[change]
        config_file(config, srv, {"m": changed})
        second_run = run + (["--system", "the second system prompt"] if change == "system" else [])
        assert main(second_run) == 0
        err = capsys.readouterr().err
        # the same command again resumes the new session, not the old one
        assert main(second_run) == 0
        again = capsys.readouterr().err
    named = {"model": "m: model 'first-model' -> 'second-model'",
             "base_url": f"m: base_url '{srv.base_url('openai')}' -> '{other.base_url('openai')}'",
             "temperature": "m: params {'temperature': 0.2} -> {'temperature': 0.9}",
             "provider": "m: provider 'openai' -> 'anthropic'",
             # the system prompt is part of what a run is (its key): another one is another run
             "system": None}[change]
    assert "resumed session" not in err, err
    if named is not None:
        assert "not resuming session" in err and named in " ".join(err.split()), err
    assert "resumed session" in again
    store = Store.open(db)
    try:
        sessions = store.list_sessions(kind="run")
        assert len(sessions) == 2
        seen = set()
        for summary in sessions:
            loaded = store.load_session(summary.id)
            (c,) = loaded.session.contestants
            assert len(loaded.outputs) == 2 and all(o.status == "complete" for o in loaded.outputs)
            texts = {o.text for o in loaded.outputs}
            seen.add((c.provider, c.model, c.base_url, json.dumps(c.params), loaded.session.system))
            # every answer is stored under the record of the model that wrote it
            if change == "model":
                assert texts == {"from the first"} and c.model in ("first-model", "second-model")
            if change == "base_url":
                assert texts == ({"from the second"} if c.base_url == other.base_url("openai")
                                 else {"from the first"})
        assert len(seen) == 2, seen     # the two sessions record the two configurations
    finally:
        store.close()
    if change == "model":
        bodies = [r.json["model"] for r in srv.requests]
        assert Counter(bodies) == {"first-model": 2, "second-model": 2}
    if change == "provider":
        assert Counter(r.path for r in srv.requests) == {"/v1/chat/completions": 2, "/v1/messages": 2}
    if change == "system":
        systems = Counter(json.dumps(r.json).count("the second system prompt") > 0 for r in srv.requests)
        assert systems == {False: 2, True: 2}


# ---------------------------------------------------------------------- checks on resume

def test_a_check_result_lost_between_answer_and_check_is_run_on_resume(tmp_path, monkeypatch, capsys):
    db = tmp_path / "run.db"
    monkeypatch.setenv("LINEUP_DB", str(db))
    set_path = sample_set(tmp_path / "set.jsonl", 3, checks=[{"type": "contains", "value": "loopback"},
                                                        {"type": "max_words", "limit": 50}])
    with TestServer() as srv:
        srv.script(Reply(text="Hello from the loopback server."))
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        monkeypatch.setenv("LINEUP_CONFIG", str(config))
        assert main(["run", str(set_path), "-m", "m0", "--quiet"]) == 0
        full = sorted(_rows(db, "SELECT output_id, check_name, passed FROM check_result"))
        assert len(full) == 6
        # the process died after saving an answer and before (all of) its checks
        conn = sqlite3.connect(db)
        conn.execute("DELETE FROM check_result WHERE rowid IN (SELECT rowid FROM check_result LIMIT 3)")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'run_claim'").fetchone():
            conn.execute("DELETE FROM run_claim")   # its unit is not marked done either
        conn.commit()
        conn.close()
        sent = len(srv.requests)
        assert main(["run", str(set_path), "-m", "m0", "--quiet"]) == 0
        assert len(srv.requests) == sent       # no answer re-asked
    assert sorted(_rows(db, "SELECT output_id, check_name, passed FROM check_result")) == full


# ---------------------------------------------------------------------- one bad answer

def _sse(*chunks: dict) -> RawReply:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return RawReply(200, {"content-type": "text/event-stream"}, body.encode())


def test_a_lone_surrogate_or_deep_json_fails_one_answer_not_the_run(tmp_path, monkeypatch, capsys):
    db = tmp_path / "run.db"
    monkeypatch.setenv("LINEUP_DB", str(db))
    set_path = sample_set(tmp_path / "set.jsonl", 1, checks=[{"type": "valid_json"}])
    surrogate = _sse({"choices": [{"index": 0, "delta": {"content": "bad \ud800 text"}}]},
                     {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    deep = _sse({"choices": [{"index": 0, "delta": {"content": "[" * 100_000 + "]" * 100_000}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"concurrency": 1}})
        monkeypatch.setenv("LINEUP_CONFIG", str(config))
        for reply in (surrogate, deep):
            srv.script(reply)
            code = main(["run", str(set_path), "-m", "m0", "--quiet", "--new"])
            err = capsys.readouterr().err
            assert code == 0, err
            assert "stopped" not in err
    store = Store.open(db)
    try:
        for summary in store.list_sessions(kind="run"):
            loaded = store.load_session(summary.id)
            (out,) = loaded.outputs
            assert out.status == "complete"
            (check,) = loaded.checks
            assert not check.passed and check.detail
    finally:
        store.close()
    texts = sorted(o[0][:8] for o in _rows(db, "SELECT text FROM output"))
    assert texts == ["[[[[[[[[", "bad \ufffd te"]
    details = _rows(db, "SELECT detail FROM check_result WHERE detail LIKE '%deep%'")
    assert details


# ---------------------------------------------------------------------- exit codes

def test_exit_code_says_whether_every_answer_came_back(tmp_path, monkeypatch, capsys):
    db = tmp_path / "run.db"
    monkeypatch.setenv("LINEUP_DB", str(db))
    set_path = sample_set(tmp_path / "set.jsonl", 2)
    with TestServer() as srv, TestServer() as broken:
        srv.script(Reply(text="fine"))
        broken.script(Reply(status=500, message="down"))
        config = config_file(tmp_path / "config.toml", srv, {"good": {}, "bad": {"base_url": broken.base_url("openai")}})
        monkeypatch.setenv("LINEUP_CONFIG", str(config))
        assert main(["run", str(set_path), "-m", "good", "--quiet"]) == 0
        assert "one model, nothing to vote on" in capsys.readouterr().err      # one model: no vote to ask for
        assert main(["run", str(set_path), "-m", "good", "-m", "bad", "--quiet"]) == 1
        err = capsys.readouterr().err
        assert "exit 1: 2 of 4 conversations failed" in err
        assert main(["run", str(set_path), "-m", "bad", "--quiet"]) == 1
        assert "exit 1: 2 of 2" in capsys.readouterr().err
        broken.script(Reply(text="back"))
        assert main(["run", str(set_path), "-m", "good", "-m", "bad", "--quiet"]) == 0


# ---------------------------------------------------------------------- SIGTERM

@pytest.mark.skipif(not hasattr(signal, "SIGTERM"), reason="needs POSIX signals")
def test_sigterm_closes_open_answers_like_ctrl_c(tmp_path):
    db = tmp_path / "run.db"
    set_path = sample_set(tmp_path / "set.jsonl", 4)
    with TestServer() as srv:
        srv.script(Reply(text="slow " * 200, chunk_chars=5, delay=0.05))
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"concurrency": 2}})
        cmd = [sys.executable, "-m", "lineup", "run", str(set_path), "-m", "m0", "--quiet"]
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(db, config), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + GUARD_S
        while True:
            assert time.monotonic() < deadline and proc.poll() is None
            try:
                if _rows(db, "SELECT count(*) FROM output WHERE status = 'streaming'")[0][0] >= 1:
                    break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 130, err
    assert "run the same command again to resume" in err.lower()
    statuses = Counter(s for (s,) in _rows(db, "SELECT status FROM output"))
    assert statuses and "streaming" not in statuses
    assert _rows(db, "SELECT count(*) FROM run_claim WHERE owner IS NOT NULL") == [(0,)]


# ---------------------------------------------------------------------- one local server, several aliases

def _max_in_flight(requests) -> int:
    """The most requests the server was answering at the same moment (from its own records)."""
    edges = sorted([(r.t, 1) for r in requests] + [(r.done_at or r.closed_at, -1) for r in requests],
                   key=lambda e: (e[0], e[1]))
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


@pytest.mark.parametrize("concurrency", [None, 2])
def test_aliases_on_one_local_server_take_turns_in_chat(tmp_path, concurrency):
    import anyio

    from core.answering.sessions import ChatSession
    from store import AsyncStore
    from tests.server import model_config

    extra = {} if concurrency is None else {"concurrency": concurrency}
    with TestServer() as srv:
        srv.script(Reply(text="one two three four five six", chunk_chars=3, delay=0.03))
        models = [model_config(srv, p, alias=f"m{i}", max_retries=0, **extra)
                  for i, p in enumerate(("openai", "anthropic", "ollama"))]
        seen: list[tuple[int, str]] = []

        async def go():
            store = AsyncStore(Store.open(tmp_path / "chat.db"))
            session = await ChatSession.create(store, models)
            await session.send("hi", on_update=lambda u: seen.append((u.index, u.event.type)))
            outs = [c.last_output.status for c in session.contestants]
            await session.aclose()
            await store.aclose()
            return outs

        statuses = anyio.run(go)
        requests = list(srv.requests)
    assert statuses == ["complete"] * 3
    queued = {i for i, kind in seen if kind == "queued"}
    if concurrency is None:      # loopback: one request at a time, the others say they are queued
        assert _max_in_flight(requests) == 1
        assert len(queued) == 2
    else:
        assert _max_in_flight(requests) == 2
        assert len(queued) == 1


def test_cancel_while_queued_is_recorded_as_cancelled(tmp_path):
    import anyio

    from core.answering.sessions import ChatSession
    from store import AsyncStore
    from tests.server import model_config

    with TestServer() as srv:
        srv.script(Reply(text="slow " * 40, chunk_chars=5, delay=0.05))
        models = [model_config(srv, p, alias=f"m{i}", max_retries=0) for i, p in enumerate(("openai", "ollama"))]

        async def go():
            store = AsyncStore(Store.open(tmp_path / "chat.db"))
            session = await ChatSession.create(store, models)

            def on_update(u):
                if u.event.type == "queued":
                    session.cancel(u.index)

            await session.send("hi", on_update=on_update)
            outs = sorted(c.last_output.status for c in session.contestants)
            streaming = session.streaming
            await session.aclose()
            await store.aclose()
            return outs, streaming

        outs, streaming = anyio.run(go)
    assert outs == ["cancelled", "complete"] and not streaming


def test_run_shares_one_local_server_between_aliases(tmp_path):
    import anyio

    from core.answering.runner import Runner
    from core.answering.sampleset import load_sample_set
    from store import AsyncStore
    from tests.server import model_config

    sample = load_sample_set(sample_set(tmp_path / "set.jsonl", 4))
    with TestServer() as srv, TestServer() as other:
        for s in (srv, other):
            s.script(Reply(text="a b c d e f", chunk_chars=2, delay=0.02))
        models = [model_config(srv, "openai", alias="m0", max_retries=0),
                  model_config(srv, "anthropic", alias="m1", max_retries=0),
                  model_config(other, "openai", alias="m2", max_retries=0, concurrency=3)]

        async def go():
            store = AsyncStore(Store.open(tmp_path / "run.db"))
            progress = await Runner(store, sample, models, concurrency=8).run()
            await store.aclose()
            return progress

        progress = anyio.run(go)
        local, wider = list(srv.requests), list(other.requests)
    assert all(t.done == 4 for t in progress.tallies.values())
    assert _max_in_flight(local) == 1          # m0 and m1 share one local server
    assert _max_in_flight(wider) == 3          # its own setting


# ---------------------------------------------------------------------- re-running a run

def test_rerun_of_a_run_session_goes_case_by_case(tmp_path, monkeypatch, capsys):
    db = tmp_path / "run.db"
    monkeypatch.setenv("LINEUP_DB", str(db))
    set_path = tmp_path / "set.jsonl"
    cases = [{"id": "fmt-1", "category": "format", "prompt": "give JSON", "checks": [{"type": "valid_json"}]},
             {"id": "talk-2", "category": "dialogue", "prompt": "hello", "follow_ups": ["and then?", "finally?"],
              "checks": [{"type": "contains", "value": "loopback", "turn": 0}]},
             {"id": "m-3", "category": "math", "prompt": "1+1", "reference": "2", "system": "be terse",
              "params": {"max_tokens": 7}},
             {"id": "ms-4", "category": "dialogue", "messages": [{"role": "user", "content": "hi"},
                                                                 {"role": "assistant", "content": "hello"},
                                                                 {"role": "user", "content": "who are you?"}]}]
    set_path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    with TestServer() as srv:
        srv.script(Reply(text="Hello from the loopback server."))
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}, "m1": {}, "m2": {}})
        monkeypatch.setenv("LINEUP_CONFIG", str(config))
        assert main(["run", str(set_path), "-m", "m0", "-m", "m1", "--quiet", "--temperature", "0.3"]) == 0
        store = Store.open(db)
        (first,) = store.list_sessions(kind="run")
        store.close()
        srv.requests.clear()
        capsys.readouterr()
        assert main(["replay", first.id, "--rerun", "-m", "m2"]) == 0, capsys.readouterr().err
        bodies = [r.json for r in srv.requests]
    store = Store.open(db)
    try:
        rerun = next(s for s in store.list_sessions(kind="run") if s.id != first.id)
        loaded = store.load_session(rerun.id)
        original = store.load_session(first.id)
    finally:
        store.close()
    assert loaded.session.rerun_of == first.id
    assert [c.alias for c in loaded.session.contestants] == ["m2"]
    def shape(s):
        return sorted((t.case_id, t.category, t.follow_up_index, t.user_message) for t in s.turns)
    assert shape(loaded) == shape(original)
    assert len(loaded.outputs) == 6 and all(o.status == "complete" for o in loaded.outputs)
    # each request carries one case's conversation only, with the case's own system prompt and parameters
    assert len(bodies) == 6
    for body in bodies:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        assert users in (["give JSON"], ["hello"], ["hello", "and then?"], ["hello", "and then?", "finally?"],
                         ["1+1"], ["hi", "who are you?"])
        assert body.get("temperature") == 0.3
        if users == ["1+1"]:
            assert body["messages"][0] == {"role": "system", "content": "be terse"}
            assert body.get("max_tokens") == 7 or body.get("max_completion_tokens") == 7
        if users[0] == "hi":
            assert [m["content"] for m in body["messages"]] == ["hi", "hello", "who are you?"]
    checks = Counter(c.check for c in loaded.checks)
    assert checks == {"valid_json": 1, "contains": 1}
    talk_first = next(t for t in loaded.turns if t.case_id == "talk-2" and t.follow_up_index == 0)
    (contains,) = [c for c in loaded.checks if c.check == "contains"]
    assert contains.output_id in {o.id for o in loaded.outputs if o.turn_id == talk_first.id}
    assert loaded.session.meta["references"] == {"m-3": "2"}


def test_lone_surrogates_are_storable_everywhere_not_only_in_run(tmp_path):
    """The record boundary, not the runner, makes text storable: a chat answer,
    a prompt, a tag note and a checkpoint alike."""
    import anyio

    from core.answering.sessions import ChatSession
    from store import AsyncStore
    from tests.server import model_config

    surrogate = _sse({"choices": [{"index": 0, "delta": {"content": "x \udc80 y"}}]},
                     {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    with TestServer() as srv:
        srv.script(surrogate)
        models = [model_config(srv, "openai", alias="m0", max_retries=0)]

        async def go():
            store = AsyncStore(Store.open(tmp_path / "chat.db"))
            session = await ChatSession.create(store, models)
            await session.send("a plain prompt")
            turn = session.turns[0].model_copy(update={"id": "T2", "position": 1, "user_message": "prompt \ud800 here"})
            await store.add_turn(turn)
            await session.tag(0, "format_error", note="note \udbff")
            status = session.contestants[0].last_output.status
            await store.checkpoint_output(session.contestants[0].last_output.id, "cp \ud801")
            await session.aclose()
            await store.aclose()
            return status

        assert anyio.run(go) == "complete"
    db = tmp_path / "chat.db"
    assert _rows(db, "SELECT user_message FROM turn ORDER BY position") == [("a plain prompt",), ("prompt \ufffd here",)]
    assert _rows(db, "SELECT text FROM output") == [("x \ufffd y",)]
    assert _rows(db, "SELECT note FROM tag") == [("note \ufffd",)]
