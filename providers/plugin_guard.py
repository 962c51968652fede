"""The core's guarantees around a provider plugin's stream (docs/models.md,
"Provider plugins"): `make_plugin_provider` builds a plugin's provider for
a model and wraps it in `GuardedProvider`, which holds it to the event
contract; a plugin that cannot be used becomes `Unusable`, whose streams are
one config error. Apart from the discovery (`providers.plugins`) because
it scrubs with the HTTP layer's `scrub`, which the model config (that needs
only the names) must not load."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio

from providers.base import Provider
from providers.events import (
    ChatRequest,
    ErrorKind,
    Finish,
    ReasoningDelta,
    RequestSent,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolResult,
)
from providers.http import scrub
from providers.plugins import bounded, load

if TYPE_CHECKING:
    from providers.model_config import ModelConfig

#: What a plugin may send: every event but `ToolResult` (the core's tool loop makes those).
_EVENT_TYPES = tuple(t for t in StreamEvent.__args__ if t is not ToolResult)


def make_plugin_provider(cfg: "ModelConfig", **options: Any) -> Provider:
    """The provider for a model whose `provider` names a plugin, guarded
    (`GuardedProvider`). A plugin that cannot be used (not importable, not a
    Provider, its constructor fails) gives a provider whose every stream is
    one `StreamError(config)` naming the plugin and why: that model's pane
    or case fails, never lineup; so does one no installed plugin declares
    (a session recorded with a plugin since uninstalled)."""
    plugin = load(cfg.provider)
    if plugin is None:   # a recorded session's plugin, uninstalled since
        return Unusable(f"provider {cfg.provider!r}: no installed provider plugin declares it")
    if plugin.cls is None:
        return Unusable(f"provider plugin {plugin.name!r} {plugin.error}", cfg.secrets())
    try:
        inner = plugin.cls(cfg, **options)   # type: ignore[call-arg]  # the contract: cls(cfg, **options)
    except Exception as exc:  # noqa: BLE001 - a plugin's constructor is its own failure
        return Unusable(f"provider plugin {plugin.name!r} failed to start: {type(exc).__name__}: {exc}",
                        cfg.secrets())
    return GuardedProvider(inner, cfg, plugin.name)


class Unusable(Provider):
    """A model whose plugin cannot be used: each stream is its one config error (no request is made)."""

    def __init__(self, why: str, secrets: tuple[str, ...] = ()) -> None:
        self.why = scrub(bounded(why), secrets)

    async def _failed(self) -> AsyncIterator[StreamEvent]:
        yield StreamError(kind=ErrorKind.config, message=self.why, t=time.perf_counter())

    def events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return self._failed()


class GuardedProvider(Provider):
    """A plugin's provider with the core's guarantees around its stream (see the module doc)."""

    def __init__(self, inner: Provider, cfg: "ModelConfig", name: str) -> None:
        self.inner, self.cfg, self.name = inner, cfg, name
        self.is_demo = bool(getattr(inner, "is_demo", False))
        self.accepts_images = bool(getattr(inner, "accepts_images", True))

    def route(self, request: ChatRequest) -> Any:
        """The plugin's own `route` (for `lineup models --check`), when it has one."""
        describe = getattr(self.inner, "route", None)
        return describe(request) if describe is not None else None

    def events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return self._guarded(request)

    def _error(self, kind: ErrorKind, what: str) -> StreamError:
        message = scrub(bounded(f"provider plugin {self.name!r}: {what}"), self.cfg.secrets())
        return StreamError(kind=kind, message=message, t=time.perf_counter())

    async def _guarded(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        cfg = self.cfg
        deadline = time.perf_counter() + cfg.answer_deadline
        text_bytes = 0
        started = False
        try:
            source = self.inner.events(request)
            events = aiter(source)
        except Exception as exc:  # noqa: BLE001
            yield RequestSent(t=time.perf_counter(), wall=time.time())
            yield self._error(ErrorKind.bad_response, f"raised {type(exc).__name__}: {exc}")
            return
        try:
            while True:
                ev: Any = None
                with anyio.move_on_after(max(0.0, deadline - time.perf_counter())) as scope:
                    try:
                        ev = await anext(events)
                    except StopAsyncIteration:
                        ev = StopAsyncIteration
                    except Exception as exc:  # noqa: BLE001 - the plugin's failure ends its stream only
                        ev = exc
                if not started and not isinstance(ev, RequestSent):
                    started = True
                    yield RequestSent(t=time.perf_counter(), wall=time.time())
                started = True
                if scope.cancelled_caught:
                    yield self._error(ErrorKind.timeout, f"no complete answer within {cfg.answer_deadline:g} s "
                                                         "(answer_deadline)")
                    return
                if ev is StopAsyncIteration:
                    yield self._error(ErrorKind.truncated, "the stream ended without a terminal event")
                    return
                if isinstance(ev, Exception):
                    yield self._error(ErrorKind.bad_response, f"raised {type(ev).__name__}: {ev}")
                    return
                if not isinstance(ev, _EVENT_TYPES):
                    yield self._error(ErrorKind.bad_response, f"sent {type(ev).__name__}, not an event")
                    return
                if isinstance(ev, (TextDelta, ReasoningDelta)):
                    text_bytes += len(ev.text.encode("utf-8", "surrogatepass"))
                    if text_bytes > cfg.max_answer_bytes:
                        yield self._error(ErrorKind.truncated, f"the answer passed {cfg.max_answer_bytes:,} "
                                                               "bytes (max_answer_bytes): cut there")
                        return
                if isinstance(ev, StreamError):
                    yield ev.model_copy(update={"message": scrub(bounded(ev.message), cfg.secrets())})
                    return
                yield ev
                if isinstance(ev, Finish):
                    return
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await aclose()
                    except Exception:  # noqa: BLE001, S110 - closing a failed plugin's stream: nothing more to say
                        pass

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        except Exception:  # noqa: BLE001, S110 - a plugin that fails to close holds only its own resources
            pass
