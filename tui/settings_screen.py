"""The session's system prompt and sampling parameters, shown and edited:
for the session, and per contestant on top of it (temperature, top_p,
max_tokens, seed, reasoning effort where the protocol takes it, extra body as
a JSON object). Values are typed as text and checked the way `-p KEY=VALUE`
is (`core.answering.typed_params.params_from_text`): a bad one is named in the dialog, which
stays open. Returns a `SettingsChoice` (or None); the chat applies it now
when nothing was sent yet, else in a new session linked to this one.

Blind means blind: until the vote the per-contestant rows are not shown at
all (a model's own parameters could tell it apart), only the session's.

Every field shows something while empty: the value it inherits, or
"default" (the server's own) when nothing is set above it. The fields share
the dialog's width, with short headings on a small terminal, and Tab walks
them row by row. Nothing typed is lost without a word: keys that reach no
field are named in the dialog, and Esc after a change asks to be pressed
again before the changes are dropped."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static, TextArea

from core.answering.typed_params import ParamsError, params_from_text
from core.ground.text import one_line
from providers.catalogue import REASONING_EFFORT_PROVIDERS
from providers.events import SamplingParams
from tui.host import SettingsChoice

if TYPE_CHECKING:
    from core.answering.sessions import ChatSession

FIELDS = ("temperature", "top_p", "max_tokens", "seed", "reasoning_effort", "extra_body")
HEADINGS = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max tokens", "seed": "seed",
            "reasoning_effort": "reasoning", "extra_body": "extra body (JSON)"}
SHORT_HEADINGS = {"temperature": "temp", "top_p": "top_p", "max_tokens": "max tok", "seed": "seed",
                  "reasoning_effort": "effort", "extra_body": "extra{}"}
WHERE_TAKEN = "where taken"   # the session's reasoning effort goes to the protocols that take one
UNSET = "default"          # an empty field with nothing set above it: the server's default applies


def shown_value(params: SamplingParams, name: str) -> str:
    value = getattr(params, name)
    if value is None:
        return ""
    if name == "extra_body":
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def summary(system: str | None, params: SamplingParams, *, width: int = 60) -> Text:
    """One line for the chat's session bar: the system prompt's start and the session's parameters."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("system: ", style="dim")
    text.append(one_line(system, width) if system else "none")
    for name in FIELDS:
        value = shown_value(params, name)
        if value:
            text.append(f" · {HEADINGS[name].split(' ')[0]} ", style="dim")
            text.append(one_line(value, 40))
    if params.stop:
        text.append(" · stop ", style="dim")
        text.append(one_line(", ".join(params.stop), 30))
    return text


def _field_width(terminal_width: int) -> float:
    """Cells a field gets with the long headings' layout (extra body twice as wide):
    the dialog is 120 columns or 95% of the terminal, less its border, padding,
    the row label and a margin after each field (lineup.tcss)."""
    inner = min(120, int(terminal_width * 0.95)) - 4 - 15
    return (inner - len(FIELDS)) / (len(FIELDS) + 1)


