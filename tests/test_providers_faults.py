"""Every protocol against the loopback server's injected faults: status
errors, retries (before the first token only, honouring retry-after),
timeouts, broken bodies, in-stream errors, cancellation, and keys that never
leak into messages."""

from __future__ import annotations

from itertools import pairwise
import socket
import time

import anyio
import pytest

from providers import make_provider
from providers.events import ErrorKind
from providers.http import RetryPolicy
from tests.server import Reply, TestServer, chat_request, collect, model_config

FAST = RetryPolicy(base=0.001, cap=1.0)
# (provider, make_provider options): Gemini in both stream forms
PROTOCOLS = [("openai", {}), ("openai-responses", {}), ("anthropic", {}), ("ollama", {}), ("gemini", {"stream_form": "sse"}),
             ("gemini", {"stream_form": "json"})]
IDS = ["openai", "openai-responses", "anthropic", "ollama", "gemini-sse", "gemini-json"]
#: the protocols that send a key from `api_key_env` (the key tests run on these)
KEYED = list(zip(PROTOCOLS, IDS, strict=True))
try:   # the cloud protocols, where their extras are installed: they sign in another way (no key variable)
    from tests.cloud_support import FixedTokenCredentials

    PROTOCOLS += [("vertex", {"credentials": FixedTokenCredentials()}),
                  ("vertex-anthropic", {"credentials": FixedTokenCredentials()})]
    IDS += ["vertex", "vertex-anthropic"]
except pytest.skip.Exception:
    pass
try:
    pytest.importorskip("botocore")   # the bedrock extra: SigV4 signing

    PROTOCOLS.append(("bedrock", {}))
    IDS.append("bedrock")
except pytest.skip.Exception:
    pass
#: what a cloud protocol's model must name
CLOUD_FIELDS = {"vertex": {"project": "my-project", "region": "us-east5"},
                "vertex-anthropic": {"project": "my-project", "region": "us-east5"}, "bedrock": {"region": "us-east-1"}}
#: the protocols whose stream is text (Bedrock's is binary frames: a corrupted byte fails their CRC, and
#: the event-stream has no keep-alive)
TEXT = [(p, i) for p, i in zip(PROTOCOLS, IDS, strict=True) if p[0] != "bedrock"]


@pytest.fixture(scope="module")
def srv():
    with TestServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(srv, monkeypatch):
    srv.reset()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFAULTS")   # Bedrock's static test credentials
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "faults-SECRET-key-zyxwvut")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield


def run(srv, proto, opts, *replies, request=None, **cfg_fields):
    srv.script(*replies)
    cfg = model_config(srv, proto, **{**CLOUD_FIELDS.get(proto, {}), **cfg_fields})
    return collect(cfg, request, retry=FAST, **opts)


def terminal(events):
    assert events[-1].type in ("finish", "error")
    assert sum(e.type in ("finish", "error") for e in events) == 1
    return events[-1]


params = pytest.mark.parametrize(("proto", "opts"), PROTOCOLS, ids=IDS)
keyed = pytest.mark.parametrize(("proto", "opts"), [p for p, _ in KEYED], ids=[i for _, i in KEYED])
text_params = pytest.mark.parametrize(("proto", "opts"), [p for p, _ in TEXT], ids=[i for _, i in TEXT])


@params
def test_plain_answer_with_reasoning(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="The answer is 42.", reasoning="Let me think.",
                                                 usage=(11, 9, None)))
    assert terminal(events).type == "finish"
    assert result.text == "The answer is 42."
    assert result.reasoning == "Let me think."
    assert (result.input_tokens, result.output_tokens) == (11, 9)
    assert events[0].type == "sent"
    assert result.first_token_t is not None and result.first_token_t >= result.sent_t


@params
@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (403, "auth"), (404, "not_found"),
                                              (400, "bad_request")])
def test_client_errors_are_not_retried(srv, proto, opts, status, kind):
    """Except a 401 from Vertex AI: sent once more, with a token renewed
    before its expiry (tests/test_providers_vertex.py)."""
    result, events = run(srv, proto, opts, Reply(status=status, message="model xyz says no"), max_retries=3)
    err = terminal(events)
    assert err.type == "error" and err.kind == kind and err.status == status
    assert f"HTTP {status}" in err.message and "model xyz says no" in err.message
    renewed = status == 401 and proto.startswith("vertex")
    assert len(srv.requests) == (2 if renewed else 1)
    assert len([e for e in events if e.type == "retrying"]) == (1 if renewed else 0)


