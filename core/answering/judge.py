"""`lineup judge`: an LLM judges pairs of answers, blind, and its verdicts
are kept as votes of rater kind "judge", never counted as a person's.

Why a module of its own: the judge is a second kind of rater, with its own
prompt, its own verdict format and its own unit of work (one pair of answers
to one case, in one order), resumable like a run. What its votes mean (and
that they never enter a human figure) is `core.stats.votes`; this module asks and
records.

- The material is what a rater sees: the case's turns and each answer's text
  (a traced answer as its readable sequence, `core.answering.tools.trace_lines`), under
  the labels "Assistant A" and "Assistant B", never a model's name; the
  answers' reasoning and the notice that a server refused structured output
  are left out (a person sees neither before the vote).
- The prompt follows the established pairwise convention (MT-Bench's
  "pair-v2", Zheng et al. 2023): an impartial judge, a short explanation,
  then `[[A]]`, `[[B]]` or `[[C]]` for a tie. A rubric file replaces the
  instructions; the verdict format is always appended, so every reply parses
  the same way. The prompt's hash (instructions and template) goes with every
  verdict: verdicts of different prompts are different raters' (`--judge`
  names the alias, the hash tells prompts apart).
- `--reference`: reference-guided judging (MT-Bench "pair-math-v1"): the
  case's reference answer goes in the prompt before the two answers, and
  cases without one are left out (counted). Another prompt, another hash.
- `--swap` (the default) asks for every pair in both orders; what the two
  verdicts say together (a flip is a tie, and position-inconsistent) is
  `core.stats.votes.combine_orders`.
- The judge's own family (`core.answering.identity.family_of`) is kept from judging a
  pair it is part of, unless asked (then with a warning).
- Resumable: each (prompt, turn, ordered pair) is claimed in the store before
  it is sent (`Store.claim_unit`, the runner's claims), so a second run, or
  a second process, never asks for the same pair in the same order twice;
  a verdict recorded (also one merged from another database) is never asked
  again. Requests share the judge server's limit (`ServerLimits`).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from itertools import combinations
from typing import Literal

import anyio

from core.ground.errors import store_error_in
from core.answering.identity import family_of
from core.answering.sessions import ServerLimits
from core.answering.judge_directed import TAG as DIRECTED_TAG
from core.answering.judge_directed import answer_material, directed_tag
from core.answering.vote_queue import QueueItem, build_items
from core.stats.votes import JudgeFields, counts_as_human, judge_rater, make_votes, pair_of, pair_score
from providers import make_provider
from providers.events import ChatRequest, Message, SamplingParams, StreamResult
from providers.model_config import ModelConfig
from store import AsyncStore
from store.owners import process_token
from store.records import LoadedSession, TagRecord, TurnRecord

Only = Literal["all", "voted", "unvoted"]

#: MT-Bench's pairwise instructions ("pair-v2"), as published.
DEFAULT_INSTRUCTIONS = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI "
    "assistants to the user question displayed below. You should choose the assistant that follows the "
    "user's instructions and answers the user's question better. Your evaluation should consider factors "
    "such as the helpfulness, relevance, accuracy, depth, creativity, and level of detail of their "
    "responses. Begin your evaluation by comparing the two responses and provide a short explanation. "
    "Avoid any position biases and ensure that the order in which the responses were presented does not "
    "influence your decision. Do not allow the length of the responses to influence your evaluation. Do "
    "not favor certain names of the assistants. Be as objective as possible."
)
#: MT-Bench's reference-guided pairwise instructions ("pair-math-v1"), as published
#: but for "correctness and helpfulness" (their criteria beside a reference).
REFERENCE_INSTRUCTIONS = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI "
    "assistants to the user question displayed below. Your evaluation should consider correctness and "
    "helpfulness. You will be given a reference answer, assistant A's answer, and assistant B's answer. Your "
    "job is to evaluate which assistant's answer is better. Begin your evaluation by comparing both "
    "assistants' answers with the reference answer. Identify and correct any mistakes. Avoid any position "
    "biases and ensure that the order in which the responses were presented does not influence your "
    "decision. Do not allow the length of the responses to influence your evaluation. Do not favor certain "
    "names of the assistants. Be as objective as possible."
)
#: Added to a rubric's instructions when a reference answer is given.
REFERENCE_NOTE = " You will be given a reference answer: compare both assistants' answers with it."
VERDICT_FORMAT = (
    "After providing your explanation, output your final verdict by strictly following this format: "
    "\"[[A]]\" if assistant A is better, \"[[B]]\" if assistant B is better, and \"[[C]]\" for a tie."
)
#: The single-turn and multi-turn templates (MT-Bench "pair-v2" and "pair-v2-multi-turn").
SINGLE_TEMPLATE = ("[User Question]\n{question}\n\n"
                   "[The Start of Assistant A's Answer]\n{answer_a}\n[The End of Assistant A's Answer]\n\n"
                   "[The Start of Assistant B's Answer]\n{answer_b}\n[The End of Assistant B's Answer]")
MULTI_TEMPLATE = ("<|The Start of Assistant A's Conversation with User|>\n\n{conversation_a}\n\n"
                  "<|The End of Assistant A's Conversation with User|>\n\n\n"
                  "<|The Start of Assistant B's Conversation with User|>\n\n{conversation_b}\n\n"
                  "<|The End of Assistant B's Conversation with User|>")
MULTI_NOTE = " Your evaluation should focus on the assistants' answers to the last user question."
#: The reference block, before the answers (MT-Bench "pair-math-v1"; one reference per case, for its last turn).
SINGLE_REFERENCE = "[The Start of Reference Answer]\n{reference}\n[The End of Reference Answer]\n\n"
MULTI_REFERENCE = "<|The Start of Reference Answer|>\n\n{reference}\n\n<|The End of Reference Answer|>\n\n\n"

_VERDICT = re.compile(r"\[\[(A|B|C)\]\]")
#: The most of a judge's reply that is kept (its reason and verdict); the verdict is read from all of it.
MAX_REASON_CHARS = 20_000
#: Seconds one verdict may take, whole (the provider's connect and read limits apply too: a server
#: that sends keep-alives and no verdict would pass those).
DEFAULT_TIMEOUT_S = 180.0


def parse_verdict(text: str) -> str | None:
    """The verdict of a judge's reply as a vote choice: "A", "B" or "tie"
    ([[C]]); the last marker counts (the verdict follows the explanation);
    None when there is none."""
    found = _VERDICT.findall(text or "")
    if not found:
        return None
    return "tie" if found[-1] == "C" else found[-1]


@dataclass(frozen=True)
class JudgePrompt:
    """The judge's instructions (default, or a rubric in their place) and
    templates; `reference`: reference-guided (`lineup judge --reference`),
    each case's reference answer shown before the two answers."""

    rubric: str | None = None
    reference: bool = False

    @property
    def instructions(self) -> str:
        if self.rubric:
            base = self.rubric.strip() + (REFERENCE_NOTE if self.reference else "")
        else:
            base = REFERENCE_INSTRUCTIONS if self.reference else DEFAULT_INSTRUCTIONS
        return base + " " + VERDICT_FORMAT

    @property
    def hash(self) -> str:
        """sha256 of everything but the material: instructions and both templates."""
        parts: list[str] = [self.instructions, SINGLE_TEMPLATE, MULTI_TEMPLATE, MULTI_NOTE]
        if self.reference:   # the hash of a prompt without a reference is what it always was
            parts += [SINGLE_REFERENCE, MULTI_REFERENCE]
        blob = json.dumps(parts)
        return hashlib.sha256(blob.encode()).hexdigest()

    def messages(self, turns: Sequence[str], answers_a: Sequence[str], answers_b: Sequence[str],
                 reference: str | None = None) -> tuple[str, str]:
        """(system, user) for one pair: `turns` the user messages, oldest first;
        `answers_*` each assistant's answers to them; `reference` the case's
        reference answer (shown only by a reference-guided prompt)."""
        shown = reference if self.reference and reference else None
        if len(turns) == 1:
            user = SINGLE_TEMPLATE.format(question=turns[0], answer_a=answers_a[0], answer_b=answers_b[0])
            if shown:   # after the question, before the answers (the texts are values, never a template)
                head = f"[User Question]\n{turns[0]}\n\n"
                user = head + SINGLE_REFERENCE.format(reference=shown) + user[len(head):]
            return self.instructions, user

        def conversation(label: str, answers: Sequence[str]) -> str:
            return "\n\n".join(f"### User:\n{q}\n\n### Assistant {label}:\n{a}" for q, a in zip(turns, answers, strict=True))

        return (self.instructions + MULTI_NOTE,
                (MULTI_REFERENCE.format(reference=shown) if shown else "")
                + MULTI_TEMPLATE.format(conversation_a=conversation("A", answers_a),
                                        conversation_b=conversation("B", answers_b)))


