"""`LineupApp`: the Textual application behind `lineup chat`, `lineup replay`
and `lineup vote`. It owns nothing but the screens: sessions come from
`core.answering.sessions`, records from the `AsyncStore` it is given (the command
opens and closes it). Every notification goes through `say`, which never
parses markup and keeps a log the tests read."""

from __future__ import annotations

import gc
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel

from core.answering.config import DEFAULT_TAGS, Config
from core.answering.sessions import ChatSession, default_rater
from core.answering.tools import ToolScript
from providers.events import Message, SamplingParams
from providers.model_config import ModelConfig
from tui.commands import LineupCommands, PaletteCommand
from tui.host import Host, PickerChoice, SettingsChoice

if TYPE_CHECKING:
    # Type names only (never run): the record as the core hands it over. The TUI
    # never imports the store (tests/test_architecture.py); the screens import
    # this module the same way, for `self.app`, without a cycle at run time.
    from core.answering.vote_queue import Repeats, Reveal
    from core.stats.votes import LoadedSession
    from tui.chat_screen import ChatScreen


@dataclass
class ChatOptions:
    """What `lineup chat` (or `replay --rerun`) asked for."""

    models: list[ModelConfig]
    blind: bool = False
    system: str | None = None
    params: SamplingParams = field(default_factory=SamplingParams)
    seed: int | None = None
    resume: str | None = None
    hint: str | None = None
    rerun_of: str | None = None
    label_seed: int | None = None
    script: ToolScript | None = None   # `--tools FILE`: tools every answer may call, their scripted results
    pick: bool = False          # open on the model picker (many models configured, none named)
    contestant_params: dict[str, SamplingParams] = field(default_factory=dict)   # alias -> its own params
    show_reasoning: bool = False   # `--show-reasoning`: blind sessions show reasoning before the vote (recorded)


@dataclass
class ReplayOptions:
    session_id: str


@dataclass
class ReportOptions:
    """What `lineup report --tui` asked for."""

    rounds: int = 1000
    seed: int | None = 0
    include_demo: bool = False
    category: str | None = None
    sessions: list[str] = field(default_factory=list)
    rater: str | None = None
    since: float | None = None

    def screen_kwargs(self) -> dict[str, Any]:
        return dict(rounds=self.rounds, seed=self.seed, include_demo=self.include_demo, category=self.category,
                    sessions=self.sessions, rater=self.rater, since=self.since)


@dataclass
class VoteOptions:
    session_id: str | None = None
    reveal: Reveal = "each"
    repeats: Repeats = "separate"
    shuffle_seed: int | None = None     # tests and snapshots; None = a fresh shuffle every time
    adaptive: bool = False              # `--adaptive`: pairs chosen by core.stats.adaptive
    confidence: float = 0.95            # ... and the confidence of its stop message
    gold_rate: float = 0.0              # `--gold-rate`: the chance of a gold pair after each case
    blinding_audit: bool = False        # `--blinding-audit`: "who wrote A?" after each vote
    case_seed: str | None = None        # a vote package's seed: each case's order from it and the rater


