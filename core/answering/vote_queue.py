"""The blind vote queue's logic, without a UI: the cases left to judge, in
the order they were run; a fresh shuffle of the answers per case (recorded in
its votes: label A = leftmost); skip; undo (the vote is withdrawn and kept with
`retracted_at`); reveal after each vote or at the end, or of one case without
a vote when the rater asks (`reveal_current`: recorded, and the case leaves
that rater's queue); repeats judged apart or together. `tui.vote_queue` only draws it and forwards keys.

A case is a sample-set case (its follow-ups together, judged on its last
turn), or one chat turn (judged with the turns before it as context). With
`repeats="together"` every repeat of a case is judged at once; the vote is
recorded on each repeat's last turn. Votes are built by `core.stats.votes`.

`adaptive=True` (`lineup vote --adaptive`): the queue serves (case, pair of
models) items, the next one chosen by `core.stats.adaptive.AdaptivePlanner` from
people's votes so far (the rater's and everyone else's, never a judge's);
the reason for each choice goes with its vote (`choice_reason`), and
`stop_message` says when the top of the ranking is separated.

Rater quality: `gold_rate` > 0 mixes in, after a case, with that chance, a
gold pair: a case's known better and worse answers (the sample set's
`gold`) or, without those, a real answer against a spoiled copy of it (`degraded_copy`),
judged like any case but recorded as a `GoldCheckRecord`, never a vote.
`guess` records the blinding audit's answer ("which model do you think
wrote A?") for the vote just cast, before its names are shown.

Past 600 lines because one pass's state is one object: the plain order, the
adaptive choice and the gold pairs all change what is on screen, what undo
and skip do and what a vote records, so they share `advance`/`vote`/`undo`
rather than three queues that would each need the others' cases."""

from __future__ import annotations

import random
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import TYPE_CHECKING, Literal

from core.answering.dimensions import Dimension, dimensions_of, valid_score
from core.ground.text import one_line
from core.stats.adaptive import AdaptivePlanner, Candidate, Choice, stop_message
from core.stats.votes import (
    LABELS,
    VoteNeedsConfirmation,
    VoteWarning,
    answer_warnings,
    battles_of,
    check_choice,
    counts_as_human,
    gold_correct,
    make_votes,
    pair_of,
    pair_score,
)
from store.ids import new_ulid
from store.records import (
    BlindGuessRecord,
    GoldCheckRecord,
    LoadedSession,
    OutputRecord,
    RevealRecord,
    ScoreRecord,
    TagRecord,
    UNJUDGED_KINDS,
    TurnRecord,
    VoteRecord,
    current_scores,
)

if TYPE_CHECKING:
    from store.writer import AsyncStore

Reveal = Literal["each", "end"]
Repeats = Literal["separate", "together"]


@dataclass
class QueueItem:
    session_id: str
    key: str
    context: list[TurnRecord]           # turns shown before the judged ones (chat history)
    repeats: list[list[TurnRecord]]     # per repeat: the case's turns, first to last
    aliases: list[str]                  # contestants with an answer, in session order
    outputs: dict[tuple[str, str], OutputRecord]   # (turn_id, alias) -> latest attempt
    contestants: list = field(default_factory=list)  # ContestantRecords (for scrubbing)
    case_id: str | None = None
    category: str | None = None
    checks: dict[str, list] = field(default_factory=dict)   # output id -> CheckResultRecords
    reference: str | None = None        # the case's reference note, shown after the vote
    tags: dict[str, list] = field(default_factory=dict)     # output id -> current TagRecords (auto ones too)
    gold: dict | None = None            # the case's known better / worse answers (`GoldAnswers`), for gold pairs
    dimensions: tuple[Dimension, ...] = ()      # what the session's answers are scored on, 1-5
    scores: dict[str, list] = field(default_factory=dict)   # output id -> the rater's current ScoreRecords

    @property
    def targets(self) -> list[TurnRecord]:
        """The turns a vote on this item is recorded on."""
        return [turns[-1] for turns in self.repeats]


def _latest(outputs: list[OutputRecord]) -> dict[tuple[str, str], OutputRecord]:
    out: dict[tuple[str, str], OutputRecord] = {}
    for o in outputs:
        key = (o.turn_id, o.contestant)
        if key not in out or o.attempt >= out[key].attempt:
            out[key] = o
    return out


