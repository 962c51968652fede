"""`lineup run --batch` through the OpenAI Batch API and Anthropic Message
Batches, against the loopback server's implementation of their documented
formats (tests/batch_api.py): answers recorded like a streamed run's (no
TTFT, marked batch, half price), follow-ups in rounds, partial failures and
expired batches recorded and retried, progress while polling, and a run
killed with SIGKILL between submit and download that resumes without
submitting again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lineup.cli import main
from providers import make_provider
from providers.events import ChatRequest, Message, SamplingParams
from store import Store
from tests.server import TestServer
from tests.run_support import REPO, config_file

GUARD_S = 60.0
KEY = "test-anthropic-batch-key-0123456789abcdef"   # not shaped like a real key (secret scanners)


@pytest.fixture(autouse=True)
def anthropic_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def sample_set(path: Path, n: int, follow_ups: bool = False) -> Path:
    lines = []
    for i in range(n):
        case = {"id": f"c{i}", "category": "k", "prompt": f"question {i}",
                "checks": [{"type": "contains", "value": "batch answer"}]}
        if follow_ups and i == 0:
            case["follow_ups"] = ["and then?"]
        lines.append(json.dumps(case))
    path.write_text("\n".join(lines) + "\n")
    return path


def _outputs(db: Path) -> list[dict]:
    store = Store.open(db)
    try:
        return store.query("SELECT o.*, t.case_id, t.follow_up_index FROM output o JOIN turn t ON t.id = o.turn_id "
                           "ORDER BY o.created, o.id")
    finally:
        store.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_batch_run_records_every_answer_like_a_streamed_one(tmp_path: Path, provider: str,
                                                            capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "b.db"
    sample = sample_set(tmp_path / "set.jsonl", 3, follow_ups=True)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {
            "provider": provider, "base_url": srv.base_url(provider),
            "price": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}})
        assert main(["run", str(sample), "-m", "m0", "--batch", "--poll", "0.01", "--temperature", "0",
                     "--db", str(db), "--config", str(config)]) == 0
        kind = "openai" if provider == "openai" else "anthropic"
        assert srv.batches.submissions(kind) == 2          # the opening turns, then the one follow-up
        assert not any(r.path.endswith(("/chat/completions", "/v1/messages")) for r in srv.requests)
        inputs = list(srv.batches.inputs.values())
    err = capsys.readouterr().err
    assert "in_progress" in err and ("completed, 3/3 done" in err or "ended, 3/3 done" in err)   # progress
    rows = _outputs(db)
    assert len(rows) == 4 and all(r["status"] == "complete" and r["origin"] == "batch" for r in rows)
    assert all(r["ttft_ms"] is None and r["duration_ms"] is None and r["sent_at"] for r in rows)
    assert {r["served_model"] for r in rows} == {"batch-model-2025"}
    assert {r["system_fingerprint"] for r in rows} == ({"fp_batch"} if provider == "openai" else {None})
    by_turn = {(r["case_id"], r["follow_up_index"]): r for r in rows}
    assert by_turn[("c1", 0)]["text"] == "batch answer to: question 1"
    assert by_turn[("c0", 1)]["text"] == "batch answer to: and then?"
    assert all(r["cost"] == pytest.approx((10 * 1.0 + 5 * 2.0) / 1e6 * 0.5) for r in rows)   # half price
    assert all(r["request_key"] for r in rows)
    # the follow-up went out with the first answer in its history
    (second,) = inputs[1]
    body = second["body"] if provider == "openai" else second["params"]
    assert [m["content"] for m in body["messages"]][-3:] == ["question 0", "batch answer to: question 0",
                                                            "and then?"]
    store = Store.open(db)
    try:
        (checks,) = store.query("SELECT count(*) AS n, sum(passed) AS ok FROM check_result")
    finally:
        store.close()
    assert checks == {"n": 3, "ok": 3}
    if provider == "anthropic":   # the key went in its header on every call, and nowhere in the record
        assert all(r.headers.get("x-api-key") == KEY for r in srv.requests)
        assert KEY.encode() not in db.read_bytes()


def test_the_batch_body_is_the_streamed_body_without_stream(tmp_path: Path) -> None:
    with TestServer() as srv:
        from providers.batch import batch_client
        from tests.server import model_config

        for provider in ("openai", "anthropic"):
            cfg = model_config(srv, provider, params=SamplingParams(temperature=0.3, max_tokens=50))
            request = ChatRequest(model="test-model", messages=(Message(role="user", content="hi"),), system="sys",
                                  params=SamplingParams(seed=3))
            streamed = make_provider(cfg).build(request, None)[2]
            batched = batch_client(cfg).body(request, None)
            assert batched == {k: v for k, v in streamed.items() if k not in ("stream", "stream_options")}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_partial_failures_are_recorded_and_retried_by_the_next_run(tmp_path: Path, provider: str) -> None:
    db = tmp_path / "b.db"
    sample = sample_set(tmp_path / "set.jsonl", 4)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"provider": provider,
                                                                "base_url": srv.base_url(provider)}})
        srv.batches.answer = lambda cid, body: (("error", 400, "scripted refusal")
                                                if "question 2" in json.dumps(body) else "batch answer ok")
        common = ["run", str(sample), "-m", "m0", "--batch", "--poll", "0.01", "--db", str(db), "--config",
                  str(config), "--quiet"]
        assert main(common) == 1
        rows = _outputs(db)
        failed = [r for r in rows if r["status"] != "complete"]
        assert len(rows) == 4 and len(failed) == 1 and failed[0]["case_id"] == "c2"
        assert failed[0]["error_kind"] == "bad_request" and "scripted refusal" in failed[0]["error_message"]
        kind = "openai" if provider == "openai" else "anthropic"
        assert srv.batches.submissions(kind) == 1
        srv.batches.answer = lambda cid, body: "batch answer ok"
        assert main(common) == 0
        assert srv.batches.submissions(kind) == 2
        assert len(list(srv.batches.inputs.values())[-1]) == 1        # only the failed request went again
    rows = _outputs(db)
    assert [(r["case_id"], r["attempt"], r["status"]) for r in rows if r["case_id"] == "c2"] == [
        ("c2", 1, "error"), ("c2", 2, "complete")]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_expired_batch_keeps_what_came_back(tmp_path: Path, provider: str) -> None:
    db = tmp_path / "b.db"
    sample = sample_set(tmp_path / "set.jsonl", 5)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"provider": provider,
                                                                "base_url": srv.base_url(provider)}})
        srv.batches.expire_after = 2
        common = ["run", str(sample), "-m", "m0", "--batch", "--poll", "0.01", "--db", str(db), "--config",
                  str(config), "--quiet"]
        assert main(common) == 1
        rows = _outputs(db)
        assert sorted(r["status"] for r in rows) == ["complete"] * 2 + ["error"] * 3
        assert {r["error_kind"] for r in rows if r["status"] == "error"} == {"timeout"}
        assert all("expired" in r["error_message"] for r in rows if r["status"] == "error")
        srv.batches.expire_after = None
        assert main(common) == 0
    assert sum(r["status"] == "complete" for r in _outputs(db)) == 5


def test_a_batch_that_fails_validation_fails_its_requests(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    sample = sample_set(tmp_path / "set.jsonl", 2)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        srv.batches.fail = True
        assert main(["run", str(sample), "-m", "m0", "--batch", "--poll", "0.01", "--db", str(db), "--config",
                     str(config), "--quiet"]) == 1
    rows = _outputs(db)
    assert len(rows) == 2 and all(r["status"] == "error" and "the input file is invalid" in r["error_message"]
                                  for r in rows)


def _jobs(db: Path) -> list[tuple]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT id, state, remote_id FROM batch_job ORDER BY created").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("lose_ack", [False, True])
def test_a_batch_run_killed_between_submit_and_download_resumes_without_submitting_again(
        tmp_path: Path, lose_ack: bool) -> None:
    db = tmp_path / "b.db"
    sample = sample_set(tmp_path / "set.jsonl", 6)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        srv.batches.hold = True                       # submitted, never finished: the kill comes first
        env = dict(os.environ, LINEUP_DB=str(db), LINEUP_CONFIG=str(config),
                   PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.Popen([sys.executable, "-m", "lineup", "run", str(sample), "-m", "m0", "--batch",
                                 "--poll", "0.05", "--quiet"], env=env, cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + GUARD_S
            while not any(j[2] for j in _jobs(db)):
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "the batch was never submitted"
                time.sleep(0.02)
            # polling: the batch id is recorded, the download not done
            deadline = time.monotonic() + GUARD_S
            while sum(1 for r in srv.requests if r.method == "GET" and r.path.startswith("/v1/batches/")) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(GUARD_S)
        finally:
            if proc.poll() is None:
                proc.kill()
            if proc.stderr:
                proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        assert srv.batches.submissions() == 1
        ((job_id, state, remote),) = _jobs(db)
        assert state == "submitted" and remote
        assert not any(r.path.endswith("/content") for r in srv.requests)     # nothing downloaded yet
        if lose_ack:
            # as if killed between the provider creating the batch and lineup recording its id
            conn = sqlite3.connect(db)
            conn.execute("UPDATE batch_job SET state = 'prepared', remote_id = NULL")
            conn.commit()
            conn.close()
        srv.batches.hold = False
        assert main(["run", str(sample), "-m", "m0", "--batch", "--poll", "0.01", "--db", str(db), "--config",
                     str(config), "--quiet"]) == 0
        assert srv.batches.submissions() == 1                 # resumed, never submitted again
        uploads = sum(1 for r in srv.requests if r.method == "POST" and r.path == "/v1/files")
        assert uploads == 1
    rows = _outputs(db)
    assert len(rows) == 6 and all(r["status"] == "complete" and r["origin"] == "batch" for r in rows)
    assert {j[1] for j in _jobs(db)} == {"collected"}


def test_polls_that_keep_failing_stop_the_run_and_the_next_one_collects(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "b.db"
    sample = sample_set(tmp_path / "set.jsonl", 3)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        common = ["run", str(sample), "-m", "m0", "--batch", "--poll", "0.01", "--db", str(db), "--config",
                  str(config)]
        srv.batches.poll_error = 503
        assert main(common) == 1
        err = capsys.readouterr().err
        assert "polling failed" in err and "stopped early" in err and "run the same command again" in err
        srv.batches.poll_error = None
        assert main(common) == 0
        assert srv.batches.submissions() == 1
    assert sum(r["status"] == "complete" for r in _outputs(db)) == 3


def test_a_cached_batch_rerun_submits_nothing(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    sample = sample_set(tmp_path / "set.jsonl", 3)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        common = ["run", str(sample), "-m", "m0", "--batch", "--poll", "0.01", "--db", str(db), "--config",
                  str(config), "--quiet", "--temperature", "0"]
        assert main(common) == 0
        assert main([*common, "--new", "--cache"]) == 0
        assert srv.batches.submissions() == 1
    assert sorted(r["origin"] for r in _outputs(db)) == ["batch"] * 3 + ["cache"] * 3


def test_batch_needs_a_provider_with_a_batch_api(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sample = sample_set(tmp_path / "set.jsonl", 1)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"provider": "ollama", "base_url": srv.url}})
        assert main(["run", str(sample), "-m", "m0", "--batch", "--db", str(tmp_path / "b.db"), "--config",
                     str(config)]) == 2
    assert "'m0' is ollama" in capsys.readouterr().err


def test_batch_refuses_cases_with_tools_or_a_response_format_before_recording(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A batch request carries neither tools nor a response_format: such a case
    would be answered as if asked plainly and recorded as its answer."""
    sample = sample_set(tmp_path / "set.jsonl", 2)
    tool = {"name": "lookup", "description": "find it", "parameters": {"type": "object", "properties": {}}}
    shapes = {"tools": [tool], "response_format": {"name": "a", "schema": {"type": "object"}}}
    db = tmp_path / "b.db"
    for field, value in shapes.items():
        case = {"id": "shaped", "category": "k", "prompt": "question", field: value}
        sample.write_text(sample.read_text() + json.dumps(case) + "\n")
        with TestServer() as srv:
            config = config_file(tmp_path / "config.toml", srv, {"m0": {"provider": "openai", "base_url": srv.url}})
            assert main(["run", str(sample), "-m", "m0", "--batch", "--db", str(db), "--config", str(config)]) == 2
            assert srv.requests == []
        err = capsys.readouterr().err
        assert "set.jsonl:3: case 'shaped' has tools or a response_format" in err and "without --batch" in err, err
        sample.write_text("".join(sample.read_text().splitlines(keepends=True)[:2]))
    assert not db.exists() or not Store.open(db).list_sessions()


