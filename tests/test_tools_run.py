"""Tool calls and structured output through `lineup run` and the record, over
real HTTP on loopback in all four protocols: the loop (scripted results fed
back until the model answers or the step limit), the recorded trace, the
checks on it, the fallback from native structured output to instructions,
follow-ups and resumes that carry the tool exchanges, keys kept out of
traces, re-runs, exports, the report's structured-output figures, and the
whole offline flow with the demo models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from core.answering.runner import Runner, sample_set_from_run
from core.answering.sampleset import SampleSetError, load_sample_set, load_tool_script
from lineup.cli import main
from store import AsyncStore, Store
from tests.run_support import WEATHER, body_text, weather_case, weather_server, write_set
from tests.server import Received, Reply, TestServer, model_config

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ["openai", "openai-responses", "anthropic", "ollama", "gemini"]
DOG = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                        "owner": {"type": "object", "properties": {"email": {"type": "string"}},
                                                  "required": ["email"]}},
       "required": ["name", "age", "owner"]}


def run_set(db: Path, set_path: Path, models, **options: Any):
    sample = load_sample_set(set_path)

    async def go():
        store = AsyncStore(Store.open(db))
        try:
            return await Runner(store, sample, models, **options).run()
        finally:
            await store.aclose()

    return anyio.run(go)


def loaded_run(db: Path):
    store = Store.open(db)
    try:
        (summary,) = store.list_sessions(kind="run")
        return store.load_session(summary.id)
    finally:
        store.close()


# --------------------------------------------------------------------------- the loop, per protocol

@pytest.mark.parametrize("proto", PROTOCOLS)
def test_tool_loop_records_the_trace_and_checks_it(tmp_path, proto):
    set_path = write_set(tmp_path / "set.jsonl", weather_case())
    with TestServer() as srv:
        srv.respond(weather_server)
        progress = run_set(tmp_path / "run.db", set_path, [model_config(srv, proto, alias="m", max_retries=0)])
        requests = [r.json for r in srv.requests]
    assert progress.failed == 0
    loaded = loaded_run(tmp_path / "run.db")
    (out,) = loaded.outputs
    assert out.status == "complete" and out.text == "It is 18 degrees in Paris."
    trace = out.trace
    assert trace is not None and trace.stopped == "answered" and len(trace.steps) == 2
    (call,) = trace.steps[0].calls
    assert (call.name, call.arguments, call.result, call.rule) == ("get_weather", {"city": "Paris"}, {"temp_c": 18},
                                                                  "tool_results.0")
    assert trace.steps[0].text == "Let me check." and trace.steps[1].text == out.text
    # usage is the sum over the two requests (the server reports 10 input tokens each)
    assert out.input_tokens == 20
    # two requests: the second carries the call and its result, in the protocol's own form
    assert len(requests) == 2
    second = json.dumps(requests[1])
    assert "get_weather" in second and "temp_c" in second
    assert {c.check: c.passed for c in loaded.checks} == {
        "tool_called": True, "tool_args_valid": True, "max_steps": True, "contains": True}


def test_step_limit_stops_the_loop_and_records_why(tmp_path):
    case = weather_case(max_steps=3, checks=[{"type": "max_steps", "limit": 2}])
    set_path = write_set(tmp_path / "set.jsonl", case)
    with TestServer() as srv:   # a model that never stops calling
        srv.script(Reply(text="", tool_calls=[{"name": "get_weather", "arguments": {"city": "Rome"}}]))
        run_set(tmp_path / "run.db", set_path, [model_config(srv, "openai", alias="m", max_retries=0)])
        assert len(srv.requests) == 3
    (out,) = loaded_run(tmp_path / "run.db").outputs
    assert out.status == "complete" and out.text == ""
    assert out.trace.stopped == "step_limit" and out.trace.max_steps == 3
    assert len(out.trace.steps) == 3 and all(s.calls for s in out.trace.steps)
    # unmatched calls got the default, the last one too (its result is recorded, not sent)
    assert [c.rule for c in out.trace.calls] == ["default"] * 3
    assert out.trace.calls[-1].result == {"error": "unknown city"}
    (check,) = loaded_run(tmp_path / "run.db").checks
    assert not check.passed and "3 step(s)" in check.detail and "step limit" in check.detail


def test_scripted_results_match_by_name_then_arguments_in_order():
    from core.answering.tools import ToolScript
    from providers.events import ToolCall

    script = ToolScript(tools=[WEATHER], tool_results=[
        {"name": "get_weather", "arguments": {"city": "Paris", "days": 1}, "result": "paris-1"},
        {"name": "get_weather", "arguments": {"city": "Paris"}, "result": "paris"},
        {"name": "get_weather", "arguments": {"metric": True}, "result": "metric"},
        {"name": "get_weather", "result": "any"}])

    def answer(args):
        return script.answer(ToolCall(id=None, name="get_weather", arguments=args))

    assert answer({"city": "Paris", "days": 1.0}) == ("paris-1", "tool_results.0")   # 1 == 1.0 in JSON
    assert answer({"city": "Paris", "days": 2}) == ("paris", "tool_results.1")
    assert answer({"metric": 1}) == ("any", "tool_results.3")                        # true is not 1
    assert answer("not json") == ("any", "tool_results.3")
    assert script.answer(ToolCall(id=None, name="other", arguments={})) == (
        {"error": "no result is scripted for this call"}, "default")


# --------------------------------------------------------------------------- structured output

def dog_case(**fmt: Any) -> dict[str, Any]:
    return {"id": "dog", "category": "structured", "prompt": "Invent a dog.",
            "response_format": {"name": "dog", "schema": DOG, **fmt}}


def structured_result(loaded):
    (check,) = [c for c in loaded.checks if c.check == "structured_output"]
    return check


def test_a_refused_response_format_falls_back_to_instructions_once(tmp_path):
    set_path = write_set(tmp_path / "set.jsonl", dog_case())
    answer = json.dumps({"name": "Rex", "age": "3"})   # age of the wrong type, owner missing
    with TestServer() as srv:
        srv.script(Reply(text=answer, refuse_fields=("response_format",)))
        run_set(tmp_path / "run.db", set_path, [model_config(srv, "openai", alias="m", max_retries=0)])
        first, second = (r.json for r in srv.requests)
    assert first["response_format"]["type"] == "json_schema"
    assert "response_format" not in second
    system = second["messages"][0]
    assert system["role"] == "system" and json.dumps(DOG, sort_keys=True) in system["content"]
    loaded = loaded_run(tmp_path / "run.db")
    (out,) = loaded.outputs
    assert out.status == "complete" and out.trace.structured == "fallback"
    check = structured_result(loaded)
    assert not check.passed
    assert check.spec["failures"] == ["missing_field", "wrong_type"] and check.spec["structured"] == "fallback"
    # name, age present of name, age, owner, owner.email
    assert check.spec["score"] == 0.5


def test_a_responses_server_refusing_text_format_falls_back_to_instructions(tmp_path):
    """The Responses API asks for structured output in `text.format`; a server
    that refuses it by that name gets the instructions instead, once."""
    set_path = write_set(tmp_path / "set.jsonl", dog_case())

    def refuse_format(rec: Received) -> Reply:
        if "text" in (rec.json or {}):
            return Reply(status=400, message="Unsupported parameter: 'text.format' is not supported with this model.")
        return Reply(text=json.dumps({"name": "Rex", "age": 3, "owner": {"email": "a@b.c"}}))

    with TestServer() as srv:
        srv.respond(refuse_format)
        run_set(tmp_path / "run.db", set_path, [model_config(srv, "openai-responses", alias="m", max_retries=0)])
        first, second = (r.json for r in srv.requests)
    assert first["text"]["format"]["type"] == "json_schema" and "text" not in second
    assert json.dumps(DOG, sort_keys=True) in second["instructions"]
    (out,) = loaded_run(tmp_path / "run.db").outputs
    assert out.status == "complete" and out.trace.structured == "fallback"


def test_a_second_refusal_is_the_answers_error(tmp_path):
    set_path = write_set(tmp_path / "set.jsonl", dog_case())
    with TestServer() as srv:   # it refuses the instructions too (the word is in the system prompt now)
        srv.script(Reply(status=400, message="response_format: json_schema is not supported"))
        run_set(tmp_path / "run.db", set_path, [model_config(srv, "openai", alias="m", max_retries=0)])
        assert len(srv.requests) == 2
    (out,) = loaded_run(tmp_path / "run.db").outputs
    assert out.status == "error" and out.error_kind == "bad_request"
    assert out.trace.structured == "fallback" and out.trace.stopped == "error"


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_native_structured_output_is_checked(tmp_path, proto):
    set_path = write_set(tmp_path / "set.jsonl", dog_case())
    answer = json.dumps({"name": "Rex", "age": 3, "owner": {"email": "a@b.c"}})
    with TestServer() as srv:
        srv.script(Reply(text=answer, chunk_chars=7))
        run_set(tmp_path / "run.db", set_path, [model_config(srv, proto, alias="m", max_retries=0)])
        assert len(srv.requests) == 1
    loaded = loaded_run(tmp_path / "run.db")
    (out,) = loaded.outputs
    assert out.text == answer and out.trace.structured == "native"
    check = structured_result(loaded)
    assert check.passed and check.spec["failures"] == [] and check.spec["score"] == 1.0


def test_instructions_mode_never_sends_the_native_field(tmp_path):
    set_path = write_set(tmp_path / "set.jsonl", dog_case(mode="instructions"))
    with TestServer() as srv:
        srv.script(Reply(text="not json at all"))
        run_set(tmp_path / "run.db", set_path, [model_config(srv, "gemini", alias="m", max_retries=0)])
        (req,) = srv.requests
    assert "responseSchema" not in json.dumps(req.json)
    assert "JSON schema" in req.json["systemInstruction"]["parts"][0]["text"]
    loaded = loaded_run(tmp_path / "run.db")
    assert loaded.outputs[0].trace.structured == "instructions"
    check = structured_result(loaded)
    assert not check.passed and check.spec["failures"] == ["invalid_json"] and check.spec["score"] == 0.0


# --------------------------------------------------------------------------- threads, resumes, secrets

def test_a_follow_up_carries_the_tool_exchange_and_a_resume_rebuilds_it(tmp_path):
    set_path = write_set(tmp_path / "set.jsonl", weather_case(follow_ups=["And in Fahrenheit?"], checks=[]))
    db = tmp_path / "run.db"
    with TestServer() as srv:
        def first_run(rec: Received) -> Reply:
            if "Fahrenheit" in body_text(rec):
                return Reply(status=500, message="down")
            return weather_server(rec)

        srv.respond(first_run)
        progress = run_set(db, set_path, [model_config(srv, "anthropic", alias="m", max_retries=0)])
        assert progress.failed == 1
        srv.reset()
        srv.respond(lambda rec: Reply(text="64 °F."))
        progress = run_set(db, set_path, [model_config(srv, "anthropic", alias="m", max_retries=0)])
        assert progress.failed == 0
        (follow_up,) = [r.json for r in srv.requests]
    # the resumed follow-up went out with the first answer's calls and results, from the recorded trace
    roles = [(m["role"], [b["type"] for b in m["content"]] if isinstance(m["content"], list) else "text")
             for m in follow_up["messages"]]
    assert roles == [("user", "text"), ("assistant", ["text", "tool_use"]),
                     ("user", ["tool_result"]), ("assistant", "text"), ("user", "text")]
    assert follow_up["messages"][1]["content"][1]["input"] == {"city": "Paris"}
    assert follow_up["messages"][2]["content"][0]["tool_use_id"] == "call_1"
    assert follow_up["tools"][0]["name"] == "get_weather"


def test_a_key_echoed_in_tool_arguments_never_reaches_the_record(tmp_path, monkeypatch):
    key = "sk-test-4f9a8b7c6d5e4f3a2b1c"
    monkeypatch.setenv("TOOLS_TEST_KEY", key)
    set_path = write_set(tmp_path / "set.jsonl", weather_case(checks=[]))
    with TestServer() as srv:
        def leaky(rec: Received) -> Reply:
            if "temp_c" in body_text(rec):
                return Reply(text=f"done {key}")
            return Reply(text=f"key {key}", tool_calls=[{"name": "get_weather", "arguments": {"city": key}}])

        srv.respond(leaky)
        run_set(tmp_path / "run.db", set_path,
                [model_config(srv, "openai", alias="m", max_retries=0, api_key_env="TOOLS_TEST_KEY")])
    raw = (tmp_path / "run.db").read_bytes() + (tmp_path / "run.db-wal").read_bytes() \
        if (tmp_path / "run.db-wal").exists() else (tmp_path / "run.db").read_bytes()
    assert key.encode() not in raw
    (out,) = loaded_run(tmp_path / "run.db").outputs
    assert "[redacted]" in out.trace.steps[0].calls[0].arguments["city"]
    assert "[redacted]" in out.trace.steps[0].text


def test_a_cancelled_tool_answer_records_where_it_stopped(tmp_path):
    from core.answering.sessions import ChatSession
    from core.answering.tools import ToolScript

    script = ToolScript(tools=[WEATHER], tool_results=[{"name": "get_weather", "result": {"temp_c": 18}}])
    with TestServer() as srv:
        def slow_second(rec: Received) -> Reply:
            if "temp_c" in body_text(rec):
                return Reply(text="x" * 400, chunk_chars=1, delay=0.05)
            return weather_server(rec)

        srv.respond(slow_second)

        async def go():
            store = AsyncStore(Store.open(tmp_path / "chat.db"))
            session = await ChatSession.create(store, [model_config(srv, "openai", alias="m", max_retries=0)],
                                               script=script)
            seen: list[str] = []

            def on_update(update) -> None:
                seen.append(update.event.type)
                if update.event.type == "text" and seen.count("tool_result") and seen.count("text") > 3:
                    session.cancel(0)

            await session.send("Weather in Paris?", on_update=on_update)
            out = session.contestants[0].last_output
            resumed = await ChatSession.resume(store, session.id, _config())
            await store.aclose()
            return out, seen, resumed

        out, seen, resumed = anyio.run(go)
    assert out.status == "cancelled" and out.trace.stopped == "cancelled"
    assert [s.calls[0].name for s in out.trace.steps if s.calls] == ["get_weather"]
    assert seen.count("sent") == 1 and seen.count("tool_call") == 1 and seen.count("tool_result") == 1
    assert seen[-1] == "error"
    # a resumed chat keeps its tools and the thread with the exchange
    assert resumed.script == script
    assert [m.role for m in resumed.contestants[0].history] == ["user", "assistant", "tool", "assistant"]


def _config():
    from core.answering.config import Config

    return Config()


# --------------------------------------------------------------------------- sample sets and tools files

def _problems(tmp_path: Path, case: dict[str, Any]) -> list[str]:
    path = write_set(tmp_path / "bad.jsonl", {"id": "ok", "category": "c", "prompt": "fine"}, case)
    with pytest.raises(SampleSetError) as err:
        load_sample_set(path)
    return [p.replace(f"{tmp_path}/", "") for p in err.value.problems]


@pytest.mark.parametrize("change,expected", [
    ({"tool_results": [{"name": "get_wether", "result": 1}]},
     "bad.jsonl:2: tool_results.0.name: 'get_wether' is not one of the declared tools (get_weather)"),
    ({"tools": [WEATHER, WEATHER]}, "bad.jsonl:2: tools.1.name: 'get_weather' is declared twice"),
    ({"tools": [{**WEATHER, "name": "structured_answer"}], "tool_results": []},
     "bad.jsonl:2: tools.0.name: 'structured_answer' is reserved"),
    ({"tools": [{**WEATHER, "parameters": {"type": "objekt"}}]}, "bad.jsonl:2: tools.0.parameters: invalid JSON schema"),
    ({"tools": [{**WEATHER, "parameters": {"type": "string"}}]}, "bad.jsonl:2: tools.0.parameters: must be a schema"),
    ({"tools": [{**WEATHER, "name": "get weather"}]}, "bad.jsonl:2: tools.0.name: string should match pattern"),
    ({"response_format": {"schema": DOG}}, "bad.jsonl:2: response_format: give either 'tools' or 'response_format'"),
    ({"max_steps": 0}, "bad.jsonl:2: max_steps: input should be greater than or equal to 1"),
    ({"checks": [{"type": "tool_called", "tool": "get_time"}]},
     "bad.jsonl:2: checks.0.tool: 'get_time' is not one of the declared tools (get_weather)"),
    ({"checks": [{"type": "tool_called", "tool": "get_weather", "arguments_schema": {"type": 5}}]},
     "bad.jsonl:2: checks.0.arguments_schema: invalid JSON schema"),
    ({"checks": [{"type": "structured_output"}]}, "bad.jsonl:2: checks.0: a structured_output check needs 'response_format'"),
])
def test_bad_tool_fields_are_named_by_file_line_and_field(tmp_path, change, expected):
    problems = _problems(tmp_path, {**weather_case(checks=[]), **change})
    assert any(p.startswith(expected) for p in problems), problems


def test_tool_fields_without_tools_and_every_problem_on_its_own_line(tmp_path):
    case = {"id": "x", "category": "c", "prompt": "p", "tool_results": [{"name": "a", "result": 1}], "max_steps": 3,
            "checks": [{"type": "tool_not_called"}], "response_format": {"schema": {"type": "objekt"}}}
    problems = _problems(tmp_path, case)
    assert problems == [
        "bad.jsonl:2: tool_results: needs 'tools' (the functions it is about)",
        "bad.jsonl:2: max_steps: needs 'tools' (the functions it is about)",
        problems[2],
        "bad.jsonl:2: checks.0: a tool_not_called check needs 'tools'",
    ]
    assert problems[2].startswith("bad.jsonl:2: response_format.schema: invalid JSON schema")


def test_lineup_run_refuses_a_bad_tools_case_with_exit_2(tmp_path, capsys):
    path = write_set(tmp_path / "bad.jsonl", weather_case(tool_results=[{"name": "nope", "result": 1}]))
    assert main(["run", str(path), "-m", "demo/concise", "--db", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:1: tool_results.0.name: 'nope' is not one of the declared tools" in err
    assert not (tmp_path / "x.db").exists() or not Store.open(tmp_path / "x.db").list_sessions()


def test_a_chat_tools_file_is_checked_like_a_case(tmp_path, monkeypatch):
    good = tmp_path / "tools.json"
    good.write_text(json.dumps({"tools": [WEATHER], "tool_results": [{"name": "get_weather", "result": 1}],
                                "max_steps": 3}))
    script = load_tool_script(good)
    assert script.max_steps == 3 and script.tools[0].name == "get_weather"
    bad = Path("bad.json")
    monkeypatch.chdir(tmp_path)
    bad.write_text(json.dumps({"tools": [WEATHER], "tool_results": [{"name": "x", "result": 1}], "prompt": "no"}))
    with pytest.raises(SampleSetError) as err:
        load_tool_script(bad)
    assert err.value.problems == ["bad.json: prompt: not a field of a tools file (tools, tool_results, "
                                  "tool_default, max_steps)"]
    bad.write_text(json.dumps({"tools": [WEATHER], "tool_results": [{"name": "x", "result": 1}]}))
    with pytest.raises(SampleSetError) as err:
        load_tool_script(bad)
    assert err.value.problems == ["bad.json: tool_results.0.name: 'x' is not one of the declared tools (get_weather)"]
    bad.write_text("{\"tools\": [")
    with pytest.raises(SampleSetError) as err:
        load_tool_script(bad)
    assert "bad.json" in err.value.problems[0]


def test_chat_reads_its_tools_file_and_a_resume_refuses_one(tmp_path, monkeypatch):
    import argparse

    from core.ground.errors import UsageError
    from lineup.commands.chat_cmd import configure, prepare

    monkeypatch.delenv("LINEUP_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nothing-here"))
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [WEATHER], "max_steps": 2}))
    p = argparse.ArgumentParser()
    p.add_argument("--db")
    p.add_argument("--config")
    configure(p)
    _, _, opts = prepare(p.parse_args(["--db", str(tmp_path / "x.db"), "--tools", str(tools)]))
    assert opts.script is not None and opts.script.max_steps == 2 and opts.script.tools[0].name == "get_weather"
    with pytest.raises(UsageError, match="--tools starts a new chat"):
        prepare(p.parse_args(["--tools", str(tools), "--resume", "01ABC"]))


def test_chat_with_a_bad_tools_file_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps({"tools": [{"name": "x y"}]}))
    assert main(["chat", "--tools", str(bad), "-m", "demo/concise", "--db", str(tmp_path / "c.db")]) == 2
    assert "tools.json: tools.0.name" in capsys.readouterr().err


# --------------------------------------------------------------------------- re-runs, exports, the report

def test_a_rerun_rebuilds_the_tools_and_the_response_format(tmp_path):
    set_path = write_set(tmp_path / "set.jsonl", weather_case(max_steps=4), dog_case())
    with TestServer() as srv:
        def answer(rec: Received) -> Reply:
            return Reply(text='{"name": "Rex", "age": 3, "owner": {"email": "x"}}') if "dog" in body_text(rec) \
                else weather_server(rec)

        srv.respond(answer)
        run_set(tmp_path / "run.db", set_path, [model_config(srv, "openai", alias="m", max_retries=0)])
    original = {c.id: c for c in load_sample_set(set_path).cases}
    rebuilt, lost = sample_set_from_run(loaded_run(tmp_path / "run.db"))
    assert lost == []
    again = {c.id: c for c in rebuilt.cases}
    assert again["w1"].tool_script() == original["w1"].tool_script()
    assert again["dog"].response_format == original["dog"].response_format
    assert [c.type for c in again["dog"].all_checks] == ["structured_output"]
    assert [c.type for c in again["w1"].checks] == [c.type for c in original["w1"].checks]


def test_exports_carry_the_trace(tmp_path, capsys):
    set_path = write_set(tmp_path / "set.jsonl", weather_case(checks=[]))
    db = tmp_path / "run.db"
    with TestServer() as srv:
        def evil(rec: Received) -> Reply:
            if "unknown city" in body_text(rec):
                return Reply(text="18 degrees")
            return Reply(text="", tool_calls=[{"name": "get_weather", "arguments": {"city": "Par\x1b[31mis\n# H1 *b*"}}])

        srv.respond(evil)
        run_set(db, set_path, [model_config(srv, "openai", alias="m", max_retries=0)])
    session_id = loaded_run(db).session.id
    assert main(["export", session_id, "--format", "jsonl", "--db", str(db)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    trace = record["output"]["trace"]
    assert trace["steps"][0]["calls"][0]["arguments"] == {"city": "Par\x1b[31mis\n# H1 *b*"}
    assert trace["steps"][0]["calls"][0]["result"] == {"error": "unknown city"}
    # the JSONL export imports back into another database, trace and all
    path = tmp_path / "export.jsonl"
    path.write_text(line + "\n")
    other = tmp_path / "other.db"
    assert main(["import", str(path), "--db", str(other)]) == 0
    capsys.readouterr()
    store = Store.open(other)
    try:
        (summary,) = store.list_sessions()
        assert store.load_session(summary.id).outputs[0].trace.model_dump(mode="json") == trace
    finally:
        store.close()
    assert main(["export", session_id, "--format", "md", "--db", str(db)]) == 0
    md = capsys.readouterr().out
    lines = md.splitlines()
    (call_line,) = [x for x in lines if x.startswith("- → ")]
    (result_line,) = [x for x in lines if x.startswith("- ← ")]
    # one line each, right after the other, every Markdown character of the arguments escaped
    assert lines.index(result_line) == lines.index(call_line) + 1
    assert call_line.startswith("- → get\\_weather\\(") and "\x1b" not in md and "u001b" in call_line
    assert "\\*b\\*" in call_line and not any(x.startswith("# H1") for x in lines)
    assert "unknown city" in result_line and "18 degrees" in md


def test_the_report_gives_structured_rates_with_wilson_intervals(tmp_path):
    from core.report import ReportFilters, build_report, render_html, render_markdown
    from core.report.structured import structured_rows

    cases = [dict(dog_case(), id=f"dog{i}") for i in range(4)]
    set_path = write_set(tmp_path / "set.jsonl", *cases)
    answers = iter(['{"name": "Rex", "age": 3, "owner": {"email": "x"}}', '{"name": "Rex"}',
                    'not json', '{"name": 1, "age": "old", "owner": {"email": "x"}}'])
    with TestServer() as srv:
        srv.respond(lambda rec: Reply(text=next(answers)))
        run_set(tmp_path / "run.db", set_path, [model_config(srv, "ollama", alias="m", max_retries=0)],
                concurrency=1)
    store = Store.open(tmp_path / "run.db")
    try:
        report = build_report(store, ReportFilters(), rounds=10, seed=1)
    finally:
        store.close()
    (row,) = report.structured
    assert row.model == "m" and row.answers == 4 and row.valid.count == 1
    assert row.failures["invalid_json"].count == 1 and row.failures["missing_field"].count == 1
    assert row.failures["wrong_type"].count == 1 and row.failures["other"].count == 0
    # completeness: 4/4, 1/4 (name), 0 (not JSON), 4/4 (present, if of the wrong type)
    assert row.completeness == pytest.approx((1 + 0.25 + 0 + 1) / 4)
    # Wilson 95% for 1 of 4: 0.0456 .. 0.6994
    assert row.valid.ci_low == pytest.approx(0.0456, abs=1e-3) and row.valid.ci_high == pytest.approx(0.6994, abs=1e-3)
    assert structured_rows([]) == []
    md = render_markdown(report)
    assert "## Structured output" in md and "25% (5%-70%)" in md
    assert "Structured output" in render_html(report)


# --------------------------------------------------------------------------- offline, the demo models

def test_the_demo_models_run_the_shipped_tools_set_offline(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    db = tmp_path / "demo.db"
    code = main(["run", str(ROOT / "sample_sets" / "tools.jsonl"), "-m", "demo/concise", "-m", "demo/thorough",
                 "--db", str(db)])
    assert code == 0, capsys.readouterr().err
    loaded = loaded_run(db)
    cases = load_sample_set(ROOT / "sample_sets" / "tools.jsonl").cases
    assert len(cases) >= 12 and len(loaded.outputs) == 2 * len(cases)
    turn_case = {t.id: t.case_id for t in loaded.turns}
    by = {(turn_case[o.turn_id], o.contestant): o for o in loaded.outputs}
    # a single call, parallel calls (thorough: three cities in one step), a chain over three steps
    assert [c.name for c in by["tool-weather-single", "demo/concise"].trace.calls] == ["get_weather"]
    parallel = by["tool-weather-parallel", "demo/thorough"].trace
    assert len(parallel.steps[0].calls) == 3 and len(parallel.steps) == 2
    chain = by["tool-order-status-chain", "demo/thorough"].trace
    assert [c.name for c in chain.calls] == ["find_customer", "list_orders", "get_shipment"]
    assert [c.rule for c in chain.calls] == ["tool_results.0", "tool_results.1", "tool_results.2"]
    # no call where none is needed; structured answers natively
    assert not by["tool-no-call-capital", "demo/concise"].trace.calls
    assert by["struct-invoice", "demo/concise"].trace.structured == "native"
    json.loads(by["struct-invoice", "demo/concise"].text)
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--include-demo", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {r["model"] for r in report["structured"]} == {"demo/concise", "demo/thorough"}
    assert any(c["check"] == "tool_called" for c in report["checks"])
