"""Every view resolves a vote through the mapping stored with that vote, and a
blind run is revealed case by case as it is voted.

The vote queue shuffles the screen order per case, so its labels (A = leftmost)
are not the session's labels; replay, the exports, the sessions list and the
report must all name the model that was at the chosen label in the vote's own
mapping, and show names for the cases that are voted while keeping the others
hidden."""

from __future__ import annotations

import csv
import io
import json

from tests.tui_sessions import ALIASES, CASES, make_run, pane_aliases
from tests.tui_support import leaks, open_store, run, visible_text, wait_for

from core.report import build_report
from lineup.cli import main
from store import Store
from tui.app import LineupApp, ReplayOptions, VoteOptions
from tui.replay_screen import ReplayScreen
from tui.sessions_screen import summary_row
from tui.vote_queue import VoteQueueScreen

SESSION_LABEL = dict(zip(ALIASES, "ABC", strict=True))      # make_run(blind=True): A, B, C by position
IDENTITY = ALIASES + ["kestrel-large", "heron-small", "plover-mini", "anthropic"]


def vote_in_queue(db, sid, keys: list[str], *, seed: int) -> list[list[str]]:
    """Judge the first len(keys) cases in the queue (reveal after each); the
    pane order (models left to right) each was shown in."""
    orders: list[list[str]] = []

    async def scenario():
        store = await open_store(db)
        app = LineupApp(store, vote=VoteOptions(session_id=sid, shuffle_seed=seed), rater="tester")
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen)
                           and app.screen.current is not None, "the queue")
            screen = app.screen
            for i, key in enumerate(keys):
                await wait_for(pilot, lambda: screen.current is not None and not screen.judged, f"case {i + 1}")
                await pilot.pause()
                orders.append(pane_aliases(screen))
                await pilot.press(key)
                await wait_for(pilot, lambda: screen.judged, f"vote {i + 1}")
                await pilot.press("enter")
            await pilot.press("escape")
        await store.aclose()

    run(scenario())
    return orders


def replay_info(db, sid, turn_steps: int = 0) -> tuple[str, str, list[str], str]:
    """(info line, sub title, pane names, all visible text) of replay at the first turn + turn_steps."""
    got: dict = {}

    async def scenario():
        store = await open_store(db)
        app = LineupApp(store, replay=ReplayOptions(sid), rater="tester")
        async with app.run_test(size=(160, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "replay")
            screen = app.screen
            await pilot.press(*["left_square_bracket"] * 10)
            await pilot.press(*["right_square_bracket"] * turn_steps)
            await pilot.pause()
            got["info"] = str(screen.info.render())
            got["sub"] = str(screen.sub_title)
            got["names"] = [p.name_shown for p in screen.panes]
            got["visible"] = visible_text(app)
            await pilot.press("escape")
        await store.aclose()

    run(scenario())
    return got["info"], got["sub"], got["names"], got["visible"]


def export(db, sid, fmt, capsys) -> str:
    capsys.readouterr()
    assert main(["export", sid, "--db", str(db), "--format", fmt]) == 0
    return capsys.readouterr().out


def test_queue_votes_are_attributed_through_their_own_mapping_everywhere(tmp_path, capsys):
    db = tmp_path / "q.db"
    sid = make_run(db, CASES, blind=True)
    # seed 4 shows c1 in an order unlike the session's (kestrel, heron, plover)
    (order,) = vote_in_queue(db, sid, ["a"], seed=4)
    winner = order[0]
    assert order != ALIASES and SESSION_LABEL[winner] != "A"

    with Store.open(db) as s:
        (vote,) = s.load_session(sid).current_votes()
    assert vote.choice == "A" and vote.mapping["A"] == winner

    # replay: the vote is shown on the pane of the model that won, in the session's labels
    info, _, names, _ = replay_info(db, sid)
    assert f"{SESSION_LABEL[winner]} best ({winner})" in info, info
    assert "A best" not in info

    # CSV: the chosen model is the one at the vote's label
    rows = list(csv.DictReader(io.StringIO(export(db, sid, "csv", capsys))))
    assert [r["chosen_model"] for r in rows] == [winner]

    # Markdown: the vote line names the winner, in the transcript's (the session's) labels
    md = export(db, sid, "md", capsys)
    assert f"{SESSION_LABEL[winner]} ({winner}) is better" in md

    # the report counts the win for the winner
    with Store.open(db) as s:
        report = build_report(s, rounds=10)
    rows_by = {m.name: m for m in report.models}
    assert rows_by[winner].wins == 2 and sum(m.wins for m in report.models) == 2


def test_a_run_is_revealed_case_by_case_as_it_is_voted(tmp_path, capsys):
    db = tmp_path / "q.db"
    sid = make_run(db, CASES, blind=True)
    (order,) = vote_in_queue(db, sid, ["b"], seed=4)     # c1 voted, c2 and c3 not

    # sessions list: neither "hidden" for all, nor names: one of three cases revealed
    capsys.readouterr()
    assert main(["sessions", "--db", str(db)]) == 0
    table = capsys.readouterr().out
    assert "1 of 3 revealed" in table and leaks(table, IDENTITY) == []
    assert main(["sessions", "--db", str(db), "--json"]) == 0
    (summary,) = json.loads(capsys.readouterr().out)
    assert summary["contestants"] is None and (summary["revealed_units"], summary["units"]) == (1, 3)
    with Store.open(db) as s:                          # the sessions screen says the same
        assert str(summary_row(s.list_sessions()[0])[3]) == "(blind · 1 of 3 revealed)"

    # CSV: the voted case names its winner
    rows = list(csv.DictReader(io.StringIO(export(db, sid, "csv", capsys))))
    assert [r["chosen_model"] for r in rows] == [order[1]]

    # Markdown: the voted case names the models, the unvoted ones stay hidden
    md = export(db, sid, "md", capsys)
    c1, rest = md.split("## Turn 2", 1)
    assert f"({order[1]})" in c1
    # (the fixture answers name their model, to tell panes apart; nothing else may)
    assert all(f"({a})" not in rest and f"{a}-" not in rest for a in ALIASES)
    assert "### A\n" in rest and "1 of 3 judged cases or turns revealed" in md

    # replay: labels only on the panes (two cases are still blind), the voted case names its models
    info, sub, names, _ = replay_info(db, sid, turn_steps=0)
    assert names == ["A", "B", "C"] and "1 of 3 revealed" in sub
    assert all(f"{SESSION_LABEL[a]} = {a}" in info for a in ALIASES)
    info2, sub2, _, _ = replay_info(db, sid, turn_steps=1)
    assert leaks(info2 + sub2, IDENTITY) == []

    # all cases voted: the whole run is revealed
    vote_in_queue(db, sid, ["a", "t"], seed=7)
    capsys.readouterr()
    assert main(["sessions", "--db", str(db), "--json"]) == 0
    (summary,) = json.loads(capsys.readouterr().out)
    assert summary["contestants"] == ALIASES and (summary["revealed_units"], summary["units"]) == (3, 3)
    assert main(["sessions", "--db", str(db)]) == 0
    assert "hidden" not in capsys.readouterr().out
    rows = list(csv.DictReader(io.StringIO(export(db, sid, "csv", capsys))))
    assert "hidden" not in {r["chosen_model"] for r in rows} | {r["models"] for r in rows}
    info, sub, names, _ = replay_info(db, sid)
    assert "not revealed" not in sub and names == [f"{SESSION_LABEL[a]} · {a}" for a in ALIASES]
