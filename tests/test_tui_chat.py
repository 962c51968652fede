"""The chat screen driven by a pilot against real loopback model servers:
streaming into three panes, separate histories, blind mode that hides every
identity until the vote, votes, tags, cancel, errors, retry and resume."""

from __future__ import annotations

import argparse

import pytest
from textual._styles_cache import StylesCache
from textual.binding import Binding
from textual.screen import Screen
from tests.tui_support import ModelServers, Reply, leaks, models_config, open_store, run, visible_text, wait_for

from core.answering.config import DEFAULT_TAGS
from store import Store
from tui.app import ChatOptions, LineupApp
from tui.tag_picker import TagPicker

NAMES = [("zephyr", "zephyr-7b"), ("orca", "orca-mini"), ("falcon", "falcon-40b")]
IDENTITY = ["zephyr", "zephyr-7b", "orca", "orca-mini", "falcon", "falcon-40b", "openai"]


def make_app(store, servers, **chat):
    models = servers.models()
    return LineupApp(store, models_config(models), chat=ChatOptions(models=models, **chat), rater="tester")


async def send(pilot, text: str) -> None:
    app = pilot.app
    app.chat_screen.prompt.focus()
    before = app.chat_screen.sends
    await pilot.press(*text)
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.chat_screen.sends > before, "the send to start")


async def settle(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: not app.chat_screen.sending and not app.session.streaming, "answers to end")
    await pilot.pause()


def statuses(app) -> list[str]:
    return [p.status for p in app.chat_screen.panes]


async def started(pilot, app) -> None:
    await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat screen")
    await pilot.pause()


def test_live_figures_repaint_the_pane_header_not_the_whole_pane_nor_the_layout(tmp_path, monkeypatch):
    """While answers stream, each pane's figures tick four times a second. They
    are drawn in the pane's header: the pane itself (its border, around the
    conversation) is styled again only when its own look changes (streaming,
    done), not at each tick, where every row of it was restyled; and the
    header's one line does not lay the screen out again (which repaints it all).
    The grid around the panes, which draws nothing of its own, is not painted."""
    styled: dict[str, int] = {}
    render_line = StylesCache.render_line
    layouts = 0
    refresh_layout = Screen._refresh_layout
    grid_painted = 0
    render_widget = StylesCache.render_widget

    def counting_renders(self, widget, crop):
        nonlocal grid_painted
        grid_painted += widget.id == "panes"
        return render_widget(self, widget, crop)

    def counting_layouts(self, *args, **kwargs):
        nonlocal layouts
        layouts += 1
        return refresh_layout(self, *args, **kwargs)

    def counting(self, styles, *args, **kwargs):
        kind = type(styles.node).__name__
        styled[kind] = styled.get(kind, 0) + 1
        return render_line(self, styles, *args, **kwargs)

    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            for alias, _ in NAMES[:2]:
                srv[alias].script(Reply(text="A steady answer, word after word. " * 12, chunk_chars=4, delay=0.025))
            app = make_app(store, srv)
            async with app.run_test(size=(120, 30)) as pilot:
                await started(pilot, app)
                monkeypatch.setattr(StylesCache, "render_line", counting)
                monkeypatch.setattr(Screen, "_refresh_layout", counting_layouts)
                monkeypatch.setattr(StylesCache, "render_widget", counting_renders)
                await send(pilot, "Go on")
                await settle(pilot)
                height = app.chat_screen.panes[0].size.height
        return height

    height = run(scenario())
    assert styled.get("PaneHeader", 0) >= 2 * 8, styled     # the figures ticked, in each pane's header
    # each pane restyled whole a few times (its look when streaming and done), not once a tick
    assert styled.get("Pane", 0) <= 2 * 4 * height, (styled, height)
    assert layouts <= 8, layouts      # the send, the answers starting and ending, the vote bar
    assert grid_painted == 0          # the panes' grid shows only the screen: hidden, it is not painted