# --------------------------------------------------------------------------- the work


@dataclass(frozen=True)
class JudgeUnit:
    """One request: a pair of answers to one case (a repeat) or chat turn,
    `first` shown as Assistant A, `second` as B."""

    session_id: str
    target: TurnRecord               # the turn the verdict goes on (the case's last)
    turns: tuple[TurnRecord, ...]    # every user turn shown, oldest first
    first: str
    second: str
    case_key: str                    # the (case, pair) item, for --limit
    answers_first: tuple[str, ...]   # each turn's answer as the judge sees it
    answers_second: tuple[str, ...]
    reference: str | None = None     # the case's reference answer (a reference-guided prompt shows it)

    def claim(self, judge: str, prompt_hash: str) -> str:
        return json.dumps(["judge", judge, prompt_hash, self.target.id, self.first, self.second])


@dataclass
class JudgePlan:
    units: list[JudgeUnit]
    already: int = 0                   # requests whose verdict is recorded
    skipped_family: list[str] = field(default_factory=list)   # models of the judge's family
    warnings: list[str] = field(default_factory=list)
    pairs: int = 0                     # (case, pair) items planned
    directed: int = 0                  # answers in the plan that talk to the judge (`core.answering.judge_directed`)
    new_tags: list[TagRecord] = field(default_factory=list)   # ... of which not tagged yet: to record
    no_reference: int = 0              # (case, pair) items left out: reference-guided, and no reference


