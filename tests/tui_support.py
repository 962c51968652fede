"""Helpers for the pilot-driven TUI tests: a store per test, loopback model
servers, waiting on app state (never on time), and every string a person
could see (screen, titles, notifications, whole pane contents, palette)."""

from __future__ import annotations

import asyncio
import io
import re
from contextlib import ExitStack

from rich.console import Console

from core.answering.config import Config
from providers.model_config import ModelConfig
from store import AsyncStore

from tests.server import Reply, TestServer

__all__ = ["Reply", "TestServer", "ModelServers", "open_store", "wait_for", "screen_text", "visible_text",
           "models_config"]


async def open_store(path) -> AsyncStore:
    return await AsyncStore.open(path)


async def wait_for(pilot, condition, what: str = "condition", limit: int = 1000) -> None:
    """Pause the pilot until `condition()` holds (a guard against hanging, not a timing check)."""
    for _ in range(limit):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"gave up waiting for {what}")


def screen_text(app) -> str:
    """The current screen as plain text, as a terminal would show it."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens,
                                                       simplify=True))
    return console.export_text(styles=False)


def visible_text(app) -> str:
    """Everything a person can see or reach without voting: the screen, the
    titles, every notification, the whole of every pane (scrolled out too),
    and the command palette's entries."""
    parts = [screen_text(app), str(app.title), str(app.sub_title), str(app.screen.title or ""),
             str(app.screen.sub_title or "")]
    parts += [message for _, message in app.notices]
    parts += [n.message for n in app._notifications]
    screen = app.screen
    for pane in getattr(screen, "panes", []):
        parts.append(pane.body.plain_text())
        parts.append(str(pane.header.render()))
    if hasattr(screen, "palette_commands"):
        parts += [f"{name} {help_text}" for name, help_text, _ in screen.palette_commands()]
    return "\n".join(parts)


def leaks(text: str, words) -> list[str]:
    """The identity words found in `text` (case-insensitive, whole words)."""
    return [w for w in words if re.search(rf"(?<![A-Za-z0-9]){re.escape(w)}(?![A-Za-z])", text, re.IGNORECASE)]


class ModelServers:
    """One loopback server per model, so each model has its own script and
    its own record of the requests it received."""

    def __init__(self, names: list[tuple[str, str]], provider: str = "openai") -> None:
        self.names = names
        self.provider = provider
        self._stack = ExitStack()
        self.servers: dict[str, TestServer] = {}

    def __enter__(self) -> "ModelServers":
        for alias, _ in self.names:
            self.servers[alias] = self._stack.enter_context(TestServer())
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def models(self) -> list[ModelConfig]:
        return [ModelConfig(alias=alias, provider=self.provider, model=model,
                            base_url=self.servers[alias].base_url(self.provider), max_retries=0,
                            read_timeout=30)
                for alias, model in self.names]

    def __getitem__(self, alias: str) -> TestServer:
        return self.servers[alias]


def models_config(models: list[ModelConfig], tags: tuple[str, ...] = ()) -> Config:
    return Config(models={m.alias: m for m in models}, tags=tags)


def run(coro):
    return asyncio.run(coro)


async def settle(pilot, view, rounds: int = 400) -> None:
    """Let a StreamView's flushes, background re-rendering and scrollbar
    settle finish (no timing assumptions)."""
    for _ in range(rounds):
        await pilot.pause(0.01)
        if (not view._ops and view._flush_timer is None and not view._flush_queued
                and view._bg_timer is None and not view._fix_scheduled and view._bar_timer is None):
            await pilot.pause()
            return
    raise AssertionError("StreamView never settled")
