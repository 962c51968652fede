"""Streams over TLS from a server that offers HTTP/2 (issue 32, item 1), on
a real HTTPS server on loopback (`tests/tls_server.py`, its own test CA).

lineup stays on HTTP/1.1 with keep-alive: through httpx, HTTP/2 leaves a
stream its reader stops early open (no RST_STREAM), so the answers a user
or a deadline cuts fill the connection's flow-control window until every
stream on it stalls (`benchmarks/bench_http2.py` measures it). These tests
check what a client of a real HTTPS provider gets instead: the TLS
handshake, HTTP/1.1 negotiated, connections reused and counted, a cut
stream's connection closed."""

from __future__ import annotations

import anyio
import pytest

from providers import make_provider
from providers import http as provider_http
from providers.events import StreamError
from providers.model_config import ModelConfig
from tests.server import cancelled_at_first_text, chat_request, collect_async
from tests.tls_server import TlsServer



@pytest.fixture
def srv(monkeypatch):
    with TlsServer(deltas=6, chunk="tls ") as server:
        monkeypatch.setenv("SSL_CERT_FILE", server.ca_file)   # the provider's context trusts its CA
        provider_http.shared_ssl_context.cache_clear()
        yield server
    provider_http.shared_ssl_context.cache_clear()


def _config(srv: TlsServer, **fields) -> ModelConfig:
    return ModelConfig(alias="tls", provider="openai", model="test-model", base_url=srv.base_url,
                       max_retries=0, **fields)


def test_sequential_answers_over_tls_share_one_http11_connection(srv):
    async def go() -> list:
        provider = make_provider(_config(srv))
        try:
            return [await collect_async(provider, chat_request()) for _ in range(20)]
        finally:
            await provider.aclose()

    results = anyio.run(go)
    assert [r.text for r, _ in results] == ["tls " * 6] * 20
    assert srv.connections == 1 and srv.versions == {"http/1.1": 1}   # h2 was offered, not taken
    opened = [r.connect_ms for r, _ in results if r.connect_ms]
    assert len(opened) == 1 and opened[0] > 0                         # the TLS set-up, measured once


def test_concurrent_answers_over_tls_open_no_more_connections_than_in_flight(srv):
    srv.delay = 0.005
    n = 6

    async def go() -> list:
        provider = make_provider(_config(srv, concurrency=n))
        out: list = []

        async def one() -> None:
            out.append(await collect_async(provider, chat_request()))

        try:
            for _ in range(3):
                async with anyio.create_task_group() as tg:
                    for _ in range(n):
                        tg.start_soon(one)
        finally:
            await provider.aclose()
        return out

    results = anyio.run(go)
    assert len(results) == 3 * n and all(r.error is None for r, _ in results)
    assert 1 < srv.connections <= n and set(srv.versions) == {"http/1.1"}


def test_a_cut_stream_over_tls_closes_its_connection_and_the_next_answer_opens_one(srv):
    srv.deltas, srv.delay = 400, 0.002

    async def go() -> tuple[list, object]:
        provider = make_provider(_config(srv))
        try:
            seen = await cancelled_at_first_text(provider)
            srv.deltas, srv.delay = 2, 0.0
            result, _ = await collect_async(provider, chat_request())
            return seen, result
        finally:
            await provider.aclose()

    seen, result = anyio.run(go)
    assert isinstance(seen[-1], StreamError) and seen[-1].kind == "cancelled"
    assert result.error is None and result.text == "tls " * 2
    assert srv.connections == 2 and srv.versions == {"http/1.1": 2}


def test_a_server_whose_certificate_is_not_trusted_is_a_connection_error(srv, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE")
    provider_http.shared_ssl_context.cache_clear()

    async def go():
        provider = make_provider(_config(srv))
        try:
            return await collect_async(provider, chat_request())
        finally:
            await provider.aclose()

    result, events = anyio.run(go)
    assert result.text == "" and isinstance(events[-1], StreamError)
    assert events[-1].kind == "connection" and "certificate" in events[-1].message.lower()
