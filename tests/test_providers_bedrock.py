"""Amazon Bedrock ConverseStream (`provider = "bedrock"`) over real HTTP on
loopback: the request signed with SigV4 (botocore's signer, static test
credentials from the environment), the Converse body, the answer in AWS
event-stream binary frames (text, reasoning, tool calls), a throttling
exception before the first token retried, an exception mid-stream ending the
answer, and the credentials kept out of every error and the database."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

pytest.importorskip("botocore")

from core.answering.config import load_config  # noqa: E402
from lineup.cli import main  # noqa: E402
from providers import make_provider  # noqa: E402
from providers.events import ErrorKind, ResponseFormat, Retrying, SamplingParams, StreamError, ToolSpec  # noqa: E402
from providers.model_config import ModelConfig  # noqa: E402
from tests.server import Reply, TestServer, chat_request, collect, event_stream_frame, model_config  # noqa: E402

ACCESS_KEY = "AKIDLINEUPTEST00001"
SECRET_KEY = "lineup/test+SECRET/key0123456789abcdefXYZ"
SESSION_TOKEN = "IQoJb3JpZ2luX2VjLINEUPSESSIONTOKEN0123456789"
WEATHER = ToolSpec(name="get_weather", description="weather",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}})


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    """Static credentials in the environment, no shared files, no instance metadata."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _cfg(srv: TestServer, **fields) -> ModelConfig:
    fields.setdefault("region", "us-east-1")
    fields.setdefault("max_retries", 0)
    fields.setdefault("model", "anthropic.claude-3-5-sonnet-20240620-v1:0")
    return model_config(srv, "bedrock", **fields)


def test_the_request_is_sigv4_signed_and_the_converse_body_is_sent():
    with TestServer() as srv:
        srv.script(Reply(text="Hello from Bedrock", usage=(7, 4, None)))
        result, _ = collect(_cfg(srv), chat_request("hi", system="be brief",
                                                    params=SamplingParams(temperature=0.5, max_tokens=100)))
        rec = srv.requests[-1]
    assert (result.text, result.finish_reason, result.error) == ("Hello from Bedrock", "end_turn", None)
    assert (result.input_tokens, result.output_tokens) == (7, 4)
    assert rec.path == "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
    auth = rec.headers["authorization"]
    assert re.fullmatch(rf"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/\d{{8}}/us-east-1/bedrock/aws4_request, "
                        r"SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*x-amz-date[a-z0-9;-]*, Signature=[0-9a-f]{64}", auth)
    assert re.fullmatch(r"\d{8}T\d{6}Z", rec.headers["x-amz-date"])
    assert rec.headers["x-amz-security-token"] == SESSION_TOKEN
    assert rec.json == {"messages": [{"role": "user", "content": [{"text": "hi"}]}],
                        "system": [{"text": "be brief"}],
                        "inferenceConfig": {"temperature": 0.5, "maxTokens": 100}}


def test_the_signature_is_botocores_own_for_that_request():
    """Re-signing what the server received, at the time it names, gives the same signature."""
    from unittest import mock

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    with TestServer() as srv:
        srv.script(Reply(text="ok"))
        collect(_cfg(srv))
        rec = srv.requests[-1]
    import datetime as dt

    when = dt.datetime.strptime(rec.headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
    again = AWSRequest(method="POST", url=srv.url + rec.path, data=rec.body,
                       headers={"content-type": rec.headers["content-type"], "accept": rec.headers["accept"]})
    with mock.patch("botocore.auth.datetime") as clock:
        clock.datetime.now.return_value = when
        clock.datetime.utcnow.return_value = when
        clock.timezone = dt.timezone
        SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN), "bedrock", "us-east-1").add_auth(again)
    assert again.headers["Authorization"] == rec.headers["authorization"]


def test_reasoning_text_and_tool_calls_stream_from_event_frames():
    with TestServer() as srv:
        srv.script(Reply(text="Let me check.", reasoning="The user wants weather.", chunk_chars=5,
                         tool_calls=[{"id": "tooluse_1", "name": "get_weather", "arguments": {"city": "Lima"}}]))
        result, _ = collect(_cfg(srv), chat_request("weather?", tools=(WEATHER,)))
        body = srv.requests[-1].json
    assert (result.reasoning, result.text) == ("The user wants weather.", "Let me check.")
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("tooluse_1", "get_weather", {"city": "Lima"})]
    assert result.finish_reason == "tool_use"
    assert body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["properties"] == {"city": {"type": "string"}}


