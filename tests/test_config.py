"""Config loading: valid files, every kind of bad file (named file, key path,
no secret echoed), autodetection from the environment and from a loopback
Ollama, and the demo fallback."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from core.answering import config as cfgmod
from core.answering.config import (
    DEFAULT_TAGS,
    ConfigError,
    autodetect,
    load_config,
    looks_like_key,
    missing_key,
    redact_url,
    resolve_models,
)
from core.ground.errors import UsageError
from providers.events import SamplingParams

NO_KEYS: dict[str, str] = {}


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_for(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, env=NO_KEYS)
    assert str(path) in str(info.value)
    return info.value


VALID = """
tags = ["too_formal", "wrong_language", "truncated"]

[defaults]
temperature = 0.7
max_tokens = 1024

[models.gpt4o]
provider = "openai"
model = "gpt-4o"
params = { temperature = 0.2, stop = ["END"] }
price = { input_per_mtok = 2.5, output_per_mtok = 10.0 }

[models.local]
provider = "openai"
model = "llama-3.1-8b"
base_url = "http://127.0.0.1:8080/v1"

[models.claude]
provider = "anthropic"
model = "claude-sonnet-4-5"
read_timeout = 120

[models."qwen3:4b"]
provider = "ollama"
model = "qwen3:4b"

[models.proxy]
provider = "openai"
model = "gpt-4o"
base_url = "https://proxy.example.com/v1"
api_key_env = "MY_PROXY_KEY"

[models.nokey]
provider = "gemini"
model = "gemini-2.5-flash"
api_key_env = ""

