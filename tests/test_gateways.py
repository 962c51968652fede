"""Gateways and enterprise endpoints, over real HTTP on loopback:
whole-body replies to stream requests in every protocol (recorded, marked
not streamed), replies that are neither (reported with what they were),
per-model auth, headers and query parameters (secrets from the environment,
never stored, scrubbed), and Azure OpenAI's URL, query and header
conventions through the OpenAI-compatible client."""

from __future__ import annotations

import json
import re
import tomllib

import anyio
import pytest

from core.answering.config import ConfigError, missing_key, parse_config
from core.answering.sessions import ChatSession
from core.ground.text import one_line
from providers.events import ErrorKind
from providers.http import RetryPolicy
from store import AsyncStore, Store
from tests.server import RawReply, Reply, TestServer, collect, model_config

FAST = RetryPolicy(base=0.001, cap=1.0)
PROTOCOLS = [("openai", {}), ("anthropic", {}), ("ollama", {}), ("gemini", {"stream_form": "sse"}),
             ("gemini", {"stream_form": "json"})]
IDS = ["openai", "anthropic", "ollama", "gemini-sse", "gemini-json"]
params = pytest.mark.parametrize(("proto", "opts"), PROTOCOLS, ids=IDS)

HEADER_SECRET = "hdr-Secret-7f3a9c2e4b1d8a6f0e5c"
KEY = "az-0123456789abcdef0123456789abcd"


@pytest.fixture(scope="module")
def srv():
    with TestServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(srv):
    srv.reset()
    yield


def run(srv, proto, opts, *replies, request=None, **cfg_fields):
    srv.script(*replies)
    cfg_fields.setdefault("max_retries", 0)
    return collect(model_config(srv, proto, **cfg_fields), request, retry=FAST, **opts)


def terminal(events):
    assert sum(e.type in ("finish", "error") for e in events) == 1
    assert events[-1].type in ("finish", "error")
    return events[-1]


# --- 1. whole-body replies --------------------------------------------------------------------


# Ollama tells a whole body by its content type only (NDJSON starts with "{" too).
WHOLE_CASES = [(proto, opts, ctype) for (proto, opts) in PROTOCOLS
               for ctype in ("application/json", "application/json; charset=utf-8", "text/event-stream")
               if proto != "ollama" or "json" in ctype]


@pytest.mark.parametrize(("proto", "opts", "ctype"), WHOLE_CASES,
                         ids=[f"{p}-{o.get('stream_form', '')}-{c}" for p, o, c in WHOLE_CASES])
def test_a_whole_body_reply_to_a_stream_request_is_recorded_as_not_streamed(srv, proto, opts, ctype):
    result, events = run(srv, proto, opts, Reply(text="The whole answer.", reasoning="Thought first.",
                                                 usage=(12, 5, None), whole=True, whole_content_type=ctype))
    end = terminal(events)
    assert end.type == "finish" and end.streamed is False, end
    assert result.text == "The whole answer." and result.reasoning == "Thought first."
    assert (result.input_tokens, result.output_tokens) == (12, 5)
    assert result.finish_reason in ("stop", "end_turn", "STOP")
    assert result.streamed is False
    assert result.ttft_ms is None and result.tokens_per_s() is None     # no first token to time
    assert result.duration_ms is not None and result.duration_ms > 0    # the duration is kept
    assert srv.requests[0].json.get("stream", True) is True             # it was asked to stream
    assert len(srv.requests) == 1


@params
def test_a_streamed_reply_is_still_marked_streamed(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="streamed", chunk_chars=3))
    assert terminal(events).streamed is True and result.streamed is True and result.ttft_ms is not None