def test_structured_output_goes_through_a_forced_tool_and_reads_as_text():
    fmt = ResponseFormat(name="answer", schema={"type": "object", "properties": {"x": {"type": "integer"}}})
    with TestServer() as srv:
        srv.script(Reply(text='{"x": 3}', chunk_chars=3))
        result, _ = collect(_cfg(srv), chat_request("x?", response_format=fmt))
        body = srv.requests[-1].json
    assert json.loads(result.text) == {"x": 3}
    assert body["toolConfig"]["toolChoice"]["tool"]["name"] == body["toolConfig"]["tools"][-1]["toolSpec"]["name"]


def test_a_throttling_exception_before_the_first_token_is_retried():
    with TestServer() as srv:
        srv.script(Reply(text="x", fault="error_event", fault_after=0, error_type="throttlingException",
                         message="Too many requests"), Reply(text="after throttling"))
        result, events = collect(_cfg(srv, max_retries=2))
        sent = len(srv.requests)
    retries = [e for e in events if isinstance(e, Retrying)]
    assert sent == 2 and result.text == "after throttling" and result.error is None
    assert len(retries) == 1 and retries[0].kind == ErrorKind.rate_limited
    assert "Too many requests" in retries[0].message


def test_an_exception_mid_stream_ends_the_answer_keeping_the_text():
    with TestServer() as srv:
        srv.script(Reply(text="partial answer", chunk_chars=4, fault="error_event", fault_after=2,
                         error_type="modelStreamErrorException", message="the model failed"))
        result, events = collect(_cfg(srv, max_retries=3))
        sent = len(srv.requests)
    assert sent == 1 and result.text == "partial answer"[:8]
    assert isinstance(events[-1], StreamError) and events[-1].kind == ErrorKind.server
    assert "modelStreamErrorException" in events[-1].message


def test_http_429_honours_retry_after():
    with TestServer() as srv:
        srv.script(Reply(status=429, retry_after="0.05", message="Rate exceeded"), Reply(text="fine"))
        result, events = collect(_cfg(srv, max_retries=1))
    assert result.text == "fine"
    assert [e.delay for e in events if isinstance(e, Retrying)] == [pytest.approx(0.05)]


def test_a_frame_with_a_bad_crc_is_a_bad_response():
    from tests.server import RawReply

    frame = bytearray(event_stream_frame({":event-type": "messageStart", ":message-type": "event"}, b"{}"))
    frame[-1] ^= 0xFF
    with TestServer() as srv:
        srv.script(RawReply(200, {"content-type": "application/vnd.amazon.eventstream"}, bytes(frame)))
        result, _ = collect(_cfg(srv))
    assert result.error is not None and result.error.kind == ErrorKind.bad_response


def test_a_stream_cut_before_message_stop_is_truncated():
    with TestServer() as srv:
        srv.script(Reply(text="half", fault="no_terminator"))
        result, _ = collect(_cfg(srv))
    assert result.text == "half" and result.error is not None and result.error.kind == ErrorKind.truncated


