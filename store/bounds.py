"""What a sane number in the record is, in one place: the importer refuses
anything outside these ranges, and the readers (sessions list, exports,
report) show a value already stored outside them without failing, and warn.

Times are float seconds since 1970 (UTC) between 1990 and 2200; durations
are milliseconds, finite, from 0 to about 11 days; token and character
counts are integers from 0 to 10^12; costs are finite and from 0 to 10^9.
Every number anywhere in an imported record (its params, meta, prices and
check specs too) must be finite and, if an integer, fit SQLite's 64 bits."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

TIME_MIN = 631_152_000.0        # 1990-01-01T00:00:00Z
TIME_MAX = 7_258_118_400.0      # 2200-01-01T00:00:00Z
MS_MAX = 1e9                    # ~11.6 days
COUNT_MAX = 10 ** 12
COST_MAX = 1e9
INT64_MAX = 2 ** 63 - 1

# (kind, lowest, highest, integer only) per field of each record
TIME = ("time", TIME_MIN, TIME_MAX, False)
MS = ("duration (ms)", 0, MS_MAX, False)
COUNT = ("count", 0, COUNT_MAX, True)
POSITIVE = ("count", 1, COUNT_MAX, True)
COST = ("cost", 0, COST_MAX, False)
FIELDS: dict[str, dict[str, tuple]] = {
    "session": {"created": TIME, "revealed_at": TIME},
    "contestant": {"position": COUNT},
    "turn": {"created": TIME, "position": COUNT, "follow_up_index": COUNT, "repeat_index": COUNT},
    "output": {"created": TIME, "sent_at": TIME, "ttft_ms": MS, "duration_ms": MS, "chunk_ms": MS, "connect_ms": MS,
               "chunk_chars": COUNT, "input_tokens": COUNT, "output_tokens": COUNT, "reasoning_tokens": COUNT,
               "attempt": POSITIVE, "cost": COST},
    "vote": {"created": TIME, "revealed_at": TIME, "retracted_at": TIME, "judge_cost": COST,
             "judge_input_tokens": COUNT, "judge_output_tokens": COUNT},
    "tag": {"created": TIME, "removed_at": TIME},
    "score": {"created": TIME, "value": ("score", 1, 5, True)},
    "check_result": {},
    "arena": {"tstamp": TIME},
}


def _describe(kind: str, lo: float, hi: float) -> str:
    if kind == "time":
        return "a time between 1990-01-01 and 2200-01-01 (seconds since 1970)"
    if kind == "count":
        return f"a whole number from {lo} to 10^12"
    return f"a {kind} from {lo:g} to {hi:g}"


def value_problem(value: Any, rule: tuple) -> str | None:
    """Why `value` (a number, or a list of them) breaks `rule`, else None."""
    kind, lo, hi, integer = rule
    for v in value if isinstance(value, list) else (value,):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{v!r} is not a number"
        if isinstance(v, float) and not math.isfinite(v):
            return f"{v!r} is not a finite number"
        if integer and isinstance(v, float) and not v.is_integer():
            return f"{v!r} is not {_describe(kind, lo, hi)}"
        if not lo <= v <= hi:
            return f"{v!r} is not {_describe(kind, lo, hi)}"
    return None


def _walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, value


def record_problem(table: str, data: dict, name: str | None = None) -> str | None:
    """The first out-of-range number in one record (`model_dump()` form):
    "output.ttft_ms: inf is not a finite number", else None. Fields are
    named after `name` (default: the table; "" for none)."""
    rules = FIELDS.get(table, {})
    for field, rule in rules.items():
        problem = value_problem(data.get(field), rule)
        if problem:
            return f"{_field(name, table, field)}: {problem}"
    for path, v in _walk(data, ""):
        if isinstance(v, float) and not math.isfinite(v):
            return f"{_field(name, table, path)}: {v!r} is not a finite number"
        if isinstance(v, int) and not isinstance(v, bool) and not -INT64_MAX - 1 <= v <= INT64_MAX:
            return f"{_field(name, table, path)}: {v} does not fit in 64 bits"
    return None


def _field(name: str | None, table: str, path: str) -> str:
    name = table if name is None else name
    return f"{name}.{path}" if name else path


def time_ok(ts: Any) -> bool:
    return ts is None or (isinstance(ts, (int, float)) and TIME_MIN <= ts <= TIME_MAX)


def finite_or_none(value: Any) -> Any:
    """A float that JSON can carry (NaN and infinities become None)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def sql_out_of_range(table: str, alias: str) -> str | None:
    """A SQL condition true for a row of `table` with a stored number out of
    range (NULL, i.e. not true, where every such column is NULL or in range:
    use it as a WHERE condition). One comparison per column: in SQLite's
    order every number sorts before any text or blob, so text and blobs are
    outside any numeric range too (an infinity is outside; NaN is never
    stored). Four times quicker than testing the type first, on 200k answers."""
    parts = []
    for field, (_, lo, hi, _) in FIELDS.get(table, {}).items():
        if field in ("chunk_ms", "chunk_chars"):
            continue    # packed blobs: their values are checked when read
        parts.append(f"{alias}.{field} NOT BETWEEN {lo!r} AND {hi!r}")
    return " OR ".join(parts) or None


# how a row of each table is named in a message
_ROW_NAME = {"session": "id", "contestant": "alias", "turn": "id", "output": "id", "vote": "id", "tag": "id",
             "score": "id"}


def first_bad_row(conn: Any, tables: tuple[str, ...] = tuple(_ROW_NAME)) -> str | None:
    """The first stored number out of range in these tables of the SQLite
    connection `conn`, as "vote 01J...: created: 1e+18 is not a time ...",
    or None. Reads the columns as stored (a text where a time goes is named,
    before any record is built from it)."""
    for table in tables:
        cond = sql_out_of_range(table, "s")
        if cond is None:
            continue
        fields = [f for f in FIELDS[table] if f not in ("chunk_ms", "chunk_chars")]
        row = conn.execute(f"SELECT s.{_ROW_NAME[table]}, {', '.join('s.' + f for f in fields)} FROM {table} s "
                           f"WHERE {cond} ORDER BY s.{_ROW_NAME[table]} LIMIT 1").fetchone()
        if row is None:
            continue
        for field, value in zip(fields, row[1:], strict=True):
            problem = value_problem(value, FIELDS[table][field])
            if problem:
                return f"{table} {row[0]}: {field}: {problem}"
    return None