[models.toy]
provider = "demo"
model = "thorough"
extra_body = { speed = 5 }
"""


def test_valid_file(tmp_path):
    config = load_config(write(tmp_path, VALID), env=NO_KEYS)
    assert not config.autodetected
    assert config.source == str(tmp_path / "config.toml")
    assert list(config.models) == ["gpt4o", "local", "claude", "qwen3:4b", "proxy", "nokey", "toy"]
    assert config.defaults == SamplingParams(temperature=0.7, max_tokens=1024)
    # custom tags after the default taxonomy; a repeated default tag is not added twice
    assert config.tags == ("too_formal", "wrong_language")
    assert config.all_tags == DEFAULT_TAGS + ("too_formal", "wrong_language")

    gpt = config.models["gpt4o"]
    assert gpt.alias == "gpt4o" and gpt.provider == "openai" and gpt.model == "gpt-4o"
    assert gpt.base_url == "https://api.openai.com/v1"       # provider default filled in
    assert gpt.api_key_env == "OPENAI_API_KEY"                # default key for the vendor's own API
    assert gpt.params.stop == ("END",)
    assert gpt.price.cost(1_000_000, 100_000) == pytest.approx(3.5)
    assert config.params_for(gpt) == SamplingParams(temperature=0.2, max_tokens=1024, stop=("END",))
    assert config.params_for(gpt, SamplingParams(temperature=1.0, seed=7)).temperature == 1.0

    local = config.models["local"]
    assert local.base_url == "http://127.0.0.1:8080/v1" and local.api_key_env is None   # local server: no key
    assert config.models["claude"].api_key_env == "ANTHROPIC_API_KEY"
    assert config.models["claude"].read_timeout == 120
    assert config.models["qwen3:4b"].api_key_env is None
    assert config.models["qwen3:4b"].base_url.startswith("http://")
    assert config.models["proxy"].api_key_env == "MY_PROXY_KEY"
    assert config.models["nokey"].api_key_env is None
    toy = config.models["toy"]
    assert toy.is_demo and toy.base_url is None and toy.extra_body == {"speed": 5}


def test_config_error_is_a_usage_error(tmp_path):
    err = error_for(tmp_path, "[models.x]\nprovider = 1\n")
    assert isinstance(err, UsageError)      # the CLI turns it into exit code 2


def test_toml_syntax_error_names_line_and_column(tmp_path):
    err = error_for(tmp_path, '[defaults]\ntemperature = 0.5\n\n[models.a]\nprovider = "openai\nmodel = "x"\n')
    assert "line 5" in str(err) and "column" in str(err) and "TOML syntax error" in str(err)


def test_wrong_type_names_key_path(tmp_path):
    err = error_for(tmp_path, '[models.gpt4o]\nprovider = "openai"\nmodel = "gpt-4o"\n'
                              'params = { temperature = "hot" }\n')
    assert "models.gpt4o.params.temperature:" in str(err)
    assert "valid number" in str(err) and "got a string" in str(err)
    assert "hot" not in str(err)            # values are never repeated


def test_out_of_range_and_unknown_keys(tmp_path):
    err = error_for(tmp_path, '[defaults]\ntemperature = 3.5\nmax_tokens = 0\n'
                              '[models.a]\nprovider = "openai"\nmodel = "m"\nconcurrency = 0\ncolour = "red"\n'
                              '[modles.b]\n')
    text = str(err)
    assert "defaults.temperature: must be between 0 and 2" in text
    assert "defaults.max_tokens: must be at least 1" in text
    assert "models.a.concurrency:" in text and "greater than or equal to 1" in text
    assert "models.a.colour: unknown key" in text
    assert "modles: unknown key" in text
    assert len(err.problems) == 5           # every problem in one go


def test_quoted_alias_in_key_path(tmp_path):
    err = error_for(tmp_path, '[models."gpt-4o.mini"]\nprovider = "openai"\nmodel = ["x"]\n')
    assert 'models."gpt-4o.mini".model: input should be a valid string (got an array)' in str(err)


def test_missing_required_keys(tmp_path):
    err = error_for(tmp_path, "[models.a]\n")
    assert "models.a.provider: required key is missing" in str(err)
    assert "models.a.model: required key is missing" in str(err)


def test_unknown_provider_named_clearly(tmp_path):
    err = error_for(tmp_path, '[models.a]\nprovider = "opnai"\nmodel = "gpt-4o"\n')
    assert "models.a.provider: unknown provider 'opnai'" in str(err)
    assert "openai, openai-responses, anthropic, ollama, gemini, vertex, vertex-anthropic, bedrock, demo" in str(err)


def test_unknown_demo_style(tmp_path):
    err = error_for(tmp_path, '[models.a]\nprovider = "demo"\nmodel = "genius"\n')
    assert "models.a.model: unknown demo style 'genius'" in str(err) and "concise" in str(err)


# Fake keys, assembled at run time so that no key-shaped literal sits in the source
# (secret scanners would flag it, and rightly ask whether it is real).
@pytest.mark.parametrize("secret", [
    "sk-" + "proj-4f9QxZ2bL7mN8vR1tY6uW3eK0aS5dF",
    "sk-" + "ant-api03-Zx8Yw7Vu6Ts5Rq4Po3",
    "AIza" + "SyD4nB7xQ2mK9pL0vR6tW1eY8uI3oA5sF",
    "Qm9vbGVhbkZhbHNlVHJ1ZU5vbmUxMjM0NTY3",     # long, mixed case and digits
    "my key 12345",                             # not a variable name at all
])
def test_literal_key_in_api_key_env_is_rejected_without_echo(tmp_path, secret):
    err = error_for(tmp_path, f'[models.a]\nprovider = "openai"\nmodel = "gpt-4o"\napi_key_env = "{secret}"\n')
    assert "models.a.api_key_env:" in str(err) and "looks like an API key" in str(err)
    assert secret not in str(err)
    assert secret[:8] not in str(err)


def test_key_under_an_unknown_name_is_not_echoed(tmp_path):
    secret = "sk-proj-4f9QxZ2bL7mN8vR1tY6uW3eK0aS5dF"
    err = error_for(tmp_path, f'[models.a]\nprovider = "openai"\nmodel = "gpt-4o"\napi_key = "{secret}"\n')
    assert "models.a.api_key: unknown key" in str(err) and "api_key_env" in str(err)
    assert secret not in str(err)


@pytest.mark.parametrize("url,secret,what", [
    ("https://bob:hunter2secret@api.example.com/v1", "hunter2secret", "user:password@"),
    ("https://generativelanguage.googleapis.com/v1beta?key=AIzaSyTopSecretValue99", "AIzaSyTopSecretValue99",
     "?key="),
    ("https://api.example.com/v1?x=1&api_key=zzSECRETzz", "zzSECRETzz", "?api_key="),
])
def test_key_in_base_url_is_rejected_and_redacted(tmp_path, url, secret, what):
    err = error_for(tmp_path, f'[models.a]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = "{url}"\n')
    assert "models.a.base_url: contains credentials" in str(err) and what in str(err)
    assert secret not in str(err) and "***" in str(err)


def test_bad_base_url(tmp_path):
    err = error_for(tmp_path, '[models.a]\nprovider = "openai"\nmodel = "m"\nbase_url = "localhost:8080"\n')
    assert "models.a.base_url: must be an http:// or https:// URL" in str(err)


def test_bad_tags(tmp_path):
    err = error_for(tmp_path, 'tags = ["ok_tag", "has space", 3, "ok_tag"]\n')
    assert "tags[1]:" in str(err) and "tags[2]:" in str(err) and "tags[3]: duplicate tag" in str(err)


def test_not_utf8_and_missing_explicit_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_bytes(b'[models.a]\nmodel = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path, env=NO_KEYS)
    with pytest.raises(ConfigError, match="config file not found") as info:
        load_config(tmp_path / "nope.toml", env=NO_KEYS)
    assert "nope.toml" in str(info.value)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(None, env={"LINEUP_CONFIG": str(tmp_path / "also-missing.toml")})


def test_path_from_lineup_config_env(tmp_path):
    path = write(tmp_path, VALID, "elsewhere.toml")
    config = load_config(None, env={"LINEUP_CONFIG": str(path)})
    assert config.source == str(path) and "gpt4o" in config.models


def test_default_path_is_user_config_dir(tmp_path, monkeypatch):
    assert cfgmod.default_config_path().name == "config.toml"
    assert cfgmod.default_config_path().parent.name == "lineup"
    monkeypatch.setattr(cfgmod, "default_config_path", lambda: tmp_path / "config.toml")
    assert load_config(None, env=NO_KEYS).autodetected          # absent: autodetect, no error
    write(tmp_path, VALID)
    assert load_config(None, env=NO_KEYS).source == str(tmp_path / "config.toml")


# --------------------------------------------------------------------------- autodetect


def test_autodetect_from_env_keys():
    env = {"OPENAI_API_KEY": "sk-a", "ANTHROPIC_API_KEY": "sk-ant-b", "GOOGLE_API_KEY": "AIza-c",
           "OPENROUTER_API_KEY": "sk-or-d", "UNRELATED": "x"}
    config = autodetect(env)
    assert config.autodetected and not config.demo_only
    by_provider = {m.alias: (m.provider, m.api_key_env) for m in config.models.values()}
    assert by_provider == {
        "gpt-4o-mini": ("openai", "OPENAI_API_KEY"),
        "claude-sonnet": ("anthropic", "ANTHROPIC_API_KEY"),
        "gemini-flash": ("gemini", "GOOGLE_API_KEY"),
        "openrouter/gpt-4o-mini": ("openai", "OPENROUTER_API_KEY"),
    }
    assert config.models["openrouter/gpt-4o-mini"].base_url == "https://openrouter.ai/api/v1"
    assert config.models["gpt-4o-mini"].base_url == "https://api.openai.com/v1"
    dumped = json.dumps([m.model_dump() for m in config.models.values()])
    assert "sk-a" not in dumped and "sk-ant-b" not in dumped     # names only, never values


def test_gemini_key_preferred_and_blank_keys_ignored():
    config = autodetect({"GEMINI_API_KEY": "g", "GOOGLE_API_KEY": "h", "OPENAI_API_KEY": "  "})
    assert list(config.models) == ["gemini-flash"]
    assert config.models["gemini-flash"].api_key_env == "GEMINI_API_KEY"


def test_demo_fallback_when_nothing_found(tmp_path, monkeypatch):
    monkeypatch.setattr(cfgmod, "default_config_path", lambda: tmp_path / "absent.toml")
    config = load_config(None, env=NO_KEYS)
    assert config.autodetected and config.demo_only
    assert len(config.models) >= 3
    assert all(alias.startswith("demo/") and m.provider == "demo" for alias, m in config.models.items())


def test_file_without_models_keeps_defaults_and_autodetects(tmp_path):
    path = write(tmp_path, 'tags = ["custom_one"]\n[defaults]\ntemperature = 0.1\n')
    config = load_config(path, env={"ANTHROPIC_API_KEY": "x"})
    assert config.autodetected and list(config.models) == ["claude-sonnet"]
    assert config.defaults.temperature == 0.1 and config.tags == ("custom_one",)


class _FakeOllama(BaseHTTPRequestHandler):
    body = b""
    requests: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's naming)
        type(self).requests.append(self.path)
        status = 200 if self.path == "/api/tags" else 404
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_ollama():
    handler = type("Handler", (_FakeOllama,), {"requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server, handler
    finally:
        server.shutdown()
        server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ollama_probe_lists_models(fake_ollama):
    server, handler = fake_ollama
    handler.body = json.dumps({"models": [{"name": "llama3.2:latest", "model": "llama3.2:latest"},
                                          {"name": "qwen3:4b"}, {"name": "\x1b[31mevil"}]}).encode()
    port = server.server_address[1]
    env = {"OLLAMA_HOST": f"127.0.0.1:{port}", "OPENAI_API_KEY": "k"}

    not_asked = autodetect(env)
    assert handler.requests == [] and list(not_asked.models) == ["gpt-4o-mini"]

    config = autodetect(env, probe_ollama=True)
    assert handler.requests == ["/api/tags"]
    assert list(config.models) == ["gpt-4o-mini", "ollama/llama3.2", "ollama/qwen3:4b"]   # escape-laden name dropped
    llama = config.models["ollama/llama3.2"]
    assert llama.provider == "ollama" and llama.model == "llama3.2:latest"
    assert llama.base_url == f"http://127.0.0.1:{port}" and llama.api_key_env is None


def test_ollama_probe_via_load_config_and_bad_answers(fake_ollama, tmp_path, monkeypatch):
    monkeypatch.setattr(cfgmod, "default_config_path", lambda: tmp_path / "absent.toml")
    server, handler = fake_ollama
    env = {"OLLAMA_HOST": f"http://127.0.0.1:{server.server_address[1]}/"}
    handler.body = json.dumps({"models": [{"name": "phi4"}]}).encode()
    assert list(load_config(None, env=env, probe_ollama=True).models) == ["ollama/phi4"]
    handler.body = b"<html>not ollama</html>"
    assert load_config(None, env=env, probe_ollama=True).demo_only


def test_unreachable_ollama_falls_back_to_demo():
    config = autodetect({"OLLAMA_HOST": f"127.0.0.1:{_closed_port()}"}, probe_ollama=True)
    assert config.demo_only


def test_ollama_host_with_credentials_is_redacted():
    config = autodetect({"OLLAMA_HOST": f"http://me:pa55word@127.0.0.1:{_closed_port()}"}, probe_ollama=True)
    assert config.warnings and "pa55word" not in " ".join(config.warnings)


# --------------------------------------------------------------------------- use


def test_resolve_models(tmp_path):
    config = load_config(write(tmp_path, VALID), env=NO_KEYS)
    assert [m.alias for m in resolve_models(config, ["claude", "gpt4o"])] == ["claude", "gpt4o"]
    assert [m.alias for m in resolve_models(config, [])] == list(config.models)
    assert resolve_models(config, ["demo/concise"])[0].is_demo          # demo aliases always resolve
    with pytest.raises(ConfigError) as info:
        resolve_models(config, ["gpt4"])
    text = str(info.value)
    assert "unknown model alias 'gpt4'" in text and "Did you mean 'gpt4o'" in text
    for alias in ("gpt4o", "local", "claude", "qwen3:4b", "demo/thorough"):
        assert alias in text
    with pytest.raises(ConfigError, match="given twice"):
        resolve_models(config, ["claude", "claude"])


def test_missing_key(tmp_path):
    config = load_config(write(tmp_path, VALID), env=NO_KEYS)
    assert missing_key(config.models["gpt4o"], env={}) == "OPENAI_API_KEY"
    assert missing_key(config.models["gpt4o"], env={"OPENAI_API_KEY": ""}) == "OPENAI_API_KEY"
    assert missing_key(config.models["gpt4o"], env={"OPENAI_API_KEY": "k"}) is None
    assert missing_key(config.models["local"], env={}) is None


def test_secret_helpers():
    for name in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY_2", "my_key", "GROQ_API_KEY", "OpenRouterKey"):
        assert not looks_like_key(name), name
    for key in ("sk-abc", "gsk_abcdef", "xai-123", "AKIAIOSFODNN7EXAMPLE", "a" * 45, "has-dash"):
        assert looks_like_key(key), key
    assert redact_url("https://u:p@h.com/v1?key=s3cr3t&alt=sse") == "https://***@h.com/v1?key=***&alt=sse"
    assert redact_url("https://h.com/v1") == "https://h.com/v1"


def test_answer_deadline_and_size_limit_per_model():
    """Every answer is bounded: generous defaults,
    settable per model, bad values named by key."""
    cfg = cfgmod.parse_config({"models": {
        "a": {"provider": "openai", "model": "x", "base_url": "http://localhost:8080/v1"},
        "b": {"provider": "openai", "model": "x", "base_url": "http://localhost:8080/v1", "answer_deadline": 30,
              "max_answer_bytes": 65536}}})
    assert (cfg.models["a"].answer_deadline, cfg.models["a"].max_answer_bytes) == (600.0, 8 * 1024 * 1024)
    assert (cfg.models["b"].answer_deadline, cfg.models["b"].max_answer_bytes) == (30.0, 65536)
    with pytest.raises(cfgmod.ConfigError) as err:
        cfgmod.parse_config({"models": {"c": {"provider": "openai", "model": "x", "answer_deadline": 0,
                                              "max_answer_bytes": 10}}})
    text = str(err.value)
    assert "models.c.answer_deadline" in text and "models.c.max_answer_bytes" in text
