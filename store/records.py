"""The records the store keeps. Field names are the contract shared with the
sessions layer, the runner, the TUI and the report (see STORE_API.md).

All ids are ULIDs (`store.ids.new_ulid`) so records from several people's
databases merge without collisions; all times are float epoch seconds."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictInt

from store.ids import new_ulid

#: "load": `lineup load` (the same cases at several concurrency levels); never voted on, and
#: left out of the report unless its session is named (`store.report_queries.Scope`).
SessionKind = Literal["chat", "run", "rerun", "import", "load"]
#: Kinds whose answers are engineering measurements, not material to judge.
UNJUDGED_KINDS: frozenset[str] = frozenset({"load"})
OutputStatus = Literal["streaming", "complete", "error", "cancelled", "interrupted"]
#: How an answer came: streamed from the provider, reused from the cache, or through a batch API.
OutputOrigin = Literal["stream", "cache", "batch", "logged"]   # logged: production's, from a trace
RaterKind = Literal["human", "judge"]
# vote choices that are not a label
TIE, BOTH_BAD, ALL_BAD = "tie", "both_bad", "all_bad"
NON_LABEL_CHOICES: frozenset[str] = frozenset({TIE, BOTH_BAD, ALL_BAD})


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ContestantRecord(_Record):
    """One contestant's frozen configuration. Never holds a key: only what
    is needed to reproduce the request."""

    alias: str
    provider: str
    model: str
    base_url: str | None = None
    params: dict = Field(default_factory=dict)
    price: dict | None = None
    label: str
    position: int = 0
    is_demo: bool = False
    # a variant (`[variants.NAME]`): the alias it is a variant of, its system prompt and template
    variant_of: str | None = None
    system: str | None = None
    template: str | None = None
    tools: dict | None = None   # a variant's tools file (`tools = FILE`), as JSON: a new contestant when it changes


class SessionRecord(_Record):
    id: str = Field(default_factory=new_ulid)
    created: float = Field(default_factory=time.time)
    kind: SessionKind = "chat"
    title: str | None = None
    contestants: list[ContestantRecord] = Field(default_factory=list)
    system: str | None = None
    params: dict = Field(default_factory=dict)
    seed: int | None = None
    blind: bool = False
    revealed_at: float | None = None
    sample_set_name: str | None = None
    sample_set_hash: str | None = None
    rerun_of: str | None = None
    meta: dict = Field(default_factory=dict)

    @property
    def hidden(self) -> bool:
        """Identities must not be shown: blind and not yet revealed."""
        return self.blind and self.revealed_at is None

    @property
    def is_demo(self) -> bool:
        return any(c.is_demo for c in self.contestants)


class TurnRecord(_Record):
    id: str = Field(default_factory=new_ulid)
    session_id: str
    position: int
    case_id: str | None = None
    category: str | None = None
    user_message: str
    images: list[dict] = Field(default_factory=list)
    follow_up_index: int = 0
    repeat_index: int = 0
    created: float = Field(default_factory=time.time)


class TraceCall(_Record):
    """One tool call of an answer: what the model asked for and what was fed
    back. `rule` names the scripted result that answered it
    ("tool_results.N" or "default"); None when it was not run (the step
    limit came first). `signature` is the protocol's opaque token for the
    call (Gemini), kept so the thread can be sent again."""

    id: str | None = None
    name: str
    arguments: Any = None
    result: Any = None
    rule: str | None = None
    signature: str | None = None


class TraceStep(_Record):
    """One request of an answer: the text it streamed and the calls it made."""

    text: str = ""
    calls: list[TraceCall] = Field(default_factory=list)


class AnswerTrace(_Record):
    """How an answer came about when it was more than one stream of text:
    the steps of a tool loop (the last step's text is the answer, also in
    `OutputRecord.text`), why it stopped, and how structured output was
    asked for. Stored as JSON in `output.trace`; the shape is a contract
    (exports, sample_sets/README.md)."""

    steps: list[TraceStep] = Field(default_factory=list)
    stopped: Literal["answered", "step_limit", "error", "cancelled"] | None = None
    max_steps: int | None = None
    structured: Literal["native", "fallback", "instructions"] | None = Field(
        default=None, description="native: the server's own structured output; fallback: it refused, "
        "so the schema went in the instructions; instructions: asked that way from the start")

    @property
    def calls(self) -> list[TraceCall]:
        return [c for step in self.steps for c in step.calls]

    @property
    def more_than_text(self) -> bool:
        """Whether the answer is more than its text: it made calls, fell back
        from native structured output, or stopped at the step limit."""
        return bool(self.calls) or self.structured == "fallback" or self.stopped == "step_limit"


class OutputRecord(_Record):
    id: str = Field(default_factory=new_ulid)
    session_id: str
    turn_id: str
    contestant: str
    label: str
    attempt: int = 1
    status: OutputStatus = "streaming"
    text: str = ""
    reasoning: str | None = None
    error_kind: str | None = None
    error_message: str | None = None
    finish_reason: str | None = None
    sent_at: float | None = None
    ttft_ms: float | None = None             # from the ready connection (`connect_ms` apart)
    duration_ms: float | None = None
    chunk_ms: list[int] = Field(default_factory=list)
    chunk_chars: list[int] = Field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    tokens_estimated: bool = False
    reasoning_tokens: int | None = None
    cost: float | None = None
    is_demo: bool = False
    created: float = Field(default_factory=time.time)
    trace: AnswerTrace | None = None
    streamed: bool = True       # False: the server sent the whole answer in one body (no ttft_ms)
    served_model: str | None = None          # the model id the provider said answered
    system_fingerprint: str | None = None    # OpenAI-compatible servers' backend configuration
    origin: OutputOrigin = "stream"
    cached_from: str | None = None           # origin "cache": the output whose answer this reuses
    request_key: str | None = None           # `core.answering.cache.request_key` of the request
    # The user message this attempt answered when it was edited after the turn
    # was first sent (the chat's "edit and re-send"); None: the turn's own.
    prompt: str | None = None
    # What opening the request's connection took (DNS, TCP, TLS): 0 on a reused
    # one; None where not measured (no HTTP: demo, cache, batch, logged, older records).
    connect_ms: float | None = None


class VoteRecord(_Record):
    id: str = Field(default_factory=new_ulid)
    session_id: str
    turn_id: str
    rater: str = "me"
    choice: str
    ranking: list[str] | None = None
    mapping: dict[str, str]
    positions: list[str]
    created: float = Field(default_factory=time.time)
    revealed_at: float | None = None
    note: str | None = None
    supersedes: str | None = None
    retracted_at: float | None = None           # withdrawn (undo): kept, no longer counts
    # Who cast it: a person, or an LLM judge (`lineup judge`; `core.stats.votes` says
    # what counts where: a judge's vote is never in a human figure unless asked).
    rater_kind: RaterKind = "human"
    judge: str | None = None                    # the judge's alias (rater_kind "judge")
    judge_prompt_hash: str | None = None        # sha256 of its instructions and template
    judge_rubric: str | None = None             # the rubric that replaced the default instructions
    judge_reason: str | None = None             # its reply as it came (keys scrubbed): reason and verdict
    judge_cost: float | None = None
    judge_input_tokens: int | None = None
    judge_output_tokens: int | None = None
    choice_reason: dict | None = None           # why the queue served this item (`lineup vote --adaptive`)

    @property
    def winner(self) -> str | None:
        """The alias chosen, through the vote's own mapping (`model_of`), or
        None for tie / both_bad / all_bad. Fills the stored `winner` column."""
        return None if self.choice in NON_LABEL_CHOICES else model_of(self.mapping, self.choice)


class RevealRecord(_Record):
    """The models of a turn's answers shown without a vote (the rater asked):
    its judged unit counts as revealed, like one with a revealed vote."""

    id: str = Field(default_factory=new_ulid)
    session_id: str
    turn_id: str
    rater: str = "me"
    created: float = Field(default_factory=time.time)


class GoldCheckRecord(_Record):
    """A pair with a known better answer judged in the vote queue (rater
    quality, never a vote): the sample set's `gold` answers (`source`
    "case") or a real answer against a degraded copy of it ("degraded")."""

    id: str = Field(default_factory=new_ulid)
    session_id: str
    turn_id: str
    rater: str = "me"
    source: Literal["case", "degraded"]
    model: str | None = None            # degraded: whose answer was copied
    degradation: str | None = None      # degraded: how the copy was spoiled
    better: str                         # the label of the better answer
    choice: str                         # what the rater chose
    positions: list[str]
    correct: bool
    created: float = Field(default_factory=time.time)
    retracted_at: float | None = None


class BlindGuessRecord(_Record):
    """The blinding audit: after a vote, which model the rater thought wrote
    the answer under `label` (`guess` None: no idea), and which did."""

    id: str = Field(default_factory=new_ulid)
    vote_id: str
    session_id: str
    rater: str = "me"
    label: str
    actual: str
    guess: str | None = None
    options: list[str]
    created: float = Field(default_factory=time.time)


class TagRecord(_Record):
    id: str = Field(default_factory=new_ulid)
    output_id: str
    tag: str
    rater: str = "me"
    note: str | None = None
    auto: bool = False
    created: float = Field(default_factory=time.time)


class ScoreRecord(_Record):
    """A score of one answer on one declared dimension (`core.answering.dimensions`),
    1-5, by a person (`rater_kind` "human") or a grading model ("judge", `rater`
    its alias). Never changed: a rater's later score of the same answer and
    dimension supersedes the earlier (`current_scores`), so merges stay idempotent."""

    id: str = Field(default_factory=new_ulid)
    output_id: str
    dimension: str = Field(min_length=1, max_length=40)
    value: StrictInt = Field(ge=1, le=5)     # not a bool, a float or a text of one
    rater: str = "me"
    rater_kind: Literal["human", "judge"] = "human"
    created: float = Field(default_factory=time.time)


def current_scores(scores: Iterable[ScoreRecord]) -> list[ScoreRecord]:
    """The scores that count: the latest (by time, then id) of each rater on each
    answer and dimension, in that order."""
    latest: dict[tuple[str, str, str, str], ScoreRecord] = {}
    for s in sorted(scores, key=lambda s: (s.created, s.id)):
        latest[(s.output_id, s.dimension, s.rater_kind, s.rater)] = s
    return sorted(latest.values(), key=lambda s: (s.created, s.id))


class CheckResultRecord(_Record):
    id: str = Field(default_factory=new_ulid)
    output_id: str
    check: str
    spec: dict = Field(default_factory=dict)
    passed: bool
    detail: str | None = None


class SessionSummary(_Record):
    id: str
    created: float
    kind: str
    title: str | None
    contestants: list[str] | None  # None while a blind session has units not yet revealed
    turns: int
    votes: int
    is_demo: bool
    blind: bool = False
    # Judged units (sample-set cases per repeat, chat turns) and those whose models
    # may be shown (`core.stats.votes.Reveal`); None when all are (not blind, or revealed as a whole).
    units: int | None = None
    revealed_units: int | None = None
    judge_votes: int = 0    # current votes of LLM judges (not in `votes`, which are people's)

    @property
    def reveal_note(self) -> str:
        """"hidden", "1 of 3 revealed", or "" when every model may be named."""
        if self.contestants is not None:
            return ""
        return f"{self.revealed_units} of {self.units} revealed" if self.revealed_units else "hidden"


class SearchHit(_Record):
    """One full-text match: a prompt (`output_id` None) or an output."""

    session_id: str
    turn_id: str
    output_id: str | None
    kind: Literal["prompt", "output"]
    snippet: str


class ModelVoteCount(_Record):
    """Current (not superseded) votes a model took part in, by outcome."""

    alias: str
    votes: int
    wins: int
    losses: int
    ties: int
    bad: int


class LoadedSession(_Record):
    session: SessionRecord
    turns: list[TurnRecord]
    outputs: list[OutputRecord]
    votes: list[VoteRecord]
    tags: list[TagRecord]
    checks: list[CheckResultRecord]
    reveals: list[RevealRecord] = Field(default_factory=list)
    scores: list[ScoreRecord] = Field(default_factory=list)     # every score, superseded ones too

    # Per-turn indexes, built in one pass on first use (a session of 20,000
    # turns asked turn by turn would otherwise cost 20,000 scans of every
    # output). Rebuilt when the lists are replaced or change length.
    _index: dict = PrivateAttr(default_factory=dict)

    def __eq__(self, other: object) -> bool:   # the indexes are a cache, not part of the value
        if not isinstance(other, BaseModel):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def _grouped(self, name: str, build) -> dict:
        source = getattr(self, name)
        key = (id(source), len(source), id(self.session.contestants), len(self.session.contestants))
        cached = self._index.get(name)
        if cached is None or cached[0] != key:
            cached = self._index[name] = (key, build())
        return cached[1]

    def outputs_by_turn(self) -> dict[str, list[OutputRecord]]:
        """turn id -> its outputs in screen order (contestant position, then attempt)."""
        def build() -> dict[str, list[OutputRecord]]:
            order = {c.alias: c.position for c in self.session.contestants}
            by_turn: dict[str, list[OutputRecord]] = {}
            for o in sorted(self.outputs, key=lambda o: (order.get(o.contestant, 1 << 30), o.label, o.attempt)):
                by_turn.setdefault(o.turn_id, []).append(o)
            return by_turn
        return self._grouped("outputs", build)

    def outputs_for(self, turn_id: str) -> list[OutputRecord]:
        """The turn's outputs in screen order (contestant position, then attempt)."""
        return list(self.outputs_by_turn().get(turn_id, ()))

    def current_votes(self) -> list[VoteRecord]:
        """Votes that count: not withdrawn, and superseded by no later vote."""
        replaced = {v.supersedes for v in self.votes if v.supersedes}
        return [v for v in self.votes if v.id not in replaced and v.retracted_at is None]

    def current_votes_by_turn(self) -> dict[str, list[VoteRecord]]:
        """turn id -> its current votes, in the order of `votes`."""
        def build() -> dict[str, list[VoteRecord]]:
            by_turn: dict[str, list[VoteRecord]] = {}
            for v in self.current_votes():
                by_turn.setdefault(v.turn_id, []).append(v)
            return by_turn
        return self._grouped("votes", build)

    def votes_for(self, turn_id: str) -> list[VoteRecord]:
        return list(self.current_votes_by_turn().get(turn_id, ()))


