"""Blind vote packages (`lineup share`, `lineup vote FILE`, `lineup import
FILE`): a package holds no string of any contestant's config (every table,
every column), the votes of two raters through two packages merge back
exactly onto the real models, a package that was altered or came from
another database is refused whole (exit 2), and re-importing adds nothing.

The owner's database is made by `lineup run` against the loopback server
(`tests/server.py`), with contestants under names no list of vendors knows,
one of which fails with an error body that names its model and host."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from pathlib import Path

import anyio
import pytest

from core.answering.vote_queue import VoteQueue
from lineup.cli import main
from store import AsyncStore, Store
from store.records import current_scores
from tests.share_support import PHRASES, config_strings, owner, share_package  # noqa: F401  (owner: the fixture)



def _every_value(path: Path):
    """(table, column, text) for every value of every table of the file, bytes decoded loosely."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cur = conn.execute(f'SELECT * FROM "{table}"')
            names = [d[0] for d in cur.description]
            for row in cur:
                for name, value in zip(names, row, strict=True):
                    if value is None:
                        continue
                    text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
                    yield table, name, text
    finally:
        conn.close()


def test_a_package_holds_no_string_of_any_contestants_config(owner, tmp_path, capsys):
    db, sid, other = owner
    pkg = tmp_path / "for-raters.db"
    assert share_package(db, pkg, sid) == 0
    # the commands stand on lines of their own (a terminal wrapping one long line cut "then" mid-word)
    lines = capsys.readouterr().out.splitlines()
    assert f"  lineup vote {pkg} --rater NAME" in lines and "  lineup import FILE" in lines, lines
    needles = config_strings(db, [sid, other])
    assert "zorblax-13b-instruct" in needles and "anthropic" in needles and len(needles) > 30
    seen_tables = set()
    for table, column, text in _every_value(pkg):
        seen_tables.add(table)
        low = text.lower()
        for needle in needles:
            assert needle.lower() not in low, (table, column, needle, text[:200])
    assert {"session", "contestant", "turn", "output", "check_result", "package_info"} <= seen_tables
    with Store.open(pkg) as store:
        (summary,) = store.list_sessions()
        ls = store.load_session(summary.id)
    # the answers, the cases and what the queue shows after the vote are there
    assert sorted({o.text.split(":")[0] for o in ls.outputs if o.status == "complete"}) == sorted(PHRASES.values())
    assert len(ls.turns) == 5 and ls.session.blind and ls.session.revealed_at is None
    assert ls.session.meta == {"references": {"case-1": "the expected answer, shown after the vote"}}
    assert {c.check for c in ls.checks} == {"contains"}
    # nothing that tells a model apart by how it answered: timings, tokens, costs, finish, reasoning, params
    for o in ls.outputs:
        assert (o.sent_at, o.ttft_ms, o.duration_ms, o.input_tokens, o.output_tokens, o.cost, o.finish_reason,
                o.reasoning, o.chunk_ms, o.chunk_chars, o.attempt) == (None,) * 8 + ([], [], 1)
    (failed,) = [o for o in ls.outputs if o.status == "error"]
    assert failed.error_message == "HTTP 500" and failed.error_kind
    assert all(c.params == {} and c.price is None and c.provider == "blind" and c.base_url is None
               for c in ls.session.contestants)
    assert ls.session.params == {} and ls.session.seed is None and ls.session.system is None
    # the ids are fresh and carry no order or time of the owner's records
    assert len({o.id[:10] for o in ls.outputs} | {t.id[:10] for t in ls.turns}) == 1


def test_reasoning_goes_in_only_when_asked(owner, tmp_path):
    db, sid, _ = owner
    pkg = tmp_path / "with-reasoning.db"
    assert share_package(db, pkg, sid, extra=["--reasoning"]) == 0
    with Store.open(pkg) as store:
        ls = store.load_session(store.list_sessions()[0].id)
    assert {o.reasoning for o in ls.outputs if o.status == "complete"} == {"Let me think step by step."}


async def _vote_all(pkg: Path, rater: str, prefer: str, *, undo_first: bool = False, tag: bool = False,
                    limit: int | None = None) -> list[tuple[str, str]]:
    """Vote through a package's queue as `rater`: the answer starting with
    `prefer` wins where it completed, else a tie. Returns (case id, choice)."""
    store = await AsyncStore.open(pkg)
    done: list[tuple[str, str]] = []
    try:
        queue = VoteQueue(store, rater=rater, rng=random.Random(7))
        await queue.load()
        while (item := queue.advance()) is not None and (limit is None or len(done) < limit):
            target = item.targets[0]
            answers = queue.answers(item, target)
            choice = next((label for label, o in answers.items()
                           if o is not None and o.status == "complete" and o.text.startswith(prefer)), "tie")
            await queue.vote(choice, confirm=True)
            done.append((item.case_id or "", choice))
            if tag:
                await queue.tag(item, [answers[queue.labels[0]]], ("too_verbose",))
            if undo_first:
                undo_first = False       # once: the first vote is withdrawn and cast again
                await queue.undo()
                done.pop()
    finally:
        await store.aclose()
    return done


