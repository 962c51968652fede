"""One pane per contestant: a header (label, status, live figures) over the
contestant's own conversation (a `StreamView`). Panes render what they are
told and ask the screen for everything else through `Pane.Requested`, so the
screen keeps the single view of the session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from core.answering.tools import call_line, result_line
from core.stats.votes import error_line
from providers.events import (
    Finish,
    Queued,
    ReasoningDelta,
    RequestSent,
    Retrying,
    StreamError,
    StreamEvent,
    StreamResult,
    TextDelta,
    ToolCall,
    ToolResult,
)
from tui.figures import live_figures
from tui.stream_view import StreamView

if TYPE_CHECKING:
    from textual import getters

    from tui.host import Host

STATUS_STYLE = {
    "idle": "dim",
    "waiting": "yellow",
    "retrying": "yellow",
    "queued": "yellow",
    "streaming": "cyan",
    "done": "green",
    "error": "bold red",
    "cancelled": "magenta",
    "interrupted": "magenta",
}


class PaneHeader(Static):
    """Label · status · figures, built as `Text` (never parsed as markup)."""

    def on_resize(self) -> None:
        parent = self.parent
        if isinstance(parent, Pane):
            parent._render_header()


def header_text(name: str, status: str, detail: str, figures: str, width: int) -> Text:
    """The header for `width` cells: name and status, then as many whole
    figures ("ttft 312 ms", "38 tok/s", ...) as fit, never one cut short."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(name, style="bold")
    text.append("  ")
    text.append(status, style=STATUS_STYLE.get(status, ""))
    if detail:
        text.append(f" ({detail})", style="dim")
    shown: list[str] = []
    for part in figures.split(" · ") if figures else []:
        if text.cell_len + 2 + len(" · ".join([*shown, part])) > width:
            break
        shown.append(part)
    if shown:
        text.append("  ")
        text.append(" · ".join(shown), style="dim")
    return text