def test_three_models_stream_and_follow_ups_keep_separate_histories(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES) as srv:
            for i, (alias, _) in enumerate(NAMES):
                srv[alias].script(Reply(text=f"First answer number {i} with **bold**.", chunk_chars=3),
                                  Reply(text=f"Second answer number {i}.", chunk_chars=5))
            app = make_app(store, srv)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                await send(pilot, "Tell me something")
                await settle(pilot)
                assert statuses(app) == ["done", "done", "done"]
                for i, pane in enumerate(app.chat_screen.panes):
                    assert pane.body.answer_text() == f"First answer number {i} with **bold**."
                    assert "Tell me something" in pane.body.plain_text()
                # non-blind: names and figures are shown
                assert [p.name_shown for p in app.chat_screen.panes] == ["zephyr", "orca", "falcon"]
                assert "tok" in str(app.chat_screen.panes[0].header.render())

                await send(pilot, "And then?")
                await settle(pilot)
                for i, (alias, model) in enumerate(NAMES):
                    reqs = srv[alias].requests
                    assert len(reqs) == 2
                    assert reqs[1].json["model"] == model
                    assert reqs[1].json["messages"] == [
                        {"role": "user", "content": "Tell me something"},
                        {"role": "assistant", "content": f"First answer number {i} with **bold**."},
                        {"role": "user", "content": "And then?"},
                    ]
                sid = app.session.id
                await pilot.press("ctrl+q")
        await store.aclose()
        with Store.open(tmp_path / "t.db") as s:
            loaded = s.load_session(sid)
        assert len(loaded.turns) == 2
        assert sorted((o.contestant, o.status) for o in loaded.outputs) == sorted(
            [(a, "complete") for a, _ in NAMES] * 2)

    run(scenario())


def test_blind_mode_hides_every_identity_until_the_vote(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES) as srv:
            srv["zephyr"].script(Reply(text="A calm answer about rivers and lakes.", chunk_chars=2, delay=0.05))
            srv["orca"].script(Reply(text="Another answer, also about water.", chunk_chars=2, delay=0.01))
            srv["falcon"].script(Reply(status=404, message="model falcon-40b not found on openai"))
            app = make_app(store, srv, blind=True, label_seed=3)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                assert leaks(visible_text(app), IDENTITY) == []
                await send(pilot, "Describe water")
                await wait_for(pilot, lambda: "streaming" in statuses(app), "a pane streaming")
                assert leaks(visible_text(app), IDENTITY) == []
                await settle(pilot)
                labels = [c.label for c in app.session.contestants]
                assert labels == ["A", "B", "C"]
                falcon = next(i for i, c in enumerate(app.session.contestants) if c.alias == "falcon")
                assert statuses(app)[falcon] == "error"
                shown = " ".join(app.chat_screen.panes[falcon].body.plain_text().split())
                assert "error (not found, HTTP 404) — details after the vote" in shown
                assert "not found on" not in shown
                assert sorted(s for i, s in enumerate(statuses(app)) if i != falcon) == ["done", "done"]
                text = visible_text(app)
                assert leaks(text, IDENTITY) == []
                assert "ttft" not in text and "tok/s" not in text       # figures hidden until reveal
                assert app.focused is app.chat_screen.prompt            # offered, never forced on the rater
                # vote B best: B's answer failed, so the vote waits for the same key again
                await pilot.press("f2", "b")
                await wait_for(pilot, lambda: any("Not saved yet" in m for _, m in app.notices), "the warning")
                warning = next(m for _, m in app.notices if "Not saved yet" in m)
                assert "B's answer failed (not found)" in warning and leaks(warning, IDENTITY) == []
                assert not app.session.revealed and not app.session.votes
                await pilot.press("b")
                await wait_for(pilot, lambda: app.session.revealed, "the reveal")
                await pilot.pause()
                text = visible_text(app)
                for alias, _ in NAMES:
                    assert alias in text
                assert "tok/s" in text or "ttft" in text
                # the error, whole, now that the names are out
                await wait_for(pilot, lambda: "model falcon-40b not found on openai"
                               in " ".join(app.chat_screen.panes[falcon].body.plain_text().split()), "the whole error")
                assert "details after" not in app.chat_screen.panes[falcon].body.plain_text()
                mapping = {c.label: c.alias for c in app.session.contestants}
                sid = app.session.id
                await pilot.press("ctrl+q")
        await store.aclose()
        with Store.open(tmp_path / "t.db") as s:
            loaded = s.load_session(sid)
        (vote,) = loaded.votes
        assert vote.choice == "B" and vote.mapping == mapping and vote.positions == ["A", "B", "C"]
        assert vote.rater == "tester" and vote.revealed_at is not None
        assert loaded.session.revealed_at is not None and loaded.session.blind
        err = next(o for o in loaded.outputs if o.contestant == "falcon")
        assert err.status == "error" and "model falcon-40b not found on openai" in err.error_message   # true text

    run(scenario())


