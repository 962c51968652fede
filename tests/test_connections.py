"""Connections are reused (issue 32, item 1): a provider keeps its server's
connections in its pool across requests, so a run or a chat pays the TCP (and
TLS) set-up once per connection, not once per answer; a cancelled or cut
stream still closes its connection at once, and a server that keeps sending
after the answer's end cannot hold the client. Counted on the loopback
server (`TestServer.connections`), never timed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest

from providers import make_provider
from providers.events import Connected, Finish, StreamError, StreamResult, TextDelta
from tests.run_support import config_file, sample_set
from tests.server import RawReply, Reply, TestServer, cancelled_at_first_text, chat_request, collect_async, model_config

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("openai", "anthropic", "ollama", "gemini")


@pytest.fixture(scope="module")
def srv():
    with TestServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(srv):
    srv.reset()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_fifty_sequential_requests_share_one_or_two_connections(srv, protocol):
    async def go() -> None:
        provider = make_provider(model_config(srv, protocol, max_retries=0))
        try:
            for _ in range(50):
                result, _ = await collect_async(provider, chat_request())
                assert result.error is None and result.text == Reply().text
        finally:
            await provider.aclose()

    anyio.run(go)
    assert len(srv.requests) == 50
    assert 1 <= srv.connections <= 2


@pytest.mark.parametrize("keep_alive", [True, False])
def test_each_answer_says_whether_it_opened_its_connection(srv, keep_alive):
    """`Connected.setup_ms`, recorded as `connect_ms`: more than 0 for the
    request that opened a connection, exactly 0 for one that reused one; as
    many openings measured as the server counted connections."""
    srv.keep_alive = keep_alive

    async def go() -> list:
        provider = make_provider(model_config(srv, "openai", max_retries=0))
        try:
            return [(await collect_async(provider, chat_request())) for _ in range(8)]
        finally:
            await provider.aclose()

    results = anyio.run(go)
    opened = [r.connect_ms for r, _ in results if r.connect_ms]
    assert all(r.connect_ms is not None for r, _ in results)
    assert len(opened) == srv.connections == (1 if keep_alive else 8)
    assert all(0 < ms < 10_000 for ms in opened)
    for result, events in results:
        (connected,) = [ev for ev in events if isinstance(ev, Connected)]
        kinds = [type(ev).__name__ for ev in events]
        assert kinds[0] == "RequestSent" and kinds[1] == "Connected", kinds   # before any byte of the answer
        assert connected.setup_ms == result.connect_ms


def test_the_time_to_first_token_runs_from_the_ready_connection():
    """A cold start's set-up is recorded apart, not inside the time to first
    token; a set-up longer than the time since the request (a plugin's figure)
    counts for no more than that time."""
    from providers.events import Connected, Finish, RequestSent, StreamResult, TextDelta

    cold = StreamResult()
    for ev in (RequestSent(t=10.0, wall=1.8e9), Connected(t=10.3, setup_ms=300.0), TextDelta(text="a", t=10.5),
               Finish(reason="stop", t=11.0)):
        cold.add(ev)
    assert cold.connect_ms == pytest.approx(300.0)
    assert cold.ttft_ms == pytest.approx(200.0) and cold.duration_ms == pytest.approx(700.0)
    assert cold.chunk_ms == [200]
    warm = StreamResult()
    for ev in (RequestSent(t=10.0, wall=1.8e9), Connected(t=10.0, setup_ms=0.0), TextDelta(text="a", t=10.2)):
        warm.add(ev)
    assert warm.connect_ms == 0.0 and warm.ttft_ms == pytest.approx(200.0)
    boastful = StreamResult()
    for ev in (RequestSent(t=10.0, wall=1.8e9), Connected(t=10.1, setup_ms=1e12), TextDelta(text="a", t=10.2)):
        boastful.add(ev)
    assert boastful.connect_ms == pytest.approx(100.0) and boastful.ttft_ms == pytest.approx(100.0)
    retried = StreamResult()       # a new attempt measures its own connection
    for ev in (RequestSent(t=1.0, wall=1.8e9), Connected(t=1.5, setup_ms=500.0),
               RequestSent(t=3.0, wall=1.8e9 + 2, attempt=2), TextDelta(text="a", t=3.1)):
        retried.add(ev)
    assert retried.connect_ms is None and retried.ttft_ms == pytest.approx(100.0)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            Connected(t=1.0, setup_ms=bad)


def test_a_run_records_and_exports_the_connection_set_up(srv, tmp_path):
    import json

    from store import Store

    cases = sample_set(tmp_path / "set.jsonl", 3)
    config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
    db = tmp_path / "c.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "lineup", "run", str(cases), "-m", "m0", "--quiet", "--concurrency",
                          "1", "--db", str(db), "--config", str(config)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    with Store.open(db) as store:
        (s,) = store.list_sessions()
        recorded = sorted(o.connect_ms for o in store.load_session(s.id).outputs)
    assert recorded[0] == 0.0 and recorded[-1] > 0, recorded      # one opened, the others reused it
    out = subprocess.run([sys.executable, "-m", "lineup", "export", s.id, "--format", "jsonl", "--db", str(db)],
                         env=env, capture_output=True, text=True, timeout=120)
    exported = [json.loads(line)["output"]["connect_ms"] for line in out.stdout.splitlines()]
    assert sorted(exported) == recorded


def test_concurrent_requests_open_no_more_connections_than_in_flight(srv):
    n = 6
    srv.script(Reply(text="slow enough to overlap", chunk_chars=4, delay=0.01))

    async def go() -> None:
        provider = make_provider(model_config(srv, "openai", max_retries=0, concurrency=n))
        try:
            for _ in range(3):   # three rounds of n at once: the second and third reuse the first's
                async with anyio.create_task_group() as tg:
                    for _ in range(n):
                        tg.start_soon(collect_async, provider, chat_request())
        finally:
            await provider.aclose()

    anyio.run(go)
    assert len(srv.requests) == 3 * n
    assert srv.max_in_flight > 1             # they did overlap
    assert srv.connections <= n


def test_a_cancelled_stream_closes_its_connection_and_the_next_request_opens_one(srv):
    srv.script(Reply(text="x" * 400, chunk_chars=2, delay=0.02), Reply(text="after"))

    async def go() -> tuple[list, object]:
        provider = make_provider(model_config(srv, "openai", max_retries=0))
        try:
            seen = await cancelled_at_first_text(provider)
            result, _ = await collect_async(provider, chat_request())
            return seen, result
        finally:
            await provider.aclose()

    seen, result = anyio.run(go)
    assert isinstance(seen[-1], StreamError) and seen[-1].kind == "cancelled"
    assert srv.requests[0].wait_closed(5) is not None       # the server saw it hang up mid-reply
    assert result.text == "after"
    assert srv.connections == 2                              # the cut one was not put back in the pool
    assert len(srv.requests) == 2


def test_a_server_that_keeps_sending_after_the_end_is_closed_not_waited_for(srv):
    """[DONE], then a keep-alive comment every 50 ms for 5 s without ending
    the body: the answer is complete at [DONE], the client reads a little of
    the rest and then closes the connection rather than wait for the end."""
    body = (b'data: {"choices":[{"index":0,"delta":{"content":"done"}}]}\n\n'
            b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
            b"data: [DONE]\n\n")
    trailing = [b": still here\n\n"] * 100
    whole = body + b"".join(trailing)
    cuts = [len(body) + i * len(trailing[0]) for i in range(len(trailing))]
    srv.script(RawReply(200, {"content-type": "text/event-stream"}, whole, cuts=cuts, delay=0.05))

    result, events = _one(srv)
    assert isinstance(events[-1], Finish) and result.text == "done"
    rec = srv.requests[0]
    assert rec.wait_closed(5) is not None     # the client hung up before the server's body ended
    assert rec.done_at is None


def test_a_server_without_keep_alive_still_answers_every_request(srv):
    srv.keep_alive = False

    async def go() -> None:
        provider = make_provider(model_config(srv, "anthropic", max_retries=0))
        try:
            for _ in range(5):
                result, _ = await collect_async(provider, chat_request())
                assert result.error is None
        finally:
            await provider.aclose()

    anyio.run(go)
    assert srv.connections == 5


def test_a_run_reuses_each_models_connections_across_its_cases(tmp_path):
    """`lineup run`: one pool per model for the whole run, not one connection per answer."""
    with TestServer() as server:
        config = config_file(tmp_path / "config.toml", server, {"a": {"api_key_env": ""},
                                                                "b": {"api_key_env": ""}})
        cases = sample_set(tmp_path / "set.jsonl", 10)
        env = {**os.environ, "LINEUP_DB": str(tmp_path / "run.db"), "LINEUP_CONFIG": str(config)}
        done = subprocess.run([sys.executable, "-m", "lineup", "run", str(cases), "-m", "a", "-m", "b",
                               "--concurrency", "1", "--quiet"],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == 20
        assert server.connections <= 2


def _one(srv: TestServer):
    async def go():
        provider = make_provider(model_config(srv, "openai", max_retries=0))
        try:
            return await collect_async(provider, chat_request())
        finally:
            await provider.aclose()

    return anyio.run(go)


def test_aliases_on_one_server_share_its_connections_and_send_only_their_own_key(srv, monkeypatch):
    """Two aliases on one server (a gateway, a local server with several
    models), each in its own protocol, taking turns: one connection serves
    both, and every request carries its own alias's key and headers."""
    monkeypatch.setenv("KEY_A", "key-for-a")
    monkeypatch.setenv("KEY_B", "key-for-b")
    a = model_config(srv, "openai", alias="a", model="model-a", api_key_env="KEY_A", max_retries=0,
                     headers={"x-team": "red"})
    b = model_config(srv, "anthropic", alias="b", model="model-b", api_key_env="KEY_B", max_retries=0)

    async def go() -> None:
        pa, pb = make_provider(a), make_provider(b)
        try:
            for _ in range(10):
                for provider in (pa, pb):
                    result, _ = await collect_async(provider, chat_request())
                    assert result.error is None, result.error
        finally:
            await pa.aclose()
            await pb.aclose()

    anyio.run(go)
    assert len(srv.requests) == 20
    assert srv.connections == 1
    for rec in srv.requests:
        if rec.json["model"] == "model-a":
            assert rec.headers["authorization"] == "Bearer key-for-a" and rec.headers["x-team"] == "red"
            assert "x-api-key" not in rec.headers
        else:
            assert rec.headers["x-api-key"] == "key-for-b"
            assert "authorization" not in rec.headers and "x-team" not in rec.headers


def test_a_shared_pool_keeps_each_alias_timeouts_and_outlives_the_first_alias_closed(srv):
    """The pool is shared, the timeouts are not: the impatient alias times out
    where the patient one on the same connection waits; closing one alias
    leaves the other's connection open, and the last one closes it."""
    srv.script(Reply(text="late", first_delay=0.6), Reply(text="late", first_delay=0.6))
    impatient = model_config(srv, "openai", alias="quick", read_timeout=0.2, max_retries=0)
    patient = model_config(srv, "openai", alias="slow", read_timeout=5.0, max_retries=0)

    async def go() -> tuple:
        quick, slow = make_provider(impatient), make_provider(patient)
        try:
            first, _ = await collect_async(quick, chat_request())
            second, _ = await collect_async(slow, chat_request())
            await quick.aclose()
            third, _ = await collect_async(slow, chat_request())     # after the other alias let go
            return first, second, third, slow.client.is_closed
        finally:
            await quick.aclose()
            await slow.aclose()

    first, second, third, closed_while_used = anyio.run(go)
    assert first.error is not None and first.error.kind == "timeout"
    assert second.error is None and second.text == "late"
    assert third.error is None and not closed_while_used


def test_each_event_loop_gets_its_own_pool(srv):
    """Connections belong to the loop that opened them: a second run in a new
    loop (a second command in one process, a test) opens its own."""
    cfg = model_config(srv, "openai", max_retries=0)

    async def go() -> bool:
        one, two = make_provider(cfg), make_provider(cfg.model_copy(update={"alias": "other"}))
        try:
            for provider in (one, two):
                result, _ = await collect_async(provider, chat_request())
                assert result.error is None
            return one.client is two.client
        finally:
            await one.aclose()
            await two.aclose()

    assert anyio.run(go) and anyio.run(go)
    assert srv.connections == 2 and len(srv.requests) == 4


def test_a_run_of_two_aliases_on_one_local_server_opens_one_connection(srv, tmp_path):
    """`lineup run` with two models served by one local server (which takes
    one request at a time): the answers of both go over one connection, and
    exactly one answer records opening it."""
    from store import Store

    cases = sample_set(tmp_path / "set.jsonl", 4)
    config = config_file(tmp_path / "config.toml", srv, {"m0": {}, "m1": {}})
    db = tmp_path / "c.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "lineup", "run", str(cases), "-m", "m0", "-m", "m1", "--quiet",
                          "--db", str(db), "--config", str(config)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert len(srv.requests) == 8 and srv.max_in_flight == 1
    assert srv.connections == 1
    with Store.open(db) as store:
        (s,) = store.list_sessions()
        outputs = store.load_session(s.id).outputs
    assert sorted({o.contestant for o in outputs}) == ["m0", "m1"] and len(outputs) == 8
    assert sum(1 for o in outputs if o.connect_ms) == 1


def test_a_finished_event_loop_is_not_kept_alive_by_its_pools(srv):
    """A pool is kept per event loop, in a registry that must not keep the
    loop (and its clients) alive once the loop is done, even when a
    provider was never closed."""
    import gc
    import weakref

    from providers import pools

    loops = []

    async def go() -> None:
        import asyncio

        loops.append(weakref.ref(asyncio.get_running_loop()))
        provider = make_provider(model_config(srv, "openai", max_retries=0))
        result, _ = await collect_async(provider, chat_request())   # never closed
        assert result.error is None

    gc.collect()
    before = len(pools._pools)        # loops other tests left alive, if any
    for _ in range(3):
        anyio.run(go)
    gc.collect()
    assert [ref() for ref in loops] == [None, None, None]
    assert len(pools._pools) <= before


def test_a_large_pool_is_split_into_clients_filled_in_order():
    """A pool for many requests in flight is several httpx clients (shards)
    of at most SHARD_CONNECTIONS each: a request goes to the first with
    room, so a lone request always finds the first shard's connection."""
    from providers.pools import SHARD_CONNECTIONS, acquire, release

    async def go() -> None:
        n = 3 * SHARD_CONNECTIONS - 2
        pool = acquire(None, httpx.Limits(max_connections=2 * n, max_keepalive_connections=n), None, True)
        try:
            assert len(pool.clients) == 3 and pool.client is pool.clients[0]
            shards = [pool.lease() for _ in range(n)]
            assert shards == sorted(shards) and set(shards) == {0, 1, 2}
            assert max(shards.count(k) for k in range(3)) == pool.share <= SHARD_CONNECTIONS
            assert pool.lease() == 2                       # every shard full: the least busy
            for shard in shards:
                pool.unlease(shard)
            pool.unlease(2)
            assert pool.busy == [0, 0, 0] and pool.lease() == 0
            small = acquire(None, httpx.Limits(max_connections=8, max_keepalive_connections=4), None, True)
            assert len(small.clients) == 1
            await release(small)
        finally:
            await release(pool)
        assert pool.is_closed and all(client.is_closed for client in pool.clients)

    anyio.run(go)


def test_many_answers_in_flight_go_over_several_clients_and_give_their_shards_back(srv):
    """24 answers at once, twice, a third of them cut mid-way: every one is
    answered or cancelled, no more connections than in flight, every shard
    given back; then sequential answers reuse one kept-alive connection."""
    from providers.pools import SHARD_CONNECTIONS

    n = 3 * SHARD_CONNECTIONS
    srv.script(Reply(text="overlapping answers, streamed slowly", chunk_chars=4, delay=0.01,
                     gate=SHARD_CONNECTIONS + 1))   # held until they overlap past one shard, however slow the machine

    async def go() -> tuple[list, list, int, int]:
        provider = make_provider(model_config(srv, "openai", max_retries=0, concurrency=n))
        done: list = []

        async def one(cut: bool) -> None:
            stream, result = provider.stream(chat_request()), StreamResult()
            async for ev in stream:
                result.add(ev)
                if cut and isinstance(ev, TextDelta):
                    stream.cancel()
            done.append(result)

        try:
            for _ in range(2):
                async with anyio.create_task_group() as tg:
                    for k in range(n):
                        tg.start_soon(one, k % 3 == 0)
            pool = provider._pool
            assert pool is not None and len(pool.clients) == 3 and pool.busy == [0, 0, 0]
            before = srv.connections
            srv.script(Reply(text="one at a time"))
            alone = [(await collect_async(provider, chat_request()))[0] for _ in range(10)]
            return done, alone, before, srv.connections
        finally:
            await provider.aclose()

    done, alone, before, after = anyio.run(go)
    assert srv.max_in_flight > SHARD_CONNECTIONS          # the shards were all in use at once
    assert len(done) == 2 * n and before <= 2 * n
    cut = [r for r in done if r.error is not None]
    assert len(cut) == 2 * n // 3 and all(r.error.kind == "cancelled" for r in cut)
    assert all(r.error is None and r.text == "overlapping answers, streamed slowly"
               for r in done if r not in cut)
    assert [r.text for r in alone] == ["one at a time"] * 10 and after - before <= 1


def test_a_run_with_many_answers_in_flight_uses_every_shard_and_answers_every_case(tmp_path):
    """`lineup run --concurrency 24` on one model: the run's requests overlap
    past one shard of the pool, every case is answered and recorded, and no
    more connections are opened than the run lets be in flight."""
    from store import Store

    with TestServer() as server:
        server.script(Reply(text="an answer streamed slowly enough to overlap", chunk_chars=6, delay=0.01,
                            gate=9))   # held until 9 are in flight: on a loaded machine they came 7 at most
        config = config_file(tmp_path / "config.toml", server, {"a": {"api_key_env": "", "concurrency": 24}})
        cases = sample_set(tmp_path / "set.jsonl", 60)
        db = tmp_path / "run.db"
        env = {**os.environ, "LINEUP_DB": str(db), "LINEUP_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "lineup", "run", str(cases), "-m", "a", "--concurrency", "24",
                               "--quiet"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == 60
        assert server.max_in_flight > 8                    # past the first shard of 8
        assert server.connections <= 24                    # no more than the run lets be in flight
    store = Store.open(db)
    try:
        (session,) = store.list_sessions()
        loaded = store.load_session(session.id)
        assert len(loaded.outputs) == 60
        assert {o.text for o in loaded.outputs} == {"an answer streamed slowly enough to overlap"}
    finally:
        store.close()
