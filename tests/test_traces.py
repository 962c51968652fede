"""`lineup sample` on the traces teams keep: OpenTelemetry GenAI spans
(real SDK spans, both the attribute and the older event form, as OTLP JSON),
LangSmith runs, Langfuse traces, LiteLLM logging payloads; strata from their
metadata, non-LLM spans skipped and counted, the logged answer kept with
`--keep-answers`, hostile fields bounded and scrubbed, `FILE:LINE` errors."""

from __future__ import annotations

import argparse
import json

import pytest

from core.ground.errors import UsageError
from core.exchange.log_records import SKIP_TOOLS
from core.exchange.logs import read_logs
from core.answering.sampleset import load_sample_set
from core.exchange.traces import SKIP_NOT_LLM, read_trace_file
from lineup.commands import sample_cmd
from tests.trace_producers import OtelRecorder, langfuse_trace, langsmith_run, litellm_payload, write_lines

pytest.importorskip("opentelemetry.sdk")


def run_sample(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    sample_cmd.configure(parser)
    return sample_cmd.run(parser.parse_args(list(argv)))


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")


def test_otel_spans_in_attribute_form_become_records_and_other_spans_are_counted(tmp_path):
    rec = OtelRecorder()
    rec.chat(user("How do I reverse a list in Python?"), "Use reversed().", system="Be brief.",
             attrs={"app.category": "code"}, parent=True, latency_ms=640)
    rec.chat([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
              {"role": "user", "content": "Translate 'cat' to French"}], "chat",
             attrs={"app.category": "translation"}, parent=True)
    path = rec.write(tmp_path / "otel.jsonl")
    logs = read_logs(path, "app.category")
    assert logs.kind == "otlp"
    assert [r.stratum for r in logs.records] == ["code", "translation"]
    first, second = logs.records
    assert first.prompt == "How do I reverse a list in Python?" and first.system == "Be brief."
    assert second.history == (("user", "Hi"), ("assistant", "Hello!")) and second.prompt.startswith("Translate")
    assert first.logged is not None and first.logged.text == "Use reversed()." and first.logged.model == "gpt-4o"
    assert first.logged.latency_ms == pytest.approx(640) and first.logged.input_tokens == 12
    # each call came with an app span and a retriever span: skipped, counted, named
    assert logs.skipped[SKIP_NOT_LLM] == 4
    assert "span" in logs.first_skipped[SKIP_NOT_LLM]


def test_otel_spans_in_the_older_event_form_become_records(tmp_path):
    rec = OtelRecorder()
    rec.chat(user("Summarise: the cat sat on the mat."), "A cat sat.", system="You summarise.", form="events",
             attrs={"app.category": "summary"}, ttft_ms=120)
    logs = read_logs(rec.write(tmp_path / "otel.jsonl"), "app.category")
    (r,) = logs.records
    assert (r.prompt, r.system, r.stratum) == ("Summarise: the cat sat on the mat.", "You summarise.", "summary")
    assert r.logged is not None and r.logged.text == "A cat sat." and r.logged.ttft_ms == pytest.approx(120)


def test_langsmith_runs_by_metadata_with_chain_runs_skipped(tmp_path):
    runs = [langsmith_run(user("What is 2+2?"), "4", metadata={"category": "math"}, cost=0.001),
            langsmith_run(user("ignored"), "x", run_type="chain"),
            langsmith_run(user("Write a haiku about rain"), "Rain falls", metadata={"category": "writing"})]
    path = write_lines(tmp_path / "runs.jsonl", runs)
    logs = read_logs(path, "extra.metadata.category")
    assert logs.kind == "langsmith"
    assert [(r.prompt, r.stratum) for r in logs.records] == [("What is 2+2?", "math"),
                                                             ("Write a haiku about rain", "writing")]
    assert logs.skipped[SKIP_NOT_LLM] == 1
    assert logs.records[0].logged is not None and logs.records[0].logged.cost == pytest.approx(0.001)
    assert logs.records[0].logged.ttft_ms == pytest.approx(200)
    assert read_logs(path, "category").records[1].stratum == "writing"      # metadata keys by name too


def test_langfuse_traces_and_an_observation_array(tmp_path):
    traces = [langfuse_trace(user("Explain recursion"), "It calls itself.", metadata={"topic": "code"}),
              langfuse_trace(user("Best pasta sauce?"), "Pesto.", metadata={"topic": "food"})]
    path = tmp_path / "langfuse.json"
    path.write_text(json.dumps({"data": traces, "meta": {"page": 1}}), encoding="utf-8")
    logs = read_logs(path, "topic")
    assert logs.kind == "langfuse"
    assert [(r.prompt, r.stratum) for r in logs.records] == [("Explain recursion", "code"), ("Best pasta sauce?", "food")]
    assert logs.skipped[SKIP_NOT_LLM] == 2                                     # the SPAN observations
    assert logs.records[0].logged is not None and logs.records[0].logged.latency_ms == pytest.approx(900)
    # GET /api/public/observations: the observations alone, as a JSON array
    observations = [o for t in traces for o in t["observations"]]
    path.write_text(json.dumps(observations), encoding="utf-8")
    alone = read_logs(path, "length")
    assert [r.prompt for r in alone.records] == ["Explain recursion", "Best pasta sauce?"]
    assert alone.skipped[SKIP_NOT_LLM] == 2 and alone.derived


def test_litellm_payloads_by_requester_metadata(tmp_path):
    rows = [litellm_payload(user("Fix my SQL: SELEC * FROM t"), "SELECT * FROM t", requester={"feature": "sql"}),
            litellm_payload(user("embed me"), None, call_type="aembedding"),
            litellm_payload(user("Tell me a joke"), "Why...", requester={"feature": "chat"})]
    path = write_lines(tmp_path / "litellm.jsonl", rows)
    logs = read_logs(path, "feature")
    assert logs.kind == "litellm"
    assert [(r.prompt, r.stratum) for r in logs.records] == [("Fix my SQL: SELEC * FROM t", "sql"),
                                                             ("Tell me a joke", "chat")]
    assert logs.skipped[SKIP_NOT_LLM] == 1
    # the key hash in LiteLLM's metadata is no stratum anyone can pick
    assert not any("api_key" in k for k in read_trace_file(path).calls[0].fields)


def test_sample_keep_answers_writes_the_logged_answer_into_each_case(tmp_path):
    rows = [litellm_payload(user(f"Question number {i} about topic {i * 7}"), f"Answer {i}", at=i,
                            requester={"feature": "a" if i % 2 else "b"}, latency_ms=500 + i) for i in range(6)]
    path = write_lines(tmp_path / "litellm.jsonl", rows)
    out = tmp_path / "set.jsonl"
    assert run_sample(str(path), "--by", "feature", "-n", "4", "--keep-answers", "-o", str(out)) == 0
    s = load_sample_set(out)
    assert len(s.cases) == 4
    for case in s.cases:
        assert case.logged is not None and case.logged.text.startswith("Answer ")
        assert case.logged.latency_ms is not None and case.logged.latency_ms >= 500
    out2 = tmp_path / "plain.jsonl"
    assert run_sample(str(path), "--by", "feature", "-n", "4", "-o", str(out2)) == 0
    assert all(c.logged is None for c in load_sample_set(out2).cases)      # only when asked


def test_trace_errors_name_file_and_line(tmp_path):
    good = litellm_payload(user("ok"), "fine")
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + "{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        read_logs(path, "feature")
    bad_msgs = dict(good, messages=[{"content": "no role"}])
    path.write_text(json.dumps(bad_msgs) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1.*role"):
        read_logs(path, "model")
    with pytest.raises(UsageError, match="no record has the field"):
        run_sample(str(write_lines(tmp_path / "x.jsonl", [good])), "--by", "nope", "-n", "1",
                   "-o", str(tmp_path / "o.jsonl"))


def test_hostile_trace_fields_are_bounded_and_secrets_dropped(tmp_path):
    huge = "x" * 500_000
    row = litellm_payload(user("hi there"), huge, requester={"feature": "sk-" + "A1b2" * 10,
                                                             "note": "\x1b[31mred"},
                          latency_ms=float("1e300"), cost=-5)
    row["prompt_tokens"] = "NaN"
    path = write_lines(tmp_path / "h.jsonl", [row])
    call = read_trace_file(path).calls[0]
    assert "feature" not in call.fields                       # a key-looking value is not kept
    assert call.latency_ms is None and call.cost is None and call.input_tokens is None
    logged = call.logged()
    assert logged is not None and len(logged.text) == 200_000
    logs = read_logs(path, "note")
    assert logs.records[0].stratum == "\x1b[31mred"           # kept as data; escaped where shown (one_line)


def test_tool_calls_in_a_trace_are_skipped_as_in_logs(tmp_path):
    msgs = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function",
                                                                   "function": {"name": "w", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "1", "content": "sunny"}, {"role": "user", "content": "thanks"}]
    path = write_lines(tmp_path / "t.jsonl", [litellm_payload(msgs, "ok")])
    logs = read_logs(path, "model")
    assert logs.skipped[SKIP_TOOLS] == 1 and not logs.records
