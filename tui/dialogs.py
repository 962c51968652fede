"""Small dialogs the workbench shares: a line of text asked for (a session's
new title, a path to attach or to write a copy to: with completion and a
check that keeps the dialog open, saying what is wrong) and a yes/no
question. Every text they show is built as `Text` (file names, titles and
messages are untrusted: never markup)."""

from __future__ import annotations

import os
from collections.abc import Callable

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Input, Label, Static

from core.ground.text import one_line


class KeyedInput(Input):
    """An input that handles some keys itself (`keys`: key -> callback), in
    turn with the characters typed before them. (A screen's priority
    binding runs as the key arrives, before the characters still queued for
    the input: a fast typist's Tab would complete what was typed so far.)"""

    def __init__(self, *args, keys: dict[str, Callable[[], object]] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.keys = dict(keys or {})

    async def _on_key(self, event: events.Key) -> None:
        handler = self.keys.get(event.key)
        if handler is not None:
            event.stop()
            event.prevent_default()
            handler()
            return
        await super()._on_key(event)


class _CompletionSuggester(Suggester):
    """The first completion, shown greyed after the cursor (Right or Tab takes it)."""

    def __init__(self, complete: Callable[[str], list[str]]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.complete = complete

    async def get_suggestion(self, value: str) -> str | None:
        options = self.complete(value) if value else []
        return options[0] if options else None


class TextPrompt(ModalScreen[str | None]):
    """Asks for one line. `check(value)` returns what is wrong with it (shown
    in the dialog, which stays open) or None (the dialog closes with the
    value). `complete(prefix)` lists completions: Tab completes as far as
    they agree, and they are listed under the line."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="prompt_dialog.cancel"),
        Binding("tab", "complete", "Complete", id="prompt_dialog.complete",
                tooltip="Complete the path as far as the choices agree"),
    ]

    def __init__(self, title: str, *, value: str = "", placeholder: str = "", help_text: str = "", note: str = "",
                 check: Callable[[str], str | None] | None = None,
                 complete: Callable[[str], list[str]] | None = None, dialog_id: str = "text-prompt") -> None:
        super().__init__()
        self.title_text = title
        self.initial = value
        self.placeholder = placeholder
        self.help_text = help_text
        self.note = note
        self.check = check
        self.complete = complete
        self.dialog_id = dialog_id
        self.problem = ""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id=self.dialog_id):
            yield Label(Text(self.title_text, style="bold"), classes="dialog-title")
            if self.note:
                yield Static(Text(self.note), classes="dialog-note")
            yield KeyedInput(value=self.initial, placeholder=self.placeholder, id="dialog-input",
                             suggester=_CompletionSuggester(self.complete) if self.complete else None,
                             keys={"tab": self.action_complete} if self.complete else None)
            yield Static("", id="dialog-choices", classes="dialog-note")
            yield Static("", id="dialog-problem", classes="dialog-problem")
            yield Label(Text(self.help_text or "enter: OK · esc: cancel"), classes="dialog-help")

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.focus()
        field.cursor_position = len(field.value)
        self._show_choices(field.value)

    def _show_choices(self, value: str) -> None:
        if self.complete is None:
            return
        options = self.complete(value)
        shown = Text()
        for i, option in enumerate(options[:8]):
            if i:
                shown.append("  ")
            shown.append(one_line(option.rsplit("/", 2)[-2] + "/" if option.endswith("/")
                                  else option.rsplit("/", 1)[-1]))
        if len(options) > 8:
            shown.append(f"  … {len(options) - 8} more", style="dim")
        self.query_one("#dialog-choices", Static).update(shown)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._show_choices(event.value)
        if self.problem:
            self.say("")

    def say(self, problem: str) -> None:
        self.problem = problem
        self.query_one("#dialog-problem", Static).update(Text(problem, style="bold red") if problem else Text())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value
        if self.check is not None:
            problem = self.check(value)
            if problem:
                self.say(problem)
                return
        self.dismiss(value)

    def action_complete(self) -> None:
        if self.complete is None:
            self.focus_next()
            return
        field = self.query_one(Input)
        options = self.complete(field.value)
        if not options:
            return
        common = os.path.commonprefix(options)
        if len(common) > len(field.value):
            field.value = common
            field.cursor_position = len(common)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen[bool]):
    """A yes/no question: y or Enter says yes, n or Esc no."""

    BINDINGS = [
        Binding("y,enter", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str, detail: str = "") -> None:
        super().__init__()
        self.question = question
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="confirm-dialog"):
            yield Label(Text(self.question, style="bold"), classes="dialog-title")
            if self.detail:
                yield Static(Text(self.detail), classes="dialog-note")
            yield Label(Text("y / enter: yes · n / esc: no"), classes="dialog-help")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
