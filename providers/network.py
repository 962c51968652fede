"""httpx's network I/O on asyncio's own streams, for the providers' pools.

Why: httpcore reads through anyio (`AnyIOBackend`) by default, and a
streamed answer is one read per token. Each anyio read enters a cancel
scope (`fail_after`: the running library sniffed, the task looked up, the
socket registered with the selector and dropped) inside an exception-mapping
context manager. asyncio's `StreamReader` under `asyncio.timeout` does the
same work (the read, its deadline, cancellation) for less: a bare httpx loop
on paced deltas cost 89 us a delta through anyio and 57 us through this
(`benchmarks/bench_client.py`, section 4).

The contract is httpcore's (`AsyncNetworkBackend`, `AsyncNetworkStream`):
the same exceptions for the same failures (a deadline is `ReadTimeout`, a
reset is `ReadError`, ...), EOF as b"", `is_readable` for a pooled idle
connection the server has closed. Closing is anyio's: FIN, then the socket
dropped after one turn of the loop, TLS without a close_notify exchange, so a
cut or cancelled stream lets go of its connection at once. Under another
event loop (trio), or with socket options, httpcore's own backend is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import typing
from typing import Any

import httpcore
import httpx

#: httpcore's names for what asyncio's transports call otherwise.
_EXTRA = {"client_addr": "sockname", "server_addr": "peername"}

#: anyio's default for racing a host's addresses (RFC 6555), kept.
HAPPY_EYEBALLS_DELAY = 0.25


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection: asyncio's reader and writer of its transport."""

    __slots__ = ("_reader", "_writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            if timeout is None:
                return await self._reader.read(max_bytes)
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:     # (before OSError: TimeoutError is one)
            raise httpcore.ReadTimeout(_message(exc)) from exc
        except OSError as exc:          # a reset, a TLS error (ssl.SSLError), a closed transport
            raise httpcore.ReadError(_message(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(buffer)
                await self._writer.drain()   # (the transport's flow control: a large body waits for the peer)
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(_message(exc)) from exc
        except (OSError, RuntimeError) as exc:   # RuntimeError: a write after the end was written
            raise httpcore.WriteError(_message(exc)) from exc

    async def aclose(self) -> None:
        transport = self._writer.transport
        if transport.can_write_eof():
            with contextlib.suppress(OSError, RuntimeError):
                transport.write_eof()
        transport.close()
        try:
            await asyncio.sleep(0)      # one turn for what is buffered, as anyio gives it
        finally:
            transport.abort()           # (a TLS transport would otherwise wait for the peer's close_notify)

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            await self.aclose()
            raise httpcore.ConnectTimeout(_message(exc)) from exc
        except OSError as exc:          # ssl.SSLError included
            await self.aclose()
            raise httpcore.ConnectError(_message(exc)) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # The transport reads as bytes arrive, so an idle connection the
            # server closed, or talks on (a 408 before it hangs up), shows in
            # the reader, not the socket: its end, its error, or bytes unread
            # (`_buffer`: StreamReader says so no other way).
            reader = self._reader
            return reader.at_eof() or reader.exception() is not None or bool(getattr(reader, "_buffer", b""))
        return self._writer.get_extra_info(_EXTRA.get(info, info))


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Connections as `AsyncioStream`s while an asyncio loop runs; through
    anyio otherwise (trio), and for socket options (lineup sets none)."""

    def __init__(self) -> None:
        self._anyio: httpcore.AsyncNetworkBackend | None = None

    def _elsewhere(self, socket_options: object = None) -> httpcore.AsyncNetworkBackend | None:
        """httpcore's anyio backend when this is not asyncio's loop or there
        are socket options to set, else None (this backend)."""
        if not socket_options:
            try:
                asyncio.get_running_loop()
                return None
            except RuntimeError:
                pass
        if self._anyio is None:
            self._anyio = httpcore.AnyIOBackend()
        return self._anyio

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
                          ) -> httpcore.AsyncNetworkStream:
        other = self._elsewhere(socket_options)
        if other is not None:
            return await other.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                           socket_options=socket_options)
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=(local_address, 0) if local_address else None,
                    happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(_message(exc)) from exc
        except OSError as exc:          # refused, unreachable, a name that does not resolve
            raise httpcore.ConnectError(_message(exc)) from exc
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
                                  ) -> httpcore.AsyncNetworkStream:
        other = self._elsewhere(socket_options)
        if other is not None:
            return await other.connect_unix_socket(path, timeout=timeout, socket_options=socket_options)
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(_message(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(_message(exc)) from exc
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        other = self._elsewhere()
        await (other.sleep(seconds) if other is not None else asyncio.sleep(seconds))


def transport(limits: httpx.Limits, verify: ssl.SSLContext | bool) -> httpx.AsyncHTTPTransport:
    """httpx's transport for a pool (HTTP/1.1, lineup's TLS context), its
    connections made by `AsyncioBackend`. httpx takes no network backend, so
    its connection pool is replaced by one made with the same settings."""
    made = httpx.AsyncHTTPTransport(verify=verify, limits=limits)
    made._pool = httpcore.AsyncConnectionPool(   # noqa: SLF001  (checked by tests/test_network.py)
        ssl_context=httpx.create_ssl_context(verify=verify),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=AsyncioBackend())
    return made
