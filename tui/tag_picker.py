"""A quick picker that attaches failure-mode tags and a note to one answer.
Tags the answer already carries (its automatic ones included, e.g.
identity_leak) show as set; unsetting one asks for its removal. Returns a
`TagChoice` (or None when dismissed); the caller records it.

`AnswerPicker` asks first which answer to tag where the keys are the vote
bar's (the vote queue): its letters vote there, so a tag key cannot be one."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, SelectionList
from textual.widgets.option_list import Option


@dataclass(frozen=True)
class TagChoice:
    tags: tuple[str, ...]               # newly set
    note: str | None
    removed: tuple[str, ...] = ()       # were set, now unset


class TagPicker(ModalScreen[TagChoice | None]):
    """Space toggles a tag, Enter saves, Esc closes without saving."""

    BINDINGS = [
        Binding("escape", "dismiss_picker", "Close", id="tags.close"),
        Binding("enter", "save", "Save", id="tags.save", priority=True),
    ]

    def __init__(self, target: str, tags: tuple[str, ...], *, already: tuple[str, ...] = (),
                 auto: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.target = target
        self.already = set(already) | set(auto)
        self.auto = set(auto)
        # a tag the answer carries is listed even if the taxonomy no longer has it
        self.tags = tuple(tags) + tuple(sorted(t for t in self.already if t not in tags))

    def compose(self) -> ComposeResult:
        with Vertical(id="tag-dialog"):
            yield Label(Text(f"Tags for answer {self.target}"), id="tag-title")
            yield SelectionList[str](*[(Text(t + (" (auto)" if t in self.auto else "")), t, t in self.already)
                                       for t in self.tags], id="tag-list")
            yield Input(placeholder="note (optional), Enter saves", id="tag-note")
            yield Label(Text("space: toggle · tab: note · enter: save · esc: close"), id="tag-help")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def action_save(self) -> None:
        chosen = set(self.query_one(SelectionList).selected)
        selected = tuple(t for t in self.tags if t in chosen and t not in self.already)
        removed = tuple(t for t in self.tags if t in self.already and t not in chosen)
        note = self.query_one(Input).value.strip() or None
        self.dismiss(TagChoice(selected, note, removed) if selected or note or removed else None)

    def action_dismiss_picker(self) -> None:
        self.dismiss(None)


def tag_summary(name: str, added: tuple[str, ...], choice: TagChoice) -> str:
    """The notice after a save: what was tagged and what was removed."""
    parts = []
    if added:
        parts.append(f"Tagged {name}: {', '.join(added)}" + (" (with a note)" if choice.note else ""))
    if choice.removed:
        parts.append(f"Removed from {name}: {', '.join(choice.removed)}")
    return "; ".join(parts)


class AnswerPicker(ModalScreen[int | None]):
    """Which answer to tag, by its label (screen order): the index, or None."""

    BINDINGS = [
        Binding("escape", "dismiss_picker", "Close", id="tag_which.close"),
    ]

    def __init__(self, labels: list[str]) -> None:
        super().__init__()
        self.labels = list(labels)

    def compose(self) -> ComposeResult:
        with Vertical(id="tag-which-dialog"):
            yield Label(Text("Tag which answer?"), id="tag-which-title")
            yield OptionList(*[Option(Text(f"answer {label}"), id=str(i)) for i, label in enumerate(self.labels)],
                             id="tag-which-list")
            yield Label(Text("up/down: choose · enter: its tags · esc: close"), id="tag-which-help")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(int(event.option.id or 0))

    def action_dismiss_picker(self) -> None:
        self.dismiss(None)