class Pane(Vertical):
    """A contestant's column. Focus lives in its body (one Tab stop per pane,
    arrow keys scroll); the pane's keys work from there."""

    if TYPE_CHECKING:
        app = getters.app(Host)   # how the type checker sees `self.app` (Textual's own at run time)

    ALLOW_MAXIMIZE = True
    BINDINGS = [
        Binding("c", "pane('cancel')", "Cancel", id="pane.cancel", tooltip="Cancel this answer"),
        Binding("r", "pane('retry')", "Retry", id="pane.retry", tooltip="New attempt (old one kept)"),
        Binding("y", "pane('copy')", "Copy", id="pane.copy", tooltip="Copy the answer"),
        Binding("k", "pane('copy_code')", "Copy code", id="pane.copy_code",
                tooltip="Copy the answer's last code block"),
        Binding("m", "pane('maximise')", "Maximise", id="pane.maximise", tooltip="Maximise / restore"),
        Binding("z", "pane('reasoning')", "Reasoning", id="pane.reasoning", tooltip="Show/hide reasoning"),
        Binding("t", "pane('tag')", "Tag", id="pane.tag", tooltip="Tag this answer, add a note"),
    ]

    class Requested(Message):
        """The user asked for `action` on pane `index`."""

        def __init__(self, index: int, action: str) -> None:
            super().__init__()
            self.index = index
            self.action = action

    # Drawn in the header (`_render_header`), not by the pane: a repaint of the
    # pane restyles every row of it, and the figures change four times a second.
    status: reactive[str] = reactive("idle", repaint=False)
    name_shown: reactive[str] = reactive("", repaint=False)
    figures: reactive[str] = reactive("", repaint=False)
    show_figures: reactive[bool] = reactive(True, repaint=False)
    detail: reactive[str] = reactive("", repaint=False)

    ALL_ACTIONS = frozenset({"cancel", "retry", "copy", "copy_code", "maximise", "reasoning", "tag"})

    def __init__(self, index: int, name: str, *, show_figures: bool = True, id: str | None = None,
                 actions: frozenset[str] | None = None) -> None:
        super().__init__(id=id or f"pane-{index}", classes="pane")
        self.index = index
        self.actions = self.ALL_ACTIONS if actions is None else actions
        self.set_reactive(Pane.name_shown, name)
        self.set_reactive(Pane.show_figures, show_figures)
        self.result: StreamResult | None = None
        self.header = PaneHeader(classes="pane-header")
        self.body = StreamView(classes="pane-body")
        self._answer_open = False
        self._output_id: str | None = None
        self._stale: set[str] = set()
        # blind, not revealed: an error shows its kind and status only (`error_line`);
        # `masked_errors` says this pane showed one that way, to be shown whole later
        self.errors_hidden = False
        self.masked_errors = False
        # blind, not revealed: reasoning is left out, the same for every pane
        # (`core.stats.votes.reasoning_hidden`); `masked_reasoning`: some was, to be shown later
        self.reasoning_hidden = False
        self.masked_reasoning = False

    def compose(self) -> ComposeResult:
        yield self.header
        yield self.body

    def on_mount(self) -> None:
        self._render_header()
        self.set_interval(0.25, self._tick)

    # ----- header ---------------------------------------------------------
    def _render_header(self) -> None:
        width = self.header.content_size.width or 10_000    # not laid out yet: redrawn on its resize
        figures = self.figures if self.show_figures else ""
        # (one line whatever it says: no layout, which would repaint the whole screen)
        self.header.update(header_text(self.name_shown, self.status, self.detail, figures, width), layout=False)

    def watch_status(self) -> None:
        self.set_class(self.status == "streaming", "-streaming")
        self.set_class(self.status == "error", "-error")
        self._render_header()

    def watch_name_shown(self) -> None:
        self._render_header()

    def watch_figures(self) -> None:
        self._render_header()

    def watch_show_figures(self) -> None:
        self._render_header()

    def watch_detail(self) -> None:
        self._render_header()

    def _tick(self) -> None:
        if self.result is not None and self.status in ("waiting", "streaming"):
            self.figures = live_figures(self.result)

    # ----- stream ---------------------------------------------------------
    def begin_turn(self, prompt: str, images: list[str] | None = None, note: str | None = None) -> None:
        """A new user turn: show it (with a placeholder line per image and a
        note, e.g. that the images were not sent here) and open an empty answer."""
        self.body.add_user(prompt + "".join(f"\n{p}" for p in images or ()))
        if note:
            self.body.add_note(note)
        self._open_answer()

    def begin_retry(self) -> None:
        """A new attempt at the last turn, under the old one."""
        self._open_answer()

    def _open_answer(self) -> None:
        if self._output_id is not None:
            self._stale.add(self._output_id)  # a cancelled attempt still reporting its end
            self._output_id = None
        if self._answer_open:
            self.body.end_answer()
        self.body.start_answer()
        self._answer_open = True
        self.result = None
        self.detail = ""
        self.figures = ""
        self.status = "waiting"

    def apply(self, event: StreamEvent, result: StreamResult, output_id: str | None = None) -> None:
        """One stream event from the session (see `core.answering.sessions.PaneUpdate`)."""
        if output_id is not None:
            if output_id in self._stale:
                return
            self._output_id = output_id
        self.result = result
        match event:
            case TextDelta():
                if self.status != "streaming":
                    self.status = "streaming"
                self.body.append(event.text)
            case ReasoningDelta():
                if self.reasoning_hidden:   # no block, no "streaming" yet: a pane that reasons looks like one waiting
                    self.masked_reasoning = True
                    return
                if self.status != "streaming":
                    self.status = "streaming"
                self.body.append_reasoning(event.text)
            case ToolCall():
                if self.status != "streaming":
                    self.status = "streaming"
                self.body.add_tool(call_line(event))
            case ToolResult():
                self.body.add_tool(result_line(event))
            case Retrying():
                self.status = "retrying"
                self.detail = f"{event.kind.value}, attempt {event.attempt + 1}"
            case Queued():   # its server is busy with other panes (see `ServerLimits`)
                self.status = "queued"
                self.detail = event.message
            case RequestSent():
                if self.status in ("retrying", "queued"):
                    self.status = "waiting"
                    self.detail = ""
            case Finish():
                self._close("done", None)
            case StreamError():
                if event.kind.value == "cancelled":
                    self._close("cancelled", "cancelled")
                else:
                    self.detail = event.kind.value
                    self.masked_errors |= self.errors_hidden
                    self._close("error", error_line(event.kind.value, event.message, hidden=self.errors_hidden))

    def _close(self, status: str, note: str | None) -> None:
        if self._answer_open:
            self.body.end_answer(note=note)
            self._answer_open = False
        if self.result is not None:
            self.figures = live_figures(self.result)
        self.status = status

    # ----- actions --------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "pane" and parameters:
            return parameters[0] in self.actions
        return True

    def action_pane(self, action: str) -> None:
        self.post_message(self.Requested(self.index, action))

    def common_action(self, action: str, name: str) -> bool:
        """The pane actions every screen shares (copy, copy code, maximise,
        reasoning); False for the ones the screen must handle itself."""
        body = self.body
        if action in ("copy", "copy_code"):
            answer = body.answer_count > 0
            text = (body.answer_text() if action == "copy" else body.last_code_block()) if answer else None
            if text:
                thing = "the answer" if action == "copy" else "the last code block"
                self.app.copy_text(text, f"{thing} of {name} ({len(text):,} characters)")
            else:
                self.app.say(f"{name}: no answer to copy." if action == "copy"
                             else f"{name}: no code block in the answer.")
        elif action == "maximise":
            if self.screen.maximized is self:
                self.screen.minimize()
            else:
                self.screen.maximize(self, container=False)
        elif action == "reasoning" and self.reasoning_hidden:
            self.app.say(f"{name}: reasoning is shown after the vote (blind).")
        elif action == "reasoning":
            body.show_reasoning = not body.show_reasoning
            self.app.say(f"{name}: reasoning {'shown' if body.show_reasoning else 'hidden'}.")
        else:
            return False
        return True

    def focus(self, scroll_visible: bool = True) -> Self:
        self.body.focus(scroll_visible)
        return self
