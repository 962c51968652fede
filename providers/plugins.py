"""Provider plugins: a protocol lineup does not ship, added by installing a
package, never by editing lineup.

A distribution declares an entry point in the group `lineup.providers`; its
name is the provider name a config uses (`provider = "NAME"`), its value a
`providers.base.Provider` subclass (`package.module:Class`). lineup finds
the names without importing anything (config validation needs only them)
and imports a plugin when a model uses it or `lineup models` lists it. A
plugin that cannot be imported, is not a Provider or takes a built-in's
name is reported by name with why, and is never used; it never stops lineup.

Around every plugin stream the core guarantees what it guarantees for its
own protocols (`GuardedProvider`): `RequestSent` first, exactly one terminal
event, then nothing; a value that is not an event, an exception raised
inside the plugin, a stream that stops without a terminal event, the
model's `answer_deadline` or `max_answer_bytes` passed: each ends the
stream as one `StreamError` naming the plugin; every error message is
scrubbed of the model's secrets and bounded. docs/models.md states the
contract for plugin authors.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

import anyio

from providers.base import Provider
from providers.catalogue import CATALOGUE
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

if TYPE_CHECKING:
    from providers.model_config import ModelConfig

#: The entry-point group a plugin declares its provider in.
GROUP = "lineup.providers"
#: What a plugin's provider name may be (it is written in configs and shown in tables).
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_MESSAGE_LIMIT = 300
_EVENT_TYPES = tuple(t for t in StreamEvent.__args__ if t is not ToolResult)


@dataclass(frozen=True)
class Plugin:
    """One declared plugin provider: `cls` when it loaded, else `error` says why not."""

    name: str                 # the provider name (the entry point's name)
    target: str               # "module:Class", as declared
    dist: str | None          # the distribution that declares it
    cls: type[Provider] | None = None
    error: str | None = None

    @property
    def protocol(self) -> str:
        """In words, for `lineup models`: the class's `protocol`, else its target."""
        value = getattr(self.cls, "protocol", None)
        return _bounded(value, 80) if isinstance(value, str) and value else self.target


def _bounded(text: str, limit: int = _MESSAGE_LIMIT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@functools.cache
def _declared() -> tuple[EntryPoint, ...]:
    """The group's entry points, first declaration of each name kept (read once; `refresh` reads again)."""
    seen: dict[str, EntryPoint] = {}
    try:
        found = entry_points(group=GROUP)
    except Exception:  # noqa: BLE001 - a broken metadata file must not stop lineup
        return ()
    for ep in found:
        seen.setdefault(ep.name, ep)
    return tuple(seen.values())


def plugin_names() -> frozenset[str]:
    """The provider names plugins declare (nothing imported), built-in names excepted."""
    return frozenset(ep.name for ep in _declared() if ep.name not in CATALOGUE)


def refresh() -> None:
    """Forget what was found and loaded (after a package was installed: tests)."""
    _declared.cache_clear()
    _load.cache_clear()


def plugins() -> list[Plugin]:
    """Every declared plugin, each loaded or with its error (for `lineup models`)."""
    return [_load(ep.name) for ep in _declared()]


def load(name: str) -> Plugin | None:
    """The plugin declaring provider `name`, loaded (or with its error); None when none does."""
    if not any(ep.name == name for ep in _declared()):
        return None
    return _load(name)


@functools.cache
def _load(name: str) -> Plugin:
    ep = next(ep for ep in _declared() if ep.name == name)
    dist = getattr(getattr(ep, "dist", None), "name", None)
    plugin = Plugin(name=name, target=ep.value, dist=dist)
    if name in CATALOGUE:
        return _failed(plugin, f"takes the name of the built-in provider {name!r}")
    if not NAME_PATTERN.fullmatch(name):
        return _failed(plugin, "its name must be lower-case letters, digits, - and _ (at most 40), "
                               "starting with a letter")
    try:
        cls = ep.load()
    except (Exception, SystemExit) as exc:   # an import that fails in any way is this plugin's failure only
        return _failed(plugin, f"cannot be imported: {type(exc).__name__}: {exc}")
    if not (isinstance(cls, type) and issubclass(cls, Provider)):
        return _failed(plugin, f"{ep.value} is not a providers.base.Provider subclass")
    return Plugin(name=name, target=ep.value, dist=dist, cls=cls)


def _failed(plugin: Plugin, why: str) -> Plugin:
    return Plugin(name=plugin.name, target=plugin.target, dist=plugin.dist, error=_bounded(why))


def make_plugin_provider(cfg: "ModelConfig", **options: Any) -> Provider:
    """The provider for a model whose `provider` names a plugin, guarded
    (`GuardedProvider`). A plugin that cannot be used (not importable, not a
    Provider, its constructor fails) gives a provider whose every stream is
    one `StreamError(config)` naming the plugin and why: that model's pane
    or case fails, never lineup. ValueError only when no plugin declares
    the name (a config check refuses such a model before this)."""
    plugin = load(cfg.provider)
    if plugin is None:
        raise ValueError(f"model {cfg.alias!r}: unknown provider {cfg.provider!r} (no plugin declares it)")
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
        from providers.http import scrub

        self.why = scrub(_bounded(why), secrets)

    async def _failed(self) -> AsyncIterator[StreamEvent]:
        yield StreamError(kind=ErrorKind.config, message=self.why, t=time.perf_counter())

    def events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return self._failed()


def plugin_accepts_images(name: str) -> bool:
    plugin = load(name)
    return bool(plugin is not None and plugin.cls is not None and getattr(plugin.cls, "accepts_images", False))


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
        from providers.http import scrub   # the one scrubber of provider messages (loads httpx: only here)

        message = scrub(_bounded(f"provider plugin {self.name!r}: {what}"), self.cfg.secrets())
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
                    from providers.http import scrub

                    yield ev.model_copy(update={"message": scrub(_bounded(ev.message), cfg.secrets())})
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