def test_no_credentials_is_a_config_error_before_any_request(monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    with TestServer() as srv:
        result, _ = collect(_cfg(srv))
        sent = len(srv.requests)
    assert sent == 0 and result.error is not None and result.error.kind == ErrorKind.config
    assert "AWS credentials" in result.error.message or "no AWS credentials" in result.error.message


def test_credentials_echoed_by_the_server_never_reach_the_error():
    with TestServer() as srv:
        srv.script(Reply(status=403, message=f"signature for {SECRET_KEY} with token {SESSION_TOKEN} is wrong"))
        result, _ = collect(_cfg(srv))
    assert result.error is not None and result.error.kind == ErrorKind.auth
    assert SECRET_KEY[:12] not in result.error.message and SESSION_TOKEN[:12] not in result.error.message


def test_config_requires_a_region_and_fills_the_regional_endpoint(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[models.b]\nprovider = "bedrock"\nmodel = "amazon.nova-pro-v1:0"\n')
    with pytest.raises(Exception) as exc:       # no variable, no profile file
        load_config(path, env={"AWS_CONFIG_FILE": str(tmp_path / "absent")})
    assert "models.b.region" in str(exc.value) and "or set AWS_REGION or AWS_DEFAULT_REGION" in str(exc.value)
    path.write_text('[models.b]\nprovider = "bedrock"\nmodel = "amazon.nova-pro-v1:0"\nregion = "eu-west-1"\n')
    model = load_config(path).models["b"]
    assert model.base_url == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    route = make_provider(model).route(chat_request())
    assert route.url == "https://bedrock-runtime.eu-west-1.amazonaws.com/model/amazon.nova-pro-v1%3A0/converse-stream"
    assert "SigV4" in route.auth


def test_the_region_comes_from_the_aws_variables_then_the_profile(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[models.b]\nprovider = "bedrock"\nmodel = "m"\n')
    profiles = tmp_path / "aws-config"
    profiles.write_text("[default]\nregion = eu-north-1\n\n[profile work]\nregion = ap-south-1\n")

    def region(**env):
        return load_config(path, env={"AWS_CONFIG_FILE": str(profiles), **env}).models["b"].region

    assert region() == "eu-north-1"                                   # the default profile's
    assert region(AWS_PROFILE="work") == "ap-south-1"
    assert region(AWS_PROFILE="work", AWS_DEFAULT_REGION="us-west-1") == "us-west-1"
    assert region(AWS_DEFAULT_REGION="us-west-1", AWS_REGION="us-east-2") == "us-east-2"   # as the AWS SDKs order them
    model = load_config(path, env={"AWS_CONFIG_FILE": str(profiles), "AWS_PROFILE": "work"}).models["b"]
    assert model.base_url == "https://bedrock-runtime.ap-south-1.amazonaws.com"
    with pytest.raises(Exception) as exc:                                    # a profile that is not there
        load_config(path, env={"AWS_CONFIG_FILE": str(profiles), "AWS_PROFILE": "nobody"})
    assert "models.b.region" in str(exc.value)
    path.write_text('[models.b]\nprovider = "bedrock"\nmodel = "m"\nregion = "ca-central-1"\n')
    assert region(AWS_REGION="us-east-2") == "ca-central-1"                 # the table's own wins


def test_credentials_are_never_stored(tmp_path, capsys):
    db = tmp_path / "b.db"
    sample = tmp_path / "s.jsonl"
    sample.write_text(json.dumps({"id": "p1", "category": "k", "prompt": "question"}) + "\n")

    def echo(rec):   # a hostile server: what it was sent, back in every field
        auth = rec.headers.get("authorization", "")
        return Reply(text=f"answer {auth} {SESSION_TOKEN}", chunk_chars=7, finish_reason=f"end-{SECRET_KEY}")

    with TestServer() as srv:
        config = tmp_path / "config.toml"
        config.write_text(f'[models.b]\nprovider = "bedrock"\nmodel = "m"\nregion = "us-east-1"\n'
                          f'base_url = "{srv.base_url("bedrock")}"\nmax_retries = 0\n')
        srv.respond(echo)
        code = main(["run", str(sample), "-m", "b", "--config", str(config), "--quiet", "--db", str(db)])
        signature = srv.requests[-1].headers["authorization"].rpartition("Signature=")[2]
    out = capsys.readouterr()
    assert code in (0, 1), out.err[-2000:]
    needles = [SECRET_KEY[:10], SESSION_TOKEN[:10], signature[:16]]
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT count(*) FROM output").fetchone()[0] >= 1
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, str):
                        assert not any(n in value for n in needles), table
    finally:
        conn.close()


def test_without_the_extra_the_answer_says_which_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "botocore.session", None)   # as on a base install
    with TestServer() as srv:
        result, _ = collect(_cfg(srv))
        sent = len(srv.requests)
    assert sent == 0 and result.error is not None and result.error.kind == ErrorKind.config
    assert "pip install 'lineup[bedrock]'" in result.error.message
