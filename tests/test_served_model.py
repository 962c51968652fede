"""The model id and `system_fingerprint` the provider returned, parsed from
each wire protocol's stream into `ServedBy` and kept by `StreamResult`: over
real HTTP on loopback, and from the recorded real streams (an independent
oracle: the last such value written in the body)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from providers.events import SERVED_LIMIT, ServedBy
from tests.server import RawReply, Reply, TestServer, chat_request, collect, model_config
from tests.conformance_support import CASES, load, replay

PROTOCOLS = ["openai", "openai-responses", "anthropic", "ollama", "gemini"]


@pytest.fixture(scope="module")
def srv():
    with TestServer() as server:
        yield server


@pytest.mark.parametrize("provider", PROTOCOLS)
def test_each_protocol_reports_the_served_model(srv: TestServer, provider: str) -> None:
    srv.script(Reply(text="one two three four", served_model="snapshot-2025-01-01", system_fingerprint="fp_1"))
    result, events = collect(model_config(srv, provider, max_retries=0), chat_request())
    assert result.error is None
    assert result.served_model == "snapshot-2025-01-01"
    # only the OpenAI-compatible protocol has a fingerprint
    assert result.system_fingerprint == ("fp_1" if provider == "openai" else None)
    served = [e for e in events if isinstance(e, ServedBy)]
    assert len(served) == 1, served            # said once, not once per chunk
    assert events[-1].type == "finish"         # still exactly one terminal event, last


def test_a_fingerprint_that_changes_mid_stream_is_reported_again_and_the_last_wins(srv: TestServer) -> None:
    def chunk(text: str, fp: str | None) -> str:
        obj = {"model": "m-1", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        if fp is not None:
            obj["system_fingerprint"] = fp
        return "data: " + json.dumps(obj) + "\n\n"

    body = (chunk("a", None) + chunk("b", "fp_a") + chunk("c", "fp_a") + chunk("d", "fp_b")
            + 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    srv.script(RawReply(200, {"content-type": "text/event-stream"}, body.encode()))
    result, events = collect(model_config(srv, "openai", max_retries=0), chat_request())
    served = [(e.model, e.system_fingerprint) for e in events if isinstance(e, ServedBy)]
    assert served == [("m-1", None), ("m-1", "fp_a"), ("m-1", "fp_b")]   # what each changed chunk said
    assert (result.served_model, result.system_fingerprint) == ("m-1", "fp_b")


def test_values_that_are_not_strings_are_ignored_and_long_ones_cut(srv: TestServer) -> None:
    long = "x" * (SERVED_LIMIT + 50)
    body = ("data: " + json.dumps({"model": 12, "system_fingerprint": ["no"], "choices": [
        {"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}) + "\n\n"
            + "data: " + json.dumps({"model": long, "choices": [
                {"index": 0, "delta": {}, "finish_reason": "stop"}]}) + "\n\ndata: [DONE]\n\n")
    srv.script(RawReply(200, {"content-type": "text/event-stream"}, body.encode()))
    result, _ = collect(model_config(srv, "openai", max_retries=0), chat_request())
    assert result.text == "hi"
    assert result.served_model == "x" * SERVED_LIMIT
    assert result.system_fingerprint is None


def test_a_retried_attempt_reports_its_own_model(srv: TestServer) -> None:
    # the first attempt names a model, then fails before any text (retried); the second names another
    srv.script(Reply(fault="error_event", fault_after=0, error_type="overloaded_error", served_model="first"),
               Reply(text="ok", served_model="second"))
    cfg = model_config(srv, "anthropic", max_retries=1)
    from providers.http import RetryPolicy

    result, _ = collect(cfg, chat_request(), retry=RetryPolicy(base=0.001))
    assert result.error is None and result.text == "ok"
    assert result.served_model == "second"


# --- the recorded real streams ---------------------------------------------------

_KEY = {"openai-compatible": "model", "anthropic": "model", "ollama": "model", "gemini": "modelVersion"}


def _last_string(body: str, key: str) -> str | None:
    """The last non-empty JSON string value of `key` written anywhere in `body`."""
    found = [json.loads(f'"{m}"') for m in re.findall(rf'"{key}"\s*:\s*"((?:[^"\\]|\\.)*)"', body)]
    found = [f for f in found if f]
    return found[-1] if found else None


@pytest.mark.skipif(not CASES, reason="conformance corpus not found (third-party data kept outside the repo)")
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_recorded_streams_report_the_model_they_name(path: Path) -> None:
    case = load(path)
    with TestServer() as server:
        result, _ = anyio.run(replay, server, case, None)
    body = case["response"]["body"] if case["response"]["status"] == 200 else ""
    assert result.served_model == _last_string(body, _KEY[case["provider"]]), case["name"]
    fingerprint = _last_string(body, "system_fingerprint") if case["provider"] == "openai-compatible" else None
    assert result.system_fingerprint == fingerprint, case["name"]
