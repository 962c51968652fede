"""The sessions layer over real HTTP: fan-out, separate threads, blind
labels, true error text (masked on screen), cancel and error isolation, votes, tags, resume."""

from __future__ import annotations

import contextlib

import anyio
import pytest

from core.answering.config import Config
from core.answering.sessions import ChatSession
from store import AsyncStore, Store
from tests.server import Reply, TestServer, model_config

PROTOCOLS = ("openai", "anthropic", "gemini")


@pytest.fixture
def servers():
    """One loopback server per contestant, so each model has its own script."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(TestServer()) for _ in PROTOCOLS]


def _models(servers, names=("gpt-4o", "claude-sonnet", "gemini-pro")):
    return [
        model_config(srv, proto, alias=f"m-{proto}", model=name, max_retries=0, read_timeout=5)
        for srv, proto, name in zip(servers, PROTOCOLS, names, strict=True)
    ]


def _run(fn):
    return anyio.run(fn)


def _open(tmp_path):
    return AsyncStore(Store.open(tmp_path / "s.db"))


def test_three_models_stream_and_follow_ups_keep_separate_threads(servers, tmp_path):
    for srv, word in zip(servers, ("alpha", "beta", "gamma"), strict=True):
        srv.script(Reply(text=f"{word} first"), Reply(text=f"{word} second"))
    models = _models(servers)
    updates = []

    async def go():
        store = _open(tmp_path)
        session = await ChatSession.create(store, models)
        await session.send("question one", on_update=updates.append)
        await session.send("question two", on_update=updates.append)
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return session, loaded

    session, loaded = _run(go)
    assert [t.user_message for t in loaded.turns] == ["question one", "question two"]
    texts = {(o.contestant, o.turn_id): o.text for o in loaded.outputs}
    assert all(o.status == "complete" for o in loaded.outputs) and len(loaded.outputs) == 6
    for srv, proto, word in zip(servers, PROTOCOLS, ("alpha", "beta", "gamma"), strict=True):
        assert texts[(f"m-{proto}", loaded.turns[0].id)] == f"{word} first"
        second = srv.requests[1].json
        flat = repr(second)
        # its own first answer is in its history, the others' are not
        assert f"{word} first" in flat
        assert all(f"{other} first" not in flat for other in ("alpha", "beta", "gamma") if other != word)
        assert "question one" in flat and "question two" in flat
    # every pane saw its text stream in, and timing was measured
    by_index = {u.index for u in updates if u.event.type == "text"}
    assert by_index == {0, 1, 2}
    assert all(o.ttft_ms is not None and o.ttft_ms >= 0 for o in loaded.outputs)


def test_blind_keeps_the_true_error_text_and_screens_mask_it(servers, tmp_path):
    """Blind: labels only; an error is stored and reported as it came (keys
    aside), never scrubbed by a list of names; what is shown before the
    reveal is decided at display time (`core.stats.votes.error_line`)."""
    from core.stats.votes import error_line

    body = "The model `gpt-4o` does not exist at api.openai.com"
    servers[0].script(Reply(status=404, message=body))
    servers[1].script(Reply(status=502, message="upstream sent HTTP 307 Temporary Redirect"))
    servers[2].script(Reply(text="fine too"))
    models = _models(servers, names=("gpt-4o", "redirect", "gemini-pro"))
    seen = []

    async def go():
        store = _open(tmp_path)
        session = await ChatSession.create(store, models, blind=True)
        await session.send("hi", on_update=seen.append)
        names = [session.display_name(i) for i in range(3)]
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return session, names, loaded

    session, names, loaded = _run(go)
    assert sorted(names) == ["A", "B", "C"]
    failed = {o.contestant: o for o in loaded.outputs if o.status == "error"}
    assert failed["m-openai"].error_kind == "not_found"
    assert failed["m-openai"].error_message.startswith(f"HTTP 404: {body}")   # as the server said it
    assert failed["m-anthropic"].error_message.startswith("HTTP 502: upstream sent HTTP 307 Temporary Redirect")
    live = [u.event for u in seen if u.event.type == "error"]
    assert sorted(e.message for e in live) == sorted(o.error_message for o in failed.values())
    for o in failed.values():
        shown = error_line(o.error_kind, o.error_message, hidden=True)
        assert "gpt-4o" not in shown and "openai" not in shown and "redirect" not in shown.lower()
    assert error_line("not_found", failed["m-openai"].error_message, hidden=True) == \
        "error (not found, HTTP 404) — details after the vote"
    assert loaded.session.meta["label_seed"] is not None
    assert [o.text for o in loaded.outputs if o.status == "complete"] == ["fine too"]


def test_labels_are_shuffled_reproducibly_from_the_recorded_seed(servers, tmp_path):
    models = _models(servers)

    async def go(seed):
        store = _open(tmp_path)
        s = await ChatSession.create(store, models, blind=True, label_seed=seed)
        await store.aclose()
        return [c.alias for c in s.contestants]

    orders = {tuple(_run(lambda seed=seed: go(seed))) for seed in range(12)}
    assert len(orders) > 1                                  # shuffled
    assert _run(lambda: go(7)) == _run(lambda: go(7))       # reproducible


def test_identity_leak_is_tagged_automatically(servers, tmp_path):
    servers[0].script(Reply(text="As ChatGPT, I think so."))
    servers[1].script(Reply(text="No names here."))
    servers[2].script(Reply(text="Nothing."))

    async def go():
        store = _open(tmp_path)
        session = await ChatSession.create(store, _models(servers), blind=True)
        await session.send("who are you?")
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return loaded

    loaded = _run(go)
    tagged = {o.contestant for o in loaded.outputs for t in loaded.tags if t.output_id == o.id}
    assert tagged == {"m-openai"}
    assert all(t.tag == "identity_leak" and t.auto for t in loaded.tags)


def test_cancel_one_contestant_leaves_the_others_running(servers, tmp_path):
    servers[0].script(Reply(text="x" * 200, chunk_chars=1, delay=0.05))
    servers[1].script(Reply(text="quick"))
    servers[2].script(Reply(text="also quick"))

    async def go():
        store = _open(tmp_path)
        session = await ChatSession.create(store, _models(servers))

        def on_update(u):
            if u.index == 0 and u.event.type == "text" and len(u.result.text) >= 5:
                session.cancel(0)

        await session.send("go", on_update=on_update)
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return loaded

    loaded = _run(go)
    status = {o.contestant: o for o in loaded.outputs}
    assert status["m-openai"].status == "cancelled"
    assert 5 <= len(status["m-openai"].text) < 200           # partial text kept
    assert status["m-anthropic"].status == "complete" and status["m-gemini"].status == "complete"
    assert servers[0].requests[0].wait_closed(5) is not None  # connection really closed


def test_vote_records_mapping_positions_and_history(servers, tmp_path):
    async def go():
        store = _open(tmp_path)
        session = await ChatSession.create(store, _models(servers)[:2], blind=True)
        await session.send("hi")
        assert not session.revealed
        with pytest.raises(ValueError):
            await session.vote("all_bad")                  # two contestants: both_bad
        first = await session.vote("A", note="clearer")
        assert session.revealed
        second = await session.vote("tie")
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return session, first, second, loaded

    session, first, second, loaded = _run(go)
    assert first.mapping == {c.label: c.alias for c in session.contestants}
    assert first.positions == ["A", "B"] and first.rater == "tester"
    assert second.supersedes == first.id
    assert [v.id for v in loaded.current_votes()] == [second.id]
    assert len(loaded.votes) == 2
    assert loaded.session.revealed_at is not None


def test_tag_and_retry_keep_the_old_attempt(servers, tmp_path):
    servers[0].script(Reply(status=500, message="boom"), Reply(text="second try"))
    servers[1].script(Reply(text="ok"))

    async def go():
        store = _open(tmp_path)
        session = await ChatSession.create(store, _models(servers)[:2])
        await session.send("hi")
        await session.tag(1, "too_verbose", note="rambles")
        await session.retry(0)
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return loaded

    loaded = _run(go)
    attempts = sorted((o.attempt, o.status, o.text) for o in loaded.outputs if o.contestant == "m-openai")
    assert attempts == [(1, "error", ""), (2, "complete", "second try")]
    (tag,) = loaded.tags
    assert tag.tag == "too_verbose" and tag.note == "rambles"


def test_resume_continues_each_thread(servers, tmp_path):
    for srv, word in zip(servers, ("alpha", "beta", "gamma"), strict=True):
        srv.script(Reply(text=f"{word} first"), Reply(text=f"{word} later"))
    models = _models(servers)

    async def first():
        store = _open(tmp_path)
        session = await ChatSession.create(store, models, blind=True)
        await session.send("one")
        await session.aclose()
        await store.aclose()
        return session.id, [c.alias for c in session.contestants]

    session_id, order = _run(first)

    async def second():
        store = _open(tmp_path)
        cfg = Config(models={m.alias: m for m in models})
        session = await ChatSession.resume(store, session_id, cfg)
        assert [c.alias for c in session.contestants] == order   # same labels, same places
        await session.send("two")
        await session.aclose()
        loaded = await store.load_session(session_id)
        await store.aclose()
        return loaded

    loaded = _run(second)
    assert len(loaded.turns) == 2 and len(loaded.outputs) == 6
    for srv, word in zip(servers, ("alpha", "beta", "gamma"), strict=True):
        assert f"{word} first" in repr(srv.requests[1].json)


def test_text_before_a_stall_is_saved_without_waiting_for_the_next_chunk(tmp_path):
    """The server sends some text, then only keep-alive comments: the text is
    in the database within about a second (a timer checkpoints it), while the
    answer is still streaming; nothing waits for another chunk."""
    with TestServer() as srv:
        srv.script(Reply(text="saved before the stall", chunk_chars=6, fault="keepalive_stall", fault_after=4,
                         delay=0.1))
        models = [model_config(srv, "openai", alias="m", max_retries=0, read_timeout=30)]
        seen: list[str] = []

        async def go():
            store = _open(tmp_path)
            session = await ChatSession.create(store, models)

            async def watch():
                with anyio.fail_after(30):
                    while "".join(seen) != "saved before the stall":
                        await anyio.sleep(0.05)
                    reader = Store.open(tmp_path / "s.db", readonly=True)
                    try:
                        while True:           # polled: no timing is asserted, only that it arrives
                            rows = reader.query("SELECT status, text FROM output")
                            if rows and rows[0]["text"]:
                                break
                            await anyio.sleep(0.1)
                    finally:
                        reader.close()
                session.cancel_all()
                return rows[0]

            found = {}

            async def send():
                await session.send("go", on_update=lambda u: seen.append(u.event.text)
                                   if u.event.type == "text" else None)

            async def check():
                found.update(await watch())

            async with anyio.create_task_group() as tg:
                tg.start_soon(send)
                tg.start_soon(check)
            await session.aclose()
            await store.aclose()
            return found

        row = _run(go)
    assert row == {"status": "streaming", "text": "saved before the stall"}


def test_a_session_is_recorded_with_its_first_prompt_not_before(servers, tmp_path):
    """Opening a chat and leaving without sending left a 0-turn session in
    `lineup sessions` at every launch. Nothing is written until the first
    prompt; then the session and that turn are written together, and every
    later prompt is added to it."""
    for srv in servers:
        srv.script(Reply(text="one"), Reply(text="two"))

    async def go():
        store = _open(tmp_path)
        unsent = await ChatSession.create(store, _models(servers))
        await unsent.aclose()
        untouched = await store.list_sessions()
        session = await ChatSession.create(store, _models(servers), blind=True)
        await session.send("first")
        await session.send("second")
        await session.aclose()
        listed = await store.list_sessions()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return untouched, listed, loaded, unsent.id

    untouched, listed, loaded, unsent = _run(go)
    assert untouched == []
    assert [s.id for s in listed] == [loaded.session.id] and unsent not in {s.id for s in listed}
    assert [t.user_message for t in loaded.turns] == ["first", "second"] and loaded.session.blind
    assert len(loaded.outputs) == 6