def test_litellm_anthropic_route_answering_a_stream_request_with_one_message(srv):
    """What the LiteLLM proxy's `/v1/messages` (mock-response mode) sends to
    `stream: true`: one JSON message, pretty-printed, cut anywhere."""
    body = json.dumps({
        "id": "chatcmpl-3c1e", "type": "message", "role": "assistant", "model": "claude-3-5-sonnet",
        "stop_sequence": None, "usage": {"input_tokens": 14, "output_tokens": 6},
        "content": [{"type": "text", "text": "This is a mock request"}], "stop_reason": "end_turn"},
        indent=2).encode()
    result, events = run(srv, "anthropic", {}, RawReply(200, {"content-type": "application/json"}, body,
                                                        cuts=[1, 7, len(body) // 2]))
    assert terminal(events).type == "finish"
    assert (result.text, result.finish_reason, result.input_tokens, result.output_tokens, result.streamed) == (
        "This is a mock request", "end_turn", 14, 6, False)


def test_whole_anthropic_message_with_a_tool_call(srv):
    body = json.dumps({"type": "message", "role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "weather"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}}).encode()
    result, _ = run(srv, "anthropic", {}, RawReply(200, {"content-type": "application/json"}, body))
    assert result.text == "Let me look." and result.finish_reason == "tool_use"
    assert [(t.id, t.name, t.arguments) for t in result.tool_calls] == [("toolu_1", "lookup", {"q": "weather"})]


@pytest.mark.parametrize(("proto", "body", "kind"), [
    ("anthropic", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "overloaded"),
    ("openai", {"error": {"message": "Rate limit reached", "code": 429}}, "rate_limited"),
    ("gemini", {"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}, "overloaded"),
    ("ollama", {"error": "model not loaded"}, "server"),
])
def test_a_whole_error_body_under_200_is_that_error(srv, proto, body, kind):
    result, events = run(srv, proto, {}, RawReply(200, {"content-type": "application/json"}, json.dumps(body).encode()))
    err = terminal(events)
    assert err.type == "error" and err.kind == kind, err


@params
def test_a_whole_body_is_held_to_the_answer_size_limit(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="x" * 5000, whole=True), max_answer_bytes=1024)
    err = terminal(events)
    assert err.kind == ErrorKind.truncated and "size limit" in err.message and err.streamed is False
    assert result.text == "x" * 1024 and result.streamed is False and result.ttft_ms is None


# --- 1. neither a stream nor a body: said what it was ------------------------------------------


@params
def test_a_reply_that_is_neither_says_status_content_type_and_first_bytes(srv, proto, opts):
    body = b"Hello from a captive portal \x1b[31m\x07 \xe2\x80\xae gotcha\n" + b"x" * 500
    result, events = run(srv, proto, opts, RawReply(200, {"content-type": "text/plain; charset=utf-8"}, body),
                         max_retries=2)
    err = terminal(events)
    assert err.kind == ErrorKind.bad_response and err.status == 200
    assert "HTTP 200" in err.message and "'text/plain; charset=utf-8'" in err.message
    assert "Hello from a captive portal" in err.message
    # quoted with escapes: nothing in it acts on a terminal, raw or shown through core.ground.text
    assert "\x1b" not in err.message and "\x07" not in err.message and "\u202e" not in err.message
    assert "\\x1b[31m" in err.message
    assert one_line(err.message) == err.message
    assert len(err.message) < 400 and "x" * 100 not in err.message     # the first bytes, not the body
    assert len(srv.requests) == 1                                      # not retried: the server said this


@params
def test_json_in_the_wrong_shape_is_reported_as_such(srv, proto, opts):
    result, events = run(srv, proto, opts, RawReply(200, {"content-type": "application/json"},
                                                    b'{"detail": "try the other route"}'))
    err = terminal(events)
    assert err.kind == ErrorKind.bad_response
    assert "JSON that is not a response of this protocol" in err.message and "try the other route" in err.message


@params
def test_an_empty_200_body_is_reported_as_empty(srv, proto, opts):
    result, events = run(srv, proto, opts, RawReply(200, {}, b""))
    err = terminal(events)
    assert err.kind == ErrorKind.bad_response and "the body is empty" in err.message
    assert "no content-type" in err.message


def test_a_whole_body_that_is_not_json_is_bad_response(srv):
    result, events = run(srv, "openai", {}, RawReply(200, {"content-type": "application/json"}, b'{"choices": [tr'))
    err = terminal(events)
    assert err.kind == ErrorKind.bad_response and "not JSON" in err.message


def test_a_whole_body_is_stored_not_streamed_and_the_true_error_text_is_kept(tmp_path):
    """Through a (non-blind) chat session into the store: the whole answer
    with its duration and no TTFT; a reply that is not the protocol stored
    with its true text (the vendor's protocol named, nothing replaced)."""
    with TestServer() as one, TestServer() as two:
        one.script(Reply(text="whole and sound", whole=True, usage=(4, 3, None)))
        two.script(RawReply(200, {"content-type": "text/plain"}, b"upstream says hello"))
        models = [model_config(one, "anthropic", alias="via-gateway", max_retries=0),
                  model_config(two, "anthropic", alias="broken", max_retries=0)]

        async def go():
            store = AsyncStore(Store.open(tmp_path / "s.db"))
            session = await ChatSession.create(store, models)
            await session.send("hi")
            await session.aclose()
            loaded = await store.load_session(session.id)
            await store.aclose()
            return loaded

        loaded = anyio.run(go)
    out = {o.contestant: o for o in loaded.outputs}
    good, bad = out["via-gateway"], out["broken"]
    assert (good.status, good.text, good.streamed, good.ttft_ms) == ("complete", "whole and sound", False, None)
    assert good.duration_ms is not None and good.output_tokens == 3
    assert bad.status == "error" and bad.error_kind == "bad_response"
    assert bad.error_message.startswith("the response is neither an Anthropic messages stream nor a whole "
                                        "Anthropic messages response")
    assert "upstream says hello" in bad.error_message and "[hidden]" not in bad.error_message
    reader = Store.open(tmp_path / "s.db", readonly=True)
    try:
        rows = {r["contestant"]: r["streamed"] for r in reader.query("SELECT contestant, streamed FROM output")}
    finally:
        reader.close()
    assert rows == {"via-gateway": 0, "broken": 1}


def test_pane_figures_say_not_streamed_instead_of_a_ttft():
    from store.records import OutputRecord
    from tui.figures import record_figures

    base = dict(session_id="s", turn_id="t", contestant="m", label="A", status="complete", output_tokens=5,
                duration_ms=800.0)
    assert record_figures(OutputRecord(**base, streamed=False)) == "not streamed · 5 tok"
    assert record_figures(OutputRecord(**base, ttft_ms=120.0)).startswith("ttft 120 ms")


def test_auth_words_in_an_error_are_kept_and_only_values_are_redacted():
    """The scrubber of auth-looking values no longer eats the words of a
    server's explanation (item 1: no over-scrubbing of stored error text)."""
    from providers.http import scrub

    openai_401 = ("You didn't provide an API key. You need to provide your API key in an Authorization header "
                  "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field.")
    assert scrub(openai_401, None) == openai_401.replace("Bearer YOUR_KEY", "Bearer [redacted]")
    for prose in ("x-api-key header is required", "Missing bearer token", "Use Bearer authentication",
                  "the api-key header is missing", "Authorization failed for this deployment"):
        assert scrub(prose, None) == prose
    leaked = ('Authorization: Bearer sk-other-0123456789; "x-api-key": "plainsecret"; api_key=abc123; '
              "header was Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc")
    out = scrub(leaked, None)
    for value in ("sk-other-0123456789", "plainsecret", "abc123", "eyJhbGciOiJIUzI1NiJ9"):
        assert value not in out, out
    assert out.count("[redacted]") == 4


# --- 2. auth, headers and query per model ------------------------------------------------------


@pytest.mark.parametrize(("auth", "header", "value"), [
    (None, "authorization", f"Bearer {KEY}"),
    ("bearer", "authorization", f"Bearer {KEY}"),
    ("api-key", "api-key", KEY),
    ("x-api-key", "x-api-key", KEY),
    ({"header": "X-Custom-Key", "scheme": "Token"}, "x-custom-key", f"Token {KEY}"),
])
def test_the_key_goes_where_auth_says(srv, monkeypatch, auth, header, value):
    monkeypatch.setenv("GW_KEY", KEY)
    fields = {"api_key_env": "GW_KEY"} | ({"auth": auth} if auth else {})
    result, _ = run(srv, "openai", {}, Reply(text="ok"), **fields)
    assert result.text == "ok"
    got = srv.requests[0].headers
    assert got[header] == value
    for other in {"authorization", "api-key", "x-api-key", "x-custom-key"} - {header}:
        assert other not in got


@pytest.mark.parametrize("proto", ["anthropic", "gemini", "ollama"])
def test_each_protocol_keeps_its_own_auth_by_default_and_takes_another(srv, monkeypatch, proto):
    monkeypatch.setenv("GW_KEY", KEY)
    own = {"anthropic": ("x-api-key", KEY), "gemini": ("x-goog-api-key", KEY),
           "ollama": ("authorization", f"Bearer {KEY}")}[proto]
    run(srv, proto, {}, Reply(text="ok"), api_key_env="GW_KEY")
    assert srv.requests[-1].headers[own[0]] == own[1]
    run(srv, proto, {}, Reply(text="ok"), api_key_env="GW_KEY", auth="bearer")
    assert srv.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    assert own[0] == "authorization" or own[0] not in srv.requests[-1].headers


def test_headers_literal_and_from_the_environment_never_leak(srv, monkeypatch):
    monkeypatch.setenv("GW_HEADER_SECRET", HEADER_SECRET)
    cfg = dict(headers={"X-Org": "research", "X-Gateway-Key": {"env": "GW_HEADER_SECRET"}})
    # the server echoes the secret in its error and in an answer
    result, events = run(srv, "openai", {}, Reply(status=400, message=f"bad gateway key {HEADER_SECRET}"), **cfg)
    got = srv.requests[0].headers
    assert got["x-org"] == "research" and got["x-gateway-key"] == HEADER_SECRET
    assert all(HEADER_SECRET not in repr(e) for e in events)
    assert "[redacted]" in terminal(events).message


def test_a_secret_header_echoed_in_an_answer_is_scrubbed_before_it_is_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("GW_HEADER_SECRET", HEADER_SECRET)
    with TestServer() as one:
        one.script(Reply(text=f"your header was {HEADER_SECRET} ok", chunk_chars=5))
        models = [model_config(one, "openai", alias="gw", max_retries=0,
                               headers={"X-Gateway-Key": {"env": "GW_HEADER_SECRET"}})]
        shown: list[str] = []

        async def go():
            store = AsyncStore(Store.open(tmp_path / "s.db"))
            session = await ChatSession.create(store, models)
            await session.send("hi", on_update=lambda u: shown.append(u.event.text) if u.event.type == "text" else None)
            await session.aclose()
            loaded = await store.load_session(session.id)
            await store.aclose()
            return loaded

        loaded = anyio.run(go)
    assert loaded.outputs[0].text == "your header was [redacted] ok"
    assert HEADER_SECRET[:8] not in "".join(shown)
    raw = (tmp_path / "s.db").read_bytes()
    assert HEADER_SECRET.encode() not in raw


def test_an_unset_header_variable_fails_before_any_request(srv, monkeypatch):
    monkeypatch.delenv("GW_UNSET", raising=False)
    result, events = run(srv, "openai", {}, Reply(text="never"), headers={"X-Gateway-Key": {"env": "GW_UNSET"}})
    err = terminal(events)
    assert err.kind == ErrorKind.config and "GW_UNSET" in err.message and "X-Gateway-Key" in err.message
    assert srv.requests == []
    cfg = model_config(srv, "openai", headers={"X-Gateway-Key": {"env": "GW_UNSET"}})
    assert missing_key(cfg, env={}) == "GW_UNSET"


@pytest.mark.parametrize(("proto", "opts", "base_query"), [
    ("openai", {}, ""), ("openai", {}, "?tenant=a"), ("gemini", {"stream_form": "sse"}, ""),
])
def test_query_parameters_are_added_to_the_protocols_own(srv, proto, opts, base_query):
    srv.script(Reply(text="ok"))
    cfg = model_config(srv, proto, max_retries=0, query={"api-version": "2024-10-21"})
    cfg = cfg.model_copy(update={"base_url": cfg.base_url + base_query})
    result, _ = collect(cfg, None, retry=FAST, **opts)
    assert result.text == "ok"
    req = srv.requests[0]
    query = dict(p.split("=", 1) for p in req.query.split("&"))
    assert query["api-version"] == "2024-10-21"
    if base_query:
        assert query["tenant"] == "a" and req.path == "/v1/chat/completions"
    if proto == "gemini":
        assert query["alt"] == "sse"


# --- 2. the config: key paths, secrets refused unseen --------------------------------------------


def _model(table: str):
    return parse_config(tomllib.loads(table), source="c.toml").models["m"]


def _problems(table: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(tomllib.loads(table), source="c.toml")
    return str(info.value)


BASE = '[models.m]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = "https://gw.example/v1"\n'


def test_config_headers_auth_and_query():
    m = _model(BASE + 'api_key_env = "GW_KEY"\nauth = "api-key"\nquery = { "api-version" = "2024-10-21" }\n'
                      'headers = { "X-Org" = "research", "X-Gateway-Key" = { env = "GW_SECRET" } }\n')
    assert m.auth is not None and (m.auth.header, m.auth.scheme) == ("api-key", None)
    assert m.query == {"api-version": "2024-10-21"}
    assert m.headers["X-Org"] == "research" and m.headers["X-Gateway-Key"].env == "GW_SECRET"
    assert m.secret_envs == ("GW_KEY", "GW_SECRET")
    # the issue's own example: the Azure key in an api-key header, no api_key_env
    m = _model(BASE + 'headers = { "X-Org" = "r", "api-key" = { env = "AZURE_OPENAI_KEY" } }\n')
    assert m.api_key_env is None and m.secret_envs == ("AZURE_OPENAI_KEY",)
    m = _model(BASE + 'api_key_env = "K"\nauth = { header = "X-Key", scheme = "Token" }\n')
    assert (m.auth.header, m.auth.scheme) == ("X-Key", "Token")
    m = _model('[models.m]\nprovider = "openai"\nmodel = "gpt-4o"\nauth = "none"\n')
    assert m.api_key_env is None            # the default OPENAI_API_KEY is not read when auth sends none


@pytest.mark.parametrize(("table", "path", "what"), [
    ('headers = { "X Org" = "a" }', 'models.m.headers."X Org"', "not an HTTP header name"),
    ('headers = { "Content-Type" = "text/plain" }', "models.m.headers.Content-Type", "set by lineup itself"),
    ('headers = { "X-Org" = 3 }', "models.m.headers.X-Org", "got an integer"),
    ('headers = { "X-Org" = "a\\nInjected: 1" }', "models.m.headers.X-Org", "printable ASCII"),
    ('headers = { "X-Org" = "a", "x-org" = "b" }', "models.m.headers.x-org", "given twice"),
    ('headers = { "X-Key" = { env = "K", other = 1 } }', "models.m.headers.X-Key.other", "unknown key"),
    ('headers = "X-Org: a"', "models.m.headers", "must be a table"),
    ('auth = "basic"', "models.m.auth", "expected one of bearer, x-api-key, api-key"),
    ('auth = { header = "Bad Header" }', "models.m.auth.header", "HTTP header name"),
    ('auth = { header = "X-Key", scheme = "two words" }', "models.m.auth.scheme", "one word"),
    ('auth = "api-key"', "models.m.auth", "no key"),
    ('api_key_env = "K"\nauth = "none"', "models.m.auth", "sends no key"),
    ('api_key_env = "K"\nheaders = { "Authorization" = { env = "OTHER" } }', "models.m.headers.Authorization",
     "already goes in header Authorization"),
    ('query = { "api-version" = 2024 }', "models.m.query.api-version", "must be a string"),
])
def test_config_errors_name_the_key_path(table, path, what):
    text = _problems(BASE + table + "\n")
    line = next((ln for ln in text.splitlines() if f"c.toml: {path}: " in ln), None)
    assert line is not None, text
    assert what in line, line


SECRETS = ["sk-proj-abcdefghijklmnop0123456789", "0123456789abcdef0123456789abcdef", "Bearer abc.def.ghi",
           "AbCdEfGhIjKlMnOp1234QrSt"]


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize("where", ["header", "credential-header", "env-name", "query"])
def test_a_literal_secret_is_refused_without_echo(secret, where):
    table = {
        "header": f'headers = {{ "X-Org" = "{secret}" }}',
        "credential-header": 'headers = { "api-key" = "plainvalue" }',
        "env-name": f'headers = {{ "X-Org" = {{ env = "{secret}" }} }}',
        "query": f'query = {{ "api-version" = "{secret}" }}',
    }[where]
    text = _problems(BASE + table + "\n")
    assert "value not shown" in text, text
    assert secret not in text and "plainvalue" not in text


def test_a_whole_endpoint_pasted_as_base_url_is_refused_with_the_fix():
    text = _problems('[models.m]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = '
                     '"https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"\n')
    assert "c.toml: models.m.base_url: ends with /chat/completions, which lineup adds itself" in text
    assert 'query = { "api-version"' in text


def test_a_credential_in_the_query_is_refused_by_its_name():
    text = _problems(BASE + 'query = { "key" = "short" }\n')
    assert "models.m.query.key" in text and "never go in a URL" in text and "short" not in text


def test_headers_that_are_not_secrets_pass():
    m = _model(BASE + 'headers = { "HTTP-Referer" = "https://myapp.example", "X-Title" = "lineup eval", '
                      '"anthropic-version" = "2023-06-01", "x-portkey-provider" = "openai" }\n')
    assert len(m.headers) == 4


# --- 3. Azure OpenAI through the OpenAI-compatible client ---------------------------------------


AZURE_TOML = '''
[models.azure-4o]
provider = "openai"
model = "gpt-4o"
base_url = "{base}"
api_key_env = "AZURE_OPENAI_API_KEY"
auth = "api-key"
query = {{ "api-version" = "2024-10-21" }}
'''


def _azure(srv, base: str, **update):
    cfg = parse_config(tomllib.loads(AZURE_TOML.format(base=base))).models["azure-4o"]
    return cfg.model_copy(update={"max_retries": 0, **update})


def test_azure_deployment_url_api_version_and_api_key_header(srv, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    base = srv.azure("gpt4o-prod", "2024-10-21", KEY)
    srv.script(Reply(text="Hello from Azure.", chunk_chars=5, usage=(9, 4, None)))
    result, events = collect(_azure(srv, base), None, retry=FAST)
    assert terminal(events).type == "finish", events[-1]
    assert (result.text, result.input_tokens, result.output_tokens, result.streamed) == ("Hello from Azure.", 9, 4,
                                                                                         True)
    req = srv.requests[0]
    assert req.path == "/openai/deployments/gpt4o-prod/chat/completions" and req.query == "api-version=2024-10-21"
    assert req.headers["api-key"] == KEY and "authorization" not in req.headers


@pytest.mark.parametrize(("change", "kind", "status", "says"), [
    ({"base": "/openai/deployments/other"}, "not_found", 404, "DeploymentNotFound"),
    ({"query": {}}, "not_found", 404, "Resource not found"),
    ({"auth": None}, "auth", 401, "Access denied"),           # Authorization: Bearer, as for OpenAI itself
    ({"key": "wrong-key-0000"}, "auth", 401, "Access denied"),
])
def test_azure_misconfigurations_fail_the_way_azure_says(srv, monkeypatch, change, kind, status, says):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", change.get("key", KEY))
    base = srv.azure("gpt4o-prod", "2024-10-21", KEY)
    if "base" in change:
        base = srv.url + change["base"]
    update = {k: v for k, v in change.items() if k in ("query", "auth")}
    srv.script(Reply(text="never"))
    result, events = collect(_azure(srv, base, **update), None, retry=FAST)
    err = terminal(events)
    assert (err.kind, err.status) == (kind, status) and says in err.message
    assert KEY not in err.message


def test_readme_gateway_and_azure_examples_are_valid_config():
    """Every TOML example in docs/models.md parses, and the gateway ones say what they claim."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text(encoding="utf-8")
    readme = readme.split("## Provider plugins")[0]   # a plugin's examples need the plugin installed
    blocks = re.findall(r"```toml\n(.*?)```", readme, re.S)
    models = {}
    for block in blocks:
        models.update(parse_config(tomllib.loads(block)).models)
    azure = next(m for m in models.values() if m.base_url and "openai.azure.com/openai/deployments/" in m.base_url)
    assert azure.auth is not None and azure.auth.header == "api-key" and "api-version" in azure.query
    hosts = {re.sub(r"^https?://([^/]+).*", r"\1", m.base_url or "") for m in models.values()}
    assert {"openrouter.ai", "api.portkey.ai"} <= hosts and any("4000" in h for h in hosts)   # LiteLLM proxy
    assert all(m.provider != "demo" for m in models.values())


# --- 1. the record: `streamed` through the schema, exports and merges ---------------------------


def test_streamed_column_comes_with_a_migration_and_older_answers_read_as_streamed(tmp_path):
    from sqlite_utils import Database

    from store.schema import MIGRATION_NAMES, build_migrations

    db = tmp_path / "old.db"
    raw = Database(str(db))
    build_migrations().apply(raw, stop_before="m008_output_streamed")
    raw.execute(f"PRAGMA user_version = {MIGRATION_NAMES.index('m008_output_streamed')}")
    c = raw.conn
    c.execute("INSERT INTO session (id, created, kind, params, meta) VALUES ('S1', 1.7e9, 'chat', '{}', '{}')")
    c.execute("INSERT INTO contestant (session_id, alias, position, label, provider, model) "
              "VALUES ('S1', 'x', 0, 'A', 'openai', 'mx')")
    c.execute("INSERT INTO turn (id, session_id, position, user_message, created) VALUES ('T1', 'S1', 0, 'q', 1.7e9)")
    c.execute("INSERT INTO output (id, session_id, turn_id, contestant, label, status, text, ttft_ms, created) "
              "VALUES ('O1', 'S1', 'T1', 'x', 'A', 'complete', 'old answer', 210.0, 1.7e9)")
    c.commit()
    raw.close()
    with Store.open(db) as store:
        (out,) = store.load_session("S1").outputs
        assert (out.text, out.streamed, out.ttft_ms) == ("old answer", True, 210.0)


def test_a_not_streamed_answer_survives_export_import_and_merge(tmp_path, capsys):
    from tests.synthetic import synthetic_session, write_synthetic
    from lineup.cli import main

    a, b, c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    with Store.open(a) as store:
        s, turns, outs, votes = synthetic_session(turns=1)
        outs[0] = outs[0].model_copy(update={"streamed": False, "ttft_ms": None, "chunk_ms": [], "chunk_chars": []})
        write_synthetic(store, s, turns, outs, votes)
    dump = tmp_path / "s.jsonl"
    assert main(["export", "--db", str(a), "--format", "jsonl", "-o", str(dump)]) == 0
    assert [json.loads(line)["output"]["streamed"] for line in dump.read_text().splitlines()] == [False, True]
    assert main(["import", "--db", str(b), str(dump)]) == 0
    assert main(["import", "--db", str(c), str(a)]) == 0
    for path in (b, c):
        with Store.open(path) as store:
            got = {o.id: o.streamed for o in store.load_session(s.id).outputs}
        assert got == {outs[0].id: False, outs[1].id: True}, path
    capsys.readouterr()
