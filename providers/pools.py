"""Connection pools per server, shared by every model alias on it.

Why this module exists: a gateway (OpenRouter, LiteLLM, a company proxy) or a
local server (vLLM, llama.cpp, Ollama) serves several of the models a lineup
compares. With a pool per alias each of them opened its own connections to
the same server and paid its own TCP and TLS set-up; here the aliases on one
server share one `httpx.AsyncClient`, so a connection one answer leaves open
serves the next answer of any alias there.

What is shared is only the connections: nothing of a request is set on the
client but the user agent. Each request carries its own key and headers
(`HttpProvider._prepare`) and its own timeouts (`HttpProvider.timeout`). A
pool is per event loop (its connections belong to the loop that opened
them), per transport (tests and plugins pass their own) and per pool size,
and it is closed when the last alias using it lets go (`release`).

A pool of many connections is several clients (shards) of at most
`SHARD_CONNECTIONS` requests in flight each, filled in order: httpx's pool
scans every connection it holds on each request and each response closed,
asking each socket for its state, so one client's CPU per request grew with
its connections (`bench_http.py`: 1.9 ms at 16 in flight, 4.0 ms at 64; in
shards of 8, 1.1-1.4 ms at either). Requests go to the first shard with room
(`Pool.lease`), so sequential requests keep using one connection.

A pool's connections are made and read by `providers.network` (asyncio's
own streams: about a third less CPU per streamed chunk than httpcore's anyio
backend, and a connection's state asked of its reader, not its socket),
unless a transport is given or the environment names a proxy (`_transport`).
"""

from __future__ import annotations

import asyncio
import math
import urllib.request
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary, WeakValueDictionary

import httpx

from providers import network

__all__ = ["SHARD_CONNECTIONS", "Pool", "acquire", "release"]

#: Requests in flight one client of a pool takes before the next client is used.
SHARD_CONNECTIONS = 8


@dataclass(eq=False)
class Pool:
    """The shared clients (shards; one unless the pool is large) and how
    many providers hold them; `shelf` is the registry it is found in (its
    loop's), None for a caller's own. `share`: the requests in flight a shard
    takes before the next one is used; `busy`: each shard's now."""

    clients: list[httpx.AsyncClient]
    key: tuple
    shelf: WeakValueDictionary[tuple, Pool] | None
    users: int = 0
    share: int = SHARD_CONNECTIONS
    busy: list[int] = field(default_factory=list)

    @property
    def client(self) -> httpx.AsyncClient:
        """The first shard: for a request sent outside `lease` (a batch API, a check)."""
        return self.clients[0]

    @property
    def is_closed(self) -> bool:
        return any(client.is_closed for client in self.clients)

    def lease(self) -> int:
        """The shard for one more request: the first with room, else the least
        busy. The caller `unlease`s it when the response is closed."""
        busy = self.busy
        k = next((k for k, n in enumerate(busy) if n < self.share), None)
        if k is None:
            k = busy.index(min(busy))
        busy[k] += 1
        return k

    def unlease(self, shard: int) -> None:
        self.busy[shard] -= 1


#: The pools of each event loop, held weakly both ways: the providers that
#: use a pool keep it (and its connections, which keep their loop), the
#: registry only finds it. Held strongly, a provider never closed would keep
#: its loop and connections alive for good.
_pools: WeakKeyDictionary[asyncio.AbstractEventLoop, WeakValueDictionary[tuple, Pool]] = WeakKeyDictionary()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def acquire(server: str | None, limits: httpx.Limits, transport: httpx.AsyncBaseTransport | None,
            verify: object) -> Pool:
    """The pool for `server` (`providers.model_config.server_key`) in the
    running event loop, made when there is none; the caller `release`s it.
    Outside an event loop, or with no server, the pool is the caller's own."""
    loop = _running_loop()
    key = (server, limits.max_connections, limits.max_keepalive_connections, limits.keepalive_expiry,
           id(transport), id(verify))
    pools = _pools.setdefault(loop, WeakValueDictionary()) if loop is not None and server is not None else None
    pool = pools.get(key) if pools is not None else None
    if pool is None or pool.is_closed:
        in_flight = limits.max_keepalive_connections or limits.max_connections or SHARD_CONNECTIONS
        shards = max(1, math.ceil(in_flight / SHARD_CONNECTIONS))
        share = math.ceil(in_flight / shards)
        part = httpx.Limits(
            max_connections=None if limits.max_connections is None else math.ceil(limits.max_connections / shards),
            max_keepalive_connections=share, keepalive_expiry=limits.keepalive_expiry)
        each = part if shards > 1 else limits
        clients = [httpx.AsyncClient(limits=each, headers={"user-agent": "lineup"},
                                     transport=transport or _transport(each, verify),
                                     verify=verify,  # type: ignore[arg-type]
                                     follow_redirects=False) for _ in range(shards)]
        pool = Pool(clients, key, pools, share=share, busy=[0] * shards)
        if pools is not None:
            pools[key] = pool
    pool.users += 1
    return pool


def _transport(limits: httpx.Limits, verify: object) -> httpx.AsyncBaseTransport | None:
    """`providers.network`'s transport for one client, or None (httpx's own)
    when the environment names a proxy: httpx routes through the proxies
    the environment names only for a client made without a transport."""
    if urllib.request.getproxies():
        return None
    return network.transport(limits, verify)  # type: ignore[arg-type]


async def release(pool: Pool) -> None:
    """Let go of `pool`; the last to let go closes its connections."""
    pool.users -= 1
    if pool.users > 0:
        return
    if pool.shelf is not None and pool.shelf.get(pool.key) is pool:
        del pool.shelf[pool.key]
    for client in pool.clients:
        await client.aclose()
