"""Sessions written into a store the way the sessions layer writes them
(`Builder`: blind labels A, B, ...), and pairwise wins planted as votes
(`two_way`). Shared by the tests of the report and of its start."""

from __future__ import annotations

from store import ContestantRecord, OutputRecord, SessionRecord, Store, TurnRecord, VoteRecord

T0 = 1.75e9


class Builder:
    """Writes sessions the way the sessions layer does: blind labels A, B, ..."""

    def __init__(self, store: Store):
        self.store = store

    def session(self, aliases, *, demo=(), created=T0, prices=None, kind="chat"):
        cs = [ContestantRecord(alias=a, provider="demo" if a in demo else "openai", model=a + "-v1",
                               label="ABCDEFGH"[i], position=i, is_demo=a in demo,
                               price=(prices or {}).get(a)) for i, a in enumerate(aliases)]
        rec = SessionRecord(created=created, kind=kind, contestants=cs, blind=True)
        self.store.create_session(rec)
        return rec

    def turn(self, session, position, *, category=None, case_id=None, prompt="Say hi", repeat=0, created=T0):
        rec = TurnRecord(session_id=session.id, position=position, case_id=case_id, category=category,
                         user_message=prompt, repeat_index=repeat, created=created)
        self.store.add_turn(rec)
        return rec

    def output(self, session, turn, alias, *, status="complete", text="hello", ttft=100.0, duration=1100.0,
               out_tokens=50, in_tokens=10, error_kind=None, cost=None, attempt=1, created=T0):
        c = next(c for c in session.contestants if c.alias == alias)
        rec = OutputRecord(session_id=session.id, turn_id=turn.id, contestant=alias, label=c.label,
                           attempt=attempt, status=status, text=text, ttft_ms=ttft, duration_ms=duration,
                           output_tokens=out_tokens, input_tokens=in_tokens, error_kind=error_kind, cost=cost,
                           is_demo=c.is_demo, created=created)
        self.store.finish_output(rec)
        return rec

    def vote(self, session, turn, choice_alias, *, rater="ann", positions=None, ranking=None, created=T0,
             supersedes=None):
        mapping = {c.label: c.alias for c in session.contestants}
        label_of = {c.alias: c.label for c in session.contestants}
        choice = choice_alias if choice_alias in ("tie", "both_bad", "all_bad") else label_of[choice_alias]
        rec = VoteRecord(session_id=session.id, turn_id=turn.id, rater=rater, choice=choice, mapping=mapping,
                         positions=positions or [c.label for c in session.contestants], created=created,
                         ranking=[label_of[a] for a in ranking] if ranking else None, supersedes=supersedes)
        self.store.add_vote(rec)
        return rec


def two_way(b: Builder, wins: dict[tuple[str, str], int], **kw):
    """wins[(x, y)] = votes where x beat y; one session per pair, one turn per vote."""
    for (x, y), n in wins.items():
        s = b.session([x, y])
        for k in range(n):
            t = b.turn(s, k, **kw)
            b.vote(s, t, x)
