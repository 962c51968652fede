"""Sessions: fan one turn out to N contestants at once, keep each contestant's
own thread, assign blind labels, cancel and retry, and write everything to the
store as it happens. Shared by the TUI (`ChatSession`) and batch commands
(`record_stream`). No UI and no SQL here: the store is an `AsyncStore`.

Why this file is past 600 lines: `ChatSession` is one object whose state
(contestants, labels, turns, attempts, settings, reveal) every method reads
and changes together; sending, retrying, editing the last prompt, changing
settings before the first turn, voting and resuming must agree on it, and
split across modules they would each need the whole of it. The stream
recording (`record_stream`) is its one other part, shared with the runner.
"""

from __future__ import annotations

import getpass
import os
import random
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio

from core.stats import votes as votes_core
from core.answering.attachments import image_bytes, image_record
from core.answering.config import Config
from core.answering.identity import prompt_texts, tag_self_identification
from core.answering.judge_directed import tag_judge_directed
from core.answering.recording import PaneUpdate, output_from_result, record_stream
from core.answering.tools import ToolScript, answer_messages, answer_script
from providers import accepts_images, make_provider
from providers.base import ChatStream, Provider
from providers.events import (
    ChatRequest,
    ErrorKind,
    ImagePart,
    Message,
    Queued,
    SamplingParams,
    StreamError,
    StreamResult,
)
from providers.model_config import ModelConfig, server_concurrency, server_key
from store import AsyncStore, Store
from store.ids import new_ulid
from store.records import (
    ContestantRecord,
    LoadedSession,
    OutputRecord,
    RevealRecord,
    SessionRecord,
    TagRecord,
    TurnRecord,
    VoteRecord,
)

LABELS = votes_core.LABELS
MAX_CONTESTANTS = votes_core.MAX_CONTESTANTS


def default_rater() -> str:
    """Who is voting: LINEUP_RATER, else the login name."""
    try:
        return os.environ.get("LINEUP_RATER") or getpass.getuser()
    except Exception:  # no login name in some containers
        return "rater"


@dataclass(slots=True)
class Contestant:
    """One pane: a configured model, its label and its own thread."""

    config: ModelConfig
    label: str
    position: int
    params: SamplingParams
    # this contestant's own settings on top of the session's (the settings panel; recorded in `params`)
    override: SamplingParams = field(default_factory=SamplingParams)
    history: list[Message] = field(default_factory=list)
    provider: Provider | None = None
    stream: ChatStream | None = None
    waiting: anyio.CancelScope | None = None   # queued for its server (see `ServerLimits`)
    last_output: OutputRecord | None = None

    @property
    def alias(self) -> str:
        return self.config.alias

    def get_provider(self) -> Provider:
        if self.provider is None:
            self.provider = make_provider(self.config)
        return self.provider

    @property
    def accepts_images(self) -> bool:
        """Whether a prompt's images are sent to this model (`providers.accepts_images`)."""
        return accepts_images(self.config)


class ServerLimits:
    """How many requests each server takes at once (`server_concurrency`),
    shared by every alias on it, in the chat and in `lineup run` alike; the
    smallest setting among a server's aliases wins."""

    def __init__(self, models: Iterable[ModelConfig]) -> None:
        self._sizes: dict[str, int] = {}
        for m in models:
            key = server_key(m)
            if key is not None:
                self._sizes[key] = min(self._sizes.get(key, server_concurrency(m)), server_concurrency(m))
        self._limiters: dict[str, anyio.CapacityLimiter] = {}

    def limiter(self, cfg: ModelConfig) -> anyio.CapacityLimiter | None:
        """The limiter of `cfg`'s server (made in the running event loop), or None: no limit."""
        key = server_key(cfg)
        if key is None or key not in self._sizes:
            return None
        if key not in self._limiters:
            self._limiters[key] = anyio.CapacityLimiter(self._sizes[key])
        return self._limiters[key]

    @staticmethod
    def queued_message(limiter: anyio.CapacityLimiter) -> str:
        n = int(limiter.total_tokens)
        return f"queued: the server takes {n} request{'s' if n != 1 else ''} at once"


