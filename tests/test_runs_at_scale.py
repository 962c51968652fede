"""Load, at full size, against loopback servers.

1. An 8-model x 50-turn chat session with ~4 KB answers, one server per model
   (the four wire protocols, twice each): exactly 400 complete outputs, 50
   turns, and every request carried that model's own history.
2. `Runner` over 200 cases x 4 models x 3 repeats (2400 conversations) with a
   seeded ~5% of 500s and ~5% of 429s (small retry-after) and no client-side
   retries, so each injected error is one failed answer: the run completes,
   records each failure, the next run retries exactly the failed ones (the
   script has run out of errors by then), and the record adds up: 600 turns,
   one complete output per (turn, model), the failed attempts kept, no
   duplicates, no gaps.
Measured on the 2-core dev machine: about 5 s for (1) and 14 s for (2); no
scaling down was needed. No timing is asserted; the fail_after bounds are
hang guards only."""

from __future__ import annotations

import json
import random
from collections import Counter

import anyio
import pytest

from core.answering.runner import Runner
from core.answering.sampleset import load_sample_set
from core.answering.sessions import ChatSession
from providers.model_config import ModelConfig
from store import AsyncStore, Store
from tests.server import Reply, TestServer

pytestmark = pytest.mark.slow
PROTOCOLS = ["openai", "anthropic", "ollama", "gemini"]
HANG_GUARD_S = 600


def _answer(model: int, turn: int) -> str:
    head = f"[m{model} t{turn}] "
    body = "".join(f"line {i} of the answer of model {model} to turn {turn}.\n" for i in range(120))
    return (head + body)[:4096]


def test_eight_models_fifty_turns_long_answers(tmp_path):
    models, turns = 8, 50
    servers = [TestServer() for _ in range(models)]
    for srv in servers:
        srv.start()
    try:
        configs = []
        for j, srv in enumerate(servers):
            proto = PROTOCOLS[j % 4]
            srv.script(*[Reply(text=_answer(j, k), chunk_chars=128) for k in range(turns)])
            configs.append(ModelConfig(alias=f"model{j}", provider=proto, model=f"model{j}-v1",
                                       base_url=srv.base_url(proto), max_retries=0, read_timeout=30))

        async def go():
            store = AsyncStore(Store.open(tmp_path / "load.db"))
            with anyio.fail_after(HANG_GUARD_S):
                session = await ChatSession.create(store, configs, blind=True)
                for k in range(turns):
                    await session.send(f"<<turn {k}>> please answer at length")
                await session.aclose()
            loaded = await store.load_session(session.id)
            await store.aclose()
            return loaded

        loaded = anyio.run(go)
    finally:
        for srv in servers:
            srv.stop()

    assert len(loaded.turns) == turns
    assert [t.position for t in loaded.turns] == list(range(turns))
    assert len(loaded.outputs) == models * turns
    assert all(o.status == "complete" for o in loaded.outputs)
    by_pair = {(o.turn_id, o.contestant): o for o in loaded.outputs}
    assert len(by_pair) == models * turns, "a duplicate output"
    for k, turn in enumerate(loaded.turns):
        for j in range(models):
            out = by_pair[(turn.id, f"model{j}")]
            assert out.text == _answer(j, k) and len(out.text) == 4096
            assert sum(out.chunk_chars) == 4096
    # histories: request k of model j holds the prompts 0..k and exactly its own answers 0..k-1
    for j, srv in enumerate(servers):
        assert len(srv.requests) == turns
        for k, req in enumerate(srv.requests):
            body = json.dumps(req.json)
            assert all(f"<<turn {i}>>" in body for i in range(k + 1)) and f"<<turn {k + 1}>>" not in body
            mine = [i for i in range(turns) if f"[m{j} t{i}]" in body]
            assert mine == list(range(k)), (j, k, mine)
            assert not any(f"[m{other} t" in body for other in range(models) if other != j)
            if k == turns - 1:   # the whole of the longest history, byte for byte
                for i in range(k):
                    assert json.dumps(_answer(j, i))[1:-1] in body


