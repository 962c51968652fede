"""Whether a configured model can be used now, as the model picker shows it:
a demo (offline, synthetic), a key variable that is not set, or a server
that does not accept a connection.

Why this module exists: the picker must mark unusable models without
sending a request (that is `lineup models --check`, which costs tokens) and
without waiting long: it looks at the key variable and opens one TCP
connection per server (host and port), all at once, each bounded by a short
timeout. Only variable names and host names appear in what it says, never
a key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

import anyio

from core.answering.config import missing_key
from providers.model_config import ModelConfig, server_key

PROBE_TIMEOUT_S = 1.5

__all__ = ["PROBE_TIMEOUT_S", "model_notes", "probe_servers", "static_note"]


def static_note(model: ModelConfig, env: Mapping[str, str] = os.environ) -> str | None:
    """What can be told without the network: "demo" or "no key (VAR unset)"; None otherwise."""
    if model.is_demo:
        return "demo"
    var = missing_key(model, env)
    if var:
        return f"no key ({var} unset)"
    return None


def _host_port(model: ModelConfig) -> tuple[str, int] | None:
    if not model.base_url:
        return None
    parts = urlsplit(model.base_url)
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


async def _probe(host: str, port: int, timeout: float) -> str | None:
    """None when a TCP connection opens, else why not (in a few words)."""
    try:
        with anyio.fail_after(timeout):
            stream = await anyio.connect_tcp(host, port)
        await stream.aclose()
    except TimeoutError:
        return f"unreachable ({host}:{port} did not answer in {timeout:g} s)"
    except OSError as exc:
        why = (exc.strerror or type(exc).__name__).lower()
        return f"unreachable ({host}:{port}: {why})"
    return None


async def probe_servers(models: Iterable[ModelConfig], timeout: float = PROBE_TIMEOUT_S) -> dict[str, str]:
    """alias -> "unreachable (...)" for the models whose server takes no
    connection; each server is tried once, all at the same time."""
    by_server: dict[str, list[ModelConfig]] = {}
    targets: dict[str, tuple[str, int]] = {}
    for m in models:
        key, hp = server_key(m), _host_port(m)
        if key is None or hp is None or m.is_demo:
            continue
        by_server.setdefault(key, []).append(m)
        targets[key] = hp
    results: dict[str, str | None] = {}

    async def one(key: str) -> None:
        results[key] = await _probe(*targets[key], timeout)

    async with anyio.create_task_group() as tg:
        for key in targets:
            tg.start_soon(one, key)
    return {m.alias: why for key, why in results.items() if why for m in by_server[key]}


def model_notes(models: Iterable[ModelConfig], unreachable: Mapping[str, str],
                env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """alias -> its note for the picker (demo, no key, unreachable), for those that have one."""
    out: dict[str, str] = {}
    for m in models:
        note = static_note(m, env) or unreachable.get(m.alias)
        if note:
            out[m.alias] = note
    return out
