"""Command palette provider: every action of the current screen (its
`palette_commands()`, else its active key bindings) plus the app's own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Protocol, TypeAlias, runtime_checkable

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.markup import escape
from textual.screen import Screen

# (name, help, callback): one palette entry; the callback's result (a worker,
# when the action runs in one) is ignored.
PaletteCommand: TypeAlias = tuple[str, str, Callable[[], object]]


@runtime_checkable
class HasPaletteCommands(Protocol):
    """A screen (or the app) that lists its own palette entries."""

    def palette_commands(self) -> list[PaletteCommand]: ...


def _binding_commands(screen: Screen[object]) -> Iterator[PaletteCommand]:
    """Fallback for screens without `palette_commands`: their active bindings,
    all of them (`palette_bindings` where the footer shows only those that fit)."""
    seen = set()
    bindings = getattr(screen, "palette_bindings", None) or screen.active_bindings
    for key, active in bindings.items():
        b = active.binding
        if not b.description or b.action in seen or not active.enabled:
            continue
        seen.add(b.action)
        yield (b.description, b.tooltip or f"key {key}",
               partial(screen.app.run_action, b.action, active.node))


class LineupCommands(Provider):
    """Screen actions first, then the app-wide ones (help, sessions, quit)."""

    def _commands(self) -> list[PaletteCommand]:
        screen = self.screen
        if isinstance(screen, HasPaletteCommands):
            items = list(screen.palette_commands())
        else:
            items = list(_binding_commands(screen))
        app = self.app
        if isinstance(app, HasPaletteCommands):
            items.extend(app.palette_commands())
        return items

    async def discover(self) -> Hits:
        # Names can hold model aliases: plain Content, never markup.
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(Content(name), callback, text=name, help=escape(help_text) if help_text else None)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(escape(name)), callback, text=name,
                          help=escape(help_text) if help_text else None)