@params
@pytest.mark.parametrize(("status", "message", "kind"), [
    (500, "internal", "server"), (503, "busy", "server"), (503, "The model is overloaded", "overloaded"),
    (529, "Overloaded", "overloaded"), (429, "slow down", "rate_limited"), (408, "timeout", "server"),
    (409, "conflict", "server")])
def test_retryable_statuses_retry_then_report(srv, proto, opts, status, message, kind):
    result, events = run(srv, proto, opts, Reply(status=status, message=message), max_retries=2)
    err = terminal(events)
    assert err.kind == kind and err.status == status and message in err.message
    assert len(srv.requests) == 3
    retrying = [e for e in events if e.type == "retrying"]
    assert [r.attempt for r in retrying] == [1, 2] and all(r.kind == kind for r in retrying)
    assert [e.attempt for e in events if e.type == "sent"] == [1, 2, 3]


@params
def test_retry_then_success(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(status=503), Reply(status=529), Reply(text="finally"),
                         max_retries=3)
    assert terminal(events).type == "finish" and result.text == "finally"
    assert len(srv.requests) == 3 and result.attempts == 3


def test_retry_after_ms_is_honoured(srv):
    result, events = run(srv, "openai", {}, Reply(status=429, retry_after_ms="120"), Reply(text="ok"))
    assert result.text == "ok"
    (retry,) = [e for e in events if e.type == "retrying"]
    assert retry.delay == pytest.approx(0.12) and retry.kind == ErrorKind.rate_limited
    gap = srv.requests[1].t - srv.requests[0].t
    assert gap >= 0.11   # the client really waited (a lower bound: never flaky)


def test_retry_after_seconds_is_honoured_and_reported(srv):
    result, events = run(srv, "anthropic", {}, Reply(status=429, retry_after="1", message="rate limited"),
                         max_retries=0)
    err = terminal(events)
    assert err.kind == ErrorKind.rate_limited and err.retry_after == 1.0
    result, events = run(srv, "anthropic", {}, Reply(status=429, retry_after="0"), Reply(text="ok"))
    (retry,) = [e for e in events if e.type == "retrying"]
    assert retry.delay == 0 and result.text == "ok"


def test_retry_after_beyond_the_cap_stops_retrying(srv):
    result, events = run(srv, "openai", {}, Reply(status=429, retry_after="3600"), Reply(text="ok"), max_retries=5)
    err = terminal(events)
    assert err.kind == ErrorKind.rate_limited and err.retry_after == 3600
    assert len(srv.requests) == 1


@params
def test_no_retry_after_text_disconnect_keeps_partial_text(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="abcdefghijkl", chunk_chars=3, fault="disconnect",
                                                 fault_after=2), Reply(text="second attempt"), max_retries=3)
    err = terminal(events)
    assert err.kind == ErrorKind.truncated
    assert result.text == "abcdef"
    assert len(srv.requests) == 1


@params
def test_disconnect_before_first_token_is_retried(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="x", fault="disconnect", fault_after=0),
                         Reply(text="second attempt"), max_retries=2)
    assert terminal(events).type == "finish" and result.text == "second attempt"
    assert len(srv.requests) == 2


@params
def test_stall_past_read_timeout(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="abcdef", chunk_chars=2, fault="stall", fault_after=1),
                         read_timeout=0.3, max_retries=2)
    err = terminal(events)
    assert err.kind == ErrorKind.timeout and "0.3 s" in err.message
    assert result.text == "ab"
    assert len(srv.requests) == 1


def test_stall_before_headers_times_out(srv):
    result, events = run(srv, "openai", {}, Reply(fault="stall_headers"), read_timeout=0.3, max_retries=0)
    assert terminal(events).kind == ErrorKind.timeout


@params
def test_malformed_json_is_bad_response(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="abcdef", chunk_chars=2, fault="malformed_json",
                                                 fault_after=2))
    err = terminal(events)
    assert err.kind == ErrorKind.bad_response and "JSON" in err.message
    assert result.text == "abcd"


HUGE = b"7" * 5000   # valid JSON that Python refuses to read: past its limit on an integer's digits


