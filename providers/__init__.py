"""Model APIs: one module per wire protocol, all producing the event stream of
`providers.events`. `make_provider` picks the module for a `ModelConfig` from
the catalogue, or from a provider plugin (`providers.plugins`, guarded by `providers.plugin_guard`); the modules
are imported lazily so that loading one protocol (or the demo) never pulls in
the others."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from providers.catalogue import CATALOGUE

if TYPE_CHECKING:
    from providers.base import Provider
    from providers.model_config import ModelConfig


def make_provider(cfg: "ModelConfig", **options: Any) -> "Provider":
    """The provider for one configured model.

    `options` go to the provider class (HTTP providers accept `retry=` a
    `RetryPolicy`, `transport=` an httpx transport; Gemini `stream_form=`
    "sse" or "json"); the demo provider takes none.
    """
    entry = CATALOGUE.get(cfg.provider)
    if entry is None:   # a provider plugin (`providers.plugins`), guarded like the built-in protocols
        from providers.plugin_guard import make_plugin_provider

        return make_plugin_provider(cfg, **options)
    cls = getattr(importlib.import_module(entry.module), entry.cls)
    return cls(cfg, **options)


def accepts_images(cfg: "ModelConfig") -> bool:
    """Whether a prompt's images may be sent to this model: its protocol
    carries them (`Provider.accepts_images`) and its config does not say it
    is text-only (`images = false`)."""
    if not cfg.images:
        return False
    entry = CATALOGUE.get(cfg.provider)
    if entry is None:
        from providers.plugins import plugin_accepts_images

        return plugin_accepts_images(cfg.provider)
    return bool(getattr(getattr(importlib.import_module(entry.module), entry.cls), "accepts_images", False))


__all__ = ["accepts_images", "make_provider"]
