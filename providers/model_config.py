"""What one model alias is, as the providers read it: protocol, model, server,
key variable, sampling parameters, price, timeouts, limits, and the server it
shares with other aliases. `core.config` loads these from TOML (and
autodetects them); the providers and the sessions only read them."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from providers.catalogue import ProviderName
from providers.events import SamplingParams


class Price(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, input_tokens: int | None, output_tokens: int | None) -> float:
        return ((input_tokens or 0) * self.input_per_mtok + (output_tokens or 0) * self.output_per_mtok) / 1e6


class ModelConfig(BaseModel):
    """One alias. `base_url` is filled with the provider default when omitted."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    alias: str
    provider: ProviderName
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    params: SamplingParams = SamplingParams()
    price: Price | None = None
    connect_timeout: float = Field(default=10.0, gt=0)
    read_timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    concurrency: int | None = Field(
        default=None, ge=1,
        description="requests in flight at once to this model's server, shared by every alias on the same "
                    "host and port, in the chat and in `lineup run` (default: 1 for a local server, 4 otherwise)")
    answer_deadline: float = Field(default=600.0, gt=0, description=(
        "seconds one answer may take in all, however the server keeps the connection alive"))
    max_answer_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, description=(
        "UTF-8 bytes of text and reasoning kept per answer; past it the answer is cut"))
    extra_body: dict = Field(default_factory=dict, description="provider-specific request fields, sent as is")
    images: bool = Field(default=True, description=(
        "whether the model takes images in a prompt (false for a text-only model: an image attached in the "
        "chat is then not sent to it, and its pane says so)"))

    @property
    def is_demo(self) -> bool:
        return self.provider == "demo"


#: Requests in flight at once per server when the config says nothing. A local
#: server (llama.cpp, Ollama, LM Studio, vLLM on this machine or the LAN) runs
#: every alias on the same hardware: two at once compete for it (some servers
#: even cut the stream in flight) and make each other's speed figures
#: meaningless, so they take turns. Hosted APIs scale; 4 keeps well under
#: their rate limits.
LOCAL_SERVER_CONCURRENCY = 1
REMOTE_SERVER_CONCURRENCY = 4


def server_key(cfg: ModelConfig) -> str | None:
    """The server a model runs on (scheme://host:port), shared by every alias
    there whatever the path or protocol; None for models with no server (demo)."""
    if not cfg.base_url:
        return None
    parts = urlsplit(cfg.base_url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme.lower()}://{host}:{port}"


def is_local_host(host: str) -> bool:
    """This machine or the local network: loopback, private and link-local
    addresses, `localhost` and `.local` / `.localhost` / `.lan` names."""
    import ipaddress

    host = host.strip("[]").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith((".local", ".localhost", ".lan")):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_private or addr.is_link_local


def server_concurrency(cfg: ModelConfig) -> int:
    """Requests in flight at once to this model's server: its `concurrency`, else the default for the host."""
    if cfg.concurrency is not None:
        return cfg.concurrency
    host = urlsplit(cfg.base_url).hostname if cfg.base_url else None
    return LOCAL_SERVER_CONCURRENCY if host and is_local_host(host) else REMOTE_SERVER_CONCURRENCY