# ---------------------------------------------------------------------- vote integrity
# The shape of a vote record, checked wherever one is written, and what the
# store derives from it for its own columns (`vote.winner`, the per-contestant
# `vote_contestant.outcome`). core.stats.votes builds votes and says what they mean,
# on top of these functions (it re-exports `label_of` and `model_of`); the
# store cannot import the core, so the record's own rules live here, once.

VoteOutcome = Literal["win", "loss", "tie", "bad"]


def label_of(mapping: Mapping[str, str], label: str) -> str | None:
    """The mapping's key for `label` (exact, else the one key equal ignoring
    case: imported records may differ in case), or None."""
    if label in mapping:
        return label
    folded = [k for k in mapping if k.casefold() == label.casefold()]
    return folded[0] if len(folded) == 1 else None


def model_of(mapping: Mapping[str, str], label: str) -> str | None:
    """The model a label stood for in this mapping."""
    key = label_of(mapping, label)
    return None if key is None else mapping[key]


def shared_outcome(choice: str) -> Literal["tie", "bad"] | None:
    """What a vote says of every contestant alike: "tie", "bad" (both / all
    bad), or None when it picks a label (a win for one, a loss for the rest)."""
    if choice == TIE:
        return "tie"
    if choice in (BOTH_BAD, ALL_BAD):
        return "bad"
    return None


