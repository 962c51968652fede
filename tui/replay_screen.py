"""A saved session, read-only: every turn, each contestant's answers (all
attempts), the votes and the tags; an answer can be played back at its
recorded pace (1x, 4x) or instantly. Blind sessions show labels only on the
panes until every judged unit is revealed; a revealed case or turn names its
models in the info line. Votes are shown on the session's labels, read
through each vote's own mapping (`core.stats.votes`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from core.stats.votes import CHOICE_WORDS, describe, reveal_state, shown_reasoning, shows_reasoning  # noqa: F401  (CHOICE_WORDS re-exported)
from tui.figures import record_figures
from tui.pane_tabs import grid_shape
from tui.panes import Pane
from tui.playback import answer_chunks, delays
from tui.record_entries import Entry, answer_entries, pane_status, prompt_entry, status_note

if TYPE_CHECKING:
    from textual import getters

    from core.stats.votes import LoadedSession, OutputRecord, VoteRecord
    from tui.host import Host

REPLAY_ACTIONS = frozenset({"copy", "copy_code", "maximise", "reasoning"})


def vote_line(vote: VoteRecord, hidden: bool, label_by_model: dict[str, str] | None = None) -> str:
    """One vote in the panes' labels (`label_by_model`), the model named unless `hidden`."""
    what = describe(vote, revealed=not hidden, label_by_model=label_by_model)
    return f"{vote.rater}: {what}" + (f", note: {vote.note}" if vote.note else "")


