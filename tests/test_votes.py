"""What a vote means (core/stats/votes.py) and the vote queue's logic
(core/answering/vote_queue.py), without a UI: kinds and validation, warnings before a
pick that failed, attribution through the vote's own mapping, reveal per judged
unit, undo as a kept withdrawal, reveal at the end."""

from __future__ import annotations

import json
import random

import anyio
import pytest
from tests.tui_sessions import ALIASES, CASES, make_run

from core.stats import votes as V
from tests.synthetic import synthetic_session, write_synthetic
from core.answering.vote_queue import VoteQueue, build_items, shuffled_positions
from store import AsyncStore, Store, StoreError
from store.records import UNIT_KEY_SQL, LoadedSession, OutputRecord, VoteRecord


def _load(path, sid) -> LoadedSession:
    with Store.open(path) as s:
        return s.load_session(sid)


# ---------------------------------------------------------------------- kinds and validation

def battles(v: VoteRecord) -> list[V.Battle]:
    """A stored vote's pairwise outcomes, read as the report reads them."""
    return V.battles_of(v.choice, v.ranking, v.mapping, v.positions, v.id)


def test_valid_choices():
    assert V.valid_choices(["A", "B"]) == ["A", "B", "tie", "both_bad"]
    assert V.valid_choices(["A", "B", "C"]) == ["A", "B", "C", "tie", "all_bad"]


@pytest.mark.parametrize("choice, ranking, message", [
    ("D", None, "not one of the labels"),
    ("A", ["A", "B"], "places all 3; C not placed"),          # n-1 picks is not a ranking of 3
    ("A", ["A", "B", "B"], "twice"),
    ("A", ["B", "A", "C"], "starts with 'B'"),
    ("tie", ["A", "B", "C"], "both a tie and a ranking"),
    ("A", ["A", "B", "Z"], "'Z' is not one of the labels"),
])
def test_malformed_votes_are_refused(choice, ranking, message):
    with pytest.raises(V.VoteError, match=message):
        V.check_choice(choice, ["A", "B", "C"], ranking)
    with pytest.raises(V.VoteError, match=message):
        V.make_votes("S", ["T"], choice, mapping={"A": "x", "B": "y", "C": "z"}, positions=["A", "B", "C"],
                     ranking=ranking, rater="r", revealed=True)


def test_ranking_in_progress():
    assert V.ranking_missing(["B"], ["A", "B", "C"]) == ["A", "C"]
    assert V.ranking_with_last_implied(["B", "C"], ["A", "B", "C"]) == ["B", "C", "A"]
    with pytest.raises(V.VoteError, match="only the last one"):
        V.ranking_with_last_implied(["B"], ["A", "B", "C"])


def test_a_complete_ranking_and_older_partial_ones():
    (v,) = V.make_votes("S", ["T"], "B", mapping={"A": "x", "B": "y", "C": "z"}, positions=["C", "A", "B"],
                        ranking=["B", "C", "A"], rater="r", revealed=False)
    assert v.ranking == ["B", "C", "A"] and v.revealed_at is None and V.winner(v) == "y"
    assert V.ranking_models(v) == ["y", "z", "x"]
    # a record from before (last place implied) is still readable, and counts the same
    old = v.model_copy(update={"ranking": ["B", "C"]})
    assert V.record_problem(old) is None
    assert battles(old) == battles(v)


def test_the_store_and_the_importer_use_the_same_check(tmp_path):
    s, turns, outs, votes = synthetic_session(turns=1, contestants=3, votes=False)
    bad = VoteRecord(session_id=s.id, turn_id=turns[0].id, choice="A", ranking=["B", "A"],
                     mapping={"A": "model-0", "B": "model-1", "C": "model-2"}, positions=["A", "B", "C"])
    from store.records import vote_problem

    assert vote_problem(bad) == V.record_problem(bad) and "starts with 'B'" in vote_problem(bad)
    with Store.open(tmp_path / "v.db") as store:
        write_synthetic(store, s, turns, outs, [])
        with pytest.raises(StoreError, match="starts with 'B'"):
            store.add_vote(bad)


def _out(status, text="an answer", error_kind=None) -> OutputRecord:
    return OutputRecord(session_id="S", turn_id="T", contestant="m", label="A", status=status, text=text,
                        error_kind=error_kind)