def _human_pairs(loaded: LoadedSession) -> dict[str, set[tuple[str, str]]]:
    """turn id -> the pairs a person's current vote there says something about."""
    out: dict[str, set[tuple[str, str]]] = {}
    for v in loaded.current_votes():
        if not counts_as_human(v):
            continue
        models = sorted(set(v.mapping.values()))
        for x, y in combinations(models, 2):
            try:
                if pair_score(v.choice, v.ranking, v.mapping, v.positions, (x, y)) is not None:
                    out.setdefault(v.turn_id, set()).add((x, y))
            except ValueError:
                continue
    return out


def _recorded(loaded: LoadedSession, judge: str, prompt_hash: str) -> set[tuple[str, str, str]]:
    """(turn, first, second) the judge already gave a verdict on with this prompt."""
    rater = judge_rater(judge)
    done = set()
    for v in loaded.votes:
        if v.rater == rater and v.judge_prompt_hash == prompt_hash and v.retracted_at is None:
            shown = [v.mapping[lab] for lab in v.positions if lab in v.mapping]
            if len(shown) == 2:
                done.add((v.turn_id, shown[0], shown[1]))
    return done


def plan_units(loaded: LoadedSession, judge: ModelConfig, prompt: JudgePrompt, *, swap: bool = True,
               only: Only = "all", same_family: bool = False) -> JudgePlan:
    """The requests one session still needs: every judgeable case (or chat
    turn) and pair of contestants whose answers are all complete, in both
    orders with `swap`, less those already recorded; pairs with a model of
    the judge's family left out unless `same_family`."""
    plan = JudgePlan([])
    s = loaded.session
    own = family_of(judge.provider, judge.model, judge.base_url)
    kin = {c.alias for c in s.contestants if family_of(c.provider, c.model, c.base_url) == own}
    if kin and not same_family:
        plan.skipped_family = sorted(kin)
    elif kin:
        plan.warnings.append(f"the judge {judge.alias} is of the same family ({own}) as "
                             f"{', '.join(sorted(kin))} in session {s.id}: it judges its own kin")
    voted = _human_pairs(loaded)
    done = _recorded(loaded, judge.alias, prompt.hash)
    tagged = {t.output_id for t in loaded.tags if t.tag == DIRECTED_TAG}
    references = s.meta.get("references") or {}
    seen: set[str] = set()
    for item in build_items(loaded, rater=None, repeats="separate"):
        turns = tuple(item.repeats[0])
        target = turns[-1]
        reference = references.get(target.case_id) if target.case_id is not None else None
        if not isinstance(reference, str) or not reference.strip():
            reference = None
        for x, y in combinations(item.aliases, 2):
            if not same_family and (x in kin or y in kin):
                continue
            if not all(_complete(item, t, a) for t in turns for a in (x, y)):
                continue
            pair = pair_of(x, y)
            if only == "voted" and pair not in voted.get(target.id, set()):
                continue
            if only == "unvoted" and pair in voted.get(target.id, set()):
                continue
            if prompt.reference and reference is None:
                plan.no_reference += 1
                continue
            plan.pairs += 1
            prompts = [t.user_message for t in turns] + ([s.system] if s.system else [])
            for out in (item.outputs[(t.id, a)] for t in turns for a in (x, y)):
                if out.id in seen:
                    continue
                seen.add(out.id)
                rec = directed_tag(out, prompts)
                if out.id in tagged or rec is not None:
                    plan.directed += 1
                if rec is not None and out.id not in tagged:
                    plan.new_tags.append(rec)
            material = {a: tuple(answer_material(item.outputs[(t.id, a)]) for t in turns) for a in (x, y)}
            for first, second in ((x, y), (y, x)) if swap else ((x, y),):
                if (target.id, first, second) in done:
                    plan.already += 1
                    continue
                plan.units.append(JudgeUnit(s.id, target, turns, first, second, f"{item.key}:{pair[0]}:{pair[1]}",
                                            material[first], material[second], reference))
    return plan


