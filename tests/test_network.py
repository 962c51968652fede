"""httpx over asyncio's streams (`providers.network`): the providers' pools
read through it, and every failure is the one httpx gave through anyio.

Over real sockets on loopback: the test server (`tests/server.py`), the TLS
server (`tests/tls_server.py`), and for what those cannot do (a reset, a
peer that never reads, an idle connection closed) a raw asyncio server here."""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import threading
from collections.abc import Awaitable, Callable, Iterator

import anyio
import httpcore
import httpx
import pytest

from providers import make_provider, network
from tests.server import Reply, TestServer, chat_request, collect_async, free_port, model_config
from tests.tls_server import TlsServer

LIMITS = httpx.Limits(max_connections=4, max_keepalive_connections=4)
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
BODY = {"model": "test-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def _chat(srv: TestServer) -> tuple[str, dict]:
    """A streamed OpenAI chat request to the test server: its URL and body."""
    return srv.base_url("openai") + "/chat/completions", BODY


def _client(verify: object = True, **limits: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=network.transport(httpx.Limits(**limits) if limits else LIMITS,
                                                         verify))  # type: ignore[arg-type]


class RawServer:
    """An asyncio TCP server in its own thread, each connection handed to
    `handle(reader, writer)`; `connections` counts those accepted."""

    def __init__(self, handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]) -> None:
        self.handle = handle
        self.connections = 0
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.closed = threading.Event()   # set when a handler saw its client hang up

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def __enter__(self) -> RawServer:
        ready = threading.Event()

        async def main() -> None:
            self._stop = asyncio.Event()
            server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            async with server:
                await self._stop.wait()
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        self.thread = threading.Thread(target=lambda: self.loop.run_until_complete(main()), daemon=True)
        self.thread.start()
        assert ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(10)
        self.loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


@pytest.fixture(scope="module")
def srv() -> Iterator[TestServer]:
    with TestServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(srv: TestServer) -> None:
    srv.reset()


def test_a_providers_pool_reads_its_answers_through_asyncio_streams(srv):
    async def go() -> object:
        provider = make_provider(model_config(srv, "openai", max_retries=0))
        try:
            url, body = _chat(srv)
            async with provider.client.stream("POST", url, json=body) as response:
                assert (await response.aread()).endswith(b"data: [DONE]\n\n")
                return response.extensions["network_stream"]
        finally:
            await provider.aclose()

    assert isinstance(anyio.run(go), network.AsyncioStream)


def test_a_proxy_named_in_the_environment_is_still_used(srv, monkeypatch):
    """A client given a transport ignores the proxy variables: with one set,
    the pool leaves the transport to httpx, which goes through the proxy
    (here a closed port, so the answer is a connection error, not the
    server's text)."""
    port = free_port()
    monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)

    async def go() -> object:
        provider = make_provider(model_config(srv, "openai", max_retries=0))
        try:
            result, _ = await collect_async(provider, chat_request())
            return result
        finally:
            await provider.aclose()

    result = anyio.run(go)
    assert result.error is not None and result.error.kind == "connection", result.error
    assert srv.requests == []


def test_an_answer_streamed_over_asyncio_streams_arrives_whole_and_the_connection_is_reused(srv):
    srv.script(Reply(text="x" * 400, chunk_chars=3))

    async def go() -> list[str]:
        async with _client() as client:
            texts = []
            for _ in range(5):
                url, body = _chat(srv)
                async with client.stream("POST", url, json=body) as response:
                    texts.append("".join([chunk async for chunk in response.aiter_text()]))
            return texts

    texts = anyio.run(go)
    assert ["".join(re.findall(r'"content": "(x*)"', t)) for t in texts] == ["x" * 400] * 5
    assert srv.connections == 1


def test_a_read_past_its_deadline_is_a_read_timeout(srv):
    srv.script(Reply(text="abcdefgh", fault="stall", fault_after=1))

    async def go() -> None:
        async with _client() as client:
            url, body = _chat(srv)
            async with client.stream("POST", url, json=body, timeout=httpx.Timeout(5, read=0.3)) as response:
                async for _ in response.aiter_raw():
                    pass

    with pytest.raises(httpx.ReadTimeout):
        anyio.run(go)
    assert srv.requests[0].wait_closed(5) is not None   # the timed-out connection was hung up


