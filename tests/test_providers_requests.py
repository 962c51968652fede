"""What each protocol puts on the wire (as the loopback server received it),
provider selection and defaults, and the small HTTP helpers (retry-after,
status mapping, key scrubbing, backoff)."""

from __future__ import annotations

import email.utils
import importlib.util
import time

import httpx
import pytest

from providers import make_provider
from providers.catalogue import PROVIDER_DEFAULT_BASE_URL
from providers.events import ChatRequest, ErrorKind, ImagePart, Message, SamplingParams
from providers.http import RetryPolicy, kind_for_status, parse_retry_after, scrub
from providers.model_config import ModelConfig
from tests.server import Reply, TestServer, collect, model_config

IMG = ImagePart(mime="image/png", data="iVBORw0KGgo=")
REQUEST = ChatRequest(
    model="test-model",
    system="Be brief.",
    messages=(Message(role="user", content="What is this?", images=(IMG,)),
              Message(role="assistant", content="A pixel."),
              Message(role="user", content="Sure?")),
    params=SamplingParams(temperature=0.3, top_p=0.9, max_tokens=64, seed=7, stop=("END",)),
)


@pytest.fixture(scope="module")
def srv():
    with TestServer() as server:
        yield server


def sent(srv, provider, request=REQUEST, opts=None, **fields):
    srv.reset()
    srv.script(Reply(text="ok"))
    result, events = collect(model_config(srv, provider, **fields), request, **(opts or {}))
    assert result.text == "ok", events
    (req,) = srv.requests
    return req


def test_openai_body(srv):
    req = sent(srv, "openai", extra_body={"reasoning_effort": "low"})
    assert req.path == "/v1/chat/completions"
    assert req.headers["content-type"] == "application/json"
    assert req.json == {
        "model": "test-model", "stream": True, "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                         {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
            {"role": "assistant", "content": "A pixel."},
            {"role": "user", "content": "Sure?"}],
        "temperature": 0.3, "top_p": 0.9, "max_tokens": 64, "seed": 7, "stop": ["END"],
        "reasoning_effort": "low",
    }


def test_anthropic_body_and_headers(srv):
    req = sent(srv, "anthropic")
    assert req.path == "/v1/messages"
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert req.json == {
        "model": "test-model", "max_tokens": 64, "stream": True, "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "text", "text": "What is this?"}]},
            {"role": "assistant", "content": "A pixel."},
            {"role": "user", "content": "Sure?"}],
        "temperature": 0.3, "top_p": 0.9, "stop_sequences": ["END"],
    }


def test_anthropic_requires_max_tokens_default(srv):
    req = sent(srv, "anthropic", request=ChatRequest(model="m", messages=(Message(role="user", content="hi"),)))
    assert req.json["max_tokens"] == 1024
    assert "system" not in req.json and "temperature" not in req.json


def test_ollama_body(srv):
    req = sent(srv, "ollama")
    assert req.path == "/api/chat"
    assert req.json == {
        "model": "test-model", "stream": True,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is this?", "images": ["iVBORw0KGgo="]},
            {"role": "assistant", "content": "A pixel."},
            {"role": "user", "content": "Sure?"}],
        "options": {"temperature": 0.3, "top_p": 0.9, "num_predict": 64, "seed": 7, "stop": ["END"]},
    }