def test_warnings_before_picking_an_answer_that_failed():
    answers = {"A": _out("error", "", "server_error"), "B": _out("cancelled", "par"), "C": None,
               "D": _out("complete"), "E": _out("complete", "  "), "F": _out("interrupted", "half")}
    got = {label: [(w.problem, w.message) for w in V.answer_warnings(label, answers)] for label in answers}
    assert got == {
        "A": [("error", "A's answer failed (server error)")],
        "B": [("cancelled", "B's answer was cancelled")],
        "C": [("missing", "C has no answer")],
        "D": [],
        "E": [("empty", "E's answer is empty")],
        "F": [("interrupted", "F's answer was interrupted before it ended")],
    }
    assert V.answer_warnings("tie", answers) == [] and V.answer_warnings("all_bad", answers) == []
    mapping = {label: f"m{label}" for label in answers}
    with pytest.raises(V.VoteNeedsConfirmation) as err:
        V.make_votes("S", ["T"], "A", mapping=mapping, positions=list(mapping), rater="r", revealed=True,
                     answers=answers)
    assert [w.label for w in err.value.warnings] == ["A"] and "mA" not in str(err.value)
    (v,) = V.make_votes("S", ["T"], "A", mapping=mapping, positions=list(mapping), rater="r", revealed=True,
                        answers=answers, confirm=True)
    assert v.choice == "A"


def test_an_error_before_the_reveal_says_only_its_kind_and_http_status():
    """What an answer's error shows (screens, notifications, exports) is decided
    here: before the reveal its kind and HTTP status, whatever the body says;
    after, the stored message as it came."""
    body = "HTTP 500: Internal error at zorblax-cloud.example: model zorblax-7 (Zorblax Labs) failed"
    assert V.error_line("server", body, hidden=True) == "error (server, HTTP 500) — details after the vote"
    assert V.error_line("server", body, hidden=False) == f"error (server): {body}"
    assert V.error_line("not_found", "HTTP 404 Not Found", hidden=True) == \
        "error (not found, HTTP 404) — details after the vote"
    # our clients' own messages (no status): the kind alone
    assert V.error_line("timeout", "no complete answer within 600 s", hidden=True) == \
        "error (timeout) — details after the vote"
    assert V.error_line("connection", "cannot connect to zorblax-cloud.example:443", hidden=True) == \
        "error (connection) — details after the vote"
    # a status further in is body text, not ours: not trusted to be a status
    assert V.error_line("server", "zorblax says HTTP 503", hidden=True) == "error (server) — details after the vote"
    assert V.error_line(None, None, hidden=True) == "error — details after the vote"
    # no list of names: a model called "redirect" leaves the status text alone
    assert V.error_line("server", "HTTP 307 Temporary Redirect", hidden=False) == \
        "error (server): HTTP 307 Temporary Redirect"
    out = _out("error", "", "server_error").model_copy(update={"error_message": body})
    assert V.output_note(out, hidden=True) == "error (server error, HTTP 500) — details after the vote"
    assert V.output_note(out, hidden=False) == f"error (server_error): {body}"
    assert V.output_note(_out("cancelled"), hidden=True) == "cancelled"
    assert V.output_note(_out("complete"), hidden=True) is None


# ---------------------------------------------------------------------- attribution

def test_labels_are_read_through_the_votes_own_mapping():
    v = VoteRecord(session_id="S", turn_id="T", choice="C", ranking=["C", "A", "B"],
                   mapping={"A": "heron", "B": "plover", "C": "kestrel"}, positions=["A", "B", "C"])
    session_labels = {"kestrel": "A", "heron": "B", "plover": "C"}
    assert V.winner(v) == "kestrel"
    assert V.relabel(v, session_labels) == ("A", ["A", "B", "C"])
    assert V.describe(v, revealed=False, label_by_model=session_labels) == "ranking A > B > C"
    assert V.describe(v, revealed=True, label_by_model=session_labels) == \
        "ranking A > B > C (kestrel > heron > plover)"
    pick = v.model_copy(update={"ranking": None})
    assert V.describe(pick, revealed=True, label_by_model=session_labels) == "A best (kestrel)"
    assert V.describe(pick, revealed=False) == "C best"
    assert [V.outcome(pick, m) for m in ("kestrel", "heron", "nobody")] == ["win", "loss", None]
    assert battles(pick) == [V.Battle("kestrel", "heron", "a"), V.Battle("kestrel", "plover", "a")]


