"""Blind means blind, over every screen and export.

Two contestants from vendors no list of names knows: alias `zorblax`, model
`zorblax-7`, OpenAI protocol, served on `localhost:PORT`; alias `quuxly`,
model `qx-large`, Anthropic protocol, on `127.0.0.1:PORT`. Zorblax's server
answers 500 with an error body naming its host, its model and its maker.

Before the vote nothing a person can see or reach shows any of those
strings: the chat panes, notifications, the command palette (the real
provider, and the palette opened), the help screen, the tag picker, the
sessions list (TUI, `lineup sessions`, `--json`), the vote queue, the replay,
a resumed chat, and the CSV and Markdown exports. After the vote the real
error text is shown (chat pane, replay, Markdown) and the names appear.

The JSONL export is the exception by contract: it is the reproducible record
(like the database: it carries the contestants' configs so it can be
imported again), so it is checked to be the whole truth instead: the true
error text, and every line marked not revealed."""

from __future__ import annotations

import io
import json
import re

from rich.console import Console
from tests.tui_support import Reply, TestServer, models_config, open_store, run, screen_text, visible_text, wait_for

from lineup.cli import main
from providers.model_config import ModelConfig
from store import Store
from tui.app import ChatOptions, LineupApp, ReplayOptions, VoteOptions
from tui.commands import LineupCommands
from tui.help_screen import HelpScreen
from tui.replay_screen import ReplayScreen
from tui.sessions_screen import SessionsScreen
from tui.tag_picker import TagPicker
from tui.vote_queue import VoteQueueScreen

ERROR_BODY = "Internal error at zorblax-cloud.example: model zorblax-7 (Zorblax Labs) failed"


def forbidden(models: list[ModelConfig]) -> list[str]:
    """Every config string of every contestant, and the error body's words."""
    words = ["Internal error at", "zorblax-cloud.example", "Zorblax Labs"]
    for m in models:
        host = m.base_url.split("//", 1)[1].split("/", 1)[0]          # host:port as configured
        words += [m.alias, m.model, m.provider, host]
    return words


def found(text: str, words: list[str]) -> list[str]:
    return [w for w in words if w.lower() in text.lower()]


def flat(text: str) -> str:
    """Text as one line: pane wrapping does not hide (or split) a string."""
    return " ".join(text.split())


def assert_blind(where: str, text: str, words: list[str]) -> None:
    seen = found(text, words) or found(flat(text), words)
    assert not seen, f"{where}: {seen} shown before the vote:\n{text}"


async def palette_hits(screen) -> list[str]:
    """Every entry the real palette provider offers on `screen`, with its help."""
    return [f"{hit.text} {hit.help or ''}" async for hit in LineupCommands(screen).discover()]


def help_text(app) -> str:
    """The whole help table (it scrolls), rendered as a terminal would."""
    console = Console(width=120, file=io.StringIO(), record=True)
    for static in app.screen.query("Static"):
        console.print(static.content)
    return console.export_text()


