"""Synthetic but realistic sessions (contestants, turns, outputs with chunk
timings, votes), shared by the tests and the benchmarks. In the core, not the
store, because its votes are made as every vote is (`core.votes.make_votes`):
the data the store, export and report benchmarks measure is data lineup
could have written."""

from __future__ import annotations

import random
import string

from core.votes import bad_choice, make_votes
from store.ids import new_ulid
from store.records import (
    ContestantRecord,
    OutputRecord,
    SessionRecord,
    TurnRecord,
    VoteRecord,
)

LABELS = string.ascii_uppercase
_WORDS = ("the model answers with a list of steps and a short code example that parses JSON "
          "carefully while keeping every number exact because the user asked for precision").split()


def synthetic_session(*, turns: int = 3, contestants: int = 2, blind: bool = False, votes: bool = True,
                      words: int = 60, seed: int = 0, kind: str = "chat", created: float = 1.7e9,
                      aliases: list[str] | None = None) -> tuple[SessionRecord, list[TurnRecord],
                                                                 list[OutputRecord], list[VoteRecord]]:
    rng = random.Random(seed)
    names = aliases or [f"model-{i}" for i in range(contestants)]
    order = list(range(len(names)))
    cs = [ContestantRecord(alias=n, provider="demo" if n.startswith("demo") else "openai", model=f"{n}-v1",
                           base_url="http://127.0.0.1:9/v1", params={"temperature": 0.2 * i},
                           price={"input_per_mtok": 1.0, "output_per_mtok": 2.0},
                           label=LABELS[i] if blind else n, position=i, is_demo=n.startswith("demo"))
          for i, n in zip(order, names)]
    ms = int(created * 1000)
    session = SessionRecord(id=new_ulid(ms), created=created, kind=kind, title=f"synthetic {seed}",
                            contestants=cs, system="Be brief.", params={"temperature": 0.7, "max_tokens": 512},
                            seed=seed, blind=blind)
    ts, outs, vs = [], [], []
    for p in range(turns):
        at = created + p
        turn = TurnRecord(id=new_ulid(ms + p * 1000), session_id=session.id, position=p,
                          case_id=f"case-{p}", category=rng.choice(["code", "math", "writing"]),
                          user_message=f"Question {p}: " + " ".join(rng.choices(_WORDS, k=12)), created=at)
        ts.append(turn)
        for c in cs:
            n = max(1, words + rng.randint(-words // 4, words // 4))
            chunks = [rng.choice(_WORDS) + " " for _ in range(n)]
            t, chunk_ms = rng.randint(150, 600), []
            for _ in chunks:
                t += rng.randint(5, 40)
                chunk_ms.append(t)
            outs.append(OutputRecord(
                id=new_ulid(ms + p * 1000 + 1), session_id=session.id, turn_id=turn.id, contestant=c.alias,
                label=c.label, status="complete", text="".join(chunks), finish_reason="stop", sent_at=at,
                ttft_ms=float(chunk_ms[0]), duration_ms=float(chunk_ms[-1] + 3), chunk_ms=chunk_ms,
                chunk_chars=[len(x) for x in chunks], input_tokens=30, output_tokens=n, cost=n * 2e-6,
                is_demo=c.is_demo, created=at))
        if votes and len(cs) >= 2:
            labels = [c.label for c in cs]
            positions = labels[:]
            rng.shuffle(positions)
            choice = rng.choice(labels + ["tie", bad_choice(len(cs))])
            vs += make_votes(session.id, [turn.id], choice, mapping={c.label: c.alias for c in cs},
                             positions=positions, rater="tester", revealed=False, now=at + 0.5,
                             ids=[new_ulid(ms + p * 1000 + 2)])
    return session, ts, outs, vs


def write_synthetic(store, session: SessionRecord, turns: list[TurnRecord], outputs: list[OutputRecord],
                    votes: list[VoteRecord]) -> None:
    """Write one synthetic session in a single transaction."""
    with store.batch():
        store.create_session(session)
        for t in turns:
            store.add_turn(t)
        for o in outputs:
            store.finish_output(o)
        for v in votes:
            store.add_vote(v)