@pytest.mark.parametrize(("proto", "opts", "ctype", "body"), [
    ("openai", {}, "text/event-stream", b'data: {"n": ' + HUGE + b"}\n\n"),
    ("anthropic", {}, "text/event-stream", b'event: message_start\ndata: {"n": ' + HUGE + b"}\n\n"),
    ("gemini", {"stream_form": "sse"}, "text/event-stream", b'data: {"n": ' + HUGE + b"}\n\n"),
    ("ollama", {}, "application/x-ndjson", b'{"n": ' + HUGE + b"}\n"),
], ids=["openai", "anthropic", "gemini-sse", "ollama"])
def test_json_python_cannot_read_is_bad_response_saying_why(srv, proto, opts, ctype, body):
    from tests.server import RawReply

    result, events = run(srv, proto, opts, RawReply(200, {"content-type": ctype}, body), max_retries=0)
    err = terminal(events)
    assert err.kind == ErrorKind.bad_response
    assert "malformed JSON" in err.message and "digits" in err.message, err.message


@params
def test_html_page_with_200_is_bad_response(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(fault="html"), max_retries=2)
    assert terminal(events).kind == ErrorKind.bad_response
    assert len(srv.requests) == 1


def test_html_error_page_with_502_is_a_retryable_server_error(srv):
    result, events = run(srv, "openai", {}, Reply(fault="html", status=502), max_retries=1)
    err = terminal(events)
    assert err.kind == ErrorKind.server and "HTML page (502 Bad Gateway)" in err.message
    assert len(srv.requests) == 2


@params
def test_missing_terminator_is_truncated(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="all of it", fault="no_terminator"), max_retries=2)
    err = terminal(events)
    assert err.kind == ErrorKind.truncated
    assert result.text == "all of it"
    assert len(srv.requests) == 1


@text_params
def test_invalid_utf8_is_bad_response(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="abcd", chunk_chars=2, fault="invalid_utf8", fault_after=1))
    err = terminal(events)
    assert err.kind == ErrorKind.bad_response and "UTF-8" in err.message
    assert result.text == "ab"


@params
@pytest.mark.parametrize("size", [1_000_000])
@pytest.mark.parametrize("one_line", [False, True], ids=["chunked", "one-line"])
def test_one_megabyte_answer(srv, proto, opts, size, one_line):
    text = ("lorem ipsum dolor sit amet é🦩 " * (size // 30 + 1))[:size]
    result, events = run(srv, proto, opts, Reply(text=text, chunk_chars=size if one_line else 16384))
    assert terminal(events).type == "finish"
    assert result.text == text


@params
def test_in_stream_error_after_text_is_reported_not_retried(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="abcdef", chunk_chars=2, fault="error_event", fault_after=2,
                                                 message="upstream broke"), Reply(text="again"), max_retries=3)
    err = terminal(events)
    expected = {"anthropic": ErrorKind.overloaded, "gemini": ErrorKind.overloaded, "vertex": ErrorKind.overloaded,
                "vertex-anthropic": ErrorKind.overloaded}.get(proto, ErrorKind.server)
    assert err.kind == expected and "upstream broke" in err.message
    assert result.text == "abcd"
    assert len(srv.requests) == 1


@params
def test_in_stream_error_before_text_is_retried(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="abc", fault="error_event", fault_after=0),
                         Reply(text="again"), max_retries=3)
    assert terminal(events).type == "finish" and result.text == "again"
    assert len(srv.requests) == 2


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as s:      # a loopback port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from providers.model_config import ModelConfig
    cfg = ModelConfig(alias="x", provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2)
    result, events = collect(cfg, retry=FAST)
    err = terminal(events)
    assert err.kind == ErrorKind.connection and "127.0.0.1" in err.message
    assert len([e for e in events if e.type == "retrying"]) == 2


def test_deltas_are_stamped_where_bytes_arrive(srv):
    result, events = run(srv, "openai", {}, Reply(text="aabbcc", chunk_chars=2, delay=0.05, first_delay=0.1))
    sent = events[0].t
    texts = [e for e in events if e.type == "text"]
    assert len(texts) == 3
    assert texts[0].t - sent >= 0.1                      # the first-token delay is visible
    assert all(b.t - a.t >= 0.045 for a, b in pairwise(texts))   # each delta has its own time


# --- keys ---------------------------------------------------------------------

SECRET = "sk-test-PLANTED-0123456789abcdef"


