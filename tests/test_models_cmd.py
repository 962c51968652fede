"""`lineup models`: lists aliases with key presence (never the key), the demo
hint, `--json`, and `--check` against demo models and loopback servers."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.answering import config as cfgmod
from lineup.cli import main

SECRET = "sk-proj-UNIQUEsecretVALUE0123456789abcdef"
AUTODETECT_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENROUTER_API_KEY",
                   "LINEUP_CONFIG", "MY_LOCAL_KEY")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No keys, no config file, no Ollama (a closed loopback port), instant demo models."""
    for var in AUTODETECT_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    monkeypatch.setattr(cfgmod, "default_config_path", lambda: tmp_path / "no-such-dir" / "config.toml")
    return monkeypatch


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["models", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_models_with_hint(clean_env, capsys, tmp_path):
    code, out, err = run_cli(capsys)
    assert code == 0
    assert "demo models" in out
    assert str(tmp_path / "no-such-dir" / "config.toml") in out and "[models." in out   # where and how to add
    for alias in ("demo/concise", "demo/thorough", "demo/quirky"):
        assert alias in out


CONFIG = """
[models.gpt4o]
provider = "openai"
model = "gpt-4o"

[models.claude]
provider = "anthropic"
model = "claude-sonnet-4-5"

[models.local]
provider = "openai"
model = "llama"
base_url = "http://127.0.0.1:{port}/v1"
api_key_env = "MY_LOCAL_KEY"
max_retries = 0

[models.quick]
provider = "demo"
model = "concise"
"""


@pytest.fixture
def config_file(tmp_path):
    def make(port: int = 9) -> str:
        path = tmp_path / "config.toml"
        path.write_text(CONFIG.replace("{port}", str(port)), encoding="utf-8")
        return str(path)
    return make


def test_lists_key_presence_never_the_value(clean_env, capsys, config_file):
    clean_env.setenv("OPENAI_API_KEY", SECRET)
    code, out, err = run_cli(capsys, "--config", config_file())
    assert code == 0 and SECRET not in out + err
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "OPENAI_API_KEY (present)" in lines["gpt4o"] and "https://api.openai.com/v1" in lines["gpt4o"]
    assert "ANTHROPIC_API_KEY (missing)" in lines["claude"]
    assert "MY_LOCAL_KEY (missing)" in lines["local"]
    assert "demo" in lines["quick"] and "concise" in lines["quick"]
    assert f"config: {config_file()}" in out


def test_json_output(clean_env, capsys, config_file):
    clean_env.setenv("OPENAI_API_KEY", SECRET)
    code, out, err = run_cli(capsys, "--config", config_file(), "--json")
    assert code == 0 and SECRET not in out + err
    data = json.loads(out)
    rows = {r["alias"]: r for r in data["models"]}
    assert rows["gpt4o"]["key"] == "present" and rows["gpt4o"]["api_key_env"] == "OPENAI_API_KEY"
    assert rows["claude"]["key"] == "missing"
    assert rows["quick"]["demo"] is True and rows["quick"]["key"] is None
    assert data["autodetected"] is False and data["demo_only"] is False


def test_check_demo_models_ok(clean_env, capsys):
    code, out, err = run_cli(capsys, "--check", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["demo_only"] and len(data["models"]) >= 3
    for row in data["models"]:
        if not row["configured"]:                   # the offline judge: listed, never checked
            assert row["alias"] == "demo/judge" and row["check"] is None
            continue
        assert row["check"]["ok"] is True and row["check"]["ttft_ms"] is not None and row["check"]["error"] is None


def test_every_alias_dash_m_accepts_is_listed_the_demo_judge_too(clean_env, capsys, config_file):
    """`lineup models` left out `demo/judge` though `-m demo/judge` works; with a
    config of real models, the demo aliases `-m` still accepts are listed apart."""
    code, out, err = run_cli(capsys)
    assert code == 0 and "demo/judge" in out.split("Also offline, with -m")[1]
    code, out, err = run_cli(capsys, "--config", config_file(), "--json")
    rows = {r["alias"]: r for r in json.loads(out)["models"]}
    assert rows["quick"]["configured"] and rows["gpt4o"]["configured"]
    assert {a for a, r in rows.items() if not r["configured"]} == {
        "demo/concise", "demo/thorough", "demo/quirky", "demo/thinker", "demo/judge"}
    from core.answering.config import load_config, resolve_models

    config = load_config(config_file())
    assert [m.alias for m in resolve_models(config, [a for a, r in rows.items() if not r["configured"]])] \
        == [a for a, r in rows.items() if not r["configured"]]        # each of them works with -m


class _Server(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint: 401 that echoes the key it was sent
    (a hostile server), or a tiny streamed answer."""

    mode = "401"
    seen_auth: list[str] = []

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        auth = self.headers.get("authorization", "")
        type(self).seen_auth.append(auth)
        if self.mode == "401":
            body = json.dumps({"error": {"message": f"Incorrect API key provided: {auth}", "type": "invalid_request_error",
                                         "code": "invalid_api_key"}}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
        else:
            chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
                      {"choices": [{"index": 0, "delta": {"content": "ok"}}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                      {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}]
            body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    handler = type("Handler", (_Server,), {"seen_auth": []})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield srv.server_address[1], handler
    finally:
        srv.shutdown()
        srv.server_close()


def test_check_reports_errors_without_leaking_key(clean_env, capsys, config_file, server):
    port, handler = server
    clean_env.setenv("MY_LOCAL_KEY", SECRET)
    clean_env.setenv("OPENAI_API_KEY", SECRET + "x")
    # gpt4o points at the real API host; keep it offline by checking only what is local
    path = config_file(port)
    text = open(path, encoding="utf-8").read().replace('model = "gpt-4o"', 'model = "gpt-4o"\nbase_url = '
                                                       f'"http://127.0.0.1:{_closed_port()}/v1"\nmax_retries = 0')
    open(path, "w", encoding="utf-8").write(text)
    code, out, err = run_cli(capsys, "--config", path, "--check", "--json")
    assert code == 1
    assert SECRET not in out + err
    assert handler.seen_auth == [f"Bearer {SECRET}"]          # the request really went out with the key
    rows = {r["alias"]: r for r in json.loads(out)["models"]}
    assert rows["local"]["check"]["ok"] is False and rows["local"]["check"]["error_kind"] == "auth"
    assert rows["claude"]["check"] == {
        "ok": False, "ttft_ms": None, "total_ms": None, "streamed": None, "error_kind": "config",
        "error": "ANTHROPIC_API_KEY is not set", "problem": "auth",
        "hint": "a key or secret header variable is not set (export it), or a cloud's credentials are not set up "
                "(see the error)",
        "route": {"method": "POST", "url": "https://api.anthropic.com/v1/messages",
                  "auth": "x-api-key header (key from ANTHROPIC_API_KEY)", "headers": []}}
    assert rows["gpt4o"]["check"]["error_kind"] == "connection"
    assert rows["quick"]["check"]["ok"] is True

    code, out, err = run_cli(capsys, "--config", path, "--check")      # the table form too
    assert code == 1 and SECRET not in out + err
    assert "FAILED auth" in out and "FAILED config: ANTHROPIC_API_KEY is not set" in out and "ok  ttft" in out


def test_check_ok_against_streaming_server(clean_env, capsys, tmp_path, server):
    port, handler = server
    handler.mode = "ok"
    path = tmp_path / "one.toml"
    path.write_text(f'[models.local]\nprovider = "openai"\nmodel = "llama"\nbase_url = "http://127.0.0.1:{port}/v1"\n',
                    encoding="utf-8")
    code, out, err = run_cli(capsys, "--config", str(path), "--check", "--json")
    assert code == 0, out + err
    check = json.loads(out)["models"][0]["check"]
    assert check["ok"] is True and check["ttft_ms"] is not None
    assert handler.seen_auth == [""]                         # a local server without api_key_env: no header


def test_bad_config_exit_2_without_echo(clean_env, capsys, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(f'[models.a]\nprovider = "openai"\nmodel = "gpt-4o"\napi_key_env = "{SECRET}"\n', encoding="utf-8")
    code, out, err = run_cli(capsys, "--config", str(path))
    assert code == 2
    assert str(path) in err and "models.a.api_key_env" in err and SECRET not in out + err


def test_missing_explicit_config_exit_2(clean_env, capsys, tmp_path):
    code, out, err = run_cli(capsys, "--config", str(tmp_path / "nope.toml"))
    assert code == 2 and "config file not found" in err


def test_scrub_and_escape_sequences(clean_env, capsys, tmp_path):
    from lineup.commands.models_cmd import _scrub
    from providers.model_config import ModelConfig

    clean_env.setenv("MY_LOCAL_KEY", SECRET)
    model = ModelConfig(alias="a", provider="openai", model="m", api_key_env="MY_LOCAL_KEY")
    assert _scrub(f"server said: bad key {SECRET}!", model) == "server said: bad key [redacted]!"   # providers.secrets

    path = tmp_path / "esc.toml"
    path.write_text('[models.a]\nprovider = "demo"\nmodel = "concise"\n'
                    '[models.b]\nprovider = "openai"\nmodel = "evil\\u001b[2J\\u001b]0;title\\u0007"\n'
                    'base_url = "http://127.0.0.1:9/v1"\n', encoding="utf-8")
    code, out, err = run_cli(capsys, "--config", str(path))
    assert code == 0 and "\x1b" not in out and "\x07" not in out and "evil" in out


# --- which route and auth a check used, and which part was wrong --------------------


GATEWAY_KEY = "gw-Key-0123456789abcdefABCDEF99"


def _gateway_config(tmp_path, base_url: str, extra: str = "") -> str:
    path = tmp_path / "gw.toml"
    path.write_text(f'[models.gw]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = "{base_url}"\n'
                    'api_key_env = "GW_KEY"\nauth = "api-key"\nmax_retries = 0\n'
                    'query = { "api-version" = "2024-10-21" }\n'
                    'headers = { "X-Org" = "research", "X-Gateway-Secret" = { env = "GW_SECRET" } }\n' + extra,
                    encoding="utf-8")
    return str(path)


@pytest.fixture
def loopback():
    from tests.server import TestServer

    with TestServer() as srv:
        yield srv


@pytest.mark.parametrize(("reply", "problem", "kind"), [
    ("ok", None, None),
    ("404", "url", "not_found"),
    ("401", "auth", "auth"),
    ("plain", "format", "bad_response"),
    ("refused", "url", "connection"),
    ("429", "server", "rate_limited"),
])
def test_check_says_route_auth_and_what_was_wrong(clean_env, capsys, tmp_path, loopback, reply, problem, kind):
    from tests.server import RawReply, Reply

    clean_env.setenv("GW_KEY", GATEWAY_KEY)
    clean_env.setenv("GW_SECRET", SECRET)
    loopback.script({"ok": Reply(text="ok"), "404": Reply(status=404, message="DeploymentNotFound"),
                     "401": Reply(status=401, message=f"bad key {GATEWAY_KEY}"),
                     "plain": RawReply(200, {"content-type": "text/plain"}, b"Welcome to the proxy"),
                     "refused": Reply(), "429": Reply(status=429, message="slow down")}[reply])
    base = (f"http://127.0.0.1:{_closed_port()}/v1" if reply == "refused" else loopback.url + "/v1")
    path = _gateway_config(tmp_path, base)
    code, out, err = run_cli(capsys, "--config", path, "--check", "--json")
    assert SECRET not in out + err and GATEWAY_KEY not in out + err
    check = json.loads(out)["models"][0]["check"]
    assert code == (0 if reply == "ok" else 1)
    assert check["ok"] is (reply == "ok") and check["problem"] == problem and check["error_kind"] == kind
    assert check["route"] == {"method": "POST", "url": f"{base}/chat/completions?api-version=2024-10-21",
                              "auth": "api-key header (key from GW_KEY)",
                              "headers": ["X-Org", "X-Gateway-Secret (from GW_SECRET)"]}
    if reply != "refused":
        sent = loopback.requests[0].headers
        assert sent["api-key"] == GATEWAY_KEY and sent["x-gateway-secret"] == SECRET and "authorization" not in sent

    code, out, err = run_cli(capsys, "--config", path, "--check")          # the table form
    assert SECRET not in out + err and GATEWAY_KEY not in out + err
    assert f"POST {base}/chat/completions?api-version=2024-10-21" in out
    assert "auth: api-key header (key from GW_KEY); headers: X-Org, X-Gateway-Secret (from GW_SECRET)" in out
    if problem:
        assert f"wrong: {problem}: " in out
    else:
        assert "wrong:" not in out


def test_check_of_a_whole_body_gateway_says_not_streamed(clean_env, capsys, tmp_path, loopback):
    from tests.server import Reply

    clean_env.setenv("GW_KEY", GATEWAY_KEY)
    clean_env.setenv("GW_SECRET", SECRET)
    loopback.script(Reply(text="ok", whole=True))
    path = _gateway_config(tmp_path, loopback.url + "/v1")
    code, out, err = run_cli(capsys, "--config", path, "--check", "--json")
    check = json.loads(out)["models"][0]["check"]
    assert code == 0 and check["ok"] and check["streamed"] is False and check["ttft_ms"] is None
    assert check["total_ms"] is not None
    code, out, err = run_cli(capsys, "--config", path, "--check")
    assert "ok  not streamed" in out


def test_listing_names_secret_header_variables_never_values(clean_env, capsys, tmp_path):
    clean_env.setenv("GW_KEY", GATEWAY_KEY)
    path = _gateway_config(tmp_path, "https://gw.example/v1")
    code, out, err = run_cli(capsys, "--config", path)
    assert code == 0 and GATEWAY_KEY not in out
    assert "GW_KEY (present), GW_SECRET (missing, header X-Gateway-Secret)" in out
    code, out, err = run_cli(capsys, "--config", path, "--json")
    row = json.loads(out)["models"][0]
    assert row["headers"] == [{"name": "X-Org", "env": None, "set": None},
                              {"name": "X-Gateway-Secret", "env": "GW_SECRET", "set": "missing"}]
    assert "research" not in out                     # literal header values are not listed either


def test_at_80_columns_the_hints_wrap_between_words(tmp_path):
    """On an 80-column terminal the long hints are wrapped by lineup at
    spaces, not cut by the terminal inside a word ("export OPE" / "NAI_API_KEY");
    piped, they stay one line each."""
    from tests.cli_support import on_terminal, piped

    shown = on_terminal(["models"], 24, 80)
    lines = shown.rstrip("\n").split("\n")
    assert all(len(ln) <= 80 or len(ln.split()) == 1 for ln in lines), shown   # a long path: alone, whole
    words = set(piped(["models"]).split())
    assert words <= set(shown.split()), sorted(words - set(shown.split()))       # no word cut in two
    assert all(name in shown for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"))
    assert any(len(ln) > 80 for ln in piped(["models"]).split("\n"))
