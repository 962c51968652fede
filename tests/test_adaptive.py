"""The adaptive vote queue (`core.stats.adaptive`, `lineup vote --adaptive`): the
warm-up serves the least-compared models, then the leader against the model
least separated from it; unvoted cases, categories and left/right positions
are balanced; the stop message comes only once the leader is separated, by
a sequential test whose false-stop rate on a planted tie at the top stays
under its nominal level (seeded simulations) and which fires on a clear gap; and
through `core.answering.vote_queue.VoteQueue` on a real store: items are pairs, the
choice reason is recorded with each vote, a judge's verdicts never steer
it, undo serves the same pair again, a resumed pass offers only the pairs
this rater has not voted on."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations

import anyio
import pytest
from tests.tui_sessions import ALIASES, CASES, make_run

from core.stats.adaptive import WARMUP, AdaptivePlanner, Candidate, Choice, boundary, misorder, standing, stop_message
from tests.synthetic import simulate_queue
from core.answering.vote_queue import VoteQueue
from store import AsyncStore, Store
from store.records import VoteRecord


def grid(models, cases, categories=2):
    return [Candidate(key=f"k{k}", pair=p, category=f"cat{k % categories}")
            for k in range(cases) for p in combinations(sorted(models), 2)]


def test_warm_up_serves_the_least_compared_models_first():
    planner = AdaptivePlanner(grid("abcd", 10), rng=random.Random(1))
    for n in range(6):
        planner.record(f"v{n}", Choice(Candidate("old", ("a", "b")), "a", {}), 1.0)
    choice = planner.next()
    assert set(choice.candidate.pair) == {"c", "d"}
    assert choice.reason["rule"].startswith("warm-up") and choice.reason["mode"] == "adaptive"


def test_after_the_warm_up_the_leader_meets_the_model_least_separated_from_it():
    # a beats c and d clearly but never met b; b and c are level, d loses clearly: the stop waits on a-b
    # (no direct vote yet), so a-b comes first; among the rest, the vote that narrows the a-b gap most is
    # the evenly matched b-c (it ties b to the models a has met), not the settled a-c or a-d
    battles = {}
    n = 0
    for _ in range(12):
        for x, y, s in [("a", "d", 1.0), ("b", "d", 1.0), ("c", "d", 1.0), ("b", "c", 1.0), ("b", "c", 0.0),
                        ("a", "c", 1.0)]:
            battles[f"v{n}"] = (x, y, s)
            n += 1
    planner = AdaptivePlanner(grid("abcd", 5), battles=battles, rng=random.Random(0))
    st = planner.standing()
    assert st.models[0] == "a" and st.models[-1] == "d"
    assert min(st.comparisons.values()) >= WARMUP
    choice = planner.next()
    assert choice.candidate.pair == ("a", "b") and "direct votes" in choice.reason["rule"]
    prio = planner.priorities(st)
    assert prio[("a", "b")][0] > max(v for pair, (v, _) in prio.items() if pair != ("a", "b"))
    assert prio[("b", "c")][0] > max(prio[("a", "c")][0], prio[("a", "d")][0])
    assert misorder(st, "b", "c") > 0.3 > misorder(st, "a", "d")
    # once a-b has no case left, the vote that narrows its gap most comes next
    planner.candidates = [c for c in planner.candidates if c.pair != ("a", "b")]
    choice = planner.next()
    assert choice.candidate.pair == ("b", "c") and "narrows the gap" in choice.reason["rule"]


def test_unvoted_cases_categories_and_positions_are_balanced():
    planner = AdaptivePlanner(grid("ab", 8, categories=2), rng=random.Random(3))
    cases, cats, lefts = Counter(), Counter(), Counter()
    for n in range(8):
        choice = planner.next()
        planner.served(choice)
        planner.record(f"v{n}", choice, 1.0 if n % 2 else 0.0)
        cases[choice.candidate.key] += 1
        cats[choice.candidate.category] += 1
        lefts[choice.left] += 1
    assert set(cases.values()) == {1} and cats == Counter({"cat0": 4, "cat1": 4})
    assert lefts == Counter({"a": 4, "b": 4})
    assert planner.next() is None


def test_the_stop_message_waits_for_a_separated_leader():
    close = {f"v{n}": ("a", "b", float(n % 2)) for n in range(40)}
    assert stop_message(standing(list(close.values()), ["a", "b"])) is None
    few = {f"v{n}": ("a", "b", 1.0 if n else 0.0) for n in range(6)}       # clear, but under 10 comparisons
    assert stop_message(standing(list(few.values()), ["a", "b"])) is None
    clear = [("a", "b", 1.0 if n % 10 else 0.0) for n in range(60)] + \
            [("a", "c", 1.0 if n % 10 else 0.0) for n in range(60)] + [("b", "c", float(n % 2)) for n in range(20)]
    st = standing(clear, ["a", "b", "c"])
    msg = stop_message(st)
    assert msg is not None and msg.startswith("you can stop: a is ahead of") and "95% confidence" in msg
    hidden = stop_message(st, named=False)
    assert hidden is not None and "a " not in hidden.replace("a tie", "") and "names at the end" in hidden
    # one model never compared with the leader's group: no stop
    assert stop_message(standing(clear, ["a", "b", "c", "e"])) is None


def test_the_sequential_boundary_asks_more_than_a_single_look():
    # always-valid: above the fixed 95% z (1.96) at every standard error, higher for a stricter level,
    # and tightest near the mixture's scale (tau = 100 Elo points), rising for much larger errors
    assert all(boundary(se, 0.05) > 1.96 for se in (1.0, 5.0, 20.0, 100.0, 400.0))
    assert boundary(20.0, 0.05 / 7) > boundary(20.0, 0.05)
    assert boundary(400.0, 0.05) > boundary(100.0, 0.05) and boundary(0.5, 0.05) > boundary(20.0, 0.05)


#: Seeds of the false-stop simulation; binomial(200, 0.05) is above 16 in under 6% of draws, so 16
#: false stops is the nominal 5% with a tolerance of about 1.6 binomial standard deviations (2.5 points).
TIE_SEEDS, TIE_TOLERATED = 200, 16


@pytest.mark.slow
def test_the_stop_does_not_fire_on_a_planted_tie_at_the_top_more_often_than_its_level():
    """The planted top two are equal, so any stop is a false one (it names
    one of them ahead of the other). Seeded passes of the adaptive queue,
    the stop looked at after every vote (as the vote screen does), raters
    wrong 10% of the time, up to 300 votes each: the false-stop rate stays
    under the nominal 5% within the stated tolerance. (The former rule, a
    95% interval looked at after every vote with no correction, fired on
    such ties far more often.)"""
    true = {"a": 1100.0, "b": 1100.0, "c": 900.0}
    passes = [simulate_queue("adaptive", true, seed=seed, cases=150, error=0.1, cap=300)
              for seed in range(TIE_SEEDS)]
    assert all(p.votes == 300 or p.stopped for p in passes)
    false_stops = sum(p.stopped for p in passes)
    print(f"false stops on a planted tie: {false_stops}/{TIE_SEEDS}")
    assert false_stops <= TIE_TOLERATED


@pytest.mark.slow
def test_the_stop_fires_on_a_clear_gap_with_the_true_best_on_top():
    true = {"a": 1250.0, "b": 1050.0, "c": 1000.0}
    votes = {}
    for kind in ("adaptive", "uniform"):
        passes = [simulate_queue(kind, true, seed=seed, cases=400, error=0.1, cap=1200) for seed in range(10)]
        assert all(p.stopped and p.top == "a" for p in passes), (kind, passes)
        votes[kind] = sorted(p.votes for p in passes)
    assert votes["adaptive"][5] < votes["uniform"][5]       # the (upper) medians: the adaptive queue stops sooner


def _make_db(tmp_path):
    db = tmp_path / "a.db"
    sid = make_run(db, CASES * 1 + [("c4", "math", ["three times three?"]), ("c5", "code", ["a sort"])])
    return db, sid


def test_the_adaptive_queue_serves_pairs_and_records_why(tmp_path):
    db, sid = _make_db(tmp_path)
    with Store.open(db) as s:
        loaded = s.load_session(sid)
        # a judge's verdict on c1: it must not steer the queue nor hide c1's pairs from the person
        t1 = next(t for t in loaded.turns if t.case_id == "c1")
        s.add_vote(VoteRecord(session_id=sid, turn_id=t1.id, rater="judge:demo/judge", rater_kind="judge",
                              judge="demo/judge", choice="A", mapping={"A": "kestrel", "B": "heron"},
                              positions=["A", "B"]))

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="tester", session_id=sid, rng=random.Random(2), adaptive=True)
        await queue.load()
        assert queue.planner is not None and not queue.planner.battles        # the judge's verdict left out
        assert queue.total == 5 * 3                                            # five cases, three pairs each
        item = queue.advance()
        assert len(queue.order) == 2 and set(queue.order) <= set(ALIASES) and queue.labels == ["A", "B"]
        assert set(item.aliases) == set(queue.order)
        first = queue.choice
        votes = await queue.vote("A")
        assert votes[0].choice_reason == first.reason and votes[0].choice_reason["mode"] == "adaptive"
        assert set(votes[0].mapping.values()) == set(first.candidate.pair)
        assert queue.stop_message is None
        # undo: the same (case, pair) comes back first
        await queue.undo()
        again = queue.advance()
        assert queue.choice is first and again.key == item.key
        await queue.vote("B")
        for _ in range(3):
            queue.advance()
            await queue.vote("tie")
        await store.aclose()
        return first

    anyio.run(go)
    with Store.open(db) as s:
        loaded = s.load_session(sid)
    mine = [v for v in loaded.current_votes() if v.rater == "tester"]
    assert len(mine) == 4 and all(v.choice_reason and v.choice_reason["mode"] == "adaptive" for v in mine)
    assert all(len(v.mapping) == 2 for v in mine)

    async def resume():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="tester", session_id=sid, rng=random.Random(5), adaptive=True)
        await queue.load()
        await store.aclose()
        return queue

    queue = anyio.run(resume)
    assert queue.total == 15 - 4 and len(queue.planner.battles) == 4    # the person's four votes steer it now
    voted = {(v.turn_id, tuple(sorted(v.mapping.values()))) for v in mine}
    offered = {(queue._by_key[str(c.key)].targets[0].id, c.pair) for c in queue.planner.candidates}
    assert not voted & offered


def test_a_plain_queue_records_no_choice_reason(tmp_path):
    db, sid = _make_db(tmp_path)

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="tester", session_id=sid, rng=random.Random(2))
        await queue.load()
        queue.advance()
        votes = await queue.vote("A")
        assert queue.stop_message is None
        await store.aclose()
        return votes

    (vote,) = anyio.run(go)
    assert vote.choice_reason is None and len(vote.mapping) == 3


@pytest.mark.slow
def test_the_adaptive_screen_shows_two_answers_records_why_and_says_when_to_stop(tmp_path):
    """`lineup vote --adaptive` in the TUI: two panes, nothing names a model
    before the vote, the vote carries its choice reason, and once people's
    votes separate the leader the screen says "you can stop" (after the
    names are shown)."""
    from tests.tui_support import leaks, open_store, run, wait_for

    from tui.app import LineupApp, VoteOptions
    from tui.vote_queue import VoteQueueScreen

    db = tmp_path / "s.db"
    cases = [(f"c{k}", "math" if k % 2 else "code", [f"question {k}"]) for k in range(30)]
    sid = make_run(db, cases)
    with Store.open(db) as s:      # three other people's votes: kestrel clearly ahead of both others
        loaded = s.load_session(sid)
        for rater, (k, t) in [(r, kt) for r in ("other1", "other2", "other3") for kt in enumerate(loaded.turns)]:
            winner = "heron" if k % 10 == 0 else "kestrel"
            s.add_vote(VoteRecord(session_id=sid, turn_id=t.id, rater=rater, choice="A",
                                  mapping={"A": winner, "B": "plover"} if k % 3 == 0 else
                                  {"A": winner, "B": "heron" if winner == "kestrel" else "kestrel"},
                                  positions=["A", "B"]))

    async def scenario():
        store = await open_store(db)
        app = LineupApp(store, vote=VoteOptions(session_id=sid, shuffle_seed=3, adaptive=True), rater="tester")
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen) and app.screen.current is not None,
                           "the queue")
            screen = app.screen
            await pilot.pause()
            assert len(screen.panes) == 2 and "pair 1 of 90" in str(screen.info.render())
            chrome = "\n".join([str(screen.info.render()), *[str(p.header.render()) for p in screen.panes],
                                *[m for _, m in app.notices]])
            assert leaks(chrome, ALIASES) == [] and "you can stop" not in chrome
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.judged, "the vote")
            await pilot.pause()
            info = str(screen.info.render())
            notices = [m for _, m in app.notices]
        await store.aclose()
        return info, notices

    info, notices = run(scenario())
    assert "you can stop: kestrel is ahead of" in info and "95% confidence" in info
    assert any(m.startswith("You can stop: kestrel") for m in notices)
    with Store.open(db) as s:
        mine = [v for v in s.load_session(sid).current_votes() if v.rater == "tester"]
    assert len(mine) == 1 and mine[0].choice_reason["mode"] == "adaptive" and len(mine[0].mapping) == 2


def test_confidence_without_adaptive_or_out_of_range_is_a_usage_error(tmp_path, capsys):
    from lineup.cli import main

    db = tmp_path / "u.db"
    assert main(["vote", "--db", str(db), "--confidence", "0.99"]) == 2
    assert "--confidence goes with --adaptive" in capsys.readouterr().err
    assert main(["vote", "--db", str(db), "--adaptive", "--confidence", "1.5"]) == 2
    assert "--confidence: a probability between 0.5 and 1" in capsys.readouterr().err


def _long_run(tmp_path):
    db = tmp_path / "g.db"
    sid = make_run(db, [(f"c{k}", "math", [f"question {k}"]) for k in range(12)])
    with Store.open(db) as s:       # answers long enough to spoil
        loaded = s.load_session(sid)
        for o in loaded.outputs:
            s.conn.execute("UPDATE output SET text = ? WHERE id = ?",
                           (". ".join(f"{o.text} sentence {i}" for i in range(6)) + ".", o.id))
        s.conn.commit()
    return db, sid


def test_gold_pairs_are_mixed_in_and_recorded_as_checks_never_votes(tmp_path):
    from core.answering.vote_queue import DEGRADED, degraded_copy

    db, sid = _long_run(tmp_path)
    text = "One. Two is next. Three comes after. Four ends it all here now."
    for seed in range(6):
        spoiled, how = degraded_copy(text, random.Random(seed))
        assert spoiled != text and len(spoiled) < len(text) and how

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="tester", session_id=sid, rng=random.Random(7), gold_rate=0.5)
        await queue.load()
        golds, real, undone = [], 0, 0
        while queue.advance() is not None:
            if queue.gold is not None:
                assert DEGRADED in queue.order and len(queue.order) == 2
                better = next(lab for lab, a in queue.mapping.items() if a != DEGRADED)
                # this rater gets every gold pair right except the first
                assert await queue.vote(better if golds else "tie") == []
                if len(golds) == 1 and not undone:      # undo a gold judgement: its check is withdrawn
                    assert (await queue.undo()).gold is not None
                    undone += 1
                    continue
                golds.append(queue.history[-1].gold)
            else:
                await queue.vote("A")
                real += 1
        await store.aclose()
        return golds, real

    golds, real = anyio.run(go)
    assert real == 12 and 3 <= len(golds) <= 10
    assert golds[0].correct is False and all(g.correct for g in golds[1:])
    assert all(g.source == "degraded" and g.model in ALIASES and g.degradation for g in golds)
    with Store.open(db) as s:
        loaded = s.load_session(sid)
        assert len([v for v in loaded.current_votes() if v.rater == "tester"]) == 12     # gold pairs: no votes
        rows = s.conn.execute("SELECT correct, retracted_at IS NOT NULL FROM gold_check ORDER BY id").fetchall()
    assert len(rows) == len(golds) + 1 and sum(r[1] for r in rows) == 1      # the withdrawn one kept, marked


def test_gold_accuracy_reaches_the_report(tmp_path):
    from core.report.build import build_report

    db, sid = _long_run(tmp_path)

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="tester", session_id=sid, rng=random.Random(1), gold_rate=0.6)
        await queue.load()
        while queue.advance() is not None:
            if queue.gold is not None:
                await queue.vote(next(lab for lab, a in queue.mapping.items() if a != "spoiled copy"))
            else:
                await queue.vote("A")
        await store.aclose()

    anyio.run(go)
    with Store.open(db) as s:
        n = s.conn.execute("SELECT count(*) FROM gold_check").fetchone()[0]
        report = build_report(s)
    (row,) = report.rater_quality.gold
    assert row.rater == "tester" and row.gold_pairs == n and row.correct == n


def test_the_blinding_guess_goes_with_the_vote_just_cast(tmp_path):
    import pytest

    db, sid = _make_db(tmp_path)

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="tester", session_id=sid, rng=random.Random(2), reveal="end")
        await queue.load()
        queue.advance()
        with pytest.raises(ValueError, match="goes with the vote"):
            await queue.guess("A", "kestrel", ALIASES)
        (vote,) = await queue.vote("B")
        with pytest.raises(ValueError, match="not one of the models"):
            await queue.guess("A", "gpt-9", ALIASES)
        rec = await queue.guess("A", "kestrel", ALIASES)
        none = await queue.guess("B", None, ALIASES)
        await store.aclose()
        return vote, rec, none

    vote, rec, none = anyio.run(go)
    assert rec.vote_id == vote.id and rec.actual == vote.mapping["A"] and rec.guess == "kestrel"
    assert none.guess is None and none.actual == vote.mapping["B"]
    with Store.open(db) as s:
        assert s.conn.execute("SELECT count(*) FROM blind_guess").fetchone()[0] == 2


@pytest.mark.slow
def test_the_vote_screen_serves_gold_pairs_and_says_what_they_were(tmp_path):
    from tests.tui_support import leaks, open_store, run, wait_for

    from tui.app import LineupApp, VoteOptions
    from tui.vote_queue import VoteQueueScreen

    db, sid = _long_run(tmp_path)

    async def scenario():
        store = await open_store(db)
        app = LineupApp(store, vote=VoteOptions(session_id=sid, shuffle_seed=7, gold_rate=0.9), rater="tester")
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen) and app.screen.current is not None,
                           "the queue")
            screen = app.screen
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.judged, "the first vote")
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.queue.gold is not None, "a gold pair")
            await pilot.pause()
            chrome = "\n".join([str(screen.info.render()), *[str(p.header.render()) for p in screen.panes]])
            assert len(screen.panes) == 2 and leaks(chrome, ALIASES + ["spoiled"]) == []
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.judged, "the gold vote")
            await pilot.pause()
            info = str(screen.info.render())
            names = [p.name_shown for p in screen.panes]
        await store.aclose()
        return info, names

    info, names = run(scenario())
    assert "a check pair (one answer was a spoiled copy)" in info
    assert any("spoiled copy" in n for n in names)
    with Store.open(db) as s:
        assert s.conn.execute("SELECT count(*) FROM gold_check").fetchone()[0] == 1
        assert len([v for v in s.load_session(sid).current_votes() if v.rater == "tester"]) == 1


@pytest.mark.slow
def test_the_blinding_audit_asks_before_the_names_and_records_the_guess(tmp_path):
    from tests.tui_support import open_store, run, wait_for

    from tui.app import LineupApp, VoteOptions
    from tui.guess_picker import GuessPicker
    from tui.vote_queue import VoteQueueScreen

    db, sid = _make_db(tmp_path)

    async def scenario():
        store = await open_store(db)
        app = LineupApp(store, vote=VoteOptions(session_id=sid, shuffle_seed=3, blinding_audit=True), rater="tester")
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen) and app.screen.current is not None,
                           "the queue")
            screen = app.screen
            order = list(screen.order)
            await pilot.press("b")
            await wait_for(pilot, lambda: isinstance(app.screen, GuessPicker), "the question")
            assert app.screen.models == sorted(ALIASES)
            assert [p.name_shown for p in screen.panes] == ["A", "B"] + ["C"] * (len(screen.panes) == 3)
            await pilot.press("down", "enter")                          # the second model in name order
            await wait_for(pilot, lambda: app.screen is screen and " · " in screen.panes[0].name_shown, "the names")
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.current is not None and not screen.judged, "the next case")
            await pilot.press("a")
            await wait_for(pilot, lambda: isinstance(app.screen, GuessPicker), "the second question")
            await pilot.press("escape")                                 # no answer: nothing recorded
            await wait_for(pilot, lambda: app.screen is screen and " · " in screen.panes[0].name_shown, "the names again")
        await store.aclose()
        return order

    order = run(scenario())
    with Store.open(db) as s:
        rows = s.conn.execute("SELECT label, actual, guess, options FROM blind_guess").fetchall()
    assert len(rows) == 1
    label, actual, guess, options = rows[0]
    assert label == "A" and actual == order[0] and guess == sorted(ALIASES)[1]


def test_a_sample_sets_gold_answers_become_gold_pairs(tmp_path, monkeypatch):
    import json

    import pytest

    from core.answering.sampleset import Case
    from core.answering.vote_queue import GOLD_BETTER, GOLD_WORSE
    from lineup.cli import main

    with pytest.raises(ValueError, match="better"):
        Case(id="x", category="c", prompt="p", gold={"worse": "w"})
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    db = tmp_path / "g.db"
    sample = tmp_path / "set.jsonl"
    sample.write_text("".join(json.dumps({"id": f"c{k}", "category": "maths", "prompt": f"{k} plus {k}?",
                                          "gold": {"better": f"{2 * k}", "worse": f"{2 * k + 1}, I think"}})
                              + "\n" for k in range(4)))
    assert main(["run", str(sample), "-m", "demo/concise", "-m", "demo/thorough", "--quiet", "--db", str(db)]) == 0

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="tester", rng=random.Random(4), gold_rate=0.9)
        await queue.load()
        checks = []
        assert all(i.gold for i in queue.items)
        while queue.advance() is not None:
            if queue.gold is not None:                  # the set's own gold answers come first
                assert set(queue.order) == {GOLD_BETTER, GOLD_WORSE}
                target = queue.current.targets[0]
                texts = {a: queue.current.outputs[(target.id, a)].text for a in queue.order}
                assert texts[GOLD_BETTER] + ", I think" != texts[GOLD_WORSE]      # the set's own answers
                await queue.vote(next(lab for lab, a in queue.mapping.items() if a == GOLD_BETTER))
                checks.append(queue.history[-1].gold)
            else:
                await queue.vote("A")
        await store.aclose()
        return checks

    with Store.open(db) as s:
        (summary,) = s.list_sessions()
        assert s.load_session(summary.id).session.meta["gold"]["c1"] == {"better": "2", "worse": "3, I think"}
    checks = anyio.run(go)
    assert checks and all(c.source == "case" and c.correct and c.model is None for c in checks)


def test_importing_blind_guesses_says_guesses(tmp_path, capsys):
    """`lineup import` named what it added by table: "2 blind guesss"."""
    from lineup.cli import main

    db, sid = _make_db(tmp_path)

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="tester", session_id=sid, rng=random.Random(2), reveal="end")
        await queue.load()
        queue.advance()
        await queue.vote("B")
        await queue.guess("A", "kestrel", ALIASES)
        await queue.guess("B", None, ALIASES)
        await store.aclose()

    anyio.run(go)
    capsys.readouterr()
    assert main(["import", str(db), "--db", str(tmp_path / "team.db")]) == 0
    out = capsys.readouterr().out
    assert "2 blind guesses" in out and "1 vote," in out and "guesss" not in out, out
