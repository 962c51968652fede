"""`lineup vote`: the blind queue over unvoted cases. Case grouping and order,
the shuffle recorded in each vote, skip, undo, reveal after each vote or at
the end, repeats judged apart or together, tags; and nothing names a model
before its vote."""

from __future__ import annotations

from tests.tui_sessions import ALIASES, CASES, IDENTITY, make_run, pane_aliases
from tests.tui_support import leaks, open_store, run, screen_text, visible_text, wait_for

from store import Store
from tui.app import LineupApp, VoteOptions
from tui.tag_picker import TagPicker
from tui.vote_queue import VoteQueueScreen


def queue_app(store, **opts):
    return LineupApp(store, vote=VoteOptions(**opts), rater="tester")


async def queue_screen(pilot) -> VoteQueueScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen) and app.screen.total >= 0
                   and (app.screen.current is not None or "done" in str(app.screen.info.render())
                        or "Nothing" in str(app.screen.info.render())), "the queue")
    await pilot.pause()
    return app.screen


def test_vote_reveal_each_records_the_shuffled_positions(tmp_path):
    sid = make_run(tmp_path / "q.db", CASES, voted=("c3",))

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, shuffle_seed=5)
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            assert "case 1 of 2" in str(screen.info.render()) and "c1 (math)" in str(screen.info.render())
            order = pane_aliases(screen)
            assert order == screen.order
            # the answers name their model in these fixtures (to tell panes apart); nothing else may
            chrome = "\n".join([str(screen.info.render()), *[str(p.header.render()) for p in screen.panes],
                                str(app.sub_title), *[m for _, m in app.notices]])
            assert leaks(chrome, IDENTITY) == []
            await pilot.press("b")
            await wait_for(pilot, lambda: screen.judged, "the vote")
            await pilot.pause()
            assert [p.name_shown for p in screen.panes] == [f"{lab} · {a}" for lab, a in zip("ABC", order, strict=True)]
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.current is not None and screen.current.case_id == "c2", "case 2")
            assert "case 2 of 2" in str(screen.info.render())
            assert "now in reverse" in screen.panes[0].body.plain_text()
            order2 = pane_aliases(screen)
            await pilot.press("x")
            await wait_for(pilot, lambda: screen.judged, "the second vote")
            await pilot.press("space")
            await wait_for(pilot, lambda: screen.current is None, "the end")
            assert "All done: 2 of 2" in str(screen.info.render())
        await store.aclose()
        with Store.open(tmp_path / "q.db") as s:
            loaded = s.load_session(sid)
        votes = [v for v in loaded.current_votes() if v.rater == "tester" and v.choice != "tie"]
        assert len(votes) == 2
        v1, v2 = votes
        assert v1.choice == "B" and v1.winner == order[1]
        assert v1.mapping == dict(zip("ABC", order, strict=True)) and v1.positions == ["A", "B", "C"]
        assert v1.revealed_at is not None
        assert v2.choice == "all_bad" and v2.mapping == dict(zip("ABC", order2, strict=True))
        c2_last = next(t for t in loaded.turns if t.case_id == "c2" and t.follow_up_index == 1)
        assert v2.turn_id == c2_last.id

    run(scenario())


def test_reveal_a_case_without_voting(tmp_path):
    """F8 shows the case's models without a vote: recorded as a reveal of the
    case, no vote; Enter goes on; the next pass does not offer it again."""
    sid = make_run(tmp_path / "q.db", CASES, blind=True)

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, shuffle_seed=5)
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            assert "Reveal" in [name for name, _, _ in _palette(screen)]
            order = pane_aliases(screen)
            await pilot.press("f8")
            await wait_for(pilot, lambda: screen.queue.revealed_current, "the reveal")
            await pilot.pause()
            assert [p.name_shown for p in screen.panes] == [f"{lab} · {a}" for lab, a in zip("ABC", order, strict=True)]
            assert "revealed without a vote" in str(screen.info.render())
            assert not screen.vote_bar.has_class("-visible")
            await pilot.press("a")                                    # no vote on a revealed case
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.current is not None and screen.current.case_id == "c2", "case 2")
            assert "case 2 of 3" in str(screen.info.render())
        await store.aclose()
        with Store.open(tmp_path / "q.db") as s:
            loaded = s.load_session(sid)
            (summary,) = s.list_sessions()
        c1 = next(t for t in loaded.turns if t.case_id == "c1")
        assert loaded.votes == [] and [(r.turn_id, r.rater) for r in loaded.reveals] == [(c1.id, "tester")]
        assert summary.reveal_note == "1 of 3 revealed"

        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, shuffle_seed=5)
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            assert screen.current.case_id == "c2" and screen.total == 2
        await store.aclose()

    run(scenario())


