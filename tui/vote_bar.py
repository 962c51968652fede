"""The vote bar: one key per label, tie, both/all bad, and (with more than two
contestants) an optional full ranking typed best to worst. It only collects
the choice; the screen records it through the session (or the queue).

Every choice stays on screen at any width (`fit_choices`): the names on the
buttons are shortened ("demo/concise" -> "concise", then cut) and the
question moves to a row of its own before any button could be pushed off."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal

from textual.message import Message
from textual.widgets import Button, Static

from core.stats.votes import bad_choice, ranking_missing, ranking_with_last_implied

LETTERS = "abcdefgh"
BEST = Binding.Group("best", compact=False)   # the footer names the letters once: "a b c best"
BUTTON_CHROME = 3          # a compact button's padding (one cell each side) and its right margin
PROMPT_CHROME = 2          # the question's right margin


def choice_texts(labels: list[str], bad: str, cut: int | None = None, short: bool = False) -> list[str]:
    """What each button says: "a: name" per label ("A" alone when the label
    is its letter, "a" when `cut` is 0), tie, the bad choice and, past two, rank."""
    from tui.pane_tabs import cut_names, distinct_tails, short_names

    names = short_names(labels) if short else list(labels)
    if cut is not None:
        names = cut_names(distinct_tails(names), cut) if cut else ["" for _ in names]
    texts = [label if label == LETTERS[i].upper() else f"{LETTERS[i]}: {name}" if name else LETTERS[i]
             for i, (label, name) in enumerate(zip(labels, names, strict=True))]
    texts += ["tie", bad.replace("_", " ")]
    if len(labels) > 2:
        texts.append("rank…")
    return texts


def choices_width(texts: list[str]) -> int:
    return sum(len(t) + BUTTON_CHROME for t in texts)


def fit_choices(labels: list[str], bad: str, width: int, prompt: str) -> tuple[list[str], bool]:
    """The button texts for a bar `width` cells wide and whether the question
    needs a row of its own: full names beside the question, short names,
    then on two rows names cut shorter until every choice fits."""
    room = width - len(prompt) - PROMPT_CHROME
    for short in (False, True):
        texts = choice_texts(labels, bad, short=short)
        if choices_width(texts) <= room:
            return texts, False
    longest = max((len(label) for label in labels), default=1)
    for cut in [None, *range(longest, -1, -1)]:      # at 0 the letters alone: the panes name them
        texts = choice_texts(labels, bad, cut=cut, short=True)
        if choices_width(texts) <= width:
            return texts, True
    return texts, True


class VoteBar(Horizontal, can_focus=True):
    """Shown under the panes when an answer set is ready to judge."""

    BINDINGS = [
        *[Binding(k, f"pick('{k.upper()}')", f"{k.upper()} best", id=f"vote.{k}", group=BEST,
                  tooltip=f"Vote: {k.upper()} is best") for k in LETTERS],
        Binding("t", "pick('tie')", "Tie", id="vote.tie", tooltip="Vote: a tie"),
        Binding("x", "pick('bad')", "All bad", id="vote.bad", tooltip="Vote: none is good"),
        Binding("n", "rank", "Rank", id="vote.rank", tooltip="Full ranking: press labels best to worst"),
        Binding("enter", "confirm_rank", "Save ranking", id="vote.rank_confirm",
                tooltip="Save the ranking with the one answer left placed last"),
        Binding("escape", "cancel_rank", "Start over", id="vote.rank_cancel", tooltip="Drop the ranking in progress"),
    ]

    class Voted(Message):
        """`choice` is a label, 'tie', 'both_bad' or 'all_bad'; `ranking` best to worst."""

        def __init__(self, choice: str, ranking: list[str] | None) -> None:
            super().__init__()
            self.choice = choice
            self.ranking = ranking

    def __init__(self, *, id: str | None = "vote-bar") -> None:
        super().__init__(id=id)
        self.labels: list[str] = []
        self.ranking: list[str] | None = None
        self.prompt = Static("", id="vote-prompt")

    def compose(self) -> ComposeResult:
        yield self.prompt
        yield Horizontal(id="vote-choices")

    def on_resize(self) -> None:
        self._fit()

    def _fitted(self, labels: list[str]) -> list[str]:
        """Button texts for the bar's width; the question goes above them where needed."""
        width = self.content_size.width or max(1, self.app.size.width - 2)
        texts, stacked = fit_choices(labels, bad_choice(len(labels)), width, str(self.prompt.render()))
        self.set_class(stacked, "-stacked")
        return texts

    def _fit(self) -> None:
        """Refit the buttons (every choice stays visible)."""
        buttons = list(self.query(Button))
        if not self.labels or not buttons:
            return
        for button, text in zip(buttons, self._fitted(self.labels), strict=False):
            if str(button.label) != text:
                button.label = text

    def set_labels(self, labels: list[str]) -> None:
        """The labels in screen order; the buttons are rebuilt when they change."""
        self.ranking = None
        self._show_prompt()
        self.refresh_bindings()
        if list(labels) == self.labels and self.query(Button):
            return
        self.labels = list(labels)
        self.run_worker(self._rebuild(list(labels)), exclusive=True, group="vote-buttons")

    async def _rebuild(self, labels: list[str]) -> None:
        row = self.query_one("#vote-choices", Horizontal)
        await row.remove_children()
        texts = self._fitted(labels)      # fitted before they are drawn, not after
        buttons = [Button(texts[i], id=f"vote-pos-{i}", compact=True, classes="vote-label")
                   for i in range(len(labels))]
        buttons.append(Button(texts[len(labels)], id="vote-tie", compact=True))
        buttons.append(Button(texts[len(labels) + 1], id="vote-bad", compact=True))
        if len(labels) > 2:
            buttons.append(Button(texts[-1], id="vote-rank", compact=True))
        await row.mount_all(buttons)

    @property
    def bad_choice(self) -> str:
        return bad_choice(len(self.labels))

    @property
    def implied_last(self) -> str | None:
        """The one label a ranking in progress has left (it would be last), else None."""
        if self.ranking is None:
            return None
        missing = ranking_missing(self.ranking, self.labels)
        return missing[0] if len(missing) == 1 else None

    def _show_prompt(self) -> None:
        ranking, last = self.ranking, self.implied_last
        if ranking is not None and last is not None:
            full = " > ".join(ranking_with_last_implied(ranking, self.labels))
            key = LETTERS[self.labels.index(last)]
            self.prompt.update(Text(f"Ranking {full}: {last} last. Enter saves it ({key} too), Esc starts over"))
        elif ranking is not None:
            done = " > ".join(ranking)
            self.prompt.update(Text(f"Rank best to worst (press a, b, ...): {done}{' > ' if done else ''}…"))
        elif self.has_focus:
            self.prompt.update(Text("Which answer is best?"))
        else:   # keys typed elsewhere never vote: say how to get here
            self.prompt.update(Text("Which answer is best? (F2 to vote)"))
        self._fit()

    def on_focus(self) -> None:
        self._show_prompt()

    def on_blur(self) -> None:
        self._show_prompt()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "pick" and parameters:
            choice = str(parameters[0])
            if choice in ("tie", "bad"):
                return self.ranking is None
            return self._label_for_key(choice) is not None
        if action == "rank":
            return len(self.labels) > 2 and self.ranking is None
        if action == "confirm_rank":
            return self.implied_last is not None
        if action == "cancel_rank":
            return self.ranking is not None
        return True

    def _label_for_key(self, letter: str) -> str | None:
        """Keys a, b, c... pick by screen position, whatever the labels are."""
        i = LETTERS.find(letter.lower()) if len(letter) == 1 else -1
        return self.labels[i] if 0 <= i < len(self.labels) else None

    def action_pick(self, choice: str) -> None:
        if choice == "bad":
            choice = self.bad_choice
        elif choice != "tie":
            label = self._label_for_key(choice)
            if label is None:
                return
            choice = label
        if self.ranking is not None:
            # A ranking is saved only when every label is placed: by its own key,
            # or (the last one) by Enter once the bar has said which it is.
            if choice in self.labels and choice not in self.ranking:
                self.ranking.append(choice)
                if not ranking_missing(self.ranking, self.labels):
                    self._save_ranking(list(self.ranking))
                    return
                self._show_prompt()
                self.refresh_bindings()
            return
        self.post_message(self.Voted(choice, None))

    def action_confirm_rank(self) -> None:
        if self.ranking is not None and self.implied_last is not None:
            self._save_ranking(ranking_with_last_implied(self.ranking, self.labels))

    def action_cancel_rank(self) -> None:
        self.ranking = None
        self._show_prompt()
        self.refresh_bindings()

    def _save_ranking(self, ranking: list[str]) -> None:
        self.ranking = None
        self._show_prompt()
        self.refresh_bindings()
        self.post_message(self.Voted(ranking[0], ranking))

    def action_rank(self) -> None:
        self.ranking = []
        self._show_prompt()
        self.refresh_bindings()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        bid = event.button.id or ""
        if bid == "vote-rank":
            self.action_rank()
        elif bid == "vote-tie":
            self.action_pick("tie")
        elif bid == "vote-bad":
            self.action_pick("bad")
        elif bid.startswith("vote-pos-"):
            self.action_pick(LETTERS[int(bid.removeprefix("vote-pos-"))])
