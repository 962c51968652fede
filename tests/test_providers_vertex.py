"""Google Vertex AI (`provider = "vertex"`, `"vertex-anthropic"`) over real
HTTP on loopback: the regional URL with project and region, the Gemini and
Anthropic-on-Vertex request shapes, streams, tool calls, errors mid-stream,
429 with retry-after, and the OAuth sign-in: a token from the credentials
(a fixed-token google-auth credentials object, or application default
credentials read from a file whose `token_uri` is the loopback server),
refreshed only when expired, and never in an error or the database."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("google.auth")


from core.answering.config import load_config  # noqa: E402
from lineup.cli import main  # noqa: E402
from providers import make_provider  # noqa: E402
from providers.events import ErrorKind, Retrying, StreamError, ToolSpec  # noqa: E402
from providers.model_config import ModelConfig  # noqa: E402
from tests.cloud_support import FixedTokenCredentials  # noqa: E402
from tests.server import Reply, TestServer, chat_request, collect, model_config  # noqa: E402

WEATHER = ToolSpec(name="get_weather", description="weather",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}})


def _cfg(srv: TestServer, provider: str = "vertex", **fields) -> ModelConfig:
    fields.setdefault("project", "my-project")
    fields.setdefault("region", "us-east5")
    fields.setdefault("max_retries", 0)
    return model_config(srv, provider, **fields)


def test_vertex_gemini_streams_from_the_regional_model_path_with_the_token_as_bearer():
    creds = FixedTokenCredentials()
    with TestServer() as srv:
        srv.script(Reply(text="Hello from Vertex", reasoning="thinking", usage=(5, 3, 2)))
        result, events = collect(_cfg(srv, model="gemini-2.5-flash"), credentials=creds)
        rec = srv.requests[-1]
    assert (result.text, result.reasoning, result.error) == ("Hello from Vertex", "thinking", None)
    assert (result.input_tokens, result.output_tokens) == (5, 3)
    assert rec.path == "/v1/projects/my-project/locations/us-east5/publishers/google/models/" \
                       "gemini-2.5-flash:streamGenerateContent"
    assert "alt=sse" in rec.query
    assert rec.headers["authorization"] == "Bearer ya29.fixed-token-1"
    assert "x-goog-api-key" not in rec.headers
    assert rec.json["contents"][0]["parts"][0]["text"] == "hi"


def test_vertex_gemini_tool_calls_come_back_whole():
    with TestServer() as srv:
        srv.script(Reply(text="Let me look.", tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}]))
        result, _ = collect(_cfg(srv), chat_request("weather?", tools=(WEATHER,)),
                            credentials=FixedTokenCredentials())
        body = srv.requests[-1].json
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"


def test_vertex_anthropic_sends_the_vertex_version_in_the_body_and_no_model():
    with TestServer() as srv:
        srv.script(Reply(text="Claude on Vertex", reasoning="hmm",
                         tool_calls=[{"id": "toolu_1", "name": "get_weather", "arguments": {"city": "Oslo"}}]))
        result, _ = collect(_cfg(srv, "vertex-anthropic", model="claude-sonnet-4-5@20250929"),
                            chat_request("weather?", tools=(WEATHER,)), credentials=FixedTokenCredentials())
        rec = srv.requests[-1]
    assert rec.path == "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/" \
                       "claude-sonnet-4-5@20250929:streamRawPredict"
    assert rec.json["anthropic_version"] == "vertex-2023-10-16"
    assert "model" not in rec.json and rec.json["stream"] is True
    assert "anthropic-version" not in rec.headers and "x-api-key" not in rec.headers
    assert rec.headers["authorization"] == "Bearer ya29.fixed-token-1"
    assert (result.text, result.reasoning) == ("Claude on Vertex", "hmm")
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("toolu_1", "get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize("provider", ["vertex", "vertex-anthropic"])
def test_an_error_mid_stream_ends_the_answer_without_a_retry(provider):
    with TestServer() as srv:
        srv.script(Reply(text="partial answer", chunk_chars=4, fault="error_event", fault_after=2))
        result, events = collect(_cfg(srv, provider, max_retries=3), credentials=FixedTokenCredentials())
        sent = len(srv.requests)
    assert sent == 1
    assert result.error is not None and result.text == "part" + "ial "
    assert isinstance(events[-1], StreamError)


@pytest.mark.parametrize("provider", ["vertex", "vertex-anthropic"])
def test_429_is_retried_after_the_wait_the_server_asks(provider):
    creds = FixedTokenCredentials()
    with TestServer() as srv:
        srv.script(Reply(status=429, retry_after="0.05", message="quota"), Reply(text="after the wait"))
        result, events = collect(_cfg(srv, provider, max_retries=2), credentials=creds)
        sent = len(srv.requests)
    retries = [e for e in events if isinstance(e, Retrying)]
    assert result.text == "after the wait" and sent == 2
    assert len(retries) == 1 and retries[0].kind == ErrorKind.rate_limited and retries[0].delay == pytest.approx(0.05)
    assert creds.refreshes == 1   # one token serves every attempt


def test_the_token_is_refreshed_only_once_it_has_expired():
    import anyio

    creds = FixedTokenCredentials()
    with TestServer() as srv:
        srv.script(Reply(text="ok"))

        async def go():
            provider = make_provider(_cfg(srv), credentials=creds)
            try:
                for _ in range(2):
                    async for _ev in provider.stream(chat_request()):
                        pass
                creds.expire()
                async for _ev in provider.stream(chat_request()):
                    pass
            finally:
                await provider.aclose()

        anyio.run(go)
        sent = [r.headers["authorization"] for r in srv.requests]
    assert sent == ["Bearer ya29.fixed-token-1"] * 2 + ["Bearer ya29.fixed-token-2"]
    assert creds.refreshes == 2


def test_a_token_the_server_echoes_never_reaches_the_error():
    creds = FixedTokenCredentials()
    with TestServer() as srv:
        srv.script(Reply(status=401, message="token ya29.fixed-token-1 is not valid for this project"))
        result, _ = collect(_cfg(srv), credentials=creds)
    assert result.error is not None and result.error.kind == ErrorKind.auth
    assert "fixed-token" not in result.error.message


def _user_credentials(srv: TestServer):
    """Real google-auth user credentials (what `gcloud auth application-default login`
    leaves) whose token endpoint is the loopback server: a refresh is a real OAuth
    token request, sent through lineup's httpx transport."""
    from google.oauth2.credentials import Credentials

    return Credentials(token=None, refresh_token="1//refresh-token-value", token_uri=f"{srv.url}/token",
                       client_id="client.apps.googleusercontent.com", client_secret="client-secret-value")


