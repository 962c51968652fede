"""Synthetic but realistic sessions (contestants, turns, outputs with chunk
timings, votes), shared by the tests and the benchmarks. In the core, not the
store, because its votes are made as every vote is (`core.stats.votes.make_votes`):
the data the store, export and report benchmarks measure is data lineup
could have written. Also stores with a planted truth (`planted_store`:
per-category strengths, latency, cost, check pass rates and a length bias
of the raters), for the tests and the benchmark of `lineup decide`; and
simulated raters voting through a vote queue, adaptive or uniform, until the
adaptive stop (`simulate_queue`), for the tests and the benchmark of
`lineup vote --adaptive`."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from core.stats.votes import JudgeFields, bad_choice, judge_rater, labels_for, make_votes
from store.ids import new_ulid
from store.records import (
    CheckResultRecord,
    ContestantRecord,
    OutputRecord,
    SessionRecord,
    TurnRecord,
    VoteRecord,
)

_WORDS = ("the model answers with a list of steps and a short code example that parses JSON "
          "carefully while keeping every number exact because the user asked for precision").split()


def synthetic_session(*, turns: int = 3, contestants: int = 2, blind: bool = False, votes: bool = True,
                      words: int = 60, seed: int = 0, kind: str = "chat", created: float = 1.7e9,
                      aliases: list[str] | None = None) -> tuple[SessionRecord, list[TurnRecord],
                                                                 list[OutputRecord], list[VoteRecord]]:
    rng = random.Random(seed)
    names = aliases or [f"model-{i}" for i in range(contestants)]
    order = list(range(len(names)))
    blind_labels = labels_for(len(names)) if blind else ""
    cs = [ContestantRecord(alias=n, provider="demo" if n.startswith("demo") else "openai", model=f"{n}-v1",
                           base_url="http://127.0.0.1:9/v1", params={"temperature": 0.2 * i},
                           price={"input_per_mtok": 1.0, "output_per_mtok": 2.0},
                           label=blind_labels[i] if blind else n, position=i, is_demo=n.startswith("demo"))
          for i, n in zip(order, names, strict=True)]
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


@dataclass
class Profile:
    """How one model answers in a planted store: its time to first token and
    duration (ms, each answer drawn uniformly within +-`spread` of them), its
    answers' mean length in words (drawn from a gamma of shape 4), the cost
    of an answer, and the chance that its answer passes a check (None: no
    checks recorded)."""

    ttft_ms: float = 300.0
    duration_ms: float = 1500.0
    words: float = 120.0
    cost: float | None = 1e-3
    pass_rate: float | None = None
    spread: float = 0.2


@dataclass
class PlantedVote:
    category: str
    model_a: str
    model_b: str
    outcome: str          # "a" | "b" | "tie"
    words_a: int
    words_b: int


@dataclass
class Planted:
    votes: list[PlantedVote] = field(default_factory=list)


def planted_store(store, truth: dict[str, dict[str, float]], votes: int | dict[str, int], *, seed: int = 0,
                  profiles: dict[str, Profile] | None = None, length_bias: float = 0.0, tie: float = 0.0,
                  created: float = 1.7e9, rater: str = "planted", judge: JudgeFields | None = None) -> Planted:
    """Write votes whose truth is known: in category c, model a beats model b
    with probability 1 / (1 + exp(-(ln 10 * (R_a - R_b) / 400 + length_bias * x)))
    where R = `truth[c]` (Elo points) and x = (words_a - words_b) / (words_a +
    words_b), the raters' taste for length; a tie with probability `tie`
    first. Each vote judges two models on its own turn (one session per
    category and pair of models, both answering every turn). With `judge`,
    the votes are that LLM judge's verdicts (one order each), not a
    person's: a judge planted with a length bias. Returns what was written,
    for a test to recompute anything independently."""
    rng = random.Random(seed)
    profiles = profiles or {}
    out = Planted()
    ms0 = int(created * 1000)
    counter = 0
    with store.batch():
        for cat, strengths in truth.items():
            names = list(strengths)
            n = votes if isinstance(votes, int) else votes[cat]
            pairs: dict[tuple[str, str], list[int]] = {}
            for k in range(n):
                a, b = rng.sample(names, 2)
                pairs.setdefault(tuple(sorted((a, b))), []).append(k)   # type: ignore[arg-type]
            for (x, y), ks in sorted(pairs.items()):
                counter += 1
                base = ms0 + counter * 1_000_000
                cs = [ContestantRecord(alias=m, provider="openai", model=f"{m}-v1", base_url="http://127.0.0.1:9/v1",
                                       price=None, label=label, position=i)
                      for i, (m, label) in enumerate(((x, "A"), (y, "B")))]
                session = SessionRecord(id=new_ulid(base), created=created + counter, kind="run",
                                        title=f"planted {cat} {x} {y}", contestants=cs, blind=True,
                                        revealed_at=created + counter + 1)
                store.create_session(session)
                for j, _ in enumerate(ks):
                    at = created + counter + j * 1e-3
                    turn = TurnRecord(id=new_ulid(base + 10 * j + 1), session_id=session.id, position=j,
                                      case_id=f"{cat}-{counter}-{j}", category=cat,
                                      user_message=f"planted question {counter}.{j}", created=at)
                    store.add_turn(turn)
                    words = {}
                    for c in cs:
                        p = profiles.get(c.alias, Profile())
                        w = max(1, int(round(rng.gammavariate(4.0, p.words / 4.0))))
                        words[c.alias] = w
                        ttft = p.ttft_ms * (1 + rng.uniform(-p.spread, p.spread))
                        dur = max(ttft + 1, p.duration_ms * (1 + rng.uniform(-p.spread, p.spread)))
                        oid = new_ulid(base + 10 * j + 2 + c.position)
                        store.finish_output(OutputRecord(
                            id=oid, session_id=session.id, turn_id=turn.id, contestant=c.alias, label=c.label,
                            status="complete", text=("word " * w).strip(), finish_reason="stop", sent_at=at,
                            ttft_ms=ttft, duration_ms=dur, input_tokens=20, output_tokens=w, cost=p.cost,
                            created=at))
                        if p.pass_rate is not None:
                            store.add_check_result(CheckResultRecord(
                                id=new_ulid(base + 10 * j + 5 + c.position), output_id=oid, check="planted",
                                spec={"type": "contains", "value": "word"}, passed=rng.random() < p.pass_rate))
                    first, second = (x, y) if rng.random() < 0.5 else (y, x)   # who is shown as A
                    if rng.random() < tie:
                        outcome = "tie"
                    else:
                        wa, wb = words[first], words[second]
                        z = (math.log(10) * (strengths[first] - strengths[second]) / 400.0
                             + length_bias * (wa - wb) / (wa + wb))
                        outcome = "a" if rng.random() < 1.0 / (1.0 + math.exp(-z)) else "b"
                    mapping = {"A": first, "B": second}
                    (vote,) = make_votes(session.id, [turn.id], {"a": "A", "b": "B", "tie": "tie"}[outcome],
                                         mapping=mapping, positions=["A", "B"],
                                         rater=judge_rater(judge.alias) if judge is not None else rater,
                                         revealed=judge is None, now=at + 1e-4, ids=[new_ulid(base + 10 * j + 9)],
                                         judge=judge)
                    store.add_vote(vote)
                    out.votes.append(PlantedVote(cat, first, second, outcome, words[first], words[second]))
    return out


@dataclass(frozen=True)
class QueuePass:
    """One simulated pass of a vote queue (`simulate_queue`): the votes it
    served, whether its stop fired, and the model on top when it ended."""

    votes: int
    stopped: bool
    top: str


def simulated_vote(rng: random.Random, true: dict[str, float], pair: tuple[str, str], error: float) -> float:
    """A simulated rater's score of pair[0]: a Bradley-Terry draw from the true
    (Elo) ratings, flipped with probability `error` (the rater's error rate)."""
    x, y = pair
    win = rng.random() < 1.0 / (1.0 + 10.0 ** ((true[y] - true[x]) / 400.0))
    if rng.random() < error:
        win = not win
    return 1.0 if win else 0.0


def simulate_queue(kind: str, true: dict[str, float], *, seed: int, cases: int, error: float = 0.1,
                   cap: int = 3000, level: float = 0.95, categories: int = 4, look: float = 0.0) -> QueuePass:
    """Simulated raters voting through a queue of every (case, pair) of the
    models in `true`, until the adaptive stop (`core.stats.adaptive.separated`,
    checked after every vote) fires or `cap` votes. `kind`: "adaptive" (the
    `AdaptivePlanner`'s choice) or "uniform" (every item in a seeded random
    order: the baseline). The same seed gives both kinds the same raters'
    random stream, and the stop is the same rule for both."""
    from itertools import combinations

    from core.stats.adaptive import AdaptivePlanner, Candidate, Choice, separated

    if kind not in ("adaptive", "uniform"):
        raise ValueError(f"the queue is adaptive or uniform, not {kind!r}")
    rng = random.Random(seed)
    items = [Candidate(key=f"case{k}", pair=pair, category=f"cat{k % categories}")
             for k in range(cases) for pair in combinations(sorted(true), 2)]
    planner = AdaptivePlanner(list(items), rng=random.Random(seed + 1), level=level)
    order = list(items)
    random.Random(seed + 2).shuffle(order)
    last = 0
    for n in range(1, min(cap, len(items)) + 1):
        if kind == "adaptive":
            choice = planner.next()
            assert choice is not None
            planner.served(choice)
        else:
            cand = order[n - 1]
            choice = Choice(cand, cand.pair[0], {})
        planner.record(f"v{n}", choice, simulated_vote(rng, true, choice.candidate.pair, error))
        if look and n > 100 and n - last < look * n:
            continue
        last = n
        st = planner.standing()
        if separated(st, level):
            return QueuePass(n, True, st.models[0])
    return QueuePass(min(cap, len(items)), False, planner.standing().models[0])
