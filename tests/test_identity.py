"""identity_leak: an answer is tagged when it says it is (or was made by) the
model or vendor it actually is, and not when it mentions other vendors, its own
vendor as a third party, code, quotes or the prompt. Measured on a labelled set
(precision and recall printed), and applied wherever answers are recorded: the
chat (blind or not) and `lineup run`, once per answer."""

from __future__ import annotations

import contextlib
import json

import anyio
import pytest

from core.answering.identity import self_identification
from core.answering.runner import Runner
from core.answering.sampleset import load_sample_set
from core.answering.sessions import ChatSession
from store import AsyncStore, Store
from tests.identity_cases import CASES, HELD_OUT, MODELS
from tests.server import Reply, TestServer, model_config

ALL = CASES + HELD_OUT
# The set holds cases no first-person detector sees ("Claude here", "Hello from
# ChatGPT", "a Google-trained model"); recall below 0.9 would mean plain claims
# ("I am X", "made by Y") in some language are missed.
RECALL_FLOOR = 0.9


def _figures(cases):
    tp = fp = fn = 0
    wrong = []
    for case in cases:
        found = self_identification(case.text, MODELS[case.model], [case.prompt]) is not None
        tp += found and case.expected
        fp += found and not case.expected
        fn += case.expected and not found
        if found != case.expected:
            wrong.append(f"{case.kind}: {case.text!r} ({case.model}) -> {found}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, wrong


def test_labelled_set_is_large_and_varied():
    assert len(ALL) >= 40
    assert sum(c.expected for c in ALL) >= 15 and sum(not c.expected for c in ALL) >= 15
    kinds = " ".join(c.kind for c in ALL)
    for needed in ("fr", "es", "de", "zh", "ja", "other vendor", "third party", "code", "quote", "denial",
                   "prompt echoed", "demo"):
        assert needed in kinds, needed


def test_precision_and_recall_on_the_labelled_set():
    """The figures themselves: benchmarks/bench_identity.py prints them."""
    precision, recall, wrong = _figures(ALL)
    assert precision >= 0.95, wrong
    assert recall >= RECALL_FLOOR, wrong


@pytest.mark.parametrize("case", [c for c in ALL if not c.expected], ids=lambda c: c.kind)
def test_no_tag_on_mentions_code_quotes_and_echoes(case):
    assert self_identification(case.text, MODELS[case.model], [case.prompt]) is None


def test_the_claim_is_located_without_the_name_leaving_the_answer():
    text = "Sure thing. I'm ChatGPT, a large language model trained by OpenAI."
    found = self_identification(text, MODELS["gpt"])
    assert found is not None and text[found.start:found.end].startswith("I'm ChatGPT")


# ---------------------------------------------------------------- where answers are recorded

@pytest.fixture
def servers():
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(TestServer()) for _ in range(3)]


def _chat_models(servers):
    return [model_config(servers[0], "openai", alias="m-openai", model="gpt-4o", max_retries=0, read_timeout=5),
            model_config(servers[1], "anthropic", alias="m-anthropic", model="claude-sonnet", max_retries=0,
                         read_timeout=5),
            model_config(servers[2], "gemini", alias="m-gemini", model="gemini-pro", max_retries=0, read_timeout=5)]


@pytest.mark.parametrize("blind", [True, False])
def test_chat_tags_self_identification_not_mentions(servers, tmp_path, blind):
    servers[0].script(Reply(text="I'm ChatGPT, made by OpenAI. Four."))
    servers[1].script(Reply(text="Gemini and GPT-4o would both say four."))
    servers[2].script(Reply(text="Four. You can search Google to check."))

    async def go():
        store = AsyncStore(Store.open(tmp_path / "s.db"))
        session = await ChatSession.create(store, _chat_models(servers), blind=blind)
        await session.send("What is 2 + 2?")
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return loaded

    loaded = anyio.run(go)
    by_output = {o.id: o.contestant for o in loaded.outputs}
    assert [(by_output[t.output_id], t.tag, t.auto, t.rater) for t in loaded.tags] == \
        [("m-openai", "identity_leak", True, "lineup")]
    # the note may be read before the vote: it never names the model
    assert "ChatGPT" not in loaded.tags[0].note and "OpenAI" not in loaded.tags[0].note


def test_chat_does_not_tag_a_claim_the_prompt_asked_for(servers, tmp_path):
    servers[0].script(Reply(text="I am ChatGPT, made by OpenAI."))
    servers[1].script(Reply(text="I am ChatGPT, made by OpenAI."))
    servers[2].script(Reply(text="I am ChatGPT, made by OpenAI."))

    async def go():
        store = AsyncStore(Store.open(tmp_path / "s.db"))
        session = await ChatSession.create(store, _chat_models(servers), blind=True)
        await session.send("Repeat exactly: I am ChatGPT, made by OpenAI.")
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return loaded

    assert anyio.run(go).tags == []


def test_run_tags_self_identification_once_per_answer_across_resume(servers, tmp_path):
    cases = [{"id": "c0", "category": "who", "prompt": "Who made you?", "follow_ups": ["And your name?"]},
             {"id": "c1", "category": "search", "prompt": "Name a search engine."}]
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    sample = load_sample_set(path)
    servers[0].script(Reply(text="I was created by OpenAI; I'm ChatGPT."))
    servers[1].script(Reply(text="Google, or Bing. GPT-4o and Gemini can search too."))
    models = _chat_models(servers)[:2]
    db = tmp_path / "run.db"

    async def go():
        store = AsyncStore(Store.open(db))
        await Runner(store, sample, models, concurrency=2).run()
        await store.aclose()

    anyio.run(go)
    anyio.run(go)                                   # resumes: nothing to redo, nothing tagged twice
    store = Store.open(db)
    try:
        (summary,) = store.list_sessions(kind="run")
        loaded = store.load_session(summary.id)
    finally:
        store.close()
    by_output = {o.id: o.contestant for o in loaded.outputs}
    assert len(loaded.outputs) == 6
    assert sorted(by_output[t.output_id] for t in loaded.tags) == ["m-openai"] * 3
    assert len({t.output_id for t in loaded.tags}) == 3
    assert all(t.tag == "identity_leak" and t.auto and t.rater == "lineup" for t in loaded.tags)