def _votes_in(path) -> list:
    with Store.open(path) as s:
        return [v for summary in s.list_sessions() for v in s.load_session(summary.id).votes]


def test_a_follow_up_typed_after_blind_answers_is_sent_and_never_votes(tmp_path):
    """Blind, answers done: the prompt keeps the focus, so `also a fruit` is a
    follow-up for both models, not a vote (its `a` and `t` are vote keys)."""
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            srv["zephyr"].script(Reply(text="Blue."), Reply(text="Apple."))
            srv["orca"].script(Reply(text="Red."), Reply(text="Pear."))
            app = make_app(store, srv, blind=True)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                await send(pilot, "Name a colour.")
                await settle(pilot)
                screen = app.chat_screen
                assert screen.vote_bar.has_class("-visible")          # offered, not forced on the rater
                assert app.focused is screen.prompt
                await pilot.press(*"also a fruit")
                assert screen.prompt.text == "also a fruit"
                await pilot.press("enter")
                await wait_for(pilot, lambda: screen.sends == 2, "the follow-up")
                await settle(pilot)
                assert not app.session.votes and not app.session.revealed
                assert leaks(visible_text(app), IDENTITY) == []
                for alias, _ in NAMES[:2]:
                    assert srv[alias].requests[1].json["messages"][-1] == {"role": "user", "content": "also a fruit"}
        await store.aclose()
        assert _votes_in(tmp_path / "t.db") == []

    run(scenario())


