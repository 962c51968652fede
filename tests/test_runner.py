"""`lineup run` over real HTTP: every case x model x repeat, follow-ups in
each model's own thread, checks stored, interrupt and resume without
duplicates or gaps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest

from core.answering.runner import Runner
from core.answering.sampleset import load_sample_set
from lineup.cli import main
from store import AsyncStore, Store
from tests.server import Reply, TestServer, model_config

ROOT = Path(__file__).resolve().parents[1]


def _write_set(path: Path, n: int = 4) -> Path:
    cases = []
    for i in range(n):
        case = {"id": f"c{i}", "category": "math" if i % 2 else "format", "prompt": f"question {i}"}
        if i == 0:
            case["follow_ups"] = ["and now shorter", "and once more"]
        if i == 2:
            case["reference"] = "the expected answer, for after the vote"
        if i == 1:
            case["checks"] = [{"type": "contains", "value": "loopback"}, {"type": "valid_json"}]
        cases.append(case)
    path.write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    return path


def _models(srv, n=2):
    protos = ["openai", "anthropic", "ollama", "gemini"]
    return [model_config(srv, protos[i], alias=f"m{i}", model=f"model-{i}", max_retries=0, read_timeout=5)
            for i in range(n)]


def _records(db):
    store = Store.open(db)
    try:
        (summary,) = store.list_sessions(kind="run")
        return store.load_session(summary.id)
    finally:
        store.close()


def test_run_every_case_model_and_repeat_with_follow_ups_and_checks(tmp_path):
    sample = load_sample_set(_write_set(tmp_path / "set.jsonl"))
    db = tmp_path / "run.db"
    with TestServer() as srv:
        srv.script(Reply(text="Hello from the loopback server."))
        models = _models(srv)

        async def go():
            store = AsyncStore(Store.open(db))
            progress = await Runner(store, sample, models, repeat=2, concurrency=3).run()
            await store.aclose()
            return progress

        progress = anyio.run(go)
        requests = list(srv.requests)
    loaded = _records(db)
    # 4 cases, case c0 has 3 user turns -> 6 turns per repeat, x2 repeats
    assert len(loaded.turns) == 12
    assert len(loaded.outputs) == 24 and all(o.status == "complete" for o in loaded.outputs)
    assert all(t.done == 8 and t.failed == 0 for t in progress.tallies.values())
    # follow-ups went out with the model's own previous answers, in order
    third = [r.json for r in requests if "and once more" in json.dumps(r.json)]
    assert len(third) == 4                           # 2 models x 2 repeats
    for body in third:
        flat = json.dumps(body)
        assert flat.index("question 0") < flat.index("and now shorter") < flat.index("and once more")
        assert flat.count("Hello from the loopback server.") == 2
    # checks of case c1 stored per answer: contains passes, valid_json fails
    c1_turns = {t.id for t in loaded.turns if t.case_id == "c1"}
    c1_outputs = {o.id for o in loaded.outputs if o.turn_id in c1_turns}
    results = Counter((c.check.split(":")[0], c.passed) for c in loaded.checks if c.output_id in c1_outputs)
    assert sum(results.values()) == 8
    assert results[next(k for k in results if k[1])] == 4 and results[next(k for k in results if not k[1])] == 4
    assert loaded.session.kind == "run" and loaded.session.blind
    assert loaded.session.sample_set_hash == sample.sha256
    assert loaded.session.meta["references"] == {"c2": "the expected answer, for after the vote"}


@pytest.mark.slow
def test_interrupted_run_resumes_without_duplicates_or_gaps(tmp_path):
    sample = load_sample_set(_write_set(tmp_path / "set.jsonl", n=6))
    db = tmp_path / "run.db"
    with TestServer() as srv:
        srv.script(Reply(text="slowish answer", chunk_chars=2, delay=0.01))
        models = _models(srv, 3)

        async def interrupted():
            store = AsyncStore(Store.open(db))
            with anyio.CancelScope() as scope:
                def on_progress(p):
                    if p.finished >= 4:
                        scope.cancel()
                await Runner(store, sample, models, concurrency=2, on_progress=on_progress).run()
            await store.aclose()

        anyio.run(interrupted)
        partial = _records(db)
        done_before = {(o.turn_id, o.contestant) for o in partial.outputs if o.status == "complete"}
        assert 0 < len(done_before) < 24

        async def resumed():
            store = AsyncStore(Store.open(db))
            progress = await Runner(store, sample, models, concurrency=2).run()
            await store.aclose()
            return progress

        before = len(srv.requests)
        progress = anyio.run(resumed)
        resent = len(srv.requests) - before
    assert progress.resumed
    loaded = _records(db)
    complete = Counter((o.turn_id, o.contestant) for o in loaded.outputs if o.status == "complete")
    assert len(loaded.turns) == 8                      # 6 cases, c0 has 3 user turns
    assert len(complete) == 8 * 3 and set(complete.values()) == {1}   # no gaps, no duplicates
    assert done_before <= set(complete)                # nothing finished was redone
    assert resent == 24 - len(done_before)
    assert {o.status for o in loaded.outputs} <= {"complete", "cancelled", "interrupted"}


def test_failed_answers_are_counted_and_retried_on_resume(tmp_path):
    sample = load_sample_set(_write_set(tmp_path / "set.jsonl", n=2))
    db = tmp_path / "run.db"
    with TestServer() as srv:
        models = _models(srv, 1)
        srv.script(Reply(status=500, message="boom"))

        async def go():
            store = AsyncStore(Store.open(db))
            p = await Runner(store, sample, models).run()
            await store.aclose()
            return p

        first = anyio.run(go)
        assert first.tallies["m0"].failed == 2 and first.tallies["m0"].errors == {"server": 2}
        srv.script(Reply(text="recovered"))
        second = anyio.run(go)
    assert second.tallies["m0"].failed == 0 and second.tallies["m0"].done == 2
    loaded = _records(db)
    attempts = sorted((o.attempt, o.status) for o in loaded.outputs)
    assert attempts.count((1, "error")) == 2 and (2, "complete") in attempts


@pytest.mark.slow
def test_cli_run_ctrl_c_then_resume(tmp_path):
    """The real command: SIGINT stops it cleanly (exit 130), the same command resumes."""
    set_path = _write_set(tmp_path / "set.jsonl", n=6)
    env = {**os.environ, "LINEUP_DB": str(tmp_path / "cli.db"), "LINEUP_DEMO_SPEED": "0.3",
           "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "lineup", "run", str(set_path), "-m", "demo/concise", "-m", "demo/thorough",
           "--concurrency", "2"]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = tmp_path / "cli.db"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:        # wait until at least one answer is recorded
        time.sleep(0.2)
        if db.exists():
            try:
                if any(o.status == "complete" for o in _records(db).outputs):
                    break
            except Exception:
                continue
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "run the same command again to resume" in err.lower()
    env["LINEUP_DEMO_SPEED"] = "0"
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "resumed session" in done.stderr
    loaded = _records(db)
    complete = Counter((o.turn_id, o.contestant) for o in loaded.outputs if o.status == "complete")
    assert len(complete) == 8 * 2 and set(complete.values()) == {1}


def _wait_for_an_answer(db: Path, proc: subprocess.Popen, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        if db.exists():
            try:
                if any(o.status == "complete" for o in _records(db).outputs):
                    return
            except Exception:
                continue


@pytest.mark.slow
def test_cli_run_ctrl_c_pressed_again_and_again_still_stops_cleanly(tmp_path):
    """Issue 11, item 20. Ctrl-C used to be lineup's only while the run's
    signal receiver was open, and that closed on the first signal: every later
    one (a person pressing Ctrl-C twice, SIGTERM from a supervisor) raised
    KeyboardInterrupt wherever the event loop was. That broke anyio's cancel
    scopes (a RuntimeError traceback), killed the process by SIGINT after it
    had said "stopped", or interrupted the loop's shutdown before anyio's
    worker thread was stopped, and the interpreter waited for it forever.
    Now each signal only records itself: exit 130, the stop message, no
    traceback, within the bound, and the same command resumes."""
    set_path = _write_set(tmp_path / "set.jsonl", n=6)
    db = tmp_path / "cli.db"
    env = {**os.environ, "LINEUP_DB": str(db), "LINEUP_DEMO_SPEED": "0.3", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "lineup", "run", str(set_path), "-m", "demo/concise", "-m", "demo/thorough",
           "--concurrency", "2"]
    wal = db.with_name(db.name + "-wal")
    for attempt in range(3):
        left_open = wal.exists()   # (a clean close removes it)
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if attempt == 0 or left_open:
            _wait_for_an_answer(db, proc)
        else:   # the next ones stop it earlier, as soon as it has the database open (its -wal file appears)
            deadline = time.monotonic() + 60
            while not wal.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(0.05 * (attempt - 1))
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:   # a burst, then now and then
            proc.send_signal(signal.SIGINT if attempt != 1 else signal.SIGTERM)
            time.sleep(0.005 if time.monotonic() < deadline - 59 else 0.05)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, (attempt, proc.returncode, err[-3000:])
        assert "Traceback" not in err, err
        assert "run the same command again to resume" in err.lower() or "before the run started" in err, err
    env["LINEUP_DEMO_SPEED"] = "0"
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = _records(db)
    complete = Counter((o.turn_id, o.contestant) for o in loaded.outputs if o.status == "complete")
    assert len(complete) == 8 * 2 and set(complete.values()) == {1}


def test_cli_run_bad_set_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "category": "x", "prompt": "ok"}\n{"id": "b", "category": 3}\n')
    assert main(["run", str(bad), "-m", "demo/concise"]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err


def test_cli_run_unknown_model_is_usage_error(tmp_path, capsys):
    good = _write_set(tmp_path / "set.jsonl", 1)
    assert main(["run", str(good), "-m", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_run_redoes_answers_the_server_cut(tmp_path):
    """A local server that cuts answers (`[DONE]` with no finish reason, as
    llama-cpp-python does when another request arrives) gives cut answers, not
    complete ones; `lineup run` counts them as failed and the same command redoes
    exactly those."""
    set_path = _write_set(tmp_path / "set.jsonl", n=3)
    db = tmp_path / "cut.db"
    with TestServer() as srv:
        config = tmp_path / "config.toml"
        lines = []
        for alias, proto in (("oa", "openai"), ("an", "anthropic")):
            lines += [f"[models.{alias}]", f'provider = "{proto}"', 'model = "test-model"',
                      f'base_url = "{srv.base_url(proto)}"', 'api_key_env = ""', "max_retries = 0",
                      "read_timeout = 5", ""]
        config.write_text("\n".join(lines))
        env = {**os.environ, "LINEUP_DB": str(db), "LINEUP_CONFIG": str(config)}
        cmd = [sys.executable, "-m", "lineup", "run", str(set_path), "-m", "oa", "-m", "an", "--quiet"]
        srv.script(Reply(text="half an answer", chunk_chars=5, fault="no_finish", fault_after=1),
                   Reply(text="", fault="role_only"),
                   Reply(text="a whole answer"))
        first = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert "Traceback" not in first.stderr, first.stderr
        loaded = _records(db)
        cut = [o for o in loaded.outputs if o.error_kind == "truncated"]
        assert len(cut) == 2 and all(o.status != "complete" for o in cut)
        assert sorted(o.text for o in cut) == ["", "half "]        # the text that came is kept
        assert all("without a finish reason" in o.error_message for o in cut)
        complete_before = {(o.turn_id, o.contestant) for o in loaded.outputs if o.status == "complete"}
        assert len(complete_before) < 10                            # the cut conversations are not done
        requests_before = len(srv.requests)

        srv.script(Reply(text="a whole answer"))
        second = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        assert "resumed session" in second.stderr
        redone = len(srv.requests) - requests_before
    loaded = _records(db)
    complete = Counter((o.turn_id, o.contestant) for o in loaded.outputs if o.status == "complete")
    assert len(complete) == 5 * 2 and set(complete.values()) == {1}
    assert not complete_before & {(o.turn_id, o.contestant) for o in loaded.outputs
                                  if o.status == "complete" and o.attempt > 1}
    assert redone == 10 - len(complete_before)


def test_a_huge_answer_is_cut_and_the_run_goes_on(tmp_path):
    """One model's server inflates a gzip body without end; its answers are
    recorded as cut with the reason, and every other answer is still done."""
    import zlib

    from tests.server import RawReply

    sample = load_sample_set(_write_set(tmp_path / "set.jsonl", n=2))
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = comp.compress(b'data: {"choices": [{"delta": {"content": "') + b"".join(
        comp.compress(b"A" * (1 << 20)) for _ in range(64)) + comp.flush()
    with TestServer() as good, TestServer() as bomb:
        good.script(Reply(text="a normal answer"))
        bomb.script(RawReply(200, {"content-type": "text/event-stream", "content-encoding": "gzip"}, body))
        models = [model_config(good, "openai", alias="good", max_retries=0, read_timeout=5),
                  model_config(bomb, "openai", alias="bomb", max_retries=0, read_timeout=5,
                               max_answer_bytes=1 << 20)]

        async def go():
            store = AsyncStore(Store.open(tmp_path / "run.db"))
            try:
                return await Runner(store, sample, models).run()
            finally:
                await store.aclose()

        progress = anyio.run(go)
    assert progress.tallies["good"].done == 2 and progress.tallies["good"].failed == 0
    assert progress.tallies["bomb"].failed == 2 and progress.tallies["bomb"].errors == {"truncated": 2}
    loaded = _records(tmp_path / "run.db")
    cut = [o for o in loaded.outputs if o.contestant == "bomb"]
    assert all(o.status == "error" and "the rest was not read" in o.error_message for o in cut)


def test_a_one_model_run_is_not_blind_and_does_not_ask_for_votes(tmp_path, monkeypatch, capsys):
    """A run of one model said "hidden" in `lineup sessions` and suggested
    `lineup vote`: there is nothing to tell apart and nothing to vote on."""
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    db = tmp_path / "one.db"
    assert main(["run", str(_write_set(tmp_path / "set.jsonl", 2)), "-m", "demo/concise", "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert "lineup vote" not in err and "one model, nothing to vote on" in err
    with Store.open(db) as store:
        (summary,) = store.list_sessions()
    assert not summary.blind and summary.contestants == ["demo/concise"] and summary.reveal_note == ""
    assert main(["sessions", "--db", str(db)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if summary.id in line)
    assert "demo/concise" in row and "hidden" not in row