def test_a_verdict_names_the_model_whatever_the_layout():
    """Two votes on the same answers shown under different labels say the
    same when they pick the same model (rater consistency compares these)."""
    one = {"A": "heron", "B": "plover"}
    other = {"a": "plover", "b": "heron"}          # another layout, labels in another case
    assert V.verdict("A", one) == V.verdict("b", other) == V.verdict("B", other) == "win:heron"
    assert V.verdict("B", one) != V.verdict("A", one)
    assert V.verdict("tie", one) == "tie"
    assert V.verdict("both_bad", one) == V.verdict("all_bad", other) == "bad"
    assert V.verdict("Z", one) == "win:None"        # a label the mapping does not have


def test_ratings_decompose_through_the_same_function():
    from core.stats import ratings

    assert ratings.decompose_vote is V.decompose_vote and ratings.Battle is V.Battle


# ---------------------------------------------------------------------- reveal per unit

def test_reveal_per_unit_and_the_sessions_list_agree(tmp_path):
    db = tmp_path / "q.db"
    sid = make_run(db, CASES, blind=True, repeats=2)
    loaded = _load(db, sid)
    state = V.reveal_state(loaded)
    assert state.counts == (0, 6) and state.summary() == "hidden" and state.none
    c2 = [t for t in loaded.turns if t.case_id == "c2" and t.repeat_index == 1]
    with Store.open(db) as s:
        s.add_vote(VoteRecord(session_id=sid, turn_id=c2[-1].id, rater="r", choice="tie",
                              mapping={"A": "heron", "B": "kestrel", "C": "plover"}, positions=["A", "B", "C"],
                              revealed_at=1.0))
        (summary,) = s.list_sessions()
    state = V.reveal_state(_load(db, sid))
    assert state.counts == (1, 6) and state.summary() == "1 of 6 revealed"
    assert [state.turn(t.id) for t in c2] == [True, True]            # the follow-up turn too
    assert not any(state.turn(t.id) for t in loaded.turns if t not in c2)
    assert (summary.revealed_units, summary.units, summary.contestants) == (1, 6, None)
    assert summary.reveal_note == "1 of 6 revealed"
    # the SQL form of a unit is the Python one
    with Store.open(db) as s:
        keys = {r["k"] for r in s.query(f"SELECT {UNIT_KEY_SQL} AS k FROM turn t WHERE t.session_id = ?", [sid])}
    assert keys == set(state.units)


def test_a_unit_revealed_without_a_vote_is_revealed_everywhere(tmp_path):
    """The rater reveals a case without voting (the queue's reveal): it is
    recorded as a reveal of that unit, and every view counts it revealed;
    the rater's queue no longer offers it (the names were seen)."""
    from core.exchange.export import export_csv, export_markdown

    db = tmp_path / "q.db"
    sid = make_run(db, CASES, blind=True)

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="r", session_id=sid, rng=random.Random(4))
        await queue.load()
        item = queue.advance()
        assert item.case_id == "c1"
        reveals = await queue.reveal_current()
        assert queue.revealed_current and not queue.judged
        with pytest.raises(ValueError):
            await queue.vote("A")                        # seen: no blind vote on it now
        queue.advance()
        await queue.vote("tie")
        queue.advance()
        queue.skip()
        await store.aclose()
        return reveals, item

    reveals, item = anyio.run(go)
    assert [(r.turn_id, r.rater) for r in reveals] == [(t.id, "r") for t in item.targets]
    loaded = _load(db, sid)
    assert [r.id for r in loaded.reveals] == [r.id for r in reveals] and not loaded.votes_for(item.targets[0].id)
    state = V.reveal_state(loaded)
    assert state.turn(item.targets[0].id) and state.counts == (2, 3)
    with Store.open(db) as s:
        (summary,) = s.list_sessions()
    assert summary.reveal_note == "2 of 3 revealed"
    md = export_markdown(loaded)
    c1 = md.split("## Turn 1")[1].split("## Turn 2")[0]
    assert "(kestrel)" in c1 and "(heron)" in c1 and "(kestrel)" not in md.split("## Turn 4")[1]
    assert "c1" not in export_csv(loaded)                          # no vote on c1: no row
    # this rater's next pass offers only what is still blind to them; another rater gets it all
    assert [i.case_id for i in build_items(loaded, rater="r")] == ["c3"]
    assert [i.case_id for i in build_items(loaded, rater="someone")] == ["c1", "c2", "c3"]


