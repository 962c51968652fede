"""What the screens and widgets ask of the app, as a class of its own.

Why: a screen reaches the app's state and actions (`self.app.say`, its
store, who rates, the tags, starting a chat with other models or settings).
Typed against `LineupApp` itself, every screen would import `tui.app`, which
imports every screen: a circle, even when the import is only for the type
checker. `Host` says what the screens may use and nothing of the screens;
`LineupApp` is a `Host`, and a screen declares `app = getters.app(Host)`
under `TYPE_CHECKING` (Textual's own helper: the type checker sees `Host`,
Python keeps Textual's property). The choices the picker and the settings
dialog hand back live here too, since the app's actions take them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.notifications import SeverityLevel

from providers.events import SamplingParams
from providers.model_config import ModelConfig

if TYPE_CHECKING:
    from core.answering.config import Config
    from core.answering.sessions import AsyncStore, ChatSession   # the store as the core hands it over


@dataclass(frozen=True)
class PickerChoice:
    """The model picker's answer: the contestants chosen, blind or not."""

    models: tuple[ModelConfig, ...]
    blind: bool


@dataclass(frozen=True)
class SettingsChoice:
    """The settings dialog's answer: the system prompt, the session's
    parameters and each contestant's own (by contestant index)."""

    system: str | None
    params: SamplingParams
    contestant: dict[int, SamplingParams] = field(default_factory=dict)


class Host(App[int]):
    """The app as its screens see it (`LineupApp` is the one there is)."""

    store: AsyncStore
    config: Config
    rater: str
    tags: tuple[str, ...]
    blind_next: bool
    session: ChatSession | None
    notices: list[tuple[str, str]]
    last_copy: tuple[str, str] | None       # (text, what it is): for "write it to a file"
    copies_told: int                        # copies whose outcome was told (tests wait on it)

    def say(self, message: str, *, severity: SeverityLevel = "information", timeout: float | None = None) -> None:
        """Notify, never as markup (model and provider text is untrusted)."""
        raise NotImplementedError

    def new_chat(self) -> None:
        """A new session with the same models."""
        raise NotImplementedError

    def start_chat(self, resume: str | None = None, blind: bool | None = None,
                   linked: ChatSession | None = None, changed: str | None = None) -> Any:
        """Create (or resume) a session and show it (a worker)."""
        raise NotImplementedError

    def switch_models(self, choice: PickerChoice, linked: ChatSession | None = None) -> None:
        """A new session with the models chosen, linked to the one it continues."""
        raise NotImplementedError

    def remember_settings(self, choice: SettingsChoice, aliases: list[str]) -> None:
        """The settings chosen become those of every new session."""
        raise NotImplementedError

    def copy_text(self, text: str, what: str) -> None:
        """Copy `text` and say where it went."""
        raise NotImplementedError
