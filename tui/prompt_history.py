"""Walking earlier prompts with Up and Down in the chat's prompt box.

Why this module exists: the order is a rule of its own (this session's
prompts newest first, then every other chat's from the store, each prompt
once), and so is what Down gives back past the newest entry (the draft being
typed before the walk began). Kept apart from the prompt box so that the rule
is tested without a terminal.
"""

from __future__ import annotations

from collections.abc import Iterable


class PromptHistory:
    """Entries newest first: `session` (this session's prompts, oldest
    first as sent) then `others` (newest first, from `Store.prompt_history`),
    each text once. `older` and `newer` move through them; `draft` is what
    was typed before the walk began, given back past the newest entry."""

    def __init__(self, session: Iterable[str] = (), others: Iterable[str] = ()) -> None:
        self.entries: list[str] = []
        self._seen: set[str] = set()
        for text in reversed(list(session)):
            self._add(text)
        for text in others:
            self._add(text)
        self.position = -1        # -1: not walking (the draft is shown)
        self.draft = ""

    def _add(self, text: str, *, front: bool = False) -> None:
        text = text.strip("\n")
        if not text.strip() or text in self._seen:
            if front and text in self._seen:
                self.entries.remove(text)
                self.entries.insert(0, text)
            return
        self._seen.add(text)
        if front:
            self.entries.insert(0, text)
        else:
            self.entries.append(text)

    def extend_others(self, others: Iterable[str]) -> None:
        """More prompts from other sessions (they come from the store after the screen opens)."""
        for text in others:
            self._add(text)

    def sent(self, text: str) -> None:
        """A prompt was just sent: it becomes the newest entry and the walk ends."""
        self._add(text, front=True)
        self.reset()

    def reset(self) -> None:
        self.position = -1
        self.draft = ""

    @property
    def walking(self) -> bool:
        return self.position >= 0

    def older(self, current: str) -> str | None:
        """The entry before the one shown (the newest when the walk begins,
        keeping `current` as the draft); None at the oldest."""
        if self.position + 1 >= len(self.entries):
            return None
        if self.position < 0:
            self.draft = current
        self.position += 1
        return self.entries[self.position]

    def newer(self) -> str | None:
        """The entry after the one shown, the draft past the newest; None when not walking."""
        if self.position < 0:
            return None
        self.position -= 1
        return self.draft if self.position < 0 else self.entries[self.position]
