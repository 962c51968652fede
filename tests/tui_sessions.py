"""Sessions recorded for the TUI tests: a `run` of cases over three models
(`make_run`, `CASES`), a two-model chat with a vote and a tag (`make_chat`),
and demo models by the number (`demo_models`)."""

from __future__ import annotations

from providers.model_config import ModelConfig
from store import Store
from store.records import ContestantRecord, OutputRecord, SessionRecord, TagRecord, TurnRecord, VoteRecord

ALIASES = ["kestrel", "heron", "plover"]
IDENTITY = ALIASES + ["kestrel-large", "heron-small", "plover-mini", "anthropic"]


def answer(alias: str, case: str, repeat: int = 0, follow: int = 0) -> str:
    return f"Answer from {alias} to {case} (repeat {repeat}, step {follow})"


def make_run(path, cases, *, aliases=ALIASES, repeats=1, voted=(), created=1_700_000_000.0, sid=None,
             blind=False, meta=None, kind="run"):
    """A `run` session: cases = [(case_id, category, [prompt, follow-up...])]. Blind: labels A, B, C
    by position, as `lineup run` makes them."""
    with Store.open(path) as store:
        rec = SessionRecord(
            id=sid or SessionRecord.model_fields["id"].default_factory(), created=created, kind=kind,
            title="nightly set",
            contestants=[ContestantRecord(alias=a, provider="anthropic", model=f"{a}-{size}",
                                          label="ABC"[i] if blind else a, position=i)
                         for i, (a, size) in enumerate(zip(aliases, ["large", "small", "mini"], strict=True))],
            blind=blind, meta=meta or {})
        store.create_session(rec)
        pos = 0
        turns = {}
        for case_id, category, prompts in cases:
            for r in range(repeats):
                for f, prompt in enumerate(prompts):
                    turn = TurnRecord(session_id=rec.id, position=pos, case_id=case_id, category=category,
                                      user_message=prompt, follow_up_index=f, repeat_index=r, created=created + pos)
                    pos += 1
                    store.add_turn(turn)
                    turns[(case_id, r, f)] = turn
                    for a in aliases:
                        label = next(c.label for c in rec.contestants if c.alias == a)
                        out = OutputRecord(session_id=rec.id, turn_id=turn.id, contestant=a, label=label,
                                           text=answer(a, case_id, r, f), status="complete",
                                           chunk_ms=[5], chunk_chars=[len(answer(a, case_id, r, f))])
                        store.start_output(out)
                        store.finish_output(out)
        for case_id in voted:
            turn = turns[(case_id, 0, 0)]
            store.add_vote(VoteRecord(session_id=rec.id, turn_id=turn.id, rater="tester", choice="tie",
                                      mapping={c.label: c.alias for c in rec.contestants},
                                      positions=[c.label for c in rec.contestants]))
        return rec.id


CASES = [("c1", "math", ["two plus two?"]),
         ("c2", "code", ["write a loop", "now in reverse"]),
         ("c3", "format", ["a haiku"])]


def pane_aliases(screen) -> list[str]:
    """Which model's answer each pane shows (read from the answer text)."""
    out = []
    for pane in screen.panes:
        text = pane.body.answer_text()
        out.append(next(a for a in ALIASES if f"from {a} " in text))
    return out


def make_chat(path, *, blind: bool, chunk_ms=(0, 100_000)) -> str:
    """A two-contestant chat session with a vote and a tag."""
    with Store.open(path) as store:
        rec = SessionRecord(kind="chat", blind=blind, revealed_at=None,
                            contestants=[ContestantRecord(alias="wren", provider="openai", model="wren-2",
                                                          label="A" if blind else "wren", position=0),
                                         ContestantRecord(alias="lark", provider="openai", model="lark-1",
                                                          label="B" if blind else "lark", position=1)])
        store.create_session(rec)
        turn = TurnRecord(session_id=rec.id, position=0, user_message="sing something")
        store.add_turn(turn)
        outs = []
        for c, text in zip(rec.contestants, ["la la la", "tweet tweet"], strict=True):
            half = len(text) // 2
            out = OutputRecord(session_id=rec.id, turn_id=turn.id, contestant=c.alias, label=c.label,
                               status="complete", text=text, chunk_ms=list(chunk_ms),
                               chunk_chars=[half, len(text) - half], ttft_ms=5.0, duration_ms=50.0,
                               output_tokens=4)
            store.start_output(out)
            store.finish_output(out)
            outs.append(out)
        store.add_tag(TagRecord(output_id=outs[1].id, tag="too_verbose", rater="tester"))
        if not blind:
            store.add_vote(VoteRecord(session_id=rec.id, turn_id=turn.id, rater="tester", choice="lark",
                                      mapping={"wren": "wren", "lark": "lark"}, positions=["wren", "lark"]))
        return rec.id


#: The four demo styles.
STYLES = ("concise", "thorough", "quirky", "thinker")


def demo_models(n: int) -> list[ModelConfig]:
    """`n` demo models with distinct aliases (the four demo styles, repeated)."""
    return [ModelConfig(alias=f"demo/{STYLES[i % 4]}{'' if i < 4 else i}", provider="demo", model=STYLES[i % 4])
            for i in range(n)]
