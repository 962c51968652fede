"""The side-by-side chat screen: panes, the vote bar and the prompt box over
one `ChatSession`. Sends run in workers on the app's loop; the session calls
`_on_update` for every stream event and the pane it names renders it. While a
blind session is unrevealed it names labels only, and an answer's error, or
a failure's text, shows only what `core.votes` says may be seen before the
reveal (kind and HTTP status); the rest is shown once revealed."""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from core.config import DEFAULT_TAGS
from core.sessions import ChatSession, PaneUpdate
from core.votes import VoteNeedsConfirmation, describe, exception_line, human_votes
from tui.commands import PaletteCommand
from tui.figures import record_figures
from tui.panes import Pane
from tui.prompt_box import PromptBox
from tui.record_entries import Entry, answer_entries, pane_status, status_note
from tui.tag_picker import TagChoice, TagPicker, tag_summary
from tui.vote_bar import VoteBar

if TYPE_CHECKING:
    from textual import getters

    from core.votes import LoadedSession
    from tui.app import LineupApp

PANE_ACTIONS = {
    "cancel": "cancel the answer in flight",
    "retry": "new attempt at the last turn (old one kept)",
    "copy": "copy the answer",
    "copy_code": "copy the answer's last code block",
    "maximise": "maximise / restore the pane",
    "reasoning": "show / hide reasoning",
    "tag": "tag the answer (failure modes, note)",
}


def grid_shape(n: int) -> tuple[int, int]:
    """Columns and rows: side by side up to four, then two rows."""
    if n <= 4:
        return max(n, 1), 1
    return math.ceil(n / 2), 2


