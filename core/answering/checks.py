"""Automated checks on an answer: the spec models (validated when a sample set
loads, so a bad regex or schema is reported with its file and line) and the
functions that run them. Every outcome carries `passed` and a numeric `score`
(1/0, or the completeness rate for `required_fields`) so the report can
aggregate them.

Answers are untrusted text: checks only read them; `detail` quotes at most a
short, escaped excerpt.

Some checks read more than the text (`AnswerFacts`): the tool checks read the
answer's trace (`tool_called`, `tool_not_called`, `max_steps`,
`tool_args_valid`) and `structured_output`, added to every case with a
`response_format`, reads its schema; its outcome also records the failure
modes found (`extra`), which the report counts.

Two checks run a process (`EXECUTED_CHECK_TYPES`): `code_tests` runs the
answer's code against the case's tests (`core.answering.code_checks`) and
`python` calls a team's own function (`core.answering.custom_checks`); their
outcome records its `status`. In an event loop they are awaited
(`run_case_check_async`), so a cancel kills the process.

Why this file is past 600 lines: every check is a spec model (validated when
a set loads) and a runner next to it, and the loader, the runner, re-runs
and the report all read the one `Check` union and `CHECK_TYPES` defined
here; what stands apart (the tool loop, the structured-output table) has its
own module (`core.answering.tools`, `core.report.structured`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from core.answering import code_checks, custom_checks
from core.ground import patterns
from core.ground.patterns import PatternError, PatternTimeout, compile_pattern
from core.ground.text import escape_controls
from core.answering.tools import STRUCTURED_FAILURES, StructuredOutput, ToolScript, arguments_match, compact, schema_problem
from store.records import AnswerTrace, TraceCall

_REGEX_FLAGS = {"i": patterns.IGNORECASE, "m": patterns.MULTILINE, "s": patterns.DOTALL, "x": patterns.VERBOSE}


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str | None = Field(default=None, description="label shown in reports; defaults to the type")
    turn: int | None = Field(
        default=None,
        description="which answer of a multi-turn case to check (0 = answer to the prompt, "
        "-1 = last); None means the last answer",
    )

    @property
    def label(self) -> str:
        return self.name or self.type  # type: ignore[attr-defined]


class ValidJsonCheck(_Check):
    """The answer is JSON: the whole text, or one fenced ```json block unless `strict`."""

    type: Literal["valid_json"] = "valid_json"
    strict: bool = Field(default=False, description="the whole answer must be JSON (no fence, no prose)")


class JsonSchemaCheck(_Check):
    """The answer's JSON (see `extract_json`) validates against `schema`."""

    type: Literal["json_schema"] = "json_schema"
    schema_: dict[str, Any] = Field(alias="schema")
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("schema_")
    @classmethod
    def _schema_is_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        problem = schema_problem(value)
        if problem:
            raise ValueError(problem)
        return value


class RegexCheck(_Check):
    """`re.search(pattern)` finds a match (or, with `negate`, does not), under
    the time limit of `core.ground.patterns` (the `regex` module's syntax, which is `re`'s)."""

    type: Literal["regex"] = "regex"
    flags: str = Field(default="", description="any of i (ignore case), m (multiline), s (dot matches newline), x")
    pattern: str
    negate: bool = False

    @field_validator("flags")
    @classmethod
    def _flags_known(cls, value: str) -> str:
        bad = sorted(set(value) - set(_REGEX_FLAGS))
        if bad:
            raise ValueError(f"unknown regex flag(s) {''.join(bad)!r}; use i, m, s, x")
        return value

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str, info: ValidationInfo) -> str:
        try:
            compile_pattern(value, _flags(info.data.get("flags", "")))
        except PatternError as exc:
            raise ValueError(f"invalid regex {value!r}: {exc}") from None
        return value


def _flags(letters: str) -> int:
    flags = 0
    for ch in letters:
        flags |= _REGEX_FLAGS[ch]
    return flags


class _TextListCheck(_Check):
    values: list[str] = Field(min_length=1)
    case_sensitive: bool = False

    @model_validator(mode="before")
    @classmethod
    def _single_value(cls, data: Any) -> Any:
        # `"value": "x"` is accepted as shorthand for `"values": ["x"]`.
        if isinstance(data, dict) and "value" in data and "values" not in data:
            data = dict(data)
            data["values"] = [data.pop("value")]
        return data

    @field_validator("values")
    @classmethod
    def _non_empty(cls, values: list[str]) -> list[str]:
        if any(v == "" for v in values):
            raise ValueError("empty string in values")
        return values


class ContainsCheck(_TextListCheck):
    """The answer contains all (`mode="all"`) or any of `values`."""

    type: Literal["contains"] = "contains"
    mode: Literal["all", "any"] = "all"


class NotContainsCheck(_TextListCheck):
    """The answer contains none of `values`."""

    type: Literal["not_contains"] = "not_contains"


class _LimitCheck(_Check):
    limit: int = Field(ge=0)


class MaxWordsCheck(_LimitCheck):
    type: Literal["max_words"] = "max_words"


class MinWordsCheck(_LimitCheck):
    type: Literal["min_words"] = "min_words"


class MaxCharsCheck(_LimitCheck):
    type: Literal["max_chars"] = "max_chars"


class MinCharsCheck(_LimitCheck):
    type: Literal["min_chars"] = "min_chars"


class RequiredFieldsCheck(_Check):
    """Fields present (not null, not "") in the answer's JSON; score = share present.

    A field is a dotted path (`address.city`, `items.0.sku`); `*` matches every
    element of a list or value of an object, and the path is then present only
    if it is present in each of them (an empty list counts as missing).
    """

    type: Literal["required_fields"] = "required_fields"
    fields: list[str] = Field(min_length=1)
    min_rate: float = Field(default=1.0, ge=0.0, le=1.0, description="completeness needed to pass")

    @field_validator("fields")
    @classmethod
    def _paths_ok(cls, fields: list[str]) -> list[str]:
        for f in fields:
            if not f or any(part == "" for part in f.split(".")):
                raise ValueError(f"bad field path {f!r}")
        return fields


def _valid_schema(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None:
        problem = schema_problem(value)
        if problem:
            raise ValueError(problem)
    return value


class ToolCalledCheck(_Check):
    """Some call (at least `min_times` calls) to `tool` whose arguments equal
    `arguments` (each one given) and validate against `arguments_schema`."""

    type: Literal["tool_called"] = "tool_called"
    tool: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None
    arguments_schema: dict[str, Any] | None = None
    min_times: int = Field(default=1, ge=1)

    @field_validator("arguments_schema")
    @classmethod
    def _schema_ok(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return _valid_schema(value)


class ToolNotCalledCheck(_Check):
    """No call to `tool`; without `tool`, no call at all (the model answered without tools)."""

    type: Literal["tool_not_called"] = "tool_not_called"
    tool: str | None = None


class MaxStepsCheck(_Check):
    """The answer took at most `limit` requests (steps of its tool loop)."""

    type: Literal["max_steps"] = "max_steps"
    limit: int = Field(ge=1)


class ToolArgsValidCheck(_Check):
    """Every call names a declared tool and its arguments validate against
    that tool's parameters schema (an answer without calls passes)."""

    type: Literal["tool_args_valid"] = "tool_args_valid"


class StructuredOutputCheck(_Check):
    """The answer is JSON valid against the case's `response_format` schema.
    Score: field completeness (the share of the schema's required fields
    present, nested ones too; all its properties when none is required).
    Its outcome records the failure modes (`invalid_json`, `missing_field`,
    `wrong_type`, `other`) and how the output was asked for. Added to every
    case with a `response_format`."""

    type: Literal["structured_output"] = "structured_output"


class CodeTestsCheck(_Check):
    """The answer's code passes `tests`: its last fenced block in `language`
    (else its last unlabelled block) is saved as module `entry` and the tests
    run after it, in a separate process with a time and a memory limit, an
    empty environment, a scratch folder and no network
    (`core.answering.code_checks`, where each language is a table entry)."""

    type: Literal["code_tests"] = "code_tests"
    language: str = Field(default="python", description="a key of core.answering.code_checks.LANGUAGES")
    tests: str = Field(min_length=1, max_length=100_000, description="run after the code, with its names in scope")
    entry: str | None = Field(default=None, description="the module name the code is saved as (python: solution)")
    timeout_s: float = Field(default=code_checks.DEFAULT_TIMEOUT_S, gt=0, le=code_checks.MAX_TIMEOUT_S)
    memory_mb: int = Field(default=code_checks.DEFAULT_MEMORY_MB, ge=code_checks.MIN_MEMORY_MB,
                           le=code_checks.MAX_MEMORY_MB)

    @model_validator(mode="after")
    def _runnable(self) -> "CodeTestsCheck":
        lang = code_checks.LANGUAGES.get(self.language)
        if lang is None:
            raise ValueError(f"language {self.language!r} cannot be run; one of {', '.join(code_checks.LANGUAGES)}")
        problem = lang.tests_problem(self.tests) or lang.entry_problem(self.entry_name)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def entry_name(self) -> str:
        return self.entry or code_checks.LANGUAGES[self.language].default_entry

    def runs(self) -> code_checks.CodeSpec:
        return code_checks.CodeSpec(language=self.language, tests=self.tests, entry=self.entry_name,
                                     timeout_s=self.timeout_s, memory_mb=self.memory_mb)


class PythonCheck(_Check):
    """A team's own function decides (`core.answering.custom_checks`):
    `MODULE:FUNCTION` beside the set file, or an entry point of the group
    `lineup.checks`; called with the answer, the case and the trace in a
    separate process under `timeout_s`. Whether it can be found is checked
    when the set loads (`core.answering.sampleset`)."""

    type: Literal["python"] = "python"
    function: str = Field(min_length=1, max_length=300)
    timeout_s: float = Field(default=code_checks.DEFAULT_TIMEOUT_S, gt=0, le=code_checks.MAX_TIMEOUT_S)

    @field_validator("function")
    @classmethod
    def _names_a_function(cls, value: str) -> str:
        problem = custom_checks.parse_name(value)
        if problem:
            raise ValueError(problem)
        return value


class RubricCheck(_Check):
    """A model grades the answer against `rubric` (and the case's `reference`
    when it has one), blind: `core.answering.rubric` asks and reads it. `judge`
    names the grader (default: the run's `--grader`, else the set's header);
    `scale` is pass/fail, or 1-5 where `pass_at` and above passes. With
    `dimension` (one the set's header declares; scale 1-5), the grade is
    also recorded as the grader's score on that dimension (a judge's score)."""

    type: Literal["rubric"] = "rubric"
    rubric: str = Field(min_length=1, max_length=20_000)
    judge: str | None = Field(default=None, min_length=1, max_length=200, description="the grader's model alias")
    scale: Literal["pass_fail", "1-5"] = "pass_fail"
    pass_at: int = Field(default=4, ge=1, le=5, description="with scale 1-5: the lowest grade that passes")
    dimension: str | None = Field(default=None, min_length=1, max_length=40,
                                  description="a dimension of the set's header the 1-5 grade scores")

    @model_validator(mode="after")
    def _dimension_is_scored(self) -> "RubricCheck":
        if self.dimension is not None and self.scale != "1-5":
            raise ValueError('a rubric that scores a dimension has scale "1-5"')
        return self

    @field_validator("rubric")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the rubric is empty")
        return value


Check = Annotated[
    Union[
        ValidJsonCheck, JsonSchemaCheck, RegexCheck, ContainsCheck, NotContainsCheck,
        MaxWordsCheck, MinWordsCheck, MaxCharsCheck, MinCharsCheck, RequiredFieldsCheck,
        ToolCalledCheck, ToolNotCalledCheck, MaxStepsCheck, ToolArgsValidCheck, StructuredOutputCheck,
        CodeTestsCheck, PythonCheck, RubricCheck,
    ],
    Field(discriminator="type"),
]

CHECK_TYPES: tuple[str, ...] = (
    "valid_json", "json_schema", "regex", "contains", "not_contains",
    "max_words", "min_words", "max_chars", "min_chars", "required_fields",
    "tool_called", "tool_not_called", "max_steps", "tool_args_valid", "structured_output",
    "code_tests", "python", "rubric",
)
#: Checks that read an answer's tool trace (a case must declare tools to use them).
TOOL_CHECK_TYPES = frozenset({"tool_called", "tool_not_called", "max_steps", "tool_args_valid"})
#: Checks that run a process (seconds, not microseconds): in an event loop they
#: are awaited (`run_case_check_async`), so a cancel kills the process.
EXECUTED_CHECK_TYPES = frozenset({"code_tests", "python"})
#: Checks a model grades (asynchronously, `core.answering.rubric`), not `run_check`.
GRADED_CHECK_TYPES = frozenset({"rubric"})


@dataclass(frozen=True)
class AnswerFacts:
    """What some checks read besides an answer's text: its trace, the
    case's tools and its structured-output request; a custom check also
    the case (its JSON form) and the folder of the set file its module is beside."""

    trace: AnswerTrace | None = None
    script: ToolScript | None = None
    structured: StructuredOutput | None = None
    case: dict[str, Any] | None = None
    set_dir: Path | None = None

    @property
    def calls(self) -> list[TraceCall]:
        return self.trace.calls if self.trace is not None else []

    @property
    def steps(self) -> int:
        return len(self.trace.steps) if self.trace is not None else 1


class CheckOutcome(BaseModel):
    """One check run on one answer: what it was, whether it passed, why."""

    model_config = ConfigDict(frozen=True)
    type: str
    name: str
    spec: dict[str, Any]
    passed: bool
    score: float = Field(ge=0.0, le=1.0)
    detail: str
    extra: dict[str, Any] = Field(default_factory=dict, description="figures recorded with the result "
                                  "(structured_output: failures, structured)")


# ---------------------------------------------------------------- JSON extraction

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)


def extract_json(text: str, *, strict: bool = False) -> tuple[Any, str]:
    """(value, where) for the JSON in an answer, else raise ValueError with why.

    Tried in order: the whole answer; then (unless `strict`) fenced code blocks,
    those labelled json first. Prose around a fence is allowed; prose around
    bare JSON is not (that is a format error worth seeing).
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("empty answer")
    try:
        return json.loads(stripped), "whole answer"
    except json.JSONDecodeError as exc:
        whole_error = exc
    if strict:
        raise ValueError(f"not JSON: {_short_json_error(whole_error)}")
    blocks = fenced_blocks(text)
    ordered = [b for b in blocks if b[0] in ("json", "jsonc", "json5")] + [b for b in blocks if b[0] in ("",)]
    first_error: str | None = None
    for label, body in ordered:
        try:
            return json.loads(body), f"```{label} block"
        except json.JSONDecodeError as exc:
            first_error = first_error or f"```{label} block is not JSON: {_short_json_error(exc)}"
    if first_error:
        raise ValueError(first_error)
    raise ValueError(f"not JSON and no ```json block: {_short_json_error(whole_error)}")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """An answer's fenced code blocks, in order: (label in lower case, body)."""
    return [(m.group(2).lower(), m.group(3)) for m in _FENCE.finditer(text)]