def cli(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_nothing_names_a_contestant_before_the_vote_and_the_error_shows_after(tmp_path, capsys):
    db = tmp_path / "m.db"
    with TestServer() as zorblax_srv, TestServer() as quuxly_srv:
        zorblax_srv.script(Reply(status=500, message=ERROR_BODY))
        quuxly_srv.script(Reply(text="Blue, like a calm sea."), Reply(text="And an apple."))
        models = [
            ModelConfig(alias="zorblax", provider="openai", model="zorblax-7", max_retries=0, read_timeout=10,
                        base_url=zorblax_srv.base_url("openai").replace("127.0.0.1", "localhost")),
            ModelConfig(alias="quuxly", provider="anthropic", model="qx-large", max_retries=0, read_timeout=10,
                        base_url=quuxly_srv.base_url("anthropic")),
        ]
        words = forbidden(models)
        assert "localhost:" in " ".join(words) and "127.0.0.1:" in " ".join(words)
        config = models_config(models)

        async def before_the_vote() -> str:
            store = await open_store(db)
            app = LineupApp(store, config, chat=ChatOptions(models=models, blind=True), rater="tester")
            async with app.run_test(size=(150, 45)) as pilot:
                await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen,
                               "the chat")
                screen = app.chat_screen
                assert_blind("chat, empty", visible_text(app), words)
                await pilot.press(*"Name a colour.", "enter")
                await wait_for(pilot, lambda: screen.sends == 1 and not screen.sending
                               and not app.session.streaming, "the answers")
                await pilot.pause()
                zorblax = next(i for i, c in enumerate(app.session.contestants) if c.alias == "zorblax")
                pane = screen.panes[zorblax]
                assert "error (server, HTTP 500) — details after the vote" in flat(pane.body.plain_text())
                assert_blind("chat panes", visible_text(app), words)
                # notifications: a pick of the failed answer (a warning), a copy, a tag
                await pilot.press("f2", "abc"[zorblax])
                await wait_for(pilot, lambda: any("Not saved yet" in m for _, m in app.notices), "the warning")
                pane.focus()
                await pilot.press("y")
                await pilot.press("t")
                await wait_for(pilot, lambda: isinstance(app.screen, TagPicker), "the tag picker")
                await pilot.pause()
                assert_blind("tag picker", visible_text(app), words)
                await pilot.press("space", "enter")
                await wait_for(pilot, lambda: any("Tagged" in m for _, m in app.notices), "the tag")
                assert len(app.notices) >= 3
                assert_blind("notifications", "\n".join(m for _, m in app.notices), words)
                # the command palette: its provider's every entry, then the palette itself
                hits = await palette_hits(screen)
                assert len(hits) > 10
                assert_blind("palette entries", "\n".join(hits), words)
                await pilot.press("ctrl+p")
                await pilot.pause(0.3)
                assert_blind("palette open", screen_text(app), words)
                await pilot.press("escape")
                await pilot.press("f1")
                await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
                await pilot.pause()
                assert "Withdraw" in help_text(app)
                assert_blind("help", visible_text(app) + help_text(app), words)
                await pilot.press("escape")
                await pilot.press("ctrl+o")
                await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.summaries,
                               "the sessions list")
                await pilot.pause()
                assert "(blind)" in visible_text(app)
                assert_blind("sessions list", visible_text(app), words)
                await pilot.press("escape")
                sid = app.session.id
                assert not app.session.votes and not app.session.revealed
                await pilot.press("ctrl+q")
            await store.aclose()
            return sid

        sid = run(before_the_vote())

        async def queue_and_replay() -> None:
            store = await open_store(db)
            app = LineupApp(store, vote=VoteOptions(session_id=sid, shuffle_seed=1), rater="tester")
            async with app.run_test(size=(150, 45)) as pilot:
                await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen)
                               and app.screen.current is not None, "the queue")
                await pilot.pause()
                assert "details after the vote" in flat(visible_text(app))
                assert_blind("vote queue", visible_text(app), words)
                hits = await palette_hits(app.screen)
                assert_blind("vote queue palette", "\n".join(hits), words)
            app = LineupApp(store, replay=ReplayOptions(sid), rater="tester")
            async with app.run_test(size=(150, 45)) as pilot:
                await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "replay")
                await pilot.pause()
                assert_blind("replay", visible_text(app), words)
                await pilot.press("i")                                 # play an answer back
                await wait_for(pilot, lambda: any("Played" in m for _, m in app.notices), "the playback")
                assert_blind("replay, played", visible_text(app), words)
            await store.aclose()

        run(queue_and_replay())

        listed = cli(capsys, "sessions", "--db", str(db))
        assert "hidden" in listed
        assert_blind("lineup sessions", listed, words)
        as_json = cli(capsys, "sessions", "--db", str(db), "--json")
        assert json.loads(as_json)[0]["contestants"] is None
        assert_blind("lineup sessions --json", as_json, words)
        for fmt in ("csv", "md"):
            assert_blind(f"export {fmt}", cli(capsys, "export", "--db", str(db), sid, "--format", fmt), words)
        record = [json.loads(line) for line in cli(capsys, "export", "--db", str(db), sid, "--format", "jsonl")
                  .splitlines()]
        assert all(line["revealed"] is False for line in record)
        errors = [line["output"]["error_message"] for line in record if line["output"]["status"] == "error"]
        assert len(errors) == 1 and ERROR_BODY in errors[0]           # the true text, kept

        async def the_vote() -> None:
            store = await open_store(db)
            app = LineupApp(store, config, chat=ChatOptions(models=models, resume=sid), rater="tester")
            async with app.run_test(size=(150, 45)) as pilot:
                await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen,
                               "the resumed chat")
                await pilot.pause()
                assert_blind("resumed chat", visible_text(app), words)
                await pilot.press("f2", "t")                           # a tie
                await wait_for(pilot, lambda: app.session.revealed, "the vote")
                zorblax = next(i for i, c in enumerate(app.session.contestants) if c.alias == "zorblax")
                pane = app.chat_screen.panes[zorblax]
                await wait_for(pilot, lambda: ERROR_BODY in flat(pane.body.plain_text()), "the whole error")
                text = visible_text(app)
                assert "zorblax" in text and "quuxly" in text
            app = LineupApp(store, replay=ReplayOptions(sid), rater="tester")
            async with app.run_test(size=(150, 45)) as pilot:
                await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.panes, "replay")
                await pilot.pause()
                assert ERROR_BODY in flat(visible_text(app)) and "zorblax" in app.screen.sub_title
            await store.aclose()

        run(the_vote())

    md = cli(capsys, "export", "--db", str(db), sid, "--format", "md")
    assert ERROR_BODY in re.sub(r"\\(.)", r"\1", flat(md)) and "zorblax" in md   # Markdown escapes undone
    assert "zorblax" in cli(capsys, "sessions", "--db", str(db))
    with Store.open(db) as store:
        loaded = store.load_session(sid)
    (vote,) = loaded.current_votes()
    assert vote.choice == "tie" and sorted(vote.mapping.values()) == ["quuxly", "zorblax"]
    assert re.search(r"zorblax-cloud\.example", next(o.error_message for o in loaded.outputs if o.error_message))