def test_keys_typed_while_blind_answers_finish_stay_in_the_prompt(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            srv["zephyr"].script(Reply(text="Blue."))
            srv["orca"].script(Reply(text="A slow and rather long answer about red things. " * 2, chunk_chars=1,
                                     delay=0.05))
            app = make_app(store, srv, blind=True)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                await send(pilot, "Name a colour.")
                await wait_for(pilot, lambda: statuses(app)[0] == "done" or statuses(app)[1] == "done", "one answer")
                assert app.session.streaming                        # the other one is still coming
                await pilot.press(*"and a bird")
                await settle(pilot)
                await pilot.press(*" tab")
                screen = app.chat_screen
                assert screen.prompt.text == "and a bird tab" and app.focused is screen.prompt
                assert not app.session.votes and not app.session.revealed
                assert leaks(visible_text(app), IDENTITY) == []
        await store.aclose()
        assert _votes_in(tmp_path / "t.db") == []

    run(scenario())


def test_a_vote_cast_by_mistake_is_withdrawn_from_the_chat(tmp_path):
    from tui.help_screen import binding_groups

    chat_keys = dict(binding_groups(LineupApp))["Chat"]
    assert any(b.id == "chat.withdraw_vote" and b.action == "withdraw_vote" for b in chat_keys)

    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            app = make_app(store, srv, blind=True)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                screen = app.chat_screen
                assert "Withdraw my vote" not in [n for n, _, _ in screen.palette_commands()]
                await send(pilot, "hi")
                await settle(pilot)
                await pilot.press("f2", "a")                      # deliberate: to the vote bar, then a key
                await wait_for(pilot, lambda: app.session.current_vote("tester") is not None, "the vote")
                await pilot.pause()
                assert app.focused is screen.prompt and not screen.vote_bar.has_class("-visible")
                assert "Withdraw my vote" in [n for n, _, _ in screen.palette_commands()]
                await pilot.press("f5")
                await wait_for(pilot, lambda: app.session.current_vote("tester") is None, "the withdrawal")
                await pilot.pause()
                assert any("Vote withdrawn" in m for _, m in app.notices)
                assert screen.vote_bar.has_class("-visible")        # the turn can be judged again
                await pilot.press("f2", "b")
                await wait_for(pilot, lambda: app.session.current_vote("tester") is not None, "the new vote")
        await store.aclose()
        votes = _votes_in(tmp_path / "t.db")
        assert [(v.choice, v.retracted_at is not None) for v in votes] == [("A", True), ("B", False)]

    run(scenario())


def test_reveal_names_without_voting(tmp_path):
    """F8 (or the palette) shows who wrote what without a vote: recorded as a
    reveal (no vote), names and whole errors shown; a vote can still follow."""
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            srv["zephyr"].script(Reply(text="Blue."))
            srv["orca"].script(Reply(status=500, message="orca-mini crashed at zorblax-cloud.example"))
            app = make_app(store, srv, blind=True)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                screen = app.chat_screen
                await send(pilot, "Name a colour.")
                await settle(pilot)
                assert "Reveal names without voting" in [n for n, _, _ in screen.palette_commands()]
                assert "zorblax" not in visible_text(app) and leaks(visible_text(app), IDENTITY) == []
                await pilot.press("f8")
                await wait_for(pilot, lambda: app.session.revealed, "the reveal")
                orca = next(i for i, c in enumerate(app.session.contestants) if c.alias == "orca")
                await wait_for(pilot, lambda: "zorblax-cloud.example" in screen.panes[orca].body.plain_text(),
                               "the whole error")
                text = visible_text(app)
                assert "zephyr" in text and "orca" in text
                assert "Reveal names without voting" not in [n for n, _, _ in screen.palette_commands()]
                assert not app.session.votes and screen.vote_bar.has_class("-visible")
        await store.aclose()
        with Store.open(tmp_path / "t.db") as s:
            (summary,) = s.list_sessions()
            loaded = s.load_session(summary.id)
        assert loaded.votes == [] and len(loaded.reveals) == 1 and loaded.session.revealed_at is not None
        assert summary.contestants == ["zephyr", "orca"] or sorted(summary.contestants) == ["orca", "zephyr"]

    run(scenario())


def test_ranking_vote_with_three(tmp_path):
    """A ranking of three saves once all three are placed, or once the rater
    confirms the last place the bar says is implied; never at two picks, and
    no key of the gesture lands in the prompt."""
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES) as srv:
            app = make_app(store, srv, blind=True)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                screen = app.chat_screen
                await send(pilot, "hi")
                await settle(pilot)
                await pilot.press("f2", "n", "c", "escape")                  # starts over, saves nothing
                await pilot.pause()
                assert screen.vote_bar.ranking is None and not app.session.votes
                await pilot.press("n", "c", "a")
                await pilot.pause()
                assert not app.session.votes and not app.session.revealed      # two of three placed
                said = str(screen.vote_bar.prompt.render())
                assert "C > A > B" in said and "B last" in said and "Enter" in said
                assert app.focused is screen.vote_bar and screen.prompt.text == ""
                await pilot.press("enter")                                      # confirms B last
                await wait_for(pilot, lambda: app.session.revealed, "the vote")
                vote = app.session.votes[-1]
                assert vote.choice == "C" and vote.ranking == ["C", "A", "B"]
                assert screen.prompt.text == ""
                # next turn: all three placed by hand, the last key included
                await send(pilot, "again")
                await settle(pilot)
                await pilot.press("f2", "n", "b", "c", "a")
                await wait_for(pilot, lambda: len(app.session.votes) == 2, "the second vote")
                await pilot.pause()
                assert app.session.votes[-1].ranking == ["B", "C", "A"]
                assert screen.prompt.text == "" and app.focused is screen.prompt
        await store.aclose()

    run(scenario())