class SettingsScreen(ModalScreen[SettingsChoice | None]):
    """Ctrl+S applies, Esc closes without a change, Tab moves between fields."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="settings.cancel", tooltip="Close without a change"),
        Binding("ctrl+s", "apply", "Apply", id="settings.apply", priority=True,
                tooltip="Apply (now, or in a new linked session after a prompt)"),
        # priority: the app moves the focus before it hands on the next key, so
        # "Tab 0.5" typed quickly puts all of "0.5" in the next field
        Binding("tab", "app.focus_next", "Next field", show=False, priority=True, id="settings.next"),
        Binding("shift+tab", "app.focus_previous", "Previous field", show=False, priority=True,
                id="settings.previous"),
    ]

    def __init__(self, session: ChatSession) -> None:
        super().__init__()
        self.session = session
        self.hidden = not session.revealed
        self.problem = ""
        self._initial: dict[str, str] = {}
        self._leaving = False       # Esc was pressed once with changes typed

    def _row(self, key: str, label: Text, values: SamplingParams, inherited: SamplingParams | None,
             provider: str | None) -> Horizontal:
        inputs = []
        for name in FIELDS:
            takes = name != "reasoning_effort" or provider is None or provider in REASONING_EFFORT_PROVIDERS
            hint = shown_value(inherited, name) if inherited is not None else ""
            placeholder = (hint or UNSET) if takes else "n/a"
            if name == "reasoning_effort" and provider is None:
                placeholder = WHERE_TAKEN   # (naming protocols would hint at the models)
            inputs.append(Input(shown_value(values, name) if takes else "", placeholder=placeholder,
                                id=f"set-{key}-{name}", classes=f"settings-field settings-{name}",
                                compact=True, disabled=not takes))
        return Horizontal(Label(label, classes="settings-label"), *inputs, classes="settings-row")

    def compose(self) -> ComposeResult:
        s = self.session
        editable = s.settings_editable
        with Vertical(classes="dialog", id="settings-dialog"):
            yield Label(Text("System prompt and parameters", style="bold"), classes="dialog-title")
            yield Static(Text("Nothing sent yet: changes apply to this session." if editable else
                              "A prompt was sent: applying starts a new session linked to this one "
                              "(same models; its prompts can be sent again)."), classes="dialog-note")
            yield Label(Text("System prompt", style="bold"))
            yield TextArea(s.system or "", id="settings-system", soft_wrap=True, compact=True,
                           placeholder="none: type one for every model",
                           tab_behavior="focus", show_line_numbers=False)
            # not focusable itself: the Tab after the system prompt goes to the first field
            with VerticalScroll(id="settings-rows", can_focus=False):
                yield Horizontal(Label(Text(""), classes="settings-label"),
                                 *[Label(Text(HEADINGS[n], style="bold"), classes=f"settings-head settings-{n}",
                                         id=f"settings-head-{n}")
                                   for n in FIELDS], classes="settings-row")
                yield self._row("session", Text("session", style="bold"), s.params, s.defaults, None)
                if self.hidden:
                    yield Static(Text("Per-contestant parameters are hidden until the vote: a model's own "
                                      "settings could tell the models apart.", style="italic"),
                                 id="settings-hidden")
                else:
                    for i, c in enumerate(s.contestants):
                        yield self._row(str(i), Text(one_line(s.display_name(i), 14)), c.override, c.params,
                                        c.config.provider)
            yield Static("", id="settings-problem", classes="dialog-problem")
            yield Static(Text("ctrl+s: apply · tab: next field · esc: cancel · an empty field takes "
                              "the greyed value"), classes="dialog-help", id="settings-help")

    def on_mount(self) -> None:
        self.query_one("#settings-system", TextArea).focus()
        self._initial = self._typed()
        self._fit_headings(self.app.size.width)

    def on_resize(self, event) -> None:
        self._fit_headings(event.size.width)

    def _fit_headings(self, width: int) -> None:
        """Short headings ("temp", "max tok") and placeholders where the long ones would be cut."""
        wide = _field_width(width) >= max(len(h) for h in (HEADINGS["temperature"], WHERE_TAKEN))
        self.set_class(not wide, "-narrow")
        names = HEADINGS if wide else SHORT_HEADINGS
        for name in FIELDS:
            self.query_one(f"#settings-head-{name}", Label).update(Text(names[name], style="bold"))
        self.query_one("#set-session-reasoning_effort", Input).placeholder = WHERE_TAKEN if wide else UNSET

    def _typed(self) -> dict[str, str]:
        """Every field's text and the system prompt's, by id."""
        typed = {box.id or "": box.value for box in self.query(Input)}
        typed["system"] = self.query_one("#settings-system", TextArea).text
        return typed

    def _say(self, problem: str) -> None:
        self.problem = problem
        self.query_one("#settings-problem", Static).update(Text(problem, style="bold red"))

    def on_key(self, event) -> None:
        """A key typed where no field takes it is named, never dropped unseen."""
        if event.is_printable and event.character and not isinstance(self.focused, (Input, TextArea)):
            event.stop()
            self._say(f"Typed {one_line(event.character, 4)!r} outside any field: Tab or click to a field first.")

    def _values(self, key: str) -> dict[str, str]:
        out = {}
        for name in FIELDS:
            box = self.query_one(f"#set-{key}-{name}", Input)
            if not box.disabled:
                out[name] = box.value
        return out

    def choice(self) -> SettingsChoice:
        """What the fields say; ParamsError naming the row and the key."""
        problems: list[tuple[str, str]] = []
        params = SamplingParams()
        try:
            params = params_from_text(self._values("session"), where="session")
        except ParamsError as exc:
            problems += [(f"session · {k}", w) for k, w in exc.problems]
        stop = self.session.params.stop
        if stop:
            params = params.model_copy(update={"stop": stop})
        own: dict[int, SamplingParams] = {}
        if not self.hidden:
            for i, c in enumerate(self.session.contestants):
                try:
                    own[i] = params_from_text(self._values(str(i)), where=c.label)
                except ParamsError as exc:
                    problems += [(f"{self.session.display_name(i)} · {k}", w) for k, w in exc.problems]
        if problems:
            raise ParamsError(problems, where="")
        system = self.query_one("#settings-system", TextArea).text.strip() or None
        return SettingsChoice(system, params, own)

    def action_apply(self) -> None:
        try:
            choice = self.choice()
        except ParamsError as exc:
            self._say("; ".join(f"{k}: {w}" for k, w in exc.problems))
            return
        self.dismiss(choice)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_apply()

    def action_cancel(self) -> None:
        if self._typed() != self._initial and not self._leaving:
            self._leaving = True
            self._say("Esc again drops what you typed; Ctrl+S applies it.")
            return
        self.dismiss(None)