def test_chat_reveal_without_a_vote(tmp_path):
    from core.answering.sessions import ChatSession
    from providers.model_config import ModelConfig

    models = [ModelConfig(alias=f"demo/{m}", provider="demo", model=m, extra_body={"speed": 0})
              for m in ("concise", "thorough")]

    async def go():
        store = await AsyncStore.open(tmp_path / "c.db")
        session = await ChatSession.create(store, models, blind=True, label_seed=1)
        assert await session.reveal("tester") is None            # nothing to reveal before a turn
        await session.send("Name a colour.")
        rec = await session.reveal("tester")
        assert session.revealed and await session.reveal("tester") is None
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return rec, loaded

    rec, loaded = anyio.run(go)
    assert loaded.votes == [] and [r.id for r in loaded.reveals] == [rec.id]
    assert rec.turn_id == loaded.turns[-1].id and loaded.session.revealed_at is not None
    assert V.reveal_state(loaded).all


def test_sessions_not_blind_or_revealed_as_a_whole_show_their_models(tmp_path):
    with Store.open(tmp_path / "s.db") as s:
        open_ = synthetic_session(turns=2, seed=1, created=1.7e9)
        blind = synthetic_session(turns=2, seed=2, blind=True, created=1.8e9)
        write_synthetic(s, *open_)
        write_synthetic(s, *blind)
        rows = {r.id: r for r in s.list_sessions()}
        assert rows[open_[0].id].contestants == ["model-0", "model-1"] and rows[open_[0].id].reveal_note == ""
        assert rows[blind[0].id].contestants is None and rows[blind[0].id].reveal_note == "hidden"
        s.reveal_session(blind[0].id, 5.0)
        assert s.list_sessions()[0].contestants == ["model-0", "model-1"]
        assert V.reveal_state(s.load_session(blind[0].id)).all


# ---------------------------------------------------------------------- the queue (moved from the TUI)

def test_items_group_follow_ups_skip_voted_cases_and_keep_order(tmp_path):
    sid = make_run(tmp_path / "q.db", CASES, voted=("c3",))
    loaded = _load(tmp_path / "q.db", sid)
    items = build_items(loaded, rater="tester")
    assert [i.case_id for i in items] == ["c1", "c2"]
    assert [t.user_message for t in items[1].repeats[0]] == ["write a loop", "now in reverse"]
    assert items[1].targets[0].follow_up_index == 1
    # another rater still has c3 to do
    assert [i.case_id for i in build_items(loaded, rater="someone")] == ["c1", "c2", "c3"]


def test_repeats_separate_or_together(tmp_path):
    sid = make_run(tmp_path / "q.db", CASES[:2], repeats=2)
    loaded = _load(tmp_path / "q.db", sid)
    separate = build_items(loaded, rater="tester")
    assert [(i.case_id, len(i.repeats)) for i in separate] == [("c1", 1), ("c1", 1), ("c2", 1), ("c2", 1)]
    together = build_items(loaded, rater="tester", repeats="together")
    assert [(i.case_id, len(i.repeats)) for i in together] == [("c1", 2), ("c2", 2)]

    async def go():
        store = await AsyncStore.open(tmp_path / "q.db")
        queue = VoteQueue(store, rater="r", session_id=sid, repeats="together", rng=random.Random(0))
        await queue.load()
        queue.advance()
        queue.skip()
        item = queue.advance()
        votes = await queue.vote("A")
        await store.aclose()
        return item, queue.order, votes

    item, order, votes = anyio.run(go)
    assert item.case_id == "c2"
    assert [v.turn_id for v in votes] == [t.id for t in item.targets]
    assert votes[0].mapping == dict(zip("ABC", order, strict=True))
    assert votes[0].positions == ["A", "B", "C"] and votes[0].winner == order[0]


def test_shuffle_is_fresh_per_case():
    rng = random.Random(1)
    orders = {tuple(shuffled_positions(ALIASES, rng)) for _ in range(30)}
    assert len(orders) > 1 and all(sorted(o) == sorted(ALIASES) for o in orders)


