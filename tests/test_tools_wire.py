"""Tools and structured output on the wire, in each protocol's own form: what
the clients send (tools, the calls and results of a tool loop, native
structured output), what they read back from streamed tool calls whose
arguments are split across chunks (the loopback server), and, against the
recorded real requests of ../shared/conformance/, that a continuation after
a tool result is built the way the vendors' own SDKs build it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from providers.anthropic import ANSWER_TOOL
from providers.events import (
    ChatRequest,
    Message,
    ResponseFormat,
    ToolCall,
    ToolResultPart,
    ToolSpec,
)
from tests.server import Reply, TestServer, collect, model_config

PROTOCOLS = ["openai", "anthropic", "ollama", "gemini", "gemini-json"]
CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "conformance" / "wire"

WEATHER = ToolSpec(name="get_weather", description="Current weather for a city.",
                   parameters={"type": "object", "properties": {"city": {"type": "string"},
                                                                "unit": {"type": "string", "enum": ["c", "f"]}},
                               "required": ["city"]})
CALLS = [{"id": "call_a", "name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}},
         {"id": "call_b", "name": "get_weather", "arguments": {"city": "Zürich ☃", "unit": "f"}}]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}


@pytest.fixture(scope="module")
def srv():
    with TestServer() as server:
        yield server


def _cfg(srv: TestServer, proto: str):
    if proto == "gemini-json":
        return model_config(srv, "gemini", max_retries=0), {"stream_form": "json"}
    return model_config(srv, proto, max_retries=0), {}


def _run(srv: TestServer, proto: str, request: ChatRequest, *replies: Reply):
    srv.reset()
    srv.script(*replies)
    cfg, opts = _cfg(srv, proto)
    result, events = collect(cfg, request, **opts)
    return result, events, srv.requests[-1].json


def _request(**fields: Any) -> ChatRequest:
    return ChatRequest(model="test-model", messages=(Message(role="user", content="Weather in Paris?"),), **fields)


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_streamed_parallel_calls_with_split_arguments(srv, proto):
    result, events, _ = _run(srv, proto, _request(tools=(WEATHER,)),
                             Reply(text="Checking.", tool_calls=CALLS, chunk_chars=3))
    assert result.error is None, result.error
    assert result.text == "Checking."
    calls = [(c.name, c.arguments) for c in result.tool_calls]
    assert calls == [(c["name"], c["arguments"]) for c in CALLS]
    if proto in ("openai", "anthropic"):
        assert [c.id for c in result.tool_calls] == ["call_a", "call_b"]
    assert result.finish_reason == {"openai": "tool_calls", "anthropic": "tool_use", "ollama": "stop"}.get(proto, "STOP")
    assert sum(e.type in ("finish", "error") for e in events) == 1
    # the arguments really were split: more than one flushed chunk per call
    assert len(srv.requests[-1].chunk_times) > 2 * len(CALLS) + 2


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_tools_are_declared_in_the_protocols_form(srv, proto):
    _, _, body = _run(srv, proto, _request(tools=(WEATHER,)), Reply(text="ok"))
    if proto in ("openai", "ollama"):
        assert body["tools"] == [{"type": "function", "function": {
            "name": "get_weather", "description": WEATHER.description, "parameters": WEATHER.parameters}}]
    elif proto == "anthropic":
        assert body["tools"] == [{"name": "get_weather", "description": WEATHER.description,
                                  "input_schema": WEATHER.parameters}]
        assert "tool_choice" not in body
    else:
        assert body["tools"] == [{"functionDeclarations": [{"name": "get_weather", "description": WEATHER.description,
                                                            "parameters": WEATHER.parameters}]}]


def _loop_request(signature: str | None = None) -> ChatRequest:
    call_a = ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}, signature=signature)
    call_b = ToolCall(id=None, name="get_weather", arguments="not json")
    return ChatRequest(model="test-model", tools=(WEATHER,), messages=(
        Message(role="user", content="Weather in Paris and Rome?"),
        Message(role="assistant", content="Let me look.", tool_calls=(call_a, call_b)),
        Message(role="tool", content="", tool_results=(
            ToolResultPart(id="call_a", name="get_weather", content={"temp_c": 18}),
            ToolResultPart(id=None, name="get_weather", content="unknown city"))),
        Message(role="assistant", content="18 °C in Paris."),
        Message(role="user", content="And tomorrow?"),
    ))


def test_openai_continuation_after_tool_results(srv):
    _, _, body = _run(srv, "openai", _loop_request(), Reply(text="ok"))
    assert body["messages"][1:4] == [
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": None, "type": "function", "function": {"name": "get_weather", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": '{"temp_c": 18}'},
        {"role": "tool", "tool_call_id": None, "content": "unknown city"},
    ]
    assert body["messages"][4:] == [{"role": "assistant", "content": "18 °C in Paris."},
                                    {"role": "user", "content": "And tomorrow?"}]


def test_anthropic_continuation_after_tool_results(srv):
    _, _, body = _run(srv, "anthropic", _loop_request(), Reply(text="ok"))
    assert body["messages"][1:3] == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "call_a", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": None, "name": "get_weather", "input": {"value": "not json"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_a", "content": '{"temp_c": 18}'},
            {"type": "tool_result", "tool_use_id": None, "content": "unknown city"}]},
    ]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant", "user"]


def test_anthropic_merges_results_and_the_next_user_message():
    from providers.anthropic import _append

    messages: list[dict[str, Any]] = []
    _append(messages, "user", [{"type": "tool_result", "tool_use_id": "x", "content": "1"}])
    _append(messages, "user", "next question")
    assert messages == [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "1"},
                                                     {"type": "text", "text": "next question"}]}]


def test_gemini_continuation_sends_signatures_and_responses(srv):
    _, _, body = _run(srv, "gemini", _loop_request(signature="c2lnbmF0dXJl"), Reply(text="ok"))
    assert body["contents"][1:3] == [
        {"role": "model", "parts": [
            {"text": "Let me look."},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_a"},
             "thoughtSignature": "c2lnbmF0dXJl"},
            {"functionCall": {"name": "get_weather", "args": {"value": "not json"}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"temp_c": 18}, "id": "call_a"}},
            {"functionResponse": {"name": "get_weather", "response": {"output": "unknown city"}}}]},
    ]


def test_ollama_continuation_after_tool_results(srv):
    _, _, body = _run(srv, "ollama", _loop_request(), Reply(text="ok"))
    assert body["messages"][1:4] == [
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"function": {"name": "get_weather", "arguments": {"value": "not json"}}}]},
        {"role": "tool", "content": '{"temp_c": 18}', "tool_name": "get_weather"},
        {"role": "tool", "content": "unknown city", "tool_name": "get_weather"},
    ]


def test_gemini_reads_the_thought_signature_of_a_call(srv):
    calls = [{"name": "get_weather", "arguments": {"city": "Oslo"}, "signature": "c2ln"}]
    result, _, _ = _run(srv, "gemini", _request(tools=(WEATHER,)), Reply(text="", tool_calls=calls))
    (call,) = result.tool_calls
    assert (call.name, call.arguments, call.signature, call.id) == ("get_weather", {"city": "Oslo"}, "c2ln", None)


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_native_structured_output(srv, proto):
    answer = json.dumps({"name": "Rex", "age": 3})
    fmt = ResponseFormat(name="dog", schema=SCHEMA)
    result, _, body = _run(srv, proto, _request(response_format=fmt), Reply(text=answer, chunk_chars=5))
    assert result.error is None, result.error
    assert result.text == answer and json.loads(result.text) == {"name": "Rex", "age": 3}
    assert result.tool_calls == []
    if proto == "openai":
        assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "dog", "schema": SCHEMA}}
    elif proto == "anthropic":
        assert body["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL}
        assert body["tools"][-1]["name"] == ANSWER_TOOL and body["tools"][-1]["input_schema"] == SCHEMA
        assert result.finish_reason == "tool_use"
    elif proto == "ollama":
        assert body["format"] == SCHEMA
    else:
        assert body["generationConfig"]["responseMimeType"] == "application/json"
        assert body["generationConfig"]["responseSchema"] == SCHEMA


def test_openai_strict_is_sent_only_when_asked(srv):
    fmt = ResponseFormat(schema=SCHEMA, strict=True)
    _, _, body = _run(srv, "openai", _request(response_format=fmt), Reply(text="{}"))
    assert body["response_format"]["json_schema"] == {"name": "response", "schema": SCHEMA, "strict": True}


@pytest.mark.parametrize("proto,field", [("openai", "response_format"), ("ollama", "format"),
                                         ("gemini", "responseSchema"), ("anthropic", "tool_choice")])
def test_a_server_without_structured_output_refuses_it_by_name(srv, proto, field):
    fmt = ResponseFormat(schema=SCHEMA)
    result, _, _ = _run(srv, proto, _request(response_format=fmt), Reply(text="{}", refuse_fields=(field,)))
    assert result.error is not None and result.error.kind.value == "bad_request"
    assert result.error.status == 400 and field in result.error.message
    # without it the same server answers
    result, _, _ = _run(srv, proto, _request(), Reply(text="hi", refuse_fields=(field,)))
    assert result.error is None and result.text == "hi"


# --------------------------------------------------------------------------- recorded real requests

def _recorded(name: str) -> dict[str, Any]:
    path = CORPUS / f"{name}.json"
    if not path.exists():
        pytest.skip(f"conformance corpus not found at {CORPUS}")
    return json.loads(path.read_text(encoding="utf-8"))


def test_openai_continuation_matches_the_recorded_sdk_request(srv):
    case = _recorded("openai-compatible-openai-tool-use-2")
    rec = case["request"]["body"]
    (fn,) = [t["function"] for t in rec["tools"]]
    call = rec["messages"][2]["tool_calls"][0]
    request = ChatRequest(model=rec["model"], tools=(ToolSpec(**fn),), messages=(
        Message(role="user", content=rec["messages"][0]["content"]),
        Message(role="assistant", content="", tool_calls=(ToolCall(
            id=call["id"], name=call["function"]["name"], arguments=json.loads(call["function"]["arguments"])),)),
        Message(role="tool", content="", tool_results=(ToolResultPart(
            id=call["id"], name="multiply", content=rec["messages"][3]["content"]),)),
    ))
    _, _, body = _run(srv, "openai", request, Reply(text="ok"))
    assert body["tools"] == rec["tools"]
    assert body["messages"][-1] == rec["messages"][-1]
    sent_call = body["messages"][1]["tool_calls"][0]
    assert {**sent_call, "function": {**sent_call["function"], "arguments": json.loads(
        sent_call["function"]["arguments"])}} == {**call, "function": {
            **call["function"], "arguments": json.loads(call["function"]["arguments"])}}


def test_anthropic_continuation_matches_the_recorded_sdk_request(srv):
    case = _recorded("anthropic-tool-chain-2")
    rec = case["request"]["body"]
    (tool,) = rec["tools"]
    use = rec["messages"][1]["content"][0]
    result = rec["messages"][2]["content"][0]
    request = ChatRequest(model=rec["model"], tools=(ToolSpec(name=tool["name"], description=tool["description"],
                                                              parameters=tool["input_schema"]),), messages=(
        Message(role="user", content=rec["messages"][0]["content"][0]["text"]),
        Message(role="assistant", content="", tool_calls=(ToolCall(id=use["id"], name=use["name"],
                                                                   arguments=use["input"]),)),
        Message(role="tool", content="", tool_results=(ToolResultPart(id=result["tool_use_id"], name=use["name"],
                                                                      content=result["content"]),)),
    ))
    _, _, body = _run(srv, "anthropic", request, Reply(text="ok"))
    assert body["tools"] == rec["tools"]
    assert body["messages"][1:] == rec["messages"][1:]


def test_gemini_continuation_matches_the_recorded_request(srv):
    case = _recorded("gemini-tools-thought-signatures-2")
    rec = case["request"]["body"]
    (decl,) = rec["tools"][0]["functionDeclarations"]
    model_parts = rec["contents"][1]["parts"]
    call_part = next(p for p in model_parts if "function_call" in p)
    response = rec["contents"][2]["parts"][0]["function_response"]
    request = ChatRequest(model="m", tools=(ToolSpec(**decl),), messages=(
        Message(role="user", content=rec["contents"][0]["parts"][0]["text"]),
        Message(role="assistant", content="", tool_calls=(ToolCall(
            id=None, name=call_part["function_call"]["name"], arguments=call_part["function_call"]["args"],
            signature=call_part["thoughtSignature"]),)),
        Message(role="tool", content="", tool_results=(ToolResultPart(
            id=None, name=response["name"], content=response["response"]),)),
    ))
    _, _, body = _run(srv, "gemini", request, Reply(text="ok"))
    assert body["tools"] == rec["tools"]
    # the recording is snake_case (the REST API takes both spellings); the same content in camelCase
    sent_call = body["contents"][1]["parts"][0]
    assert sent_call == {"functionCall": call_part["function_call"], "thoughtSignature": call_part["thoughtSignature"]}
    assert body["contents"][2] == {"role": "user", "parts": [{"functionResponse": response}]}