def test_tag_and_note_recorded_on_that_answer(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES) as srv:
            models = srv.models()
            app = LineupApp(store, models_config(models, tags=("too_cute",)),
                            chat=ChatOptions(models=models, blind=True), rater="tester")
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                await send(pilot, "hello")
                await settle(pilot)
                pane = app.chat_screen.panes[1]
                pane.focus()
                await pilot.press("t")
                await wait_for(pilot, lambda: isinstance(app.screen, TagPicker), "the tag picker")
                assert app.screen.tags == (*DEFAULT_TAGS, "too_cute")
                assert leaks(visible_text(app), IDENTITY) == []
                await pilot.press("space")                  # first tag: format_error
                await pilot.press("down", "down", "space")  # third: reasoning_break
                await pilot.press("tab", *"odd tone", "enter")
                await wait_for(pilot, lambda: any("Tagged" in m for _, m in app.notices), "the tag")
                out_id = app.session.contestants[1].last_output.id
                sid = app.session.id
                await pilot.press("ctrl+q")
        await store.aclose()
        with Store.open(tmp_path / "t.db") as s:
            tags = s.load_session(sid).tags
        assert sorted((t.tag, t.note, t.output_id) for t in tags) == [
            ("format_error", "odd tone", out_id), ("reasoning_break", None, out_id)]

    run(scenario())


def test_cancel_one_pane_and_error_isolation(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES) as srv:
            srv["zephyr"].script(Reply(text="fine and complete"))
            srv["orca"].script(Reply(text="this one never ends", fault="stall", fault_after=1))
            srv["falcon"].script(Reply(status=500, message="boom"))
            app = make_app(store, srv)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                await send(pilot, "go")
                await wait_for(pilot, lambda: statuses(app) == ["done", "streaming", "error"], "mixed states")
                assert "boom" in app.chat_screen.panes[2].body.plain_text()
                app.chat_screen.panes[1].focus()
                await pilot.press("c")
                await settle(pilot)
                assert statuses(app) == ["done", "cancelled", "error"]
                assert srv["orca"].requests[0].wait_closed(5) is not None   # the connection was closed
                # a new turn works for everyone after that
                srv["orca"].script(Reply(text="back again"))
                srv["falcon"].script(Reply(text="recovered"))
                await send(pilot, "again")
                await settle(pilot)
                assert statuses(app) == ["done", "done", "done"]
                sid = app.session.id
                await pilot.press("ctrl+q")
        await store.aclose()
        with Store.open(tmp_path / "t.db") as s:
            loaded = s.load_session(sid)
        first = loaded.outputs_for(loaded.turns[0].id)
        assert [(o.contestant, o.status) for o in first] == [
            ("zephyr", "complete"), ("orca", "cancelled"), ("falcon", "error")]
        assert first[1].text.startswith("this")

    run(scenario())


def test_escape_cancels_everything_in_flight(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES) as srv:
            for alias, _ in NAMES:
                srv[alias].script(Reply(text="stuck forever", fault="stall", fault_after=1))
            app = make_app(store, srv)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                await send(pilot, "go")
                await wait_for(pilot, lambda: statuses(app) == ["streaming"] * 3, "all streaming")
                await pilot.press("escape")
                await settle(pilot)
                assert statuses(app) == ["cancelled"] * 3
        await store.aclose()

    run(scenario())


