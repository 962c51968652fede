"""A quick picker that attaches failure-mode tags and a note to one answer.
Returns a `TagChoice` (or None when dismissed); the caller records it."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, SelectionList


@dataclass(frozen=True)
class TagChoice:
    tags: tuple[str, ...]
    note: str | None


class TagPicker(ModalScreen[TagChoice | None]):
    """Space toggles a tag, Enter saves, Esc closes without saving."""

    BINDINGS = [
        Binding("escape", "dismiss_picker", "Close", id="tags.close"),
        Binding("enter", "save", "Save", id="tags.save", priority=True),
    ]

    def __init__(self, target: str, tags: tuple[str, ...], *, already: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.target = target
        self.tags = tags
        self.already = set(already)

    def compose(self):
        with Vertical(id="tag-dialog"):
            yield Label(Text(f"Tags for answer {self.target}"), id="tag-title")
            yield SelectionList[str](*[(Text(t), t, t in self.already) for t in self.tags], id="tag-list")
            yield Input(placeholder="note (optional), Enter saves", id="tag-note")
            yield Label(Text("space: toggle · tab: note · enter: save · esc: close"), id="tag-help")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def action_save(self) -> None:
        selected = tuple(t for t in self.tags if t in self.query_one(SelectionList).selected and t not in self.already)
        note = self.query_one(Input).value.strip() or None
        self.dismiss(TagChoice(selected, note) if selected or note else None)

    def action_dismiss_picker(self) -> None:
        self.dismiss(None)