class ReplayScreen(Screen):
    if TYPE_CHECKING:
        app = getters.app(Host)   # how the type checker sees `self.app` (Textual's own at run time)

    BINDINGS = [
        Binding("1", "play(1)", "Play 1x", id="replay.play1", tooltip="Play the answer at its recorded pace"),
        Binding("4", "play(4)", "Play 4x", id="replay.play4", tooltip="Play the answer four times faster"),
        Binding("i", "play(0)", "Instant", id="replay.instant", tooltip="Show the answer at once"),
        Binding("left_square_bracket", "turn(-1)", "Prev turn", id="replay.prev", key_display="["),
        Binding("right_square_bracket", "turn(1)", "Next turn", id="replay.next", key_display="]"),
        Binding("escape", "close", "Back", id="replay.back"),
    ]

    def __init__(self, session_id: str, *, standalone: bool = False) -> None:
        super().__init__()
        self.session_id = session_id
        self.standalone = standalone
        self.loaded: LoadedSession | None = None
        self.panes: list[Pane] = []
        self.turn_index = 0
        self._prompts: dict[int, list[int]] = {}   # per pane: the user message that is each turn's prompt
        self.info = Static("loading…", classes="info-line", id="replay-info")

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield self.info
        yield Container(id="panes")
        yield Footer(show_command_palette=False)

    async def on_mount(self) -> None:
        self.title = "lineup"
        self.sub_title = "replay"
        try:
            loaded: LoadedSession = await self.app.store.load_session(self.session_id)
        except Exception as exc:
            if self.standalone:
                self.app.exit(2, message=f"lineup replay: {exc}")
            else:
                self.app.say(str(exc), severity="error")
                self.dismiss()
            return
        self.loaded = loaded
        rec = loaded.session
        self.reveal = reveal_state(loaded)
        self.show_reasoning = shows_reasoning(rec)
        self.hidden = not self.reveal.all
        contestants = sorted(rec.contestants, key=lambda c: c.position)
        self.aliases = [c.alias for c in contestants]
        self.labels = [c.label for c in contestants]
        self.label_by_model = dict(zip(self.aliases, self.labels, strict=True))
        self.names = [c.label if self.hidden else (f"{c.label} · {c.alias}" if rec.blind else c.alias)
                      for c in contestants]
        grid = self.query_one("#panes", Container)
        cols, rows = grid_shape(len(contestants))
        grid.styles.grid_size_columns, grid.styles.grid_size_rows = cols, rows
        self.panes = [Pane(i, name, show_figures=not self.hidden, actions=REPLAY_ACTIONS)
                      for i, name in enumerate(self.names)]
        await grid.mount_all(self.panes)
        kind = {"rerun": f"rerun of {rec.rerun_of[:10]}" if rec.rerun_of else "rerun"}.get(rec.kind, rec.kind)
        names = f"blind, {self.reveal.summary().replace('hidden', 'not revealed')}" if self.hidden \
            else " · ".join(self.aliases)
        self.sub_title = f"replay · {kind} · {names}"
        self.turn_index = max(0, len(loaded.turns) - 1)
        for i in range(len(self.panes)):
            self._fill(i)
        self._show_info()
        if self.panes:
            self.panes[0].focus()

    # ----- content ----------------------------------------------------------
    @property
    def _loaded(self) -> LoadedSession:
        """The session, for what runs once the panes are up: `on_mount` loads
        it before it mounts them."""
        assert self.loaded is not None, "the replay is used before its session is loaded"
        return self.loaded

    def _outputs(self, turn_id: str, i: int) -> list[OutputRecord]:
        return [o for o in self._loaded.outputs_for(turn_id) if o.contestant == self.aliases[i]]

    def _tags_for(self, output_id: str) -> list[str]:
        return [t.tag + (f" ({t.note})" if t.note else "") for t in self._loaded.tags if t.output_id == output_id]

    def _note(self, out: OutputRecord, last: bool) -> str | None:
        parts = []
        if not last:
            parts.append(f"attempt {out.attempt}, retried")
        status = status_note(out, hidden=not self.reveal.turn(out.turn_id))
        if status:
            parts.append(status)
        tags = self._tags_for(out.id)
        if tags:
            parts.append("tags: " + ", ".join(tags))
        return " · ".join(parts) or None

    def _entries(self, i: int, until: int | None = None,
                 skip_answer_of: int | None = None) -> tuple[list[Entry], OutputRecord | None, list[int]]:
        """Pane i's conversation over turns [0, until), its last answer record,
        and which of its user messages is each turn's prompt (an edited prompt
        adds one of its own)."""
        turns = self._loaded.turns if until is None else self._loaded.turns[:until]
        entries: list[Entry] = []
        last_out = None
        prompts: list[int] = []
        users = counted = 0          # user messages among entries[:counted]
        for t_index, turn in enumerate(turns):
            users += sum(role == "user" for role, _ in entries[counted:])
            counted = len(entries)
            prompts.append(users)
            entries.append(prompt_entry(turn))
            if t_index == skip_answer_of:
                continue
            outs = self._outputs(turn.id, i)
            shown = turn.user_message
            templated = any(c.template for c in self._loaded.session.contestants if c.alias == self.aliases[i])
            for k, out in enumerate(outs):
                hidden = not self.reveal.turn(out.turn_id)
                # an attempt that answered the prompt edited (or a variant's template, once revealed)
                if out.prompt and out.prompt != shown and not (hidden and templated):
                    text, _ = prompt_entry(turn, out)
                    entries.append(("user", f"{'(variant prompt)' if templated else '(edited)'} {text}"))
                    shown = out.prompt
                entries += answer_entries(out, self._note(out, last=k == len(outs) - 1),
                                          hidden=not self.reveal.turn(out.turn_id),
                                          show_reasoning=self.show_reasoning)
                last_out = out
        return entries, last_out, prompts

    def _fill(self, i: int, *, until: int | None = None, skip_answer_of: int | None = None) -> None:
        """Pane i with turns [0, until) (all when None, opened on the chosen
        turn's prompt); its header tells of the turn played (`skip_answer_of`),
        else of the turn chosen."""
        entries, _, prompts = self._entries(i, until, skip_answer_of)
        self.panes[i].body.set_conversation(entries)
        if until is None:
            self._prompts[i] = prompts
            self._show_turn(i)
        self._header(i, skip_answer_of)

    def _show_turn(self, i: int) -> None:
        """Pane i scrolled to the chosen turn's prompt."""
        prompts = self._prompts.get(i, [])
        if self.turn_index < len(prompts):
            self.panes[i].body.show_from_prompt(prompts[self.turn_index])

    def _header(self, i: int, turn_index: int | None = None) -> None:
        """Pane i's status and figures: those of its answer (last attempt) to
        the turn chosen ([ ]) or played, never another turn's."""
        pane = self.panes[i]
        turns = self._loaded.turns
        index = self.turn_index if turn_index is None else turn_index
        outs = self._outputs(turns[index].id, i) if turns else []
        pane.status = pane_status(outs[-1]) if outs else "idle"
        pane.figures = record_figures(outs[-1]) if outs else ""

    def _show_info(self) -> None:
        turns = self._loaded.turns
        if not turns:
            self.info.update(Text("This session has no turns."))
            return
        turn = turns[self.turn_index]
        votes = self._loaded.votes_for(turn.id)
        line = f"turn {self.turn_index + 1} of {len(turns)}"
        if turn.case_id:
            line += f" · case {turn.case_id}" + (f" ({turn.category})" if turn.category else "")
        if self.hidden and self.reveal.turn(turn.id):
            line += " · revealed: " + ", ".join(f"{lab} = {alias}" for lab, alias in zip(self.labels, self.aliases, strict=True))
        line += " · votes: " + ("; ".join(vote_line(v, not self.reveal.vote(v), self.label_by_model)
                                          for v in votes) if votes else "none")
        line += "  ([ ] choose the turn, 1 / 4 / i play the focused pane's answer)"
        self.info.update(Text(line))

    # ----- actions ----------------------------------------------------------
    def action_turn(self, step: int) -> None:
        if self.loaded and self.loaded.turns:
            self.turn_index = max(0, min(len(self.loaded.turns) - 1, self.turn_index + step))
            self._show_info()
            for i in range(len(self.panes)):
                self._header(i)
                self._show_turn(i)

    def _focused_index(self) -> int:
        node: DOMNode | None = self.focused
        while node is not None and not isinstance(node, Pane):
            node = node.parent
        return node.index if isinstance(node, Pane) else 0

    def action_play(self, speed: int) -> None:
        if not self.loaded or not self.loaded.turns or not self.panes:
            return
        self.play(self._focused_index(), self.turn_index, math.inf if speed == 0 else float(speed))

    @work(exclusive=True, group="playback")
    async def play(self, i: int, turn_index: int, speed: float) -> None:
        """Pane i: the turns before, then this turn's answer at `speed`, then the rest."""
        pane = self.panes[i]
        turn = self._loaded.turns[turn_index]
        outs = self._outputs(turn.id, i)
        self._fill(i, until=turn_index + 1, skip_answer_of=turn_index)
        try:
            for k, out in enumerate(outs):
                last = k == len(outs) - 1
                if not last:
                    for role, text in answer_entries(out, self._note(out, last=False),
                                                     hidden=not self.reveal.turn(out.turn_id),
                                                     show_reasoning=self.show_reasoning):
                        if role == "reasoning":
                            pane.body.append_reasoning(text)
                        elif role == "assistant":
                            pane.body.append(text)
                        else:
                            pane.body.end_answer(text)
                    continue
                pane.status = "streaming"
                pane.body.start_answer()
                chunks = answer_chunks(out.text, out.reasoning, out.chunk_ms, out.chunk_chars)
                reasoning = shown_reasoning(out.reasoning, hidden=not self.reveal.turn(out.turn_id),
                                            show_reasoning=self.show_reasoning) is not None
                for chunk, wait in zip(chunks, delays(chunks, speed), strict=True):
                    if wait:
                        await anyio.sleep(wait)
                    if chunk.kind == "text":
                        pane.body.append(chunk.text)
                    elif reasoning:     # blind, not revealed: left out (`core.stats.votes.shown_reasoning`)
                        pane.body.append_reasoning(chunk.text)
                pane.body.end_answer(note=self._note(out, True))
        finally:
            # whatever happened, leave the pane showing the whole record
            self._fill(i)
        self.app.say(f"Played {self.names[i]}, turn {turn_index + 1}.")

    def on_pane_requested(self, event: Pane.Requested) -> None:
        event.stop()
        pane = self.panes[event.index]
        name = self.names[event.index]
        pane.common_action(event.action, name)

    def action_close(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        if self.standalone:
            self.app.exit(0)
        else:
            self.dismiss()