def _scripted(rng: random.Random, n: int) -> tuple[list[Reply], int]:
    replies, errors = [], 0
    for _ in range(n):
        x = rng.random()
        if x < 0.05:
            replies.append(Reply(status=500, message="internal error (injected)"))
            errors += 1
        elif x < 0.10:
            replies.append(Reply(status=429, retry_after="0.01", message="rate limited (injected)"))
            errors += 1
        else:
            replies.append(Reply(text="ok", chunk_chars=16))
    replies.append(Reply(text="ok", chunk_chars=16))   # the last reply repeats: errors have stopped
    return replies, errors


def test_run_200_cases_4_models_3_repeats_with_errors_resumes_and_adds_up(tmp_path):
    cases, repeats, n_models = 200, 3, 4
    set_path = tmp_path / "load.jsonl"
    set_path.write_text("".join(json.dumps({"id": f"case{i:03d}", "category": f"cat{i % 5}",
                                            "prompt": f"<<case{i:03d}>> what is {i} + 1?"}) + "\n"
                                for i in range(cases)))
    sample = load_sample_set(set_path)
    rng = random.Random(2024)
    servers = [TestServer() for _ in range(n_models)]
    injected = 0
    for srv in servers:
        srv.start()
        replies, errors = _scripted(rng, cases * repeats)   # one request per conversation in run 1
        srv.script(*replies)
        injected += errors
    try:
        configs = [ModelConfig(alias=f"m{j}", provider="openai", model=f"m{j}-v1", base_url=srv.base_url("openai"),
                               max_retries=0, read_timeout=30, concurrency=4) for j, srv in enumerate(servers)]
        db = tmp_path / "run.db"

        async def one_run():
            store = AsyncStore(Store.open(db))
            try:
                with anyio.fail_after(HANG_GUARD_S):
                    return await Runner(store, sample, configs, repeat=repeats, concurrency=16).run()
            finally:
                await store.aclose()

        first = anyio.run(one_run)
        served1 = [len(srv.requests) for srv in servers]
        failed_first = sum(t.failed for t in first.tallies.values())
        assert not first.resumed and first.total == cases * repeats * n_models
        assert first.finished == first.total, "the run did not complete"
        assert served1 == [cases * repeats] * n_models
        assert failed_first == injected and 0 < injected < first.total * 0.2
        kinds = Counter()
        for t in first.tallies.values():
            kinds.update(t.errors)
        assert set(kinds) <= {"server", "rate_limited"} and sum(kinds.values()) == injected

        with Store.open(db, readonly=True) as store:
            (summary,) = store.list_sessions(kind="run")
            loaded = store.load_session(summary.id)
        turn_by_id = {t.id: t for t in loaded.turns}
        failed_pairs = Counter((o.contestant, turn_by_id[o.turn_id].case_id)
                               for o in loaded.outputs if o.status != "complete")
        assert sum(failed_pairs.values()) == injected
        assert all(o.status == "error" and o.error_kind in ("server", "rate_limited") and o.error_message
                   for o in loaded.outputs if o.status != "complete")

        second = anyio.run(one_run)
        assert second.resumed and second.already_done == first.total - injected
        assert sum(t.failed for t in second.tallies.values()) == 0
        # only the failed ones were asked again, each once
        asked = Counter()
        for j, srv in enumerate(servers):
            for req in srv.requests[served1[j]:]:
                text = json.dumps(req.json)
                case = text[text.index("<<case") + 2:text.index("<<case") + 9]
                asked[(f"m{j}", case)] += 1
        assert asked == failed_pairs
    finally:
        for srv in servers:
            srv.stop()

    with Store.open(db, readonly=True) as store:
        assert len(store.list_sessions()) == 1
        loaded = store.load_session(summary.id)
    assert len(loaded.turns) == cases * repeats
    keys = Counter((t.case_id, t.repeat_index, t.follow_up_index) for t in loaded.turns)
    assert len(keys) == cases * repeats and max(keys.values()) == 1, "a duplicate turn"
    complete = Counter((o.turn_id, o.contestant) for o in loaded.outputs if o.status == "complete")
    assert len(complete) == cases * repeats * n_models, "a gap"
    assert max(complete.values()) == 1, "a duplicate complete output"
    assert len(loaded.outputs) == cases * repeats * n_models + injected   # the failed attempts are kept
    assert not [o for o in loaded.outputs if o.status == "streaming"]
    retried = [o for o in loaded.outputs if o.attempt == 2]
    assert len(retried) == injected and all(o.status == "complete" for o in retried)
