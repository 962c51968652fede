"""The conformance-style cases of tests/data/cloud_wire (Vertex AI's two
shapes and Bedrock ConverseStream, written from the providers' documented
examples) replayed through the loopback server and the real clients, whole
and re-chunked at random byte boundaries, checked against each case's
`expected` with the conformance suite's own `check`."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("botocore")
pytest.importorskip("google.auth")

from google.auth import credentials as ga_credentials  # noqa: E402

from providers import make_provider  # noqa: E402
from providers.events import ChatRequest, Message, StreamResult  # noqa: E402
from providers.http import RetryPolicy  # noqa: E402
from providers.model_config import ModelConfig  # noqa: E402
from tests.server import RawReply, TestServer, event_stream_frame  # noqa: E402
from tests.conformance_support import check  # noqa: E402

CASES = sorted((Path(__file__).parent / "data" / "cloud_wire").glob("*.json"))


class _Token(ga_credentials.Credentials):
    def refresh(self, request) -> None:
        self.token = "ya29.cloud-wire-token"
        self.expiry = datetime.utcnow() + timedelta(hours=1)  # noqa: DTZ003  (google-auth's naive UTC)


@pytest.fixture(scope="module")
def srv():
    with TestServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _env(srv, monkeypatch):
    srv.reset()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDCLOUDWIRE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "cloud-wire-secret-key-0123456789")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _body(case: dict[str, Any]) -> bytes:
    resp = case["response"]
    if "frames" in resp:
        return b"".join(event_stream_frame(f["headers"], json.dumps(f["payload"]).encode()) for f in resp["frames"])
    return resp["body"].encode("utf-8")


def _model(case: dict[str, Any], url: str) -> ModelConfig:
    kind = case["provider"]
    path = case["request"]["path"].partition("?")[0]
    if kind == "bedrock":
        from urllib.parse import unquote

        model = unquote(path.removeprefix("/model/").removesuffix("/converse-stream"))
        return ModelConfig(alias=case["name"], provider="bedrock", model=model, region="us-east-1", base_url=url,
                           max_retries=0, read_timeout=10)
    parts = path.split("/")   # /v1/projects/P/locations/R/publishers/...
    project, region = parts[3], parts[5]
    model = path.rpartition("/models/")[2].partition(":")[0]
    return ModelConfig(alias=case["name"], provider=kind, model=model, project=project, region=region,
                       base_url=url + "/v1", max_retries=0, read_timeout=10)


async def _replay(srv: TestServer, case: dict[str, Any], cuts: list[int] | None) -> tuple[StreamResult, list]:
    resp = case["response"]
    srv.script(RawReply(resp["status"], dict(resp["headers"]), _body(case), cuts))
    options: dict[str, Any] = {"retry": RetryPolicy(base=0.001, cap=1.0)}
    if case["provider"] != "bedrock":
        options["credentials"] = _Token()
    provider = make_provider(_model(case, srv.url), **options)
    result, events = StreamResult(), []
    try:
        request = ChatRequest(model="m", messages=(Message(role="user", content="Say hello"),))
        async for ev in provider.stream(request):
            result.add(ev)
            events.append(ev)
    finally:
        await provider.aclose()
    return result, events


def test_the_cases_cover_text_reasoning_calls_and_failures_for_each_protocol():
    by_provider: dict[str, set[str]] = {}
    for p in CASES:
        case = _load(p)
        by_provider.setdefault(case["provider"], set()).update(case["labels"])
    assert {"text", "thinking", "tool-call", "error-event", "rate-limited", "non-streaming"} <= by_provider["bedrock"]
    assert {"text", "thinking", "rate-limited"} <= by_provider["vertex"]
    assert {"tool-call", "error-event"} <= by_provider["vertex-anthropic"]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_whole_body(srv, path):
    case = _load(path)
    result, events = anyio.run(_replay, srv, case, None)
    check(case, result, events, srv)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_rechunked(srv, path):
    case = _load(path)
    size = len(_body(case))

    @settings(max_examples=6, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(st.lists(st.integers(min_value=1, max_value=max(1, size - 1)), min_size=1, max_size=60))
    def rechunked(cuts: list[int]) -> None:
        result, events = anyio.run(_replay, srv, case, cuts)
        check(case, result, events, srv)

    rechunked()
