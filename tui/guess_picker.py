"""The blinding audit's question after a vote (`lineup vote --blinding-audit`):
"which model do you think wrote A?", asked before the names are shown. Why
a screen of its own: it is the one place that lists the session's models to a
rater whose vote is not revealed yet, so it offers every contestant of the
session (never only the ones on screen) and nothing else. Returns the
model's alias, `NO_IDEA`, or None (Esc: no answer, nothing recorded)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

#: The answer "I have no idea" (recorded as a guess of None).
NO_IDEA = "\x00no idea"


class GuessPicker(ModalScreen[str | None]):
    """Arrows and Enter pick a model (or "no idea"); Esc answers nothing."""

    BINDINGS = [
        Binding("escape", "skip_guess", "No answer", id="guess.skip"),
        Binding("n", "no_idea", "No idea", id="guess.no_idea"),
    ]

    def __init__(self, label: str, models: list[str]) -> None:
        super().__init__()
        self.label = label
        self.models = list(models)

    def compose(self) -> ComposeResult:
        with Vertical(id="guess-dialog"):
            yield Label(Text(f"Which model do you think wrote {self.label}?"), id="guess-title")
            yield OptionList(*[Option(Text(m), id=m) for m in self.models], Option(Text("no idea"), id=NO_IDEA),
                             id="guess-list")
            yield Label(Text("enter: pick · n: no idea · esc: no answer"), id="guess-help")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_no_idea(self) -> None:
        self.dismiss(NO_IDEA)

    def action_skip_guess(self) -> None:
        self.dismiss(None)
