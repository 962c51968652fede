"""`lineup run`: every case of a sample set (with its scripted follow-ups)
against every model, repeated, with fixed parameters; resumable.

A run is one session (kind "run"). Each user message of each case and repeat
is a turn shared by all contestants; each contestant answers it in its own
thread. Running the same set, models, parameters and repeat count again finds
that session (its `run_key`) and does only what is missing: answers that never
completed get a new attempt, completed ones are never redone.

Why this file is past 600 lines: the run's loop (claims, resume, repeats,
cache, checks, gradings) and the set rebuilt from a recorded run for
`replay --rerun` share one notion of a case's turns and are read together."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from core.answering.attachments import image_record
from core.answering.cache import cached_answer, request_key
from core.answering.dimensions import META_KEY as DIMENSIONS_KEY, dimensions_meta, dimensions_of, valid_score
from core.ground.errors import store_error_in
from core.answering.identity import prompt_texts, tag_self_identification
from core.answering.judge_directed import tag_judge_directed
from core.stats.votes import labels_for
from core.answering.recording import record_stream
from core.answering.sessions import Contestant, ServerLimits, contestant_record
from core.answering.tools import answer_messages, answer_script
from providers.events import TOOL_NAME_PATTERN, ChatRequest, Message, SamplingParams
from providers.model_config import ModelConfig
from store import AsyncStore
from store.owners import process_token
from store.ids import new_ulid
from store.records import CheckResultRecord, OutputRecord, ScoreRecord, SessionRecord, TurnRecord
from store.runs import find_cached

if TYPE_CHECKING:
    from core.answering.rubric import Graders
    from core.answering.sampleset import SampleSet


#: The contestant that is production's own answer (`lineup run --with-logged`, `-m logged`).
LOGGED_ALIAS = "logged"
_LOGGED_MODEL = "(the answer logged in production)"


def logged_contestant() -> ModelConfig:
    """The logged answer as a contestant: nothing is ever sent to it; its
    answers are the cases' `logged` answers, recorded with origin "logged"."""
    return ModelConfig(alias=LOGGED_ALIAS, provider="openai", model=_LOGGED_MODEL, base_url="http://logged.invalid/v1")


def is_logged(config: ModelConfig) -> bool:
    return config.alias == LOGGED_ALIAS and config.model == _LOGGED_MODEL


@dataclass
class ModelTally:
    """Per-model progress and the figures of the end-of-run summary."""

    planned: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    cached: int = 0          # answers reused from the cache (no request made)
    elsewhere: int = 0       # being run by another process on the same database
    errors: Counter = field(default_factory=Counter)
    ttft_ms: list[float] = field(default_factory=list)
    tokens_per_s: list[float] = field(default_factory=list)
    cost: float = 0.0
    cost_known: bool = False
    logged_ms: list[float] = field(default_factory=list)   # the log's latencies: never with ttft_ms
    unexecuted: int = 0      # checks that run code, left unrecorded by a run told not to (`run_code`)


@dataclass
class RunProgress:
    """What a progress display needs; updated in place as answers finish."""

    session_id: str
    resumed: bool
    total: int
    tallies: dict[str, ModelTally]
    started: float = field(default_factory=time.monotonic)
    #: why an earlier run of the same command was not resumed: (its id, differences)
    drift: tuple[str, list[str]] | None = None
    others: set[str] = field(default_factory=set)   # processes that ran part of this run meanwhile
    stopped: str | None = None   # why the run stopped early, resumable (a batch API that failed)

    @property
    def finished(self) -> int:
        return sum(t.done + t.failed for t in self.tallies.values())

    @property
    def already_done(self) -> int:
        return sum(t.skipped for t in self.tallies.values())

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.tallies.values())

    @property
    def elsewhere(self) -> int:
        return sum(t.elsewhere for t in self.tallies.values())

    def eta_s(self) -> float | None:
        fresh = self.finished - self.already_done
        if fresh <= 0:
            return None
        rate = fresh / max(time.monotonic() - self.started, 1e-6)
        return max(self.total - self.finished - self.elsewhere, 0) / rate


