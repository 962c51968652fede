"""Past sessions: a filterable table; open one to continue it, replay it or
judge it in the vote queue. Blind sessions list no names until every judged
unit is revealed ("k of n revealed" meanwhile)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from core.text import format_time

if TYPE_CHECKING:
    from textual import getters

    from tui.app import LineupApp


def when(ts: float) -> str:
    return format_time(ts, "%Y-%m-%d %H:%M", utc=False)   # a bad row's time as its number


def summary_row(s) -> tuple:
    models = ("(blind)" if s.reveal_note == "hidden" else f"(blind · {s.reveal_note})") \
        if s.contestants is None else ", ".join(s.contestants)
    title = s.title or ""
    if s.is_demo:
        title = f"{title} [demo]".strip()
    return (s.id[:10], when(s.created), s.kind, Text(models), Text(title), str(s.turns), str(s.votes))


def matches(s, needle: str) -> bool:
    if not needle:
        return True
    hay = " ".join([s.id, s.kind, s.title or "", *(s.contestants or ["blind"])]).lower()
    return all(word in hay for word in needle.lower().split())


class SessionsScreen(Screen[tuple[str, str] | None]):
    """Dismisses with (what, session_id): what is 'chat', 'replay' or 'vote'."""

    if TYPE_CHECKING:
        app = getters.app(LineupApp)   # how the type checker sees `self.app` (Textual's own at run time)

    BINDINGS = [
        Binding("enter", "open('chat')", "Continue", id="sessions.continue", tooltip="Continue the session"),
        Binding("p", "open('replay')", "Replay", id="sessions.replay", tooltip="Open read-only, play answers back"),
        Binding("v", "open('vote')", "Vote queue", id="sessions.vote", tooltip="Judge its unvoted cases blind"),
        Binding("slash", "focus_filter", "Filter", id="sessions.filter", key_display="/"),
        Binding("escape", "close", "Back", id="sessions.back"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.summaries: list = []

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield Input(placeholder="filter: words in id, kind, title or model names", id="sessions-filter")
        yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="sessions-count")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.title = "lineup"
        self.sub_title = "sessions"
        table = self.query_one(DataTable)
        table.add_columns("id", "created", "kind", "models", "title", "turns", "votes")
        self.load()
        table.focus()

    @work(exclusive=True, group="sessions", exit_on_error=False)
    async def load(self) -> None:
        try:
            # sessions nobody typed into (an app opened and closed) are not worth a row
            self.summaries = [s for s in await self.app.store.list_sessions() if s.turns]
        except Exception as exc:
            self.app.say(f"Could not list sessions: {exc}", severity="error")
            self.summaries = []
        self.fill()

    def fill(self) -> None:
        needle = self.query_one(Input).value.strip()
        table = self.query_one(DataTable)
        table.clear()
        shown = [s for s in self.summaries if matches(s, needle)]
        for s in shown:
            table.add_row(*summary_row(s), key=s.id)
        self.query_one("#sessions-count", Static).update(
            Text(f"{len(shown)} of {len(self.summaries)} sessions"))

    def on_input_changed(self, event: Input.Changed) -> None:
        self.fill()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one(DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        sid = event.row_key.value   # every row is added with its session's id as the key
        if sid is not None:
            self.dismiss(("chat", sid))

    def selected_id(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return row_key.value

    def action_open(self, what: str) -> None:
        sid = self.selected_id()
        if sid is None:
            self.app.say("No session selected.")
            return
        self.dismiss((what, sid))

    def action_focus_filter(self) -> None:
        self.query_one(Input).focus()

    def action_close(self) -> None:
        if self.focused is self.query_one(Input) and self.query_one(Input).value:
            self.query_one(Input).value = ""
            return
        self.dismiss(None)