def test_queue_undo_keeps_the_withdrawal_and_the_end_reveals_the_votes(tmp_path):
    db = tmp_path / "q.db"
    sid = make_run(db, CASES, blind=True)

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="r", session_id=sid, reveal="end", rng=random.Random(2))
        await queue.load()
        assert queue.total == 3
        first = queue.advance()
        (undone,) = await queue.vote("B")
        assert undone.revealed_at is None
        back = await queue.undo()
        assert back.item is first and queue.done == 0
        assert queue.advance() is first                   # judged again first
        await queue.vote("tie")
        queue.advance()
        await queue.vote("C")
        with pytest.raises(ValueError):
            await queue.finish()                          # c3 still waiting
        await store.aclose()
        return undone

    undone = anyio.run(go)
    loaded = _load(db, sid)
    withdrawn = next(v for v in loaded.votes if v.id == undone.id)
    assert withdrawn.retracted_at is not None and withdrawn not in loaded.current_votes()
    assert len(loaded.current_votes()) == 2 and all(v.revealed_at is None for v in loaded.current_votes())
    assert V.reveal_state(loaded).counts == (0, 3)     # left half way: nothing shown yet

    async def next_pass():                             # the next pass reaches the end
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="r", session_id=sid, reveal="end", rng=random.Random(3))
        await queue.load()
        assert queue.total == 1 and queue.advance().case_id == "c3"
        await queue.vote("A")
        queue.advance()
        judged = await queue.finish()
        await store.aclose()
        return judged

    judged = anyio.run(next_pass)
    assert [j.item.case_id for j in judged] == ["c3"]
    loaded = _load(db, sid)
    assert all(v.revealed_at is not None for v in loaded.current_votes())
    assert V.reveal_state(loaded).counts == (3, 3) and loaded.session.revealed_at is None


def test_queue_asks_to_confirm_a_pick_that_failed(tmp_path):
    db = tmp_path / "q.db"
    sid = make_run(db, CASES[:1], blind=True)
    with Store.open(db) as s:
        loaded = s.load_session(sid)
        out = next(o for o in loaded.outputs if o.contestant == "heron")
        s.finish_output(out.model_copy(update={"status": "cancelled"}))

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="r", session_id=sid, rng=random.Random(0))
        await queue.load()
        queue.advance()
        label = "ABC"[queue.order.index("heron")]
        with pytest.raises(V.VoteNeedsConfirmation, match=f"{label}'s answer was cancelled"):
            await queue.vote(label)
        assert not queue.judged
        with pytest.raises(V.VoteError, match="places all 3"):
            await queue.vote(label, ["A", "B"] if label == "A" else [label, "A"], confirm=True)
        (vote,) = await queue.vote(label, confirm=True)
        await store.aclose()
        return vote

    vote = anyio.run(go)
    assert vote.winner == "heron"


# ---------------------------------------------------------------------- the chat

def test_chat_vote_checks_rankings_and_a_mistaken_vote_can_be_withdrawn(tmp_path):
    from core.answering.sessions import ChatSession
    from providers.model_config import ModelConfig

    # demo styles that never fail, without delays
    models = [ModelConfig(alias=f"demo/{m}", provider="demo", model=m, extra_body={"speed": 0})
              for m in ("concise", "thorough", "thinker")]

    async def go():
        store = await AsyncStore.open(tmp_path / "c.db")
        session = await ChatSession.create(store, models, blind=True, label_seed=1)
        await session.send("Name a colour.")
        with pytest.raises(ValueError, match="places all 3"):
            await session.vote("A", ranking=["A", "B"], rater="tester")
        assert await session.retract_vote("tester") is None          # nothing to withdraw
        first = await session.vote("A", rater="tester")
        withdrawn = await session.retract_vote("tester")
        assert withdrawn.id == first.id and withdrawn.retracted_at is not None
        assert session.current_vote("tester") is None
        again = await session.vote("B", ranking=["B", "C", "A"], rater="tester")
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return first, again, loaded

    first, again, loaded = anyio.run(go)
    assert again.supersedes is None                                   # it replaces no counted vote
    assert [v.id for v in loaded.current_votes()] == [again.id]
    kept = next(v for v in loaded.votes if v.id == first.id)
    assert kept.retracted_at is not None
    assert loaded.session.revealed_at is not None                    # names seen stay revealed