def _palette(screen):
    from tui.commands import LineupCommands

    return list(LineupCommands(screen)._commands())


def test_skip_undo_and_resume(tmp_path):
    sid = make_run(tmp_path / "q.db", CASES)

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, reveal="end", shuffle_seed=2)
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            assert screen.current.case_id == "c1"
            await pilot.press("s")                       # skip c1: it goes to the back
            await wait_for(pilot, lambda: screen.current.case_id == "c2", "c2 after the skip")
            await pilot.press("a")                       # reveal=end: straight to the next case
            await wait_for(pilot, lambda: screen.current.case_id == "c3", "c3")
            assert all(" · " not in p.name_shown for p in screen.panes)   # nothing revealed yet
            await pilot.press("u")                       # undo the c2 vote
            await wait_for(pilot, lambda: screen.current.case_id == "c2", "c2 again")
            assert screen.done == 0
            await pilot.press("c")                       # judged again
            await wait_for(pilot, lambda: screen.current.case_id == "c3", "c3 again")
            await pilot.press("escape")                  # leave half way: c3 and c1 still to do
        await store.aclose()
        with Store.open(tmp_path / "q.db") as s:
            loaded = s.load_session(sid)
        current = loaded.current_votes()
        assert len(current) == 1 and len(loaded.votes) == 2
        (vote,) = current
        assert vote.choice == "C" and vote.revealed_at is None
        withdrawn = next(v for v in loaded.votes if v.id != vote.id)
        assert withdrawn.retracted_at is not None and withdrawn.turn_id == vote.turn_id

        # resumed: only the cases without a vote remain, in their order
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, reveal="end")
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            assert screen.total == 2 and screen.current.case_id == "c1"
            await pilot.press("t")
            await wait_for(pilot, lambda: screen.current.case_id == "c3", "c3")
            await pilot.press("t")
            await wait_for(pilot, lambda: screen.current is None, "the end")
            info = str(screen.info.render())
            assert "All done: 2 of 2" in info and "kestrel" in info     # revealed at the end
        await store.aclose()
        with Store.open(tmp_path / "q.db") as s:
            assert s.get_session(sid).revealed_at is not None or not s.get_session(sid).blind

    run(scenario())


def test_tag_from_the_queue_and_together_repeats(tmp_path):
    sid = make_run(tmp_path / "q.db", CASES[:1], repeats=2)

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, repeats="together", shuffle_seed=3)
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            assert screen.total == 1 and len(screen.current.repeats) == 2
            screen.panes[2].focus()
            alias = screen.order[2]
            await pilot.press("t")
            await wait_for(pilot, lambda: isinstance(app.screen, TagPicker), "the tag picker")
            await pilot.press("down", "space", "enter")          # factual_error
            await wait_for(pilot, lambda: any("Tagged" in m for _, m in app.notices), "the tag")
            screen.vote_bar.focus()
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.judged, "the vote")
        await store.aclose()
        with Store.open(tmp_path / "q.db") as s:
            loaded = s.load_session(sid)
        assert len(loaded.current_votes()) == 2          # one per repeat, same judgement
        assert {v.choice for v in loaded.votes} == {"A"}
        tagged = {o.id: o for o in loaded.outputs}
        assert sorted((t.tag, tagged[t.output_id].contestant) for t in loaded.tags) == [
            ("factual_error", alias), ("factual_error", alias)]

    run(scenario())