class LineupApp(Host):
    CSS_PATH = "lineup.tcss"
    TITLE = "lineup"
    COMMANDS = App.COMMANDS | {LineupCommands}
    BINDINGS = [
        Binding("f1", "help", "Help", id="app.help", tooltip="All keys"),
        Binding("ctrl+o", "sessions", "Sessions", id="app.sessions", tooltip="Past sessions: continue, replay, vote"),
        Binding("f4", "report", "Report", id="app.report",
                tooltip="Ratings with intervals, failure modes, latency, checks"),
        Binding("ctrl+p", "command_palette", "Palette", id="app.palette", priority=True,
                tooltip="Every action, searchable"),
        Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True, tooltip="Quit (everything is saved)"),
    ]

    def __init__(self, store, config: Config | None = None, *, chat: ChatOptions | None = None,
                 replay: ReplayOptions | None = None, vote: VoteOptions | None = None,
                 report: ReportOptions | None = None, figures_when_blind: bool = False,
                 rater: str | None = None) -> None:
        super().__init__()
        self.store = store
        self.config = config or Config()
        self.chat_options = chat
        self.replay_options = replay
        self.vote_options = vote
        self.report_options = report
        self.figures_when_blind = figures_when_blind
        self.rater = rater or default_rater()
        self.blind_next = bool(chat and chat.blind)
        self.notices: list[tuple[str, str]] = []
        self.last_copy: tuple[str, str] | None = None     # (text, what it is): for "write it to a file"
        self.copies_told = 0                             # copies whose outcome was told (tests wait on it)
        self.session: ChatSession | None = None
        self.chat_screen: ChatScreen | None = None
        tags = list(DEFAULT_TAGS)
        tags += [t for t in self.config.tags if t not in tags]
        self.tags = tuple(tags)

    # ----- notifications ---------------------------------------------------
    def say(self, message: str, *, severity: SeverityLevel = "information", timeout: float | None = None) -> None:
        """Notify without markup (model and provider text is untrusted)."""
        self.notices.append((severity, message))
        self.notify(message, severity=severity, markup=False, timeout=timeout)

    # ----- start -----------------------------------------------------------
    async def on_mount(self) -> None:
        if self.replay_options is not None:
            from tui.replay_screen import ReplayScreen

            await self.push_screen(ReplayScreen(self.replay_options.session_id, standalone=True))
        elif self.vote_options is not None:
            from tui.vote_queue import VoteQueueScreen

            v = self.vote_options
            rng = random.Random(v.shuffle_seed) if v.shuffle_seed is not None else None
            await self.push_screen(VoteQueueScreen(v.session_id, reveal=v.reveal, repeats=v.repeats,
                                                   standalone=True, rng=rng, adaptive=v.adaptive,
                                                   confidence=v.confidence, gold_rate=v.gold_rate,
                                                   blinding_audit=v.blinding_audit, case_seed=v.case_seed))
        elif self.report_options is not None:
            from tui.report_screen import ReportScreen

            await self.push_screen(ReportScreen(standalone=True, **self.report_options.screen_kwargs()))
        elif self.chat_options is not None:
            if self.chat_options.pick:
                self._pick_first()
            else:
                self.start_chat()
        # Everything alive once the first screen is up (Textual, modules, the app)
        # lives as long as the app: keep it out of every later full collection,
        # which otherwise walks it all and stalls streaming for tens of ms.
        self.call_after_refresh(freeze_survivors)

    def on_unmount(self) -> None:
        release_survivors()   # several apps in one process (tests): let each one's cycles go

    def _pick_first(self) -> None:
        """Many models configured and none named: choose them before the first session."""
        from tui.model_picker import ModelPicker

        models = list(self.config.models.values())
        picker = ModelPicker(models, blind=self.blind_next,
                             why=f"{len(models)} models are configured: choose the ones to put side by side.")

        def chosen(choice: PickerChoice | None) -> None:
            if choice is None:
                self.exit(0)
                return
            self.switch_models(choice)

        self.push_screen(picker, chosen)

    def switch_models(self, choice: PickerChoice, linked: ChatSession | None = None) -> None:
        """Start a session with the models chosen (a new one: never mixed into
        the current); `linked`: the session it continues, whose prompts it offers."""
        opts = self.chat_options
        if opts is None:
            return
        opts.models = list(choice.models)
        opts.contestant_params = {a: p for a, p in opts.contestant_params.items()
                                  if any(m.alias == a for m in choice.models)}
        self.blind_next = choice.blind
        self.start_chat(blind=choice.blind, linked=linked, changed="contestants")

    def remember_settings(self, choice: SettingsChoice, aliases: list[str]) -> None:
        """The settings chosen become those of every new session (Ctrl+N, the picker)."""
        opts = self.chat_options
        if opts is None:
            return
        opts.system = choice.system
        opts.params = choice.params
        opts.seed = None            # the seed is in the params now
        opts.contestant_params = {aliases[i]: p for i, p in choice.contestant.items() if p != p.__class__()}

    def copy_text(self, text: str, what: str) -> None:
        """Copy `text` and say where it went (`tui.copying`)."""
        from tui.copying import copy_and_tell

        copy_and_tell(self, text, what)

    def write_last_copy(self) -> None:
        from tui.copying import offer_file

        offer_file(self)

    @work(exclusive=True, group="open", exit_on_error=False)
    async def start_chat(self, resume: str | None = None, blind: bool | None = None,
                         linked: ChatSession | None = None, changed: str | None = None) -> None:
        """Create (or resume) a session and show it, replacing the current one;
        `linked`: the session this one continues (other models or settings)."""
        from tui.chat_screen import ChatScreen

        opts = self.chat_options
        if opts is None:   # only `lineup chat` starts chats (`_opened` tells the others how)
            return
        resume = resume if resume is not None else (opts.resume if self.session is None else None)
        loaded: LoadedSession | None = None
        autoplay: list[Message] = []
        earlier = linked.user_messages() if linked is not None else []
        try:
            if resume:
                session = await ChatSession.resume(self.store, resume, self.config)
                loaded = session.loaded
            else:
                kind, rerun_of = "chat", None
                script = opts.script if opts is not None else None
                if opts.rerun_of and self.session is None:
                    original = await self.store.load_session(opts.rerun_of)
                    kind, rerun_of = "rerun", original.session.id
                    autoplay = [Message(role="user", content=t.user_message) for t in original.turns]
                    if script is None and original.session.meta.get("tools"):   # the same tools, re-run
                        script = ToolScript.model_validate(original.session.meta["tools"])
                session = await ChatSession.create(
                    self.store, opts.models, blind=self.blind_next if blind is None else blind,
                    system=opts.system, params=opts.params, defaults=self.config.defaults, seed=opts.seed,
                    kind=kind, rerun_of=rerun_of, label_seed=opts.label_seed if self.session is None else None,
                    script=script, contestant_params=opts.contestant_params,
                    linked_from=linked.id if linked else None, changed=changed,
                    show_reasoning=opts.show_reasoning)
        except Exception as exc:
            if self.session is None:
                self.exit(2, message=f"lineup: {exc}")
            else:
                self.say(f"Could not open the session: {exc}", severity="error")
            return
        old = self.session
        self.session = session
        screen = ChatScreen(session, tags=self.tags, hint=opts.hint if not resume and not linked else None,
                            figures_when_blind=self.figures_when_blind, loaded=loaded, autoplay=autoplay,
                            earlier=earlier)
        if self.chat_screen is None:
            await self.push_screen(screen)
        else:
            while len(self.screen_stack) > 2:
                self.pop_screen()
            await self.switch_screen(screen)
        self.chat_screen = screen
        if old is not None:
            await old.aclose()

    def new_chat(self) -> None:
        self.start_chat(blind=self.blind_next)

    # ----- app actions -------------------------------------------------------
    def action_help(self) -> None:
        from tui.help_screen import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_sessions(self) -> None:
        from tui.sessions_screen import SessionsScreen

        if isinstance(self.screen, SessionsScreen):
            return
        self.push_screen(SessionsScreen(), self._opened)

    def report_blocked(self) -> str | None:
        """Why the report may not open now: it would tell which model wrote a
        blind answer still on show (its tags, errors, votes), else None."""
        from tui.vote_queue import VoteQueueScreen

        s = self.session
        if s is not None and s.blind and not s.revealed and s.turns:
            return "Vote first: while the answers are blind, the report would tell which model wrote which."
        from tui.replay_screen import ReplayScreen

        for screen in self.screen_stack:
            if isinstance(screen, VoteQueueScreen) and screen.current is not None and (
                    screen.waiting or screen.reveal == "end"):
                return "Finish the vote queue first: the report would tell which model wrote which answer."
            if isinstance(screen, ReplayScreen) and getattr(screen, "hidden", False):
                return "Close the blind replay first: the report would tell which model wrote which answer."
        return None

    def action_report(self) -> None:
        from tui.report_screen import ReportScreen

        if isinstance(self.screen, ReportScreen):
            return
        why = self.report_blocked()
        if why:
            self.say(why, severity="warning")
            return
        self.push_screen(ReportScreen(**(self.report_options or ReportOptions()).screen_kwargs()))

    def _opened(self, picked: tuple[str, str] | None) -> None:
        if picked is None:
            return
        what, sid = picked
        if what == "chat":
            if self.chat_options is None:
                self.say("Continue a session with: lineup chat --resume " + sid)
                return
            if self.session is not None and (self.session.streaming):
                self.say("Still answering: press Esc first.", severity="warning")
                return
            self.start_chat(resume=sid)
        elif what == "replay":
            from tui.replay_screen import ReplayScreen

            self.push_screen(ReplayScreen(sid))
        elif what == "vote":
            from tui.vote_queue import VoteQueueScreen

            self.push_screen(VoteQueueScreen(sid))

    async def action_quit(self) -> None:
        await self.close_sessions()
        self.exit(0)

    async def close_sessions(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            await session.aclose()
        for worker in list(self.workers):
            if worker.group == "send":
                worker.cancel()

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            ("Help: all keys", "every key binding", self.action_help),
            ("Sessions", "list, filter and open past sessions", self.action_sessions),
            ("Report", "ratings with intervals, failure modes, latency, checks", self.action_report),
            ("Write the last copy to a file", "when the clipboard did not take it", self.write_last_copy),
            ("Quit", "everything is already saved", lambda: self.run_worker(self.action_quit())),
        ]


_DEFAULT_GC_THRESHOLD = gc.get_threshold()
YOUNG_GC_THRESHOLD = 5000  # objects allocated (net) before a young collection; Python's default: 700


def freeze_survivors() -> None:
    """Collect once, move every survivor out of the collector's sight, and let
    the young generation grow to `YOUNG_GC_THRESHOLD` objects.

    Painting a frame allocates thousands of objects that live for that frame.
    With the default threshold most young collections ran mid-frame and
    promoted them, and six streaming panes triggered a full collection about
    every 0.7 s (10-18 ms each, growing with the answers): a fifth of the
    rendering CPU. The render benchmark calls this as the app does.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_GC_THRESHOLD, *_DEFAULT_GC_THRESHOLD[1:])


def release_survivors() -> None:
    """Undo `freeze_survivors` (the app is gone)."""
    gc.unfreeze()
    gc.set_threshold(*_DEFAULT_GC_THRESHOLD)
