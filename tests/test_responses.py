"""The OpenAI Responses API (`provider = "openai-responses"`) over real HTTP:
the conformance-style cases of tests/data/responses_wire replayed whole and
re-chunked, the request in the protocol's form (input items, instructions,
tools, structured output, reasoning), a tool loop's thread sent back as
items, and the loopback server's Responses mode with its faults (the
generic ones run in tests/test_providers_faults.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.events import (
    ChatRequest,
    ErrorKind,
    ImagePart,
    Message,
    ResponseFormat,
    SamplingParams,
    ToolCall,
    ToolResultPart,
    ToolSpec,
)
from providers.http import RetryPolicy
from tests.server import RawReply, Reply, TestServer, collect, model_config
from tests.conformance_support import check, replay

CASES = sorted((Path(__file__).parent / "data" / "responses_wire").glob("*.json"))
FAST = RetryPolicy(base=0.001, cap=1.0)
WEATHER = ToolSpec(name="get_weather", description="Current weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


@pytest.fixture(scope="module")
def srv():
    with TestServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(srv):
    srv.reset()
    yield


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_cases_cover_text_reasoning_calls_and_failures():
    labels = {label for p in CASES for label in _load(p)["labels"]}
    assert {"thinking", "tool-call", "error-event", "rate-limited", "truncated", "non-streaming"} <= labels
    assert all(_load(p)["provider"] == "openai-responses" for p in CASES)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_whole_body(srv, path):
    case = _load(path)
    result, events = anyio.run(replay, srv, case, None)
    check(case, result, events, srv)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case_rechunked(srv, path):
    case = _load(path)
    size = len(case["response"]["body"].encode("utf-8"))

    @settings(max_examples=8, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(st.lists(st.integers(min_value=1, max_value=max(1, size - 1)), min_size=1, max_size=60))
    def rechunked(cuts: list[int]) -> None:
        result, events = anyio.run(replay, srv, case, cuts)
        check(case, result, events, srv)

    rechunked()


def _run(srv: TestServer, request: ChatRequest | None, *replies: Reply | RawReply, **fields: Any):
    srv.script(*replies)
    cfg = model_config(srv, "openai-responses", **fields)
    result, events = collect(cfg, request, retry=FAST)
    return result, events, srv.requests[-1].json


def _request(**fields: Any) -> ChatRequest:
    return ChatRequest(model="test-model", messages=(Message(role="user", content="Weather in Paris?"),), **fields)


def test_the_request_is_a_stateless_responses_request(srv):
    req = _request(system="Be brief.", tools=(WEATHER,),
                   params=SamplingParams(temperature=0.3, max_tokens=200, seed=7, stop=("END",),
                                         reasoning_effort="low"))
    result, _, body = _run(srv, req, Reply(text="ok"))
    assert result.text == "ok"
    assert srv.requests[-1].path == "/v1/responses"
    assert body["model"] == "test-model" and body["stream"] is True and body["store"] is False
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"role": "user", "content": "Weather in Paris?"}]
    assert body["tools"] == [{"type": "function", "name": "get_weather", "description": WEATHER.description,
                              "parameters": WEATHER.parameters}]
    assert body["temperature"] == 0.3 and body["max_output_tokens"] == 200
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    # the Responses API has neither: sending them would be refused
    assert not {"seed", "stop", "messages", "max_tokens", "reasoning_effort"} & set(body)


def test_a_tiny_token_limit_is_raised_to_the_apis_minimum(srv):
    """`lineup models --check` asks for 8 tokens; the API refuses fewer than 16."""
    _, _, body = _run(srv, _request(params=SamplingParams(max_tokens=8)), Reply(text="ok"))
    assert body["max_output_tokens"] == 16


def test_structured_output_and_images_in_the_protocols_form(srv):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    req = ChatRequest(model="m", response_format=ResponseFormat(name="count", schema_=schema, strict=True), messages=(
        Message(role="user", content="Count", images=(ImagePart(mime="image/png", data="AAAA"),)),))
    _, _, body = _run(srv, req, Reply(text='{"n": 3}'))
    assert body["text"] == {"format": {"type": "json_schema", "name": "count", "schema": schema, "strict": True}}
    assert body["input"] == [{"role": "user", "content": [
        {"type": "input_text", "text": "Count"}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}]


def test_a_tool_loop_sends_calls_and_results_back_as_items(srv):
    req = ChatRequest(model="m", tools=(WEATHER,), messages=(
        Message(role="user", content="Weather in Paris and Rome?"),
        Message(role="assistant", content="Let me look.", tool_calls=(
            ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id="call_b", name="get_weather", arguments="not json"))),
        Message(role="tool", content="", tool_results=(
            ToolResultPart(id="call_a", name="get_weather", content={"temp": 21}),
            ToolResultPart(id="call_b", name="get_weather", content="sunny"))),
    ))
    _, _, body = _run(srv, req, Reply(text="Warm in both."))
    assert body["input"][1:] == [
        {"role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call", "call_id": "call_b", "name": "get_weather", "arguments": "not json"},
        {"type": "function_call_output", "call_id": "call_a", "output": '{"temp": 21}'},
        {"type": "function_call_output", "call_id": "call_b", "output": "sunny"},
    ]


def test_streamed_calls_with_split_arguments_from_the_server(srv):
    calls = [{"id": "call_a", "name": "get_weather", "arguments": {"city": "Paris"}},
             {"id": "call_b", "name": "get_weather", "arguments": {"city": "Zürich ☃"}}]
    result, events, _ = _run(srv, _request(tools=(WEATHER,)),
                             Reply(text="Checking.", reasoning="Two cities.", tool_calls=calls, chunk_chars=3))
    assert result.error is None, result.error
    assert (result.text, result.reasoning) == ("Checking.", "Two cities.")
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_a", "get_weather", {"city": "Paris"}), ("call_b", "get_weather", {"city": "Zürich ☃"})]
    assert result.finish_reason == "completed"
    assert sum(e.type in ("finish", "error") for e in events) == 1
    # each call is reported once its item is done, before the response completes
    kinds = [e.type for e in events]
    assert kinds.index("tool_call") < kinds.index("usage")


def test_served_model_and_usage_come_from_the_response(srv):
    result, _, _ = _run(srv, None, Reply(text="hi", served_model="gpt-5-2025-08-07", usage=(12, 5, 3)))
    assert result.served_model == "gpt-5-2025-08-07"
    assert (result.input_tokens, result.output_tokens, result.reasoning_tokens) == (12, 5, 3)


def test_an_incomplete_response_finishes_with_its_reason(srv):
    result, events, _ = _run(srv, None, Reply(text="cut short", finish_reason="max_output_tokens"))
    assert events[-1].type == "finish" and result.finish_reason == "max_output_tokens"
    assert result.text == "cut short"


def test_a_whole_response_object_is_read_as_one_answer(srv):
    result, events, _ = _run(srv, None, Reply(text="all at once", reasoning="hmm", whole=True,
                                              tool_calls=[{"id": "c1", "name": "f", "arguments": {"x": 1}}]))
    assert events[-1].type == "finish" and not result.streamed and result.ttft_ms is None
    assert (result.text, result.reasoning) == ("all at once", "hmm")
    assert [(c.id, c.arguments) for c in result.tool_calls] == [("c1", {"x": 1})]


def test_rate_limited_with_retry_after_is_retried_after_that_wait(srv):
    result, events, _ = _run(srv, None, Reply(status=429, retry_after="0.15", message="Rate limit reached"),
                             Reply(text="ok"))
    assert result.text == "ok"
    (retry,) = [e for e in events if e.type == "retrying"]
    assert retry.kind == ErrorKind.rate_limited and retry.delay == pytest.approx(0.15)
    assert srv.requests[1].t - srv.requests[0].t >= 0.14


def test_a_failed_response_mid_stream_keeps_the_text_and_is_not_retried(srv):
    result, events, _ = _run(srv, None, Reply(text="abcdef", chunk_chars=2, fault="error_event", fault_after=2,
                                              message="upstream broke"), Reply(text="again"), max_retries=3)
    err = events[-1]
    assert err.type == "error" and err.kind == ErrorKind.server and "upstream broke" in err.message
    assert result.text == "abcd" and len(srv.requests) == 1


@pytest.mark.parametrize(("code", "kind"), [("rate_limit_exceeded", "rate_limited"), ("server_error", "server"),
                                            ("invalid_prompt", "bad_request"), ("something_new", "server")])
def test_error_event_codes_map_to_kinds(srv, code, kind):
    body = (b'event: response.created\ndata: {"type": "response.created", "response": {"model": "m"}}\n\n'
            b'event: error\ndata: ' + json.dumps({"type": "error", "code": code, "message": "said no",
                                                   "param": None}).encode() + b"\n\n")
    result, events, _ = _run(srv, None, RawReply(200, {"content-type": "text/event-stream"}, body), max_retries=0)
    assert events[-1].type == "error" and events[-1].kind == kind and "said no" in events[-1].message


@pytest.mark.parametrize("line", [
    b'data: {"type": "response.output_text.delta", "delta": ["not", "text"]}\n\n',
    b'data: {"type": "response.output_item.added", "item": "not an object"}\n\n',
    b'data: {"type": "response.completed", "response": "not an object"}\n\n',
    b'data: [1, 2]\n\n',
])
def test_hostile_shapes_never_crash_and_never_pass_for_text(srv, line):
    ok = b'data: {"type": "response.output_text.delta", "delta": "fine"}\n\n'
    result, events, _ = _run(srv, None, RawReply(200, {"content-type": "text/event-stream"}, ok + line,
                                                         cuts=[len(ok)]), max_retries=0)
    assert sum(e.type in ("finish", "error") for e in events) == 1
    assert result.text == "fine"
    if events[-1].type == "error":
        assert events[-1].kind in (ErrorKind.bad_response, ErrorKind.truncated)


def test_models_check_names_the_route_and_the_part_that_failed(srv, monkeypatch, tmp_path, capsys):
    import socket

    from core.answering import config as cfgmod
    from lineup.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{s.getsockname()[1]}")
    monkeypatch.setattr(cfgmod, "default_config_path", lambda: tmp_path / "none.toml")
    monkeypatch.setenv("RESP_KEY", "sk-resp-0123456789abcdef0123")
    path = tmp_path / "c.toml"
    path.write_text(f'[models.r]\nprovider = "openai-responses"\nmodel = "gpt-5"\nbase_url = "{srv.url}/v1"\n'
                    'api_key_env = "RESP_KEY"\nmax_retries = 0\n', encoding="utf-8")
    srv.script(Reply(text="ok"))
    assert main(["models", "--config", str(path), "--check", "--json"]) == 0
    check = json.loads(capsys.readouterr().out)["models"][0]["check"]
    assert check["ok"] and check["route"]["url"] == f"{srv.url}/v1/responses"
    assert check["route"]["auth"].startswith("Authorization: Bearer")
    srv.script(Reply(status=401, message="Incorrect API key provided"))
    assert main(["models", "--config", str(path), "--check"]) == 1
    out = capsys.readouterr().out
    assert f"POST {srv.url}/v1/responses" in out and "wrong: auth" in out


def test_a_responses_model_is_of_openais_family_and_litellms_openai_route():
    """Judge kinship and the canary's gateway plan read the provider name: a
    Responses model on OpenAI's own API is OpenAI's, and LiteLLM calls it
    `openai/MODEL` (its `openai-responses/` would be no provider at all)."""
    from core.answering.identity import family_of
    from core.decide.canary import deployment
    from providers.model_config import ModelConfig

    for url in (None, "https://api.openai.com/v1"):
        assert family_of("openai-responses", "prod-deployment", url) == family_of("openai", "prod-deployment", url)
        assert family_of("openai-responses", "prod-deployment", url) == "openai"
    cfg = ModelConfig(alias="r", provider="openai-responses", model="gpt-5", api_key_env="OPENAI_API_KEY")
    assert deployment("r", cfg).model == "openai/gpt-5"


def test_config_defaults_are_openais_and_a_local_server_needs_no_key(tmp_path):
    from core.answering.config import ConfigError, load_config
    from providers import make_provider

    path = tmp_path / "c.toml"
    path.write_text('[models.r]\nprovider = "openai-responses"\nmodel = "gpt-5"\n'
                    '[models.local]\nprovider = "openai-responses"\nmodel = "gpt-oss"\n'
                    'base_url = "http://127.0.0.1:8000/v1"\n', encoding="utf-8")
    models = load_config(path).models
    assert models["r"].api_key_env == "OPENAI_API_KEY" and models["local"].api_key_env is None
    provider = make_provider(models["r"])
    assert getattr(provider, "base_url", None) == "https://api.openai.com/v1"
    # a whole endpoint pasted as base_url is refused: lineup adds /responses itself
    path.write_text('[models.r]\nprovider = "openai-responses"\nmodel = "gpt-5"\n'
                    'base_url = "https://api.openai.com/v1/responses"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="ends with /responses"):
        load_config(path)