def test_empty_queue_says_so(tmp_path):
    sid = make_run(tmp_path / "q.db", CASES[:1], voted=("c1",))

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid)
        async with app.run_test(size=(100, 20)) as pilot:
            screen = await queue_screen(pilot)
            assert "Nothing to vote on" in str(screen.info.render())
        await store.aclose()

    run(scenario())


def test_checks_and_reference_are_shown_after_the_vote_not_before(tmp_path):
    from store.records import CheckResultRecord

    sid = make_run(tmp_path / "q.db", CASES[:1])
    with Store.open(tmp_path / "q.db") as s:
        s.update_session(sid, meta={"references": {"c1": "four, exactly"}})
        loaded = s.load_session(sid)
        for out in loaded.outputs:
            s.add_check_result(CheckResultRecord(output_id=out.id, check="regex:\\b4\\b", spec={},
                                                 passed=out.contestant == "heron", detail=None))

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, shuffle_seed=1)
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            before = "\n".join([str(screen.info.render()), *[str(p.header.render()) for p in screen.panes]])
            assert "checks" not in before and "four, exactly" not in before
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.judged, "the vote")
            await pilot.pause()
            headers = {a: str(p.header.render()) for a, p in zip(screen.order, screen.panes, strict=True)}
            assert "checks 1/1" in headers["heron"]
            assert "checks 0/1" in headers["kestrel"] and "failed: regex" in headers["kestrel"]
            assert "reference: four, exactly" in str(screen.info.render())
        await store.aclose()

    run(scenario())


def test_picking_an_answer_that_failed_asks_for_confirmation(tmp_path):
    """Also: the failed answer's error says only its kind and status before the
    vote, whatever its text names; the whole text once the vote reveals it."""
    sid = make_run(tmp_path / "q.db", CASES[:1], blind=True)
    message = "HTTP 500: plover-mini at zorblax-cloud.example failed"
    with Store.open(tmp_path / "q.db") as s:
        out = next(o for o in s.load_session(sid).outputs if o.contestant == "plover")
        s.finish_output(out.model_copy(update={"status": "error", "error_kind": "server_error",
                                               "error_message": message, "text": ""}))

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, shuffle_seed=5)
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            i = screen.order.index("plover")
            key = "abc"[i]
            shown = " ".join(screen.panes[i].body.plain_text().split())
            assert "error (server error, HTTP 500) — details after the vote" in shown
            assert "zorblax" not in visible_text(app) and "plover-mini" not in visible_text(app)
            await pilot.press(key)
            await wait_for(pilot, lambda: any("Not saved yet" in m for _, m in app.notices), "the warning")
            warning = next(m for _, m in app.notices if "Not saved yet" in m)
            assert f"{'ABC'[i]}'s answer failed (server error)" in warning and leaks(warning, IDENTITY) == []
            assert not screen.judged
            await pilot.press(key)                    # the same vote again: confirmed
            await wait_for(pilot, lambda: screen.judged, "the vote")
            await pilot.pause()
            assert message in " ".join(screen.panes[i].body.plain_text().split())
        await store.aclose()
        with Store.open(tmp_path / "q.db") as s:
            (vote,) = s.load_session(sid).current_votes()
        assert vote.winner == "plover"

    run(scenario())


def test_ctrl_t_tags_an_answer_from_the_vote_bar_asking_which(tmp_path):
    """The vote bar has the keys (its letters vote): Ctrl+T, listed in the
    footer's bindings and the palette, asks which answer, then opens its tags."""
    sid = make_run(tmp_path / "q.db", CASES[:1], blind=True)

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, shuffle_seed=3)
        async with app.run_test(size=(80, 24)) as pilot:
            from tui.tag_picker import AnswerPicker

            screen = await queue_screen(pilot)
            assert screen.vote_bar.has_focus
            assert "Tag" in [name for name, _, _ in _palette(screen)]
            assert any(b.binding.action == "tag" for b in screen.palette_bindings.values())   # active (the footer may leave it out at 80 columns)
            alias = screen.order[1]
            await pilot.press("ctrl+t")
            await wait_for(pilot, lambda: isinstance(app.screen, AnswerPicker), "which answer")
            await pilot.press("down", "enter")                       # answer B
            await wait_for(pilot, lambda: isinstance(app.screen, TagPicker), "the tag picker")
            assert app.screen.target == "B"
            await pilot.press("down", "space", "enter")
            await wait_for(pilot, lambda: any("Tagged B" in m for _, m in app.notices), "the tag")
            assert screen.waiting and not screen.judged                # tagging is no vote
        await store.aclose()
        with Store.open(tmp_path / "q.db") as s:
            loaded = s.load_session(sid)
        (tag,) = loaded.tags
        assert next(o.contestant for o in loaded.outputs if o.id == tag.output_id) == alias
        assert loaded.votes == []

    run(scenario())