@keyed
def test_key_never_appears_in_any_event(srv, proto, opts, monkeypatch):
    monkeypatch.setenv("LINEUP_TEST_KEY", SECRET)
    echo = f"Incorrect API key provided: {SECRET}. Authorization: Bearer {SECRET}"
    replies = [Reply(status=401, message=echo), Reply(status=429, message=echo),
               Reply(text="abcd", chunk_chars=2, fault="error_event", message=echo)]
    for reply in replies:
        srv.reset()
        result, events = run(srv, proto, opts, reply, api_key_env="LINEUP_TEST_KEY", max_retries=1)
        assert events[-1].type == "error"
        for ev in events:
            dumped = ev.model_dump_json()
            assert SECRET not in dumped and SECRET[:16] not in dumped, ev
        # The key did go out, in the protocol's header (and never in the URL).
        req = srv.requests[0]
        header = {"openai": "authorization", "openai-responses": "authorization", "anthropic": "x-api-key", "ollama": "authorization",
                  "gemini": "x-goog-api-key"}[proto]
        assert SECRET in req.headers[header]
        assert SECRET not in req.path + req.query


@keyed
def test_no_auth_header_without_api_key_env(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="ok"))
    assert result.text == "ok"
    headers = srv.requests[0].headers
    assert not {"authorization", "x-api-key", "x-goog-api-key"} & set(headers)


@keyed
def test_unset_key_variable_fails_before_any_request(srv, proto, opts, monkeypatch):
    monkeypatch.delenv("LINEUP_TEST_UNSET_KEY", raising=False)
    result, events = run(srv, proto, opts, Reply(text="ok"), api_key_env="LINEUP_TEST_UNSET_KEY")
    (err,) = events
    assert err.type == "error" and err.kind == ErrorKind.config
    assert "LINEUP_TEST_UNSET_KEY" in err.message
    assert srv.requests == []


@keyed
def test_a_key_that_cannot_go_in_a_header_fails_cleanly_without_echo(srv, proto, opts, monkeypatch):
    monkeypatch.setenv("LINEUP_TEST_ODD_KEY", "sk-secret-\u00e9t\u00e9")
    result, events = run(srv, proto, opts, Reply(text="ok"), api_key_env="LINEUP_TEST_ODD_KEY")
    (err,) = events
    assert err.type == "error" and err.kind == ErrorKind.config
    assert "LINEUP_TEST_ODD_KEY" in err.message and "secret" not in err.message
    assert srv.requests == []


# --- cancellation -------------------------------------------------------------------

@params
@pytest.mark.parametrize("when", ["mid-stream", "before-first-token"])
def test_cancel_closes_the_connection_promptly(srv, proto, opts, when):
    """The server sees the connection closed within 100 ms of `cancel()`
    (measured on the server's side of the socket)."""
    if when == "mid-stream":
        reply = Reply(text="x" * 400, chunk_chars=2, delay=0.02)
    else:
        reply = Reply(text="never", first_delay=30)
    srv.script(reply)
    cfg = model_config(srv, proto)
    marks: dict[str, float] = {}

    async def main():
        provider = make_provider(cfg, retry=FAST, **opts)
        stream = provider.stream(chat_request())
        events = []
        try:
            async with anyio.create_task_group() as tg:
                async def canceller():
                    # wait until the server holds the request (and, mid-stream, text is flowing)
                    while not srv.requests or (when == "mid-stream" and not any(e.type == "text" for e in events)):
                        await anyio.sleep(0.005)
                    await anyio.sleep(0.05)
                    marks["cancel"] = time.perf_counter()
                    stream.cancel()

                tg.start_soon(canceller)
                async for ev in stream:
                    events.append(ev)
        finally:
            await provider.aclose()
        return events

    events = anyio.run(main)
    err = terminal(events)
    assert err.kind == ErrorKind.cancelled
    closed_at = srv.requests[0].wait_closed(5.0)
    assert closed_at is not None, "the server never saw the connection close"
    print(f"closed {1000 * (closed_at - marks['cancel']):.2f} ms after cancel")
    assert closed_at - marks["cancel"] < 0.100
    if when == "mid-stream":
        assert any(e.type == "text" for e in events)


