"""Tool traces in the app: calls and results stream into the panes of a
chat started with tools, blind like any answer; the vote queue and replay
show a run's traces as the same readable sequence, with the notice of a
structured-output fallback (which could tell the server) only after the
reveal; a snapshot of a chat pane with a trace."""

from __future__ import annotations

import json

import anyio
from tests.tui_support import ModelServers, Reply, leaks, models_config, open_store, run, visible_text, wait_for

from core.answering.runner import Runner
from core.answering.sampleset import load_sample_set
from core.answering.tools import ToolScript
from store import AsyncStore, Store
from tui.app import ChatOptions, LineupApp, ReplayOptions, VoteOptions
from tui.replay_screen import ReplayScreen
from tui.vote_queue import VoteQueueScreen

NAMES = [("kestrel", "kestrel-large"), ("heron", "heron-small")]
IDENTITY = ["kestrel", "kestrel-large", "heron", "heron-small", "openai"]
WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SCRIPT = ToolScript(tools=[WEATHER], tool_results=[{"name": "get_weather", "arguments": {"city": "Oslo"},
                                                    "result": {"temp_c": -3}}])


def caller(city: str, answer: str):
    def respond(rec):
        if "temp_c" in json.dumps(rec.json) or "no result" in json.dumps(rec.json):
            return Reply(text=answer, chunk_chars=4)
        return Reply(text="Checking.", tool_calls=[{"name": "get_weather", "arguments": {"city": city}}],
                     chunk_chars=3)
    return respond


def test_a_blind_chat_with_tools_streams_calls_and_results_into_the_panes(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES) as srv:
            srv["kestrel"].respond(caller("Oslo", "Minus three in Oslo."))
            srv["heron"].respond(caller("Bergen", "No data for Bergen."))
            models = srv.models()
            app = LineupApp(store, models_config(models), rater="tester",
                            chat=ChatOptions(models=models, blind=True, script=SCRIPT, label_seed=3))
            async with app.run_test(size=(150, 40)) as pilot:
                await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat")
                app.chat_screen.prompt.focus()
                await pilot.press(*"Weather in Oslo?", "enter")
                await wait_for(pilot, lambda: app.chat_screen.sends == 1 and not app.chat_screen.sending
                               and not app.session.streaming, "the answers")
                await pilot.pause()
                texts = {p.index: p.body.plain_text() for p in app.chat_screen.panes}
                by_alias = {c.alias: texts[c.position] for c in app.session.contestants}
                assert "⚙ → get_weather({\"city\": \"Oslo\"})" in by_alias["kestrel"]
                assert "⚙ ← get_weather: {\"temp_c\": -3}" in by_alias["kestrel"]
                assert "⚙ ← get_weather: {\"error\": \"no result is scripted for this call\"}" in by_alias["heron"]
                kestrel = by_alias["kestrel"]
                assert kestrel.index("Checking.") < kestrel.index("→ get_weather") < kestrel.index("←") \
                    < kestrel.index("Minus three")
                assert [p.status for p in app.chat_screen.panes] == ["done", "done"]
                assert leaks(visible_text(app), IDENTITY) == []
                # the second request of each went out with the tools, the call and its result
                for alias in ("kestrel", "heron"):
                    second = srv[alias].requests[1].json
                    assert second["tools"][0]["function"]["name"] == "get_weather"
                    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]
                await pilot.press("f2", "a")
                await wait_for(pilot, lambda: app.session.revealed, "the reveal")
        await store.aclose()
        with Store.open(tmp_path / "t.db") as s:
            (summary,) = s.list_sessions()
            loaded = s.load_session(summary.id)
            assert loaded.session.meta["tools"]["tools"][0]["name"] == "get_weather"
            assert sorted(len(o.trace.steps) for o in loaded.outputs) == [2, 2]

    run(scenario())


def _structured_run(tmp_path):
    """A run of one structured case: kestrel's server refuses response_format (the fallback), heron's takes it."""
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "dog", "category": "structured", "prompt": "Invent a dog.",
                                "response_format": {"schema": {"type": "object", "required": ["name"],
                                                               "properties": {"name": {"type": "string"}}}}}) + "\n"
                    + json.dumps({"id": "wx", "category": "tools", "prompt": "Weather in Oslo?", "tools": [WEATHER],
                                  "tool_results": [{"name": "get_weather", "result": {"temp_c": -3}}]}) + "\n")
    sample = load_sample_set(path)
    with ModelServers(NAMES) as srv:
        def kestrel(rec):
            if "Invent" in json.dumps(rec.json):
                return Reply(text='{"name": "Rex"}', refuse_fields=("response_format",))
            return caller("Oslo", "Minus three.")(rec)

        def heron(rec):
            return Reply(text='{"name": "Fido"}') if "Invent" in json.dumps(rec.json) else caller("Oslo", "Cold.")(rec)

        srv["kestrel"].respond(kestrel)
        srv["heron"].respond(heron)

        async def go():
            store = AsyncStore(Store.open(tmp_path / "run.db"))
            progress = await Runner(store, sample, srv.models()).run()
            await store.aclose()
            return progress.session_id

        return anyio.run(go)


