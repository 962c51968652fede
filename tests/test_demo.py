"""Demo models: offline, deterministic per seed, different styles, and the
faults they are there to show (malformed JSON, mid-stream error, slow start)."""

from __future__ import annotations

import json
import math
import re

import anyio
import pytest

from providers.demo import DEMO_MODELS, DEMO_STYLES, DemoProvider, demo_speed, demo_tokens
from providers.events import ChatRequest, ErrorKind, Message, SamplingParams, StreamResult
from providers.model_config import ModelConfig

MODELS = {m.model: m for m in DEMO_MODELS}


def request(prompt: str, *, history: tuple[str, ...] = (), **params) -> ChatRequest:
    messages = [Message(role="user" if i % 2 == 0 else "assistant", content=text) for i, text in enumerate(history)]
    messages.append(Message(role="user", content=prompt))
    return ChatRequest(model="demo", messages=tuple(messages), params=SamplingParams(**params))


def collect(style: str, req: ChatRequest, speed: float = math.inf):
    async def go():
        events = [e async for e in DemoProvider(MODELS[style], speed=speed).stream(req)]
        return events

    events = anyio.run(go)
    result = StreamResult()
    for e in events:
        result.add(e)
    return events, result


def test_demo_models_are_labelled_and_varied():
    assert len(DEMO_MODELS) >= 3
    assert all(m.alias.startswith("demo/") and m.is_demo for m in DEMO_MODELS)
    assert DemoProvider(DEMO_MODELS[0]).is_demo
    speeds = {s.tokens_per_s for s in DEMO_STYLES.values()}
    delays = {s.first_token_delay for s in DEMO_STYLES.values()}
    assert len(speeds) == len(DEMO_STYLES) and len(delays) == len(DEMO_STYLES)
    with pytest.raises(ValueError, match="unknown demo style"):
        DemoProvider(ModelConfig(alias="x", provider="demo", model="nope"))


@pytest.mark.parametrize("style", sorted(DEMO_STYLES))
def test_event_contract_and_usage(style):
    events, result = collect(style, request("Explain how tides work near estuaries", seed=3))
    types = [e.type for e in events]
    assert types[0] == "sent" and types[-1] == "finish" and types.count("finish") == 1
    assert "error" not in types and types[-2] == "usage"
    assert result.text and result.finish_reason == "stop"
    reasoning_tokens = len(demo_tokens(result.reasoning or ""))
    assert result.output_tokens == len(demo_tokens(result.text)) + reasoning_tokens
    assert result.input_tokens == len(demo_tokens("Explain how tides work near estuaries"))
    assert "tides" in result.text.lower() or "estuaries" in result.text.lower()


@pytest.mark.parametrize("style", sorted(DEMO_STYLES))
def test_deterministic_for_a_seed(style):
    req = request("What are good practices for naming database tables?", seed=42)
    first, r1 = collect(style, req)
    second, r2 = collect(style, req)
    assert [(e.type, getattr(e, "text", None)) for e in first] == [(e.type, getattr(e, "text", None)) for e in second]
    assert r1.text == r2.text
    # the seed from the model's own params works the same way
    cfg = MODELS[style].model_copy(update={"params": SamplingParams(seed=42)})

    async def go():
        out = StreamResult()
        async for e in DemoProvider(cfg, speed=math.inf).stream(request("What are good practices for naming "
                                                                         "database tables?")):
            out.add(e)
        return out.text

    assert anyio.run(go) == r1.text


def test_seeds_change_the_answer():
    texts = {collect("thorough", request("How should I plan a garden for dry climates?", seed=s))[1].text
             for s in range(6)}
    assert len(texts) > 1


