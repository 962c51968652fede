"""Replaying a case of the recorded wire corpus (../shared/conformance/wire,
third-party data kept outside the repository) through the loopback server and
a real client, and checking what the client reports against the case's
`expected`: shared by the conformance tests and the tests of each protocol."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from providers import make_provider
from providers.events import ChatRequest, Message, StreamResult
from providers.http import RetryPolicy
from providers.model_config import ModelConfig
from tests.server import RawReply, TestServer

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "conformance" / "wire"
CASES = sorted(CORPUS.glob("*.json")) if CORPUS.is_dir() else []

# "openai-responses": the cases in tests/data/responses_wire (tests/test_responses.py replays them)
_SUFFIX = {"openai-compatible": "/chat/completions", "anthropic": "/v1/messages", "ollama": "/api/chat",
           "openai-responses": "/responses"}
_PROVIDER = {"openai-compatible": "openai", "anthropic": "anthropic", "ollama": "ollama", "gemini": "gemini",
             "openai-responses": "openai-responses"}


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def model_for(case: dict[str, Any], url: str) -> tuple[ModelConfig, dict[str, Any]]:
    """A ModelConfig pointing at the server so the client sends the recorded path."""
    kind = case["provider"]
    path, _, query = case["request"]["path"].partition("?")
    options: dict[str, Any] = {}
    if kind == "gemini":
        prefix, _, rest = path.partition("/models/")
        model = rest.split(":")[0]
        base = url + prefix
        options["stream_form"] = "sse" if "alt=sse" in query else "json"
    else:
        assert path.endswith(_SUFFIX[kind]), path
        base = url + path[: -len(_SUFFIX[kind])]
        model = case["request"]["body"].get("model", "m")
    cfg = ModelConfig(alias=case["name"], provider=_PROVIDER[kind], model=model, base_url=base or url,
                      max_retries=0, read_timeout=10)
    return cfg, options


async def replay(srv: TestServer, case: dict[str, Any], cuts: list[int] | None) -> tuple[StreamResult, list]:
    srv.script(RawReply.from_case(case, cuts))
    cfg, options = model_for(case, srv.url)
    provider = make_provider(cfg, retry=RetryPolicy(base=0.001), **options)
    result, events = StreamResult(), []
    try:
        async for ev in provider.stream(ChatRequest(model=cfg.model, messages=(Message(role="user", content="hi"),))):
            result.add(ev)
            events.append(ev)
    finally:
        await provider.aclose()
    return result, events


def check(case: dict[str, Any], result: StreamResult, events: list, srv: TestServer) -> None:
    exp = case["expected"]
    name = case["name"]
    path, _, query = case["request"]["path"].partition("?")
    assert (srv.requests[-1].path, srv.requests[-1].query) == (path, query), name
    assert events[0].type == "sent" and events[-1].type in ("finish", "error"), name
    assert sum(e.type in ("finish", "error") for e in events) == 1, name
    assert result.text == exp["text"], name
    # a non-streamed recording (a whole JSON body) is recorded as such: no time to first token
    assert result.streamed is case["streaming"], name
    if not case["streaming"]:
        assert result.ttft_ms is None and result.duration_ms is not None, name
    assert result.reasoning == exp["reasoning"], name
    assert result.finish_reason == exp["finish_reason"], name
    assert result.input_tokens == exp["input_tokens"], name
    assert result.output_tokens == exp["output_tokens"], name
    assert result.reasoning_tokens == exp["reasoning_tokens"], name
    got_tools = [{"id": t.id, "name": t.name, "arguments": t.arguments} for t in result.tool_calls]
    assert got_tools == exp["tool_calls"], name
    if exp["error"] is None:
        assert result.error is None, (name, result.error)
    else:
        assert result.error is not None, name
        assert result.error.kind.value == exp["error"]["kind"], (name, result.error)
        assert result.error.retry_after == exp["error"]["retry_after"], (name, result.error)
        if exp["error"].get("message"):
            assert exp["error"]["message"] in result.error.message, (name, result.error.message)
