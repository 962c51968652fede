"""Sampling parameters typed as text: `lineup chat -p KEY=VALUE` and the
settings dialog. Each value is read as TOML's simple values are and the
whole checked as a config's `params` (`SamplingParams`); a bad key is named,
its value never repeated (a key typed in the wrong place could be among them)."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from core.answering.config import validation_problems
from core.ground.credentials import looks_like_key
from core.ground.errors import UsageError
from providers.events import PARAM_NAMES, SamplingParams


class ParamsError(UsageError):
    """Parameters typed as text (`-p KEY=VALUE`, the settings panel) that
    cannot be used: `problems` are (key, what is wrong); values are never
    repeated (a key typed in the wrong place could be among them)."""

    def __init__(self, problems: list[tuple[str, str]], where: str = "-p") -> None:
        self.problems = problems
        super().__init__("; ".join(f"{where} {key}: {what}" if key else f"{where}: {what}" for key, what in problems))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON has")


def param_value(key: str, raw: str) -> Any:
    """A parameter typed as text, read as TOML's simple values are: JSON
    when it parses (numbers, true/false, arrays, objects; no NaN or
    infinity), else the text itself; `stop` takes one string or an array."""
    text = raw.strip()
    try:
        value: Any = json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        value = text
    if key == "stop" and isinstance(value, str):
        value = [value]
    return value


def params_from_text(values: Mapping[str, str], where: str = "-p") -> SamplingParams:
    """Sampling parameters from text: KEY -> VALUE, `extra_body.NAME` for one
    field of the extra body, blank values left out. Checked as a config's
    `params` are (`SamplingParams`); `ParamsError` names each bad key."""
    data: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for key, raw in values.items():
        key = key.strip()
        if not raw.strip():
            continue
        if key.startswith("extra_body."):
            name = key.removeprefix("extra_body.")
            if not name:
                problems.append((key, "name the field: extra_body.NAME=VALUE"))
                continue
            body = data.setdefault("extra_body", {})
            if isinstance(body, dict):
                body[name] = param_value(key, raw)
            continue
        if key not in PARAM_NAMES:
            close = difflib.get_close_matches(key, PARAM_NAMES, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,39}", key) or looks_like_key(key):
                key, hint = "(a name not shown: it looks like a key)", ""
            problems.append((key, f"unknown parameter (one of {', '.join(PARAM_NAMES)}, or extra_body.NAME){hint}"))
            continue
        value = param_value(key, raw)
        if key == "extra_body" and not isinstance(value, dict):
            problems.append((key, "must be a JSON object, e.g. {\"top_k\": 40}"))
            continue
        if key == "extra_body" and isinstance(data.get("extra_body"), dict):
            value = {**value, **data["extra_body"]}
        data[key] = value
    if not problems:
        try:
            return SamplingParams.model_validate(data)
        except ValidationError as exc:
            problems.extend(validation_problems(exc, ()))
    raise ParamsError(problems, where)


def params_from_assignments(items: list[str], where: str = "-p") -> SamplingParams:
    """`-p KEY=VALUE` (repeated) as sampling parameters; `ParamsError` naming each bad key."""
    values: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            problems.append(("", "expected KEY=VALUE, e.g. -p temperature=0.2"))
            continue
        if not raw.strip():
            problems.append((key.strip(), "no value after ="))
            continue
        values[key.strip()] = raw
    if problems:
        raise ParamsError(problems, where)
    return params_from_text(values, where)
