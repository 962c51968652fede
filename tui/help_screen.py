"""The help screen: every key binding, grouped by where it works, generated
from the widgets' BINDINGS so it never drifts from the keys."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


def binding_groups(app_class: type[App]) -> list[tuple[str, list]]:
    """(title, bindings) for every place keys work, in the order shown; the
    app's own bindings from `app_class` (the app imports this module)."""
    from tui.chat_screen import ChatScreen
    from tui.compare_screen import CompareScreen
    from tui.dialogs import Confirm, TextPrompt
    from tui.guess_picker import GuessPicker
    from tui.model_picker import ModelPicker
    from tui.panes import Pane
    from tui.prompt_box import PromptBox
    from tui.replay_screen import ReplayScreen
    from tui.score_sheet import ScoreSheet
    from tui.report_screen import ReportScreen
    from tui.sessions_screen import SessionsScreen
    from tui.settings_screen import SettingsScreen
    from tui.tag_picker import AnswerPicker, TagPicker
    from tui.vote_bar import VoteBar
    from tui.vote_queue import VoteQueueScreen

    return [
        ("Everywhere", app_class.BINDINGS),
        ("Chat", ChatScreen.BINDINGS),
        ("Prompt box", PromptBox.BINDINGS),
        ("Focused pane", Pane.BINDINGS),
        ("Vote bar", VoteBar.BINDINGS),
        ("Tag picker", TagPicker.BINDINGS),
        ("Answer to tag", AnswerPicker.BINDINGS),
        ("Model picker", ModelPicker.BINDINGS),
        ("Settings", SettingsScreen.BINDINGS),
        ("Compare", CompareScreen.BINDINGS),
        ("Text prompt", TextPrompt.BINDINGS),
        ("Yes / no", Confirm.BINDINGS),
        ("Sessions", SessionsScreen.BINDINGS),
        ("Replay", ReplayScreen.BINDINGS),
        ("Vote queue", VoteQueueScreen.BINDINGS),
        ("Scores", ScoreSheet.BINDINGS),
        ("Who wrote A?", GuessPicker.BINDINGS),
        ("Report", ReportScreen.BINDINGS),
        ("Help", HelpScreen.BINDINGS),
    ]


def _key_display(binding: Binding) -> str:
    if binding.key_display:
        return binding.key_display
    return ", ".join(k.replace("ctrl+", "^") for k in binding.key.split(","))


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,f1,q", "close", "Close", id="help.close"),
    ]

    def compose(self) -> ComposeResult:
        table = Table(show_header=False, box=None, pad_edge=False, expand=True)
        table.add_column("key", style="bold", no_wrap=True, width=14)
        table.add_column("what")
        for title, bindings in binding_groups(type(self.app)):
            table.add_row(Text(title, style="bold underline"), "")
            letters = [b for b in bindings if b.id and b.id.startswith("vote.") and len(b.key) == 1
                       and b.key in "abcdefgh"]
            for b in bindings:
                if b in letters[1:]:
                    continue
                if b in letters[:1]:
                    table.add_row("a … h", "vote: that answer is best (by screen position)")
                    continue
                table.add_row(_key_display(b), Text(b.tooltip or b.description))
            table.add_row("", "")
        table.add_row(Text("Mouse", style="bold underline"), "")
        table.add_row("click", "focus a pane, press a button, select text")
        table.add_row("wheel", "scroll a pane")
        with VerticalScroll(id="help-body"):
            yield Static(Text("lineup: keys", style="bold"), id="help-title")
            yield Static(table)

    def action_close(self) -> None:
        self.dismiss(None)