def test_the_case_count_stays_on_the_case_voted_on_until_the_next(tmp_path):
    sid = make_run(tmp_path / "q.db", CASES)

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, shuffle_seed=5)
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            assert str(screen.info.render()).startswith("case 1 of 3")
            await pilot.press("a")
            await wait_for(pilot, lambda: screen.judged, "the vote")
            await pilot.pause()
            info = str(screen.info.render())
            assert info.startswith("case 1 of 3 · c1") and "voted A best" in info
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.current is not None and screen.current.case_id == "c2", "case 2")
            info = str(screen.info.render())
            assert info.startswith("case 2 of 3 · c2") and "voted" not in info
            await pilot.press("f8")                                  # revealed without a vote: counted too
            await wait_for(pilot, lambda: screen.queue.revealed_current, "the reveal")
            await pilot.pause()
            assert str(screen.info.render()).startswith("case 2 of 3 · c2")
        await store.aclose()

    run(scenario())


def test_images_of_a_run_show_their_size_in_the_vote_queue(tmp_path, monkeypatch):
    """`lineup run` records each image's name and size with the turn, as the
    chat does, so the queue's placeholder reads "[image: NAME · SIZE]"."""
    import json
    import shutil
    from pathlib import Path

    from lineup.cli import main

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "images").mkdir()
    png = root / "sample_sets" / "images" / "chart-quarterly-units.png"
    shutil.copy(png, tmp_path / "images" / "chart.png")
    sample = tmp_path / "set.jsonl"
    sample.write_text(json.dumps({"id": "v1", "category": "vision", "prompt": "What does this chart show?",
                                  "images": ["images/chart.png"]}) + "\n")
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    db = tmp_path / "q.db"
    assert main(["run", str(sample), "-m", "demo/concise", "-m", "demo/thorough", "--seed", "0", "--quiet",
                 "--db", str(db)]) == 0
    from core.answering.attachments import human_size

    size = human_size(png.stat().st_size)

    async def scenario():
        store = await open_store(db)
        app = queue_app(store)
        async with app.run_test(size=(150, 40)) as pilot:
            screen = await queue_screen(pilot)
            shown = [" ".join(p.body.plain_text().split()) for p in screen.panes]
        await store.aclose()
        assert all(f"[image: chart.png · {size}]" in text for text in shown), shown
        assert not any("size unknown" in text for text in shown)

    run(scenario())