def contestant_record(c: Contestant) -> ContestantRecord:
    cfg = c.config
    return ContestantRecord(
        alias=cfg.alias, provider=cfg.provider, model=cfg.model, base_url=cfg.base_url,
        params=c.params.model_dump(exclude_none=True),
        price=cfg.price.model_dump() if cfg.price else None,
        label=c.label, position=c.position, is_demo=cfg.is_demo,
        variant_of=cfg.variant_of, system=cfg.system, template=cfg.template, tools=cfg.tools,
    )


class ChatSession:
    """A live side-by-side session: the TUI's model of what is on screen."""

    def __init__(self, store: AsyncStore, record: SessionRecord, contestants: list[Contestant],
                 defaults: SamplingParams = SamplingParams()) -> None:
        self.store = store
        self.record = record
        self.contestants = contestants
        #: the tools every answer may call, with their scripted results (`lineup chat --tools`)
        self.script = ToolScript.model_validate(record.meta["tools"]) if record.meta.get("tools") else None
        self.defaults = defaults            # [defaults] of the config, under every contestant's params
        self.turns: list[TurnRecord] = []
        self.turn_images: dict[str, tuple[ImagePart, ...]] = {}   # turn id -> the images its prompt carried
        self.edited: dict[str, str] = {}    # turn id -> its prompt as last edited and re-sent
        self.votes: list[VoteRecord] = []
        self.tags: list[TagRecord] = []     # current ones (not removed), automatic ones included
        self.limits = ServerLimits(c.config for c in contestants)
        self.saved = True                   # in the store: a new session is recorded with its first prompt
        self.loaded: LoadedSession | None = None   # the record as `resume` read it (None for a new session)

    # ----- creation -------------------------------------------------------
    @classmethod
    async def create(
        cls,
        store: AsyncStore,
        models: Sequence[ModelConfig],
        *,
        blind: bool = False,
        system: str | None = None,
        params: SamplingParams = SamplingParams(),
        defaults: SamplingParams = SamplingParams(),
        seed: int | None = None,
        title: str | None = None,
        kind: str = "chat",
        rerun_of: str | None = None,
        label_seed: int | None = None,
        script: ToolScript | None = None,
        contestant_params: Mapping[str, SamplingParams] | None = None,
        linked_from: str | None = None,
        changed: str | None = None,
        show_reasoning: bool = False,
    ) -> "ChatSession":
        """A new session, recorded with its first prompt (`send`): opening
        the app and leaving without sending leaves no empty session behind,
        while a session killed once a prompt was sent keeps it (the session
        and its first turn are one transaction). `contestant_params` (alias -> params)
        go on top of the session's for that contestant. `linked_from`: the
        session this one continues with other models or settings (`changed`
        says what, in words); it is recorded as `rerun_of` and
        `meta.linked_from`, and its prompts are offered again.
        `show_reasoning`: a blind session shows reasoning before the vote
        (recorded in its meta, `core.stats.votes.SHOW_REASONING`)."""
        if not 1 <= len(models) <= MAX_CONTESTANTS:
            raise ValueError(f"a session takes 1 to {MAX_CONTESTANTS} models, not {len(models)}")
        aliases = [m.alias for m in models]
        if len(set(aliases)) != len(aliases):
            raise ValueError(f"the same model twice: {', '.join(aliases)}")
        order = list(models)
        meta: dict = {"tools": script.model_dump(mode="json")} if script is not None else {}
        if blind:
            label_seed = secrets.randbits(32) if label_seed is None else label_seed
            random.Random(label_seed).shuffle(order)
            meta["label_seed"] = label_seed
        if blind and show_reasoning:
            meta[votes_core.SHOW_REASONING] = True
        if linked_from is not None:
            rerun_of = linked_from
            meta["linked_from"] = {"session": linked_from, "changed": changed or "settings"}
        session_params = params if seed is None else params.model_copy(update={"seed": seed})
        own = dict(contestant_params or {})
        contestants = [
            Contestant(
                config=cfg,
                label=LABELS[i] if blind else cfg.alias,
                position=i,
                params=defaults.merged(cfg.params).merged(session_params).merged(own.get(cfg.alias)),
                override=own.get(cfg.alias) or SamplingParams(),
            )
            for i, cfg in enumerate(order)
        ]
        record = SessionRecord(
            id=new_ulid(), created=time.time(), kind=kind, title=title,
            contestants=[contestant_record(c) for c in contestants],
            system=system, params=session_params.model_dump(exclude_none=True), seed=session_params.seed,
            blind=blind, revealed_at=None, sample_set_name=None, sample_set_hash=None,
            rerun_of=rerun_of, meta=meta,
        )
        session = cls(store, record, contestants, defaults)
        session.saved = False
        return session

    @classmethod
    async def resume(cls, store: AsyncStore, session_id: str, config: Config) -> "ChatSession":
        """Continue a saved session: contestants, threads and votes as recorded."""
        loaded = await store.load_session(session_id)
        rec = loaded.session
        contestants = []
        for saved in sorted(rec.contestants, key=lambda c: c.position):
            cfg = config.models.get(saved.alias)
            if cfg is None or cfg.provider != saved.provider or cfg.model != saved.model:
                cfg = _config_from_record(saved, config)
            contestants.append(Contestant(config=cfg, label=saved.label, position=saved.position,
                                          params=SamplingParams(**saved.params)))
        session = cls(store, rec, contestants, config.defaults)
        session.loaded = loaded      # the screen draws the record from it: read once
        session.turns = list(loaded.turns)
        session.votes = list(loaded.votes)
        session.tags = list(loaded.tags)
        hashes = [img["sha256"] for t in loaded.turns for img in t.images if img.get("sha256")]
        stored = await store.call(lambda s: s.images(hashes)) if hashes else {}
        by_alias = {c.alias: c for c in contestants}
        for turn in loaded.turns:
            images = session.turn_images[turn.id] = _turn_images(turn, stored)
            answers: dict[str, OutputRecord] = {}
            for out in loaded.outputs_for(turn.id):
                if out.contestant in by_alias:
                    prev = answers.get(out.contestant)
                    if prev is None or out.attempt >= prev.attempt:
                        answers[out.contestant] = out
            for c in contestants:
                answer = answers.get(c.alias)
                prompt = answer.prompt if answer is not None and answer.prompt else turn.user_message
                if answer is not None and answer.prompt:
                    session.edited[turn.id] = answer.prompt
                refused = c.alias in _not_sent_to(turn)
                c.history.append(Message(role="user", content=prompt, images=() if refused else images))
            for alias, out in answers.items():
                by_alias[alias].last_output = out
                by_alias[alias].history.extend(answer_messages(out))
        return session

    # ----- properties -----------------------------------------------------
    @property
    def id(self) -> str:
        return self.record.id

    @property
    def blind(self) -> bool:
        return self.record.blind

    @property
    def revealed(self) -> bool:
        return not self.record.blind or self.record.revealed_at is not None

    @property
    def show_reasoning(self) -> bool:
        """Reasoning shown before the vote, as this session was started (`--show-reasoning`)."""
        return votes_core.shows_reasoning(self.record)

    @property
    def reasoning_hidden(self) -> bool:
        """Reasoning is left out of what the rater sees now (`core.stats.votes.reasoning_hidden`)."""
        return votes_core.reasoning_hidden(hidden=not self.revealed, show_reasoning=self.show_reasoning)

    @property
    def system(self) -> str | None:
        return self.record.system

    @property
    def params(self) -> SamplingParams:
        """The session's own parameters (every contestant's, above the config's)."""
        return SamplingParams.model_validate(self.record.params)

    @property
    def settings_editable(self) -> bool:
        """System prompt and parameters can change until the first prompt is sent."""
        return not self.turns

    @property
    def linked_from(self) -> str | None:
        """The session this one continues with other models or settings."""
        link = self.record.meta.get("linked_from")
        return link.get("session") if isinstance(link, dict) else None

    def prompt_of(self, turn: TurnRecord) -> str:
        """A turn's prompt as last sent (edited and re-sent, or as first typed)."""
        return self.edited.get(turn.id, turn.user_message)

    def user_messages(self) -> list[Message]:
        """Every turn's prompt as last sent, with its images: what a linked
        session offers to send again."""
        return [Message(role="user", content=self.prompt_of(t), images=self.turn_images.get(t.id, ()))
                for t in self.turns]

    async def update_settings(self, system: str | None, params: SamplingParams,
                              contestant_params: Mapping[int, SamplingParams] | None = None) -> None:
        """Change the system prompt and parameters before the first prompt
        (for the session, and per contestant by index), recorded at once.
        ValueError once a prompt was sent: then a new linked session is the way."""
        if self.turns:
            raise ValueError("the settings are fixed once a prompt was sent: apply them in a new linked session")
        own = dict(contestant_params or {})
        for i, c in enumerate(self.contestants):
            if i in own:
                c.override = own[i]
            c.params = self.defaults.merged(c.config.params).merged(params).merged(c.override)
        fields = dict(system=system or None, params=params.model_dump(exclude_none=True), seed=params.seed,
                      contestants=[contestant_record(c) for c in self.contestants])
        if not self.saved:      # recorded with its first prompt, as it is then
            self.record = SessionRecord.model_validate({**self.record.model_dump(), **fields})
            return
        self.record = await self.store.call(lambda s: s.update_session(self.id, **fields))

    def display_name(self, index: int) -> str:
        c = self.contestants[index]
        if self.revealed:
            return c.alias if not self.blind else f"{c.label} · {c.alias}"
        return c.label

    def is_streaming(self, index: int) -> bool:
        c = self.contestants[index]
        return c.stream is not None or c.waiting is not None

    @property
    def streaming(self) -> bool:
        return any(c.stream is not None or c.waiting is not None for c in self.contestants)

    # ----- turns ----------------------------------------------------------
    async def send(
        self,
        prompt: str,
        images: Sequence[ImagePart] = (),
        on_update: Callable[[PaneUpdate], None] | None = None,
    ) -> str:
        """Send `prompt` to every contestant at once; return when all are done.
        `images` go to every contestant whose model takes them
        (`refuses_images`); the turn records them (name, size, hash, and who
        was not sent them) and the store keeps their bytes."""
        images = tuple(images)
        refused = [c.alias for c in self.contestants if images and not c.accepts_images]
        turn = TurnRecord(
            id=new_ulid(), session_id=self.id, position=len(self.turns), case_id=None, category=None,
            user_message=prompt,
            images=[{**image_record(i), **({"not_sent_to": refused} if refused else {})} for i in images],
            created=time.time(),
        )
        blobs = [(i.sha256, i.mime, image_bytes(i)) for i in images if i.sha256]
        if self.saved:
            await self.store.add_turn(turn, blobs)
        else:
            record = self.record

            def first_turn(store: Store) -> None:
                with store.batch():         # the session with its first prompt, or neither
                    store.create_session(record)
                    store.add_turn(turn, blobs)

            await self.store.call(first_turn)
            self.saved = True
        self.turns.append(turn)
        self.turn_images[turn.id] = images
        message = Message(role="user", content=prompt, images=images)
        for c in self.contestants:
            c.history.append(message if c.alias not in refused else message.model_copy(update={"images": ()}))
        async with anyio.create_task_group() as tg:
            for c in self.contestants:
                tg.start_soon(self._answer, c, turn, 1, on_update)
        return turn.id

    def refuses_images(self) -> list[int]:
        """The contestants (indexes) an image would not be sent to: their model
        takes text only (its protocol, or `images = false` in its config)."""
        return [i for i, c in enumerate(self.contestants) if not c.accepts_images]

    async def resend_edited(self, prompt: str, on_update: Callable[[PaneUpdate], None] | None = None) -> None:
        """The last turn's prompt edited and sent again: a new attempt of that
        turn for every contestant, recorded with the prompt it answered
        (`OutputRecord.prompt`); earlier attempts are kept, as a retry keeps them."""
        if not self.turns:
            raise ValueError("nothing to edit yet: send a prompt first")
        turn = self.turns[-1]
        self.cancel_all()
        self.edited[turn.id] = prompt
        attempts = []
        for c in self.contestants:
            if c.history and c.history[-1].role == "assistant":
                c.history.pop()
            last_user = c.history.pop() if c.history and c.history[-1].role == "user" else None
            images = last_user.images if last_user is not None else ()
            c.history.append(Message(role="user", content=prompt, images=images))
            attempts.append((c.last_output.attempt + 1) if c.last_output and c.last_output.turn_id == turn.id else 1)
        async with anyio.create_task_group() as tg:
            for c, attempt in zip(self.contestants, attempts, strict=True):
                tg.start_soon(self._answer, c, turn, attempt, on_update)

    async def retry(self, index: int, on_update: Callable[[PaneUpdate], None] | None = None) -> None:
        """A new attempt at the last turn for one contestant; the old one is kept."""
        if not self.turns:
            return
        c = self.contestants[index]
        self.cancel(index)
        turn = self.turns[-1]
        while c.history and c.history[-1].role != "user":   # the last answer, its tool exchanges too
            c.history.pop()
        attempt = (c.last_output.attempt + 1) if c.last_output and c.last_output.turn_id == turn.id else 1
        await self._answer(c, turn, attempt, on_update)

    async def _answer(self, c: Contestant, turn: TurnRecord, attempt: int,
                      on_update: Callable[[PaneUpdate], None] | None) -> None:
        # a variant's own system prompt replaces the session's (never shown while blind: it is the contestant's)
        request = ChatRequest(model=c.config.model, messages=tuple(c.history), system=c.config.system or self.system,
                              params=c.params)
        edited = self.edited.get(turn.id)
        base = OutputRecord(
            id=new_ulid(), session_id=self.id, turn_id=turn.id, contestant=c.alias, label=c.label,
            attempt=attempt, status="streaming", text="", reasoning=None, error_kind=None,
            error_message=None, finish_reason=None, sent_at=None, ttft_ms=None, duration_ms=None,
            chunk_ms=[], chunk_chars=[], input_tokens=None, output_tokens=None, tokens_estimated=False,
            reasoning_tokens=None, cost=None, is_demo=c.config.is_demo, created=time.time(),
            prompt=edited if edited is not None and edited != turn.user_message else None,
        )
        limiter = self.limits.limiter(c.config)
        if limiter is not None and not await self._wait_for_server(c, limiter, base, on_update):
            return
        try:
            final, _ = await record_stream(self.store, c, request, base, contestants=self.contestants,
                                           on_update=on_update, script=answer_script(self.script, c.config))
        finally:
            if limiter is not None:
                limiter.release()
        c.last_output = final
        c.history.extend(answer_messages(final))
        # blind or not: the tag describes the answer, and any session may be judged blind later (vote queue)
        prompts = prompt_texts(c.history, request.system)
        for auto in (await tag_self_identification(self.store, final, c.config, prompts),
                     await tag_judge_directed(self.store, final, prompts)):
            if auto is not None:
                self.tags.append(auto)

    async def _wait_for_server(self, c: Contestant, limiter: anyio.CapacityLimiter, base: OutputRecord,
                               on_update: Callable[[PaneUpdate], None] | None) -> bool:
        """Take a place at `c`'s server, saying so in the pane while it waits.
        False when cancelled while queued (then recorded as cancelled)."""
        try:
            limiter.acquire_nowait()
            return True
        except anyio.WouldBlock:
            pass
        result = StreamResult()
        with anyio.CancelScope() as scope:
            c.waiting = scope   # before the pane hears of it: a cancel from there must find it
            try:
                if on_update is not None:
                    on_update(PaneUpdate(c.position, Queued(message=ServerLimits.queued_message(limiter),
                                                            t=time.perf_counter()), result, base.id, base.turn_id))
                await limiter.acquire()
            finally:
                c.waiting = None
        if not scope.cancelled_caught:
            return True
        error = StreamError(kind=ErrorKind.cancelled, message="cancelled while queued", t=time.perf_counter())
        result.add(error)
        final = output_from_result(base, result, c.config)
        with anyio.CancelScope(shield=True):
            await self.store.finish_output(final)
        c.last_output = final
        if on_update is not None:
            on_update(PaneUpdate(c.position, error, result, base.id, base.turn_id))
        return False

    def cancel(self, index: int) -> None:
        c = self.contestants[index]
        if c.stream is not None:
            c.stream.cancel()
        elif c.waiting is not None:
            c.waiting.cancel()

    def cancel_all(self) -> None:
        for i in range(len(self.contestants)):
            self.cancel(i)

    # ----- judgements -----------------------------------------------------
    def valid_choices(self) -> list[str]:
        return votes_core.valid_choices([c.label for c in self.contestants])

    def answers(self) -> dict[str, OutputRecord | None]:
        """label -> each contestant's answer to the last turn (None: none yet)."""
        turn_id = self.turns[-1].id if self.turns else None
        return {c.label: c.last_output if c.last_output is not None and c.last_output.turn_id == turn_id
                else None for c in self.contestants}

    def current_vote(self, rater: str | None = None) -> VoteRecord | None:
        """This rater's vote on the last turn that counts (not replaced, not withdrawn)."""
        if not self.turns:
            return None
        rater = rater or default_rater()
        turn_id = self.turns[-1].id
        replaced = {v.supersedes for v in self.votes if v.supersedes}
        return next((v for v in reversed(self.votes) if v.turn_id == turn_id and v.rater == rater
                     and votes_core.counts_as_human(v) and v.retracted_at is None and v.id not in replaced), None)

    async def vote(self, choice: str, *, ranking: Sequence[str] | None = None, note: str | None = None,
                   rater: str | None = None, confirm: bool = False) -> VoteRecord:
        """Record a vote on the last turn (replacing an earlier one, history kept) and reveal.

        ValueError (`core.stats.votes.VoteError`) for a malformed vote, a ranking
        that does not place every answer included; `VoteNeedsConfirmation`
        when the pick failed, was cancelled or is missing, unless `confirm`."""
        if not self.turns:
            raise ValueError("nothing to vote on yet")
        turn = self.turns[-1]
        rater = rater or default_rater()
        previous = self.current_vote(rater)
        ordered = sorted(self.contestants, key=lambda c: c.position)
        (vote,) = votes_core.make_votes(
            self.id, [turn.id], choice, mapping={c.label: c.alias for c in self.contestants},
            positions=[c.label for c in ordered], ranking=ranking, rater=rater, note=note,
            revealed=self.blind, answers=self.answers(), confirm=confirm,
            supersedes={turn.id: previous.id} if previous else None)
        await self.store.add_vote(vote)
        self.votes.append(vote)
        if self.blind and self.record.revealed_at is None:
            # a chat keeps its labels from turn to turn: one vote reveals them all
            await self.store.reveal_session(self.id, vote.created)
            self.record = self.record.model_copy(update={"revealed_at": vote.created})
        return vote

    async def retract_vote(self, rater: str | None = None) -> VoteRecord | None:
        """Withdraw this rater's vote on the last turn (a vote cast by mistake):
        it stays in the record with `retracted_at` and no longer counts, so the
        turn can be judged again. Names already revealed stay revealed. None
        when there is no vote to withdraw."""
        vote = self.current_vote(rater)
        if vote is None:
            return None
        now = time.time()
        await self.store.retract_vote(vote.id, now)
        withdrawn = vote.model_copy(update={"retracted_at": now})
        self.votes[self.votes.index(vote)] = withdrawn
        return withdrawn

    async def reveal(self, rater: str | None = None) -> RevealRecord | None:
        """Show the models without a vote (the rater asks): recorded as a
        reveal of the last turn; a chat keeps its labels from turn to turn,
        so the whole session is revealed, as a vote would. None when nothing
        is hidden (not blind, revealed already, or no turn yet)."""
        if not self.blind or self.record.revealed_at is not None or not self.turns:
            return None
        rec = RevealRecord(session_id=self.id, turn_id=self.turns[-1].id, rater=rater or default_rater(),
                           created=time.time())
        await self.store.add_reveal(rec)
        await self.store.reveal_session(self.id, rec.created)
        self.record = self.record.model_copy(update={"revealed_at": rec.created})
        return rec

    async def tag(self, index: int, tag: str, note: str | None = None, rater: str | None = None) -> TagRecord:
        """Attach a failure-mode tag to this contestant's last answer."""
        out = self.contestants[index].last_output
        if out is None:
            raise ValueError("no answer to tag yet")
        rec = TagRecord(id=new_ulid(), output_id=out.id, tag=tag, rater=rater or default_rater(),
                        note=note, auto=False, created=time.time())
        await self.store.add_tag(rec)
        self.tags.append(rec)
        return rec

    def tags_on(self, index: int) -> list[TagRecord]:
        """The tags this contestant's last answer carries (what the tag picker shows as set)."""
        out = self.contestants[index].last_output
        return [t for t in self.tags if out is not None and t.output_id == out.id]

    async def untag(self, index: int, tag: str) -> int:
        """Remove `tag` from this contestant's last answer (an automatic one too:
        the rater overrules it); the rows are kept, marked removed. How many."""
        gone = [t for t in self.tags_on(index) if t.tag == tag]
        for t in gone:
            await self.store.remove_tag(t.id)
            self.tags.remove(t)
        return len(gone)

    async def aclose(self) -> None:
        self.cancel_all()
        for c in self.contestants:
            if c.provider is not None:
                await c.provider.aclose()


