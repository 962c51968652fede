"""The model picker: choose 2 to 8 contestants from the configured aliases,
searching as you type, each shown with its provider and model and marked
when it is a demo, has no key or its server takes no connection; blind or
not. It returns a `PickerChoice` (or None); the app starts the session
(a new one linked to the old when the old had turns: never mixed).

Blind means blind here too: the picker names models (you choose them by
name) but never which label or pane a model has or had."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Checkbox, Input, Label, SelectionList, Static
from textual.widgets.selection_list import Selection

from tui.model_status import model_notes, probe_servers
from core.answering.sessions import MAX_CONTESTANTS
from core.ground.text import one_line
from providers.model_config import ModelConfig
from tui.dialogs import KeyedInput
from tui.host import PickerChoice

if TYPE_CHECKING:
    from textual import getters

    from tui.host import Host

MIN_CONTESTANTS = 2


def matches(model: ModelConfig, needle: str) -> bool:
    """Every word of `needle` is in the alias, provider or model name (any case)."""
    hay = f"{model.alias} {model.provider} {model.model}".lower()
    return all(word in hay for word in needle.lower().split())


def option_text(model: ModelConfig, note: str | None) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(one_line(model.alias), style="bold")
    text.append(f"  {one_line(model.provider)} · {one_line(model.model)}", style="dim")
    if note:
        style = "yellow" if note == "demo" else "bold red"
        text.append(f"  [{one_line(note)}]", style=style)
    return text


class ModelPicker(ModalScreen[PickerChoice | None]):
    """Type to search, Tab or Down to the list, Space to choose, Enter to start."""

    if TYPE_CHECKING:
        app = getters.app(Host)   # how the type checker sees `self.app` (Textual's own at run time)

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="picker.cancel", tooltip="Close without changing the models"),
        Binding("enter", "start", "Start", id="picker.start", priority=True,
                tooltip="Start a session with the models chosen"),
        Binding("ctrl+b", "toggle_blind", "Blind", id="picker.blind", tooltip="Blind labels on / off"),
        Binding("ctrl+a", "choose_shown", "Choose shown", id="picker.choose_shown",
                tooltip="Choose every model the search shows (up to 8)"),
        # priority: the focus moves as Down arrives, so a Space typed right after goes to the list
        Binding("down", "to_list", "To the list", id="picker.to_list", priority=True, show=False,
                tooltip="From the search to the list"),
    ]

    def __init__(self, models: list[ModelConfig], *, chosen: list[str] | None = None, blind: bool = False,
                 why: str = "") -> None:
        super().__init__()
        self.models = list(models)
        self.chosen: list[str] = [a for a in (chosen or []) if any(m.alias == a for m in self.models)]
        self.blind = blind
        self.why = why
        self.notes = model_notes(self.models, {})
        self.probed = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="picker-dialog"):
            yield Label(Text(f"Choose {MIN_CONTESTANTS} to {MAX_CONTESTANTS} models", style="bold"),
                        classes="dialog-title")
            if self.why:
                yield Static(Text(self.why), classes="dialog-note")
            # Ctrl+A (choose what the search shows) is taken in turn with what is typed before it
            yield KeyedInput(placeholder="search: alias, provider or model", id="picker-search",
                             keys={"ctrl+a": self.action_choose_shown})
            yield SelectionList[str](id="picker-list")
            yield Checkbox("Blind: hide which model wrote which answer until the vote", self.blind,
                           id="picker-blind")
            yield Static("", id="picker-status", classes="dialog-note")
            yield Label(Text("type to search · tab/↓: list · space: choose · enter: start · "
                             "^b: blind · ^a: choose shown · esc: cancel"), classes="dialog-help")

    def on_mount(self) -> None:
        self.fill()
        self.query_one(Input).focus()
        self.probe()

    @work(exclusive=True, group="probe", exit_on_error=False)
    async def probe(self) -> None:
        """Mark the models whose server takes no connection (no request is sent)."""
        unreachable = await probe_servers(self.models)
        self.notes = model_notes(self.models, unreachable)
        self.probed = True
        self.fill()

    def shown_models(self) -> list[ModelConfig]:
        needle = self.query_one(Input).value.strip()
        return [m for m in self.models if matches(m, needle)]

    def fill(self) -> None:
        listing = self.query_one(SelectionList)
        highlighted = listing.highlighted
        listing.clear_options()
        shown = self.shown_models()
        listing.add_options([Selection(option_text(m, self.notes.get(m.alias)), m.alias, m.alias in self.chosen)
                             for m in shown])
        if shown:
            listing.highlighted = min(highlighted or 0, len(shown) - 1)
        self._status()

    def _status(self, problem: str = "") -> None:
        n = len(self.chosen)
        text = Text()
        text.append(f"{n} chosen", style="bold" if MIN_CONTESTANTS <= n <= MAX_CONTESTANTS else "bold red")
        if self.chosen:
            text.append(": " + one_line(", ".join(self.chosen)))
        shown = len(self.shown_models())
        if shown != len(self.models):
            text.append(f" · {shown} of {len(self.models)} shown", style="dim")
        if problem:
            text.append(f" · {problem}", style="bold red")
        self.query_one("#picker-status", Static).update(text)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.fill()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_start()

    def on_selection_list_selection_toggled(self, event: SelectionList.SelectionToggled) -> None:
        alias = event.selection.value
        if alias in self.chosen:
            self.chosen.remove(alias)
        elif len(self.chosen) >= MAX_CONTESTANTS:
            self.query_one(SelectionList).deselect(alias)
            self._status(f"at most {MAX_CONTESTANTS}")
            return
        else:
            self.chosen.append(alias)
        self._status()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        self.blind = event.value

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "to_list":      # only from the search; in the list Down moves down
            return self.focused is self.query_one(Input)
        return True

    def action_to_list(self) -> None:
        self.set_focus(self.query_one(SelectionList))

    def action_toggle_blind(self) -> None:
        box = self.query_one(Checkbox)
        box.value = not box.value

    def action_choose_shown(self) -> None:
        for m in self.shown_models():
            if m.alias not in self.chosen and len(self.chosen) < MAX_CONTESTANTS:
                self.chosen.append(m.alias)
        self.fill()

    def action_start(self) -> None:
        n = len(self.chosen)
        if not MIN_CONTESTANTS <= n <= MAX_CONTESTANTS:
            self._status(f"choose {MIN_CONTESTANTS} to {MAX_CONTESTANTS}")
            self.app.say(f"Choose {MIN_CONTESTANTS} to {MAX_CONTESTANTS} models ({n} chosen).", severity="warning")
            return
        by_alias = {m.alias: m for m in self.models}
        self.dismiss(PickerChoice(tuple(by_alias[a] for a in self.chosen), self.blind))

    def action_cancel(self) -> None:
        self.dismiss(None)