def test_retry_keeps_the_old_attempt(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            srv["orca"].script(Reply(text="first try"), Reply(text="second try"))
            app = make_app(store, srv)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                await send(pilot, "go")
                await settle(pilot)
                app.chat_screen.panes[1].focus()
                await pilot.press("r")
                await wait_for(pilot, lambda: app.chat_screen.panes[1].status == "done"
                               and app.session.contestants[1].last_output.attempt == 2, "the retry")
                assert app.chat_screen.panes[1].body.answer_text() == "second try"
                sid = app.session.id
        await store.aclose()
        with Store.open(tmp_path / "t.db") as s:
            loaded = s.load_session(sid)
        orca = [(o.attempt, o.text) for o in loaded.outputs if o.contestant == "orca"]
        assert sorted(orca) == [(1, "first try"), (2, "second try")]

    run(scenario())


def test_resume_continues_each_history(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            srv["zephyr"].script(Reply(text="Z one"), Reply(text="Z two"))
            srv["orca"].script(Reply(text="O one"), Reply(text="O two"))
            app = make_app(store, srv)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                await send(pilot, "first")
                await settle(pilot)
                sid = app.session.id
                await pilot.press("ctrl+q")
            app2 = make_app(store, srv, resume=sid[:12])
            async with app2.run_test(size=(150, 40)) as pilot:
                await started(pilot, app2)
                assert app2.session.id == sid
                panes = app2.chat_screen.panes
                assert "Z one" in panes[0].body.plain_text() and "O one" in panes[1].body.plain_text()
                assert panes[0].body.answer_text() == "Z one"
                await send(pilot, "second")
                await settle(pilot)
            assert srv["orca"].requests[1].json["messages"] == [
                {"role": "user", "content": "first"}, {"role": "assistant", "content": "O one"},
                {"role": "user", "content": "second"}]
        await store.aclose()
        with Store.open(tmp_path / "t.db") as s:
            assert len(s.load_session(sid).turns) == 2

    run(scenario())


def test_model_output_is_shown_literally(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            srv["zephyr"].script(Reply(text="[bold red]not bold[/] [link=http://x]y[/link] \x1b[31mred\x1b[0m"))
            app = make_app(store, srv)
            async with app.run_test(size=(150, 30)) as pilot:
                await started(pilot, app)
                await send(pilot, "markup?")
                await settle(pilot)
                shown = app.chat_screen.panes[0].body.plain_text()
                assert "[bold red]not bold[/]" in shown and "[link=http://x]y[/link]" in shown
                assert "\x1b" not in shown
        await store.aclose()

    run(scenario())


def test_every_binding_has_an_id_and_the_palette_lists_pane_actions(tmp_path):
    from tui.help_screen import binding_groups

    for title, bindings in binding_groups(LineupApp):
        for b in bindings:
            assert isinstance(b, Binding) and b.id, f"{title}: {b.key} has no id"
    ids = [b.id for _, bindings in binding_groups(LineupApp) for b in bindings]
    assert len(ids) == len(set(ids))

    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            app = make_app(store, srv, blind=True)
            async with app.run_test(size=(150, 60)) as pilot:
                await started(pilot, app)
                names = [n for n, _, _ in app.chat_screen.palette_commands()]
                assert "A: retry" in names and "B: copy code" in names and "Cancel all" in names
                await pilot.press("f1")
                await pilot.pause()
                assert "Maximise" in visible_text(app) or "maximise" in visible_text(app).lower()
        await store.aclose()

    run(scenario())


def test_chat_command_uses_demo_models_with_a_hint_when_nothing_is_configured(tmp_path, monkeypatch):
    from lineup.commands.chat_cmd import configure, prepare

    monkeypatch.delenv("LINEUP_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nothing-here"))
    p = argparse.ArgumentParser()
    p.add_argument("--db")
    p.add_argument("--config")
    configure(p)
    db, config, opts = prepare(p.parse_args(["--db", str(tmp_path / "x.db"), "--blind", "--seed", "4"]))
    assert all(m.is_demo for m in opts.models) and len(opts.models) >= 2
    assert opts.hint and "lineup models" in opts.hint and opts.blind and opts.seed == 4
    from core.ground.errors import UsageError

    with pytest.raises(UsageError, match="unknown model alias"):
        prepare(p.parse_args(["-m", "nope"]))


def test_grid_maximise_mouse_vote_and_palette(tmp_path, monkeypatch):
    """Five demo models: a grid of two rows; a pane maximises and restores; the
    blind toggle from the command palette; a vote by mouse click."""
    from providers.model_config import ModelConfig

    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    models = [ModelConfig(alias=f"d{i}", provider="demo", model=style)
              for i, style in enumerate(["concise", "thorough", "quirky", "concise", "thinker"])]

    async def scenario():
        store = await open_store(tmp_path / "t.db")
        app = LineupApp(store, models_config(models), chat=ChatOptions(models=models, seed=2), rater="tester")
        async with app.run_test(size=(160, 44)) as pilot:
            await started(pilot, app)
            grid = app.chat_screen.query_one("#panes")
            assert (grid.styles.grid_size_columns, grid.styles.grid_size_rows) == (3, 2)
            first = app.session.id
            # the command palette reaches the blind toggle; with no turn yet it restarts blind
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*"Toggle blind")
            await pilot.pause(0.3)
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.session.id != first and app.screen is app.chat_screen
                           and app.chat_screen.session is app.session, "the blind session")
            assert app.session.blind and [p.name_shown for p in app.chat_screen.panes] == list("ABCDE")
            await send(pilot, "compare things")
            await settle(pilot)
            pane = app.chat_screen.panes[4]
            pane.focus()
            await pilot.press("m")
            assert app.chat_screen.maximized is pane
            await pilot.press("m")
            assert app.chat_screen.maximized is None
            await pilot.click("#vote-pos-1")
            await wait_for(pilot, lambda: app.session.revealed, "the vote")
            assert app.session.votes[-1].choice == "B"
        await store.aclose()

    run(scenario())


