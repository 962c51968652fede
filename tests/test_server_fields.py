"""Every field a server sends is untrusted: not only the answer.

A hostile server puts the session's secrets (a model's API key, a
neighbour's secret header value) and raw ESC/OSC/BEL bytes into every field
besides the answer text: the served `model`, `system_fingerprint`, the finish
reason (`finish_reason`, `stop_reason`, `done_reason`, `finishReason`), a tool
call's name and id, over the four streamed protocols and both batch APIs,
and a batch's `errors.data[].message` and `request_counts`. The database
file, every export format, `lineup diff` (terminal and `--json`), `lineup
drift --report --json` and the copy `lineup serve` publishes are searched for
any run of 8 characters of each secret and for raw control bytes
(`core.ground.text.server_text` is the rule, `core.answering.recording.server_fields` the gate).

Also: a batch results file with a malformed line, and tool-call arguments
nested 5,000 deep (family 5)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lineup.cli import main
from providers.events import MAX_ARGUMENT_DEPTH, ErrorKind, ToolSpec
from store import Store
from store.publish import write_published_copy
from tests.server import Received, Reply, TestServer, chat_request, collect, model_config

KEY = "sk-test-SERVERFIELDS0123456789abcdef"
HEADER_SECRET = "hdr-secret-VALUE-9876543210zyxwvu"
KEY_VAR, HEADER_VAR = "LINEUP_FIELDS_KEY", "LINEUP_FIELDS_HEADER"
SECRETS = (KEY, HEADER_SECRET)
NEEDLES = [s[i:i + 8].encode() for s in SECRETS for i in range(len(s) - 7)]
RAW_CONTROLS = ("\x1b", "\x07", "\x9b")
PROTOCOLS = ("openai", "openai-responses", "anthropic", "ollama", "gemini")


def _leak(field: str) -> str:
    """What the hostile server puts in `field`: both secrets (one wrapped over a
    line), an OSC 52 clipboard write and a CSI colour."""
    return f"{field}-{KEY}\x1b]52;c;aGk=\x07-{HEADER_SECRET[:15]}\n{HEADER_SECRET[15:]}\x1b[31m\u009b"


WEATHER = {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


LONG = "z" * 50_000   # a field this long is cut (to 200 characters)


def _hostile(rec: Received) -> Reply:
    """A tool loop whose every server field leaks: a call, then the answer;
    the model named "error-model" fails with a leaking error message."""
    if (rec.json or {}).get("model") == "error-model":
        return Reply(status=400, message=_leak("error"))
    common = dict(served_model=_leak("model"), system_fingerprint=_leak("fp"), finish_reason=_leak("finish") + LONG)
    if "unknown tool" in json.dumps(rec.json):
        return Reply(text="The answer after the call.", **common)
    return Reply(text="Let me call.", tool_calls=[{"id": _leak("id"), "name": f"tool_{KEY}{LONG}",
                                                   "arguments": {"city": "Paris"}}], **common)


def _config(path: Path, srv: TestServer) -> Path:
    lines = []
    for proto in PROTOCOLS:
        lines += [f"[models.s-{proto}]", f'provider = "{proto}"', f'model = "{proto}-model"',
                  f'base_url = "{srv.base_url(proto)}"', f'api_key_env = "{KEY_VAR}"', "max_retries = 0",
                  "read_timeout = 10", ""]
    for proto in ("openai", "anthropic"):
        lines += [f"[models.b-{proto}]", f'provider = "{proto}"', f'model = "{proto}-model"',
                  f'base_url = "{srv.base_url(proto)}"', f'api_key_env = "{KEY_VAR}"', "max_retries = 0",
                  "read_timeout = 10", ""]
    lines += ["[models.failing]", 'provider = "openai"', 'model = "error-model"',
              f'base_url = "{srv.base_url("openai")}"', f'api_key_env = "{KEY_VAR}"', "max_retries = 0", ""]
    # a neighbour whose secret header value the others' servers echo
    lines += ["[models.neighbour]", 'provider = "openai"', 'model = "n-model"',
              f'base_url = "{srv.base_url("openai")}"', f'api_key_env = "{KEY_VAR}"',
              f'headers = {{ X-Team-Token = {{ env = "{HEADER_VAR}" }} }}', ""]
    path.write_text("\n".join(lines))
    return path


def _grep(blob: bytes, where: str, text: bool = True) -> None:
    """No run of 8 characters of a secret in `blob`; in a text file, no raw control character either."""
    for needle in NEEDLES:
        assert needle not in blob, f"a secret ({needle!r}) leaked into {where}"
    if text:
        for raw in RAW_CONTROLS:
            assert raw.encode() not in blob, f"a raw control character {raw!r} reached {where}"


def _grep_database(path: Path) -> None:
    """Every text value of every table, as SQL reads it (the file's own bytes hold control bytes)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert "output" in tables
        for table in tables:
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            columns = [d[0] for d in cursor.description]
            for row in cursor:
                for column, value in zip(columns, row, strict=True):
                    if isinstance(value, str):
                        _grep(value.encode("utf-8", "surrogatepass"), f"{path.name} {table}.{column}")
    finally:
        conn.close()


def test_every_server_field_is_scrubbed_bounded_and_escaped_wherever_it_lands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv(HEADER_VAR, HEADER_SECRET)
    db = tmp_path / "fields.db"
    out = tmp_path / "out"
    out.mkdir()
    tools_set = tmp_path / "tools.jsonl"
    tools_set.write_text(json.dumps({
        "id": "t1", "category": "tools", "prompt": "Weather?", "tools": [WEATHER],
        "tool_default": {"error": "unknown tool"},
        "checks": [{"type": "tool_called", "tool": "get_weather"}]}) + "\n")
    plain_set = tmp_path / "plain.jsonl"
    plain_set.write_text(json.dumps({"id": "p1", "category": "k", "prompt": "question"}) + "\n")
    printed: list[tuple[str, bytes]] = []

    def cli(*argv: str, codes: tuple[int, ...] = (0,)) -> str:
        code = main([*argv, "--db", str(db)])
        got = capsys.readouterr()
        printed.append((" ".join(argv), (got.out + got.err).encode("utf-8", "surrogateescape")))
        assert code in codes, (argv, code, got.err[-2000:])
        return got.out

    with TestServer() as srv:
        config = _config(tmp_path / "config.toml", srv)
        srv.respond(_hostile)
        streamed = [*(a for p in PROTOCOLS for a in ("-m", f"s-{p}")), "-m", "neighbour", "-m", "failing"]
        for _ in range(2):   # the second resumes the first (nothing to redo)
            cli("run", str(tools_set), *streamed, "--config", str(config), "--quiet", codes=(0, 1))
        for _ in range(2):   # canary runs: `lineup drift --report`, `lineup diff` compares them
            cli("drift", str(plain_set), "-m", "s-openai", "-m", "s-gemini", "-m", "neighbour", "--config",
                str(config), "--quiet")
        # both batch APIs, every field leaking; the OpenAI batch first fails validation with a leaking message
        b = srv.batches
        b.served_model, b.system_fingerprint, b.finish_reason = _leak("model"), _leak("fp"), _leak("finish") + LONG
        b.tool_calls = [{"id": _leak("id"), "name": f"tool_{KEY}{LONG}", "arguments": {"k": KEY}}]
        b.extra_counts = {f"count_{KEY}": 1, "note": _leak("counts")}
        b.fail, b.fail_message = True, _leak("batch error")
        b.answer = lambda cid, body: ("error", 400, _leak("request error"))   # each request's own error too
        batch = ["run", str(plain_set), "-m", "b-openai", "-m", "b-anthropic", "-m", "neighbour", "--batch", "--poll", "0.01",
                 "--config", str(config)]
        cli(*batch, codes=(1,))
        b.answer = lambda cid, body: "batch answer"
        cli(*batch)
        assert any(r.headers.get("authorization") == f"Bearer {KEY}" for r in srv.requests)   # secrets sent
        assert any(r.headers.get("x-team-token") == HEADER_SECRET for r in srv.requests)

    with Store.open(db, readonly=True) as store:
        outputs = store.query("SELECT contestant, status, served_model, system_fingerprint, finish_reason, trace, "
                              "error_message, session_id FROM output")
        jobs = store.query("SELECT error, counts, remote_status FROM batch_job")
        checks = store.query("SELECT detail FROM check_result")
        sessions = [r["id"] for r in store.query("SELECT id FROM session ORDER BY created")]
        canaries = [r["id"] for r in store.query("SELECT id FROM session WHERE meta LIKE '%canary%' ORDER BY created")]
    # the fields still say what the server said, made inert
    by = {r["contestant"]: r for r in outputs if r["status"] == "complete"}
    assert set(by) >= {f"s-{p}" for p in PROTOCOLS} | {"b-openai", "b-anthropic"}, outputs
    for alias, row in by.items():
        if alias == "neighbour":
            continue
        assert row["served_model"].startswith("model-[redacted]\\x1b]52;c;aGk=\\x07-"), (alias, row["served_model"])
        assert row["finish_reason"].startswith("finish-[redacted]"), (alias, row["finish_reason"])
        assert len(row["finish_reason"]) == 200 and len(row["served_model"]) <= 200
        trace = json.loads(row["trace"])
        call = trace["steps"][0]["calls"][0]
        assert call["name"].startswith("tool_[redacted]zzz") and len(call["name"]) == 200, (alias, call)
        assert call["id"].startswith("id-[redacted]\\x1b"), (alias, call)
    assert by["s-openai"]["system_fingerprint"].startswith("fp-[redacted]")
    assert by["b-openai"]["system_fingerprint"].startswith("fp-[redacted]")
    errors = [r["error_message"] for r in outputs if r["error_message"]]
    for what in ("error", "batch error", "request error"):   # a stream's, a batch's, a batch request's
        assert any(e.startswith(f"HTTP 400: {what}-[redacted]\\x1b") or f"{what}-[redacted]\\x1b" in e
                   for e in errors), (what, errors)
    assert any((j["error"] or "").startswith("batch error-[redacted]\\x1b") for j in jobs), jobs
    assert any('"count_[redacted]"' in j["counts"] for j in jobs), jobs
    assert any("tool_[redacted]" in (c["detail"] or "") for c in checks), checks

    assert len(sessions) == 4 and len(canaries) == 2   # the tools run (resumed once), 2 canaries, the batch run
    diff_json = cli("diff", *canaries, "--json")
    sides = json.loads(diff_json)["comparisons"][0]
    assert sides["baseline"]["served_models"][0].startswith("model-[redacted]\\x1b]52"), sides["baseline"]
    cli("diff", *canaries)
    drift = json.loads(cli("drift", "--report", "--json", "--latency-change", "10000"))
    served = {name for m in drift["models"] for run in m["runs"] for name in run["served_models"]}
    assert served and all(name.startswith("model-[redacted]\\x1b]52") for name in served), served
    cli("drift", "--report", "--latency-change", "10000")
    cli("sessions", "--json")
    for sid in sessions:
        for fmt in ("jsonl", "csv", "md"):
            cli("export", sid, "--format", fmt, "-o", str(out / f"{sid}.{fmt}"))
    write_published_copy(db, out / "published.db")

    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "config.toml"]
    assert db in files and (out / "published.db") in files and len(list(out.iterdir())) == 3 * len(sessions) + 1
    for p in files:
        _grep(p.read_bytes(), str(p.relative_to(tmp_path)), text=".db" not in p.name)
    _grep_database(db)
    _grep_database(out / "published.db")
    for where, blob in printed:
        _grep(blob, f"lineup {where}")


