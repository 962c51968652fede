"""Structured output in the report: per model, how often its answers to cases
with a `response_format` were valid against their schema, how complete they
were, and how they failed, each rate with a Wilson 95% interval.

Why a module of its own: the figures come from the `structured_output`
check results (`core.answering.checks`: passed, the completeness score, the failure
modes and how the output was asked for, recorded in the result's spec), and
every renderer of the report (terminal, Markdown, HTML, the TUI) shows the
same table; this is that table, apart from the report's other sections.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from core.stats.ratings import wilson_interval


class Rate(BaseModel):
    """k of n answers, with its Wilson 95% interval."""

    count: int
    rate: float
    ci_low: float
    ci_high: float


class StructuredRow(BaseModel):
    """One model's structured answers (the latest attempt per case and repeat)."""

    model: str
    answers: int
    valid: Rate = Field(description="answers valid against their schema")
    completeness: float = Field(description="mean share of the schema's required fields present")
    failures: dict[str, Rate] = Field(default_factory=dict, description=(
        "answers with each failure mode: invalid_json, missing_field, wrong_type, other (an answer may have several)"))
    fallback: int = Field(default=0, description="answers asked with instructions because the server refused "
                          "native structured output")


def _rate(k: int, n: int) -> Rate:
    lo, hi = wilson_interval(k, n)
    return Rate(count=k, rate=k / n if n else 0.0, ci_low=lo, ci_high=hi)


def structured_rows(results: Iterable[tuple[str, dict[str, Any], bool]]) -> list[StructuredRow]:
    """The table from (model, recorded spec, passed) of each structured_output result."""
    per: dict[str, list[tuple[dict[str, Any], bool]]] = {}
    for model, spec, passed in results:
        per.setdefault(model, []).append((spec, passed))
    rows: list[StructuredRow] = []
    if not per:
        return rows
    # here, not at the top: the tools module loads the providers' stream events, which a
    # report without structured answers (most) need not pay for
    from core.answering.tools import STRUCTURED_FAILURES

    for model in sorted(per):
        items = per[model]
        n = len(items)
        scores = [float(s.get("score", 1.0 if p else 0.0)) for s, p in items]
        failures = {mode: _rate(sum(mode in (s.get("failures") or ()) for s, _ in items), n)
                    for mode in STRUCTURED_FAILURES}
        rows.append(StructuredRow(
            model=model, answers=n, valid=_rate(sum(p for _, p in items), n),
            completeness=sum(scores) / n, failures=failures,
            fallback=sum(s.get("structured") == "fallback" for s, _ in items)))
    return rows


def __getattr__(name: str) -> list[str]:
    """`HEADER`, the table's columns, built on first use (see `structured_rows`)."""
    if name == "HEADER":
        from core.answering.tools import STRUCTURED_FAILURES

        return ["model", "answers", "schema-valid (95% CI)", "completeness", *STRUCTURED_FAILURES, "fallback"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def table_rows(rows: list[StructuredRow]) -> list[list[str]]:
    """The table's cells as plain strings (each renderer escapes them for where they go)."""
    out = []
    for r in rows:
        cells = [r.model, str(r.answers),
                 f"{_pct(r.valid.rate)} ({_pct(r.valid.ci_low)}-{_pct(r.valid.ci_high)})", _pct(r.completeness)]
        from core.answering.tools import STRUCTURED_FAILURES

        cells += [f"{_pct(f.rate)} ({_pct(f.ci_low)}-{_pct(f.ci_high)})" for f in
                  (r.failures.get(m) or _rate(0, r.answers) for m in STRUCTURED_FAILURES)]
        cells.append(str(r.fallback))
        out.append(cells)
    return out
