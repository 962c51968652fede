"""Past sessions: a filterable table; open one to continue it, replay it or
judge it in the vote queue; rename or delete one. The filter matches ids,
kinds, titles and model names as typed, and the text of prompts and answers
through the store's full-text index (`Store.list_sessions(search=...)`).
Blind sessions list no names until every judged unit is revealed ("k of n
revealed" meanwhile); a match on an answer's text names no model either.
A deletion asks first and leaves a tombstone in the store, so that a merge
from a teammate's database does not bring the session back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from core.ground.text import format_time, one_line
from tui.dialogs import Confirm, TextPrompt

if TYPE_CHECKING:
    from textual import getters

    from tui.host import Host


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
        app = getters.app(Host)   # how the type checker sees `self.app` (Textual's own at run time)

    BINDINGS = [
        Binding("enter", "open('chat')", "Continue", id="sessions.continue", tooltip="Continue the session"),
        Binding("p", "open('replay')", "Replay", id="sessions.replay", tooltip="Open read-only, play answers back"),
        Binding("v", "open('vote')", "Vote queue", id="sessions.vote", tooltip="Judge its unvoted cases blind"),
        Binding("slash", "focus_filter", "Filter", id="sessions.filter", key_display="/",
                tooltip="Filter by id, title, model, or words in prompts and answers"),
        Binding("r", "rename", "Rename", id="sessions.rename", tooltip="Give the session a title"),
        Binding("d,delete", "delete", "Delete", id="sessions.delete",
                tooltip="Delete the session (asks first; merges will not bring it back)"),
        Binding("escape", "close", "Back", id="sessions.back"),
        # priority: the focus moves as Down arrives, so a key typed right after goes to the list
        Binding("down", "to_list", "To the list", id="sessions.to_list", priority=True, show=False,
                tooltip="From the filter to the list"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.summaries: list = []
        self.text_hits: set[str] = set()     # ids whose prompts or answers hold the filter's words
        self.searched = ""                   # the filter those hits are for

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield Input(placeholder="filter: words in id, kind, title, model names, prompts or answers",
                    id="sessions-filter")
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
        keep = self.selected_id()          # the cursor stays on its session through a reload
        table.clear()
        hits = self.text_hits if needle and self.searched == needle else set()
        shown = [s for s in self.summaries if matches(s, needle) or s.id in hits]
        for s in shown:
            table.add_row(*summary_row(s), key=s.id)
        ids = [s.id for s in shown]
        if keep in ids:
            table.move_cursor(row=ids.index(keep))
        in_text = sum(1 for s in shown if s.id in hits and not matches(s, needle))
        self.query_one("#sessions-count", Static).update(
            Text(f"{len(shown)} of {len(self.summaries)} sessions"
                 + (f" ({in_text} by the text of a prompt or answer)" if in_text else "")))

    def on_input_changed(self, event: Input.Changed) -> None:
        self.fill()
        self.search_text(event.value.strip())

    @work(exclusive=True, group="search", exit_on_error=False)
    async def search_text(self, needle: str) -> None:
        """The sessions whose prompts or answers hold every word of `needle` (full-text index)."""
        if not needle:
            self.text_hits, self.searched = set(), ""
            return
        try:
            found = await self.app.store.list_sessions(search=needle)
        except Exception as exc:
            self.app.say(f"Could not search: {exc}", severity="error")
            return
        self.text_hits, self.searched = {s.id for s in found}, needle
        self.fill()

    def _selected(self):
        sid = self.selected_id()
        return next((s for s in self.summaries if s.id == sid), None)

    def action_rename(self) -> None:
        s = self._selected()
        if s is None:
            self.app.say("No session selected.")
            return

        def renamed(title: str | None) -> None:
            if title is not None:
                self._rename(s.id, title)

        self.app.push_screen(TextPrompt(f"Title for session {s.id[:10]}", value=s.title or "",
                                        placeholder="a title (empty: none)", dialog_id="rename-dialog"), renamed)

    @work(group="sessions-edit", exit_on_error=False)
    async def _rename(self, sid: str, title: str) -> None:
        try:
            rec = await self.app.store.rename_session(sid, title)
        except Exception as exc:
            self.app.say(f"Not renamed: {exc}", severity="error")
            return
        self.app.say(f"Session {sid[:10]} renamed: {one_line(rec.title, 60)}" if rec.title
                     else f"Session {sid[:10]} has no title now.")
        self.load()

    def action_delete(self) -> None:
        s = self._selected()
        if s is None:
            self.app.say("No session selected.")
            return
        if self.app.session is not None and self.app.session.id == s.id:
            self.app.say("That session is open in the chat: start another (Ctrl+N) before deleting it.",
                         severity="warning")
            return
        models = ("(blind)" if s.reveal_note == "hidden" else f"(blind · {s.reveal_note})") \
            if s.contestants is None else ", ".join(s.contestants)
        detail = (f"{s.kind}, {when(s.created)}, {s.turns} turn{'s' if s.turns != 1 else ''}, "
                  f"{s.votes} vote{'s' if s.votes != 1 else ''}; {one_line(models, 80)}"
                  + (f"; {one_line(s.title, 60)}" if s.title else "")
                  + ". Everything recorded in it goes; a merge will not bring it back.")

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(s.id)

        self.app.push_screen(Confirm(f"Delete session {s.id[:10]}?", detail), answered)

    @work(group="sessions-edit", exit_on_error=False)
    async def _delete(self, sid: str) -> None:
        try:
            await self.app.store.delete_session(sid)
        except Exception as exc:
            self.app.say(f"Not deleted: {exc}", severity="error")
            return
        self.app.say(f"Deleted session {sid[:10]}.")
        self.load()

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

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "to_list":      # only from the filter; in the list Down moves down
            return self.focused is self.query_one(Input)
        return True

    def action_to_list(self) -> None:
        self.set_focus(self.query_one(DataTable))

    def action_focus_filter(self) -> None:
        self.query_one(Input).focus()

    def action_close(self) -> None:
        if self.focused is self.query_one(Input) and self.query_one(Input).value:
            self.query_one(Input).value = ""
            return
        self.dismiss(None)