def _as_application_default(monkeypatch, creds) -> None:
    """`google.auth.default()` finds `creds` (as it would find a credentials file)."""
    import google.auth

    monkeypatch.setattr(google.auth, "default", lambda scopes=None, **kw: (creds, None))


def test_application_default_credentials_are_refreshed_over_loopback(monkeypatch):
    with TestServer() as srv:
        _as_application_default(monkeypatch, _user_credentials(srv))
        srv.script(Reply(text="signed in"))
        result, _ = collect(_cfg(srv))
        issued = srv.tokens_issued
        model_req = srv.requests[-1]
    assert result.text == "signed in" and issued == 1
    assert model_req.headers["authorization"] == "Bearer ya29.test-token-1"


def test_missing_credentials_are_a_config_error_naming_the_model(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    with TestServer() as srv:
        result, _ = collect(_cfg(srv))
        sent = [r for r in srv.requests]
    assert sent == []
    assert result.error is not None and result.error.kind == ErrorKind.config
    assert "'test'" in result.error.message and "DefaultCredentialsError" in result.error.message


def test_the_default_endpoint_is_the_regions():
    p = make_provider(ModelConfig(alias="v", provider="vertex", model="m", project="p-1", region="europe-west1"))
    g = make_provider(ModelConfig(alias="v", provider="vertex", model="m", project="p-1", region="global"))
    route = p.route(chat_request())
    assert route.url == ("https://europe-west1-aiplatform.googleapis.com/v1/projects/p-1/locations/europe-west1/"
                         "publishers/google/models/m:streamGenerateContent?alt=sse")
    assert "application default credentials" in route.auth
    assert g.base_url == "https://aiplatform.googleapis.com/v1"


def _load(tmp_path: Path, table: str, env: dict | None = None):
    path = tmp_path / "c.toml"
    path.write_text(table)
    return load_config(path, env={} if env is None else env)


def test_config_requires_project_and_region_by_key_path(tmp_path):
    with pytest.raises(Exception) as exc:
        _load(tmp_path, '[models.v]\nprovider = "vertex"\nmodel = "gemini-2.5-flash"\n')
    text = str(exc.value)
    assert "models.v.project" in text and "models.v.region" in text
    assert "or set GOOGLE_CLOUD_PROJECT" in text and "or set GOOGLE_CLOUD_LOCATION" in text


def test_project_and_region_come_from_googles_variables_where_the_table_names_none(tmp_path):
    env = {"GOOGLE_CLOUD_PROJECT": "env-project", "GOOGLE_CLOUD_LOCATION": "europe-west4"}
    model = _load(tmp_path, '[models.v]\nprovider = "vertex"\nmodel = "m"\n', env).models["v"]
    assert (model.project, model.region) == ("env-project", "europe-west4")
    assert model.base_url == "https://europe-west4-aiplatform.googleapis.com/v1"
    own = _load(tmp_path, '[models.v]\nprovider = "vertex-anthropic"\nmodel = "m"\nregion = "us-east5"\n', env)
    assert (own.models["v"].project, own.models["v"].region) == ("env-project", "us-east5")   # the table's wins
    with pytest.raises(Exception) as exc:     # a variable is held to the table's rules: no other host
        _load(tmp_path, '[models.v]\nprovider = "vertex"\nmodel = "m"\n',
              {**env, "GOOGLE_CLOUD_LOCATION": "evil.example.com/x"})
    assert "models.v.region" in str(exc.value)


def test_config_refuses_a_region_that_would_change_the_host(tmp_path):
    with pytest.raises(Exception) as exc:
        _load(tmp_path, '[models.v]\nprovider = "vertex"\nmodel = "m"\nproject = "p-1"\n'
                        'region = "evil.example.com/x"\n')
    assert "models.v.region" in str(exc.value)


def test_config_fills_the_regional_endpoint(tmp_path):
    cfg = _load(tmp_path, '[models.v]\nprovider = "vertex-anthropic"\nmodel = "claude-sonnet-4-5@20250929"\n'
                          'project = "my-project"\nregion = "us-east5"\n')
    model = cfg.models["v"]
    assert model.base_url == "https://us-east5-aiplatform.googleapis.com/v1"
    assert (model.project, model.region, model.api_key_env) == ("my-project", "us-east5", None)


def test_the_token_is_never_stored(tmp_path, monkeypatch, capsys):
    db = tmp_path / "v.db"
    sample = tmp_path / "s.jsonl"
    sample.write_text(json.dumps({"id": "p1", "category": "k", "prompt": "question"}) + "\n")

    def echo(rec):   # a hostile server: the token it was sent in the answer's every field
        token = rec.headers.get("authorization", "").removeprefix("Bearer ")
        return Reply(text=f"answer {token} end", reasoning=f"I was sent {token}", chunk_chars=5,
                     served_model=f"m-{token}", finish_reason=f"STOP-{token}")

    with TestServer() as srv:
        _as_application_default(monkeypatch, _user_credentials(srv))
        config = tmp_path / "config.toml"
        config.write_text("\n".join(
            f'[models.{p}]\nprovider = "{p}"\nmodel = "m"\nproject = "my-project"\nregion = "us-east5"\n'
            f'base_url = "{srv.base_url(p)}"\nmax_retries = 0\n' for p in ("vertex", "vertex-anthropic")))
        srv.respond(echo)
        code = main(["run", str(sample), "-m", "vertex", "-m", "vertex-anthropic", "--config", str(config),
                     "--quiet", "--db", str(db)])
        issued = srv.tokens_issued
    out = capsys.readouterr()
    assert code in (0, 1), out.err[-2000:]
    assert issued >= 1
    assert "test-token" not in out.out + out.err
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        answers = conn.execute("SELECT count(*) FROM output").fetchone()[0]
        assert answers >= 2
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, str):
                        assert "test-token" not in value, table
    finally:
        conn.close()


