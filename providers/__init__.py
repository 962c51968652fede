"""Model APIs: one module per wire protocol, all producing the event stream of
`lineup.events`. `make_provider` picks the module for a `ModelConfig`; the
modules are imported lazily so that loading one protocol (or the demo) never
pulls in the others."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lineup.config import ModelConfig
    from lineup.providers.base import Provider

#: Where each protocol's API lives when a model sets no `base_url`.
DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "ollama": "http://localhost:11434",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
}

# provider name -> (module, class)
_CLASSES: dict[str, tuple[str, str]] = {
    "openai": ("lineup.providers.openai", "OpenAIProvider"),
    "anthropic": ("lineup.providers.anthropic", "AnthropicProvider"),
    "ollama": ("lineup.providers.ollama", "OllamaProvider"),
    "gemini": ("lineup.providers.gemini", "GeminiProvider"),
    "demo": ("lineup.providers.demo", "DemoProvider"),
}


def make_provider(cfg: "ModelConfig", **options: Any) -> "Provider":
    """The provider for one configured model.

    `options` go to the provider class (HTTP providers accept `retry=` a
    `RetryPolicy`, `transport=` an httpx transport; Gemini `stream_form=`
    "sse" or "json"); the demo provider takes none.
    """
    try:
        module_name, class_name = _CLASSES[cfg.provider]
    except KeyError:
        raise ValueError(f"model {cfg.alias!r}: unknown provider {cfg.provider!r}") from None
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(cfg, **options)


__all__ = ["DEFAULT_BASE_URLS", "make_provider"]