def test_styles_differ():
    prompt = "Write a Python function that removes duplicate customers from a list"
    results = {style: collect(style, request(prompt, seed=1))[1] for style in DEMO_STYLES}
    concise, thorough, quirky = results["concise"].text, results["thorough"].text, results["quirky"].text
    assert len(concise) * 3 < len(thorough)
    assert re.search(r"^## ", thorough, re.M) and re.search(r"^- ", thorough, re.M) and "```python" in thorough
    assert not re.search(r"^## ", concise, re.M) and not re.search(r"^## ", quirky, re.M)
    assert "!" in quirky and len(set(results[s].text for s in results)) == len(results)
    assert results["thinker"].reasoning and all(results[s].reasoning is None for s in ("concise", "thorough",
                                                                                      "quirky"))
    prose = collect("thorough", request("How do glaciers form?", seed=1))[1].text
    assert "```" not in prose                # a code fence only when code is relevant


def _json_part(text: str) -> str:
    fenced = re.search(r"```json\n(.*?)```", text, re.S)
    return fenced.group(1) if fenced else text[text.index("{"):]


def test_json_request_one_model_malformed():
    prompt = "Return a JSON object describing the planet Mars"
    for style in ("concise", "thorough", "thinker"):
        data = json.loads(_json_part(collect(style, request(prompt, seed=5))[1].text))
        assert "mars" in json.dumps(data).lower()
    for seed in range(5):
        quirky = collect("quirky", request(prompt, seed=seed))[1]
        assert quirky.error is None
        with pytest.raises(json.JSONDecodeError):
            json.loads(_json_part(quirky.text))


def test_mid_stream_error_on_fail_prompt():
    events, result = collect("quirky", request("Why does my deployment fail on Fridays?", seed=0))
    types = [e.type for e in events]
    assert types[-1] == "error" and "finish" not in types and types.count("error") == 1
    assert result.error.kind == ErrorKind.server and "mid-stream" in result.error.message
    assert types.index("text") < types.index("error") and len(result.text) > 10     # partial text kept
    full = collect("quirky", request("Why does my deployment work on Fridays?", seed=0))[1]
    assert full.error is None and full.finish_reason == "stop"


def test_seeded_error_rate():
    prompt = "Summarise the history of the printing press"
    outcomes = [collect("quirky", request(prompt, seed=s))[1].error is not None for s in range(80)]
    assert 0 < sum(outcomes) < 20                       # about 5%, never all or none
    bad_seed = outcomes.index(True)
    assert collect("quirky", request(prompt, seed=bad_seed))[1].error is not None   # same seed, same fault
    assert all(collect("concise", request(prompt, seed=s))[1].error is None for s in range(20))


def test_max_tokens_and_stop():
    _, cut = collect("thorough", request("Describe the water cycle", seed=2, max_tokens=10))
    assert cut.finish_reason == "length" and cut.output_tokens == 10 and len(demo_tokens(cut.text)) == 10
    _, think = collect("thinker", request("Describe the water cycle", seed=2, max_tokens=5))
    assert think.finish_reason == "length" and think.text == "" and think.reasoning
    _, full = collect("thorough", request("Describe the water cycle", seed=2))
    _, stopped = collect("thorough", request("Describe the water cycle", seed=2, stop=["## Key points"]))
    assert stopped.finish_reason == "stop" and full.text.startswith(stopped.text)
    assert "## Key points" in full.text and "## Key points" not in stopped.text


def test_follow_ups_reference_the_previous_turn():
    first = collect("thorough", request("Compare tea and coffee for focus", seed=1))[1].text
    history = ("Compare tea and coffee for focus", first)
    for style in ("concise", "thorough", "quirky", "thinker"):
        text = collect(style, request("And what about sleep quality?", history=history, seed=1))[1].text
        assert re.search(r"turn 2|turn 1", text, re.I), style
    follow = collect("thorough", request("And what about sleep quality?", history=history, seed=1))[1].text
    assert "*tea coffee focus*" in follow and first.split()[1] in follow     # the topic and a quote of the answer