def build_items(loaded: LoadedSession, *, rater: str | None, repeats: str = "separate") -> list[QueueItem]:
    """Unvoted cases of one session (by `rater`), in the order they were run;
    a case `rater` revealed without a vote is left out (its names were seen).
    `rater` None: every judgeable case, voted or not (`lineup judge`)."""
    s = loaded.session
    if len(s.contestants) < 2 or s.kind in UNJUDGED_KINDS:   # a load profile's answers are not voted on
        return []
    latest = _latest(loaded.outputs)
    checks: dict[str, list] = {}
    for c in loaded.checks:
        checks.setdefault(c.output_id, []).append(c)
    references = s.meta.get("references") or {}
    tags: dict[str, list] = {}
    for tag in loaded.tags:
        tags.setdefault(tag.output_id, []).append(tag)
    dimensions = dimensions_of(s.meta)
    scores: dict[str, list] = {}
    for sc in current_scores(loaded.scores):
        if sc.rater_kind == "human" and sc.rater == rater:
            scores.setdefault(sc.output_id, []).append(sc)
    voted = {v.turn_id for v in loaded.current_votes() if v.rater == rater and counts_as_human(v)}
    seen = {r.turn_id for r in loaded.reveals if r.rater == rater}   # revealed to them without a vote
    if rater is None:
        voted, seen = set(), set()
    aliases = [c.alias for c in sorted(s.contestants, key=lambda c: c.position)]

    groups: dict[tuple, list[TurnRecord]] = {}
    order: list[tuple] = []
    for t in loaded.turns:
        key: tuple = ("case", t.case_id, t.repeat_index) if t.case_id else ("turn", t.id)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(t)

    def judgeable(turns: list[TurnRecord]) -> bool:
        last = turns[-1]
        answers = [latest.get((last.id, a)) for a in aliases]
        present = [o for o in answers if o is not None and o.status != "streaming"]
        return (len(present) >= 2 and any(o.status == "complete" for o in present)
                and last.id not in voted and last.id not in seen)

    items: list[QueueItem] = []
    by_case: dict[str, QueueItem] = {}
    for key in order:
        turns = sorted(groups[key], key=lambda t: (t.follow_up_index, t.position))
        if not judgeable(turns):
            continue
        context = [t for t in loaded.turns if t.position < turns[0].position] if key[0] == "turn" else []
        if repeats == "together" and key[0] == "case":
            item = by_case.get(key[1])
            if item is not None:
                item.repeats.append(turns)
                continue
        item = QueueItem(session_id=s.id, key=f"{s.id}:{key[1] if key[0] == 'case' else turns[0].id}"
                         + (f":r{key[2]}" if key[0] == "case" and repeats != "together" else ""),
                         context=context, repeats=[turns], aliases=aliases, outputs=latest,
                         contestants=list(s.contestants), case_id=turns[0].case_id, category=turns[0].category,
                         checks=checks, reference=references.get(turns[0].case_id), tags=tags,
                         gold=(s.meta.get("gold") or {}).get(turns[0].case_id),
                         dimensions=dimensions, scores=scores)
        if repeats == "together" and key[0] == "case":
            by_case[key[1]] = item
        items.append(item)
    return items


def check_summary(item: QueueItem, alias: str) -> str | None:
    """One contestant's automated check results on this item, for after the vote."""
    outs = [item.outputs.get((t.id, alias)) for turns in item.repeats for t in turns]
    results = [c for o in outs if o is not None for c in item.checks.get(o.id, ())]
    if not results:
        return None
    failed = [c.check for c in results if not c.passed]
    text = f"checks {len(results) - len(failed)}/{len(results)}"
    if failed:
        text += " · failed: " + ", ".join(dict.fromkeys(failed))
    return text


def shuffled_positions(aliases: list[str], rng: random.Random | None = None) -> list[str]:
    """Aliases in a fresh random screen order (left to right)."""
    order = list(aliases)
    (rng or random.SystemRandom()).shuffle(order)
    return order


@dataclass
class Judged:
    """One judgement made in this queue: the case, the screen order, its votes."""

    item: QueueItem
    order: list[str]
    votes: list[VoteRecord]
    choice: Choice | None = None        # adaptive: the planner's choice this judgement answered
    gold: GoldCheckRecord | None = None  # a gold pair: its check (and no votes)