# ---------------------------------------------------------------------- one owner: what the store and exports derive

_VOTES = [   # (choice, ranking, mapping): every kind of vote
    ("B", None, {"A": "heron", "B": "wren"}),
    ("tie", None, {"A": "heron", "B": "wren"}),
    ("both_bad", None, {"A": "heron", "B": "wren"}),
    ("C", None, {"A": "heron", "B": "wren", "C": "lark"}),
    ("all_bad", None, {"A": "heron", "B": "wren", "C": "lark"}),
    ("A", ["A", "C", "B"], {"A": "heron", "B": "wren", "C": "lark"}),
    ("all_bad", ["B", "A", "C"], {"A": "heron", "B": "wren", "C": "lark"}),
]


@pytest.mark.parametrize("choice, ranking, mapping", _VOTES)
def test_the_store_s_vote_columns_say_what_core_votes_says(tmp_path, choice, ranking, mapping):
    """The stored `winner` and each `vote_contestant.outcome` are what
    core.stats.votes reads from the same vote: written by the store, and backfilled
    by the migration that created the table, with one rule."""
    from sqlite_utils import Database

    from store.schema import MIGRATION_NAMES, build_migrations

    s, turns, outs, _ = synthetic_session(turns=1, contestants=len(mapping), votes=False, aliases=list(mapping.values()))
    s = s.model_copy(update={"contestants": [c.model_copy(update={"label": lab})
                                             for c, lab in zip(s.contestants, mapping, strict=True)]})
    (v,) = V.make_votes(s.id, [turns[0].id], choice, mapping=mapping, positions=list(mapping)[::-1],
                        ranking=ranking, rater="r", revealed=True)
    with Store.open(tmp_path / "live.db") as store:
        write_synthetic(store, s, turns, [], [v])
        live_winner = store.conn.execute("SELECT winner FROM vote").fetchone()[0]
        live = dict(store.conn.execute("SELECT alias, outcome FROM vote_contestant").fetchall())
    assert live_winner == V.winner(v)
    assert live == {model: V.outcome(v, model) for model in mapping.values()}

    # a file from before the table existed, upgraded: the same rows
    raw = Database(str(tmp_path / "old.db"))
    build_migrations().apply(raw, stop_before="m003_vote_contestant")
    c = raw.conn
    c.execute("INSERT INTO session (id, created, kind, params, meta) VALUES (?, 1.0, 'chat', '{}', '{}')", [s.id])
    c.execute("INSERT INTO turn (id, session_id, position, user_message, created) VALUES (?, ?, 0, 'q', 1.0)",
              [turns[0].id, s.id])
    c.execute("INSERT INTO vote (id, session_id, turn_id, rater, choice, winner, ranking, mapping, positions, "
              "created) VALUES (?, ?, ?, 'r', ?, ?, ?, ?, ?, 2.0)",
              [v.id, s.id, turns[0].id, choice, V.winner(v), json.dumps(ranking) if ranking else None,
               json.dumps(mapping), json.dumps(v.positions)])
    c.commit()
    raw.close()
    with Store.open(tmp_path / "old.db") as store:
        assert store.schema_version == len(MIGRATION_NAMES)
        backfilled = dict(store.conn.execute("SELECT alias, outcome FROM vote_contestant").fetchall())
        positions = dict(store.conn.execute("SELECT label, position FROM vote_contestant").fetchall())
    assert backfilled == live
    assert positions == {lab: v.positions.index(lab) for lab in mapping}


def test_a_choice_differing_in_case_is_read_the_same_by_the_record_and_every_view():
    """Imported records may write a label in another case: the record's
    `winner` (which fills the stored column), its per-contestant outcomes and
    core.stats.votes resolve it through the one lookup."""
    from store.rows import vote_contestant_rows

    v = VoteRecord(session_id="S", turn_id="T", choice="b", mapping={"A": "heron", "B": "wren"}, positions=["A", "B"])
    assert v.winner == V.winner(v) == V.model_of(v.mapping, "b") == "wren"
    rows = vote_contestant_rows(v.id, v.choice, v.mapping, v.positions, 1)
    assert {alias: outcome for _, _, alias, _, outcome, _ in rows} == {"heron": "loss", "wren": "win"}
    assert [V.outcome(v, m) for m in ("heron", "wren")] == ["loss", "win"]
    assert V.label_of is __import__("store.records", fromlist=["label_of"]).label_of


