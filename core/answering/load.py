"""The load profile (`lineup load`): how a model's latency, speed and errors
change as more requests are in flight at once.

Why a module of its own: a run (`core.answering.runner`) measures answers at a
concurrency chosen to be polite to the server; a load profile forces a
concurrency on purpose and measures what it does. It reuses a run's pieces
(contestants, `core.answering.recording.record_stream`, the per-server limits, the
output records) and records every answer like a run's, in a session of kind
`load`, which the vote queue, the judge and the report leave alone unless
it is named (`store.records.UNJUDGED_KINDS`).

The plan: for each level L (in the order given) and each model (one at a
time, so that models on one server do not slow each other down), the same
`requests` cases (the set's cases in order, cycled when there are more
requests than cases; only each case's opening request, no follow-ups and
no checks) with at most L requests of that model in flight. A server's
`concurrency` (configured, or the conservative default: 1 for a local
server) caps every request to it; a level above it is refused unless the
caller says `exceed_server_limit`, and then the level is the only cap.

The figures (`load_report`) are read back from the record: per model and
level, TTFT and duration p50 and p95 (with a seeded bootstrap interval on
the p95), tokens per second, answers per second, errors by kind, and each
p95's growth from the first level (the ratio of p95s, with its interval).
The JSON (`SCHEMA`) is stable.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import numpy as np
from pydantic import BaseModel, Field

from core.answering.attachments import image_record
from core.answering.runner import _new_output, case_turn_texts, sent_system
from core.stats.quantiles import percentile
from core.stats.votes import labels_for
from core.answering.recording import record_stream
from core.answering.sessions import Contestant, ServerLimits, contestant_record
from core.answering.tools import answer_script
from providers.events import ChatRequest, SamplingParams
from providers.model_config import ModelConfig, server_concurrency, server_key
from store import AsyncStore
from store.ids import new_ulid
from store.records import LoadedSession, OutputRecord, SessionRecord, TurnRecord

if TYPE_CHECKING:
    from core.answering.sampleset import Case, SampleSet

SCHEMA = "lineup.load/1"
#: How an answer the person stopped (Ctrl-C) is recorded: neither an answer nor an error.
STOPPED = frozenset({"cancelled", "interrupted", "streaming"})


def check_levels(levels: Sequence[int]) -> list[int]:
    """The levels as given, or ValueError: whole numbers of at least 1, no repeats."""
    if not levels:
        raise ValueError("give at least one level")
    bad = [x for x in levels if x < 1]
    if bad:
        raise ValueError(f"levels are at least 1, not {bad[0]}")
    if len(set(levels)) != len(levels):
        raise ValueError("each level once")
    return list(levels)


def over_server_limit(models: Sequence[ModelConfig], levels: Sequence[int]) -> list[tuple[str, int, int]]:
    """(alias, its server's concurrency, the highest level) for each model
    whose server takes fewer requests at once than the highest level."""
    top = max(levels)
    out = []
    for m in models:
        if server_key(m) is not None and server_concurrency(m) < top:
            out.append((m.alias, server_concurrency(m), top))
    return out


@dataclass
class PhaseTally:
    """Progress of one (level, model): requests sent and how they ended."""

    planned: int
    done: int = 0
    errors: Counter = field(default_factory=Counter)


@dataclass
class LoadProgress:
    session_id: str
    phases: dict[tuple[int, str], PhaseTally]
    current: tuple[int, str] | None = None

    @property
    def finished(self) -> int:
        return sum(p.done + sum(p.errors.values()) for p in self.phases.values())

    @property
    def total(self) -> int:
        return sum(p.planned for p in self.phases.values())


def planned_cases(cases: Sequence["Case"], requests: int | None, levels: Sequence[int] = (1,)) -> list["Case"]:
    """The cases sent at each level: the set in order, cycled to `requests`
    (default: every case once, and at least twice the highest level, so that
    the highest level runs full for a while rather than only ramping up)."""
    if not cases:
        raise ValueError("the sample set has no cases")
    n = max(len(cases), 2 * max(levels)) if requests is None else requests
    if n < 1:
        raise ValueError("requests are at least 1")
    return [cases[i % len(cases)] for i in range(n)]


class LoadRunner:
    """Runs one load profile; `run()` is cancellable at any point (Ctrl-C):
    what was recorded stays, the answers in flight end as cancelled."""

    def __init__(self, store: AsyncStore, sample_set: "SampleSet", models: Sequence[ModelConfig], *,
                 levels: Sequence[int], requests: int | None = None, params: SamplingParams = SamplingParams(),
                 defaults: SamplingParams = SamplingParams(), system: str | None = None,
                 exceed_server_limit: bool = False, retries: int = 0,
                 on_progress: Callable[[LoadProgress], None] | None = None) -> None:
        self.store = store
        self.sample_set = sample_set
        self.models = list(models)
        self.levels = check_levels(levels)
        self.cases = planned_cases(sample_set.cases, requests, self.levels)
        if not self.exceeding_allowed(exceed_server_limit):
            alias, cap, top = over_server_limit(self.models, self.levels)[0]
            raise ValueError(f"level {top} is above the {cap} requests at once the server of {alias!r} takes")
        self.exceed_server_limit = exceed_server_limit
        self.params = params
        self.defaults = defaults
        self.system = system
        self.retries = retries
        self.on_progress = on_progress
        self.progress: LoadProgress | None = None

    def exceeding_allowed(self, exceed: bool) -> bool:
        return exceed or not over_server_limit(self.models, self.levels)

    async def _open(self) -> tuple[SessionRecord, list[Contestant]]:
        label_seed = random.SystemRandom().getrandbits(32)
        order = list(self.models)
        random.Random(label_seed).shuffle(order)
        labels = labels_for(len(order))
        contestants = [Contestant(config=m, label=labels[i], position=i,
                                  params=self.defaults.merged(m.params).merged(self.params))
                       for i, m in enumerate(order)]
        record = SessionRecord(
            id=new_ulid(), created=time.time(), kind="load", title=f"load {self.sample_set.name}",
            contestants=[contestant_record(c) for c in contestants], system=self.system,
            params=self.params.model_dump(exclude_none=True), seed=self.params.seed, blind=False,
            revealed_at=None, sample_set_name=self.sample_set.name, sample_set_hash=self.sample_set.sha256,
            meta={"load": {"levels": self.levels, "requests": len(self.cases),
                           "exceed_server_limit": self.exceed_server_limit, "retries": self.retries,
                           "server_concurrency": {m.alias: server_concurrency(m) if server_key(m) else None
                                                  for m in self.models}},
                  "label_seed": label_seed})
        await self.store.create_session(record)
        return record, contestants

    async def run(self) -> LoadProgress:
        session, contestants = await self._open()
        n = len(self.cases)
        self.progress = progress = LoadProgress(session.id, {
            (level, c.alias): PhaseTally(planned=n) for level in self.levels for c in contestants})
        self._emit()
        for li, level in enumerate(self.levels):
            turns = []
            for i, case in enumerate(self.cases):   # one turn per request, shared by the models
                text = case_turn_texts(case)[0]
                images = self.sample_set.images_for(case)
                turn = TurnRecord(id=new_ulid(), session_id=session.id, position=0, case_id=case.id,
                                  category=case.category, user_message=text,
                                  images=[image_record(x) for x in images],
                                  follow_up_index=0, repeat_index=li * n + i, created=time.time())
                turns.append(await self.store.ensure_turn(turn))
            for base in contestants:
                progress.current = (level, base.alias)
                await self._phase(level, base, turns, contestants)
        progress.current = None
        self._emit()
        return progress

    async def _phase(self, level: int, base: Contestant, turns: list[TurnRecord],
                     everyone: list[Contestant]) -> None:
        """Every request of one model at one level, at most `level` in flight."""
        updates: dict[str, object] = {"max_retries": self.retries}
        if self.exceed_server_limit:   # the client's own pool must not be the cap either
            updates["concurrency"] = max(level, server_concurrency(base.config))
        c = Contestant(config=base.config.model_copy(update=updates), label=base.label,
                       position=base.position, params=base.params)
        limit = anyio.CapacityLimiter(level)
        server = None if self.exceed_server_limit else ServerLimits([c.config]).limiter(c.config)
        tally = self._running().phases[(level, c.alias)]
        try:
            async with anyio.create_task_group() as tg:
                for case, turn in zip(self.cases, turns, strict=True):
                    tg.start_soon(self._one, case, turn, c, everyone, tally, limit, server or nullcontext())
        finally:
            with anyio.CancelScope(shield=True):
                if c.provider is not None:
                    await c.provider.aclose()

    async def _one(self, case: "Case", turn: TurnRecord, c: Contestant, everyone: list[Contestant],
                   tally: PhaseTally, limit: anyio.CapacityLimiter,
                   server: AbstractAsyncContextManager) -> None:
        async with server, limit:
            request = ChatRequest(model=c.config.model, messages=case.opening_messages(
                                      self.sample_set.images_for(case), template=c.config.template),
                                  system=sent_system(c.config, case, self.system), params=c.params.merged(case.params))
            final, _ = await record_stream(self.store, c, request, _new_output(turn, c, attempt=1, case=case),
                                           contestants=everyone, script=answer_script(case.tool_script(), c.config),
                                           structured=case.response_format)
        if final.status == "complete":
            tally.done += 1
        else:
            tally.errors[final.error_kind or final.status] += 1
        self._emit()

    def _running(self) -> LoadProgress:
        if self.progress is None:
            raise RuntimeError("the load profile has not started")
        return self.progress

    def _emit(self) -> None:
        if self.on_progress is not None and self.progress is not None:
            self.on_progress(self.progress)


# ----- the report ------------------------------------------------------------

class Quantiles(BaseModel):
    """Of the complete answers that have this timing."""

    n: int
    p50: float | None = None
    p95: float | None = None
    p95_low: float | None = Field(default=None, description="bootstrap interval of the p95 (percentile)")
    p95_high: float | None = None


class Growth(BaseModel):
    """A p95 at this level over the same p95 at the first level."""

    ratio: float
    low: float | None = Field(default=None, description="bootstrap interval of the ratio")
    high: float | None = None


class LevelFigures(BaseModel):
    level: int
    sent: int = Field(description="requests recorded at this level (answers stopped by Ctrl-C included)")
    complete: int
    stopped: int = Field(description="answers stopped by the person (Ctrl-C): neither answers nor errors")
    errors: dict[str, int] = Field(description="error kind -> answers that ended with it")
    error_rate: float | None = Field(description="errors / (complete + errors); None when nothing ended")
    ttft_ms: Quantiles
    duration_ms: Quantiles
    tokens_per_s_p50: float | None = Field(description="output tokens per second after the first token, median")
    answers_per_s: float | None = Field(description="complete answers over the span from first sent to last done")
    ttft_p95_growth: Growth | None = None
    duration_p95_growth: Growth | None = None


class ModelLoad(BaseModel):
    alias: str
    server_concurrency: int | None = Field(description="the server's `concurrency` (configured or default) "
                                                       "when the profile ran; None: no limit")
    levels: list[LevelFigures]


class LoadReport(BaseModel):
    schema_: str = Field(default=SCHEMA, alias="schema")
    session_id: str
    sample_set: str | None
    levels: list[int]
    requests: int = Field(description="requests per model and level")
    exceed_server_limit: bool
    retries: int
    confidence: float
    bootstrap: int
    complete: bool = Field(description="every planned request was sent and ended (False after Ctrl-C)")
    models: list[ModelLoad]

    model_config = {"populate_by_name": True}


def _boot_p95(values: np.ndarray, rng: np.random.Generator, rounds: int) -> np.ndarray:
    idx = rng.integers(0, len(values), size=(rounds, len(values)))
    return percentile(values[idx], 95, axis=1)


def _quantiles(values: list[float], rng: np.random.Generator, rounds: int,
               confidence: float) -> tuple[Quantiles, np.ndarray | None]:
    if not values:
        return Quantiles(n=0), None
    arr = np.asarray(values, dtype=float)
    q = Quantiles(n=len(arr), p50=float(percentile(arr, 50)), p95=float(percentile(arr, 95)))
    if len(arr) < 2 or rounds < 1:
        return q, None
    boots = _boot_p95(arr, rng, rounds)
    tail = (1 - confidence) / 2 * 100
    q.p95_low, q.p95_high = (float(x) for x in percentile(boots, [tail, 100 - tail]))
    return q, boots


def _growth(q: Quantiles, boots: np.ndarray | None, q1: Quantiles, boots1: np.ndarray | None,
            confidence: float) -> Growth | None:
    if q.p95 is None or not q1.p95:
        return None
    g = Growth(ratio=q.p95 / q1.p95)
    if boots is not None and boots1 is not None and np.all(boots1 > 0):
        tail = (1 - confidence) / 2 * 100
        g.low, g.high = (float(x) for x in percentile(boots / boots1, [tail, 100 - tail]))
    return g


def _tokens_per_s(o: OutputRecord) -> float | None:
    """As `StreamResult.tokens_per_s`, from the record: first token to end."""
    if o.ttft_ms is None or o.duration_ms is None or not o.output_tokens or o.output_tokens <= 1:
        return None
    span = (o.duration_ms - o.ttft_ms) / 1000
    return o.output_tokens / span if span > 0 else None


def _figures(level: int, outputs: list[OutputRecord], rng: np.random.Generator, rounds: int,
             confidence: float) -> tuple[LevelFigures, tuple]:
    done = [o for o in outputs if o.status == "complete"]
    stopped = [o for o in outputs if o.status in STOPPED]
    errors = Counter(o.error_kind or o.status for o in outputs if o.status != "complete" and o.status not in STOPPED)
    ended = len(done) + sum(errors.values())
    ttft, ttft_boots = _quantiles([o.ttft_ms for o in done if o.ttft_ms is not None], rng, rounds, confidence)
    dur, dur_boots = _quantiles([o.duration_ms for o in done if o.duration_ms is not None], rng, rounds,
                                confidence)
    speeds = [s for o in done if (s := _tokens_per_s(o)) is not None]
    spans = [(o.sent_at, o.sent_at + o.duration_ms / 1000) for o in done
             if o.sent_at is not None and o.duration_ms is not None]
    span = max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0.0
    fig = LevelFigures(
        level=level, sent=len(outputs), complete=len(done), stopped=len(stopped),
        errors=dict(sorted(errors.items())), error_rate=sum(errors.values()) / ended if ended else None,
        ttft_ms=ttft, duration_ms=dur, tokens_per_s_p50=float(np.median(speeds)) if speeds else None,
        answers_per_s=len(spans) / span if span > 0 else None)
    return fig, (ttft_boots, dur_boots)


def load_report(loaded: LoadedSession, *, bootstrap: int = 1000, seed: int = 0,
                confidence: float = 0.95) -> LoadReport:
    """The figures of a recorded load profile (a session of kind `load`)."""
    s = loaded.session
    if s.kind != "load":
        raise ValueError(f"session {s.id} is a {s.kind} session, not a load profile")
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence is between 0.5 and 1, not {confidence!r}")
    meta = s.meta.get("load") or {}
    levels: list[int] = list(meta.get("levels") or [])
    n = int(meta.get("requests") or 0)
    turn_level = {t.id: levels[(t.repeat_index or 0) // n] for t in loaded.turns
                  if n and (t.repeat_index or 0) // n < len(levels)}
    rng = np.random.default_rng(seed)
    caps = meta.get("server_concurrency") or {}
    models = []
    everything_ended = True
    for c in sorted(s.contestants, key=lambda c: c.alias):
        figures: list[LevelFigures] = []
        first: tuple | None = None
        for level in levels:
            outs = [o for o in loaded.outputs if o.contestant == c.alias and turn_level.get(o.turn_id) == level]
            fig, boots = _figures(level, outs, rng, bootstrap, confidence)
            if fig.sent < n or fig.stopped:
                everything_ended = False
            if first is None:
                first = (fig, boots)
            else:
                f1, b1 = first
                fig.ttft_p95_growth = _growth(fig.ttft_ms, boots[0], f1.ttft_ms, b1[0], confidence)
                fig.duration_p95_growth = _growth(fig.duration_ms, boots[1], f1.duration_ms, b1[1], confidence)
            figures.append(fig)
        models.append(ModelLoad(alias=c.alias, server_concurrency=caps.get(c.alias), levels=figures))
    return LoadReport(session_id=s.id, sample_set=s.sample_set_name, levels=levels, requests=n,
                      exceed_server_limit=bool(meta.get("exceed_server_limit")), retries=int(meta.get("retries") or 0),
                      confidence=confidence, bootstrap=bootstrap, complete=everything_ended, models=models)