def test_models_check_names_the_route_and_the_credentials_that_failed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    with TestServer() as srv:
        config = tmp_path / "config.toml"
        config.write_text(f'[models.v]\nprovider = "vertex-anthropic"\nmodel = "claude-x@1"\nproject = "my-project"\n'
                          f'region = "us-east5"\nbase_url = "{srv.base_url("vertex-anthropic")}"\n')
        code = main(["models", "--check", "--config", str(config)])
        sent = len(srv.requests)
    out = capsys.readouterr().out
    assert code != 0 and sent == 0
    assert "/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-x@1:streamRawPredict" in out
    assert "Google application default credentials" in out
    assert "wrong: auth" in out


def test_without_the_extra_the_answer_says_which_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "google.auth", None)   # as on a base install
    with TestServer() as srv:
        result, _ = collect(_cfg(srv))
        sent = len(srv.requests)
    assert sent == 0 and result.error is not None and result.error.kind == ErrorKind.config
    assert "pip install 'lineup[vertex]'" in result.error.message


@pytest.mark.parametrize("provider", ["vertex", "vertex-anthropic"])
def test_a_401_is_sent_once_more_with_a_token_renewed_before_its_expiry(provider):
    """Google can revoke a token before its expiry (a rotated key, a changed
    account): a 401 before anything is shown asks for a new token and sends
    the request once more with it, even with retries off."""
    creds = FixedTokenCredentials()
    with TestServer() as srv:
        srv.script(Reply(status=401, message="Request had invalid authentication credentials"), Reply(text="signed in"))
        result, events = collect(_cfg(srv, provider, max_retries=0), credentials=creds)
        sent = [r.headers["authorization"] for r in srv.requests]
    assert result.text == "signed in" and result.error is None
    assert sent == ["Bearer ya29.fixed-token-1", "Bearer ya29.fixed-token-2"]
    assert [(e.kind, e.delay) for e in events if isinstance(e, Retrying)] == [(ErrorKind.auth, 0.0)]


