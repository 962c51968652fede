"""Replay (read-only view, playback at the recorded pace), re-runs as linked
sessions, the sessions screen, and the replay/vote command lines."""

from __future__ import annotations

import argparse

import pytest
from tests.tui_sessions import CASES, make_chat, make_run
from tests.tui_support import ModelServers, leaks, models_config, open_store, run, visible_text, wait_for

from core.ground.errors import UsageError
from store import Store
from store.records import ContestantRecord, OutputRecord, SessionRecord, TurnRecord
from tui.app import ChatOptions, LineupApp, ReplayOptions
from tui.playback import answer_chunks, delays
from tui.replay_screen import ReplayScreen
from tui.sessions_screen import SessionsScreen
from tui.vote_queue import VoteQueueScreen


def test_answer_chunks_follow_the_recorded_sizes_and_times():
    chunks = answer_chunks("Hello world", "think", [10, 20, 30, 45], [5, 3, 4, 4])
    assert [(c.at_ms, c.kind, c.text) for c in chunks] == [
        (10, "reasoning", "think"), (20, "text", "Hel"), (30, "text", "lo w"), (45, "text", "orld")]
    assert delays(chunks, 1.0) == [0.01, 0.01, 0.01, 0.015]
    assert delays(chunks, 4.0) == [0.0025, 0.0025, 0.0025, 0.00375]
    assert delays(chunks, float("inf")) == [0.0] * 4
    # records whose sizes do not add up are split evenly, nothing lost or reordered
    odd = answer_chunks("x" * 40, None, [100], [7])
    assert "".join(c.text for c in odd) == "x" * 40 and all(c.kind == "text" for c in odd)


def test_replay_shows_turns_votes_tags_and_plays_back(tmp_path):
    sid = make_chat(tmp_path / "r.db", blind=False)

    async def scenario():
        store = await open_store(tmp_path / "r.db")
        app = LineupApp(store, replay=ReplayOptions(sid), rater="tester")
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "replay")
            screen = app.screen
            info = str(screen.info.render())
            assert "turn 1 of 1" in info and "tester: lark best (lark)" in info
            assert "tags: too_verbose" in screen.panes[1].body.plain_text()
            assert screen.panes[0].body.answer_text() == "la la la"
            screen.panes[1].focus()
            await pilot.press("1")                      # recorded pace: the second half comes 100 s later
            await wait_for(pilot, lambda: screen.panes[1].status == "streaming"
                           and screen.panes[1].body.answer_text() == "tweet", "the first chunk")
            await pilot.press("i")                      # instant replaces the slow playback
            await wait_for(pilot, lambda: any("Played" in m for _, m in app.notices), "instant playback")
            assert screen.panes[1].body.answer_text() == "tweet tweet"
            assert screen.panes[1].status == "done"
            await pilot.press("escape")                 # standalone replay: Esc quits
        assert app.return_code == 0
        await store.aclose()

    run(scenario())


def test_replay_header_shows_the_figures_of_the_turn_shown_or_played(tmp_path):
    """Three turns with their own figures: choosing a turn, and playing it,
    shows that turn's time to first token and tokens, never another turn's."""
    with Store.open(tmp_path / "r.db") as store:
        rec = SessionRecord(kind="chat", contestants=[
            ContestantRecord(alias="wren", provider="openai", model="wren-2", label="wren", position=0),
            ContestantRecord(alias="lark", provider="openai", model="lark-1", label="lark", position=1)])
        store.create_session(rec)
        for n in range(3):
            turn = TurnRecord(session_id=rec.id, position=n, user_message=f"turn {n + 1}")
            store.add_turn(turn)
            for k, c in enumerate(rec.contestants):
                out = OutputRecord(session_id=rec.id, turn_id=turn.id, contestant=c.alias, label=c.label,
                                   status="complete", text=f"answer {n + 1}", chunk_ms=[0], chunk_chars=[8],
                                   ttft_ms=float(111 * (n + 1) + k), duration_ms=5000.0, output_tokens=10 * (n + 1))
                store.start_output(out)
                store.finish_output(out)

    def ttfts(screen) -> list[str]:
        return [str(p.header.render()).split("ttft ")[1].split(" ms")[0] for p in screen.panes]

    async def scenario():
        store = await open_store(tmp_path / "r.db")
        app = LineupApp(store, replay=ReplayOptions(rec.id), rater="tester")
        async with app.run_test(size=(140, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "replay")
            screen = app.screen
            await pilot.pause()
            assert ttfts(screen) == ["333", "334"]                  # the last turn, shown first
            await pilot.press("left_square_bracket", "left_square_bracket")
            await pilot.pause()
            assert "turn 1 of 3" in str(screen.info.render())
            assert ttfts(screen) == ["111", "112"] and "10 tok" in str(screen.panes[0].header.render())
            screen.panes[1].focus()
            await pilot.press("i")                                  # play turn 1 of the second pane
            await wait_for(pilot, lambda: any("Played" in m for _, m in app.notices), "the playback")
            await pilot.pause()
            assert ttfts(screen) == ["111", "112"]
            await pilot.press("right_square_bracket")
            await pilot.pause()
            assert ttfts(screen) == ["222", "223"]
        await store.aclose()

    run(scenario())


def test_replay_of_an_unrevealed_blind_session_shows_labels_only(tmp_path):
    """Labels only, and an answer's error by its kind and status: its text may
    name the model (here an unknown vendor's host). Once revealed, all of it."""
    sid = make_chat(tmp_path / "r.db", blind=True)
    message = "HTTP 503: lark-1 overloaded at zorblax-cloud.example"
    with Store.open(tmp_path / "r.db") as s:
        out = next(o for o in s.load_session(sid).outputs if o.contestant == "lark")
        s.finish_output(out.model_copy(update={"status": "error", "error_kind": "server",
                                               "error_message": message}))

    async def scenario():
        store = await open_store(tmp_path / "r.db")
        app = LineupApp(store, replay=ReplayOptions(sid), rater="tester")
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "replay")
            await pilot.pause()
            assert [p.name_shown for p in app.screen.panes] == ["A", "B"]
            assert leaks(visible_text(app), ["wren", "lark", "wren-2", "lark-1", "openai", "zorblax"]) == []
            shown = " ".join(app.screen.panes[1].body.plain_text().split())
            assert "error (server, HTTP 503) — details after the vote" in shown
        await store.aclose()
        with Store.open(tmp_path / "r.db") as s:
            s.reveal_session(sid)
        store = await open_store(tmp_path / "r.db")
        app = LineupApp(store, replay=ReplayOptions(sid), rater="tester")
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "replay")
            await pilot.pause()
            assert message in " ".join(app.screen.panes[1].body.plain_text().split())
        await store.aclose()

    run(scenario())