class ChatScreen(Screen):
    """One live session."""

    if TYPE_CHECKING:
        app = getters.app(LineupApp)   # how the type checker sees `self.app` (Textual's own at run time)

    BINDINGS = [
        Binding("escape", "cancel_all", "Cancel all", id="chat.cancel_all", tooltip="Cancel every answer in flight"),
        Binding("f2", "focus_vote", "Vote", id="chat.vote", tooltip="Go to the vote bar (the only way to vote)"),
        Binding("f5", "withdraw_vote", "Withdraw vote", id="chat.withdraw_vote",
                tooltip="Withdraw my vote on the last turn (kept in the record)"),
        Binding("f8", "reveal", "Reveal", id="chat.reveal", tooltip="Show which model wrote what, without a vote"),
        Binding("f3", "focus_prompt", "Prompt", id="chat.prompt", tooltip="Go to the prompt box"),
        Binding("ctrl+n", "new_session", "New", id="chat.new", tooltip="New session with the same models"),
        Binding("ctrl+b", "toggle_blind", "Blind", id="chat.blind", tooltip="Blind mode for the next new session"),
    ]

    def __init__(self, session: ChatSession, *, tags: tuple[str, ...] = DEFAULT_TAGS, hint: str | None = None,
                 figures_when_blind: bool = False, loaded: LoadedSession | None = None,
                 autoplay: list[str] | None = None) -> None:
        super().__init__()
        self.session = session
        self.tags = tags
        self.hint = hint
        self.figures_when_blind = figures_when_blind
        self.loaded = loaded
        self.autoplay = list(autoplay or [])
        n = len(session.contestants)
        self.panes = [Pane(i, session.display_name(i), show_figures=self._figures_visible()) for i in range(n)]
        self.vote_bar = VoteBar()
        self.prompt = PromptBox(placeholder="Type a prompt, Enter sends to all (Ctrl+J: new line)")
        self.sending = False
        self.sends = 0          # prompts sent from this screen (tests wait on it)
        self._voted_turns: set[str] = set()
        self._unconfirmed_vote: tuple | None = None
        self._held_back: list[str] = []     # failures told in part while blind: told whole at the reveal

    # ----- layout ---------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        if self.hint:
            yield Static(Text(self.hint), id="hint")
        cols, rows = grid_shape(len(self.panes))
        grid = Container(*self.panes, id="panes")
        grid.styles.grid_size_columns = cols
        grid.styles.grid_size_rows = rows
        yield grid
        yield self.vote_bar
        yield self.prompt
        yield Footer(show_command_palette=False)

    async def on_mount(self) -> None:
        self._refresh_titles()
        if self.loaded is not None:
            self._show_loaded(self.loaded)
        self.prompt.focus()
        if self.autoplay:
            self._autoplay()
        else:
            self._offer_vote()

    def _figures_visible(self) -> bool:
        return self.session.revealed or self.figures_when_blind

    def _refresh_titles(self) -> None:
        s = self.session
        n = len(s.contestants)
        if s.revealed:
            names = " · ".join(c.alias for c in s.contestants)
            self.sub_title = f"{'blind, revealed' if s.blind else 'chat'} · {names}"
        else:
            self.sub_title = f"blind · {n} contestants ({', '.join(c.label for c in s.contestants)})"
        self.title = "lineup"
        for i, pane in enumerate(self.panes):
            pane.name_shown = s.display_name(i)
            pane.show_figures = self._figures_visible()
            pane.errors_hidden = not s.revealed
        self.refresh_bindings()

    def say(self, message: str, *, severity: SeverityLevel = "information") -> None:
        """A notification of our own making (it names labels only while blind)."""
        self.app.say(message, severity=severity)

    def say_failure(self, what: str, exc: BaseException) -> None:
        """`what` failed: the exception's text as `core.votes.exception_line`
        allows before the reveal; the whole of it is told at the reveal."""
        hidden = not self.session.revealed
        shown = exception_line(exc, hidden=hidden)
        if hidden and shown != exception_line(exc, hidden=False):
            self._held_back.append(f"{what}: {exception_line(exc, hidden=False)}")
        self.say(f"{what}: {shown}", severity="error")

    def _after_reveal(self) -> None:
        """Names are shown now: titles, figures, and whatever was held back
        (errors shown by kind only, failures told in part)."""
        self._refresh_titles()
        if any(p.masked_errors for p in self.panes):
            self._show_errors_whole()
        held, self._held_back = self._held_back, []
        for message in held:
            self.say(f"Before the reveal: {message}", severity="warning")

    @work(group="reveal", exit_on_error=False)
    async def _show_errors_whole(self) -> None:
        """Panes that showed an error by its kind only, redrawn from the record
        with the whole message (every turn and attempt, as they were shown)."""
        try:
            loaded = await self.app.store.load_session(self.session.id)
        except Exception as exc:
            self.say_failure("Could not show the errors in full", exc)
            return
        for pane in self.panes:
            if not pane.masked_errors:
                continue
            alias = self.session.contestants[pane.index].alias
            entries: list[Entry] = []
            for turn in loaded.turns:
                entries.append(("user", turn.user_message))
                for out in loaded.outputs_for(turn.id):
                    if out.contestant == alias:
                        entries += answer_entries(out, status_note(out, hidden=False))
            pane.body.set_conversation(entries)
            pane.masked_errors = False

    def _show_loaded(self, loaded: LoadedSession) -> None:
        """A resumed session: every saved turn and each contestant's latest answer."""
        aliases = [c.alias for c in self.session.contestants]
        for i, alias in enumerate(aliases):
            pane = self.panes[i]
            entries: list[Entry] = []
            last = None
            for turn in loaded.turns:
                entries.append(("user", turn.user_message))
                mine = [o for o in loaded.outputs_for(turn.id) if o.contestant == alias]
                if mine:
                    last = max(mine, key=lambda o: o.attempt)
                    entries += answer_entries(last, status_note(last, hidden=not self.session.revealed),
                                              hidden=not self.session.revealed)
                    pane.masked_errors |= last.status == "error" and not self.session.revealed
            pane.body.set_conversation(entries)
            if last is not None:
                pane.status = pane_status(last)
                pane.figures = record_figures(last)
        rater = self.app.rater
        self._voted_turns = {v.turn_id for v in human_votes(loaded.current_votes()) if v.rater == rater}

    # ----- sending --------------------------------------------------------
    def on_prompt_box_submitted(self, event: PromptBox.Submitted) -> None:
        event.stop()
        text = event.text.strip()
        if not text:
            return
        if self.sending or self.session.streaming:
            self.say("Still answering: wait, or press Esc to cancel.", severity="warning")
            return
        self.prompt.clear()
        self.send(text)

    def send(self, text: str) -> None:
        """Show the prompt in every pane and stream the answers (a worker)."""
        self.sending = True
        self.sends += 1
        self._hide_vote()
        for pane in self.panes:
            pane.begin_turn(text)
        self._send(text)

    @work(group="send", exit_on_error=False)
    async def _send(self, text: str) -> None:
        try:
            await self.session.send(text, on_update=self._feed)
        except Exception as exc:  # store full, provider bug: tell, keep the app
            self.say_failure("Sending failed", exc)
            for pane in self.panes:
                if pane.status in ("waiting", "streaming"):
                    pane.status = "error"
        finally:
            self.sending = False
        self._offer_vote()

    @work(group="send")
    async def _autoplay(self) -> None:
        """A rerun: send the recorded user turns one after another."""
        for text in self.autoplay:
            self.sending = True
            for pane in self.panes:
                pane.begin_turn(text)
            try:
                await self.session.send(text, on_update=self._feed)
            finally:
                self.sending = False
        self.autoplay = []
        self._offer_vote()

    def _feed(self, update: PaneUpdate) -> None:
        self.panes[update.index].apply(update.event, update.result, update.output_id)

    # ----- voting ---------------------------------------------------------
    def _offer_vote(self) -> None:
        """Show the vote bar once the last turn's answers are in. It never
        takes the focus: a rater's keys go where they went (the prompt), and
        a vote is cast only from the vote bar reached deliberately (F2, a
        click, the palette)."""
        s = self.session
        if not s.turns or self.sending or s.streaming or s.turns[-1].id in self._voted_turns:
            return
        if len(s.contestants) < 2:
            return
        self.vote_bar.set_labels([c.label for c in s.contestants])
        self.vote_bar.add_class("-visible")

    def _hide_vote(self) -> None:
        self.vote_bar.remove_class("-visible")
        if self.focused is self.vote_bar:
            self.prompt.focus()

    def on_vote_bar_voted(self, event: VoteBar.Voted) -> None:
        event.stop()
        self._vote(event.choice, event.ranking)

    @work(group="vote", exclusive=True, exit_on_error=False)
    async def _vote(self, choice: str, ranking: list[str] | None) -> None:
        was_hidden = not self.session.revealed
        # the same vote cast again after a warning (its answer failed...) confirms it
        key = (self.session.turns[-1].id if self.session.turns else None, choice, ranking)
        confirm, self._unconfirmed_vote = self._unconfirmed_vote == key, None
        try:
            vote = await self.session.vote(choice, ranking=ranking, rater=self.app.rater, confirm=confirm)
        except VoteNeedsConfirmation as exc:
            self._unconfirmed_vote = key
            self.say(f"Not saved yet: {exc}", severity="warning")
            return
        except Exception as exc:
            self.say_failure("Vote not saved", exc)
            return
        self._voted_turns.add(vote.turn_id)
        self._hide_vote()
        if was_hidden:
            self._after_reveal()
        else:
            self._refresh_titles()
        what = describe(vote, revealed=False)
        reveal = ""
        if was_hidden:
            reveal = " · " + ", ".join(f"{label} = {alias}" for label, alias in vote.mapping.items())
        self.say(f"Vote saved: {what}{reveal}")
        self.prompt.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Withdraw and reveal are offered (footer, keys) only where they apply."""
        if action == "withdraw_vote":
            return self.session.current_vote(self.app.rater) is not None
        if action == "reveal":
            return self.session.blind and not self.session.revealed
        return True

    def action_focus_vote(self) -> None:
        if self.vote_bar.has_class("-visible"):
            self.vote_bar.focus()
        else:
            self.say("Nothing to vote on yet.")

    def action_focus_prompt(self) -> None:
        self.prompt.focus()

    @work(group="vote", exclusive=True, exit_on_error=False)
    async def action_reveal(self) -> None:
        """Names without a vote (the rater asks): recorded as a reveal of the
        last turn, the whole session shown (its labels are shared by every
        turn). A vote may still follow."""
        s = self.session
        if not s.blind or s.revealed:
            self.say("Nothing is hidden: the names are shown.")
            return
        if not s.turns:
            self.say("Nothing to reveal yet.")
            return
        if self.sending or s.streaming:
            self.say("Still answering: wait, or press Esc, then reveal.", severity="warning")
            return
        try:
            rec = await s.reveal(self.app.rater)
        except Exception as exc:
            self.say_failure("Reveal not saved", exc)
            return
        if rec is None:
            return
        self._after_reveal()
        names = ", ".join(f"{c.label} = {c.alias}" for c in s.contestants)
        self.say(f"Revealed without a vote: {names}. F2 still votes.")

    @work(group="vote", exclusive=True, exit_on_error=False)
    async def action_withdraw_vote(self) -> None:
        """Withdraw my vote on the last turn: kept in the record with
        `retracted_at`, no longer counted; the turn can be judged again. Names
        already shown stay shown."""
        if self.session.current_vote(self.app.rater) is None:
            self.say("No vote of yours on the last turn to withdraw.")
            return
        try:
            withdrawn = await self.session.retract_vote(self.app.rater)
        except Exception as exc:
            self.say_failure("Withdrawal not saved", exc)
            return
        if withdrawn is None:
            return
        self._voted_turns.discard(withdrawn.turn_id)
        self._offer_vote()
        self.refresh_bindings()
        self.say(f"Vote withdrawn ({describe(withdrawn, revealed=False)}); it stays in the record, "
                 "no longer counted. F2 to vote again.")

    # ----- whole-screen actions ------------------------------------------
    def action_cancel_all(self) -> None:
        if self.vote_bar.ranking is not None:
            self.vote_bar.action_cancel_rank()
            return
        if self.session.streaming:
            self.session.cancel_all()
            return
        if self.maximized is not None:
            self.minimize()

    def action_new_session(self) -> None:
        if self.sending or self.session.streaming:
            self.say("Still answering: press Esc first.", severity="warning")
            return
        self.app.new_chat()

    def action_toggle_blind(self) -> None:
        self.app.blind_next = not self.app.blind_next
        state = "on" if self.app.blind_next else "off"
        if not self.session.turns and not self.sending:
            self.app.new_chat()
            self.app.say(f"Blind mode {state}: new session started.")
        else:
            self.app.say(f"Blind mode {state} for the next new session (Ctrl+N).")

    # ----- pane actions ---------------------------------------------------
    def on_pane_requested(self, event: Pane.Requested) -> None:
        event.stop()
        self.pane_action(event.index, event.action)

    def pane_action(self, index: int, action: str) -> None:
        pane = self.panes[index]
        name = self.session.display_name(index)
        if action == "cancel":
            if self.session.is_streaming(index):
                self.session.cancel(index)
            else:
                self.say(f"{name}: nothing in flight.")
        elif action == "retry":
            if not self.session.turns:
                self.say("Nothing to retry yet.")
            else:
                self._hide_vote()
                pane.begin_retry()
                self._retry(index)
        elif pane.common_action(action, name):
            pass
        elif action == "tag":
            if self.session.contestants[index].last_output is None:
                self.say(f"{name}: no answer to tag yet.")
                return
            carried = self.session.tags_on(index)
            picker = TagPicker(name, self.tags, already=tuple(t.tag for t in carried if not t.auto),
                               auto=tuple(t.tag for t in carried if t.auto))

            def tagged(choice: TagChoice | None) -> None:
                self._tag(index, choice)

            self.app.push_screen(picker, tagged)

    @work(group="retry", exit_on_error=False)
    async def _retry(self, index: int) -> None:
        try:
            await self.session.retry(index, on_update=self._feed)
        except Exception as exc:
            self.say_failure("Retry failed", exc)
        if not self.session.streaming and not self.sending:
            self._offer_vote()

    @work(group="tag", exit_on_error=False)
    async def _tag(self, index: int, choice: TagChoice | None) -> None:
        if choice is None:
            return
        name = self.session.display_name(index)
        try:
            tags = choice.tags or (("note",) if choice.note else ())
            for i, tag in enumerate(tags):
                await self.session.tag(index, tag, note=choice.note if i == 0 else None, rater=self.app.rater)
            for tag in choice.removed:
                await self.session.untag(index, tag)
        except Exception as exc:
            self.say_failure("Tag not saved", exc)
            return
        self.say(tag_summary(name, tags, choice))

    # ----- command palette -------------------------------------------------
    def palette_commands(self) -> list[PaletteCommand]:
        """(name, help, callback) for every action on this screen."""
        cmds: list[PaletteCommand] = [
            ("Cancel all", "cancel every answer in flight", self.action_cancel_all),
            ("New session", "same models, a fresh session", self.action_new_session),
            ("Toggle blind mode", "blind labels for the next new session", self.action_toggle_blind),
            ("Go to prompt", "focus the prompt box", self.action_focus_prompt),
        ]
        if self.session.blind and not self.session.revealed and self.session.turns:
            cmds.append(("Reveal names without voting", "show which model wrote what; recorded as a reveal",
                         self.action_reveal))
        if self.session.current_vote(self.app.rater) is not None:
            cmds.append(("Withdraw my vote", "a vote cast by mistake: kept in the record, no longer counted",
                         self.action_withdraw_vote))
        if self.vote_bar.has_class("-visible"):
            cmds.append(("Go to vote bar", "vote on the last turn", self.action_focus_vote))
            bar = self.vote_bar
            for i, label in enumerate(bar.labels):
                cmds.append((f"Vote: {self.session.display_name(i)} best", "record the vote and reveal",
                             partial(bar.action_pick, "abcdefgh"[i])))
            cmds.append(("Vote: tie", "record a tie", lambda: bar.action_pick("tie")))
            cmds.append((f"Vote: {bar.bad_choice.replace('_', ' ')}", "none is good", lambda: bar.action_pick("bad")))
            if len(bar.labels) > 2:
                cmds.append(("Vote: full ranking", "press labels best to worst", bar.action_rank))
        for i in range(len(self.panes)):
            name = self.session.display_name(i)
            for action, help_text in PANE_ACTIONS.items():
                cmds.append((f"{name}: {action.replace('_', ' ')}", help_text,
                             partial(self.pane_action, i, action)))
        return cmds
