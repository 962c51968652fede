"""Configuration: which models exist (aliases), how to reach them, and the
sampling parameters fixed for a session. Keys are never stored here: only the
*name* of the environment variable that holds one."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from lineup.events import SamplingParams

ProviderName = Literal["openai", "anthropic", "ollama", "gemini", "demo"]


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
    concurrency: int = Field(default=4, ge=1, description="parallel requests to this model in `lineup run`")
    extra_body: dict = Field(default_factory=dict, description="provider-specific request fields, sent as is")

    @property
    def is_demo(self) -> bool:
        return self.provider == "demo"


class Config(BaseModel):
    model_config = ConfigDict(frozen=True)
    defaults: SamplingParams = SamplingParams()
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    tags: tuple[str, ...] = ()          # custom failure-mode tags, after the default taxonomy
    source: str | None = None           # the file it came from, for messages
    autodetected: bool = False          # no config file: aliases from the environment (or demo)


DEFAULT_TAGS: tuple[str, ...] = (
    "format_error", "factual_error", "reasoning_break", "instruction_violation",
    "unwarranted_refusal", "hallucination", "truncated", "too_verbose",
    "off_topic", "identity_leak", "unsafe",
)