def test_the_vote_queue_shows_traces_and_the_fallback_only_after_the_reveal(tmp_path):
    sid = _structured_run(tmp_path)

    async def scenario():
        store = await open_store(tmp_path / "run.db")
        app = LineupApp(store, vote=VoteOptions(session_id=sid, shuffle_seed=2), rater="tester")
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen) and app.screen.current is not None,
                           "the queue")
            await pilot.pause()
            screen = app.screen
            seen = []
            for _ in range(2):
                await wait_for(pilot, lambda: screen.current is not None, "a case")
                await pilot.pause()
                shown = visible_text(app)
                assert leaks(shown, IDENTITY) == []
                assert "refused" not in shown
                seen.append(screen.current.case_id)
                if screen.current.case_id == "wx":
                    bodies = "\n".join(p.body.plain_text() for p in screen.panes)
                    assert bodies.count("⚙ → get_weather") == 2 and bodies.count("⚙ ← get_weather") == 2
                await pilot.press("t")
                await wait_for(pilot, lambda: screen.judged, "the vote")
                await pilot.pause()
                after = "\n".join(p.body.plain_text() for p in screen.panes)
                if screen.current.case_id == "dog":
                    assert after.count("structured output: the server refused it natively") == 1
                await pilot.press("enter")
            assert sorted(seen) == ["dog", "wx"]
        await store.aclose()

    run(scenario())


def test_replay_shows_the_trace_in_order(tmp_path):
    sid = _structured_run(tmp_path)

    async def scenario():
        store = await open_store(tmp_path / "run.db")
        app = LineupApp(store, replay=ReplayOptions(sid), rater="tester")
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "the replay")
            await pilot.pause()
            texts = [p.body.plain_text() for p in app.screen.panes]
            assert all("⚙ → get_weather({\"city\": \"Oslo\"})" in t and "⚙ ← get_weather: {\"temp_c\": -3}" in t
                       for t in texts)
            assert all("refused" not in t for t in texts)   # a blind run, not revealed
        await store.aclose()

    run(scenario())


def test_a_tool_line_is_plain_text_never_markup_or_markdown():
    from tui.stream_view import StreamView

    view = StreamView()
    view.start_answer()
    view.append("Before.")
    view.add_tool('→ f({"a": "[bold red]x[/] \x1b[31m **b** # h"})')
    view.append("After.")
    view.end_answer()
    text = view.plain_text()
    assert '⚙ → f({"a": "[bold red]x[/] ␛[31m **b** # h"})' in text
    assert text.index("Before.") < text.index("⚙ →") < text.index("After.")
    assert view.answer_text() == "Before.\n\nAfter."


def test_lineup_vote_over_the_demo_tools_run(tmp_path, monkeypatch):
    """The offline flow: `lineup run sample_sets/tools.jsonl` with two demo models, then the blind queue."""
    from pathlib import Path

    from lineup.cli import main

    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    db = tmp_path / "demo.db"
    sets = Path(__file__).resolve().parents[1] / "sample_sets" / "tools.jsonl"
    assert main(["run", str(sets), "-m", "demo/concise", "-m", "demo/thorough", "--db", str(db)]) == 0
    with Store.open(db) as s:
        (summary,) = s.list_sessions(kind="run")

    async def scenario():
        store = await open_store(db)
        app = LineupApp(store, vote=VoteOptions(session_id=summary.id, shuffle_seed=1), rater="tester")
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen) and app.screen.current is not None,
                           "the queue")
            screen = app.screen
            tool_lines = 0
            for _ in range(15):
                await wait_for(pilot, lambda: screen.current is not None, "a case")
                await pilot.pause()
                tool_lines += sum(p.body.plain_text().count("⚙ →") for p in screen.panes)
                assert leaks("\n".join(str(p.header.render()) for p in screen.panes), ["concise", "thorough"]) == []
                await pilot.press("t")
                await wait_for(pilot, lambda: screen.judged, "the vote")
                await pilot.press("enter")
            await wait_for(pilot, lambda: screen.current is None, "the end")
            assert tool_lines >= 10
        await store.aclose()
        with Store.open(db) as s:
            assert len([v for v in s.load_session(summary.id).votes]) == 15

    run(scenario())