def run_key(set_hash: str, models: Sequence[ModelConfig], params: SamplingParams, system: str | None,
            repeat: int) -> str:
    """Identifies "the same run" so that running it again resumes it."""
    blob = json.dumps({
        "set": set_hash, "models": sorted(m.alias for m in models), "repeat": repeat,
        "params": params.model_dump(exclude_none=True), "system": system,
    }, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class Runner:
    """Runs one sample set; `run()` is cancellable at any point (Ctrl-C)."""

    def __init__(self, store: AsyncStore, sample_set, models: Sequence[ModelConfig], *,
                 repeat: int = 1, concurrency: int = 8, params: SamplingParams = SamplingParams(),
                 defaults: SamplingParams = SamplingParams(), system: str | None = None,
                 new_session: bool = False, rerun_of: str | None = None, cache: bool = False,
                 canary: bool = False, graders: "Graders | None" = None, run_code: bool = True,
                 on_progress: Callable[[RunProgress], None] | None = None) -> None:
        if repeat < 1:
            raise ValueError("--repeat must be at least 1")
        if concurrency < 1:
            raise ValueError("--concurrency must be at least 1")
        self.store = store
        self.sample_set = sample_set
        self.models = list(models)
        self.repeat = repeat
        self.concurrency = concurrency
        self.params = params
        self.defaults = defaults
        self.system = system
        self.new_session = new_session
        self.rerun_of = rerun_of
        #: answer identical requests from the database (`core.answering.cache`) instead of the provider
        self.cache = cache
        #: a drift-watch run (`lineup drift`): always a new session, marked `canary` in its meta
        self.canary = canary
        #: the models that grade the cases' rubric checks (`core.answering.rubric`); the caller closes them
        self.graders = graders
        #: False: the checks that run code (`EXECUTED_CHECK_TYPES`: the answers' code tests, the set's
        #: Python checks) are not run and not recorded, so a later run of the same command runs them
        self.run_code = run_code
        self.on_progress = on_progress
        self.owner = process_token()
        self.progress: RunProgress | None = None   # set by `run` before any unit starts
        self._contestants: list[Contestant] = []

    # ----- session --------------------------------------------------------
    async def _open_session(self) -> tuple[SessionRecord, bool, tuple[str, list[str]] | None]:
        key = run_key(self.sample_set.sha256, self.models, self.params, self.system, self.repeat)
        if self.canary:   # never resumed by (nor resuming) a plain run of the same set
            key = "canary:" + key
        label_seed = random.SystemRandom().getrandbits(32)
        order = list(self.models)
        random.Random(label_seed).shuffle(order)
        labels = labels_for(len(order))
        contestants = [
            Contestant(config=m, label=labels[i], position=i,
                       params=self.defaults.merged(m.params).merged(self.params))
            for i, m in enumerate(order)
        ]
        record = SessionRecord(
            id=new_ulid(), created=time.time(), kind="run", title=f"run {self.sample_set.name}",
            contestants=[contestant_record(c) for c in contestants], system=self.system,
            # blind when there is something to tell apart: one model's answers hide nobody
            params=self.params.model_dump(exclude_none=True), seed=self.params.seed, blind=len(contestants) > 1,
            revealed_at=None, sample_set_name=self.sample_set.name, sample_set_hash=self.sample_set.sha256,
            rerun_of=self.rerun_of, meta={"run_key": key, "repeat": self.repeat, "label_seed": label_seed,
                                          # shown after the vote in the queue; the set file may move later
                                          "references": {c.id: c.reference for c in self.sample_set.cases
                                                         if c.reference},
                                          # gold pairs for the vote queue (`--gold-rate`), never contestants
                                          "gold": {c.id: c.gold.model_dump() for c in self.sample_set.cases
                                                   if c.gold is not None},
                                          # what turns do not hold, for a re-run (`sample_set_from_run`)
                                          "cases": _case_extras(self.sample_set.cases),
                                          # scored 1-5 in the vote queue and by rubric graders
                                          **({DIMENSIONS_KEY: dimensions_meta(self.sample_set.header.dimensions)}
                                             if self.sample_set.header.dimensions else {}),
                                          **({"canary": True} if self.canary else {})},
        )
        if self.new_session or self.canary:
            await self.store.create_session(record)
            return record, False, None
        wanted = {c.alias: contestant_record(c) for c in contestants}
        dims = [d.name for d in self.sample_set.header.dimensions]

        def differences(existing: SessionRecord) -> list[str]:    # `run --dimension` is not in the key
            found = contestant_differences(existing, wanted, self.system)
            had = [d.name for d in dimensions_of(existing.meta)]
            return found + ([f"dimensions {had} -> {dims}"] if had != dims else [])

        return await self.store.open_run_session(record, key, differences)

    # ----- the run --------------------------------------------------------
    async def run(self) -> RunProgress:
        session, work = await self._plan()
        limit = anyio.CapacityLimiter(self.concurrency)
        servers = ServerLimits(c.config for c in self._contestants)
        try:
            async with anyio.create_task_group() as tg:
                for case, r, c in work:
                    tg.start_soon(self._unit, case, r, c, limit, servers.limiter(c.config) or nullcontext())
        finally:
            with anyio.CancelScope(shield=True):
                for c in self._contestants:
                    if c.provider is not None:
                        await c.provider.aclose()
                await self._release(session.id)
        assert self.progress is not None
        return self.progress

    async def _release(self, session_id: str) -> None:
        try:   # what this process took on and did not finish is free again at once
            await self.store.release_claims(session_id, self.owner)
        except Exception:
            pass   # a dead owner's claims are taken over anyway

    async def _plan(self) -> tuple[SessionRecord, list[tuple]]:
        """Open (or resume) the session and list the units still to do:
        (case, repeat, contestant) whose answers or checks are missing."""
        session, resumed, drift = await self._open_session()
        by_alias = {m.alias: m for m in self.models}
        self._contestants = [
            Contestant(config=by_alias[c.alias], label=c.label, position=c.position,
                       params=SamplingParams(**c.params))
            for c in session.contestants if c.alias in by_alias
        ]
        turns, outputs, checks = await self._existing(session.id) if resumed else ({}, {}, Counter())
        work = []  # (case, repeat, contestant)
        tallies = {c.alias: ModelTally() for c in self._contestants}
        for case in self.sample_set.cases:
            n_turns = len(case_turn_texts(case))
            for r in range(self.repeat):
                for c in self._contestants:
                    if is_logged(c.config) and (case.logged is None or case.follow_ups):
                        continue     # production answered the opening prompt of a sampled case only
                    tallies[c.alias].planned += 1
                    answers = [outputs.get((t.id, c.alias)) if (t := turns.get((case.id, r, k))) else None
                               for k in range(n_turns)]
                    complete = [a for a in answers if a is not None and a.status == "complete"]
                    done = len(complete) == n_turns
                    if done and _checks_missing(case, complete, checks, self._not_run()):
                        done = False   # the answers are kept; only the checks run again
                    elif done and not self.run_code:
                        tallies[c.alias].unexecuted += _checks_missing(case, complete, checks)
                    if done:
                        tallies[c.alias].done += 1
                        tallies[c.alias].skipped += 1
                    else:
                        work.append((case, r, c))
        self.progress = RunProgress(session.id, resumed, total=sum(t.planned for t in tallies.values()),
                                    tallies=tallies, drift=drift)
        self._turns = turns
        self._turn_lock = anyio.Lock()
        self._emit()
        return session, work

    def _not_run(self) -> frozenset[str]:
        """The check types this run leaves alone (`run_code`)."""
        from core.answering.checks import EXECUTED_CHECK_TYPES

        return frozenset() if self.run_code else EXECUTED_CHECK_TYPES

    def _defers(self, case) -> bool:
        """Whether this run leaves some of the case's checks to a later one
        (`run_code`): its units are then released not done, so that the later
        run takes them up (for the checks only: the answers are kept)."""
        not_run = self._not_run()
        return bool(not_run) and any(ch.type in not_run for ch in case.all_checks)

    def _running(self) -> RunProgress:
        """The progress of the run in flight."""
        if self.progress is None:
            raise RuntimeError("the run has not started")
        return self.progress

    async def _existing(self, session_id: str):
        loaded = await self.store.load_session(session_id)
        turns = {(t.case_id, t.repeat_index, t.follow_up_index): t for t in loaded.turns}
        return turns, _latest_outputs(loaded.outputs), _check_keys(loaded.checks)

    async def _turn(self, case, repeat: int, k: int, text: str, images) -> TurnRecord:
        """The shared turn for (case, repeat, k), created once (across processes too)."""
        async with self._turn_lock:
            turn = self._turns.get((case.id, repeat, k))
            if turn is None:
                turn = await self.store.ensure_turn(TurnRecord(
                    id=new_ulid(), session_id=self._running().session_id, position=0,
                    case_id=case.id, category=case.category, user_message=text,
                    images=[image_record(i) for i in images],
                    follow_up_index=k, repeat_index=repeat, created=time.time(),
                ))
                self._turns[(case.id, repeat, k)] = turn
            return turn

    async def _unit(self, case, repeat: int, c: Contestant, limit: anyio.CapacityLimiter,
                    server_limit: AbstractAsyncContextManager) -> None:
        """One unit of work, claimed so that no other process runs it at the
        same time, then read fresh (another process may have done part of it)."""
        progress = self._running()
        tally = progress.tallies[c.alias]
        async with server_limit, limit:   # the server first: a slot is never held while queued
            sid = progress.session_id
            unit = json.dumps([case.id, repeat, c.alias])
            holder = await self.store.claim_unit(sid, unit, self.owner)
            if holder == "done":
                tally.done += 1
                tally.skipped += 1
                self._emit()
                return
            if holder != "mine":
                tally.elsewhere += 1
                progress.others.add(holder)
                self._emit()
                return
            ok = False
            try:
                ok = await self._conversation(case, repeat, c)
            except Exception as exc:
                if store_error_in(exc) is not None:
                    raise
                # a fault in our own handling of one answer fails that unit, not the run
                tally.errors[f"internal ({type(exc).__name__})"] += 1
            with anyio.CancelScope(shield=True):
                await self.store.finish_claim(sid, unit, self.owner, ok and not self._defers(case))
        if ok:
            tally.done += 1
        else:
            tally.failed += 1
        self._emit()

    async def _conversation(self, case, repeat: int, c: Contestant) -> bool:
        """One contestant through one case: the opening request, then each
        scripted follow-up after its previous answer, in its own thread; then
        the case's checks that are not recorded yet. True when all is saved."""
        progress = self._running()
        tally = progress.tallies[c.alias]
        params = c.params.merged(case.params)
        rows = await self.store.run_unit(progress.session_id, case.id, repeat, c.alias)
        for t in rows[0]:
            self._turns.setdefault((case.id, repeat, t.follow_up_index), t)
        recorded = _latest_outputs(rows[1])
        answers: list[OutputRecord] = []
        history: list[Message] = []
        for k, text in enumerate(case_turn_texts(case)):
            if k == 0:
                images = self.sample_set.images_for(case)
                history.extend(case.opening_messages(images, template=c.config.template))
            else:
                images = ()
                history.append(Message(role="user", content=text))
            turn = await self._turn(case, repeat, k, text, images)
            prev = recorded.get((turn.id, c.alias))
            if prev is not None and prev.status == "complete":
                history.extend(answer_messages(prev))
                answers.append(prev)
                continue
            request = ChatRequest(model=c.config.model, messages=tuple(history),
                                  system=sent_system(c.config, case, self.system), params=params)
            tooling = case.model_dump(mode="json", include=_TOOLING) if case.tools or case.response_format else None
            key = request_key(c.config, request, repeat, tooling=tooling)
            base = _new_output(turn, c, attempt=(prev.attempt + 1) if prev else 1, case=case).model_copy(
                update={"request_key": key})
            hit = await self.store.call(lambda s: find_cached(s, key)) if self.cache else None  # noqa: B023  (awaited here)
            if is_logged(c.config):
                final = logged_answer(case.logged, base)
                await self.store.call(lambda s: s.finish_output(final))  # noqa: B023  (awaited here)
                if case.logged.latency_ms is not None:
                    tally.logged_ms.append(case.logged.latency_ms)
                hit = final        # no request: nothing measured, nothing timed
            elif hit is not None:
                final = cached_answer(hit, base)
                await self.store.call(lambda s: s.finish_output(final))  # noqa: B023  (awaited here)
                tally.cached += 1
            else:
                final, result = await record_stream(self.store, c, request, base, contestants=self._contestants,
                                                    script=answer_script(case.tool_script(), c.config),
                                                    structured=case.response_format)
            prompts = prompt_texts(history, request.system)
            await tag_self_identification(self.store, final, c.config, prompts)
            await tag_judge_directed(self.store, final, prompts)
            if final.status != "complete":
                tally.errors[final.error_kind or final.status] += 1
                return False
            answers.append(final)
            history.extend(answer_messages(final))
            if hit is not None:
                continue   # no request: nothing to time, nothing spent
            if final.ttft_ms is not None:
                tally.ttft_ms.append(final.ttft_ms)
            tps = result.tokens_per_s()
            if tps is not None:
                tally.tokens_per_s.append(tps)
            if final.cost is not None:
                tally.cost += final.cost
                tally.cost_known = True
        return await self._checks(case, answers, _check_keys(rows[2]), tally)

    async def _checks(self, case, answers: list[OutputRecord], recorded: Counter,
                      tally: ModelTally | None = None) -> bool:
        """Each check of the case on the answer its `turn` names (default: the
        last), except those already recorded (a run that stopped in between):
        one at a time, each saved before the next runs, so a stop (Ctrl-C,
        SIGTERM) between two checks keeps what was checked and the next run
        does not run it again (a check's patterns are time-limited, so a stop
        waits for at most one check; an executed check's process is awaited,
        and a stop kills it; a grading is time-limited and cancelled by the
        stop). A rubric grading that gave no verdict is not recorded: False,
        its reason counted in `tally`, and the next run asks for it again."""
        from core.answering.checks import GRADED_CHECK_TYPES, run_case_check_async

        checks = case.all_checks
        if not checks:
            return True
        facts = case.answer_facts([a.trace for a in answers], self.sample_set.set_dir)
        texts = [a.text for a in answers]
        not_run = self._not_run()
        complete = True
        for check in checks:
            target = answers[-1 if check.turn is None else check.turn]
            key = (target.id, check.label)
            if recorded[key] > 0:
                recorded[key] -= 1
                continue
            await anyio.lowlevel.checkpoint()   # a stop asked for during the last check ends here
            if check.type in not_run:
                if tally is not None:
                    tally.unexecuted += 1
                continue
            if check.type in GRADED_CHECK_TYPES:
                outcome = await self._grade(case, check, answers)
                if isinstance(outcome, str):
                    complete = False
                    if tally is not None:
                        tally.errors[outcome] += 1
                    continue
            else:
                outcome = await run_case_check_async(check, texts, facts)
            with anyio.CancelScope(shield=True):   # what was checked is kept
                await self.store.add_check_result(CheckResultRecord(
                    id=new_ulid(), output_id=target.id, check=outcome.name,
                    spec={**outcome.spec, "score": outcome.score, **outcome.extra}, passed=outcome.passed,
                    detail=outcome.detail,
                ))
                dimension = getattr(check, "dimension", None)
                if dimension is not None and valid_score(outcome.extra.get("grade")):
                    # the grader's 1-5 grade is its score on the dimension, as a judge
                    await self.store.add_score(ScoreRecord(
                        output_id=target.id, dimension=dimension, value=outcome.extra["grade"],
                        rater=str(outcome.extra.get("graded_by") or "judge"), rater_kind="judge"))
        return complete

    async def _grade(self, case, check, answers: list[OutputRecord]):
        """A rubric check's outcome on the answer its `turn` names, graded
        blind (`core.answering.rubric`), or why no grade came (a short reason)."""
        from core.answering.rubric import GraderError

        if self.graders is None:
            return "grader: none named (--grader, or the check's judge)"
        upto = (len(answers) - 1 if check.turn is None else check.turn % len(answers)) + 1
        turns = case_turn_texts(case)[:upto]
        prompts = [*turns, *([s] if (s := case.system or self.system) else [])]
        try:
            return await self.graders.grade(check, turns, answers[:upto], case.reference, prompts)
        except GraderError as exc:
            return f"grader: {exc}"

    def _emit(self) -> None:
        if self.on_progress is not None and self.progress is not None:
            self.on_progress(self.progress)


#: What defines a contestant beyond its alias: a change to any of them is a new contestant, never resumed as
#: the old one (a variant's system prompt, template and tools included).
CONTESTANT_FIELDS = ("provider", "model", "base_url", "params", "variant_of", "system", "template", "tools")


def contestant_differences(existing: SessionRecord, wanted: dict, system: str | None) -> list[str]:
    """What differs between a recorded run and the contestants about to run:
    everything that defines a contestant (`CONTESTANT_FIELDS`: provider, model,
    server, parameters, a variant's prompt) and the run's system prompt. Empty
    when the recorded run can be resumed."""
    found = []
    if existing.system != system:
        found.append(f"system prompt {existing.system!r} -> {system!r}")
    had = {c.alias: c for c in existing.contestants}
    for alias in sorted(set(had) | set(wanted)):
        old, new = had.get(alias), wanted.get(alias)
        if old is None or new is None:
            found.append(f"model {alias!r} {'added' if old is None else 'removed'}")
            continue
        found += field_changes(alias, old, new)
    return found


def field_changes(alias: str, old: object, new: object, names: tuple[str, ...] = CONTESTANT_FIELDS) -> list[str]:
    """`alias: FIELD before -> after` for each of `names` that differs between
    two contestants (records, or a record and a model's config)."""
    found = []
    for name in names:
        before, after = getattr(old, name), getattr(new, name)
        if before != after and name == "tools":   # a tools file is too long to show: its tools' names
            was, now = _shown_tools(before), _shown_tools(after)
            found.append(f"{alias}: tools {was} -> {now}" if was != now else
                         f"{alias}: tools {now}: their schemas or scripted results changed")
        elif before != after:
            found.append(f"{alias}: {name} {before!r} -> {after!r}")
    return found


def _shown_tools(tools: dict | None) -> str:
    """A variant's tools in a drift line: the tool names (and "changed" when
    only the schemas or scripted results differ, which the names cannot say)."""
    if not tools:
        return "none"
    names = [t.get("name") for t in tools.get("tools", ()) if isinstance(t, dict)]
    # a record may come from a merged database: only a valid tool name is shown as it is
    return "[" + ", ".join(n if isinstance(n, str) and re.fullmatch(TOOL_NAME_PATTERN, n) else "?"
                           for n in names) + "]"


def _latest_outputs(outputs) -> dict[tuple[str, str], OutputRecord]:
    """Per (turn, contestant): a complete answer wins over any attempt; else the latest attempt."""
    latest: dict[tuple[str, str], OutputRecord] = {}
    for out in outputs:
        prev = latest.get((out.turn_id, out.contestant))
        if prev is None or (prev.status != "complete" and (out.status == "complete" or out.attempt > prev.attempt)):
            latest[(out.turn_id, out.contestant)] = out
    return latest


def _check_keys(checks) -> Counter:
    return Counter((c.output_id, c.check) for c in checks)


def _checks_missing(case, answers: list[OutputRecord], recorded: Counter, skip: frozenset[str] = frozenset()) -> int:
    """How many checks of the case (less those of a type in `skip`) have no
    result on the answer they target."""
    want = Counter((answers[-1 if ch.turn is None else ch.turn].id, ch.label) for ch in case.all_checks
                   if ch.type not in skip and -len(answers) <= (-1 if ch.turn is None else ch.turn) < len(answers))
    return sum(max(0, n - recorded[key]) for key, n in want.items())


def _case_extras(cases) -> dict[str, dict]:
    """Per case, what its turns do not record: its own system prompt, its
    sampling overrides, the scripted messages before its last user message."""
    extras = {}
    for c in cases:
        extra = {}
        if c.system is not None:
            extra["system"] = c.system
        if c.params is not None:
            extra["params"] = c.params.model_dump(exclude_none=True)
        if c.messages is not None:
            extra["messages"] = [m.model_dump() for m in c.messages]
        if c.vars is not None:   # what a variant's template reads (the turns hold the texts filled in)
            extra["vars"] = dict(c.vars)
        for name in ("tools", "tool_results", "tool_default", "max_steps", "response_format"):
            if name in c.model_fields_set:
                extra[name] = c.model_dump(mode="json", by_alias=True)[name]
        if extra:
            extras[c.id] = extra
    return extras


def sample_set_from_run(loaded) -> tuple["SampleSet", list[str]]:
    """The cases of a recorded `run` session, rebuilt from its turns so that it
    can be re-run case by case: ids, categories, prompts, scripted follow-ups,
    checks (from the recorded results' specs) and references. Also returns
    what the record does not hold and is therefore not re-sent."""
    from core.answering.sampleset import Case, SampleSet, SetHeader

    session = loaded.session
    by_case: dict[str, list[TurnRecord]] = {}
    first_repeat: dict[str, int] = {}
    for t in sorted(loaded.turns, key=lambda t: t.position):
        if t.case_id is None:
            continue
        r = first_repeat.setdefault(t.case_id, t.repeat_index or 0)
        if (t.repeat_index or 0) == r:
            by_case.setdefault(t.case_id, []).append(t)
    outputs_of: dict[str, list[OutputRecord]] = {}
    for out in loaded.outputs:
        outputs_of.setdefault(out.turn_id, []).append(out)
    checks_of: dict[str, list] = {}
    for check in loaded.checks:
        checks_of.setdefault(check.output_id, []).append(check)
    references = session.meta.get("references") or {}
    golds = session.meta.get("gold") or {}
    cases, lost = [], []
    for case_id, turns in by_case.items():
        turns.sort(key=lambda t: t.follow_up_index or 0)
        specs: list[dict] = []
        # the checks of one contestant's answers (each check is stored on the answer it targets)
        contestant = next((o.contestant for t in turns for o in outputs_of.get(t.id, ())), None)
        extra = (session.meta.get("cases") or {}).get(case_id, {})
        for k, t in enumerate(turns):
            mine = [o for o in outputs_of.get(t.id, ()) if o.contestant == contestant]
            best = next((o for o in mine if o.status == "complete"), mine[-1] if mine else None)
            for check in checks_of.get(best.id, ()) if best is not None else ():
                if check.spec.get("type") == "structured_output" and "response_format" in extra:
                    continue   # implied by the response_format, added again by the case
                if check.spec.get("type") == "python" and ":" in str(check.spec.get("function")):
                    lost.append(f"case {case_id}: the custom check {check.check!r} (its module is found beside "
                                "the set file, which the record does not keep; re-run the set file instead)")
                    continue
                spec = {key: v for key, v in check.spec.items() if key not in _RESULT_KEYS}
                if spec.get("type") == "rubric" and not spec.get("judge") and check.spec.get("graded_by"):
                    spec["judge"] = check.spec["graded_by"]   # graded again by the grader that graded it
                if k != len(turns) - 1:
                    spec.setdefault("turn", k)
                specs.append(spec)
        if any(t.images for t in turns):
            lost.append(f"case {case_id}: its images (the record keeps their names, not the files)")
        opening = {"messages": extra["messages"]} if "messages" in extra else {"prompt": turns[0].user_message}
        tooling = {k: extra[k] for k in ("tools", "tool_results", "tool_default", "max_steps", "response_format")
                   if k in extra}
        case = Case(id=case_id, category=turns[0].category or "uncategorised", **opening,
                    follow_ups=tuple(t.user_message for t in turns[1:]), system=extra.get("system"),
                    params=extra.get("params"), checks=tuple(specs), reference=references.get(case_id),
                    gold=golds.get(case_id), **tooling)
        if isinstance(extra.get("vars"), dict):   # after validation: the recorded texts are filled in already
            case = case.model_copy(update={"vars": {str(k): str(v) for k, v in extra["vars"].items()}})
        cases.append(case)
    digest = hashlib.sha256(json.dumps([session.id, [c.model_dump(mode="json") for c in cases]],
                                       sort_keys=True).encode()).hexdigest()
    name = session.sample_set_name or session.id
    header = SetHeader(dimensions=dimensions_of(session.meta))
    return SampleSet(name=name, path=f"session {session.id}", sha256=digest, cases=tuple(cases),
                     from_file=False, header=header), lost


#: The fields of a case that shape its answer beyond the request: the tools,
#: their scripted results and the structured output (in its cache key).
_TOOLING = {"tools", "tool_results", "tool_default", "max_steps", "response_format"}

#: What a recorded check result adds to its check's spec (not part of the spec itself).
_RESULT_KEYS = frozenset({"score", "failures", "structured", "status", "network_isolated",
                          # a rubric's grade (`core.answering.rubric`)
                          "grade", "graded_by", "with_reference", "grading_prompt", "judge_directed"})


def sent_system(cfg: ModelConfig, case, system: str | None) -> str | None:
    """The system prompt a contestant sends for a case: a variant's own, else
    the case's, else the run's (`--system`)."""
    return cfg.system or case.system or system


def _new_output(turn: TurnRecord, c: Contestant, attempt: int, case=None) -> OutputRecord:
    """A new attempt's record; with the `case` of a variant whose template
    rewrites the opening message, the text it sent is kept in `prompt` (the
    turn holds the case's own)."""
    prompt = None
    if case is not None and c.config.template is not None and turn.follow_up_index == 0:
        prompt = case.prompt_for(c.config.template)
    return OutputRecord(prompt=prompt,
        id=new_ulid(), session_id=turn.session_id, turn_id=turn.id, contestant=c.alias, label=c.label,
        attempt=attempt, status="streaming", text="", reasoning=None, error_kind=None, error_message=None,
        finish_reason=None, sent_at=None, ttft_ms=None, duration_ms=None, chunk_ms=[], chunk_chars=[],
        input_tokens=None, output_tokens=None, tokens_estimated=False, reasoning_tokens=None, cost=None,
        is_demo=c.config.is_demo, created=time.time(),
    )


def logged_answer(logged, base: OutputRecord) -> OutputRecord:
    """A case's logged answer as the logged contestant's output: origin
    "logged", its tokens and cost from the log, and no timing (the log's
    latency is kept apart, never among measured times to first token)."""
    return base.model_copy(update={
        "status": "complete", "text": logged.text, "finish_reason": "stop", "streamed": False,
        "origin": "logged", "served_model": logged.model, "input_tokens": logged.input_tokens,
        "output_tokens": logged.output_tokens, "cost": logged.cost, "is_demo": False})


def case_turn_texts(case) -> list[str]:
    """The user message recorded for each request of a case: the opening
    prompt (the last user message of a `messages` case), then each follow-up."""
    opening = case.prompt if case.prompt is not None else case.opening_messages()[-1].content
    return [opening, *case.follow_ups]


def summary_rows(progress: RunProgress) -> list[dict]:
    """One row per model for the end-of-run table."""
    rows = []
    for alias, t in progress.tallies.items():
        rows.append({
            "model": alias,
            "answers": t.done,
            "failed": t.failed,
            "cached": t.cached,
            "errors": dict(t.errors),
            "ttft_p50_ms": statistics.median(t.ttft_ms) if t.ttft_ms else None,
            "tokens_per_s_p50": statistics.median(t.tokens_per_s) if t.tokens_per_s else None,
            "cost": t.cost if t.cost_known else None,
            "logged_latency_p50_ms": statistics.median(t.logged_ms) if t.logged_ms else None,
        })
    return rows


def format_eta(seconds: float | None) -> str:
    if seconds is None or math.isinf(seconds):
        return "--:--"
    seconds = int(seconds)
    return f"{seconds // 60:02d}:{seconds % 60:02d}" if seconds < 3600 else f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
