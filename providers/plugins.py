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
own protocols (`providers.plugin_guard`): `RequestSent` first, exactly one terminal
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
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from providers.base import Provider
from providers.catalogue import CATALOGUE

#: The entry-point group a plugin declares its provider in.
GROUP = "lineup.providers"
#: What a plugin's provider name may be (it is written in configs and shown in tables).
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_MESSAGE_LIMIT = 300


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
        return bounded(value, 80) if isinstance(value, str) and value else self.target


def bounded(text: str, limit: int = _MESSAGE_LIMIT) -> str:
    """One line, at most `limit` characters: a plugin's words in our messages."""
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
    return Plugin(name=plugin.name, target=plugin.target, dist=plugin.dist, error=bounded(why))


def plugin_accepts_images(name: str) -> bool:
    plugin = load(name)
    return bool(plugin is not None and plugin.cls is not None and getattr(plugin.cls, "accepts_images", False))