def _owner_votes(db: Path):
    with Store.open(db) as store:
        return store.load_session(store.list_sessions(kind="run")[-1].id)


def test_two_raters_through_two_packages_merge_exactly(owner, tmp_path, capsys):
    db, sid, _ = owner
    p1, p2 = tmp_path / "alice.db", tmp_path / "bob.db"
    assert share_package(db, p1, sid) == 0 and share_package(db, p2, sid) == 0
    alice = anyio.run(lambda: _vote_all(p1, "alice", "Ripe mango", undo_first=True, tag=True))
    bob = anyio.run(lambda: _vote_all(p2, "bob", "Blue harbor"))
    assert len(alice) == len(bob) == 4
    capsys.readouterr()
    assert main(["import", str(p1), "--db", str(db)]) == 0
    assert "imported" in capsys.readouterr().out
    assert main(["import", str(p2), "--db", str(db)]) == 0
    ls = _owner_votes(db)
    assert ls.session.id == sid
    current = ls.current_votes()
    assert sorted(v.rater for v in current) == ["alice"] * 4 + ["bob"] * 4
    turn_case = {t.id: t.case_id for t in ls.turns}
    wanted = {("alice", c): "quokka-prime" for c, _ in alice} | {("bob", c): "wombat-seven" for c, _ in bob}
    for v in current:
        case = turn_case[v.turn_id]
        # each winner is the real model whose answer the rater picked, through the vote's own mapping
        assert sorted(v.mapping.values()) == sorted(PHRASES)
        assert v.winner == wanted[(v.rater, case)], (v.rater, case, v.mapping, v.choice)
        assert v.revealed_at is None          # nothing was revealed to the owner's views by a package vote
    # alice's withdrawn first vote came along, withdrawn; her tag is on the real answer
    withdrawn = [v for v in ls.votes if v.retracted_at is not None]
    assert len(withdrawn) == 1 and withdrawn[0].rater == "alice"
    # one tag per vote cast (undo withdraws the vote, not the tag set with it): 4 + 1
    assert len([t for t in ls.tags if t.rater == "alice" and t.tag == "too_verbose"]) == 5
    assert {t.output_id for t in ls.tags if t.rater == "alice"} <= {o.id for o in ls.outputs}
    # idempotent: again, nothing new
    before = len(ls.votes), len(ls.tags)
    capsys.readouterr()
    assert main(["import", str(p1), "--db", str(db)]) == 0 and main(["import", str(p2), "--db", str(db)]) == 0
    assert capsys.readouterr().out.count("nothing new to import") == 2
    again = _owner_votes(db)
    assert (len(again.votes), len(again.tags)) == before
    # the report sees both raters
    assert main(["report", "--db", str(db), "--json", "--bootstrap", "20"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["by_rater"]) >= {"alice", "bob"}
    assert report["agreement"]["raters"] == ["alice", "bob"] and report["agreement"]["units"] == 4


def test_a_package_voted_in_two_sittings_merges_each_time(owner, tmp_path):
    db, sid, _ = owner
    pkg = tmp_path / "carol.db"
    assert share_package(db, pkg, sid) == 0
    first = anyio.run(lambda: _vote_all(pkg, "carol", "Quiet lantern", limit=2))
    assert main(["import", str(pkg), "--db", str(db)]) == 0
    rest = anyio.run(lambda: _vote_all(pkg, "carol", "Quiet lantern"))   # resumes: only the cases left
    assert len(first) == 2 and len(rest) == 2 and not {c for c, _ in first} & {c for c, _ in rest}
    assert main(["import", str(pkg), "--db", str(db)]) == 0
    assert len([v for v in _owner_votes(db).current_votes() if v.rater == "carol"]) == 4


@pytest.mark.parametrize("change, reason", [
    ("UPDATE output SET text = 'Ripe mango: a better answer.' WHERE id = (SELECT min(id) FROM output "
     "WHERE status = 'complete')", "differs from what was shared"),
    ("UPDATE turn SET user_message = 'Another question?' WHERE id = (SELECT min(id) FROM turn)",
     "differs from what was shared"),
    ("DELETE FROM output WHERE id = (SELECT min(id) FROM output)", "missing"),
    ("UPDATE contestant SET alias = 'xnew' WHERE position = 0", "contestants"),
])
def test_an_altered_package_is_refused_with_the_reason(owner, tmp_path, capsys, change, reason):
    db, sid, _ = owner
    pkg = tmp_path / "altered.db"
    assert share_package(db, pkg, sid) == 0
    anyio.run(lambda: _vote_all(pkg, "mallory", "Ripe mango"))
    conn = sqlite3.connect(pkg)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(change)
    conn.commit()
    conn.close()
    capsys.readouterr()
    assert main(["import", str(pkg), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "altered" in err and reason in err and "nothing was imported" in err
    assert not [v for v in _owner_votes(db).votes if v.rater == "mallory"]


def test_a_package_from_another_database_is_refused(owner, tmp_path, capsys):
    db, sid, _ = owner
    pkg = tmp_path / "theirs.db"
    assert share_package(db, pkg, sid) == 0
    anyio.run(lambda: _vote_all(pkg, "alice", "Ripe mango"))
    elsewhere = tmp_path / "elsewhere.db"
    shutil.copy(db, elsewhere)
    with sqlite3.connect(elsewhere) as conn:     # the same sessions, but it never issued this package
        conn.execute("DELETE FROM share_package")
    capsys.readouterr()
    assert main(["import", str(pkg), "--db", str(elsewhere)]) == 2
    err = capsys.readouterr().err
    assert "was not shared from this database" in err and "nothing was imported" in err
    with Store.open(elsewhere) as store:
        assert store.counts()["vote"] == 0


def test_share_refuses_what_it_cannot_do(owner, tmp_path, capsys):
    db, sid, _ = owner
    pkg = tmp_path / "p.db"
    pkg.write_text("votes already here")
    assert share_package(db, pkg, sid) == 2
    assert "never overwritten" in capsys.readouterr().err and pkg.read_text() == "votes already here"
    assert share_package(db, tmp_path / "q.db", "NOSUCHSESSION") == 2
    assert "no session" in capsys.readouterr().err and not (tmp_path / "q.db").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".q.db")]


def test_the_queue_over_a_package_shuffles_each_case_from_its_seed(owner, tmp_path):
    """The same rater sees a case in the same order on every pass (resume,
    undo); the order differs between raters and between cases."""
    db, sid, _ = owner
    pkg = tmp_path / "seeded.db"
    assert share_package(db, pkg, sid) == 0

    async def orders(rater: str) -> list[list[str]]:
        from store.share import package_info_at

        seed = package_info_at(pkg).seed
        store = await AsyncStore.open(pkg)
        try:
            queue = VoteQueue(store, rater=rater, case_seed=seed)
            await queue.load()
            out = []
            while queue.advance() is not None:
                out.append(list(queue.order))
            return out
        finally:
            await store.aclose()

    a1, a2, b = anyio.run(orders, "alice"), anyio.run(orders, "alice"), anyio.run(orders, "bob")
    assert a1 == a2 and len(a1) == 4
    assert a1 != b or len({tuple(o) for o in a1}) > 1


def test_vote_on_a_file_that_is_no_package_says_so(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database")
    assert main(["vote", str(notes), "--rater", "alice", "--db", str(tmp_path / "x.db")]) == 2
    assert "is not a vote package" in capsys.readouterr().err
    assert main(["vote", str(notes), "--rater", " "]) == 2
    assert "--rater" in capsys.readouterr().err


async def _score_all(pkg: Path, rater: str) -> dict[tuple[str, str], tuple[str, int]]:
    """Score every answer of a package's queue on its dimensions as `rater`
    (the answer whose text is longer: clarity 2, the other 5; accuracy 4
    then 3 for the first label, the 3 replacing the 4), and vote A; returns
    (case id, dimension) -> (text of the first label's answer, its last score)."""
    store = await AsyncStore.open(pkg)
    seen: dict[tuple[str, str], tuple[str, int]] = {}
    try:
        queue = VoteQueue(store, rater=rater, rng=random.Random(3))
        await queue.load()
        while (item := queue.advance()) is not None:
            assert [d.name for d in item.dimensions] == ["clarity", "accuracy"]
            answers = queue.answers(item, item.targets[0])
            first = queue.labels[0]
            for label, out in answers.items():
                await queue.score(label, "clarity", 2 if len(out.text) > 200 else 5)
            await queue.score(first, "accuracy", 4)
            await queue.score(first, "accuracy", 3)
            seen[(item.case_id or "", "accuracy")] = (answers[first].text, 3)
            await queue.vote("A", confirm=True)
    finally:
        await store.aclose()
    return seen


def test_scores_given_in_a_package_come_back_on_the_real_answers(tmp_path, monkeypatch, capsys):
    """A package carries the session's dimensions (`lineup vote FILE` and
    `lineup rate FILE` then offer the 1-5 scores); importing it adds each
    score on the owner's answer the rater saw, as the rater's, once."""
    from tests.run_support import scored_run

    db, sid = scored_run(tmp_path, monkeypatch)
    pkg = tmp_path / "dana.db"
    assert share_package(db, pkg, sid) == 0
    with sqlite3.connect(pkg) as conn:
        (meta,) = conn.execute("SELECT meta FROM session").fetchone()
        assert json.loads(meta)["dimensions"] == [{"name": "clarity", "scale": "1-5", "description": "easy to follow"},
                                                  {"name": "accuracy", "scale": "1-5"}]
    seen = anyio.run(lambda: _score_all(pkg, "dana"))
    capsys.readouterr()
    assert main(["import", str(pkg), "--db", str(db)]) == 0
    assert "8 scores" in capsys.readouterr().out
    with Store.open(db) as store:
        ls = store.load_session(sid)
    text_of = {o.id: o.text for o in ls.outputs}
    case_of = {o.id: next(t.case_id for t in ls.turns if t.id == o.turn_id) for o in ls.outputs}
    assert {(s.rater, s.rater_kind) for s in ls.scores} == {("dana", "human")} and len(ls.scores) == 8
    for s in current_scores(ls.scores):
        if s.dimension == "clarity":
            assert s.value == (2 if len(text_of[s.output_id]) > 200 else 5)
        else:
            assert (text_of[s.output_id], s.value) == seen[(case_of[s.output_id], "accuracy")]
    capsys.readouterr()
    assert main(["import", str(pkg), "--db", str(db)]) == 0
    assert "nothing new to import" in capsys.readouterr().out


@pytest.mark.parametrize("change, reason", [
    ("UPDATE score SET dimension = 'tone' WHERE rowid = 1", "not a dimension of the session"),
    ("UPDATE score SET rater_kind = 'judge' WHERE rowid = 1", "not a person's (rater_kind 'judge'"),
    ("UPDATE score SET rater = 'judge:gpt' WHERE rowid = 1", "a judge's name"),
    ("UPDATE score SET output_id = 'NOSUCHANSWER' WHERE rowid = 1", "not shared"),
    ("UPDATE score SET value = 9 WHERE rowid = 1", "score"),
    ("UPDATE score SET created = 1e300 WHERE rowid = 1", "created"),
    ("UPDATE score SET dimension = printf('%.100c', 'x') WHERE rowid = 1", "dimension"),
    ("UPDATE score SET rater_kind = 'alien' WHERE rowid = 1", "rater_kind"),
])
def test_a_package_with_a_hostile_score_is_refused_whole(tmp_path, monkeypatch, capsys, change, reason):
    from tests.run_support import scored_run

    db, sid = scored_run(tmp_path, monkeypatch)
    pkg = tmp_path / "eve.db"
    assert share_package(db, pkg, sid) == 0
    anyio.run(lambda: _score_all(pkg, "eve"))
    with sqlite3.connect(pkg) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(change)
    capsys.readouterr()
    assert main(["import", str(pkg), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert reason in err and err.count("nothing was imported") == 1, err
    with Store.open(db) as store:
        assert store.counts().get("score", 0) == 0 and store.counts()["vote"] == 0


def test_a_refusal_quotes_what_a_package_holds_bounded_and_inert(tmp_path, monkeypatch, capsys):
    """The reason a package is refused quotes its records' ids and fields:
    a huge or escape-laden one is cut short and shown as text."""
    from tests.run_support import scored_run

    db, sid = scored_run(tmp_path, monkeypatch)
    pkg = tmp_path / "mallet.db"
    assert share_package(db, pkg, sid) == 0
    anyio.run(lambda: _score_all(pkg, "mallet"))
    with sqlite3.connect(pkg) as conn:
        conn.execute("UPDATE score SET id = printf('%.100000c', 'z'), "
                     "dimension = char(27) || '[31m' || printf('%.100000c', 'y') WHERE rowid = 1")
    capsys.readouterr()
    assert main(["import", str(pkg), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "not a dimension" in err or "altered" in err
    assert len(err) < 1000 and "\x1b" not in err and "nothing was imported" in err
