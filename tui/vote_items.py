"""What the blind vote queue shows: cases without a vote, built from loaded
sessions. Pure functions (no Textual) so order, grouping and the recorded
shuffle are tested directly.

A case is a sample-set case (its follow-ups together, judged on its last
turn), or one chat turn (judged with the turns before it as context). With
`repeats="together"` every repeat of a case is judged at once; the vote is
recorded on each repeat's last turn."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from lineup.ids import new_ulid
from lineup.store.records import LoadedSession, OutputRecord, TurnRecord, VoteRecord

LABELS = "ABCDEFGH"


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
    """Unvoted cases of one session (by `rater`), in the order they were run."""
    s = loaded.session
    if len(s.contestants) < 2:
        return []
    latest = _latest(loaded.outputs)
    checks: dict[str, list] = {}
    for c in loaded.checks:
        checks.setdefault(c.output_id, []).append(c)
    references = s.meta.get("references") or {}
    tags: dict[str, list] = {}
    for t in loaded.tags:
        tags.setdefault(t.output_id, []).append(t)
    voted = {v.turn_id for v in loaded.current_votes() if v.rater == rater}
    aliases = [c.alias for c in sorted(s.contestants, key=lambda c: c.position)]

    groups: dict[tuple, list[TurnRecord]] = {}
    order: list[tuple] = []
    for t in loaded.turns:
        key = ("case", t.case_id, t.repeat_index) if t.case_id else ("turn", t.id)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(t)

    def judgeable(turns: list[TurnRecord]) -> bool:
        last = turns[-1]
        answers = [latest.get((last.id, a)) for a in aliases]
        present = [o for o in answers if o is not None and o.status != "streaming"]
        return len(present) >= 2 and any(o.status == "complete" for o in present) and last.id not in voted

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


def queue_votes(item: QueueItem, order: list[str], choice: str, *, ranking: list[str] | None, rater: str,
                note: str | None, reveal_now: bool, supersedes: dict[str, str] | None = None,
                now: float | None = None) -> list[VoteRecord]:
    """One vote per judged turn. Labels are the screen letters (A = leftmost);
    `mapping` says which model each letter was, `positions` the order shown."""
    now = time.time() if now is None else now
    labels = list(LABELS[:len(order)])
    mapping = dict(zip(labels, order))
    supersedes = supersedes or {}
    return [
        VoteRecord(id=new_ulid(), session_id=item.session_id, turn_id=t.id, rater=rater, choice=choice,
                   ranking=list(ranking) if ranking else None, mapping=mapping, positions=labels,
                   created=now, revealed_at=now if reveal_now else None, note=note,
                   supersedes=supersedes.get(t.id))
        for t in item.targets
    ]


def scrub(text: str, contestants) -> str:
    """Provider text with every contestant's identity hidden (see `blind_safe`)."""
    from lineup.config import ModelConfig
    from lineup.sessions import HIDDEN, blind_safe

    fakes = []
    for c in contestants:
        try:
            cfg = ModelConfig(alias=c.alias, provider=c.provider, model=c.model, base_url=c.base_url)
        except Exception:   # an imported provider name we do not know: hide the names at least
            cfg = ModelConfig(alias=c.alias, provider="demo", model=c.model, base_url=c.base_url)
            for word in (c.provider,):
                text = text.replace(word, HIDDEN)
        fakes.append(SimpleNamespace(config=cfg))
    return blind_safe(text, fakes)