@pytest.mark.parametrize("form", ["sse", "json"])
def test_gemini_body_and_url(srv, form):
    req = sent(srv, "gemini", opts={"stream_form": form}, model="models/gemini-2.5-flash",
               extra_body={"generationConfig": {"thinkingConfig": {"includeThoughts": True}}})
    assert req.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert req.query == ("alt=sse" if form == "sse" else "")
    assert req.json == {
        "contents": [
            {"role": "user", "parts": [{"text": "What is this?"},
                                       {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]},
            {"role": "model", "parts": [{"text": "A pixel."}]},
            {"role": "user", "parts": [{"text": "Sure?"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"temperature": 0.3, "topP": 0.9, "maxOutputTokens": 64, "seed": 7,
                             "stopSequences": ["END"], "thinkingConfig": {"includeThoughts": True}},
    }


def test_model_params_fill_in_what_the_request_leaves_unset(srv):
    request = ChatRequest(model="m", messages=(Message(role="user", content="hi"),),
                          params=SamplingParams(temperature=0.9))
    req = sent(srv, "openai", request=request, params=SamplingParams(temperature=0.2, max_tokens=5))
    assert req.json["temperature"] == 0.9 and req.json["max_tokens"] == 5


def test_non_streamed_json_answer_is_read(srv):
    srv.reset()
    body = ('{"choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}, '
            '"finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}').encode()
    from tests.server import RawReply
    srv.script(RawReply(200, {"content-type": "application/json"}, body, cuts=[10, 50]))
    result, events = collect(model_config(srv, "openai"))
    assert (result.text, result.finish_reason, result.input_tokens, result.output_tokens) == ("whole", "stop", 3, 1)


# --- provider selection --------------------------------------------------------------

@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama", "gemini"])
def test_make_provider_and_default_base_urls(provider):
    p = make_provider(ModelConfig(alias="a", provider=provider, model="m"))
    assert p.base_url == PROVIDER_DEFAULT_BASE_URL[provider]
    assert type(p).__module__ == f"providers.{provider}"
    q = make_provider(ModelConfig(alias="a", provider=provider, model="m", base_url="http://127.0.0.1:1/x/"))
    assert q.base_url == "http://127.0.0.1:1/x"


@pytest.mark.skipif(importlib.util.find_spec("providers.demo") is None, reason="demo provider not written yet")
def test_make_provider_demo():
    from providers.demo import DEMO_STYLES

    p = make_provider(ModelConfig(alias="demo/x", provider="demo", model=next(iter(DEMO_STYLES))))
    assert type(p).__name__ == "DemoProvider" and p.is_demo


def test_gemini_rejects_unknown_stream_form():
    with pytest.raises(ValueError, match="stream_form"):
        make_provider(ModelConfig(alias="g", provider="gemini", model="m"), stream_form="ndjson")


# --- helpers -------------------------------------------------------------------------

def test_parse_retry_after_forms():
    h = httpx.Headers
    assert parse_retry_after(h({"retry-after": "7"})) == 7
    assert parse_retry_after(h({"retry-after": "1.5"})) == 1.5
    assert parse_retry_after(h({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after(h({"retry-after": date}), now=now) == pytest.approx(30, abs=1)
    assert parse_retry_after(h({"retry-after": email.utils.formatdate(now - 60, usegmt=True)}), now=now) == 0
    assert parse_retry_after(h({"retry-after": "soon"})) is None
    assert parse_retry_after(h({})) is None


@pytest.mark.parametrize(("status", "body", "kind"), [
    (401, "", ErrorKind.auth), (403, "", ErrorKind.auth), (404, "", ErrorKind.not_found),
    (408, "", ErrorKind.server), (409, "", ErrorKind.server), (429, "overloaded", ErrorKind.rate_limited),
    (500, "", ErrorKind.server), (502, "", ErrorKind.server), (503, "Overloaded", ErrorKind.overloaded),
    (529, "", ErrorKind.overloaded), (400, "", ErrorKind.bad_request), (422, "", ErrorKind.bad_request)])
def test_kind_for_status(status, body, kind):
    assert kind_for_status(status, body) == kind


def test_scrub_removes_key_and_auth_values():
    key = "sk-live-abcdef123456"
    text = scrub(f"bad key {key}; Authorization: Bearer {key}; x-api-key: other-secret", key)
    assert key not in text and "other-secret" not in text and "[redacted]" in text


def test_backoff_is_bounded_and_honours_server_waits():
    policy = RetryPolicy(base=0.5, factor=2, cap=3, jitter=0.25)
    delays = [policy.delay(n, None) for n in range(1, 8)]
    assert 0.5 <= delays[0] <= 0.625 and 1.0 <= delays[1] <= 1.25
    assert all(d is not None and d <= 3 for d in delays)
    assert policy.delay(1, 2.0) == 2.0
    assert policy.delay(1, 10.0) is None