def test_palette_shows_names_with_markup_literally(tmp_path):
    """A palette entry built from a model name must not be parsed as markup."""
    from tui.commands import LineupCommands

    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            app = make_app(store, srv, blind=False)
            async with app.run_test(size=(150, 30)) as pilot:
                await started(pilot, app)
                hostile = "[bold red]boom[/] [@click=app.quit]x[/]"
                screen = app.screen
                original = screen.palette_commands
                screen.palette_commands = lambda: [(hostile, "[b]help[/b]", lambda: None), *original()]
                provider = LineupCommands(screen)
                hits = [h async for h in provider.discover()]
                assert hits[0].prompt.plain == hostile and hits[0].help == "\\[b]help\\[/b]"
                found = [h async for h in provider.search("boom")]
                assert found and found[0].prompt.plain == hostile
        await store.aclose()

    run(scenario())


def test_an_answer_the_server_cut_is_shown_as_cut(tmp_path):
    """`[DONE]` without a finish reason (a local server that cut the answer)
    shows as a truncated error in its pane, with the text that came kept."""
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES[:2]) as srv:
            srv["zephyr"].script(Reply(text="fine and complete"))
            srv["orca"].script(Reply(text="half of it and", chunk_chars=5, fault="no_finish", fault_after=2))
            app = make_app(store, srv)
            async with app.run_test(size=(150, 40)) as pilot:
                await started(pilot, app)
                await send(pilot, "go")
                await settle(pilot)
                assert statuses(app) == ["done", "error"]
                pane = app.chat_screen.panes[1]
                assert pane.detail == "truncated"
                shown = pane.body.plain_text()
                assert "half of it" in shown and "the answer was cut" in shown
                await pilot.press("ctrl+q")
        await store.aclose()

    run(scenario())
