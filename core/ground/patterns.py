"""Patterns from outside run here, under a time limit: a set's `regex`
checks, and `pattern` / `patternProperties` in every JSON schema an answer
or a tool call is validated against (checks, tool parameters,
`response_format`).

Why: a pattern such as `^(a|a)*$` backtracks for longer than the universe
lasts on `"a" * 40 + "!"`, and `re` matches in C without ever returning to
Python, so neither Ctrl-C nor SIGTERM could end the run and the check was
never saved (a rerun hung again). The `regex` module matches the same
syntax, defuses many such patterns outright (its repeat guards), and stops
any match after `timeout` seconds of CPU time. The time is a budget shared
by every match made under one `time_limit` (one check on one answer), so a
schema that applies a slow pattern to a thousand strings still ends in one
budget; a match that runs out raises `PatternTimeout`, which the check
records as failed with the reason.

jsonschema matches with `re` in four keywords (`pattern`,
`patternProperties`, `additionalProperties` next to `patternProperties`,
and `unevaluatedProperties`, which looks at the `patternProperties` below
it). `validator_for` gives a validator class whose first three run through
here; `schema_pattern_problem` refuses a schema that would send a pattern
through the fourth, and any pattern this engine cannot compile.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import regex

#: CPU seconds all the pattern matches of one check on one answer may take together.
PATTERN_TIME_LIMIT_S = 1.0

IGNORECASE, MULTILINE, DOTALL, VERBOSE = regex.IGNORECASE, regex.MULTILINE, regex.DOTALL, regex.VERBOSE

#: Raised when a pattern does not compile (regex's error type, a ValueError's cousin).
PatternError = regex.error

#: (when the budget ends, the budget) of the `time_limit` in force, if any.
_budget: ContextVar[tuple[float, float] | None] = ContextVar("lineup_pattern_budget", default=None)


class PatternTimeout(Exception):
    """A pattern ran out of its time on a text (a catastrophic pattern, or a huge text)."""

    def __init__(self, pattern: str, limit_s: float) -> None:
        self.pattern, self.limit_s = pattern, limit_s
        shown = pattern if len(pattern) <= 60 else pattern[:60] + "…"
        super().__init__(f"the pattern {shown!r} took longer than {limit_s:g} s and was stopped "
                         "(it backtracks too much on this text)")


@contextmanager
def time_limit(seconds: float = PATTERN_TIME_LIMIT_S) -> Iterator[None]:
    """Every match inside shares `seconds` (an enclosing limit that ends sooner wins)."""
    mine = (time.monotonic() + seconds, seconds)
    outer = _budget.get()
    token = _budget.set(mine if outer is None or mine[0] < outer[0] else outer)
    try:
        yield
    finally:
        _budget.reset(token)


@lru_cache(maxsize=512)
def compile_pattern(pattern: str, flags: int = 0) -> regex.Pattern[str]:
    """The compiled pattern (cached: a set's patterns are matched on every answer)."""
    return regex.compile(pattern, flags)


def search(pattern: str, text: str, flags: int = 0) -> regex.Match[str] | None:
    """`re.search` under the time limit: the match, or None; `PatternTimeout` when it ran out."""
    compiled = compile_pattern(pattern, flags)
    budget = _budget.get()
    ends, limit = budget if budget is not None else (time.monotonic() + PATTERN_TIME_LIMIT_S, PATTERN_TIME_LIMIT_S)
    left = ends - time.monotonic()
    if left <= 0:
        raise PatternTimeout(pattern, limit)
    try:
        return compiled.search(text, timeout=left)
    except TimeoutError:
        raise PatternTimeout(pattern, limit) from None


# ---------------------------------------------------------------- JSON schema

def _pattern(validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, pattern_properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in pattern_properties.items():
        for k, v in instance.items():
            if search(patrn, k):
                yield from validator.descend(v, subschema, path=k, schema_path=patrn)


def _additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = {p for p in instance if p not in properties and not any(search(pt, p) for pt in patterns)}
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        joined = ", ".join(repr(each) for each in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(f"{joined} {verb} not match any of the regexes: "
                                  + ", ".join(repr(p) for p in sorted(patterns)))
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({joined} {verb} unexpected)")


_LIMITED = {"pattern": _pattern, "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties}


@lru_cache(maxsize=16)
def _limited_class(base: Any) -> Any:
    import jsonschema

    return jsonschema.validators.extend(base, validators=_LIMITED)


def validator_for(schema: dict[str, Any]) -> Any:
    """A validator for `schema` (its draft's, with format checks) whose patterns
    run under the time limit; validate inside `time_limit`."""
    import jsonschema

    cls = _limited_class(jsonschema.validators.validator_for(schema))
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


#: Keywords whose values are data, not schemas: a "pattern" key in them is no pattern.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def _patterns(node: Any, where: str, found: list[tuple[str, str]], flags: dict[str, bool]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{where}/{key}" if where else str(key)
            if key in _DATA_KEYWORDS:
                continue
            if key == "pattern" and isinstance(value, str):
                found.append((here, value))
            elif key == "patternProperties" and isinstance(value, dict):
                flags["patternProperties"] = True
                found.extend((f"{here}/{p}", p) for p in value)
            elif key == "unevaluatedProperties":
                flags["unevaluatedProperties"] = True
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():   # property names are names, their values schemas
                    _patterns(sub, f"{here}/{name}", found, flags)
            else:
                _patterns(value, here, found, flags)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            _patterns(item, f"{where}/{i}" if where else str(i), found, flags)


def schema_pattern_problem(schema: Any) -> str | None:
    """Why the patterns of a schema cannot run here, or None: one that does
    not compile, or `patternProperties` where `unevaluatedProperties` would
    match them with `re`, outside the time limit."""
    found: list[tuple[str, str]] = []
    flags: dict[str, bool] = {}
    _patterns(schema, "", found, flags)
    for where, patrn in found:
        try:
            compile_pattern(patrn)
        except PatternError as exc:
            return f"invalid JSON schema at {where}: the pattern {patrn!r} does not compile: {exc}"
    if flags.get("patternProperties") and flags.get("unevaluatedProperties"):
        return ("unsupported JSON schema: unevaluatedProperties together with patternProperties "
                "(their patterns could not be run under lineup's time limit); use additionalProperties")
    return None