def test_batch_calls_send_the_models_own_auth_and_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a gateway-style model (key in `api-key`, a secret team header): its batch calls authenticate as its
    # streamed requests do, never with a Bearer header the config did not ask for
    monkeypatch.setenv("GATEWAY_KEY", "gw-key-0123456789")
    monkeypatch.setenv("TEAM_TOKEN", "team-token-9876543210")
    db = tmp_path / "b.db"
    sample = sample_set(tmp_path / "set.jsonl", 2)
    with TestServer() as srv:
        config = tmp_path / "config.toml"
        config.write_text(
            "[models.gw]\n"
            f'provider = "openai"\nmodel = "gw-model"\nbase_url = "{srv.base_url("openai")}"\n'
            'api_key_env = "GATEWAY_KEY"\nauth = "api-key"\nmax_retries = 0\nread_timeout = 10\n'
            'headers = { "x-team" = { env = "TEAM_TOKEN" }, "x-title" = "lineup" }\n')
        assert main(["run", str(sample), "-m", "gw", "--batch", "--poll", "0.01",
                     "--db", str(db), "--config", str(config), "--quiet"]) == 0
        calls = [r for r in srv.requests if "/files" in r.path or "/batches" in r.path]
    assert calls and all(r.headers.get("api-key") == "gw-key-0123456789" for r in calls)
    assert all(r.headers.get("x-team") == "team-token-9876543210" and r.headers.get("x-title") == "lineup"
               for r in calls)
    assert not any("authorization" in {k.lower() for k in r.headers} for r in calls)
    assert all(r["status"] == "complete" for r in _outputs(db))