def test_new_votes_are_built_only_by_make_votes():
    """Outside core/stats/votes.py no module of the application calls VoteRecord(...)
    (the store reads its rows back without building new votes; tests may)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found = []
    for pkg in ("core", "store", "providers", "tui", "lineup"):
        for path in sorted((root / pkg).rglob("*.py")):
            if path.relative_to(root).as_posix() == "core/stats/votes.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "VoteRecord":
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []


def test_make_votes_takes_ids_derived_from_the_source():
    votes = V.make_votes("S", ["T1", "T2"], "tie", mapping={"A": "x", "B": "y"}, positions=["B", "A"], rater="r",
                         revealed=True, now=5.0, ids=["V1", "V2"])
    assert [(v.id, v.turn_id, v.created, v.revealed_at) for v in votes] == [("V1", "T1", 5.0, 5.0),
                                                                           ("V2", "T2", 5.0, 5.0)]
    with pytest.raises(ValueError, match="1 ids for 2 turns"):
        V.make_votes("S", ["T1", "T2"], "tie", mapping={"A": "x", "B": "y"}, positions=["A", "B"], rater="r",
                     revealed=True, ids=["V1"])


def test_synthetic_votes_are_votes_lineup_could_have_written():
    for contestants in (2, 3):
        _, _, _, votes = synthetic_session(turns=40, contestants=contestants, seed=contestants)
        assert {v.choice for v in votes} >= {"tie", V.bad_choice(contestants)}
        assert all(V.record_problem(v) is None and V.battles_of(v.choice, v.ranking, v.mapping, v.positions, v.id)
                   for v in votes)
        assert not {v.choice for v in votes} & ({"both_bad", "all_bad"} - {V.bad_choice(contestants)})


def test_exports_word_a_vote_as_core_votes_does(tmp_path):
    """The Markdown transcript words tie / bad votes with core.stats.votes' words,
    and the CSV's `current` is the record's own rule: a withdrawn vote is not
    current (neither is a superseded one)."""
    import csv
    import io

    from core.exchange.export import export_csv, export_markdown

    s, turns, outs, _ = synthetic_session(turns=3, votes=False)
    mapping = {c.label: c.alias for c in s.contestants}
    made = [V.make_votes(s.id, [t.id], choice, mapping=mapping, positions=list(mapping), rater="r", revealed=True)[0]
            for t, choice in zip(turns, ("tie", "both_bad", "model-0"), strict=True)]
    again = V.make_votes(s.id, [turns[2].id], "model-1", mapping=mapping, positions=list(mapping), rater="r",
                         revealed=True, supersedes={turns[2].id: made[2].id})[0]
    with Store.open(tmp_path / "x.db") as store:
        write_synthetic(store, s, turns, outs, [*made, again])
        assert store.retract_vote(made[1].id)
        loaded = store.load_session(s.id)
    md = export_markdown(loaded)
    assert f": {V.CHOICE_WORDS['tie']}\n" in md and V.CHOICE_WORDS["tie"] == "a tie"
    rows = {r["vote_id"]: r for r in csv.DictReader(io.StringIO(export_csv(loaded)))}
    assert {vid: rows[vid]["current"] for vid in rows} == {made[0].id: "1", made[1].id: "0", made[2].id: "0",
                                                           again.id: "1"}


# ---------------------------------------------------------------------- reasoning before the reveal

def test_reasoning_is_left_out_while_hidden_unless_shown_for_all():
    """Only some models reason, so blind views show no trace of it before the
    reveal (not a block, not a placeholder), the same for every answer."""
    from store.records import SessionRecord

    assert V.reasoning_hidden(hidden=True) and not V.reasoning_hidden(hidden=False)
    assert not V.reasoning_hidden(hidden=True, show_reasoning=True)
    assert V.shown_reasoning("I think", hidden=True) is None
    assert V.shown_reasoning("I think", hidden=False) == "I think"
    assert V.shown_reasoning("I think", hidden=True, show_reasoning=True) == "I think"
    assert V.shown_reasoning("", hidden=False) is None and V.shown_reasoning(None, hidden=False) is None
    assert not V.shows_reasoning(SessionRecord(blind=True))
    assert V.shows_reasoning(SessionRecord(blind=True, meta={V.SHOW_REASONING: True}))
    assert not V.shows_reasoning(SessionRecord(blind=True, meta={V.SHOW_REASONING: "yes"}))   # only a true flag


def test_show_reasoning_is_recorded_with_a_blind_chat(tmp_path, monkeypatch):
    """`lineup chat --blind --show-reasoning`: the choice goes with the session
    (a reader of its votes knows reasoning was visible); a session without
    it hides reasoning until its reveal."""
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    import argparse

    from core.answering.sessions import ChatSession
    from lineup.commands import chat_cmd

    parser = argparse.ArgumentParser()
    chat_cmd.configure(parser)
    (tmp_path / "config.toml").write_text("")
    args = parser.parse_args(["--blind", "--show-reasoning", "-m", "demo/thinker", "-m", "demo/concise"])
    args.config, args.db = str(tmp_path / "config.toml"), str(tmp_path / "c.db")
    _, _, opts = chat_cmd.prepare(args)
    assert opts.show_reasoning and opts.blind

    async def main():
        store = await AsyncStore.open(tmp_path / "c.db")
        try:
            shown = await ChatSession.create(store, opts.models, blind=True, show_reasoning=opts.show_reasoning)
            plain = await ChatSession.create(store, opts.models, blind=True)
            assert shown.show_reasoning and not shown.reasoning_hidden
            assert not plain.show_reasoning and plain.reasoning_hidden
            for session in (shown, plain):      # a chat is recorded with its first prompt
                await session.send("hello")
        finally:
            await store.aclose()
        with Store.open(tmp_path / "c.db") as s:
            metas = {summary.id: s.get_session(summary.id).meta for summary in s.list_sessions()}
        assert metas[shown.id].get(V.SHOW_REASONING) is True and V.SHOW_REASONING not in metas[plain.id]

    anyio.run(main)


def _steps_to_save_a_vote(tmp_path, turns: int) -> int:
    """SQLite VM steps spent saving one more person's vote in a session that
    already has `turns` voted cases."""
    s, ts, outs, vs = synthetic_session(turns=turns + 1, contestants=2, words=3)
    with Store.open(tmp_path / f"steps{turns}.db") as store:
        write_synthetic(store, s, ts, outs, vs[:-1])
        steps = [0]

        def count() -> int:
            steps[0] += 1
            return 0

        store.conn.set_progress_handler(count, 1)
        store.add_vote(vs[-1])
        store.conn.set_progress_handler(None, 1)
        return steps[0]


def test_saving_a_vote_costs_the_same_in_a_session_of_any_size(tmp_path):
    """The check for an earlier vote of the same rater on the same case reads
    that case's votes, not the session's: a 10k-vote session once took 81 s
    to build, each vote scanning every vote before it."""
    small, large = _steps_to_save_a_vote(tmp_path, 50), _steps_to_save_a_vote(tmp_path, 2000)
    assert large < small * 1.5, (small, large)


def test_a_second_vote_on_the_same_case_and_repeat_supersedes_across_turns(tmp_path):
    """A case's unit is (case, repeat), whichever turn holds it; another repeat,
    or another case, is another unit."""
    s, ts, outs, _ = synthetic_session(turns=4, contestants=2, votes=False)
    ts[1] = ts[1].model_copy(update={"case_id": ts[0].case_id})                            # same case, same repeat
    ts[2] = ts[2].model_copy(update={"case_id": ts[0].case_id, "repeat_index": 1})         # same case, another repeat
    mapping = {c.label: c.alias for c in s.contestants}
    with Store.open(tmp_path / "u.db") as store:
        write_synthetic(store, s, ts, outs, [])
        made = [V.make_votes(s.id, [t.id], s.contestants[0].label, mapping=mapping, positions=list(mapping), rater="ann",
                             revealed=False, now=1.8e9 + k)[0]
                for k, t in enumerate(ts)]
        for v in made:
            store.add_vote(v)
        current = {r[0]: (r[1], r[2]) for r in store.conn.execute("SELECT id, current, supersedes FROM vote")}
    assert current[made[0].id] == (0, None)
    assert current[made[1].id] == (1, made[0].id)
    assert current[made[2].id] == (1, None)
    assert current[made[3].id] == (1, None)