def test_a_connection_reset_mid_body_is_a_read_error():
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\nabcd\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # close sends RST
        writer.transport.abort()

    async def go(url: str) -> bytes:
        async with _client() as client, client.stream("GET", url) as response:
            return b"".join([chunk async for chunk in response.aiter_raw()])

    with RawServer(reset) as raw, pytest.raises(httpx.ReadError):
        anyio.run(go, raw.url)


def test_a_refused_connection_is_a_connect_error():
    port = free_port()

    async def go() -> None:
        async with _client() as client:
            await client.get(f"http://127.0.0.1:{port}/")

    with pytest.raises(httpx.ConnectError):
        anyio.run(go)


def test_a_large_body_is_sent_whole_to_a_slow_reader():
    """16 MiB, far past the socket buffers: the writer waits for the peer
    (flow control) and every byte arrives."""
    got = []

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
                     .split(b":")[1])
        total = 0
        while total < length:
            total += len(await reader.read(65536))
            await asyncio.sleep(0.001)
        got.append(total)
        writer.write(OK)
        await writer.drain()

    async def go(url: str) -> int:
        async with _client() as client:
            return (await client.post(url, content=b"x" * (16 << 20), timeout=30)).status_code

    with RawServer(slow) as raw:
        assert anyio.run(go, raw.url) == 200
    assert got == [16 << 20]


def test_a_peer_that_never_reads_gives_a_write_timeout():
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    async def go(url: str) -> None:
        async with _client() as client:
            await client.post(url, content=b"x" * (64 << 20), timeout=httpx.Timeout(5, write=0.5))

    with RawServer(deaf) as raw, pytest.raises(httpx.WriteTimeout):
        anyio.run(go, raw.url)


def test_an_idle_connection_the_server_closed_is_not_used_again():
    """The server answers, then hangs up the kept-alive connection: the next
    request opens a new one and is answered, no error."""
    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK)          # (no "connection: close": the client keeps it)
        await writer.drain()
        await asyncio.sleep(0.05)

    async def go(url: str) -> list[int]:
        async with _client() as client:
            first = (await client.get(url)).status_code
            await asyncio.sleep(0.3)          # the server has closed it by now
            return [first, (await client.get(url)).status_code]

    with RawServer(once) as raw:
        assert anyio.run(go, raw.url) == [200, 200]
        assert raw.connections == 2


def test_a_cancelled_read_hangs_up_at_once(srv):
    srv.script(Reply(text="x" * 4000, chunk_chars=2, delay=0.02))

    async def go() -> int:
        async with _client() as client:
            url, body = _chat(srv)
            seen = 0
            with anyio.move_on_after(0.3):
                async with client.stream("POST", url, json=body) as response:
                    async for _ in response.aiter_raw():
                        seen += 1
            return seen

    assert anyio.run(go) > 0
    assert srv.requests[0].wait_closed(5) is not None


def test_tls_over_asyncio_streams_and_a_certificate_not_trusted_is_a_connect_error():
    with TlsServer(protocols=("http/1.1",), deltas=3) as tls:
        async def go(verify: object) -> tuple[str, object]:
            async with _client(verify) as client:
                async with client.stream("POST", tls.base_url + "/chat/completions", json=BODY) as response:
                    text = (await response.aread()).decode()
                    stream = response.extensions["network_stream"]
                    return text, stream.get_extra_info("ssl_object")

        text, ssl_object = anyio.run(go, tls.client_context())
        assert "[DONE]" in text
        assert ssl_object is not None and ssl_object.selected_alpn_protocol() == "http/1.1"
        with pytest.raises(httpx.ConnectError):
            anyio.run(go, True)        # the system's CAs do not know the test CA


def test_with_socket_options_connections_go_through_anyio(srv):
    async def go() -> object:
        pool = httpcore.AsyncConnectionPool(network_backend=network.AsyncioBackend(),
                                            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        async with pool:
            response = await pool.request("GET", srv.base_url("openai") + "/models")
            return response.extensions["network_stream"]

    stream = anyio.run(go)
    assert not isinstance(stream, network.AsyncioStream)
    assert isinstance(stream, httpcore.AsyncNetworkStream)


def test_under_trio_connections_go_through_anyio(srv):
    pytest.importorskip("trio", reason="trio is not installed: the other event loop cannot be run")

    async def go() -> object:
        async with _client() as client:
            response = await client.get(srv.base_url("openai") + "/models")
            return response.extensions["network_stream"]

    assert not isinstance(anyio.run(go, backend="trio"), network.AsyncioStream)