def _short_json_error(exc: json.JSONDecodeError) -> str:
    return f"{exc.msg} (line {exc.lineno} column {exc.colno})"


# ---------------------------------------------------------------- running checks

_WORD = re.compile(r"\S+")


def count_words(text: str) -> int:
    """Whitespace-separated words (what a person asked for "N words" would count)."""
    return len(_WORD.findall(text))


def _excerpt(text: str, limit: int = 60) -> str:
    """A short excerpt in quotes, its control characters escaped."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return '"' + escape_controls(cut, keep_newlines=False) + '"'


def run_check(check: Any, answer: str, facts: AnswerFacts | None = None) -> CheckOutcome:
    """Run one check (a spec model from this module) on an answer (and the
    facts some checks read besides its text). A check that cannot run on
    this answer (JSON nested beyond the parser's depth, any other fault)
    fails with the reason: one answer never stops a run. Its patterns (regex,
    a schema's `pattern`) share one time budget (`core.ground.patterns`); one that
    runs out fails the check, the reason in its detail. An executed check
    (`EXECUTED_CHECK_TYPES`) blocks while its process runs: in an event
    loop, `run_case_check_async`."""
    extra: dict[str, Any] = {}
    try:
        with patterns.time_limit():
            if check.type in _FACT_RUNNERS:
                passed, score, detail, extra = _FACT_RUNNERS[check.type](check, answer, facts or AnswerFacts())
            else:
                passed, score, detail = _RUNNERS[check.type](check, answer)
    except PatternTimeout as exc:
        passed, score, detail = False, 0.0, f"timed out: {exc}"
    except RecursionError:
        passed, score, detail = False, 0.0, "nested too deeply to check (beyond the JSON parser's depth limit)"
    except Exception as exc:
        passed, score, detail = False, 0.0, f"the check could not run: {type(exc).__name__}: {exc}"[:300]
    return _outcome(check, passed, score, detail, extra)


def _outcome(check: Any, passed: bool, score: float, detail: str, extra: dict[str, Any]) -> CheckOutcome:
    return CheckOutcome(
        type=check.type,
        name=check.label,
        spec=check.model_dump(by_alias=True, exclude_none=True),
        passed=passed,
        score=score,
        detail=detail,
        extra=extra,
    )


def run_checks(case_checks: Sequence[Any], answer_text: str, facts: AnswerFacts | None = None) -> list[CheckOutcome]:
    """Every check on the same answer, in order."""
    return [run_check(c, answer_text, facts) for c in case_checks]


def run_case_checks(case_checks: Sequence[Any], answers: Sequence[str],
                    facts: Sequence[AnswerFacts] | None = None) -> list[CheckOutcome]:
    """Checks of a (multi-turn) case: each on the answer its `turn` names
    (default: the last), with that answer's facts (`run_case_check`)."""
    return [run_case_check(check, answers, facts) for check in case_checks]


def run_case_check(check: Any, answers: Sequence[str], facts: Sequence[AnswerFacts] | None = None) -> CheckOutcome:
    """One check of a (multi-turn) case on the answer its `turn` names. A
    check whose turn has no answer fails with a detail."""
    target = _target(check, answers, facts)
    if isinstance(target, CheckOutcome):
        return target
    return run_check(check, *target)


async def run_case_check_async(check: Any, answers: Sequence[str],
                               facts: Sequence[AnswerFacts] | None = None) -> CheckOutcome:
    """`run_case_check` for a caller in an event loop: an executed check's
    process is awaited (the loop goes on; a cancel, Ctrl-C, kills the process
    and is re-raised); the other checks run at once, as they are quick."""
    target = _target(check, answers, facts)
    if isinstance(target, CheckOutcome):
        return target
    answer, fact = target
    runner = _ASYNC_RUNNERS.get(check.type)
    if runner is None:
        return run_check(check, answer, fact)
    try:
        passed, score, detail, extra = await runner(check, answer, fact or AnswerFacts())
    except Exception as exc:
        passed, score, detail, extra = False, 0.0, f"the check could not run: {type(exc).__name__}: {exc}"[:300], {}
    return _outcome(check, passed, score, detail, extra)


def _target(check: Any, answers: Sequence[str],
            facts: Sequence[AnswerFacts] | None) -> tuple[str, AnswerFacts | None] | CheckOutcome:
    turn = -1 if check.turn is None else check.turn
    try:
        answer = answers[turn]
    except IndexError:
        return CheckOutcome(
            type=check.type, name=check.label, spec=check.model_dump(by_alias=True, exclude_none=True),
            passed=False, score=0.0, detail=f"no answer for turn {turn} ({len(answers)} answer(s))",
        )
    return answer, facts[turn] if facts is not None else None


def _valid_json(check: ValidJsonCheck, answer: str) -> tuple[bool, float, str]:
    try:
        value, where = extract_json(answer, strict=check.strict)
    except ValueError as exc:
        return False, 0.0, str(exc)
    return True, 1.0, f"valid JSON ({where}, {type(value).__name__})"


def _json_schema(check: JsonSchemaCheck, answer: str) -> tuple[bool, float, str]:
    try:
        value, where = extract_json(answer)
    except ValueError as exc:
        return False, 0.0, str(exc)
    error = _first_error(check.schema_, value)
    if error is None:
        return True, 1.0, f"matches the schema ({where})"
    return False, 0.0, error


def _regex(check: RegexCheck, answer: str) -> tuple[bool, float, str]:
    match = patterns.search(check.pattern, answer, _flags(check.flags))
    if check.negate:
        if match:
            return False, 0.0, f"forbidden match {_excerpt(match.group(0))}"
        return True, 1.0, "no match (as required)"
    if match:
        return True, 1.0, f"matched {_excerpt(match.group(0))}"
    return False, 0.0, f"no match for {check.pattern!r}"


def _find(check: _TextListCheck, answer: str) -> list[bool]:
    if check.case_sensitive:
        return [v in answer for v in check.values]
    folded = answer.casefold()
    return [v.casefold() in folded for v in check.values]


def _contains(check: ContainsCheck, answer: str) -> tuple[bool, float, str]:
    found = _find(check, answer)
    missing = [v for v, f in zip(check.values, found, strict=True) if not f]
    passed = any(found) if check.mode == "any" else not missing
    if passed:
        return True, 1.0, f"found {sum(found)} of {len(found)}"
    if check.mode == "any":
        return False, 0.0, f"none of {check.values!r} found"
    return False, 0.0, f"missing {missing!r}"


def _not_contains(check: NotContainsCheck, answer: str) -> tuple[bool, float, str]:
    present = [v for v, f in zip(check.values, _find(check, answer), strict=True) if f]
    if present:
        return False, 0.0, f"contains {present!r}"
    return True, 1.0, "none present"


def _limit(measure: str, upper: bool):
    def run(check: _LimitCheck, answer: str) -> tuple[bool, float, str]:
        n = count_words(answer) if measure == "words" else len(answer.strip())
        ok = n <= check.limit if upper else n >= check.limit
        sign = "≤" if upper else "≥"
        return ok, 1.0 if ok else 0.0, f"{n} {measure} ({'ok' if ok else 'needs'} {sign} {check.limit})"

    return run


_MISSING = object()


def _lookup(value: Any, parts: list[str]) -> bool:
    """Whether the dotted path is present (not None, not "", not an empty list)."""
    if not parts:
        return value is not None and value != "" and value != [] and value != {}
    head, rest = parts[0], parts[1:]
    if head == "*":
        items = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else None
        if not items:
            return False
        return all(_lookup(item, rest) for item in items)
    if isinstance(value, dict):
        child = value.get(head, _MISSING)
    elif isinstance(value, list) and head.lstrip("-").isdigit():
        idx = int(head)
        child = value[idx] if -len(value) <= idx < len(value) else _MISSING
    else:
        child = _MISSING
    return child is not _MISSING and _lookup(child, rest)


def _required_fields(check: RequiredFieldsCheck, answer: str) -> tuple[bool, float, str]:
    try:
        value, _where = extract_json(answer)
    except ValueError as exc:
        return False, 0.0, str(exc)
    present = [f for f in check.fields if _lookup(value, f.split("."))]
    missing = [f for f in check.fields if f not in present]
    rate = len(present) / len(check.fields)
    passed = rate >= check.min_rate
    detail = f"completeness {rate:.0%} ({len(present)}/{len(check.fields)})"
    if missing:
        shown = missing[:8]
        detail += f"; missing {', '.join(shown)}" + (" …" if len(missing) > len(shown) else "")
    return passed, rate, detail


# ---------------------------------------------------------------- checks on traces

FactResult = tuple[bool, float, str, dict[str, Any]]


def _validator(schema: dict[str, Any]) -> Any:
    return patterns.validator_for(schema)


def _first_error(schema: dict[str, Any], value: Any) -> str | None:
    errors = sorted(_validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    at = "/".join(str(p) for p in first.absolute_path) or "(root)"
    message = first.message if len(first.message) <= 160 else first.message[:160] + "…"
    return f"at {at}: {message}" + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "")


def _shown_call(call: TraceCall) -> str:
    return escape_controls(f"{call.name}({compact(call.arguments, 80)})", keep_newlines=False)


def _tool_called(check: ToolCalledCheck, _answer: str, facts: AnswerFacts) -> FactResult:
    named = [c for c in facts.calls if c.name == check.tool]
    if not named:
        made = ", ".join(sorted({c.name for c in facts.calls})) or "none"
        return False, 0.0, f"no call to {check.tool!r} (calls made: {escape_controls(made, keep_newlines=False)})", {}
    matching = []
    why = None
    for call in named:
        if check.arguments is not None and not arguments_match(check.arguments, call.arguments):
            why = why or f"arguments differ: {_shown_call(call)}"
            continue
        if check.arguments_schema is not None:
            error = _first_error(check.arguments_schema, call.arguments)
            if error:
                why = why or f"arguments do not match the schema {error}"
                continue
        matching.append(call)
    if len(matching) >= check.min_times:
        return True, 1.0, f"{len(matching)} matching call(s) to {check.tool!r}", {}
    if matching:
        return False, 0.0, f"{len(matching)} matching call(s) to {check.tool!r}, {check.min_times} needed", {}
    return False, 0.0, f"{len(named)} call(s) to {check.tool!r}, none matching ({why})", {}


def _tool_not_called(check: ToolNotCalledCheck, _answer: str, facts: AnswerFacts) -> FactResult:
    calls = [c for c in facts.calls if check.tool is None or c.name == check.tool]
    if not calls:
        return True, 1.0, "no call to " + (repr(check.tool) if check.tool else "any tool"), {}
    return False, 0.0, f"{len(calls)} call(s), first {_shown_call(calls[0])}", {}


def _max_steps(check: MaxStepsCheck, _answer: str, facts: AnswerFacts) -> FactResult:
    n = facts.steps
    ok = n <= check.limit
    stopped = " (stopped at the step limit)" if facts.trace is not None and facts.trace.stopped == "step_limit" else ""
    return ok, 1.0 if ok else 0.0, f"{n} step(s) ({'ok' if ok else 'needs'} ≤ {check.limit}){stopped}", {}


def _tool_args_valid(_check: ToolArgsValidCheck, _answer: str, facts: AnswerFacts) -> FactResult:
    calls = facts.calls
    for call in calls:
        schema = facts.script.schema_of(call.name) if facts.script is not None else None
        if schema is None:
            return False, 0.0, f"call to an undeclared tool: {_shown_call(call)}", {}
        error = _first_error(schema, call.arguments)
        if error:
            return False, 0.0, f"{escape_controls(call.name, keep_newlines=False)}: {error}", {}
    return True, 1.0, f"{len(calls)} call(s), arguments valid" if calls else "no calls", {}


def schema_fields(schema: Any, prefix: str = "") -> list[str]:
    """The field paths a structured answer should fill: the required
    properties of each object (all of them where none is required), into
    nested objects and arrays of objects (`items.*.sku`)."""
    if not isinstance(schema, dict):
        return []
    out: list[str] = []
    props = schema.get("properties")
    if isinstance(props, dict) and props:
        required = schema.get("required")
        names = [n for n in required if n in props] if isinstance(required, list) and required else list(props)
        for name in names:
            path = f"{prefix}{name}"
            out.append(path)
            out += schema_fields(props[name], path + ".")
    items = schema.get("items")
    if isinstance(items, dict) and prefix:
        out += schema_fields(items, prefix + "*.")
    return out


def structured_failures(schema: dict[str, Any], value: Any) -> list[str]:
    """The failure modes of a parsed answer against its schema (empty: valid):
    `missing_field` (a required property absent), `wrong_type` (a value of the
    wrong type), `other` (anything else: enum, pattern, range, extra fields)."""
    found = set()
    for error in _validator(schema).iter_errors(value):
        causes = error.context or [error]
        for cause in causes:
            found.add({"required": "missing_field", "type": "wrong_type"}.get(str(cause.validator), "other"))
    return [f for f in STRUCTURED_FAILURES if f in found]


def _structured_output(_check: StructuredOutputCheck, answer: str, facts: AnswerFacts) -> FactResult:
    fmt = facts.structured
    mode = facts.trace.structured if facts.trace is not None else None
    extra: dict[str, Any] = {"structured": mode}
    if fmt is None:
        return False, 0.0, "the case has no response_format", {**extra, "failures": ["other"]}
    schema = fmt.schema_
    try:
        value, _where = extract_json(answer)
    except ValueError as exc:
        return False, 0.0, str(exc), {**extra, "failures": ["invalid_json"]}
    fields = schema_fields(schema)
    present = [f for f in fields if _lookup(value, f.split("."))]
    rate = len(present) / len(fields) if fields else 1.0
    failures = structured_failures(schema, value)
    extra["failures"] = failures
    completeness = f"completeness {rate:.0%} ({len(present)}/{len(fields)})" if fields else "no fields"
    if not failures:
        return True, rate, f"valid against the schema; {completeness}", extra
    return False, rate, f"{', '.join(failures)} ({_first_error(schema, value)}); {completeness}", extra


# ---------------------------------------------------------------- executed checks


def _code_result(result: code_checks.CodeResult) -> FactResult:
    extra = {"status": result.status, "network_isolated": result.network_isolated}
    return result.passed, 1.0 if result.passed else 0.0, result.detail, extra


def _code_tests(check: CodeTestsCheck, answer: str, _facts: AnswerFacts) -> FactResult:
    code = code_checks.find_code(fenced_blocks(answer), check.language)
    return _code_result(code_checks.run_tests(check.runs(), code))


async def _code_tests_async(check: CodeTestsCheck, answer: str, _facts: AnswerFacts) -> FactResult:
    code = code_checks.find_code(fenced_blocks(answer), check.language)
    return _code_result(await code_checks.run_tests_async(check.runs(), code))


def _custom_args(facts: AnswerFacts) -> tuple[Path | None, dict[str, Any] | None, dict[str, Any] | None]:
    trace = facts.trace.model_dump(mode="json") if facts.trace is not None else None
    return facts.set_dir, facts.case, trace


def _custom_result(result: custom_checks.CustomResult) -> FactResult:
    return result.passed, result.score, result.detail, {"status": result.status}


def _python(check: PythonCheck, answer: str, facts: AnswerFacts) -> FactResult:
    set_dir, case, trace = _custom_args(facts)
    return _custom_result(custom_checks.run_custom(check.function, set_dir, answer, case, trace,
                                                   timeout_s=check.timeout_s))


async def _python_async(check: PythonCheck, answer: str, facts: AnswerFacts) -> FactResult:
    set_dir, case, trace = _custom_args(facts)
    return _custom_result(await custom_checks.run_custom_async(check.function, set_dir, answer, case, trace,
                                                               timeout_s=check.timeout_s))


_ASYNC_RUNNERS: dict[str, Any] = {
    "code_tests": _code_tests_async,
    "python": _python_async,
}


_FACT_RUNNERS: dict[str, Any] = {
    "code_tests": _code_tests,
    "python": _python,
    "tool_called": _tool_called,
    "tool_not_called": _tool_not_called,
    "max_steps": _max_steps,
    "tool_args_valid": _tool_args_valid,
    "structured_output": _structured_output,
}


_RUNNERS = {
    "valid_json": _valid_json,
    "json_schema": _json_schema,
    "regex": _regex,
    "contains": _contains,
    "not_contains": _not_contains,
    "max_words": _limit("words", True),
    "min_words": _limit("words", False),
    "max_chars": _limit("characters", True),
    "min_chars": _limit("characters", False),
    "required_fields": _required_fields,
}
