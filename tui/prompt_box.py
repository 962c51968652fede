"""The prompt box: a multi-line text area where Enter sends and Ctrl+J (or
Alt+Enter) starts a new line; pasted text keeps its newlines. Up on the first
line and Down on the last walk earlier prompts (`tui.prompt_history`: this
session's, then every chat's). A paste that names image files only (a path,
several, or a terminal's drag and drop) attaches them instead of typing the
path (`core.answering.attachments.pasted_paths`). In edit mode (the last prompt recalled
to be changed and sent again) Enter re-sends it as new attempts of that turn
and Esc leaves the mode."""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

from core.answering.attachments import pasted_paths
from tui.prompt_history import PromptHistory


class PromptBox(TextArea):
    BINDINGS = [
        Binding("enter", "submit", "Send", id="prompt.send", tooltip="Send to every contestant"),
        Binding("ctrl+j,alt+enter", "newline", "New line", id="prompt.newline", key_display="^j"),
        Binding("up", "history_older", "Earlier prompt", id="prompt.older", show=False,
                tooltip="First line: the earlier prompt (this chat's, then all chats')"),
        Binding("down", "history_newer", "Later prompt", id="prompt.newer", show=False,
                tooltip="Last line, after Up: the later prompt (then your draft)"),
    ]

    class Submitted(Message):
        def __init__(self, text: str, *, edit: bool = False) -> None:
            super().__init__()
            self.text = text
            self.edit = edit          # re-send the last turn with this text (new attempts)

    class PathsPasted(Message):
        """A paste that named image files only: attach them."""

        def __init__(self, paths: list[str]) -> None:
            super().__init__()
            self.paths = paths

    class EditEnded(Message):
        """Edit mode was left without sending."""

    def __init__(self, *, id: str | None = "prompt", placeholder: str = "") -> None:
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus",
                         compact=True, placeholder=placeholder)
        self.prompts = PromptHistory()     # (`history` is the text area's own undo history)
        self.editing = False

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.action_submit()
            return
        if event.key in ("ctrl+j", "alt+enter"):
            event.stop()
            event.prevent_default()
            self.action_newline()
            return
        if event.key == "escape" and self.editing:
            event.stop()
            event.prevent_default()
            self.end_edit()
            self.post_message(self.EditEnded())
            return
        await super()._on_key(event)

    async def _on_paste(self, event: events.Paste) -> None:
        paths = pasted_paths(event.text) if not self.read_only else None
        if paths:
            event.stop()
            event.prevent_default()
            self.post_message(self.PathsPasted(paths))
            return
        await super()._on_paste(event)

    def action_submit(self) -> None:
        self.post_message(self.Submitted(self.text, edit=self.editing))

    def action_newline(self) -> None:
        start, end = self.selection
        self._replace_via_keyboard("\n", start, end)

    # ----- history ---------------------------------------------------------
    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    def action_history_older(self) -> None:
        if self.cursor_location[0] > 0 or self.editing:
            self.action_cursor_up()
            return
        text = self.prompts.older(self.text)
        if text is None:
            if self.prompts.walking or self.prompts.entries:
                self.app.bell()
            return
        self._show(text)
        if "\n" in text:     # on the first line, so that Up goes on walking
            self.move_cursor((0, len(self.document[0])))

    def action_history_newer(self) -> None:
        last_row = self.document.line_count - 1
        if self.cursor_location[0] < last_row or not self.prompts.walking or self.editing:
            self.action_cursor_down()
            return
        text = self.prompts.newer()
        if text is not None:
            self._show(text)

    def clear_prompt(self, sent: str | None = None) -> None:
        """Empty the box after a send (`sent` becomes the newest history entry)."""
        if sent is not None:
            self.prompts.sent(sent)
        else:
            self.prompts.reset()
        self.end_edit()
        self.clear()

    # ----- edit mode -------------------------------------------------------
    def begin_edit(self, text: str) -> None:
        self.editing = True
        self.add_class("-editing")
        self.border_title = "editing the last prompt: Enter sends it again (new attempts), Esc stops"
        self._show(text)

    def end_edit(self) -> None:
        if self.editing:
            self.editing = False
            self.remove_class("-editing")
            self.border_title = None
