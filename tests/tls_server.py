"""An HTTPS server on 127.0.0.1 that streams OpenAI chat completions over
HTTP/2 or HTTP/1.1, whichever the TLS handshake settles (ALPN), with a
certificate from its own test CA (`trustme`). For the HTTP/2 tests and
benchmark (issue 32, item 1): what lineup's client does when a server
offers HTTP/2, and what HTTP/2 through httpx would cost and do.

    with TlsServer() as srv:                     # own thread + asyncio loop, ephemeral port
        srv.url                                  # "https://localhost:PORT"
        srv.base_url                             # srv.url + "/v1" (an OpenAI-compatible base URL)
        srv.ca_file                              # the CA's PEM: SSL_CERT_FILE for a client
        srv.client_context()                     # an SSLContext that trusts it
        srv.connections, srv.streams             # TCP connections accepted, requests answered
        srv.versions                             # Counter: "h2" / "http/1.1" per connection
        srv.resets                               # HTTP/2 streams the client reset (RST_STREAM)

Every request to `.../chat/completions` gets `deltas` text deltas of
`chunk` characters, `delay` seconds apart, then the finish chunk, usage and
`[DONE]`. `protocols` is what the server offers in ALPN ("h2" and
"http/1.1" by default). A stream the client abandons without a reset keeps
its unacknowledged data in the connection's flow-control window, as a real
HTTP/2 server's would.
"""

from __future__ import annotations

import asyncio
import collections
import json
import ssl
import tempfile
import threading
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import trustme


def sse_body_parts(deltas: int, chunk: str) -> list[bytes]:
    """An OpenAI chat-completions stream, one part per delta, then its end."""
    def data(obj: dict) -> bytes:
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    parts = [data({"id": "chatcmpl-tls", "object": "chat.completion.chunk", "model": "test-model",
                   "choices": [{"index": 0, "delta": ({"role": "assistant", "content": chunk} if k == 0
                                                      else {"content": chunk}), "finish_reason": None}]})
             for k in range(deltas)]
    parts.append(data({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                 + data({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": deltas,
                                                  "total_tokens": deltas + 3}})
                 + b"data: [DONE]\n\n")
    return parts


class TlsServer:
    def __init__(self, *, protocols: tuple[str, ...] = ("h2", "http/1.1"), deltas: int = 8,
                 chunk: str = "hello ", delay: float = 0.0) -> None:
        self.protocols = protocols
        self.deltas, self.chunk, self.delay = deltas, chunk, delay
        self.connections = 0
        self.streams = 0
        self.resets = 0
        self.versions: collections.Counter[str] = collections.Counter()
        self._ca = trustme.CA()
        self._dir = tempfile.TemporaryDirectory(prefix="lineup-tls-")
        self.ca_file = str(Path(self._dir.name) / "ca.pem")
        self._ca.cert_pem.write_to_path(self.ca_file)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- client side
    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def client_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        self._ca.configure_trust(ctx)
        return ctx

    def reset(self) -> None:
        self.connections = self.streams = self.resets = 0
        self.versions.clear()

    # -- lifecycle
    def __enter__(self) -> TlsServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True, name="tls-server")
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the TLS test server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._dir.cleanup()

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._ca.issue_cert("localhost", "127.0.0.1").configure_cert(ctx)
        ctx.set_alpn_protocols(list(self.protocols))
        return ctx

    def _run(self, ready: threading.Event) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self._context()))
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        alpn = writer.get_extra_info("ssl_object").selected_alpn_protocol() or "http/1.1"
        self.versions[alpn] += 1
        try:
            if alpn == "h2":
                await self._serve_h2(reader, writer)
            else:
                await self._serve_h1(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    # -- HTTP/1.1: keep-alive, chunked bodies
    async def _serve_h1(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            self.streams += 1
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            for part in sse_body_parts(self.deltas, self.chunk):
                if writer.is_closing() or reader.at_eof():
                    return
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                await writer.drain()
                await asyncio.sleep(self.delay)   # 0: a turn of the loop, which hears of a client that left
            writer.write(b"0\r\n\r\n")
            await writer.drain()

    # -- HTTP/2: every stream answered in a task of its own, within the flow-control windows
    async def _serve_h2(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        window_opened = asyncio.Event()
        tasks: dict[int, asyncio.Task] = {}

        async def respond(stream_id: int) -> None:
            try:
                await send(stream_id)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                pass   # the client reset it, or left

        async def send(stream_id: int) -> None:
            conn.send_headers(stream_id, [(":status", "200"), ("content-type", "text/event-stream")])
            writer.write(conn.data_to_send())
            for part in sse_body_parts(self.deltas, self.chunk):
                if writer.is_closing() or reader.at_eof():
                    return
                while part:
                    room = min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size)
                    if room <= 0:
                        window_opened.clear()
                        await window_opened.wait()
                        continue
                    conn.send_data(stream_id, part[:room])
                    part = part[room:]
                    writer.write(conn.data_to_send())
                await writer.drain()
                await asyncio.sleep(self.delay)
            conn.end_stream(stream_id)
            writer.write(conn.data_to_send())
            self.streams += 1

        try:
            while data := await reader.read(65536):
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError:
                    break
                for ev in events:
                    if isinstance(ev, h2.events.DataReceived):
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded):
                        tasks[ev.stream_id] = asyncio.ensure_future(respond(ev.stream_id))
                    elif isinstance(ev, h2.events.StreamReset):
                        self.resets += 1
                        task = tasks.pop(ev.stream_id, None)
                        if task is not None:
                            task.cancel()
                    elif isinstance(ev, h2.events.WindowUpdated):
                        window_opened.set()
                    elif isinstance(ev, h2.events.ConnectionTerminated):
                        return
                writer.write(conn.data_to_send())
                await writer.drain()
        finally:
            for task in tasks.values():
                task.cancel()


def main() -> None:
    """Serve in this process until stdin closes (for benchmarks, whose
    client runs apart): prints {"url", "ca_file"} as one JSON line, then
    answers each line "stats" with {"connections", "streams", "resets",
    "versions"} and "reset" by zeroing them."""
    import sys

    with TlsServer(deltas=int(sys.argv[1]) if len(sys.argv) > 1 else 8) as srv:
        print(json.dumps({"url": srv.url, "ca_file": srv.ca_file}), flush=True)
        for line in sys.stdin:
            if line.strip() == "stats":
                print(json.dumps({"connections": srv.connections, "streams": srv.streams, "resets": srv.resets,
                                  "versions": dict(srv.versions)}), flush=True)
            elif line.strip() == "reset":
                srv.reset()
                print("{}", flush=True)


if __name__ == "__main__":
    main()