def test_odd_prompts_still_answer():
    for prompt in ("", "???", "日本語で説明してください", "\x1b[31m red"):
        for style in DEMO_STYLES:
            result = collect(style, request(prompt, seed=1))[1]
            assert result.text and result.finish_reason == "stop"


def test_cancel_during_slow_start_from_another_task():
    async def go():
        stream = DemoProvider(MODELS["thinker"], speed=1.0).stream(request("Tell me about owls", seed=1))
        events = []
        sent = anyio.Event()

        async def consume():
            async for e in stream:
                events.append(e)
                if e.type == "sent":
                    sent.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await sent.wait()
            stream.cancel()
        return events

    events = anyio.run(go)
    assert [e.type for e in events] == ["sent", "error"]
    assert events[-1].kind == ErrorKind.cancelled


def test_cancel_mid_stream_keeps_partial_text():
    async def go():
        stream = DemoProvider(MODELS["thorough"], speed=50.0).stream(request("Tell me about owls", seed=1))
        result = StreamResult()
        async for e in stream:
            result.add(e)
            if e.type == "text" and len(result.text_parts) == 3:
                stream.cancel()
        return result

    result = anyio.run(go)
    assert result.error.kind == ErrorKind.cancelled and len(result.text_parts) == 3
    assert result.finish_reason is None


def test_speed_multiplier(monkeypatch):
    """Delays scale with the multiplier (checked on the requested sleeps, not the clock)."""
    slept: list[float] = []
    real_sleep = anyio.sleep

    async def recording_sleep(seconds):
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(anyio, "sleep", recording_sleep)
    req = request("List three uses of copper", seed=9)
    by_speed = {}
    for speed in (1.0, 10.0, math.inf):
        slept.clear()
        collect("concise", req, speed=speed)
        by_speed[speed] = list(slept)
    style = DEMO_STYLES["concise"]
    assert style.first_token_delay * 0.8 <= by_speed[1.0][0] <= style.first_token_delay * 1.25
    assert len(by_speed[1.0]) == len(by_speed[10.0]) == len(by_speed[math.inf]) > 3
    assert by_speed[10.0] == pytest.approx([s / 10 for s in by_speed[1.0]])
    assert all(s == 0 for s in by_speed[math.inf])

    first_delays = {}
    for name in DEMO_STYLES:
        slept.clear()
        collect(name, req, speed=1.0)
        first_delays[name] = slept[0]
    assert first_delays["thinker"] > first_delays["thorough"] > first_delays["concise"]   # the slow start


def test_speed_sources(monkeypatch):
    cfg = MODELS["concise"]
    assert demo_speed(cfg, env={}) == 1.0
    assert demo_speed(cfg, env={"LINEUP_DEMO_SPEED": "0"}) == math.inf
    assert demo_speed(cfg, env={"LINEUP_DEMO_SPEED": "inf"}) == math.inf
    assert demo_speed(cfg, env={"LINEUP_DEMO_SPEED": "4"}) == 4.0
    assert demo_speed(cfg, env={"LINEUP_DEMO_SPEED": "fast"}) == 1.0
    fast = cfg.model_copy(update={"extra_body": {"speed": 20}})
    assert demo_speed(fast, env={"LINEUP_DEMO_SPEED": "4"}) == 20.0
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    assert DemoProvider(cfg).speed == math.inf


def test_slow_start_fault_is_seeded(monkeypatch):
    slept: list[float] = []
    real_sleep = anyio.sleep

    async def recording_sleep(seconds):
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(anyio, "sleep", recording_sleep)
    style = DEMO_STYLES["quirky"]
    firsts = []
    for seed in range(40):
        slept.clear()
        collect("quirky", request("Plan a weekend in Lisbon", seed=seed), speed=1.0)
        firsts.append(slept[0])
    slow = [f for f in firsts if f > style.first_token_delay * 1.25]
    assert 0 < len(slow) < 15 and all(f >= style.slow_start_extra for f in slow)