def _not_sent_to(turn: TurnRecord) -> set[str]:
    """The contestants (aliases) a turn's images were not sent to."""
    out: set[str] = set()
    for img in turn.images:
        refused = img.get("not_sent_to")
        if isinstance(refused, list):
            out.update(a for a in refused if isinstance(a, str))
    return out


def _turn_images(turn: TurnRecord, stored: Mapping[str, tuple[str, bytes]]) -> tuple[ImagePart, ...]:
    """The images of a saved turn: the bytes the store kept (by hash), else
    the file re-read from disk when it is still there."""
    import base64

    images = []
    for img in turn.images:
        sha, path = img.get("sha256"), img.get("path")
        if sha and sha in stored:
            mime, data = stored[sha]
        elif path and os.path.exists(path):
            with open(path, "rb") as fh:
                mime, data = img.get("mime") or "image/png", fh.read()
        else:
            continue
        images.append(ImagePart(mime=mime, data=base64.b64encode(data).decode(), path=path, sha256=sha))
    return tuple(images)


def _config_from_record(c: ContestantRecord, config: Config) -> ModelConfig:
    """A model as it was frozen in a session, reachable again with today's key
    variable, auth and headers (none of them is recorded: they may hold or name secrets)."""
    same = next((m for m in config.models.values() if m.provider == c.provider and m.model == c.model), None)
    # context "recorded": a provider plugin uninstalled since is still a model (it fails when asked)
    return ModelConfig.model_validate(dict(
        alias=c.alias, provider=c.provider, model=c.model, base_url=c.base_url,
        api_key_env=same.api_key_env if same else None,
        auth=same.auth if same else None, headers=dict(same.headers) if same else {},
        query=dict(same.query) if same else {},
        params=SamplingParams(**c.params), price=c.price,
        variant_of=c.variant_of, system=c.system, template=c.template,   # a variant keeps its recorded prompt
        tools=c.tools,                                                   # and its recorded tools
    ), context={"recorded": True})