def test_rerun_sends_the_same_turns_as_a_linked_blind_session(tmp_path):
    names = [("owl", "owl-9"), ("jay", "jay-3")]

    async def scenario():
        store = await open_store(tmp_path / "r.db")
        with ModelServers(names) as srv:
            models = srv.models()
            cfg = models_config(models)
            original = LineupApp(store, cfg, chat=ChatOptions(models=models, blind=True), rater="tester")
            async with original.run_test(size=(120, 30)) as pilot:
                await wait_for(pilot, lambda: original.chat_screen is not None, "chat")
                for prompt in ("one", "two"):
                    before = original.chat_screen.sends
                    original.chat_screen.send(prompt)
                    await wait_for(pilot, lambda before=before: original.chat_screen.sends > before
                                   and not original.chat_screen.sending, "answers")
                first_id = original.session.id
            rerun = LineupApp(store, cfg, chat=ChatOptions(models=list(reversed(models)), blind=True,
                                                           rerun_of=first_id), rater="tester")
            async with rerun.run_test(size=(120, 30)) as pilot:
                await wait_for(pilot, lambda: rerun.chat_screen is not None and rerun.chat_screen.sends == 0
                               and len(rerun.session.turns) == 2 and not rerun.chat_screen.sending
                               and not rerun.session.streaming, "the re-run")
                new_id = rerun.session.id
            owl = srv["owl"].requests
            assert [r.json["messages"][-1]["content"] for r in owl] == ["one", "two", "one", "two"]
            assert [m["role"] for m in owl[3].json["messages"]] == ["user", "assistant", "user"]
        await store.aclose()
        with Store.open(tmp_path / "r.db") as s:
            rec = s.get_session(new_id)
            loaded = s.load_session(new_id)
        assert rec.kind == "rerun" and rec.rerun_of == first_id and rec.blind
        assert [t.user_message for t in loaded.turns] == ["one", "two"]
        assert {o.status for o in loaded.outputs} == {"complete"}

    run(scenario())


def test_sessions_screen_filters_and_opens_replay_and_queue(tmp_path):
    run_id = make_run(tmp_path / "r.db", CASES[:1])
    chat_id = make_chat(tmp_path / "r.db", blind=True)

    async def scenario():
        store = await open_store(tmp_path / "r.db")
        with ModelServers([("kite", "kite-1"), ("tern", "tern-1")]) as srv:
            models = srv.models()
            app = LineupApp(store, models_config(models), chat=ChatOptions(models=models), rater="tester")
            async with app.run_test(size=(120, 30)) as pilot:
                await wait_for(pilot, lambda: app.chat_screen is not None, "chat")
                await pilot.press("ctrl+o")
                await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.summaries,
                               "sessions")
                screen = app.screen
                # the empty chat session just opened is not listed; the blind one lists no names
                assert {s.id for s in screen.summaries} == {run_id, chat_id}
                assert leaks(visible_text(app), ["wren", "lark"]) == []
                await pilot.press("slash", *"nightly")
                await pilot.pause()
                assert "1 of 2 sessions" in str(screen.query_one("#sessions-count").render())
                screen.query_one("DataTable").focus()
                await pilot.press("v")
                await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen)
                               and app.screen.current is not None, "the queue")
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is app.chat_screen, "back to chat")
                await pilot.press("ctrl+o")
                await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.summaries,
                               "sessions again")
                app.screen.query_one("DataTable").focus()
                await pilot.press("enter")               # newest first: the chat session, continued
                await wait_for(pilot, lambda: app.session is not None and app.session.id == chat_id
                               and app.screen is app.chat_screen, "the resumed chat")
                assert [p.name_shown for p in app.chat_screen.panes] == ["A", "B"]
                assert app.chat_screen.panes[1].body.answer_text() == "tweet tweet"
        await store.aclose()

    run(scenario())


