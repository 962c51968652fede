"""`lineup run`: every case of a sample set (with its scripted follow-ups)
against every model, repeated, with fixed parameters; resumable.

A run is one session (kind "run"). Each user message of each case and repeat
is a turn shared by all contestants; each contestant answers it in its own
thread. Running the same set, models, parameters and repeat count again finds
that session (its `run_key`) and does only what is missing: answers that never
completed get a new attempt, completed ones are never redone.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio

from lineup.config import ModelConfig
from lineup.events import ChatRequest, Message, SamplingParams
from lineup.identity import prompt_texts, tag_self_identification
from lineup.ids import new_ulid
from lineup.sessions import LABELS, Contestant, contestant_record, record_stream
from lineup.store import AsyncStore
from lineup.store.records import CheckResultRecord, OutputRecord, SessionRecord, TurnRecord


@dataclass
class ModelTally:
    """Per-model progress and the figures of the end-of-run summary."""

    planned: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    errors: Counter = field(default_factory=Counter)
    ttft_ms: list[float] = field(default_factory=list)
    tokens_per_s: list[float] = field(default_factory=list)
    cost: float = 0.0
    cost_known: bool = False


@dataclass
class RunProgress:
    """What a progress display needs; updated in place as answers finish."""

    session_id: str
    resumed: bool
    total: int
    tallies: dict[str, ModelTally]
    started: float = field(default_factory=time.monotonic)

    @property
    def finished(self) -> int:
        return sum(t.done + t.failed for t in self.tallies.values())

    @property
    def already_done(self) -> int:
        return sum(t.skipped for t in self.tallies.values())

    def eta_s(self) -> float | None:
        fresh = self.finished - self.already_done
        if fresh <= 0:
            return None
        rate = fresh / max(time.monotonic() - self.started, 1e-6)
        return (self.total - self.finished) / rate


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
                 new_session: bool = False,
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
        self.on_progress = on_progress
        self.progress: RunProgress | None = None
        self._contestants: list[Contestant] = []

    # ----- session --------------------------------------------------------
    async def _open_session(self) -> tuple[SessionRecord, bool]:
        key = run_key(self.sample_set.sha256, self.models, self.params, self.system, self.repeat)
        if not self.new_session:
            for summary in await self.store.list_sessions(kind="run"):
                loaded = await self.store.load_session(summary.id)
                if loaded.session.meta.get("run_key") == key:
                    return loaded.session, True
        label_seed = random.SystemRandom().getrandbits(32)
        order = list(self.models)
        random.Random(label_seed).shuffle(order)
        contestants = [
            Contestant(config=m, label=LABELS[i], position=i,
                       params=self.defaults.merged(m.params).merged(self.params))
            for i, m in enumerate(order)
        ]
        record = SessionRecord(
            id=new_ulid(), created=time.time(), kind="run", title=f"run {self.sample_set.name}",
            contestants=[contestant_record(c) for c in contestants], system=self.system,
            params=self.params.model_dump(exclude_none=True), seed=self.params.seed, blind=True,
            revealed_at=None, sample_set_name=self.sample_set.name, sample_set_hash=self.sample_set.sha256,
            rerun_of=None, meta={"run_key": key, "repeat": self.repeat, "label_seed": label_seed,
                                 # shown after the vote in the queue; the set file may move later
                                 "references": {c.id: c.reference for c in self.sample_set.cases if c.reference}},
        )
        await self.store.create_session(record)
        return record, False

    # ----- the run --------------------------------------------------------
    async def run(self) -> RunProgress:
        session, resumed = await self._open_session()
        by_alias = {m.alias: m for m in self.models}
        self._contestants = [
            Contestant(config=by_alias[c.alias], label=c.label, position=c.position,
                       params=SamplingParams(**c.params))
            for c in session.contestants if c.alias in by_alias
        ]
        turns, outputs = await self._existing(session.id) if resumed else ({}, {})
        work = []  # (case, repeat, contestant)
        tallies = {c.alias: ModelTally() for c in self._contestants}
        for case in self.sample_set.cases:
            n_turns = len(case_turn_texts(case))
            for r in range(self.repeat):
                for c in self._contestants:
                    tallies[c.alias].planned += 1
                    done = all(
                        (t := turns.get((case.id, r, k))) is not None
                        and outputs.get((t.id, c.alias)) is not None
                        and outputs[(t.id, c.alias)].status == "complete"
                        for k in range(n_turns)
                    )
                    if done:
                        tallies[c.alias].done += 1
                        tallies[c.alias].skipped += 1
                    else:
                        work.append((case, r, c))
        self.progress = RunProgress(session.id, resumed, total=sum(t.planned for t in tallies.values()),
                                    tallies=tallies)
        self._turns = turns
        self._outputs = outputs
        self._next_position = max((t.position for t in turns.values()), default=-1) + 1
        self._turn_lock = anyio.Lock()
        self._emit()
        limit = anyio.CapacityLimiter(self.concurrency)
        per_provider: dict[str, anyio.CapacityLimiter] = {}
        for c in self._contestants:
            key = f"{c.config.provider}|{c.config.base_url}"
            per_provider.setdefault(key, anyio.CapacityLimiter(c.config.concurrency))
        try:
            async with anyio.create_task_group() as tg:
                for case, r, c in work:
                    provider_limit = per_provider[f"{c.config.provider}|{c.config.base_url}"]
                    tg.start_soon(self._conversation, case, r, c, limit, provider_limit)
        finally:
            with anyio.CancelScope(shield=True):
                for c in self._contestants:
                    if c.provider is not None:
                        await c.provider.aclose()
        return self.progress

    async def _existing(self, session_id: str):
        loaded = await self.store.load_session(session_id)
        turns = {(t.case_id, t.repeat_index, t.follow_up_index): t for t in loaded.turns}
        outputs: dict[tuple[str, str], OutputRecord] = {}
        for out in loaded.outputs:
            prev = outputs.get((out.turn_id, out.contestant))
            # a complete answer wins over any attempt; else the latest attempt
            if prev is None or (prev.status != "complete" and (out.status == "complete" or out.attempt > prev.attempt)):
                outputs[(out.turn_id, out.contestant)] = out
        return turns, outputs

    async def _turn(self, case, repeat: int, k: int, text: str, images) -> TurnRecord:
        """The shared turn for (case, repeat, k), created once."""
        async with self._turn_lock:
            turn = self._turns.get((case.id, repeat, k))
            if turn is None:
                turn = TurnRecord(
                    id=new_ulid(), session_id=self.progress.session_id, position=self._next_position,
                    case_id=case.id, category=case.category, user_message=text,
                    images=[{"path": i.path, "sha256": i.sha256, "mime": i.mime} for i in images],
                    follow_up_index=k, repeat_index=repeat, created=time.time(),
                )
                self._next_position += 1
                await self.store.add_turn(turn)
                self._turns[(case.id, repeat, k)] = turn
            return turn

    async def _conversation(self, case, repeat: int, c: Contestant, limit: anyio.CapacityLimiter,
                            provider_limit: anyio.CapacityLimiter) -> None:
        """One contestant through one case: the opening request, then each
        scripted follow-up after its previous answer, in its own thread."""
        tally = self.progress.tallies[c.alias]
        params = c.params.merged(case.params)
        answers: list[OutputRecord] = []
        failed = False
        async with limit, provider_limit:
            history: list[Message] = []
            for k, text in enumerate(case_turn_texts(case)):
                if k == 0:
                    images = self.sample_set.images_for(case)
                    history.extend(case.opening_messages(images))
                else:
                    images = ()
                    history.append(Message(role="user", content=text))
                turn = await self._turn(case, repeat, k, text, images)
                prev = self._outputs.get((turn.id, c.alias))
                if prev is not None and prev.status == "complete":
                    history.append(Message(role="assistant", content=prev.text))
                    answers.append(prev)
                    continue
                request = ChatRequest(model=c.config.model, messages=tuple(history),
                                      system=case.system or self.system, params=params)
                base = _new_output(turn, c, attempt=(prev.attempt + 1) if prev else 1)
                final, result = await record_stream(self.store, c, request, base, blind=True,
                                                    contestants=self._contestants)
                self._outputs[(turn.id, c.alias)] = final
                await tag_self_identification(self.store, final, c.config, prompt_texts(history, request.system))
                if final.status != "complete":
                    tally.errors[final.error_kind or final.status] += 1
                    failed = True
                    break
                answers.append(final)
                history.append(Message(role="assistant", content=final.text))
                if final.ttft_ms is not None:
                    tally.ttft_ms.append(final.ttft_ms)
                tps = result.tokens_per_s()
                if tps is not None:
                    tally.tokens_per_s.append(tps)
                if final.cost is not None:
                    tally.cost += final.cost
                    tally.cost_known = True
            if not failed:
                await self._checks(case, answers)
        if failed:
            tally.failed += 1
        else:
            tally.done += 1
        self._emit()

    async def _checks(self, case, answers: list[OutputRecord]) -> None:
        """Each check of the case on the answer its `turn` names (default: the last)."""
        from lineup.checks import run_case_checks

        if not case.checks:
            return
        outcomes = run_case_checks(case.checks, [a.text for a in answers])
        for check, outcome in zip(case.checks, outcomes):
            target = answers[-1 if check.turn is None else check.turn]
            await self.store.add_check_result(CheckResultRecord(
                id=new_ulid(), output_id=target.id, check=outcome.name,
                spec={**outcome.spec, "score": outcome.score}, passed=outcome.passed, detail=outcome.detail,
            ))

    def _emit(self) -> None:
        if self.on_progress is not None and self.progress is not None:
            self.on_progress(self.progress)


def _new_output(turn: TurnRecord, c: Contestant, attempt: int) -> OutputRecord:
    return OutputRecord(
        id=new_ulid(), session_id=turn.session_id, turn_id=turn.id, contestant=c.alias, label=c.label,
        attempt=attempt, status="streaming", text="", reasoning=None, error_kind=None, error_message=None,
        finish_reason=None, sent_at=None, ttft_ms=None, duration_ms=None, chunk_ms=[], chunk_chars=[],
        input_tokens=None, output_tokens=None, tokens_estimated=False, reasoning_tokens=None, cost=None,
        is_demo=c.config.is_demo, created=time.time(),
    )


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
            "errors": dict(t.errors),
            "ttft_p50_ms": statistics.median(t.ttft_ms) if t.ttft_ms else None,
            "tokens_per_s_p50": statistics.median(t.tokens_per_s) if t.tokens_per_s else None,
            "cost": t.cost if t.cost_known else None,
        })
    return rows


def format_eta(seconds: float | None) -> str:
    if seconds is None or math.isinf(seconds):
        return "--:--"
    seconds = int(seconds)
    return f"{seconds // 60:02d}:{seconds % 60:02d}" if seconds < 3600 else f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
