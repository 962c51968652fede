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
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from weakref import WeakKeyDictionary, WeakValueDictionary

import httpx

__all__ = ["Pool", "acquire", "release"]


@dataclass(eq=False)
class Pool:
    """One shared client and how many providers hold it; `shelf` is the
    registry it is found in (its loop's), None for a caller's own."""

    client: httpx.AsyncClient
    key: tuple
    shelf: WeakValueDictionary[tuple, Pool] | None
    users: int = 0


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
    if pool is None or pool.client.is_closed:
        client = httpx.AsyncClient(limits=limits, headers={"user-agent": "lineup"}, transport=transport,
                                   verify=verify, follow_redirects=False)  # type: ignore[arg-type]
        pool = Pool(client, key, pools)
        if pools is not None:
            pools[key] = pool
    pool.users += 1
    return pool


async def release(pool: Pool) -> None:
    """Let go of `pool`; the last to let go closes its connections."""
    pool.users -= 1
    if pool.users > 0:
        return
    if pool.shelf is not None and pool.shelf.get(pool.key) is pool:
        del pool.shelf[pool.key]
    await pool.client.aclose()