def outcome_of(choice: str, mapping: Mapping[str, str], label: str) -> VoteOutcome:
    """What a vote (`choice` on `mapping`) says of the contestant shown as
    `label`: "tie", "bad" (both / all bad), else "win" for the pick and
    "loss" for the others. A ranking adds no per-contestant outcome here:
    its pairwise outcomes are `core.stats.votes.decompose_vote`'s."""
    shared = shared_outcome(choice)
    if shared is not None:
        return shared
    return "win" if label_of(mapping, choice) == label else "loss"


class VoteError(ValueError):
    """A vote that cannot be recorded as given (the message says why)."""


def check_choice(choice: str, labels: Sequence[str], ranking: Sequence[str] | None = None, *,
                 complete: bool = True, noun: str = "label") -> None:
    """Raise VoteError unless `choice` (and `ranking`, best first) is a vote on `labels`.

    The one rule for what a vote may say, on screen labels (a record) or on
    the models they stand for (`core.stats.votes.decompose_vote`, `noun`
    "contestant"). A ranking places every label once (`complete`; stored
    records from older versions may lack the last place, which was implied),
    starts with the pick when there is one, and never goes with a tie."""
    labels = list(labels)
    if len(labels) < 2:
        raise VoteError(f"a vote needs at least two {noun}s, got {len(labels)}")
    if len(set(labels)) != len(labels):
        raise VoteError(f"{noun}s repeat: {labels}")
    if choice not in labels and choice not in NON_LABEL_CHOICES:
        raise VoteError(f"choice {choice!r} is not one of the {noun}s {sorted(labels)} "
                        f"nor one of {sorted(NON_LABEL_CHOICES)}")
    if not ranking:
        return
    order = list(ranking)
    unknown = [lab for lab in order if lab not in labels]
    if unknown:
        raise VoteError(f"ranking {noun} {unknown[0]!r} is not one of the {noun}s {sorted(labels)}")
    if len(set(order)) != len(order):
        raise VoteError(f"ranking places a {noun} twice: {' > '.join(order)}")
    if choice == TIE:
        raise VoteError("a vote cannot be both a tie and a ranking")
    if choice in labels and order[0] != choice:
        raise VoteError(f"ranking starts with {order[0]!r} but the pick is {choice!r}")
    if complete and len(order) != len(labels):
        missing = [lab for lab in labels if lab not in order]
        raise VoteError(f"a ranking of {len(labels)} answers places all {len(labels)}; "
                        f"{', '.join(missing)} not placed")


