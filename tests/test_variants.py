"""A contestant is a model with its prompt and settings: `[variants]` in the
config, `{{name}}` templates filled from a case's `vars`, the model x variant
matrix of `lineup run --variants`, resume keys that cover the whole variant,
the report grouped by model and by variant, and blinding of the prompts."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from core.answering.cache import request_key
from core.answering.config import ConfigError, parse_config, resolve_models, variant_matrix
from core.answering.runner import Runner, contestant_differences
from core.answering.sampleset import SampleSetError, load_sample_set
from core.answering.templates import render
from lineup.cli import main
from providers.events import ChatRequest, Message
from store import AsyncStore, Store
from tests.server import Reply, TestServer, model_config

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "sample_sets" / "instruction_following.jsonl"

VARIANTS = """
[variants.terse]
system = "Answer in one sentence."
params = { temperature = 0 }

[variants.detailed]
system = "Answer step by step."
template = "Please be thorough. {{prompt}}"
"""


def _config(models: dict | None = None, variants: dict | None = None):
    return parse_config({"models": models or {"gpt": {"provider": "demo", "model": "concise"}},
                         "variants": variants or {}})


# --------------------------------------------------------------------------- the config


def test_a_named_variant_resolves_with_its_overrides_applied():
    config = _config(models={"gpt": {"provider": "demo", "model": "concise", "params": {"max_tokens": 50}}},
                     variants={"gpt@terse": {"model": "gpt", "system": "One sentence.",
                                             "params": {"temperature": 0}}})
    (v,) = resolve_models(config, ["gpt@terse"])
    assert v.alias == "gpt@terse" and v.variant_of == "gpt" and v.model == "concise"
    assert v.system == "One sentence."
    assert v.params.temperature == 0 and v.params.max_tokens == 50     # the model's own, under the variant's


def test_a_generic_variant_applies_to_any_model_and_the_matrix_names_every_pair():
    config = _config(variants={"terse": {"system": "Short."}, "gpt@long": {"model": "gpt", "system": "Long."}})
    assert variant_matrix(config, ["gpt", "demo/thorough"], ["terse"]) == ["gpt@terse", "demo/thorough@terse"]
    models = resolve_models(config, ["gpt@terse", "demo/thorough@terse", "gpt@long"])
    assert [(m.alias, m.variant_of, m.system) for m in models] == [
        ("gpt@terse", "gpt", "Short."), ("demo/thorough@terse", "demo/thorough", "Short."),
        ("gpt@long", "gpt", "Long.")]
    with pytest.raises(ConfigError, match=r"--variants long: no \[variants.\"demo/thorough@long\"\]"):
        variant_matrix(config, ["demo/thorough"], ["long"])      # gpt's own variant is not demo/thorough's


@pytest.mark.parametrize("variants, path, what", [
    ({"gpt@x": {"model": "nope"}}, "variants.\"gpt@x\".model", "unknown model alias 'nope'"),
    ({"gpt": {"system": "s"}}, "variants.gpt", "is a model's alias already"),
    ({"a@b": {"system": "s"}}, "variants.\"a@b\".model", "required for a name with @"),
    ({"gpt@b": {"model": "demo/concise"}}, "variants.\"gpt@b\".model", "is 'demo/concise', but the name says it is a variant of 'gpt'"),
    ({"t": {"system": ""}}, "variants.t.system", "is empty"),
    ({"t": {"params": {"temperature": 9}}}, "variants.t.params.temperature", ""),
    ({"t": {"prompt": "x"}}, "variants.t.prompt", "unknown key"),
])
def test_a_bad_variant_is_refused_naming_its_key_path(variants, path, what):
    with pytest.raises(ConfigError) as exc:
        _config(variants=variants)
    assert f"{path}: {what}" in str(exc.value)


# --------------------------------------------------------------------------- templates


def test_values_are_put_in_once_and_never_expanded_again():
    assert render("Hi {{ name }}, {{x}}", {"name": "{{x}}", "x": "y"}) == "Hi {{x}}, y"
    assert render("{{not a name}} {{ok}}", {"ok": "1"}) == "{{not a name}} 1"


def test_a_case_with_vars_is_filled_and_a_missing_one_is_named_with_file_and_line(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "c", "prompt": "Customer says: {{msg}}",
                                "follow_ups": ["About {{ topic }}?"], "vars": {"msg": "hello", "topic": 3}})
                    + "\n" + json.dumps({"id": "b", "category": "c", "prompt": "{{msg}} and {{other}}",
                                         "vars": {"msg": "x"}}) + "\n"
                    + json.dumps({"id": "c", "category": "c", "prompt": "about {{jinja}} (no vars: text)"}) + "\n")
    with pytest.raises(SampleSetError) as exc:
        load_sample_set(path)
    assert exc.value.problems == [f"{path}:2: vars.other: the prompt uses {{{{other}}}} and vars does not give it"]
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[2]]) + "\n")
    a, c = load_sample_set(path).cases
    assert a.prompt == "Customer says: hello" and a.follow_ups == ("About 3?",)
    assert c.prompt == "about {{jinja}} (no vars: text)"


def test_a_variant_template_missing_a_variable_stops_the_run_before_any_request(tmp_path, monkeypatch, capsys):
    (tmp_path / "config.toml").write_text('[variants.support]\ntemplate = "Customer: {{customer}}"\n')
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "c", "prompt": "p", "vars": {"customer": "hi"}}) + "\n"
                    + json.dumps({"id": "b", "category": "c", "prompt": "q"}) + "\n")
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("LINEUP_DB", str(tmp_path / "x.db"))
    assert main(["run", str(path), "-m", "demo/concise", "--variants", "support", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "set.jsonl:2: vars.customer: the template of demo/concise@support uses {{customer}}" in err
    assert not (tmp_path / "x.db").exists()     # nothing recorded, nothing sent


# --------------------------------------------------------------------------- over the wire


def _run(db, sample, models, **kw):
    async def go():
        store = AsyncStore(Store.open(db))
        try:
            return await Runner(store, sample, models, **kw).run()
        finally:
            await store.aclose()
    return anyio.run(go)


def test_each_variant_sends_its_own_system_prompt_parameters_and_template(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "c", "prompt": "Where is my parcel?",
                                "vars": {"tone": "calm"}}) + "\n")
    sample = load_sample_set(path)
    with TestServer() as srv:
        srv.script(Reply(text="ok"))
        base = model_config(srv, "openai", alias="gpt", model="gpt-x", max_retries=0, read_timeout=5)
        config = parse_config({"variants": {
            "terse": {"system": "One sentence.", "params": {"temperature": 0}},
            "warm": {"template": "Reply in a {{tone}} voice: {{prompt}}", "params": {"temperature": 1.2}}}})
        config = config.model_copy(update={"models": {"gpt": base}})
        from core.answering.config import _variant   # the resolution `-m` uses, with a loopback model
        models = [_variant(config, a, {}) for a in ("gpt@terse", "gpt@warm")]
        _run(tmp_path / "r.db", sample, models, system="the run's system")
        bodies = [r.json for r in srv.requests]
    by_temp = {b["temperature"]: b for b in bodies}
    assert set(by_temp) == {0, 1.2}
    terse, warm = by_temp[0], by_temp[1.2]
    assert terse["messages"][0] == {"role": "system", "content": "One sentence."}
    assert terse["messages"][-1]["content"] == "Where is my parcel?"
    assert warm["messages"][0] == {"role": "system", "content": "the run's system"}
    assert warm["messages"][-1]["content"] == "Reply in a calm voice: Where is my parcel?"
    with Store.open(tmp_path / "r.db") as store:
        (summary,) = store.list_sessions(kind="run")
        loaded = store.load_session(summary.id)
    (turn,) = loaded.turns
    assert turn.user_message == "Where is my parcel?"              # the case's own, shared by the turn
    sent = {o.contestant: o.prompt for o in loaded.outputs}       # and what each answer was sent
    assert sent == {"gpt@terse": None, "gpt@warm": "Reply in a calm voice: Where is my parcel?"}
    recorded = {c.alias: (c.variant_of, c.system, c.template) for c in loaded.session.contestants}
    assert recorded == {"gpt@terse": ("gpt", "One sentence.", None),
                        "gpt@warm": ("gpt", None, "Reply in a {{tone}} voice: {{prompt}}")}


def test_two_variants_never_share_a_request_key_or_a_resumed_run(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "c", "prompt": "hello"}) + "\n")
    sample = load_sample_set(path)
    with TestServer() as srv:
        srv.script(Reply(text="ok"))
        base = model_config(srv, "openai", alias="gpt", model="gpt-x", max_retries=0, read_timeout=5)
        from core.answering.config import apply_variant, Variant

        one = apply_variant(base, "gpt@v", Variant(system="first prompt"))
        two = apply_variant(base, "gpt@v", Variant(system="second prompt"))   # the same name, edited
        keys = {request_key(m, ChatRequest(model=m.model, messages=(Message(role="user", content="hello"),),
                                           system=m.system), 0) for m in (one, two)}
        assert len(keys) == 2
        db = tmp_path / "r.db"
        first = _run(db, sample, [one, base])
        again = _run(db, sample, [one, base])
        assert again.resumed and again.session_id == first.session_id and len(srv.requests) == 2
        edited = _run(db, sample, [two, base])
        assert not edited.resumed and edited.session_id != first.session_id
        assert edited.drift is not None
        assert "gpt@v: system 'first prompt' -> 'second prompt'" in edited.drift[1]
        assert len(srv.requests) == 4       # the edited variant answered anew, never mixed with the old


def test_a_changed_template_is_a_difference_too():
    from store.records import ContestantRecord, SessionRecord

    old = ContestantRecord(alias="m@v", provider="demo", model="concise", label="A", template="{{prompt}}!")
    new = old.model_copy(update={"template": "{{prompt}}?"})
    found = contestant_differences(SessionRecord(contestants=[old]), {"m@v": new}, None)
    assert found == ["m@v: template '{{prompt}}!' -> '{{prompt}}?'"]


# --------------------------------------------------------------------------- end to end on demo models


def test_two_demo_models_by_two_variants_run_vote_report_decide_export(tmp_path, monkeypatch, capsys):
    from core.answering.rater_view import rater_view
    from core.answering.vote_queue import VoteQueue

    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    (tmp_path / "config.toml").write_text(VARIANTS)
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    db = tmp_path / "lineup.db"
    monkeypatch.setenv("LINEUP_DB", str(db))
    assert main(["run", str(SET), "-m", "demo/concise", "-m", "demo/thorough", "--variants", "terse,detailed",
                 "--quiet"]) == 0
    capsys.readouterr()
    favourite = ["demo/thorough@detailed", "demo/concise@detailed", "demo/thorough@terse", "demo/concise@terse"]

    async def vote_all() -> int:
        store = await AsyncStore.open(db)
        try:
            queue = VoteQueue(store, rater="tester")
            await queue.load()
            n = 0
            while queue.advance() is not None:
                view = json.dumps(rater_view(queue, handle="h", names=True, tags=(), note=None, progress={}))
                # before the vote: no variant's name, prompt or template text on the page
                assert "@" not in view and "Please be thorough" not in view and "step by step" not in view
                by_alias = {alias: label for label, alias in queue.mapping.items()}
                order = {0: [favourite[1], favourite[0], favourite[3], favourite[2]],     # an upset or two
                         5: [favourite[2], favourite[0], favourite[1], favourite[3]],
                         7: [favourite[3], favourite[1], favourite[0], favourite[2]]}.get(n, favourite)
                ranking = [by_alias[a] for a in order]
                await queue.vote(ranking[0], ranking, confirm=True)
                after = json.dumps(rater_view(queue, handle="h", names=True, tags=(), note=None, progress={}))
                assert "Please be thorough" in after      # after it, what each was sent
                n += 1
            return n
        finally:
            await store.aclose()

    assert anyio.run(vote_all) == 10

    assert main(["report", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    groups = report["variants"]
    by_model = {g["name"]: [r["contestant"] for r in g["rows"]] for g in groups["by_model"]}
    by_variant = {g["name"]: [r["contestant"] for r in g["rows"]] for g in groups["by_variant"]}
    assert by_model == {"demo/concise": ["demo/concise@detailed", "demo/concise@terse"],
                        "demo/thorough": ["demo/thorough@detailed", "demo/thorough@terse"]}
    assert by_variant == {"detailed": ["demo/thorough@detailed", "demo/concise@detailed"],
                          "terse": ["demo/thorough@terse", "demo/concise@terse"]}
    rows = [r for g in groups["by_model"] for r in g["rows"]]
    assert all(r["rating"]["ci_low"] is not None and r["rating"]["ci_high"] is not None
               and r["rating"]["votes"] == 10 for r in rows)
    # a best is named only where its interval lies above the others' (10 votes: the bootstrap decides)
    for g in groups["by_model"] + groups["by_variant"]:
        top, *others = g["rows"]
        separated = all(top["rating"]["ci_low"] > o["rating"]["ci_high"] for o in others)
        assert g["best"] == (top["contestant"] if separated else None)

    assert main(["report"]) == 0
    text = capsys.readouterr().out
    assert "For each model: which prompt (demo/thorough)" in text
    assert "For each prompt: which model (terse)" in text

    assert main(["report", "--html", str(tmp_path / "r.html")]) == 0
    capsys.readouterr()
    assert "For each prompt: which model (detailed)" in (tmp_path / "r.html").read_text()

    assert main(["decide", "--include-demo", "--models", "demo/thorough@detailed", "demo/concise@terse"]) == 0
    assert "demo/thorough@detailed" in capsys.readouterr().out

    assert main(["export", "--format", "jsonl"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    detailed = [x for x in lines if x["contestant"]["alias"] == "demo/thorough@detailed"]
    assert len(detailed) == 10
    assert all(x["system"] == "Answer step by step." and x["prompt"].startswith("Please be thorough. ")
               for x in detailed)
    terse = [x for x in lines if x["contestant"]["alias"] == "demo/concise@terse"]
    assert all(x["system"] == "Answer in one sentence." and x["params"]["temperature"] == 0 for x in terse)


def test_before_the_reveal_the_tui_shows_the_cases_prompt_not_a_variants():
    from store.records import OutputRecord, TurnRecord
    from tui.record_entries import prompt_entry

    turn = TurnRecord(session_id="s", position=0, user_message="Where is my parcel?")
    out = OutputRecord(session_id="s", turn_id=turn.id, contestant="gpt@warm", label="A",
                       prompt="Reply in a calm voice: Where is my parcel?")
    assert prompt_entry(turn, out, hidden=True, templated=True) == ("user", "Where is my parcel?")
    assert prompt_entry(turn, out, hidden=False, templated=True)[1].startswith("Reply in a calm voice")
    edited = out.model_copy(update={"prompt": "Where is my order?"})     # a chat's edit: the same for every answer
    assert prompt_entry(turn, edited, hidden=True) == ("user", "Where is my order?")


def test_lineup_models_lists_the_variants(tmp_path, monkeypatch, capsys):
    (tmp_path / "config.toml").write_text(VARIANTS)
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["variants"]
    assert listed == [{"name": "terse", "model": None, "overrides": ["system", "params"]},
                      {"name": "detailed", "model": None, "overrides": ["system", "template"]}]


def test_a_blind_chat_sends_each_variant_its_own_system_prompt_and_resumes_it(tmp_path):
    from core.answering.config import Config, Variant, apply_variant
    from core.answering.sessions import ChatSession

    with TestServer() as srv:
        srv.script(Reply(text="ok"))
        base = model_config(srv, "openai", alias="gpt", model="gpt-x", max_retries=0, read_timeout=5)
        models = [apply_variant(base, "gpt@a", Variant(system="Prompt A.", params={"temperature": 0.1})),
                  apply_variant(base, "gpt@b", Variant(system="Prompt B.", params={"temperature": 0.9}))]

        async def go():
            store = AsyncStore(Store.open(tmp_path / "c.db"))
            session = await ChatSession.create(store, models, blind=True, system="the session's")
            await session.send("hello")
            await session.aclose()
            again = await ChatSession.resume(store, session.id, Config(models={"gpt": base}))
            await again.send("and again")
            await again.aclose()
            await store.aclose()

        anyio.run(go)
        sent = sorted((r.json["temperature"], r.json["messages"][0]["content"], r.json["messages"][-1]["content"])
                      for r in srv.requests)
    assert sent == [(0.1, "Prompt A.", "and again"), (0.1, "Prompt A.", "hello"),
                    (0.9, "Prompt B.", "and again"), (0.9, "Prompt B.", "hello")]


def test_a_variant_run_re_runs_with_its_cases_vars(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    (tmp_path / "config.toml").write_text('[variants.support]\ntemplate = "Customer {{name}}: {{prompt}}"\n')
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("LINEUP_DB", str(tmp_path / "x.db"))
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "c", "prompt": "Hi {{name}}", "vars": {"name": "{{x}}"}})
                    + "\n")
    assert main(["run", str(path), "-m", "demo/concise", "-m", "demo/concise@support", "--quiet"]) == 0
    with Store.open(tmp_path / "x.db") as store:
        (first,) = store.list_sessions(kind="run")
    assert main(["replay", first.id, "--rerun"]) == 0, capsys.readouterr().err
    with Store.open(tmp_path / "x.db") as store:
        sessions = store.list_sessions()
        loaded = [store.load_session(s.id) for s in sessions]
    prompts = sorted(o.prompt for s in loaded for o in s.outputs if o.contestant == "demo/concise@support")
    # a value holding braces is put in as it is, and never filled again on the re-run
    assert prompts == ["Customer {{x}}: Hi {{x}}"] * 2
    assert all(t.user_message == "Hi {{x}}" for s in loaded for t in s.turns)


def test_a_re_run_says_which_variant_changed_in_the_config_since_the_original(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    config = tmp_path / "config.toml"
    config.write_text('[variants.support]\nsystem = "Be brief."\n')
    monkeypatch.setenv("LINEUP_CONFIG", str(config))
    monkeypatch.setenv("LINEUP_DB", str(tmp_path / "x.db"))
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "c", "prompt": "Hi"}) + "\n")
    assert main(["run", str(path), "-m", "demo/concise", "-m", "demo/concise@support", "--quiet"]) == 0
    with Store.open(tmp_path / "x.db") as store:
        (first,) = store.list_sessions(kind="run")
    assert main(["replay", first.id, "--rerun"]) == 0
    assert "since the original" not in capsys.readouterr().err          # nothing changed: nothing said
    config.write_text('[variants.support]\nsystem = "Be thorough."\n')
    assert main(["replay", first.id, "--rerun"]) == 0
    err = capsys.readouterr().err
    assert "since the original, demo/concise@support: system 'Be brief.' -> 'Be thorough.'" in err, err
    assert "demo/concise:" not in err


# --------------------------------------------------------------------------- a variant's tools

WEATHER_TOOLS = {"tools": [{"name": "get_weather", "description": "The weather in a city.",
                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                           "required": ["city"]}}],
                 "tool_results": [{"name": "get_weather", "arguments": {"city": "Paris"}, "result": {"temp_c": 18}}],
                 "max_steps": 3}


def _tools_config(tmp_path, tools: dict | str, name: str = "tools.json"):
    (tmp_path / name).write_text(tools if isinstance(tools, str) else json.dumps(tools))
    (tmp_path / "config.toml").write_text(f'[variants.tooled]\ntools = "{name}"\n')
    from core.answering.config import load_config
    return load_config(tmp_path / "config.toml")


def _weather(rec):
    """Calls get_weather(Paris) when offered it, until it sees the result."""
    text = json.dumps(rec.json)
    if "temp_c" in text:
        return Reply(text="It is 18 degrees in Paris.")
    if "get_weather" in text:
        return Reply(text="", tool_calls=[{"id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}])
    return Reply(text="I cannot look it up.")


def test_a_variant_with_tools_sends_them_runs_the_loop_and_the_other_contestant_gets_none(tmp_path):
    config = _tools_config(tmp_path, WEATHER_TOOLS)
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "c", "prompt": "Weather in Paris?"}) + "\n")
    with TestServer() as srv:
        srv.respond(_weather)
        base = model_config(srv, "openai", alias="gpt", model="gpt-x", max_retries=0, read_timeout=5)
        config = config.model_copy(update={"models": {"gpt": base}})
        from core.answering.config import _variant   # the resolution `-m` uses, with a loopback model
        tooled = _variant(config, "gpt@tooled", {})
        _run(tmp_path / "r.db", load_sample_set(path), [tooled, base])
        bodies = [r.json for r in srv.requests]
    with_tools = [b for b in bodies if "tools" in b]
    assert len(with_tools) == 2 and len(bodies) == 3      # the variant: a call, then the answer; gpt: one request
    assert [t["function"]["name"] for t in with_tools[0]["tools"]] == ["get_weather"]
    assert "temp_c" in json.dumps(with_tools[1])           # the scripted result went back to it
    with Store.open(tmp_path / "r.db") as store:
        (summary,) = store.list_sessions(kind="run")
        loaded = store.load_session(summary.id)
    answers = {o.contestant: o for o in loaded.outputs}
    assert answers["gpt@tooled"].text == "It is 18 degrees in Paris."
    assert answers["gpt@tooled"].trace is not None and answers["gpt@tooled"].trace.steps[0].calls[0].result == {"temp_c": 18}
    assert answers["gpt"].text == "I cannot look it up." and answers["gpt"].trace is None
    recorded = {c.alias: c.tools for c in loaded.session.contestants}
    assert recorded["gpt"] is None and recorded["gpt@tooled"]["tools"][0]["name"] == "get_weather"
    assert recorded["gpt@tooled"]["max_steps"] == 3


def test_a_cases_own_tools_win_over_a_variants(tmp_path):
    config = _tools_config(tmp_path, WEATHER_TOOLS)
    case_tool = {"name": "lookup", "description": "Look it up.",
                 "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "c", "prompt": "Weather?", "tools": [case_tool]}) + "\n")
    with TestServer() as srv:
        srv.script(Reply(text="ok"))
        base = model_config(srv, "openai", alias="gpt", model="gpt-x", max_retries=0, read_timeout=5)
        config = config.model_copy(update={"models": {"gpt": base}})
        from core.answering.config import _variant

        _run(tmp_path / "r.db", load_sample_set(path), [_variant(config, "gpt@tooled", {})])
        (body,) = [r.json for r in srv.requests]
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]


def test_changing_a_variants_tools_makes_a_new_contestant_not_a_resume(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "c", "prompt": "hello"}) + "\n")
    sample = load_sample_set(path)
    with TestServer() as srv:
        srv.script(Reply(text="ok"))
        base = model_config(srv, "openai", alias="gpt", model="gpt-x", max_retries=0, read_timeout=5)
        from core.answering.config import Variant, apply_variant

        first = _tools_config(tmp_path, WEATHER_TOOLS).variants["tooled"]
        edited_tools = json.loads(json.dumps(WEATHER_TOOLS))
        edited_tools["tool_results"][0]["result"] = {"temp_c": 30}      # the same tool, another scripted result
        second = _tools_config(tmp_path, edited_tools).variants["tooled"]
        one, two = (apply_variant(base, "gpt@tooled", v) for v in (first, second))
        none = apply_variant(base, "gpt@tooled", Variant())
        db = tmp_path / "r.db"
        done = _run(db, sample, [one])
        again = _run(db, sample, [one])
        assert again.resumed and again.session_id == done.session_id and len(srv.requests) == 1
        edited = _run(db, sample, [two])
        assert not edited.resumed and edited.session_id != done.session_id
        assert edited.drift is not None
        assert "gpt@tooled: tools [get_weather]: their schemas or scripted results changed" in edited.drift[1]
        dropped = _run(db, sample, [none])
        assert not dropped.resumed and "gpt@tooled: tools [get_weather] -> none" in dropped.drift[1]
        assert len(srv.requests) == 3
        request = ChatRequest(model="gpt-x", messages=(Message(role="user", content="hello"),))
        assert len({request_key(m, request, 0) for m in (one, two, none)}) == 3


@pytest.mark.parametrize("content, what", [
    (None, "tools.json: no such file"),
    ("{not json", "tools.json:1:"),
    (json.dumps({"tools": []}), "tools.json: tools: declare at least one tool"),
    (json.dumps({"tools": [{"name": "x"}], "extra": 1}), "tools.json: extra: not a field of a tools file"),
])
def test_a_bad_variant_tools_file_is_refused_naming_the_key_and_the_file(tmp_path, monkeypatch, capsys,
                                                                         content, what):
    if content is not None:
        (tmp_path / "tools.json").write_text(content)
    (tmp_path / "config.toml").write_text('[variants.tooled]\ntools = "tools.json"\n')
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("LINEUP_DB", str(tmp_path / "x.db"))
    assert main(["run", str(SET), "-m", "demo/concise@tooled", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "config.toml: variants.tooled.tools: " in err and what in err
    assert not (tmp_path / "x.db").exists()


def test_a_variants_tools_must_name_a_file():
    with pytest.raises(ConfigError, match=r"variants.t.tools: must be the path of a tools file \(got"):
        _config(variants={"t": {"tools": ["get_weather"]}})


def test_lineup_models_shows_a_variants_tools(tmp_path, monkeypatch, capsys):
    _tools_config(tmp_path, WEATHER_TOOLS)
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    assert main(["models", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)["variants"]
    assert listed == {"name": "tooled", "model": None, "overrides": ["tools (get_weather)"]}
    assert main(["models"]) == 0
    assert "tooled" in (out := capsys.readouterr().out) and "tools (get_weather)" in out


def test_a_variant_with_tools_is_refused_by_batch_which_runs_no_tool_loop(tmp_path, monkeypatch, capsys):
    (tmp_path / "tools.json").write_text(json.dumps(WEATHER_TOOLS))
    (tmp_path / "config.toml").write_text('[models.gpt]\nprovider = "openai"\nmodel = "gpt-x"\napi_key_env = ""\n'
                                          'base_url = "http://127.0.0.1:9"\n'
                                          '[variants."gpt@tooled"]\nmodel = "gpt"\ntools = "tools.json"\n')
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("LINEUP_DB", str(tmp_path / "x.db"))
    assert main(["run", str(SET), "-m", "gpt", "-m", "gpt@tooled", "--batch", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'gpt@tooled' has tools" in err and "run it without --batch" in err
    assert not (tmp_path / "x.db").exists()


def test_a_chat_gives_a_variant_its_tools_and_a_resumed_chat_keeps_them(tmp_path):
    from core.answering.config import Config, Variant, apply_variant
    from core.answering.sessions import ChatSession

    with TestServer() as srv:
        srv.respond(_weather)
        base = model_config(srv, "openai", alias="gpt", model="gpt-x", max_retries=0, read_timeout=5)
        tooled = apply_variant(base, "gpt@tooled", Variant(tools=WEATHER_TOOLS))

        async def go():
            store = AsyncStore(Store.open(tmp_path / "c.db"))
            session = await ChatSession.create(store, [tooled, base], blind=True)
            await session.send("Weather in Paris?")
            await session.aclose()
            again = await ChatSession.resume(store, session.id, Config(models={"gpt": base}))
            await again.send("And tomorrow?")
            await again.aclose()
            await store.aclose()

        anyio.run(go)
        offered = [("tools" in r.json, r.json["messages"][-1].get("content")) for r in srv.requests]
    # gpt answers each message without tools; the variant calls the tool, gets the result and answers, then
    # (resumed, the result in its thread) answers the second message at once, still offered its tools
    assert sorted(c for with_tools, c in offered if not with_tools) == ["And tomorrow?", "Weather in Paris?"]
    tooled_sent = [c for with_tools, c in offered if with_tools]
    assert len(tooled_sent) == 3 and {"Weather in Paris?", "And tomorrow?"} <= set(tooled_sent)
    assert any("temp_c" in str(c) for c in tooled_sent)


def test_a_tools_drift_line_shows_only_valid_tool_names_from_a_record():
    from store.records import ContestantRecord, SessionRecord

    old = ContestantRecord(alias="m@v", provider="demo", model="concise", label="A",
                           tools={"tools": [{"name": "lookup\x1b[31m"}, {"name": "get_weather"}]})
    new = old.model_copy(update={"tools": None})
    found = contestant_differences(SessionRecord(contestants=[old]), {"m@v": new}, None)
    assert found == ["m@v: tools [?, get_weather] -> none"]
