"""Secrets (issue 6, item 4): a planted API key appears nowhere.

The key lives in an environment variable named by a config file. Models point
at loopback servers that (a) accept, (b) answer 401 echoing the key back in
their error message, (c) fail mid-stream with the key in the error event,
(d) the same 401 echo over the Anthropic protocol, and (e) a key variable
holding a character HTTP headers cannot carry, which makes the client raise
instead of reporting (the exception path). Everything the app produces is
captured: a chat session's events and record, `lineup run`, `models --check`,
`export` in every format, `report --json/--md/--html`, `sessions`; then every
file under the test's folder (the database and its -wal/-shm included) and
every captured stdout/stderr is searched for the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from lineup.config import load_config
from lineup.sessions import ChatSession
from lineup.store import AsyncStore, Store
from tests.server import Reply, TestServer

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-test-PLANTED0123456789abcdef"
NEEDLES = [KEY.encode(), b"PLANTED0123456789abcdef"]   # the distinctive part too (e.g. a cut or odd key)
KEY_VAR = "LINEUP_HARDENING_KEY"
ODD_VAR = "LINEUP_HARDENING_ODD_KEY"
ODD_KEY = KEY + "\u00e9"                                 # not encodable in a header: the client raises


def _echo(what: str) -> str:
    return f"Incorrect API key provided: {what}. Authorization: Bearer {what} (x-api-key: {what})"


@pytest.fixture
def servers():
    with TestServer() as ok, TestServer() as denied, TestServer() as cut, TestServer() as anth:
        ok.script(Reply(text="A fine answer from the healthy model."))
        denied.script(Reply(status=401, message=_echo(KEY)))
        cut.script(Reply(text="This answer starts well and then", fault="error_event", fault_after=3,
                         message=f"upstream failure for key {KEY}"))
        anth.script(Reply(status=401, message=_echo(KEY)))
        yield {"ok": ok, "denied": denied, "cut": cut, "anth": anth}


def _write_config(path: Path, servers: dict) -> None:
    lines = []
    for alias, provider, srv, var in (("ok", "openai", servers["ok"], KEY_VAR),
                                      ("denied", "openai", servers["denied"], KEY_VAR),
                                      ("cut", "openai", servers["cut"], KEY_VAR),
                                      ("anth", "anthropic", servers["anth"], KEY_VAR),
                                      ("odd", "openai", servers["ok"], ODD_VAR)):
        lines += [f"[models.{alias}]", f'provider = "{provider}"', f'model = "{alias}-model"',
                  f'base_url = "{srv.base_url(provider)}"', f'api_key_env = "{var}"', "max_retries = 0",
                  "read_timeout = 5", ""]
    path.write_text("\n".join(lines))


def _grep(blob: bytes, where: str) -> None:
    for needle in NEEDLES:
        assert needle not in blob, f"the planted key leaked into {where}"


def test_a_planted_key_appears_in_no_artefact(tmp_path, monkeypatch, servers):
    db = tmp_path / "data" / "lineup.db"
    config = tmp_path / "config.toml"
    _write_config(config, servers)
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv(ODD_VAR, ODD_KEY)
    monkeypatch.setenv("LINEUP_CONFIG", str(config))
    monkeypatch.setenv("LINEUP_DB", str(db))
    captured: list[tuple[str, bytes]] = []

    # --- a chat session (in process): not blind, then blind
    cfg = load_config(config)
    events: list[str] = []

    async def chat():
        store = AsyncStore(Store.open(db))
        try:
            for blind in (False, True):
                with anyio.fail_after(60):
                    session = await ChatSession.create(store, list(cfg.models.values()), blind=blind)
                    await session.send("hello there", on_update=lambda u: events.append(repr(u.event)))
                    await session.send("and again", on_update=lambda u: events.append(repr(u.event)))
                    if blind:
                        await session.vote("tie")
                    await session.aclose()
        finally:
            await store.aclose()

    anyio.run(chat)
    captured.append(("chat session events", "\n".join(events).encode()))

    # the key really was sent, so there was something to leak
    assert servers["ok"].requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert servers["anth"].requests[0].headers["x-api-key"] == KEY
    with Store.open(db, readonly=True) as store:
        outputs = store.query("SELECT contestant, status, error_kind, error_message FROM output")
    by = {}
    for row in outputs:
        by.setdefault(row["contestant"], []).append(row)
    assert all(r["status"] == "complete" for r in by["ok"])
    for alias in ("denied", "anth"):
        assert all(r["status"] == "error" and r["error_kind"] == "auth" and r["error_message"] for r in by[alias])
    assert all(r["status"] == "error" and r["error_message"] for r in by["cut"])
    assert all(r["status"] == "error" and r["error_message"] for r in by["odd"]), by["odd"]

    # --- the CLI, each command as a user runs it
    set_path = tmp_path / "set.jsonl"
    set_path.write_text("".join(json.dumps({"id": f"c{i}", "category": "x", "prompt": f"question {i}"}) + "\n"
                                for i in range(3)))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def cli(*argv: str, ok_codes=(0,)) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "lineup", *argv], capture_output=True, cwd=tmp_path,
                              env=env, timeout=120)
        captured.append((f"lineup {' '.join(argv)} (stdout)", proc.stdout))
        captured.append((f"lineup {' '.join(argv)} (stderr)", proc.stderr))
        assert b"Traceback" not in proc.stderr, proc.stderr.decode()[-3000:]
        assert proc.returncode in ok_codes, (argv, proc.returncode, proc.stderr.decode()[-2000:])
        return proc

    models = ["-m", "ok", "-m", "denied", "-m", "cut", "-m", "anth", "-m", "odd"]
    cli("run", str(set_path), *models, "--quiet", ok_codes=(1,))   # some models fail by design: exit 1
    cli("run", str(set_path), *models, "--quiet", ok_codes=(1,))   # the resume path retries the failures
    cli("models")
    cli("models", "--check", ok_codes=(1,))
    cli("models", "--check", "--json", ok_codes=(1,))
    sessions = json.loads(cli("sessions", "--json").stdout)
    cli("sessions")
    assert len(sessions) == 3
    for s in sessions:
        for fmt in ("jsonl", "csv", "md"):
            cli("export", s["id"], "--format", fmt, "-o", str(out_dir / f"{s['id']}.{fmt}"))
            cli("export", s["id"], "--format", fmt)
    cli("report", "--json", "--bootstrap", "20")
    cli("report", "--bootstrap", "20", "--md", str(out_dir / "report.md"), "--html", str(out_dir / "report.html"))
    cli("report", "--bootstrap", "0")
    # the messages users read do say what went wrong (the check is not vacuous)
    check = json.loads(cli("models", "--check", "--json", ok_codes=(1,)).stdout)
    status = {m["alias"]: m["check"] for m in check["models"]}
    assert status["ok"]["ok"] and not status["denied"]["ok"] and status["denied"]["error_kind"] == "auth"
    assert "redacted" in status["denied"]["error"] or "***" in status["denied"]["error"]

    # --- every file under the test folder, and everything captured
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != config]
    assert db in files
    assert len(list(out_dir.iterdir())) == 3 * 3 + 2
    for p in files:
        _grep(p.read_bytes(), str(p.relative_to(tmp_path)))
    for where, blob in captured:
        _grep(blob, where)
    # and the database, as SQL sees it (text columns of every table)
    with Store.open(db, readonly=True) as store:
        for table in ("session", "contestant", "turn", "output", "vote", "tag", "check_result"):
            for row in store.query(f"SELECT * FROM {table}"):
                _grep(json.dumps(row, default=str).encode(), f"table {table}")
