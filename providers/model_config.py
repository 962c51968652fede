"""What one model alias is, as the providers read it: protocol, model, server,
key variable, how the key is sent (`auth`), extra headers and query
parameters (gateways, Azure), sampling parameters, price, timeouts, limits,
and the server it shares with other aliases. `core.answering.config` loads these from
TOML (and autodetects them); the providers and the sessions only read them."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from providers.catalogue import CATALOGUE, DEMO_JUDGE_NAME, DEMO_MODEL_NAMES
from providers.events import SamplingParams


class Price(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, input_tokens: int | None, output_tokens: int | None) -> float:
        return ((input_tokens or 0) * self.input_per_mtok + (output_tokens or 0) * self.output_per_mtok) / 1e6


class EnvValue(BaseModel):
    """A header value read from an environment variable when the request is
    built (`{ env = "AZURE_OPENAI_KEY" }`): a secret, never stored anywhere,
    scrubbed from every message and answer like the API key."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    env: str


class Auth(BaseModel):
    """How the key from `api_key_env` is sent: in the header `header`, as
    `"{scheme} {key}"` when `scheme` is set (`Authorization: Bearer KEY`), else
    the key alone (`api-key: KEY`). `header = None`: the key is never sent."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    header: str | None
    scheme: str | None = None

    def describe(self, key_env: str | None) -> str:
        """In words, never the value: 'api-key header (key from AZURE_KEY)'."""
        if self.header is None or not key_env:
            return "none"
        how = f"{self.header}: {self.scheme} …" if self.scheme else f"{self.header} header"
        return f"{how} (key from {key_env})"


#: The names `auth = "..."` accepts in the config, besides a table {header, scheme}.
AUTH_PRESETS: dict[str, Auth] = {
    "bearer": Auth(header="Authorization", scheme="Bearer"),
    "x-api-key": Auth(header="x-api-key"),
    "api-key": Auth(header="api-key"),
    "x-goog-api-key": Auth(header="x-goog-api-key"),
    "none": Auth(header=None),
}

#: A cloud project or region: what may go in a host name and a URL path unquoted.
CLOUD_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")

#: An HTTP header name (RFC 9110 token).
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def header_value_ok(value: str) -> bool:
    """A header value that cannot break out of its line: printable ASCII (and
    tabs), the rule an API key taken from the environment is held to as well."""
    return value.isascii() and value.replace("\t", " ").isprintable()


def known_providers() -> tuple[str, ...]:
    """Every provider name a config may use: the catalogue's, then the installed plugins'."""
    from providers.plugins import plugin_names

    return (*CATALOGUE, *sorted(plugin_names()))


class ModelConfig(BaseModel):
    """One alias. `base_url` is filled with the provider default when omitted."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    alias: str
    provider: str = Field(description="a name of the catalogue (`providers.catalogue`) or of a provider plugin")
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
    auth: Auth | None = Field(default=None, description=(
        "how the key is sent; None: the protocol's own (Authorization: Bearer, x-api-key, x-goog-api-key)"))
    headers: dict[str, str | EnvValue] = Field(default_factory=dict, description=(
        "extra request headers: a literal value (not a secret) or {env = NAME} (a secret, read at request time)"))
    query: dict[str, str] = Field(default_factory=dict, description=(
        "extra query parameters on every request (api-version for Azure OpenAI)"))
    project: str | None = Field(default=None, description=(
        "the cloud project the model is called in (Vertex AI: the Google Cloud project id)"))
    region: str | None = Field(default=None, description=(
        "the cloud region whose endpoint serves the model (Vertex AI: us-east5, europe-west1, global...)"))
    # A variant (`[variants.NAME]` in the config): the same model with its own
    # prompt. The core reads these (what a contestant sends), the providers never do.
    variant_of: str | None = Field(default=None, description=(
        "the model alias this contestant is a variant of (None: a plain model)"))
    system: str | None = Field(default=None, description=(
        "the variant's system prompt: replaces the run's and the case's"))
    template: str | None = Field(default=None, description=(
        "the variant's prompt template: {{prompt}} is the case's prompt, {{NAME}} the case's vars.NAME"))
    tools: dict[str, Any] | None = Field(default=None, description=(
        "the variant's tools file, as JSON (tools, tool_results, tool_default, max_steps; checked by the core): "
        "used for a case that declares no tools of its own"))

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str, info: ValidationInfo) -> str:
        if value in CATALOGUE:
            return value
        from providers.plugins import NAME_PATTERN, plugin_names   # only for a name the catalogue lacks

        if value in plugin_names():
            return value
        if info.context and info.context.get("recorded") and NAME_PATTERN.fullmatch(value):
            # a recorded session's plugin that is gone: the session still opens, the model fails
            # when asked (`providers.plugin_guard`)
            return value
        raise ValueError(f"unknown provider; expected one of {', '.join(known_providers())}")

    @field_validator("project", "region")
    @classmethod
    def _cloud_name(cls, value: str | None) -> str | None:
        # it goes in a host name or a URL path: one plain name, nothing that could change where a request goes
        if value is not None and not CLOUD_NAME.fullmatch(value):
            raise ValueError("must be lowercase letters, digits and - (at most 63), e.g. us-east5 or my-project")
        return value

    @field_validator("auth", mode="before")
    @classmethod
    def _auth_preset(cls, value: Any) -> Any:
        if isinstance(value, str):
            preset = AUTH_PRESETS.get(value.lower())
            if preset is None:
                raise ValueError(f"must be one of {', '.join(AUTH_PRESETS)} or a table {{ header = \"...\", "
                                 "scheme = \"...\" }")
            return preset
        return value

    @field_validator("headers")
    @classmethod
    def _headers_are_safe(cls, value: dict[str, str | EnvValue]) -> dict[str, str | EnvValue]:
        # The last line (core.answering.config checks first, naming the key path): nothing
        # that could end a header line or start another one.
        for name, v in value.items():
            if not HEADER_NAME.fullmatch(name):
                raise ValueError("a header name may hold only letters, digits and !#$%&'*+-.^_`|~")
            if isinstance(v, str) and not header_value_ok(v):
                raise ValueError(f"the value of header {name} holds a control or non-ASCII character")
        return value

    @field_validator("auth")
    @classmethod
    def _auth_header_is_safe(cls, value: Auth | None) -> Auth | None:
        if value is not None and value.header is not None and not HEADER_NAME.fullmatch(value.header):
            raise ValueError("auth.header must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")
        if value is not None and value.scheme is not None and not re.fullmatch(r"[!-~]+", value.scheme):
            raise ValueError("auth.scheme must be one word of printable ASCII (Bearer, Token...)")
        return value

    @property
    def is_demo(self) -> bool:
        return self.provider == "demo"

    @property
    def secret_envs(self) -> tuple[str, ...]:
        """Every environment variable this model reads a secret from: the key
        variable, then the variables of `{env = ...}` headers."""
        names = [self.api_key_env] if self.api_key_env else []
        names += [v.env for v in self.headers.values() if isinstance(v, EnvValue)]
        return tuple(dict.fromkeys(names))

    def secrets(self, env: Mapping[str, str] = os.environ) -> tuple[str, ...]:
        """The values of `secret_envs` set now (4 characters or more: shorter
        ones are not looked for in text), for scrubbing."""
        values = (env.get(name, "").strip() for name in self.secret_envs)
        return tuple(dict.fromkeys(v for v in values if len(v) >= 4))


#: `demo/concise`, `demo/thorough`...: offered with no config, and always by
#: their alias. Defined beside the model type, so that the config and
#: autodetection need not load the demo's streaming code (asyncio, anyio).
DEMO_MODELS: list[ModelConfig] = [
    ModelConfig(alias=f"demo/{name}", provider="demo", model=name) for name in DEMO_MODEL_NAMES
]
#: The offline judge, offered to `lineup judge` (never a contestant).
DEMO_JUDGE = ModelConfig(alias=f"demo/{DEMO_JUDGE_NAME}", provider="demo", model=DEMO_JUDGE_NAME)


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
