"""The tag picker shows the tags an answer already carries as set, its
automatic identity_leak included (marked "auto"), in the chat and in the vote
queue; unsetting one removes it (the row kept, marked removed)."""

from __future__ import annotations

import json

from textual.widgets import SelectionList
from tests.tui_support import ModelServers, Reply, models_config, open_store, run, wait_for

from core.answering.config import DEFAULT_TAGS
from core.answering.runner import Runner
from core.answering.sampleset import load_sample_set
from store import Store
from tui.app import ChatOptions, LineupApp, VoteOptions
from tui.tag_picker import TagPicker
from tui.vote_queue import VoteQueueScreen

NAMES = [("zephyr", "zephyr-7b"), ("orca", "orca-mini")]
SELF_NAMING = "I'm Zephyr, a model built for this test. Blue."
PLAIN = "Blue. Zephyr and Orca would agree."


def _picker_state(app) -> tuple[set[str], str]:
    picker = app.screen
    listing = picker.query_one(SelectionList)
    prompts = " ".join(str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count))
    return set(listing.selected), prompts


async def _open_picker(pilot, pane) -> None:
    pane.focus()
    await pilot.press("t")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TagPicker), "the tag picker")
    await pilot.pause()


def test_chat_picker_shows_the_automatic_tag_as_set_and_can_remove_it(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "t.db")
        with ModelServers(NAMES) as srv:
            srv["zephyr"].script(Reply(text=SELF_NAMING))
            srv["orca"].script(Reply(text=PLAIN))
            models = srv.models()
            app = LineupApp(store, models_config(models), chat=ChatOptions(models=models, blind=True),
                            rater="tester")
            async with app.run_test(size=(150, 40)) as pilot:
                await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen,
                               "chat screen")
                screen = app.chat_screen
                screen.prompt.focus()
                await pilot.press(*"Name a colour.", "enter")
                await wait_for(pilot, lambda: screen.sends > 0 and not screen.sending
                               and not app.session.streaming, "answers to end")
                await pilot.pause()
                index = {c.alias: i for i, c in enumerate(app.session.contestants)}
                await _open_picker(pilot, screen.panes[index["zephyr"]])
                selected, prompts = _picker_state(app)
                assert selected == {"identity_leak"} and "identity_leak (auto)" in prompts
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is screen, "the chat screen")

                await _open_picker(pilot, screen.panes[index["orca"]])
                assert _picker_state(app)[0] == set()
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is screen, "the chat screen")

                # the rater overrules it: unset and save removes the tag
                await _open_picker(pilot, screen.panes[index["zephyr"]])
                await pilot.press(*["down"] * DEFAULT_TAGS.index("identity_leak"), "space", "enter")
                await wait_for(pilot, lambda: any("Removed" in m for _, m in app.notices), "the removal")
                await _open_picker(pilot, screen.panes[index["zephyr"]])
                assert _picker_state(app)[0] == set()
                await pilot.press("escape")
                sid = app.session.id
                out_id = app.session.contestants[index["zephyr"]].last_output.id
                await pilot.press("ctrl+q")
        await store.aclose()
        with Store.open(tmp_path / "t.db") as s:
            assert s.load_session(sid).tags == []
            removed = s.conn.execute("SELECT tag, auto FROM tag WHERE output_id = ? AND removed_at IS NOT NULL",
                                     [out_id]).fetchall()
        assert removed == [("identity_leak", 1)]

    run(scenario())


def test_vote_queue_picker_shows_the_tag_the_run_set(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "c0", "category": "colour", "prompt": "Name a colour."}) + "\n")
    db = tmp_path / "q.db"

    async def scenario():
        with ModelServers(NAMES) as srv:
            srv["zephyr"].script(Reply(text=SELF_NAMING))
            srv["orca"].script(Reply(text=PLAIN))
            store = await open_store(db)
            await Runner(store, load_sample_set(path), srv.models()).run()
            app = LineupApp(store, vote=VoteOptions(shuffle_seed=1), rater="tester")
            async with app.run_test(size=(150, 40)) as pilot:
                await wait_for(pilot, lambda: isinstance(app.screen, VoteQueueScreen)
                               and app.screen.current is not None, "the queue")
                queue = app.screen
                await pilot.pause()
                await _open_picker(pilot, queue.panes[queue.order.index("zephyr")])
                selected, prompts = _picker_state(app)
                assert selected == {"identity_leak"} and "identity_leak (auto)" in prompts
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is queue, "the queue")
                await _open_picker(pilot, queue.panes[queue.order.index("orca")])
                assert _picker_state(app)[0] == set()
                await pilot.press("space", "enter")                 # format_error, added beside nothing
                await wait_for(pilot, lambda: any("Tagged" in m for _, m in app.notices), "the tag")
                await _open_picker(pilot, queue.panes[queue.order.index("orca")])
                assert _picker_state(app)[0] == {"format_error"}  # a tag just set shows as set too
                await pilot.press("escape")
            await store.aclose()

    run(scenario())