class VoteQueue:
    """State and writes of one pass through the queue. `store` is an
    AsyncStore; `rng` fixes the shuffles (tests), else each is fresh;
    `case_seed` (a vote package's) makes each case's order a function of the
    seed, the rater and the case, the same on every pass (resume, undo);
    `units` (item keys: a team rater's assignment, `core.answering.raters`) limits the
    queue to those cases."""

    def __init__(self, store: AsyncStore, *, rater: str, session_id: str | Sequence[str] | None = None,
                 reveal: Reveal = "each",
                 repeats: Repeats = "separate", rng: random.Random | None = None, adaptive: bool = False,
                 confidence: float = 0.95, gold_rate: float = 0.0,
                 case_seed: str | None = None, units: Collection[str] | None = None) -> None:
        if not 0 <= gold_rate < 1:
            raise ValueError(f"gold_rate is at least 0 and below 1, not {gold_rate!r}")
        if reveal not in ("each", "end"):
            raise ValueError(f"reveal is 'each' or 'end', not {reveal!r}")
        if repeats not in ("separate", "together"):
            raise ValueError(f"repeats is 'separate' or 'together', not {repeats!r}")
        self.store = store
        self.rater = rater
        self.session_id = session_id
        self.reveal = reveal
        self.repeats = repeats
        self.rng = rng
        self.case_seed = case_seed
        self.units = None if units is None else frozenset(units)   # a team rater's assignment (item keys)
        self.items: list[QueueItem] = []
        self.total = 0
        self.done = 0
        self.current: QueueItem | None = None
        self.order: list[str] = []          # models left to right for the current case
        self.judged = False                 # the current case has its vote
        self.revealed_current = False       # ... or was revealed without one
        self.history: list[Judged] = []
        self.seen: list[QueueItem] = []     # cases revealed without a vote in this pass
        self._hidden_votes: list[str] = []
        if not 0.5 < confidence < 1:
            raise ValueError(f"confidence is between 0.5 and 1, not {confidence!r}")
        self.adaptive = adaptive
        self.confidence = confidence
        self.planner: AdaptivePlanner | None = None
        self.choice: Choice | None = None   # adaptive: why the current item is on screen
        self._by_key: dict[str, QueueItem] = {}
        self._redo: Choice | None = None    # adaptive: an undone judgement, served again next
        self.gold_rate = gold_rate
        self.gold: tuple[str, str] | None = None   # the current item is a gold pair: (model copied, degradation)
        self._pool: list[QueueItem] = []    # every judgeable case loaded, where gold pairs come from

    async def load(self) -> None:
        """The unvoted cases of one session (or of these), or of every session (oldest first)."""
        if self.session_id:
            ids = [self.session_id] if isinstance(self.session_id, str) else list(self.session_id)
        else:
            ids = [s.id for s in reversed(await self.store.list_sessions()) if s.turns]
        items: list[QueueItem] = []
        self._hidden_votes = []
        candidates: list[Candidate] = []
        battles: dict[str, tuple[str, str, float]] = {}
        for sid in ids:
            loaded = await self.store.load_session(sid)
            if self.adaptive:
                candidates += self._candidates(loaded)
                battles.update(_people_battles(loaded))
            else:
                items.extend(i for i in build_items(loaded, rater=self.rater, repeats=self.repeats)
                             if self.units is None or i.key in self.units)
            # votes of an earlier pass left before its end (reveal="end"): shown when this one ends
            self._hidden_votes += [v.id for v in loaded.current_votes()
                                   if v.rater == self.rater and counts_as_human(v) and v.revealed_at is None
                                   and loaded.session.blind]
        self.items, self.total, self.done = items, len(items), 0
        self._pool = list(items) or list(self._by_key.values())
        if self.adaptive:
            self.planner = AdaptivePlanner(candidates, battles=battles, rng=self.rng or random.Random(),
                                           level=self.confidence)
            self.total = len(candidates)

    def _candidates(self, loaded: LoadedSession) -> list[Candidate]:
        """Adaptive: every (case, pair of models) of a session this rater has
        neither voted on (that pair on that case) nor seen revealed."""
        seen = {r.turn_id for r in loaded.reveals if r.rater == self.rater}
        mine = [v for v in loaded.current_votes() if v.rater == self.rater and counts_as_human(v)]
        out: list[Candidate] = []
        for item in build_items(loaded, rater=None, repeats=self.repeats):
            targets = {t.id for t in item.targets}
            if targets & seen or (self.units is not None and item.key not in self.units):
                continue
            present = [a for a in item.aliases
                       if all((o := item.outputs.get((t, a))) is not None and o.status != "streaming"
                              for t in targets)]
            self._by_key[item.key] = item
            for x, y in combinations(present, 2):
                pair = pair_of(x, y)
                if any(v.turn_id in targets and pair_score(v.choice, v.ranking, v.mapping, v.positions, pair)
                       is not None for v in mine):
                    continue
                out.append(Candidate(key=item.key, pair=pair, category=item.category))
        return out

    @property
    def stop_message(self) -> str | None:
        """Adaptive: "you can stop: ..." once the top of the ranking is
        separated at `confidence`; None before (and without --adaptive).
        Names the models only when names are shown after each vote."""
        if self.planner is None:
            return None
        return stop_message(self.planner.standing(), self.confidence, named=self.reveal == "each")

    # ----- the case on screen -------------------------------------------------
    def advance(self) -> QueueItem | None:
        """The next case, in a fresh random order; None when none is left."""
        self.judged = False
        self.revealed_current = False
        was_gold, self.gold = self.gold is not None, None
        left = (self.planner.remaining or self._redo) if self.planner is not None else self.items
        if self.gold_rate and self.history and not was_gold and left and self._draw().random() < self.gold_rate:
            item = self._gold_item()
            if item is not None:
                return item
        if self.planner is not None:
            return self._advance_adaptive()
        if not self.items:
            self.current, self.order = None, []
            return None
        self.current = self.items.pop(0)
        rng = self.rng
        if self.case_seed is not None:
            rng = random.Random(f"{self.case_seed}\x1f{self.rater}\x1f{self.current.key}")
        self.order = shuffled_positions(self.current.aliases, rng)
        return self.current

    def _draw(self) -> random.Random:
        if self.rng is None:
            self.rng = random.Random()
        return self.rng

    def _gold_item(self) -> QueueItem | None:
        """A gold pair, in shuffled positions: a case's own known better and
        worse answers (the sample set's `gold`: what the set's author marked
        comes first), else a complete answer against a spoiled copy of it;
        None when there is neither (no answer long enough to spoil)."""
        rng = self._draw()
        cased = [item for item in self._pool if item.gold]
        if cased:
            return self._case_gold_item(cased[rng.randrange(len(cased))])
        options = [(item, alias) for item in self._pool for alias in item.aliases
                   if (o := item.outputs.get((item.targets[0].id, alias))) is not None and o.status == "complete"
                   and len(o.text.split()) >= GOLD_MIN_WORDS]
        if not options:
            return None
        item, alias = options[rng.randrange(len(options))]
        target = item.targets[0]
        real = item.outputs[(target.id, alias)]
        text, how = degraded_copy(real.text, rng)
        copy = real.model_copy(update={"id": new_ulid(), "contestant": DEGRADED, "text": text, "reasoning": None,
                                       "trace": None})
        outputs = dict(item.outputs)
        outputs[(target.id, DEGRADED)] = copy
        self.current = replace(item, repeats=item.repeats[:1], aliases=[alias, DEGRADED], outputs=outputs)
        self.order = shuffled_positions([alias, DEGRADED], self.rng)
        self.gold = (alias, how)
        return self.current

    def _case_gold_item(self, item: QueueItem) -> QueueItem:
        assert item.gold is not None
        target = item.targets[0]
        outputs = dict(item.outputs)
        for alias, text in ((GOLD_BETTER, item.gold["better"]), (GOLD_WORSE, item.gold["worse"])):
            outputs[(target.id, alias)] = OutputRecord(session_id=item.session_id, turn_id=target.id,
                                                       contestant=alias, label=alias, status="complete", text=text)
        self.current = replace(item, repeats=item.repeats[:1], aliases=[GOLD_BETTER, GOLD_WORSE], outputs=outputs)
        self.order = shuffled_positions([GOLD_BETTER, GOLD_WORSE], self.rng)
        self.gold = (GOLD_BETTER, "")
        return self.current

    def _advance_adaptive(self) -> QueueItem | None:
        assert self.planner is not None
        choice, self._redo = (self._redo, None) if self._redo is not None else (self.planner.next(), None)
        self.choice = choice
        if choice is None:
            self.current, self.order = None, []
            return None
        self.planner.served(choice)
        x, y = choice.candidate.pair
        self.order = [choice.left, y if choice.left == x else x]
        # the case with only the chosen pair's answers (the planner chose who is on the left)
        self.current = replace(self._by_key[str(choice.candidate.key)], aliases=[x, y])
        return self.current

    @property
    def labels(self) -> list[str]:
        """The screen letters, left to right."""
        return list(LABELS[:len(self.order)])

    @property
    def mapping(self) -> dict[str, str]:
        return dict(zip(self.labels, self.order, strict=True))

    def answers(self, item: QueueItem, target: TurnRecord) -> dict[str, OutputRecord | None]:
        """label -> the answer on screen under it for one turn of `item`."""
        return {label: item.outputs.get((target.id, alias)) for label, alias in self.mapping.items()}

    def warnings(self, choice: str) -> list[VoteWarning]:
        """Problems with the answer(s) `choice` picks, over every repeat judged."""
        item = self.current
        if item is None:
            return []
        seen: dict[str, VoteWarning] = {}
        for target in item.targets:
            for w in answer_warnings(choice, self.answers(item, target)):
                seen.setdefault(w.message, w)
        return list(seen.values())

    # ----- judging ----------------------------------------------------------
    async def vote(self, choice: str, ranking: list[str] | None = None, *, note: str | None = None,
                   confirm: bool = False) -> list[VoteRecord]:
        """Record the judgement of the current case (one vote per repeat
        judged). VoteError when malformed; VoteNeedsConfirmation when it picks
        an answer that failed, was cancelled or is missing, unless `confirm`."""
        item = self.current
        if item is None or self.judged or self.revealed_current:
            raise ValueError("no case waiting for a vote")
        check_choice(choice, self.labels, ranking)
        if self.gold is not None:
            await self._judge_gold(item, choice)
            return []
        if not confirm:
            warnings = self.warnings(choice)
            if warnings:
                raise VoteNeedsConfirmation(warnings)
        votes = make_votes(item.session_id, [t.id for t in item.targets], choice, mapping=self.mapping,
                           positions=self.labels, ranking=ranking, rater=self.rater, note=note,
                           revealed=self.reveal == "each",
                           choice_reason=self.choice.reason if self.planner is not None and self.choice else None)
        for v in votes:
            await self.store.add_vote(v)
        judged_choice = self.choice if self.planner is not None else None
        if self.planner is not None and judged_choice is not None:
            pair = judged_choice.candidate.pair
            scores = [pair_score(v.choice, v.ranking, v.mapping, v.positions, pair) for v in votes]
            self.planner.record(votes[0].id, judged_choice, scores[0])
            for v, score in zip(votes[1:], scores[1:], strict=True):     # the other repeats judged together
                if score is not None:
                    self.planner.battles[v.id] = (pair[0], pair[1], score)
        self.history.append(Judged(item, list(self.order), votes, judged_choice))
        self.done += 1
        self.judged = True
        return votes

    async def _judge_gold(self, item: QueueItem, choice: str) -> None:
        assert self.gold is not None
        model, how = self.gold
        better = next(label for label, alias in self.mapping.items() if alias == model)
        case = model == GOLD_BETTER
        rec = GoldCheckRecord(session_id=item.session_id, turn_id=item.targets[0].id, rater=self.rater,
                              source="case" if case else "degraded", model=None if case else model,
                              degradation=None if case else how, better=better, choice=choice,
                              positions=self.labels, correct=gold_correct(choice, better))
        await self.store.add_gold_check(rec)
        self.history.append(Judged(item, list(self.order), [], gold=rec))
        self.judged = True

    async def guess(self, label: str, guess: str | None, options: list[str]) -> BlindGuessRecord:
        """The blinding audit, after the vote on the current case and before
        its names are shown: which of `options` the rater thinks wrote the
        answer under `label` (None: no idea). ValueError out of turn."""
        last = self.history[-1] if self.history else None
        if not self.judged or last is None or not last.votes or last.item is not self.current:
            raise ValueError("a guess goes with the vote just cast")
        if label not in self.mapping:
            raise ValueError(f"label {label!r} is not on screen ({', '.join(self.labels)})")
        if guess is not None and guess not in options:
            raise ValueError(f"the guess {guess!r} is not one of the models offered")
        vote = last.votes[0]
        rec = BlindGuessRecord(vote_id=vote.id, session_id=vote.session_id, rater=self.rater, label=label,
                               actual=self.mapping[label], guess=guess, options=list(options))
        await self.store.add_blind_guess(rec)
        return rec

    async def reveal_current(self) -> list[RevealRecord]:
        """Show the current case's models without a vote (the rater asks):
        recorded as a reveal of each turn a vote would go on, so its case
        counts as revealed everywhere; it can no longer be judged blind by
        this rater, so it is done and the queue moves on."""
        item = self.current
        if item is None or self.judged or self.revealed_current:
            raise ValueError("no case waiting for a vote")
        if self.gold is not None:           # a gold pair: nothing real to reveal, it is simply done
            self.revealed_current = True
            return []
        now = time.time()
        records = [RevealRecord(session_id=item.session_id, turn_id=t.id, rater=self.rater, created=now)
                   for t in item.targets]
        for rec in records:
            await self.store.add_reveal(rec)
        self.revealed_current = True
        self.seen.append(item)
        return records

    async def tag(self, item: QueueItem, outputs: list[OutputRecord], tags: tuple[str, ...],
                  note: str | None = None, removed: tuple[str, ...] = ()) -> None:
        """Tag these answers of `item` as this rater (the note goes with the
        first tag) and remove the rater's tags named in `removed`; the item's
        `tags` follow, so the picker shows what is set."""
        for out in outputs:
            carried = item.tags.setdefault(out.id, [])
            for i, tag in enumerate(tags):
                rec = TagRecord(id=new_ulid(), output_id=out.id, tag=tag, rater=self.rater,
                                note=note if i == 0 else None, auto=False, created=time.time())
                await self.store.add_tag(rec)
                carried.append(rec)
            for rec in [t for t in carried if t.tag in removed]:
                await self.store.remove_tag(rec.id)
                carried.remove(rec)

    async def score(self, label: str, dimension: str, value: int) -> list[ScoreRecord]:
        """Score the answer(s) under `label` of the case on screen (each repeat's,
        repeats together) on one of its dimensions, 1-5, as this rater: before
        or after the vote, or instead of it (the case then still waits for its
        vote). A later score of the same answer and dimension supersedes it.
        ValueError for a gold pair (not real answers), an unknown label or
        dimension, or a value off the scale."""
        item = self.current
        if item is None or self.gold is not None:
            raise ValueError("no case to score")
        if label not in self.mapping:   # quoted bounded, on one line: a browser may send anything
            raise ValueError(f"no answer {one_line(label, 40)!r} on screen")
        if all(d.name != dimension for d in item.dimensions):
            raise ValueError(f"{one_line(dimension, 60)!r} is not a dimension of this session")
        if not valid_score(value):
            raise ValueError(f"a score is a whole number from 1 to 5, not {value!r}")
        now = time.time()
        records = []
        for target in item.targets:
            out = item.outputs.get((target.id, self.mapping[label]))
            if out is None:
                continue
            rec = ScoreRecord(output_id=out.id, dimension=dimension, value=value, rater=self.rater,
                              rater_kind="human", created=now)
            await self.store.add_score(rec)
            mine = item.scores.setdefault(out.id, [])
            mine[:] = [s for s in mine if s.dimension != dimension] + [rec]
            records.append(rec)
        return records

    def score_of(self, label: str, dimension: str) -> int | None:
        """This rater's current score of the answer under `label` on `dimension`
        (of its first repeat), for showing what is set."""
        item = self.current
        if item is None or label not in self.mapping:
            return None
        for target in item.targets:
            out = item.outputs.get((target.id, self.mapping[label]))
            for s in item.scores.get(out.id, ()) if out is not None else ():
                if s.dimension == dimension:
                    return s.value
        return None

    @property
    def position(self) -> int:
        """The number of the case on screen in this pass ("case 2 of 5"): the
        cases judged or revealed before it, plus itself. Once judged or
        revealed it is one of those already (a gold pair never is), so its
        number does not move on before the next case is shown."""
        counted = self.current is not None and self.gold is None and (self.judged or self.revealed_current)
        return self.done + len(self.seen) + (0 if counted else 1)

    @property
    def waiting(self) -> bool:
        """The case on screen still waits for a vote (neither judged nor revealed)."""
        return self._waiting_item() is not None

    def _waiting_item(self) -> QueueItem | None:
        """The case on screen if it still waits for a vote, else None."""
        return None if self.judged or self.revealed_current else self.current

    def skip(self) -> None:
        """The current case goes to the back of the queue."""
        item = self._waiting_item()
        if item is not None and self.gold is not None:     # a gold pair skipped is dropped
            self.current = None
            return
        if item is not None:
            if self.planner is not None and self.choice is not None:
                self.planner.skip(self.choice)
            else:
                self.items.append(item)
            self.current = None

    async def undo(self) -> Judged | None:
        """Withdraw the last judgement (kept in the record with `retracted_at`,
        no longer counted); its case comes back first, to judge again or skip."""
        if not self.history:
            return None
        last = self.history[-1]
        if last.gold is not None:           # a gold pair: its check withdrawn, the pair not served again
            await self.store.retract_gold_check(last.gold.id)
            self.history.pop()
            if self.current is last.item:
                self.current = None
            return last
        for v in last.votes:
            await self.store.retract_vote(v.id)
        self.history.pop()
        waiting = self._waiting_item()
        self.done -= 1
        if self.planner is not None:
            if waiting is not None and self.choice is not None:
                self.planner.restore(self.choice.candidate)
            if last.choice is not None:
                self.planner.retract(last.votes[0].id, last.choice)
                for v in last.votes[1:]:
                    self.planner.battles.pop(v.id, None)
                self._redo = last.choice        # served again first
            self.current = None
            return last
        if waiting is not None:
            self.items.insert(0, waiting)
        self.current = None
        self.items.insert(0, last.item)
        return last

    @property
    def finished(self) -> bool:
        if self.planner is not None:
            return not self.planner.remaining and not self.waiting
        return not self.items and not self.waiting

    async def finish(self) -> list[Judged]:
        """The end of the queue: every vote of this rater on these sessions not
        shown yet (this pass with reveal="end", or an earlier pass left half
        way) is recorded as revealed, so its case is. Returns this pass's
        judgements whose names are shown only now."""
        if not self.finished:
            raise ValueError("cases are still waiting for a vote")
        ids = [v.id for j in self.history for v in j.votes if v.revealed_at is None]   # gold pairs have none
        ids += [i for i in self._hidden_votes if i not in ids]
        if ids:
            await self.store.reveal_votes(ids)
        self._hidden_votes = []
        return list(self.history) if self.reveal == "end" else []