# --------------------------------------------------------------------------- family 5: batch lines, deep arguments


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("named", [True, False], ids=["line-names-its-request", "line-names-nothing"])
def test_a_malformed_results_line_fails_its_request_and_the_rest_are_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, provider: str,
        named: bool) -> None:
    monkeypatch.setenv(KEY_VAR, KEY)
    db = tmp_path / "b.db"
    sample = tmp_path / "set.jsonl"
    sample.write_text("".join(json.dumps({"id": f"c{i}", "category": "k", "prompt": f"question {i}"}) + "\n"
                              for i in range(3)))
    with TestServer() as srv:
        config = _config(tmp_path / "config.toml", srv)
        srv.batches.bad_lines, srv.batches.bad_lines_named = {1}, named
        common = ["run", str(sample), "-m", f"b-{provider}", "--batch", "--poll", "0.01", "--db", str(db),
                  "--config", str(config)]
        assert main(common) == 1            # one request failed: not stuck, not a stop
        err = " ".join(capsys.readouterr().err.split())   # as printed, folded to the terminal's width
        with Store.open(db, readonly=True) as store:
            rows = store.query("SELECT status, error_kind, error_message FROM output ORDER BY created")
            (job,) = store.query("SELECT state FROM batch_job")
        assert job["state"] == "collected"
        assert sorted(r["status"] for r in rows) == ["complete", "complete", "error"], rows
        (bad,) = [r for r in rows if r["status"] == "error"]
        what = "output file" if provider == "openai" else "results file"
        assert f"{what} line 2" in bad["error_message"], bad
        assert bad["error_kind"] == "bad_response" and "is not JSON" in bad["error_message"]
        assert named or f"lines that could not be read: {what} line 2 is not JSON" in err, err
        # the next run asks the failed request again, and only it
        srv.batches.bad_lines = set()
        assert main(common) == 0
        assert len(list(srv.batches.inputs.values())[-1]) == 1
    with Store.open(db, readonly=True) as store:
        assert store.query("SELECT count(*) AS n FROM output WHERE status = 'complete'") == [{"n": 3}]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("depth", [5000, 300])
def test_tool_arguments_nested_too_deeply_are_a_bad_response_with_the_reason(protocol: str, depth: int) -> None:
    deep = '{"a": ' + "[" * depth + "]" * depth + "}"
    with TestServer() as srv:
        srv.script(Reply(text="", tool_calls=[{"id": "c1", "name": "get_weather", "raw_arguments": deep}]))
        request = chat_request("hi", tools=(ToolSpec(name="get_weather"),))
        result, _events = collect(model_config(srv, protocol, max_retries=0), request)
    assert result.error is not None and result.error.kind == ErrorKind.bad_response, result.error
    # past what Python parses (its recursion limit, which a process may have raised) or past the bound
    assert (f"nested deeper than {MAX_ARGUMENT_DEPTH} levels" in result.error.message
            or (depth == 5000 and "nested too deeply" in result.error.message)), result.error.message
    assert not result.tool_calls
