"""`lineup vote`: a blind queue over cases without a vote. One case at a
time, its answers in freshly shuffled positions (recorded in the vote),
vote, tag, note, skip, undo; progress n/total; resumable because the queue
is rebuilt from the record each time. Names appear after each vote or only
at the end (`reveal`). With `adaptive`, two answers at a time, the pair
chosen by `core.stats.adaptive`, and the info line says when the top of the
ranking is separated ("you can stop: ..."). The logic is `core.answering.vote_queue.VoteQueue`; this screen
draws it and forwards keys."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding
from textual.containers import Container
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from core.answering.vote_queue import LABELS, QueueItem, Repeats, Reveal, VoteQueue, check_summary
from core.stats.votes import VoteError, VoteNeedsConfirmation, describe
from tui.footer_fit import fit_screen_bindings
from tui.pane_tabs import grid_shape
from tui.panes import Pane
from tui.record_entries import Entry, answer_entries, pane_status, prompt_entry, status_note
from tui.tag_picker import AnswerPicker, TagChoice, TagPicker, tag_summary
from tui.vote_bar import VoteBar

if TYPE_CHECKING:
    from textual import getters

    from core.answering.vote_queue import TurnRecord
    from core.stats.votes import OutputRecord
    from tui.host import Host

QUEUE_PANE_ACTIONS = frozenset({"copy", "copy_code", "maximise", "reasoning", "tag"})


class VoteQueueScreen(Screen):
    if TYPE_CHECKING:
        app = getters.app(Host)   # how the type checker sees `self.app` (Textual's own at run time)

    BINDINGS = [
        Binding("s", "skip", "Skip", id="queue.skip", tooltip="Leave this case for later"),
        Binding("ctrl+t", "tag", "Tag", id="queue.tag",
                tooltip="Tag an answer, add a note (the focused one, else it asks which)"),
        Binding("u", "undo", "Undo", id="queue.undo", tooltip="Take back the last vote and judge again"),
        Binding("o", "note", "Note", id="queue.note", tooltip="A note saved with the next vote"),
        Binding("space,enter", "next", "Next", id="queue.next", tooltip="Next case (after a vote)"),
        Binding("f2", "focus_vote", "Vote", id="queue.vote", tooltip="Go to the vote bar"),
        Binding("f8", "reveal", "Reveal", id="queue.reveal",
                tooltip="Show this case's models without a vote (it leaves your queue)"),
        Binding("f3", "score", "Score", id="queue.score",
                tooltip="Score answers 1-5 on the set's dimensions (with or without a vote)"),
        Binding("escape", "close", "Back", id="queue.back"),
    ]

    def __init__(self, session_id: str | None = None, *, reveal: Reveal = "each", repeats: Repeats = "separate",
                 standalone: bool = False, rng: random.Random | None = None, adaptive: bool = False,
                 confidence: float = 0.95, gold_rate: float = 0.0, blinding_audit: bool = False,
                 case_seed: str | None = None) -> None:
        super().__init__()
        self.case_seed = case_seed
        self.blinding_audit = blinding_audit
        self.gold_rate = gold_rate
        self.adaptive = adaptive
        self.confidence = confidence
        self.session_id = session_id
        self.reveal = reveal
        self.repeats = repeats
        self.standalone = standalone
        self.rng = rng
        self.queue: VoteQueue | None = None
        self.panes: list[Pane] = []
        self.note: str | None = None
        self.unconfirmed: tuple[str, list[str] | None] | None = None   # a vote waiting for its repeat
        self.info = Static("loading…", classes="info-line", id="queue-info")
        self.vote_bar = VoteBar()
        self._stop_said = False             # adaptive: the stop message was notified once

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield self.info
        yield Container(id="panes")
        yield self.vote_bar
        yield Input(placeholder="note for the next vote, Enter keeps it", id="queue-note")
        yield Footer(show_command_palette=False)

    # The order of importance when the footer is too narrow for them all
    # (`tui.footer_fit`): the vote bar's or focused pane's keys first, then these.
    FOOTER_RANK = ("focus_vote", "next", "skip", "quit", "help", "score", "tag", "undo", "reveal", "note", "close")

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """As many whole footer keys as the width holds, the most important
        first (`FOOTER_RANK`), never a key cut mid-word."""
        return fit_screen_bindings(self, super().active_bindings, (self, self.app), self.FOOTER_RANK)

    @property
    def palette_bindings(self) -> dict[str, ActiveBinding]:
        """Every active binding, for the palette (the footer shows those that fit)."""
        return super().active_bindings

    # ----- the queue's state, for drawing (and tests) ------------------------
    @property
    def _queue(self) -> VoteQueue:
        """The queue, for what runs once a case is shown: `on_mount` loads it
        before the first case, and every action on a case comes after."""
        assert self.queue is not None, "the vote queue is used before it is loaded"
        return self.queue

    @property
    def items(self) -> list[QueueItem]:
        return self.queue.items if self.queue else []

    @property
    def total(self) -> int:
        return self.queue.total if self.queue else 0

    @property
    def done(self) -> int:
        return self.queue.done if self.queue else 0

    @property
    def current(self) -> QueueItem | None:
        return self.queue.current if self.queue else None

    @property
    def order(self) -> list[str]:
        return self.queue.order if self.queue else []

    @property
    def judged(self) -> bool:
        return bool(self.queue and self.queue.judged)

    @property
    def history(self) -> list:
        return self.queue.history if self.queue else []

    @property
    def waiting(self) -> bool:
        """The case on screen waits for a vote (not judged, not revealed)."""
        return bool(self.queue and self.queue.waiting)

    async def on_mount(self) -> None:
        self.title = "lineup"
        self.sub_title = "vote queue"
        self.query_one("#queue-note").display = False
        queue = VoteQueue(self.app.store, rater=self.app.rater, session_id=self.session_id,
                          reveal=self.reveal, repeats=self.repeats, rng=self.rng, adaptive=self.adaptive,
                          confidence=self.confidence, gold_rate=self.gold_rate, case_seed=self.case_seed)
        try:
            await queue.load()
        except Exception as exc:
            if self.standalone:
                self.app.exit(2, message=f"lineup vote: {exc}")
            else:
                self.app.say(str(exc), severity="error")
                self.dismiss()
            return
        self.queue = queue
        await self.show_next()

    # ----- showing a case ---------------------------------------------------
    async def show_next(self) -> None:
        grid = self.query_one("#panes", Container)
        await grid.remove_children()
        self.panes = []
        self.unconfirmed = None
        item = self._queue.advance()
        if item is None:
            self.vote_bar.remove_class("-visible")
            self._show_end()
            return
        cols, rows = grid_shape(len(self.order))
        grid.styles.grid_size_columns, grid.styles.grid_size_rows = cols, rows
        self.panes = [Pane(i, LABELS[i], show_figures=False, actions=QUEUE_PANE_ACTIONS)
                      for i in range(len(self.order))]
        await grid.mount_all(self.panes)
        for i, alias in enumerate(self.order):
            self.panes[i].reasoning_hidden = True
            self._fill(self.panes[i], item, alias)
        self.vote_bar.set_labels(self._queue.labels)
        self.vote_bar.add_class("-visible")
        self.vote_bar.focus()
        self._show_info()

    def _fill(self, pane: Pane, item: QueueItem, alias: str, *, hidden: bool = True) -> None:
        """Pane: the case's turns and this contestant's answers; while `hidden`
        (before the vote's reveal) an error says only its kind and status, and
        reasoning is left out (`core.stats.votes.shown_reasoning`)."""
        entries: list[Entry] = []
        last = None

        def answer(turn: TurnRecord) -> None:
            nonlocal last
            out = item.outputs.get((turn.id, alias))
            if out is not None:
                entries.extend(answer_entries(out, status_note(out, hidden=hidden), hidden=hidden))
                last = out

        templated = any(getattr(c, "template", None) for c in item.contestants if c.alias == alias)
        for t in item.context:
            entries.append(prompt_entry(t, item.outputs.get((t.id, alias)), hidden=hidden, templated=templated))
            answer(t)
        for r, turns in enumerate(item.repeats):
            if len(item.repeats) > 1:
                entries.append(("note", f"repeat {r + 1} of {len(item.repeats)}"))
            for t in turns:
                entries.append(prompt_entry(t, item.outputs.get((t.id, alias)), hidden=hidden, templated=templated))
                answer(t)
        pane.body.set_conversation(entries)
        pane.body.show_from_prompt(len(item.context))   # the judged part from its start, as in every pane
        pane.status = pane_status(last) if last else "idle"

    def _show_info(self, extra: str = "") -> None:
        item = self.current
        what = "pair" if self.adaptive else "case"
        line = f"{what} {self._queue.position} of {self.total}"
        if item is not None and item.case_id:
            line += f" · {item.case_id}" + (f" ({item.category})" if item.category else "")
        if item is not None and len(item.repeats) > 1:
            line += f" · {len(item.repeats)} repeats judged together"
        if self.note:
            line += " · note set"
        if extra:
            line += " · " + extra
        # the stop message names models: only once this case's names are shown (never beside a blind case)
        stop = self._queue.stop_message if self.queue is not None and not self.waiting else None
        if stop:
            line += " · " + stop
        self.info.update(Text(line))

    def _show_end(self) -> None:
        seen = f", {len(self._queue.seen)} revealed without a vote" if self._queue.seen else ""
        lines = [f"All done: {self.done} of {self.total} cases judged{seen}." if self.total else
                 "Nothing to vote on: every case has a vote."]
        if self.reveal == "end" and self.history:
            lines.append("Your votes, revealed:")
            for judged in self.history:
                if not judged.votes:        # a gold pair: a check, not a vote
                    continue
                v = judged.votes[0]
                names = ", ".join(f"{label} = {alias}" for label, alias in v.mapping.items())
                item = judged.item
                lines.append(f"  {item.case_id or item.targets[0].id[:10]}: {describe(v, revealed=False)} ({names})")
        self._mark_revealed()
        lines.append("u: undo the last vote · Esc: quit")
        self.info.update(Text("\n".join(lines)))

    @work(group="queue-write", exit_on_error=False)
    async def _mark_revealed(self) -> None:
        """End of the queue: record that the names of its votes were shown."""
        try:
            await self._queue.finish()
        except Exception as exc:
            self.app.say(f"Could not record the reveal: {exc}", severity="error")

    # ----- voting -------------------------------------------------------------
    def on_vote_bar_voted(self, event: VoteBar.Voted) -> None:
        event.stop()
        if not self.waiting:
            return
        self._record(event.choice, event.ranking)

    @work(group="queue-write", exclusive=True, exit_on_error=False)
    async def _record(self, choice: str, ranking: list[str] | None) -> None:
        item = self.current
        if item is None:    # voting is offered only while a case waits for its vote
            return
        # the same vote cast again after a warning confirms it
        confirm = self.unconfirmed == (choice, ranking)
        self.unconfirmed = None
        try:
            votes = await self._queue.vote(choice, ranking, note=self.note, confirm=confirm)
        except VoteNeedsConfirmation as exc:
            self.unconfirmed = (choice, ranking)
            self.app.say(f"Not saved yet: {exc}", severity="warning")
            return
        except VoteError as exc:
            self.app.say(f"Vote not saved: {exc}", severity="error")
            return
        except Exception as exc:
            self.app.say(f"Vote not saved: {exc}", severity="error")
            return
        self.note = None
        stop = self._queue.stop_message
        if stop and not self._stop_said:
            self._stop_said = True
            self.app.say(stop[0].upper() + stop[1:])
        if not votes:   # a gold pair: a check of the rater, recorded apart from the votes
            gold = self._queue.history[-1].gold
            kind = ("a known better answer against a worse one" if gold and gold.source == "case"
                    else "one answer was a spoiled copy")
            what = f"a check pair ({kind}): " + ("you saw it" if gold and gold.correct else "you missed it")
            if self.reveal == "each":
                self._show_names(item, what)
            else:
                self.app.say(what)
                await self.show_next()
            return
        if self.blinding_audit:
            await self._ask_guess(item)
        if item.dimensions:     # before the names, so the scores are blind too
            await self._ask_scores(item)
        what = describe(votes[0], revealed=False)
        if self.reveal == "each":
            self._show_names(item, f"voted {what}")
        else:
            await self.show_next()

    async def _ask_guess(self, item: QueueItem) -> None:
        """The blinding audit, before the names: who wrote A? (every model of
        the session offered). Esc records nothing; a failed write is said."""
        from tui.guess_picker import NO_IDEA, GuessPicker

        models = sorted(c.alias for c in item.contestants) or sorted(item.aliases)
        answer = await self.app.push_screen_wait(GuessPicker("A", models))
        if answer is None:
            return
        try:
            await self._queue.guess("A", None if answer == NO_IDEA else answer, models)
        except Exception as exc:
            self.app.say(f"Guess not saved: {exc}", severity="error")

    async def _ask_scores(self, item: QueueItem) -> None:
        """Each answer on each of the session's dimensions, 1-5, by label only;
        what was given is saved (a failed write is said), the rest skipped."""
        from tui.score_sheet import ScoreSheet

        queue = self._queue
        given = await self.app.push_screen_wait(ScoreSheet(queue.labels, item.dimensions, queue.score_of))
        saved = 0
        for label, dimension, value in given or ():
            try:
                saved += bool(await queue.score(label, dimension, value))
            except Exception as exc:
                self.app.say(f"Score not saved: {exc}", severity="error")
                return
        if saved:
            self.app.say(f"{saved} score{'s' if saved != 1 else ''} saved.")

    @work(group="queue-write", exclusive=True, exit_on_error=False)
    async def action_score(self) -> None:
        """Score the case on screen without waiting for the vote (or again after it)."""
        item = self.current
        if item is None or not item.dimensions or self._queue.gold is not None:
            return
        await self._ask_scores(item)

    def _show_names(self, item: QueueItem, what: str) -> None:
        """The case's models on its panes, its figures, checks, whole errors
        and reasoning."""
        for i, alias in enumerate(self.order):
            self.panes[i].name_shown = f"{LABELS[i]} · {alias}"
            self.panes[i].show_figures = True
            self.panes[i].detail = check_summary(item, alias) or ""
            self.panes[i].reasoning_hidden = False
            if any(o.status == "error" or o.reasoning or (o.trace is not None and o.trace.structured == "fallback")
                   for o in self._answers_of(item, alias)):
                # the errors whole, the reasoning, a structured fallback
                self._fill(self.panes[i], item, alias, hidden=False)
        self.vote_bar.remove_class("-visible")
        reference = f" · reference: {item.reference}" if item.reference else ""
        self._show_info(f"{what}{reference} · Enter/space: next case")
        self.focus_next_target()

    @work(group="queue-write", exclusive=True, exit_on_error=False)
    async def action_reveal(self) -> None:
        """This case's models without a vote (recorded as its reveal; it no
        longer waits in this rater's queue)."""
        item = self.current
        if item is None or not self.waiting:
            return
        try:
            await self._queue.reveal_current()
        except Exception as exc:
            self.app.say(f"Reveal not saved: {exc}", severity="error")
            return
        self._show_names(item, "revealed without a vote")

    @staticmethod
    def _answers_of(item: QueueItem, alias: str) -> list:
        turns = [*item.context, *(t for turns in item.repeats for t in turns)]
        return [o for t in turns if (o := item.outputs.get((t.id, alias))) is not None]

    def focus_next_target(self) -> None:
        self.set_focus(None)

    async def action_next(self) -> None:
        if self.current is not None and not self.waiting:
            await self.show_next()

    async def action_skip(self) -> None:
        if self.waiting:
            self._queue.skip()   # back of the queue
            self.app.say("Skipped: it comes back at the end.")
            await self.show_next()

    @work(group="queue-write", exclusive=True, exit_on_error=False)
    async def action_undo(self) -> None:
        if self.queue is None or not self.history:
            self.app.say("No vote to undo.")
            return
        try:
            await self.queue.undo()   # withdrawn, kept in the record, no longer counted
        except Exception as exc:
            self.app.say(f"Undo not saved: {exc}", severity="error")
            return
        await self.show_next()
        self._show_info("undone: the vote is withdrawn; judge this case again or skip it")

    def action_note(self) -> None:
        box = self.query_one("#queue-note", Input)
        box.display = True
        box.value = self.note or ""
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.note = event.value.strip() or None
        event.input.display = False
        self.vote_bar.focus()
        self._show_info()

    def action_focus_vote(self) -> None:
        if self.vote_bar.has_class("-visible"):
            self.vote_bar.focus()

    def action_close(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        box = self.query_one("#queue-note", Input)
        if box.display:
            box.display = False
            self.vote_bar.focus()
            return
        if self.standalone:
            self.app.exit(0)
        else:
            self.dismiss()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next":
            return self.current is not None and not self.waiting
        if action in ("skip", "note", "reveal"):
            return self.waiting
        if action == "tag":
            return self.current is not None and bool(self.panes)
        if action == "score":
            return (self.current is not None and bool(self.current.dimensions) and self.queue is not None
                    and self.queue.gold is None)
        return True

    # ----- panes ------------------------------------------------------------
    def on_pane_requested(self, event: Pane.Requested) -> None:
        event.stop()
        pane = self.panes[event.index]
        name = pane.name_shown
        if event.action == "tag":
            self._open_tags(event.index)
        else:
            pane.common_action(event.action, name)

    def action_tag(self) -> None:
        """Tag the focused pane's answer; with the focus elsewhere (the vote
        bar, whose letters vote), ask which answer first."""
        focused = self.focused
        for pane in self.panes:
            if focused is not None and (focused is pane or pane in focused.ancestors):
                self._open_tags(pane.index)
                return

        def chosen(index: int | None) -> None:
            if index is not None:
                self._open_tags(index)

        self.app.push_screen(AnswerPicker(self._queue.labels), chosen)

    def _open_tags(self, index: int) -> None:
        """The tag picker for the answer (or answers, repeats together) of pane `index`."""
        item = self.current
        if item is None or index >= len(self.panes):
            return
        name = self.panes[index].name_shown
        alias = self.order[index]
        outs = [o for t in item.targets if (o := item.outputs.get((t.id, alias))) is not None]
        if not outs:
            self.app.say(f"{name}: no answer to tag.")
            return
        carried = [t for o in outs for t in item.tags.get(o.id, ())]
        picker = TagPicker(name, self.app.tags, already=tuple(t.tag for t in carried if not t.auto),
                           auto=tuple(t.tag for t in carried if t.auto))

        def tagged(choice: TagChoice | None) -> None:
            self._tag(item, outs, name, choice)

        self.app.push_screen(picker, tagged)

    @work(group="queue-write", exit_on_error=False)
    async def _tag(self, item: QueueItem, outs: list[OutputRecord], name: str, choice: TagChoice | None) -> None:
        if choice is None:
            return
        tags = choice.tags or (("note",) if choice.note else ())
        try:
            await self._queue.tag(item, outs, tags, note=choice.note, removed=tuple(choice.removed))
        except Exception as exc:
            self.app.say(f"Tag not saved: {exc}", severity="error")
            return
        self.app.say(tag_summary(name, tags, choice))