def test_a_401_with_the_renewed_token_too_is_the_answer_s_error_and_names_neither_token():
    creds = FixedTokenCredentials()
    with TestServer() as srv:
        srv.script(Reply(status=401, message="ya29.fixed-token-1 and ya29.fixed-token-2 are not valid here"))
        result, events = collect(_cfg(srv, max_retries=3), credentials=creds)
        sent = len(srv.requests)
    assert sent == 2 and creds.refreshes == 2          # renewed once, not once per retry
    assert result.error is not None and result.error.kind == ErrorKind.auth
    assert not any("fixed-token" in e.message for e in events if isinstance(e, (Retrying, StreamError)))


def test_a_403_is_not_a_token_to_renew():
    creds = FixedTokenCredentials()
    with TestServer() as srv:
        srv.script(Reply(status=403, message="Permission denied on the project"), Reply(text="never"))
        result, _ = collect(_cfg(srv, max_retries=0), credentials=creds)
        sent = len(srv.requests)
    assert sent == 1 and creds.refreshes == 1 and result.error is not None


def test_a_renewed_token_stays_with_the_stream_that_renewed_it_when_two_share_a_request():
    """Two answers of one request object on one provider, taking turns (as
    two repeats in one event loop do): the first is refused with a 401 and
    renews the token; the other stream must not take the renewal for its
    own, or the first one's answer (the server echoing the new token) keeps
    it unscrubbed."""
    import anyio

    from providers.events import StreamResult

    class Unrelated(FixedTokenCredentials):
        """Tokens with nothing in common (a part of one is not a part of the other)."""

        def refresh(self, request) -> None:
            super().refresh(request)
            self.token = ["ya29.AlphaFirstToken", "ya29.OmegaSecondToken"][self.refreshes - 1]

    creds = Unrelated()
    with TestServer() as srv:
        srv.script(Reply(status=401, message="Request had invalid authentication credentials"),
                   Reply(text="the other answer"), Reply(text="your token is ya29.OmegaSecondToken, keep it"))

        async def go() -> tuple[str, str]:
            provider = make_provider(_cfg(srv, max_retries=0), credentials=creds)
            request = chat_request()
            first, other = provider.stream(request), provider.stream(request)
            try:
                got: dict[str, StreamResult] = {"first": StreamResult(), "other": StreamResult()}
                got["other"].add(await other.__anext__())                 # under way, not sent yet
                async for ev in first:                                      # sent, refused, renewed
                    got["first"].add(ev)
                    if isinstance(ev, Retrying):
                        break
                async for ev in other:                                      # the other takes its turn
                    got["other"].add(ev)
                async for ev in first:                                      # the retry, with the new token
                    got["first"].add(ev)
                return got["first"].text, got["other"].text
            finally:
                await first.aclose()
                await other.aclose()
                await provider.aclose()

        first_text, other_text = anyio.run(go)
    assert other_text == "the other answer"
    assert "OmegaSecondToken" not in first_text and first_text.startswith("your token is ")