def vote_problem(v: VoteRecord) -> str | None:
    """Why a vote record is inconsistent with its own mapping, or None (the
    store refuses such a vote; the importer names it)."""
    try:
        check_choice(v.choice, list(v.mapping), v.ranking, complete=False)
    except VoteError as exc:
        return f"vote {v.id}: {exc}"
    for label in v.positions:
        if label not in v.mapping:
            return f"vote {v.id}: label {label!r} is not in the mapping {sorted(v.mapping)}"
    if v.rater_kind == "judge" and not v.judge:
        return f"vote {v.id}: a judge's vote names its judge"
    if v.rater_kind != "judge" and v.judge is not None:
        return f"vote {v.id}: a person's vote has a judge ({v.judge!r})"
    return None


# What is judged at once: a sample-set case (its follow-ups, one repeat; the
# vote goes on its last turn) or one chat turn. The SQL form is for the
# sessions list (table alias `t`); both give the same key.
UNIT_KEY_SQL = ("CASE WHEN length(t.case_id) THEN 'case' || char(31) || t.case_id || char(31) || t.repeat_index "
                "ELSE 'turn' || char(31) || t.id END")

#: The prompt a vote or an answer is about: the case id, else the prompt text
#: (SQL for Python's `case_id if case_id else user_message`, table alias `t`).
PROMPT_SQL = "CASE WHEN length(t.case_id) THEN t.case_id ELSE t.user_message END"

#: The turns of the unit the turn `?` is in (the unit `UNIT_KEY_SQL` names), by
#: index (`turn_case`, `turn.id`): the same case and repeat in the same
#: session, else the turn itself.
UNIT_TURNS_SQL = ("SELECT u.id FROM turn k JOIN turn u ON u.session_id = k.session_id AND u.case_id = k.case_id "
                  "AND u.repeat_index = k.repeat_index WHERE k.id = ?1 AND length(k.case_id) "
                  "UNION ALL SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM turn k WHERE k.id = ?1 AND length(k.case_id))")


def unit_key(turn: "TurnRecord") -> str:
    """What a turn is judged as: its case (one repeat) or the turn itself."""
    if turn.case_id:
        return f"case\x1f{turn.case_id}\x1f{turn.repeat_index}"
    return f"turn\x1f{turn.id}"