def _parser(module):
    p = argparse.ArgumentParser()
    p.add_argument("--db")
    p.add_argument("--config")
    module.configure(p)
    return p


def test_replay_and_vote_commands_refuse_unknown_sessions(tmp_path):
    from lineup.commands import replay_cmd, vote_cmd

    make_chat(tmp_path / "r.db", blind=False)
    db = str(tmp_path / "r.db")
    with pytest.raises(UsageError, match="no session"):
        replay_cmd.run(_parser(replay_cmd).parse_args(["--db", db, "ZZZZ"]))
    with pytest.raises(UsageError, match="no session"):
        vote_cmd.run(_parser(vote_cmd).parse_args(["--db", db, "ZZZZ"]))
    with pytest.raises(UsageError, match="only goes with --rerun"):
        replay_cmd.run(_parser(replay_cmd).parse_args(["--db", db, "ZZZZ", "-m", "x"]))
    with pytest.raises(UsageError, match="no such database"):
        replay_cmd.run(_parser(replay_cmd).parse_args(["--db", str(tmp_path / "none.db"), "ABC"]))


def test_replay_of_an_unrevealed_blind_session_leaves_reasoning_out(tmp_path):
    """Only lark reasons: before the reveal no pane shows reasoning, not in
    the record's view nor after its answer is played back; once revealed, or
    in a session started with reasoning shown for all, it shows."""
    sid = make_chat(tmp_path / "r.db", blind=True)
    thought = "Pondering which bird song fits best"
    with Store.open(tmp_path / "r.db") as s:
        out = next(o for o in s.load_session(sid).outputs if o.contestant == "lark")
        s.finish_output(out.model_copy(update={"reasoning": thought}))

    async def shown(keys=()) -> list[str]:
        store = await open_store(tmp_path / "r.db")
        app = LineupApp(store, replay=ReplayOptions(sid), rater="tester")
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "replay")
            await pilot.pause()
            panes = app.screen.panes
            texts = [" ".join(p.body.plain_text().split()) for p in panes]
            panes[1].focus()
            await pilot.press("i")                                  # play lark's answer back
            await wait_for(pilot, lambda: any("Played" in m for _, m in app.notices), "the playback")
            texts.append(" ".join(panes[1].body.plain_text().split()))
        await store.aclose()
        return texts

    async def scenario():
        hidden = await shown()
        assert not any(thought in t or "reasoning" in t for t in hidden), hidden
        with Store.open(tmp_path / "r.db") as s:
            s.conn.execute("UPDATE session SET meta = ? WHERE id = ?", ('{"show_reasoning": true}', sid))
            s.conn.commit()
        asked = await shown()
        assert thought in asked[1] and thought not in asked[0]
        with Store.open(tmp_path / "r.db") as s:
            s.conn.execute("UPDATE session SET meta = '{}' WHERE id = ?", (sid,))
            s.conn.commit()
            s.reveal_session(sid)
        revealed = await shown()
        assert thought in revealed[1] and thought not in revealed[0]

    run(scenario())


def test_choosing_a_turn_brings_its_prompt_into_every_pane(tmp_path, monkeypatch):
    """At 80x24, answers longer than a pane: the replay opens on the chosen
    (last) turn's prompt, and [ / ] bring the prompt of the turn chosen to
    the top of every pane, not the end of the record."""
    from tests import tui_sessions as Q
    from tests.tui_support import screen_text

    def long_answer(alias: str, case: str, repeat: int = 0, follow: int = 0) -> str:
        lines = [f"Opening of {alias} on {case}."] + [f"Line {k} of a long answer to fill the pane." for k in range(40)]
        return "\n\n".join(lines + [f"Closing of {alias} on {case}."])

    monkeypatch.setattr(Q, "answer", long_answer)
    sid = make_run(tmp_path / "r.db", CASES)

    async def scenario():
        store = await open_store(tmp_path / "r.db")
        app = LineupApp(store, replay=ReplayOptions(sid), rater="tester")
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "replay")
            screen = app.screen
            await pilot.pause(0.2)
            for key, prompt, turn in ((None, "a haiku", 4), ("[", "now in reverse", 3), ("[", "write a loop", 2),
                                      ("[", "two plus two?", 1), ("]", "write a loop", 2)):
                if key:
                    await pilot.press(key)
                    await pilot.pause(0.2)
                assert f"turn {turn} of 4" in str(screen.info.render())
                shown = screen_text(app)
                assert shown.count(prompt) == 3 and shown.count("Opening of") == 3, (key, shown)
                assert "Closing of" not in shown, (key, shown)
            await pilot.press("escape")
        await store.aclose()

    run(scenario())
