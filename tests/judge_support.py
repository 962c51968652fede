"""People and an LLM judge of planted agreement: categories drawn so that the
judge's Cohen's kappa is a chosen value (`planted`), and a store holding their
votes on the same pairs (`store_with_verdicts`). Shared by the tests of judge
calibration and of judge style control."""

from __future__ import annotations

import numpy as np

from core.answering.judge import JudgePrompt
from core.stats.votes import JudgeFields, judge_rater, make_votes
from store import Store
from store.records import ContestantRecord, SessionRecord, TurnRecord

MARGINALS = np.array([0.45, 0.10, 0.45])   # first better, tie, second better


def planted(rng: np.random.Generator, n: int, kappa: float) -> tuple[np.ndarray, np.ndarray]:
    """People's categories from MARGINALS; the judge copies them with
    probability `kappa`, else draws its own from the same marginals: its
    expected Cohen's kappa is exactly `kappa`."""
    human = rng.choice(3, size=n, p=MARGINALS)
    own = rng.choice(3, size=n, p=MARGINALS)
    judge = np.where(rng.random(n) < kappa, human, own)
    return human, judge


MODELS = ["m-alpha", "m-beta", "m-gamma"]


def store_with_verdicts(tmp_path, pairs: list[tuple[str, str, int, int]], *, judge_orders: int = 2) -> Store:
    """A run session with one case per entry (first, second, people's
    category, the judge's category); a person votes on it, the judge in
    `judge_orders` orders, always the same verdict."""
    store = Store.open(tmp_path / "cal.db")
    session = SessionRecord(kind="run", blind=True, contestants=[
        ContestantRecord(alias=m, provider="openai", model=m, label="ABC"[i], position=i) for i, m in enumerate(MODELS)])
    store.create_session(session)
    prompt = JudgePrompt()
    fields = JudgeFields(alias="judge", prompt_hash=prompt.hash)

    def choice(cat: int) -> str:
        return {0: "A", 1: "tie", 2: "B"}[cat]

    with store.batch():
        for k, (x, y, human, judge) in enumerate(pairs):
            turn = TurnRecord(session_id=session.id, position=k, case_id=f"c{k}", category="odd" if k % 2 else "even",
                              user_message=f"question {k}")
            store.add_turn(turn)
            (v,) = make_votes(session.id, [turn.id], choice(human), mapping={"A": x, "B": y}, positions=["A", "B"],
                              rater="ana" if k % 3 else "bo", revealed=True)
            store.add_vote(v)
            for first, second, cat in ((x, y, judge), (y, x, 2 - judge))[:judge_orders]:
                (j,) = make_votes(session.id, [turn.id], choice(cat), mapping={"A": first, "B": second},
                                  positions=["A", "B"], rater=judge_rater("judge"), revealed=False, judge=fields)
                store.add_vote(j)
    return store
