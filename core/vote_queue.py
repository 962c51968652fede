"""The blind vote queue's logic, without a UI: the cases left to judge, in
the order they were run; a fresh shuffle of the answers per case (recorded in
its votes: label A = leftmost); skip; undo (the vote is withdrawn and kept with
`retracted_at`); reveal after each vote or at the end, or of one case without
a vote when the rater asks (`reveal_current`: recorded, and the case leaves
that rater's queue); repeats judged apart or together. `tui.vote_queue` only draws it and forwards keys.

A case is a sample-set case (its follow-ups together, judged on its last
turn), or one chat turn (judged with the turns before it as context). With
`repeats="together"` every repeat of a case is judged at once; the vote is
recorded on each repeat's last turn. Votes are built by `core.votes`."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from core.votes import (
    LABELS,
    VoteNeedsConfirmation,
    VoteWarning,
    answer_warnings,
    check_choice,
    make_votes,
)
from store.ids import new_ulid
from store.records import LoadedSession, OutputRecord, RevealRecord, TagRecord, TurnRecord, VoteRecord

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


def build_items(loaded: LoadedSession, *, rater: str, repeats: str = "separate") -> list[QueueItem]:
    """Unvoted cases of one session (by `rater`), in the order they were run;
    a case `rater` revealed without a vote is left out (its names were seen)."""
    s = loaded.session
    if len(s.contestants) < 2:
        return []
    latest = _latest(loaded.outputs)
    checks: dict[str, list] = {}
    for c in loaded.checks:
        checks.setdefault(c.output_id, []).append(c)
    references = s.meta.get("references") or {}
    tags: dict[str, list] = {}
    for tag in loaded.tags:
        tags.setdefault(tag.output_id, []).append(tag)
    voted = {v.turn_id for v in loaded.current_votes() if v.rater == rater}
    seen = {r.turn_id for r in loaded.reveals if r.rater == rater}   # revealed to them without a vote
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
                         checks=checks, reference=references.get(turns[0].case_id), tags=tags)
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


class VoteQueue:
    """State and writes of one pass through the queue. `store` is an
    AsyncStore; `rng` fixes the shuffles (tests), else each is fresh;
    `case_seed` (a vote package's) makes each case's order a function of the
    seed, the rater and the case, the same on every pass (resume, undo)."""

    def __init__(self, store: AsyncStore, *, rater: str, session_id: str | None = None, reveal: Reveal = "each",
                 repeats: Repeats = "separate", rng: random.Random | None = None,
                 case_seed: str | None = None) -> None:
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

    async def load(self) -> None:
        """The unvoted cases of one session, or of every session (oldest first)."""
        if self.session_id:
            ids = [self.session_id]
        else:
            ids = [s.id for s in reversed(await self.store.list_sessions()) if s.turns]
        items: list[QueueItem] = []
        self._hidden_votes = []
        for sid in ids:
            loaded = await self.store.load_session(sid)
            items.extend(build_items(loaded, rater=self.rater, repeats=self.repeats))
            # votes of an earlier pass left before its end (reveal="end"): shown when this one ends
            self._hidden_votes += [v.id for v in loaded.current_votes()
                                   if v.rater == self.rater and v.revealed_at is None and loaded.session.blind]
        self.items, self.total, self.done = items, len(items), 0

    # ----- the case on screen -------------------------------------------------
    def advance(self) -> QueueItem | None:
        """The next case, in a fresh random order; None when none is left."""
        self.judged = False
        self.revealed_current = False
        if not self.items:
            self.current, self.order = None, []
            return None
        self.current = self.items.pop(0)
        rng = self.rng
        if self.case_seed is not None:
            rng = random.Random(f"{self.case_seed}\x1f{self.rater}\x1f{self.current.key}")
        self.order = shuffled_positions(self.current.aliases, rng)
        return self.current

    @property
    def labels(self) -> list[str]:
        """The screen letters, left to right."""
        return list(LABELS[:len(self.order)])

    @property
    def mapping(self) -> dict[str, str]:
        return dict(zip(self.labels, self.order))

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
        if not confirm:
            warnings = self.warnings(choice)
            if warnings:
                raise VoteNeedsConfirmation(warnings)
        votes = make_votes(item.session_id, [t.id for t in item.targets], choice, mapping=self.mapping,
                           positions=self.labels, ranking=ranking, rater=self.rater, note=note,
                           revealed=self.reveal == "each")
        for v in votes:
            await self.store.add_vote(v)
        self.history.append(Judged(item, list(self.order), votes))
        self.done += 1
        self.judged = True
        return votes

    async def reveal_current(self) -> list[RevealRecord]:
        """Show the current case's models without a vote (the rater asks):
        recorded as a reveal of each turn a vote would go on, so its case
        counts as revealed everywhere; it can no longer be judged blind by
        this rater, so it is done and the queue moves on."""
        item = self.current
        if item is None or self.judged or self.revealed_current:
            raise ValueError("no case waiting for a vote")
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
        if item is not None:
            self.items.append(item)
            self.current = None

    async def undo(self) -> Judged | None:
        """Withdraw the last judgement (kept in the record with `retracted_at`,
        no longer counted); its case comes back first, to judge again or skip."""
        if not self.history:
            return None
        last = self.history[-1]
        for v in last.votes:
            await self.store.retract_vote(v.id)
        self.history.pop()
        waiting = self._waiting_item()
        if waiting is not None:
            self.items.insert(0, waiting)
        self.current = None
        self.done -= 1
        self.items.insert(0, last.item)
        return last

    @property
    def finished(self) -> bool:
        return not self.items and not self.waiting

    async def finish(self) -> list[Judged]:
        """The end of the queue: every vote of this rater on these sessions not
        shown yet (this pass with reveal="end", or an earlier pass left half
        way) is recorded as revealed, so its case is. Returns this pass's
        judgements whose names are shown only now."""
        if not self.finished:
            raise ValueError("cases are still waiting for a vote")
        ids = [v.id for j in self.history for v in j.votes if v.revealed_at is None]
        ids += [i for i in self._hidden_votes if i not in ids]
        if ids:
            await self.store.reveal_votes(ids)
        self._hidden_votes = []
        return list(self.history) if self.reveal == "end" else []