def _complete(item: QueueItem, turn: TurnRecord, alias: str) -> bool:
    out = item.outputs.get((turn.id, alias))
    return out is not None and out.status == "complete"


@dataclass
class JudgeTally:
    """What a judge run did; `failed` by reason."""

    planned: int = 0
    done: int = 0
    already: int = 0
    elsewhere: int = 0
    failed: Counter = field(default_factory=Counter)
    verdicts: Counter = field(default_factory=Counter)
    cost: float = 0.0
    cost_known: bool = False
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def n_failed(self) -> int:
        return sum(self.failed.values())


class JudgeRunner:
    """Asks one judge about the planned units of some sessions and records
    each verdict as it comes; `run()` may be cancelled at any point (the
    verdicts recorded stay, the rest is asked again next time)."""

    def __init__(self, store: AsyncStore, judge: ModelConfig, units: Sequence[JudgeUnit],
                 prompt: JudgePrompt, *, concurrency: int = 4, params: SamplingParams = SamplingParams(),
                 on_progress: Callable[[JudgeTally], None] | None = None) -> None:
        if concurrency < 1:
            raise ValueError("--concurrency must be at least 1")
        self.store = store
        self.judge = judge
        self.units = list(units)
        self.prompt = prompt
        self.concurrency = concurrency
        self.params = params
        self.on_progress = on_progress
        self.owner = process_token()
        self.tally = JudgeTally(planned=len(self.units))

    async def run(self) -> JudgeTally:
        provider = make_provider(self.judge)
        limit = anyio.CapacityLimiter(self.concurrency)
        server = ServerLimits([self.judge]).limiter(self.judge)
        sessions = sorted({u.session_id for u in self.units})
        try:
            async with anyio.create_task_group() as tg:
                for unit in self.units:
                    tg.start_soon(self._one, provider, unit, limit, server)
        finally:
            with anyio.CancelScope(shield=True):
                await provider.aclose()
                for sid in sessions:
                    try:   # what this process took on and did not finish is free again at once
                        await self.store.release_claims(sid, self.owner)
                    except Exception:
                        pass   # a dead owner's claims are taken over anyway
        return self.tally

    async def _one(self, provider, unit: JudgeUnit, limit: anyio.CapacityLimiter,
                   server: anyio.CapacityLimiter | None) -> None:
        async with server if server is not None else nullcontext(), limit:
            claim = unit.claim(self.judge.alias, self.prompt.hash)
            holder = await self.store.claim_unit(unit.session_id, claim, self.owner)
            if holder == "done":
                self.tally.already += 1
                self._emit()
                return
            if holder != "mine":
                self.tally.elsewhere += 1
                self._emit()
                return
            ok = False
            try:
                ok = await self._ask(provider, unit)
            except Exception as exc:
                if store_error_in(exc) is not None:
                    raise
                # a fault in our own handling of one request fails that request, not the run
                self.tally.failed[f"internal ({type(exc).__name__})"] += 1
            finally:
                with anyio.CancelScope(shield=True):
                    await self.store.finish_claim(unit.session_id, claim, self.owner, ok)
        self._emit()

    async def _ask(self, provider, unit: JudgeUnit) -> bool:
        system, user = self.prompt.messages([t.user_message for t in unit.turns], unit.answers_first,
                                            unit.answers_second, unit.reference)
        request = ChatRequest(model=self.judge.model, messages=(Message(role="user", content=user),),
                              system=system, params=self.judge.params.merged(self.params))
        result = StreamResult()
        limit = DEFAULT_TIMEOUT_S
        with anyio.move_on_after(limit) as scope:
            async for event in provider.stream(request):
                result.add(event)
        if scope.cancelled_caught:
            self.tally.failed[f"judge timed out after {limit:g} s"] += 1
            return False
        reply = _scrubbed(result.text, self.judge)
        if result.error is not None:
            self.tally.failed[f"judge error ({result.error.kind.value})"] += 1
            return False
        choice = parse_verdict(reply)
        if choice is None:
            self.tally.failed["no verdict ([[A]], [[B]] or [[C]]) in the reply"] += 1
            return False
        tokens, _ = result.output_tokens_or_estimate()
        cost = self.judge.price.cost(result.input_tokens, tokens) if self.judge.price else None
        fields = JudgeFields(alias=self.judge.alias, prompt_hash=self.prompt.hash, rubric=self.prompt.rubric,
                             reason=reply[-MAX_REASON_CHARS:], cost=cost, input_tokens=result.input_tokens,
                             output_tokens=tokens)
        (vote,) = make_votes(unit.session_id, [unit.target.id], choice, mapping={"A": unit.first, "B": unit.second},
                             positions=["A", "B"], rater=judge_rater(self.judge.alias), revealed=False,
                             judge=fields, now=time.time())
        await self.store.add_vote(vote)
        self.tally.done += 1
        self.tally.verdicts[choice] += 1
        if cost is not None:
            self.tally.cost += cost
            self.tally.cost_known = True
        self.tally.input_tokens += result.input_tokens or 0
        self.tally.output_tokens += tokens or 0
        return True

    def _emit(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.tally)


def _scrubbed(text: str, cfg: ModelConfig) -> str:
    """The judge's reply without its key, however it came back."""
    import os

    from providers.http import scrub

    key = os.environ.get(cfg.api_key_env, "").strip() if cfg.api_key_env else ""
    return scrub(text, key or None)