@pytest.mark.parametrize("line", [
    b'data: {"choices": [{"index": 0, "delta": {"content": ["not", "a", "string"]}}]}\n\n',
    b'data: {"choices": ["not an object"]}\n\n',
    b'data: [1, 2, 3]\n\n',
])
def test_valid_json_in_the_wrong_shape_is_bad_response_not_a_crash(srv, line):
    from tests.server import RawReply

    ok = b'data: {"choices": [{"index": 0, "delta": {"content": "fine"}}]}\n\n'
    result, events = run(srv, "openai", {}, RawReply(200, {"content-type": "text/event-stream"}, ok + line,
                                                       cuts=[len(ok)]))
    err = terminal(events)
    assert err.kind == ErrorKind.bad_response
    assert result.text == "fine"


# --- a server that cuts the answer but still sends its terminator ----------


@params
@pytest.mark.parametrize("fault", ["no_finish", "role_only"])
def test_a_terminator_without_a_finish_reason_is_a_cut_answer(srv, proto, opts, fault):
    """llama-cpp-python ends an interrupted stream with `data: [DONE]` and no
    finish reason (sometimes after only the role chunk); every protocol's
    equivalent is reported as truncated, with the text kept, never as finished."""
    result, events = run(srv, proto, opts, Reply(text="partial answer", chunk_chars=4, fault=fault, fault_after=2),
                         max_retries=2)
    err = terminal(events)
    assert err.type == "error" and err.kind == ErrorKind.truncated, err
    assert "finish reason" in err.message
    assert result.finish_reason is None
    assert result.text == ("" if fault == "role_only" else "partial ")
    assert len(srv.requests) == 1      # text may have been shown: never retried silently


@params
def test_a_normal_end_still_finishes(srv, proto, opts):
    result, events = run(srv, proto, opts, Reply(text="whole", finish_reason=None))
    assert terminal(events).type == "finish"
    assert result.finish_reason is not None


# --- an answer has a deadline and a size limit ----------------------


@text_params
def test_keep_alives_do_not_hold_an_answer_past_its_deadline(srv, proto, opts):
    """Text, then only keep-alive comments (or blank lines): the read timeout
    never fires; the answer's deadline does, with the text kept."""
    result, events = run(srv, proto, opts, Reply(text="some text then", chunk_chars=5, fault="keepalive_stall",
                                                 fault_after=2, delay=0.05),
                         read_timeout=30, answer_deadline=0.6, max_retries=2)
    err = terminal(events)
    assert err.type == "error" and err.kind == ErrorKind.timeout, err
    assert "answer_deadline" in err.message
    assert result.text == "some text "
    assert len(srv.requests) == 1
    assert srv.requests[0].wait_closed(5) is not None      # and the connection was let go


@params
def test_an_answer_past_the_size_limit_is_cut_there(srv, proto, opts):
    text = "0123456789" * 300        # 3,000 bytes against a 1,024-byte limit
    result, events = run(srv, proto, opts, Reply(text=text, chunk_chars=100), max_answer_bytes=1024)
    err = terminal(events)
    assert err.type == "error" and err.kind == ErrorKind.truncated and "max_answer_bytes" in err.message
    assert result.text == text[:1024]


def test_the_size_limit_never_splits_a_character(srv):
    text = "é" * 2000                # 4,000 bytes
    result, events = run(srv, "openai", {}, Reply(text=text, chunk_chars=333), max_answer_bytes=1024)
    assert terminal(events).kind == ErrorKind.truncated
    assert result.text == "é" * 512


@pytest.mark.parametrize("proto", ["openai", "ollama"])
def test_a_gzip_bomb_is_cut_after_a_bounded_read(srv, proto):
    """A compressed body that inflates to gigabytes: reading stops after 16 x
    max_answer_bytes of decompressed body, whatever its shape (here one endless line)."""
    import gzip
    import zlib

    comp = zlib.compressobj(9, zlib.DEFLATED, 31)    # gzip framing
    head = b'data: {"choices": [{"delta": {"content": "' if proto == "openai" else b'{"message": {"content": "'
    block = b"A" * (1 << 20)
    body = comp.compress(head) + b"".join(comp.compress(block) for _ in range(256)) + comp.flush()
    assert len(gzip.decompress(body)) > 256 * 2**20 and len(body) < 2**20
    from tests.server import RawReply

    ctype = "text/event-stream" if proto == "openai" else "application/x-ndjson"
    result, events = run(srv, proto, {}, RawReply(200, {"content-type": ctype, "content-encoding": "gzip"}, body,
                                                  cuts=list(range(4096, len(body), 4096))),
                         max_answer_bytes=1 << 20)
    err = terminal(events)
    assert err.kind == ErrorKind.truncated and "the rest was not read" in err.message, err
