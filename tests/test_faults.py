"""Provider faults through the app: a blind chat session and
`lineup run`, each with one faulty contestant beside healthy ones, over real
HTTP on loopback. For every fault: the record has the right status and kind,
the message is kept as it came while what a blind screen shows of it gives
no identity away, the others are unaffected, and nothing hangs (every wait
is bounded)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading

import anyio
import pytest

from core.answering.runner import Runner
from core.answering.sampleset import load_sample_set
from core.answering.sessions import ChatSession
from core.stats.votes import error_line
from providers.model_config import ModelConfig
from store import AsyncStore, Store
from tests.server import Reply, TestServer, free_port

SECRET_MODEL = "zebra-ultra-9"      # a model name that must never show before the vote
HANG_GUARD_S = 30                   # a bound on every test, not a speed assertion



# fault name -> (how to break the faulty contestant, expected status, expected kind)
FAULTS = {
    "refused": ("refused", "error", "connection"),
    "dns": ("dns", "error", "connection"),
    "tls": ("tls", "error", "connection"),
    "401": (Reply(status=401, message=f"invalid key for {SECRET_MODEL}"), "error", "auth"),
    "403": (Reply(status=403, message="forbidden"), "error", "auth"),
    "404": (Reply(status=404, message=f"The model `{SECRET_MODEL}` does not exist"), "error", "not_found"),
    "429-retry-after": (Reply(status=429, retry_after="0.05", message="slow down"), "error", "rate_limited"),
    "429-bare": (Reply(status=429, message="slow down"), "error", "rate_limited"),
    "500": (Reply(status=500, message="internal"), "error", "server"),
    "503": (Reply(status=503, message="unavailable"), "error", "server"),
    "529": (Reply(status=529, message="Overloaded"), "error", "overloaded"),
    "html-200": (Reply(fault="html", status=200), "error", "bad_response"),
    "stall": (Reply(text="partial answer then nothing", fault="stall", fault_after=2), "error", "timeout"),
    "cut-mid-json": (Reply(text="some text here", fault="malformed_json", fault_after=1), "error", None),
    "disconnect": (Reply(text="some text here", fault="disconnect", fault_after=2), "error", "truncated"),
    "no-terminator": (Reply(text="all the text", fault="no_terminator"), "error", "truncated"),
    "invalid-utf8": (Reply(text="abc", fault="invalid_utf8", fault_after=1), "error", "bad_response"),
    "1mb-line": (Reply(text="x" * 1_000_000, chunk_chars=1_000_000), "complete", None),
}


@contextlib.contextmanager
def _faulty_model(name: str, protocol: str):
    """A ModelConfig for the faulty contestant, and whatever serves it."""
    how = FAULTS[name][0]
    common = dict(alias="zebra", provider=protocol, model=SECRET_MODEL, max_retries=1,
                  read_timeout=0.5, connect_timeout=2)
    if how == "refused":
        yield ModelConfig(base_url=f"http://127.0.0.1:{free_port()}", **common), None
    elif how == "dns":
        yield ModelConfig(base_url="http://no-such-host.invalid:9", **common), None
    elif how == "tls":
        with _not_tls_server() as port:
            yield ModelConfig(base_url=f"https://127.0.0.1:{port}", **common), None
    else:
        with TestServer() as srv:
            srv.script(how)
            yield ModelConfig(base_url=srv.base_url(protocol), **common), srv


@contextlib.contextmanager
def _not_tls_server():
    """A port that answers a TLS ClientHello with plain HTTP, as a misconfigured
    proxy does: the client's handshake fails (SSL: wrong version number)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                with contextlib.suppress(OSError):
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        listener.close()


@pytest.fixture
def no_dns(monkeypatch):
    """Name lookups for *.invalid fail at once, without any traffic leaving the machine."""
    real = socket.getaddrinfo

    def fake(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)


def _healthy(srv: TestServer, alias: str) -> ModelConfig:
    return ModelConfig(alias=alias, provider="openai", model=f"{alias}-model", base_url=srv.base_url("openai"),
                       max_retries=0, read_timeout=5)


def _assert_identity_safe(kind: str | None, text: str | None) -> None:
    """The message is kept as it came (it may name the model: that is the
    record); what a blind screen shows of it before the vote names nothing."""
    assert text, "an error needs a message"
    shown = error_line(kind, text, hidden=True).lower()
    for word in (SECRET_MODEL, "zebra"):
        assert word not in shown, shown


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["openai", "openai-responses", "anthropic"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_in_blind_chat(fault, protocol, tmp_path, no_dns):
    _, want_status, want_kind = FAULTS[fault]
    with TestServer() as good, _faulty_model(fault, protocol) as (bad_cfg, _srv):
        good.script(Reply(text="healthy answer"))
        models = [bad_cfg, _healthy(good, "fine1"), _healthy(good, "fine2")]
        seen = []

        async def go():
            store = AsyncStore(Store.open(tmp_path / "f.db"))
            with anyio.fail_after(HANG_GUARD_S):
                session = await ChatSession.create(store, models, blind=True)
                await session.send("hello", on_update=seen.append)
                await session.aclose()
            loaded = await store.load_session(session.id)
            await store.aclose()
            return loaded

        loaded = anyio.run(go)
    by_alias = {o.contestant: o for o in loaded.outputs}
    bad = by_alias["zebra"]
    assert bad.status == want_status, (bad.status, bad.error_kind, bad.error_message)
    if want_kind is not None:
        assert bad.error_kind == want_kind, bad.error_message
    if want_status == "error":
        _assert_identity_safe(bad.error_kind, bad.error_message)
        assert bad.error_message and len(bad.error_message) < 600
    else:
        assert len(bad.text) == 1_000_000
    for event in (u.event for u in seen if u.event.type in ("error", "retrying")):
        _assert_identity_safe(event.kind.value, event.message)
    assert by_alias["fine1"].status == "complete" and by_alias["fine1"].text == "healthy answer"
    assert by_alias["fine2"].status == "complete"


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["refused", "401", "stall", "disconnect", "html-200", "invalid-utf8"])
def test_fault_in_run(fault, tmp_path, no_dns):
    _, want_status, want_kind = FAULTS[fault]
    set_path = tmp_path / "set.jsonl"
    set_path.write_text("\n".join(json.dumps({"id": f"c{i}", "category": "x", "prompt": f"p{i}"})
                                  for i in range(3)) + "\n")
    sample = load_sample_set(set_path)
    with TestServer() as good, _faulty_model(fault, "openai") as (bad_cfg, _srv):
        good.script(Reply(text="healthy answer"))
        models = [bad_cfg, _healthy(good, "fine")]

        async def go():
            store = AsyncStore(Store.open(tmp_path / "r.db"))
            with anyio.fail_after(HANG_GUARD_S):
                progress = await Runner(store, sample, models, concurrency=4).run()
            await store.aclose()
            return progress

        progress = anyio.run(go)
    assert progress.tallies["fine"].done == 3 and progress.tallies["fine"].failed == 0
    assert progress.tallies["zebra"].failed == 3
    if want_kind:
        assert dict(progress.tallies["zebra"].errors) == {want_kind: 3}
    store = Store.open(tmp_path / "r.db")
    (summary,) = store.list_sessions(kind="run")
    loaded = store.load_session(summary.id)
    store.close()
    for out in loaded.outputs:
        if out.contestant == "zebra":
            assert out.status == "error"
            _assert_identity_safe(out.error_kind, out.error_message)
