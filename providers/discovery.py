"""What a local server says it serves: Ollama's model list (GET /api/tags).

Protocol knowledge, so it lives with the providers; `core.answering.config`
asks it when autodetecting models. Nothing here loads httpx unless something
accepts a connection at the address (no Ollama is the usual case, and start-up
should not pay for the client then)."""

from __future__ import annotations

from urllib.parse import urlsplit


def list_ollama_models(base_url: str, timeout: float) -> list[str]:
    """Model names from Ollama's GET /api/tags; [] when it is not reachable
    quickly or answers something else."""
    if not _accepts_connections(base_url, timeout):
        return []   # nothing listens there (no Ollama: the usual case), known without loading httpx
    import httpx

    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            response = client.get(base_url.rstrip("/") + "/api/tags")
        if response.status_code != 200:
            return []
        names = [m.get("name") or m.get("model") for m in response.json().get("models", [])]
    except (httpx.HTTPError, ValueError, AttributeError, TypeError):
        return []
    return [n for n in names if isinstance(n, str) and n and n.isprintable()]


def _accepts_connections(base_url: str, timeout: float) -> bool:
    """Whether anything accepts a TCP connection at `base_url`'s host and port."""
    import socket

    try:
        parts = urlsplit(base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False