def test_scores_on_the_sets_dimensions_are_asked_after_the_vote_by_label_before_the_names(tmp_path):
    """With dimensions declared, a vote asks each answer's 1-5 scores by label
    (names hidden until it ends), s skips one, Esc ends; F3 scores a case
    instead of voting on it, and the case still waits for its vote."""
    from store.records import current_scores
    from tui.score_sheet import ScoreSheet

    dims = [{"name": "correctness", "description": "Is it right?"}, {"name": "tone"}]
    sid = make_run(tmp_path / "q.db", CASES[:2], meta={"dimensions": dims})

    async def scenario():
        store = await open_store(tmp_path / "q.db")
        app = queue_app(store, session_id=sid, shuffle_seed=5)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await queue_screen(pilot)
            order = pane_aliases(screen)
            await pilot.press("b")
            await wait_for(pilot, lambda: isinstance(app.screen, ScoreSheet), "the score sheet")
            sheet = app.screen
            asked = str(sheet.query_one("#score-ask").render())
            assert "Answer A · correctness: Is it right?" in asked
            chrome = "\n".join([asked, *[str(p.header.render()) for p in screen.panes], *[p.name_shown or ""
                                 for p in screen.panes], *[m for _, m in app.notices]])
            assert leaks(chrome, IDENTITY) == []
            await pilot.press("4", "s", "2")             # A correctness 4, A tone skipped, B correctness 2
            assert "Answer B · tone" in str(sheet.query_one("#score-ask").render())
            await pilot.press("escape")
            await wait_for(pilot, lambda: screen.judged and screen.panes[0].name_shown == f"A · {order[0]}",
                           "the names after the scores")
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.current is not None and screen.current.case_id == "c2", "case 2")
            order2 = pane_aliases(screen)
            await pilot.press("f3")                       # scored instead of a vote
            await wait_for(pilot, lambda: isinstance(app.screen, ScoreSheet), "the score sheet again")
            await pilot.press("s", "5", "escape")
            await wait_for(pilot, lambda: app.screen is screen, "back to the queue")
            await pilot.pause()
            assert screen.waiting and not any(p.name_shown and "·" in p.name_shown for p in screen.panes)
        await store.aclose()
        with Store.open(tmp_path / "q.db") as s:
            loaded = s.load_session(sid)
        alias_of = {o.id: o.contestant for o in loaded.outputs}
        case_of = {o.id: next(t.case_id for t in loaded.turns if t.id == o.turn_id) for o in loaded.outputs}
        got = sorted((case_of[x.output_id], alias_of[x.output_id], x.dimension, x.value, x.rater, x.rater_kind)
                     for x in current_scores(loaded.scores))
        assert got == sorted([("c1", order[0], "correctness", 4, "tester", "human"),
                              ("c1", order[1], "correctness", 2, "tester", "human"),
                              ("c2", order2[0], "tone", 5, "tester", "human")])
        assert {v.turn_id for v in loaded.current_votes()} == {next(t.id for t in loaded.turns if t.case_id == "c1")}

    run(scenario())


def test_a_case_opens_at_its_prompt_not_at_the_end_of_long_answers(tmp_path, monkeypatch):
    """Answers longer than the pane, at 80x24: each pane opens on the case's
    first prompt and the answer's first lines (a rater reads from there), not
    scrolled to the end of the answer as a stream in flight is followed. The
    same for every pane: where a pane opens tells nothing of whose it is."""
    from tests import tui_sessions

    def long_answer(alias: str, case: str, repeat: int = 0, follow: int = 0) -> str:
        lines = [f"First line from {alias} to {case}, step {follow}."]
        lines += [f"Line {k} of the answer, long enough to fill the pane." for k in range(2, 61)]
        return "\n\n".join(lines + [f"Last line from {alias} to {case}, step {follow}."])

    monkeypatch.setattr(tui_sessions, "answer", long_answer)      # what make_run writes

    def first_screen(db, sid) -> tuple[str, VoteQueueScreen]:
        """The queue's first case at 80x24: (the screen as text, the queue)."""
        async def scenario():
            store = await open_store(db)
            app = queue_app(store, session_id=sid, shuffle_seed=5)
            async with app.run_test(size=(80, 24)) as pilot:
                screen = await queue_screen(pilot)
                await pilot.pause(0.2)
                shown = screen_text(app)
            await store.aclose()
            return shown, screen

        return run(scenario())

    shown, screen = first_screen(tmp_path / "q.db",
                                 make_run(tmp_path / "q.db", [("c2", "code", ["write a loop", "now in reverse"])]))
    assert shown.count("write a loop") == len(ALIASES), shown
    assert shown.count("First line from") == len(ALIASES) and "Last line from" not in shown, shown
    assert all(round(p.body.scroll_y) == 0 for p in screen.panes)
    # a chat's second turn is judged with the first as context: the panes open on its own prompt
    shown, screen = first_screen(tmp_path / "chat.db", make_run(
        tmp_path / "chat.db", [("", "code", ["first question", "second question"])], kind="chat", voted=("",)))
    assert screen.current is not None and len(screen.current.context) == 1, shown
    assert shown.count("second question") == len(ALIASES) and "first question" not in shown, shown
    assert shown.count("to , step 1.") == len(ALIASES), shown
