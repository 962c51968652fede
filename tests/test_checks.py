"""Every check type, passing and failing, on handwritten answers."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from core.answering.checks import CHECK_TYPES, Check, count_words, extract_json, run_case_checks, run_checks

_adapter = TypeAdapter(Check)


def check(**spec):
    return _adapter.validate_python(spec)


def one(spec: dict, answer: str):
    [outcome] = run_checks([check(**spec)], answer)
    return outcome


# ---------------------------------------------------------------- valid_json


def test_valid_json_whole_answer_passes():
    o = one({"type": "valid_json"}, '  {"a": [1, 2]}\n')
    assert o.passed and o.score == 1.0
    assert "whole answer" in o.detail


def test_valid_json_in_fenced_block_with_prose_passes():
    answer = 'Sure, here it is:\n\n```json\n{"name": "Ada", "age": 36}\n```\n\nAnything else?'
    o = one({"type": "valid_json"}, answer)
    assert o.passed
    assert "```json block" in o.detail
    assert extract_json(answer)[0] == {"name": "Ada", "age": 36}


def test_valid_json_prefers_json_block_over_other_fences():
    answer = "```python\nprint('x')\n```\n```json\n[1, 2, 3]\n```"
    assert extract_json(answer)[0] == [1, 2, 3]


def test_valid_json_unlabelled_fence_is_accepted():
    assert extract_json("```\n{\"k\": true}\n```")[0] == {"k": True}


def test_valid_json_fails_on_broken_json():
    o = one({"type": "valid_json"}, '{"a": 1,}')
    assert not o.passed and o.score == 0.0
    assert "not JSON" in o.detail


def test_valid_json_fails_on_broken_fenced_block():
    o = one({"type": "valid_json"}, "```json\n{'single': 'quotes'}\n```")
    assert not o.passed
    assert "block is not JSON" in o.detail


def test_valid_json_fails_on_bare_json_inside_prose():
    o = one({"type": "valid_json"}, 'The result is {"a": 1} as requested.')
    assert not o.passed


def test_valid_json_strict_rejects_fence():
    answer = '```json\n{"a": 1}\n```'
    assert one({"type": "valid_json"}, answer).passed
    strict = one({"type": "valid_json", "strict": True}, answer)
    assert not strict.passed
    assert one({"type": "valid_json", "strict": True}, '{"a": 1}').passed


def test_valid_json_fails_on_empty_answer():
    o = one({"type": "valid_json"}, "   ")
    assert not o.passed and "empty" in o.detail


# ---------------------------------------------------------------- json_schema

SCHEMA = {
    "type": "object",
    "required": ["name", "qty"],
    "properties": {"name": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
    "additionalProperties": False,
}


def test_json_schema_passes():
    o = one({"type": "json_schema", "schema": SCHEMA}, '```json\n{"name": "mug", "qty": 3}\n```')
    assert o.passed and o.score == 1.0
    assert o.spec["schema"] == SCHEMA


def test_json_schema_fails_with_path_of_the_error():
    o = one({"type": "json_schema", "schema": SCHEMA}, '{"name": "mug", "qty": 0}')
    assert not o.passed
    assert o.detail.startswith("at qty:")
    assert "minimum" in o.detail


def test_json_schema_fails_on_extra_key_and_counts_errors():
    o = one({"type": "json_schema", "schema": SCHEMA}, '{"name": 5, "qty": "x", "extra": 1}')
    assert not o.passed
    assert "more)" in o.detail


def test_json_schema_fails_when_not_json():
    o = one({"type": "json_schema", "schema": SCHEMA}, "name: mug")
    assert not o.passed and "not JSON" in o.detail


def test_json_schema_invalid_schema_rejected_at_validation():
    with pytest.raises(ValidationError) as err:
        check(type="json_schema", schema={"type": "objekt"})
    assert "invalid JSON schema" in str(err.value)


# ---------------------------------------------------------------- regex


def test_regex_search_passes_and_fails():
    spec = {"type": "regex", "pattern": r"Answer:\s*17\b"}
    assert one(spec, "Working...\nAnswer: 17").passed
    o = one(spec, "Answer: 170")
    assert not o.passed and "no match" in o.detail


def test_regex_flags():
    assert not one({"type": "regex", "pattern": "^yes$"}, "YES").passed
    assert one({"type": "regex", "pattern": "^yes$", "flags": "i"}, "YES").passed
    assert not one({"type": "regex", "pattern": "^b$"}, "a\nb\nc").passed
    assert one({"type": "regex", "pattern": "^b$", "flags": "m"}, "a\nb\nc").passed
    assert one({"type": "regex", "pattern": "a.c", "flags": "s"}, "a\nc").passed


def test_regex_negate():
    spec = {"type": "regex", "pattern": r"\blight\b", "flags": "i", "negate": True}
    assert one(spec, "The lighthouse keeper sleeps").passed
    o = one(spec, "A Light in the dark")
    assert not o.passed and "forbidden" in o.detail


def test_regex_invalid_pattern_and_flags_rejected():
    with pytest.raises(ValidationError) as err:
        check(type="regex", pattern="(unclosed")
    assert "invalid regex" in str(err.value)
    with pytest.raises(ValidationError):
        check(type="regex", pattern="x", flags="q")


def test_regex_detail_escapes_control_characters():
    o = one({"type": "regex", "pattern": "evil.*"}, "evil\x1b[31mred")
    assert "\x1b" not in o.detail and "\\x1b" in o.detail


# ---------------------------------------------------------------- contains / not_contains


def test_contains_all_case_insensitive_default():
    spec = {"type": "contains", "values": ["Paris", "berlin"]}
    assert one(spec, "paris and BERLIN").passed
    o = one(spec, "Paris only")
    assert not o.passed and "berlin" in o.detail


def test_contains_case_sensitive():
    spec = {"type": "contains", "values": ["{name}"], "case_sensitive": True}
    assert one(spec, "Bonjour {name}").passed
    assert not one({"type": "contains", "values": ["CloudDesk"], "case_sensitive": True}, "clouddesk").passed


def test_contains_any_mode():
    spec = {"type": "contains", "values": ["rain", "waterproof"], "mode": "any"}
    assert one(spec, "Bring a WATERPROOF jacket").passed
    o = one(spec, "Bring sunscreen")
    assert not o.passed and "none of" in o.detail


def test_contains_single_value_shorthand():
    c = check(type="contains", value="x")
    assert c.values == ["x"]


def test_not_contains_passes_and_fails():
    spec = {"type": "not_contains", "values": ["fast", "quick"]}
    assert one(spec, "An index avoids scanning every row.").passed
    o = one(spec, "It makes lookups Quicker.")
    assert not o.passed and "quick" in o.detail
    assert one({"type": "not_contains", "values": ["Quick"], "case_sensitive": True}, "quick").passed


def test_contains_rejects_empty_values():
    with pytest.raises(ValidationError):
        check(type="contains", values=[])
    with pytest.raises(ValidationError):
        check(type="not_contains", values=[""])


# ---------------------------------------------------------------- limits


def test_word_limits():
    text = "one two  three\nfour five"
    assert count_words(text) == 5
    assert one({"type": "max_words", "limit": 5}, text).passed
    o = one({"type": "max_words", "limit": 4}, text)
    assert not o.passed and "5 words" in o.detail
    assert one({"type": "min_words", "limit": 5}, text).passed
    assert not one({"type": "min_words", "limit": 6}, text).passed


def test_character_limits_ignore_surrounding_whitespace():
    text = "  Meeting moved to Thursday  \n"
    assert len("Meeting moved to Thursday") == 25
    assert one({"type": "max_chars", "limit": 25}, text).passed
    assert not one({"type": "max_chars", "limit": 24}, text).passed
    assert one({"type": "min_chars", "limit": 25}, text).passed
    o = one({"type": "min_chars", "limit": 26}, text)
    assert not o.passed and "25 characters" in o.detail


def test_limit_must_be_non_negative():
    with pytest.raises(ValidationError):
        check(type="max_words", limit=-1)


# ---------------------------------------------------------------- required_fields


def test_required_fields_all_present():
    spec = {"type": "required_fields", "fields": ["name", "address.city", "items.*.sku", "items.0.qty"]}
    answer = '{"name": "Ann", "address": {"city": "Oslo"}, "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}]}'
    o = one(spec, answer)
    assert o.passed and o.score == 1.0
    assert "100%" in o.detail


def test_required_fields_completeness_rate():
    spec = {"type": "required_fields", "fields": ["a", "b", "c", "d"]}
    o = one(spec, '{"a": 1, "b": "", "c": null, "d": [0]}')
    assert not o.passed
    assert o.score == pytest.approx(0.5)
    assert "50%" in o.detail and "b" in o.detail and "c" in o.detail


def test_required_fields_min_rate():
    spec = {"type": "required_fields", "fields": ["a", "b", "c", "d", "e"], "min_rate": 0.8}
    assert one(spec, '{"a": 1, "b": 2, "c": 3, "d": 4}').passed
    o = one(spec, '{"a": 1, "b": 2, "c": 3}')
    assert not o.passed and o.score == pytest.approx(0.6)


def test_required_fields_wildcard_needs_every_element():
    spec = {"type": "required_fields", "fields": ["items.*.sku"]}
    assert not one(spec, '{"items": [{"sku": "A"}, {"qty": 1}]}').passed
    assert not one(spec, '{"items": []}').passed
    assert one(spec, '```json\n{"items": [{"sku": "A"}]}\n```').passed


def test_required_fields_not_json_scores_zero():
    o = one({"type": "required_fields", "fields": ["a"]}, "a = 1")
    assert not o.passed and o.score == 0.0


def test_required_fields_bad_path_rejected():
    with pytest.raises(ValidationError):
        check(type="required_fields", fields=["a..b"])


# ---------------------------------------------------------------- shared behaviour


def test_unknown_type_rejected():
    with pytest.raises(ValidationError) as err:
        check(type="spelling")
    assert "spelling" in str(err.value)


def test_every_type_has_a_runner_and_outcome_fields(tmp_path):
    executed = {"code_tests": {"tests": "assert x == 1"}, "python": {"function": "my_checks:ok"}}
    specs = {
        "valid_json": {}, "json_schema": {"schema": {"type": "object"}}, "regex": {"pattern": "x"},
        "contains": {"values": ["x"]}, "not_contains": {"values": ["y"]}, "max_words": {"limit": 3},
        "min_words": {"limit": 1}, "max_chars": {"limit": 10}, "min_chars": {"limit": 1},
        "required_fields": {"fields": ["x"]},
        "tool_called": {"tool": "t"}, "tool_not_called": {"tool": "u"}, "max_steps": {"limit": 2},
        "tool_args_valid": {}, "structured_output": {},
    }
    from core.answering.checks import GRADED_CHECK_TYPES

    # a check a model grades has its own runner (`core.answering.rubric`, tests/test_rubric.py)
    assert set(specs) | set(executed) == set(CHECK_TYPES) - GRADED_CHECK_TYPES
    from core.answering.checks import AnswerFacts
    from core.answering.tools import StructuredOutput, ToolScript
    from store.records import AnswerTrace, TraceCall, TraceStep

    facts = AnswerFacts(
        trace=AnswerTrace(steps=[TraceStep(calls=[TraceCall(name="t", arguments={"x": 1}, result=1, rule="default")]),
                                 TraceStep(text='{"x": 1}')]),
        script=ToolScript(tools=[{"name": "t", "parameters": {"type": "object"}}]),
        structured=StructuredOutput(schema={"type": "object"}))
    outcomes = run_checks([check(type=t, name=f"my {t}", **s) for t, s in specs.items()], '{"x": 1}', facts)
    assert [o.type for o in outcomes] == list(specs)
    assert all(o.name == f"my {o.type}" for o in outcomes)
    assert all(o.passed and o.score == 1.0 for o in outcomes)
    # the executed ones run code: the answer's, and a team's module beside the set
    (tmp_path / "my_checks.py").write_text("def ok(answer, case, trace):\n    return 'x = 1' in answer\n")
    outcomes = run_checks([check(type=t, name=f"my {t}", **s) for t, s in executed.items()],
                          "```python\nx = 1\n```", AnswerFacts(set_dir=tmp_path))
    assert [(o.type, o.name, o.passed, o.score) for o in outcomes] == [(t, f"my {t}", True, 1.0) for t in executed]


def test_run_case_checks_uses_each_checks_turn():
    checks = [check(type="contains", values=["8.05"], turn=0), check(type="contains", values=["9.26"])]
    outcomes = run_case_checks(checks, ["5 miles is 8.05 km", "5 nautical miles is 9.26 km"])
    assert [o.passed for o in outcomes] == [True, True]
    outcomes = run_case_checks(checks, ["9.26 km", "8.05 km"])
    assert [o.passed for o in outcomes] == [False, False]


def test_run_case_checks_missing_turn_fails():
    outcomes = run_case_checks([check(type="contains", values=["x"], turn=2)], ["x"])
    assert not outcomes[0].passed and "no answer for turn 2" in outcomes[0].detail
