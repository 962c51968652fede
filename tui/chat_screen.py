"""The side-by-side chat screen: panes, the vote bar and the prompt box over
one `ChatSession`. Sends run in workers on the app's loop; the session calls
`_on_update` for every stream event and the pane it names renders it. While a
blind session is unrevealed it names labels only, and an answer's error, or
a failure's text, shows only what `core.stats.votes` says may be seen before the
reveal (kind and HTTP status); the rest is shown once revealed.

The workbench around the panes: the session bar (system prompt and
parameters; the settings dialog edits them), the model picker, images
attached to the prompt, prompt history and editing the last prompt, the
compare view, and a layout that puts one pane at a time under tabs when the
terminal is too small for them side by side (`tui.pane_tabs`). The footer
shows the keys that apply now (`check_action`).

Why this file is past 600 lines: it is the one place that turns every chat
gesture into a call on the session and keeps the panes, the vote bar and the
prompt in step with it; the dialogs, the layout rule, the comparison and the
copy logic each have their own module."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding
from textual.containers import Container
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from core.answering.attachments import MAX_ATTACHMENTS, AttachError, complete_path, load_attachment, placeholder
from core.answering.config import DEFAULT_TAGS
from tui.prompt_history import PromptHistory
from core.answering.recording import PaneUpdate
from core.answering.sessions import ChatSession
from core.ground.text import one_line
from core.stats.votes import VoteNeedsConfirmation, describe, exception_line, human_votes
from providers.events import ImagePart, Message
from tui.commands import PaletteCommand
from tui.compare_screen import CompareScreen
from tui.dialogs import TextPrompt
from tui.figures import record_figures
from tui.footer_fit import fit_screen_bindings
from tui.host import PickerChoice, SettingsChoice
from tui.model_picker import ModelPicker
from tui.pane_tabs import Layout, PaneTabs, grid_shape, pane_layout
from tui.panes import Pane
from tui.prompt_box import PromptBox
from tui.record_entries import Entry, answer_entries, pane_status, prompt_entry, status_note
from tui.settings_screen import SettingsScreen, summary
from tui.tag_picker import TagChoice, TagPicker, tag_summary
from tui.vote_bar import VoteBar

__all__ = ["ChatScreen", "PANE_ACTIONS", "grid_shape"]   # grid_shape: the replay and the vote queue lay out the same

if TYPE_CHECKING:
    from textual import getters

    from core.stats.votes import LoadedSession
    from tui.host import Host

PANE_ACTIONS = {
    "cancel": "cancel the answer in flight",
    "retry": "new attempt at the last turn (old one kept)",
    "copy": "copy the answer",
    "copy_code": "copy the answer's last code block",
    "maximise": "maximise / restore the pane",
    "reasoning": "show / hide reasoning",
    "tag": "tag the answer (failure modes, note)",
}


class ChatScreen(Screen):
    """One live session."""

    if TYPE_CHECKING:
        app = getters.app(Host)   # how the type checker sees `self.app` (Textual's own at run time)

    BINDINGS = [
        Binding("escape", "cancel_all", "Cancel all", id="chat.cancel_all", tooltip="Cancel every answer in flight"),
        Binding("f2", "focus_vote", "Vote", id="chat.vote", tooltip="Go to the vote bar (the only way to vote)"),
        Binding("f5", "withdraw_vote", "Withdraw vote", id="chat.withdraw_vote",
                tooltip="Withdraw my vote on the last turn (kept in the record)"),
        Binding("f8", "reveal", "Reveal", id="chat.reveal", tooltip="Show which model wrote what, without a vote"),
        Binding("f3", "focus_prompt", "Prompt", id="chat.prompt", tooltip="Go to the prompt box"),
        Binding("ctrl+n", "new_session", "New", id="chat.new", tooltip="New session with the same models"),
        Binding("ctrl+b", "toggle_blind", "Blind", id="chat.blind", tooltip="Blind mode for the next new session"),
        Binding("ctrl+l", "pick_models", "Models", id="chat.models",
                tooltip="Choose the models (after a prompt: a new linked session)"),
        Binding("ctrl+s", "settings", "Settings", id="chat.settings",
                tooltip="System prompt and parameters, for the session and each model"),
        Binding("ctrl+g", "attach", "Image", id="chat.attach", tooltip="Attach an image file to the prompt"),
        Binding("ctrl+r", "edit_last", "Edit last", id="chat.edit_last",
                tooltip="Edit the last prompt, send it again (new attempts, old ones kept)"),
        Binding("f9", "compare", "Compare", id="chat.compare",
                tooltip="The last answers aligned line by line, differences highlighted"),
        Binding("ctrl+t", "resend_turns", "Resend prompts", id="chat.resend",
                tooltip="Send the linked session's prompts again, one after another"),
        Binding("alt+right", "next_pane(1)", "Next pane", id="chat.next_pane",
                tooltip="Next pane (when the terminal is too small for all side by side)"),
        Binding("alt+left", "next_pane(-1)", "Prev pane", id="chat.prev_pane", tooltip="Previous pane"),
    ]

    def __init__(self, session: ChatSession, *, tags: tuple[str, ...] = DEFAULT_TAGS, hint: str | None = None,
                 figures_when_blind: bool = False, loaded: LoadedSession | None = None,
                 autoplay: list[Message] | None = None, earlier: list[Message] | None = None) -> None:
        super().__init__()
        self.session = session
        self.tags = tags
        self.figures_when_blind = figures_when_blind
        self.loaded = loaded
        self.autoplay = list(autoplay or [])
        self.earlier = list(earlier or [])    # a linked session's prompts, offered again (Up, Ctrl+T)
        if self.earlier and session.linked_from:
            n = len(self.earlier)
            why = (session.record.meta.get("linked_from") or {}).get("changed", "settings")
            linked = (f"New session linked to {session.linked_from[:10]} ({why} changed): its {n} "
                      f"prompt{'s' if n != 1 else ''} are in the history (Up); Ctrl+T sends them all again.")
            hint = f"{hint} {linked}" if hint else linked
        self.hint = hint
        self.attachments: list[ImagePart] = []
        self.pane_mode: Layout = "grid"        # `layout` is Textual's own
        self.active = 0                        # the pane shown under the tabs
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
        yield Static("", id="session-bar")
        yield PaneTabs(id="pane-tabs")
        cols, rows = grid_shape(len(self.panes))
        grid = Container(*self.panes, id="panes")
        grid.styles.grid_size_columns = cols
        grid.styles.grid_size_rows = rows
        yield grid
        yield self.vote_bar
        yield Static("", id="attachments")
        yield self.prompt
        yield Footer(show_command_palette=False)

    async def on_mount(self) -> None:
        self._refresh_titles()
        self._refresh_session_bar()
        if self.loaded is not None:
            self._show_loaded(self.loaded)
        self.prompt.prompts = PromptHistory([m.content for m in self.earlier]
                                            + [self.session.prompt_of(t) for t in self.session.turns])
        self._load_history()
        self._apply_layout(self.size.width, self.size.height)
        self.set_interval(0.25, self._refresh_tabs)
        self.prompt.focus()
        if self.autoplay:
            self._autoplay()
        else:
            self._offer_vote()

    @work(group="history", exit_on_error=False)
    async def _load_history(self) -> None:
        """Every chat's prompts, after this session's, for Up in the prompt box."""
        try:
            others = await self.app.store.prompt_history()
        except Exception:   # history is a convenience: without it Up walks this session only
            return
        self.prompt.prompts.extend_others(others)

    # ----- layout for the terminal's size ---------------------------------
    def on_resize(self, event) -> None:
        self._apply_layout(event.size.width, event.size.height)

    def _apply_layout(self, width: int, height: int) -> None:
        """Side by side when every pane stays readable, else one pane at a time under tabs."""
        layout = pane_layout(width, height, len(self.panes))
        self.pane_mode = layout
        grid = self.query_one("#panes", Container)
        tabs = layout == "tabs"
        self.set_class(tabs, "-tabs")
        if tabs:
            grid.styles.grid_size_columns = 1
            grid.styles.grid_size_rows = 1
        else:
            cols, rows = grid_shape(len(self.panes))
            grid.styles.grid_size_columns = cols
            grid.styles.grid_size_rows = rows
        for i, pane in enumerate(self.panes):
            pane.display = not tabs or i == self.active
        self.query_one("#pane-tabs", PaneTabs).display = tabs
        self.query_one(Footer).compact = width < 120       # more of the keys that matter fit
        self._refresh_tabs()
        self.refresh_bindings()             # the footer names as many keys as the width holds

    def _refresh_tabs(self) -> None:
        if self.pane_mode == "tabs":
            self.query_one("#pane-tabs", PaneTabs).show([p.name_shown for p in self.panes],
                                                       [p.status for p in self.panes], self.active)

    def show_pane(self, index: int) -> None:
        """Make pane `index` the one shown under the tabs (and focus it when a pane had the focus)."""
        index %= len(self.panes)
        had_focus = any(self.focused is p.body for p in self.panes)
        self.active = index
        if self.pane_mode == "tabs":
            for i, pane in enumerate(self.panes):
                pane.display = i == index
            if had_focus:
                self.panes[index].focus()
        self._refresh_tabs()

    def action_next_pane(self, step: int) -> None:
        self.show_pane(self.active + step)

    def on_pane_tabs_selected(self, event: PaneTabs.Selected) -> None:
        event.stop()
        self.show_pane(event.index)

    def _refresh_session_bar(self) -> None:
        bar = summary(self.session.system, self.session.params)
        if self.session.linked_from:
            bar.append(f" · linked to {self.session.linked_from[:10]}", style="dim")
        self.query_one("#session-bar", Static).update(bar)

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
            pane.reasoning_hidden = s.reasoning_hidden
        if self.is_mounted:
            self._refresh_tabs()
        self.refresh_bindings()

    def say(self, message: str, *, severity: SeverityLevel = "information") -> None:
        """A notification of our own making (it names labels only while blind)."""
        self.app.say(message, severity=severity)

    def say_failure(self, what: str, exc: BaseException) -> None:
        """`what` failed: the exception's text as `core.stats.votes.exception_line`
        allows before the reveal; the whole of it is told at the reveal."""
        hidden = not self.session.revealed
        shown = exception_line(exc, hidden=hidden)
        if hidden and shown != exception_line(exc, hidden=False):
            self._held_back.append(f"{what}: {exception_line(exc, hidden=False)}")
        self.say(f"{what}: {shown}", severity="error")

    def _after_reveal(self) -> None:
        """Names are shown now: titles, figures, and whatever was held back
        (errors shown by kind only, reasoning left out, failures told in part)."""
        self._refresh_titles()
        if any(p.masked_errors or p.masked_reasoning for p in self.panes):
            self._show_errors_whole()
        held, self._held_back = self._held_back, []
        for message in held:
            self.say(f"Before the reveal: {message}", severity="warning")

    @work(group="reveal", exit_on_error=False)
    async def _show_errors_whole(self) -> None:
        """Panes that showed an error by its kind only or left reasoning out,
        redrawn from the record with the whole message and the reasoning
        (every turn and attempt, as they were shown)."""
        try:
            loaded = await self.app.store.load_session(self.session.id)
        except Exception as exc:
            self.say_failure("Could not show the errors in full", exc)
            return
        for pane in self.panes:
            if not (pane.masked_errors or pane.masked_reasoning):
                continue
            alias = self.session.contestants[pane.index].alias
            entries: list[Entry] = []
            for turn in loaded.turns:
                entries.append(prompt_entry(turn))
                shown = turn.user_message
                for out in loaded.outputs_for(turn.id):
                    if out.contestant == alias:
                        if out.prompt and out.prompt != shown:
                            entries.append(prompt_entry(turn, out))
                            shown = out.prompt
                        entries += answer_entries(out, status_note(out, hidden=False))
            pane.body.set_conversation(entries)
            pane.masked_errors = pane.masked_reasoning = False

    def _show_loaded(self, loaded: LoadedSession) -> None:
        """A resumed session: every saved turn and each contestant's latest answer."""
        aliases = [c.alias for c in self.session.contestants]
        for i, alias in enumerate(aliases):
            pane = self.panes[i]
            entries: list[Entry] = []
            last = None
            for turn in loaded.turns:
                mine = [o for o in loaded.outputs_for(turn.id) if o.contestant == alias]
                latest = max(mine, key=lambda o: o.attempt) if mine else None
                entries.append(prompt_entry(turn, latest))
                if latest is not None:
                    last = latest
                    entries += answer_entries(last, status_note(last, hidden=not self.session.revealed),
                                              hidden=not self.session.revealed,
                                              show_reasoning=self.session.show_reasoning)
                    pane.masked_errors |= last.status == "error" and not self.session.revealed
                    pane.masked_reasoning |= bool(last.reasoning) and self.session.reasoning_hidden
            pane.body.set_conversation(entries)
            if last is not None:
                pane.status = pane_status(last)
                pane.figures = record_figures(last)
        rater = self.app.rater
        self._voted_turns = {v.turn_id for v in human_votes(loaded.current_votes()) if v.rater == rater}

    # ----- sending --------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self.sending or self.session.streaming

    def on_prompt_box_submitted(self, event: PromptBox.Submitted) -> None:
        event.stop()
        text = event.text.strip()
        if not text:
            if self.attachments:
                self.say("Type a prompt to go with the image.", severity="warning")
            return
        if self.busy:
            self.say("Still answering: wait, or press Esc to cancel.", severity="warning")
            return
        if event.edit:
            self.prompt.clear_prompt(sent=text)
            self.resend_edited(text)
            return
        images, self.attachments = self.attachments, []
        self._refresh_attachments()
        self.prompt.clear_prompt(sent=text)
        self.send(text, images)

    def on_prompt_box_edit_ended(self, event: PromptBox.EditEnded) -> None:
        event.stop()
        self.prompt.clear_prompt()
        self.refresh_bindings()

    def _begin_turns(self, text: str, images: tuple[ImagePart, ...] | list[ImagePart]) -> None:
        """Every pane shows the prompt (and its images, or why they were not sent there)."""
        shown = [placeholder(i) for i in images]
        refused = set(self.session.refuses_images()) if images else set()
        hidden = not self.session.revealed   # blind: which pane takes text only would tell which model it is
        for i, pane in enumerate(self.panes):
            note = None
            if i in refused and not hidden:
                note = f"{'the image was' if len(images) == 1 else 'the images were'} not sent here: this model takes text only"
            pane.begin_turn(text, shown, note)
        if refused:
            what = f"the image{'s' if len(images) != 1 else ''}"
            self.say(_text_only_note(self.session, refused, hidden, f"was not sent {what}"), severity="warning")

    def send(self, text: str, images: list[ImagePart] | tuple[ImagePart, ...] = ()) -> None:
        """Show the prompt in every pane and stream the answers (a worker)."""
        self.sending = True
        self.sends += 1
        self._hide_vote()
        self._begin_turns(text, images)
        self.refresh_bindings()
        self._send(text, tuple(images))

    @work(group="send", exit_on_error=False)
    async def _send(self, text: str, images: tuple[ImagePart, ...] = ()) -> None:
        await self._sending("Sending failed", self.session.send(text, images, on_update=self._feed))

    async def _sending(self, failed: str, sent: Awaitable[object]) -> None:
        """Await a send (new or edited prompt); a failure (store full, provider bug) is told and the app kept;
        then the vote is offered."""
        try:
            await sent
        except Exception as exc:
            self.say_failure(failed, exc)
            for pane in self.panes:
                if pane.status in ("waiting", "streaming"):
                    pane.status = "error"
        finally:
            self.sending = False
        self._offer_vote()
        self.refresh_bindings()

    def resend_edited(self, text: str) -> None:
        """The last prompt, edited, sent again: new attempts in every pane (the old ones stay above)."""
        self.sending = True
        self.sends += 1
        self._hide_vote()
        images: tuple[ImagePart, ...] = ()
        if self.session.turns:
            turn = self.session.turns[-1]
            self._voted_turns.discard(turn.id)   # new answers: they may be judged again
            images = self.session.turn_images.get(turn.id, ())
        for pane in self.panes:
            pane.begin_turn(f"(edited) {text}", [placeholder(i) for i in images])
        self.refresh_bindings()
        self._resend_edited(text)

    @work(group="send", exit_on_error=False)
    async def _resend_edited(self, text: str) -> None:
        await self._sending("Sending the edited prompt failed", self.session.resend_edited(text, on_update=self._feed))

    @work(group="send")
    async def _autoplay(self) -> None:
        """A rerun, or a linked session's prompts sent again: the user turns one after another."""
        for message in self.autoplay:
            self.sending = True
            self._begin_turns(message.content, message.images)
            self.refresh_bindings()
            try:
                await self.session.send(message.content, message.images, on_update=self._feed)
            finally:
                self.sending = False
        self.autoplay = []
        self._offer_vote()
        self.refresh_bindings()

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
        self.refresh_bindings()

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
        """The keys that apply now, and only those, are offered (footer, keys):
        while answers stream, cancelling; once they are in, voting, comparing
        and editing; before the first prompt, the models and settings."""
        s = self.session
        busy = self.busy
        if action == "withdraw_vote":
            return s.current_vote(self.app.rater) is not None
        if action == "reveal":
            return s.blind and not s.revealed
        if action == "cancel_all":
            return busy or self.maximized is not None or self.vote_bar.ranking is not None
        if action == "focus_vote":
            return self.vote_bar.has_class("-visible")
        if action == "focus_prompt":
            return self.focused is not self.prompt
        if action == "next_pane":
            return self.pane_mode == "tabs"
        if action == "compare":
            return not busy and len(self.last_answers()) >= 2
        if action == "edit_last":
            return bool(s.turns) and not busy
        if action == "resend_turns":
            return bool(self.earlier) and not s.turns and not busy
        if action in ("new_session", "pick_models", "settings", "toggle_blind"):
            return not busy
        return True

    # What the footer names, by state (every key still works; F1 and the palette list them all).
    FOOTER_STREAMING = frozenset({"cancel_all", "next_pane(1)", "command_palette", "quit"})
    FOOTER_FRESH = frozenset({"submit", "newline", "pick_models", "settings", "attach", "toggle_blind",
                              "resend_turns", "next_pane(1)", "cancel_all", "help", "sessions",
                              "command_palette", "quit"})
    FOOTER_ANSWERED = frozenset({"submit", "focus_vote", "reveal", "withdraw_vote", "compare", "edit_last",
                                 "attach", "new_session", "next_pane(1)", "cancel_all", "focus_prompt", "help",
                                 "command_palette", "quit"})

    # The order of importance when the footer is too narrow for them all (`tui.footer_fit`):
    # the focused pane's or vote bar's keys first, then these.
    FOOTER_RANK = ("submit", "focus_vote", "cancel_all", "next_pane(1)", "quit", "help", "settings",
                   "pick_models", "edit_last", "compare", "reveal", "withdraw_vote", "focus_prompt", "newline",
                   "toggle_blind", "attach", "new_session", "resend_turns", "sessions", "command_palette")

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The bindings the footer shows: those of the focused pane or vote
        bar, and of the screen, prompt and app only the ones that matter in
        the current state (`FOOTER_*`); of those, as many whole keys as the
        width holds, the most important first (`FOOTER_RANK`)."""
        shown = super().active_bindings
        if self.busy:
            wanted = self.FOOTER_STREAMING
        elif not self.session.turns:
            wanted = self.FOOTER_FRESH
        else:
            wanted = self.FOOTER_ANSWERED
        ours = (self, self.app, self.prompt)
        shown = {key: b for key, b in shown.items()
                 if not any(b.node is node for node in ours) or b.binding.action in wanted}
        return fit_screen_bindings(self, shown, ours, self.FOOTER_RANK)

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()

    def on_descendant_blur(self) -> None:
        self.refresh_bindings()

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

    # ----- the workbench: models, settings, images, edits, comparison ------
    def action_pick_models(self) -> None:
        if self.busy:
            self.say("Still answering: press Esc first.", severity="warning")
            return
        why = ("A prompt was sent: other models start a new session linked to this one." if self.session.turns
               else "")
        models = list(self.app.config.models.values())
        mine = {c.alias for c in self.session.contestants}
        # in the config's order, not the panes': the order must not tell which label is which model
        picker = ModelPicker(models, chosen=[m.alias for m in models if m.alias in mine],
                             blind=self.app.blind_next, why=why)
        self.app.push_screen(picker, self._picked)

    def _picked(self, choice: PickerChoice | None) -> None:
        if choice is None:
            return
        self.app.switch_models(choice, linked=self.session if self.session.turns else None)

    def action_settings(self) -> None:
        if self.busy:
            self.say("Still answering: press Esc first.", severity="warning")
            return
        self.app.push_screen(SettingsScreen(self.session), self._settings_chosen)

    def _settings_chosen(self, choice: SettingsChoice | None) -> None:
        if choice is not None:
            self._apply_settings(choice)

    @work(group="settings", exclusive=True, exit_on_error=False)
    async def _apply_settings(self, choice: SettingsChoice) -> None:
        s = self.session
        self.app.remember_settings(choice, [c.alias for c in s.contestants])
        if not s.settings_editable:
            self.app.start_chat(linked=s, changed="settings")
            return
        try:
            await s.update_settings(choice.system, choice.params, choice.contestant)
        except Exception as exc:
            self.say_failure("Settings not saved", exc)
            return
        self._refresh_session_bar()
        self.say("Settings saved for this session.")

    def action_attach(self) -> None:
        if len(self.attachments) >= MAX_ATTACHMENTS:
            self.say(f"At most {MAX_ATTACHMENTS} images on one prompt.", severity="warning")
            return
        refused = self.session.refuses_images()
        note = ""
        if refused:
            note = _text_only_note(self.session, refused, not self.session.revealed, "will not be sent the image")
        self.app.push_screen(TextPrompt("Attach an image (PNG, JPEG, GIF or WebP, at most 5 MB)",
                                        placeholder="path to an image file", complete=complete_path,
                                        check=self._try_attach, note=note, dialog_id="attach-dialog",
                                        help_text="tab: complete · enter: attach · esc: cancel"))

    def _try_attach(self, path: str) -> str | None:
        """Attach the image at `path`; what is wrong with it, or None once attached."""
        try:
            part = load_attachment(path)
        except AttachError as exc:
            return str(exc)
        if any(a.sha256 == part.sha256 for a in self.attachments):
            return f"{one_line(path)} is attached already"
        self.attachments.append(part)
        self._refresh_attachments()
        self.say(f"Attached {placeholder(part)}.")
        self.prompt.focus()
        return None

    def on_prompt_box_paths_pasted(self, event: PromptBox.PathsPasted) -> None:
        event.stop()
        for path in event.paths:
            if len(self.attachments) >= MAX_ATTACHMENTS:
                self.say(f"At most {MAX_ATTACHMENTS} images on one prompt.", severity="warning")
                return
            problem = self._try_attach(path)
            if problem:
                self.say(f"Not attached: {problem}", severity="error")

    def remove_attachments(self) -> None:
        n = len(self.attachments)
        self.attachments = []
        self._refresh_attachments()
        self.say(f"Removed {n} attached image{'s' if n != 1 else ''}." if n else "No image attached.")

    def _refresh_attachments(self) -> None:
        bar = self.query_one("#attachments", Static)
        bar.display = bool(self.attachments)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("attached: ", style="bold")
        text.append("  ".join(placeholder(a) for a in self.attachments))
        text.append("   (Ctrl+G: another · palette: remove)", style="dim")
        bar.update(text)

    def action_edit_last(self) -> None:
        s = self.session
        if not s.turns:
            self.say("Nothing to edit yet.")
            return
        if self.busy:
            self.say("Still answering: press Esc first.", severity="warning")
            return
        self.prompt.begin_edit(s.prompt_of(s.turns[-1]))
        self.prompt.focus()
        self.refresh_bindings()

    def last_answers(self) -> list[tuple[int, str]]:
        """(pane index, text) of each answer to the last turn that has text."""
        s = self.session
        if not s.turns:
            return []
        turn_id = s.turns[-1].id
        return [(i, c.last_output.text) for i, c in enumerate(s.contestants)
                if c.last_output is not None and c.last_output.turn_id == turn_id and c.last_output.text]

    def action_compare(self) -> None:
        answers = self.last_answers()
        if len(answers) < 2:
            self.say("Nothing to compare: two answers with text or more are needed.")
            return
        labels = [self.session.display_name(i) for i, _ in answers]
        self.app.push_screen(CompareScreen(labels, [text for _, text in answers],
                                           title=f"compare · turn {len(self.session.turns)}"))

    def action_resend_turns(self) -> None:
        if not self.earlier:
            self.say("No earlier prompts to send.")
            return
        if self.session.turns or self.busy:
            self.say("The earlier prompts are sent into a fresh session only.", severity="warning")
            return
        self.autoplay = list(self.earlier)
        self._autoplay()

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
            ("Choose models", "2 to 8 models; after a prompt, a new linked session", self.action_pick_models),
            ("System prompt and parameters", "the session's settings, and each model's", self.action_settings),
            ("Attach an image", "an image file goes with the next prompt", self.action_attach),
        ]
        if self.attachments:
            cmds.append(("Remove attached images", "the next prompt goes without them", self.remove_attachments))
        if self.session.turns:
            cmds.append(("Edit the last prompt", "send it again changed: new attempts, the old kept",
                         self.action_edit_last))
        if len(self.last_answers()) >= 2:
            cmds.append(("Compare answers", "the last answers aligned, differences highlighted",
                         self.action_compare))
        if self.earlier and not self.session.turns:
            cmds.append(("Send the earlier prompts again", "the linked session's prompts, one after another",
                         self.action_resend_turns))
        if self.pane_mode == "tabs":
            cmds.append(("Next pane", "one pane at a time: show the next", partial(self.action_next_pane, 1)))
            cmds.append(("Previous pane", "one pane at a time: show the previous",
                         partial(self.action_next_pane, -1)))
        if self.session.blind and not self.session.revealed and self.session.turns:
            cmds.append(("Reveal names without voting", "show which model wrote what; recorded as a reveal",
                         self.action_reveal))
        if self.session.current_vote(self.app.rater) is not None:
            cmds.append(("Withdraw my vote", "a vote cast by mistake: kept in the record, no longer counted",
                         self.action_withdraw_vote))
        if self.vote_bar.has_class("-visible"):
            cmds.append(("Go to vote bar", "vote on the last turn", self.action_focus_vote))
            bar = self.vote_bar
            for i in range(len(bar.labels)):
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


def _text_only_note(session: ChatSession, refused: Iterable[int], hidden: bool, what: str) -> str:
    """Which contestants take text only and `what` follows for them; while
    blind only how many (naming the pane would tell which model it is)."""
    refused = sorted(refused)
    if hidden:
        many = len(refused) != 1
        return (f"{len(refused)} contestant{'s' if many else ''} take{'' if many else 's'} text only and "
                f"{what} (which one{'s' if many else ''} stays hidden until the vote).")
    return f"{', '.join(session.display_name(i) for i in refused)}: text only, {what}."
