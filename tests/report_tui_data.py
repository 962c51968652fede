"""A deterministic database for the report screen's tests and snapshot:
four models in two-way sessions with known outcomes (one never loses, so its
interval is open above), two categories, latencies, errors, tags, checks, a
markup-looking model name, and a demo session that reports leave out."""

from __future__ import annotations

from store import Store
from store.records import (
    CheckResultRecord,
    ContestantRecord,
    OutputRecord,
    SessionRecord,
    TagRecord,
    TurnRecord,
    VoteRecord,
)

T0 = 1.75e9
ODD = "cyg[bold]nus"          # shown verbatim: never parsed as markup
MODELS = ("atlas", "borealis", ODD, "zenith")
# (x, y): votes where x beat y; zenith never loses or ties: open above
WINS = {("atlas", "borealis"): 9, ("borealis", "atlas"): 6, ("atlas", ODD): 12, (ODD, "atlas"): 4,
        ("borealis", ODD): 8, (ODD, "borealis"): 7, ("zenith", "atlas"): 3, ("zenith", ODD): 2}
TIES = {("atlas", "borealis"): 2}
BASE_TTFT = {"atlas": 180.0, "borealis": 420.0, ODD: 260.0, "zenith": 900.0, "demo-fast": 5.0, "demo-slow": 50.0}
TAG_EVERY = {"borealis": (3, "too_verbose"), ODD: (4, "hallucination"), "atlas": (5, "format_error")}


class _Ids:
    """Fixed, ordered ids: the same database every time."""

    def __init__(self, prefix: str = "01HX") -> None:
        self.prefix, self.n = prefix, 0

    def __call__(self) -> str:
        self.n += 1
        return f"{self.prefix}{self.n:022d}"


def _session(store, ids, names, *, demo=False, at=T0):
    cs = [ContestantRecord(alias=a, provider="demo" if demo else "openai", model=a + "-v1", label="AB"[i],
                           position=i, is_demo=demo) for i, a in enumerate(names)]
    rec = SessionRecord(id=ids(), created=at, kind="chat", contestants=cs, blind=True, revealed_at=at)
    store.create_session(rec)
    return rec


def _turn(store, ids, session, k, category, at):
    rec = TurnRecord(id=ids(), session_id=session.id, position=k, category=category, case_id=f"case-{k}",
                     user_message=f"question {k}", created=at)
    store.add_turn(rec)
    return rec


def _outputs(store, ids, session, turn, k, at):
    outs = []
    for c in session.contestants:
        alias = c.alias
        failing = alias == ODD and k % 7 == 3
        ttft = BASE_TTFT[alias] + (k * 37) % 200
        rec = OutputRecord(id=ids(), session_id=session.id, turn_id=turn.id, contestant=alias, label=c.label,
                           status="error" if failing else "complete", text="" if failing else f"answer {k}",
                           error_kind="timeout" if failing else None, ttft_ms=None if failing else ttft,
                           duration_ms=None if failing else ttft + 400 + (k * 53) % 900,
                           input_tokens=20, output_tokens=None if failing else 80 + (k * 11) % 60,
                           cost=None if failing else 0.0001 * (1 + k % 3), is_demo=c.is_demo, created=at)
        store.finish_output(rec)
        outs.append(rec)
        every = TAG_EVERY.get(alias)
        if every and k % every[0] == 0:
            store.add_tag(TagRecord(id=ids(), output_id=rec.id, tag=every[1], rater="ann", created=at))
        if alias in ("atlas", "borealis") and not failing:
            store.add_check_result(CheckResultRecord(id=ids(), output_id=rec.id, check="contains",
                                                     spec={"type": "contains"}, passed=k % 4 != 0))
            store.add_check_result(CheckResultRecord(id=ids(), output_id=rec.id, check="json_valid",
                                                     spec={"type": "json_valid"}, passed=k % 2 == 0))
    return outs


def _vote(store, ids, session, turn, choice_alias, at):
    label_of = {c.alias: c.label for c in session.contestants}
    choice = "tie" if choice_alias == "tie" else label_of[choice_alias]
    store.add_vote(VoteRecord(id=ids(), session_id=session.id, turn_id=turn.id, rater="ann", choice=choice,
                              mapping={c.label: c.alias for c in session.contestants},
                              positions=[c.label for c in session.contestants], created=at))


def make_report_db(path, *, real: bool = True, demo: bool = True) -> None:
    ids = _Ids()
    at = T0
    with Store.open(path) as store:
        if real:
            pairs: dict[frozenset, list[tuple[str, str]]] = {}
            for (x, y), n in WINS.items():
                pairs.setdefault(frozenset((x, y)), []).extend([(x, y)] * n)
            for (x, y), n in TIES.items():
                pairs.setdefault(frozenset((x, y)), []).extend([("tie", "tie")] * n)
            for key in sorted(pairs, key=sorted):
                outcomes = pairs[key]
                first = next(o for o in outcomes if o[0] != "tie")
                s = _session(store, ids, list(first), at=at)
                for k, (winner, _) in enumerate(outcomes):
                    at += 1
                    t = _turn(store, ids, s, k, "code" if k % 2 == 0 else "math", at)
                    _outputs(store, ids, s, t, k, at)
                    _vote(store, ids, s, t, winner, at)
        if demo:
            s = _session(store, ids, ["demo-fast", "demo-slow"], demo=True, at=at)
            for k, winner in enumerate(["demo-fast", "demo-fast", "demo-slow", "demo-fast"]):
                at += 1
                t = _turn(store, ids, s, k, "code", at)
                _outputs(store, ids, s, t, k, at)
                _vote(store, ids, s, t, winner, at)