def _people_battles(loaded: LoadedSession) -> dict[str, tuple[str, str, float]]:
    """People's current votes of a session as comparisons for the adaptive
    planner: (vote id:pair) -> (model, model, score of the first). A
    judge's verdicts never enter (`counts_as_human`)."""
    out: dict[str, tuple[str, str, float]] = {}
    for v in loaded.current_votes():
        if not counts_as_human(v):
            continue
        try:
            battles = battles_of(v.choice, v.ranking, v.mapping, v.positions, v.id)
        except ValueError:
            continue
        for b in battles:
            score = 1.0 if b.outcome == "a" else 0.0 if b.outcome == "b" else 0.5
            out[f"{v.id}:{b.model_a}:{b.model_b}"] = (b.model_a, b.model_b, score)
    return out


#: The stand-in contestant of a gold pair's spoiled copy.
DEGRADED = "spoiled copy"
#: The stand-in contestants of a case's own gold answers (the sample set's `gold`).
GOLD_BETTER = "known better answer"
GOLD_WORSE = "known worse answer"
#: Answers shorter than this are not copied for a gold pair (too little to spoil).
GOLD_MIN_WORDS = 12


def degraded_copy(text: str, rng: random.Random) -> tuple[str, str]:
    """A clearly worse copy of an answer, and how it was spoiled: cut to its
    first third, or its sentences (or lines) in a shuffled order and half of
    them gone."""
    if rng.random() < 0.5:
        words = text.split()
        return " ".join(words[:max(1, len(words) // 3)]), "cut to its first third"
    parts = [p for p in text.replace("\n", " \n ").split(". ") if p.strip()]
    rng.shuffle(parts)
    kept = parts[:max(1, len(parts) // 2)]
    spoiled = ". ".join(kept)
    if spoiled.strip() == text.strip():
        words = text.split()
        return " ".join(words[:max(1, len(words) // 3)]), "cut to its first third"
    return spoiled, "sentences shuffled, half of them gone"
