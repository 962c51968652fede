"""Scored dimensions: what a set (or a run) asks its answers to be scored on,
besides the pairwise pick (issue 29 item 4). One owner for the declaration
(`Dimension`, read from the set header and kept in a run's session meta) and
for the 1-5 scale; people score them in the vote queue, rubric graders as
judges (`store.records.ScoreRecord` holds each score)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

#: Where a run keeps its dimensions (`SessionRecord.meta`).
META_KEY = "dimensions"
SCALES = {"1-5": (1, 5)}
MAX_DIMENSIONS = 9          # one number key each is enough; more would not fit a screen
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


class Dimension(BaseModel):
    """One dimension: an identifier (`correctness`), its scale (only "1-5" so
    far) and what a rater is told it means."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    scale: Literal["1-5"] = "1-5"
    description: str | None = Field(default=None, max_length=500)

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"{value[:60]!r} is not an identifier (letters, digits and _, "
                             "not starting with a digit, at most 40)")
        return value

    @property
    def bounds(self) -> tuple[int, int]:
        return SCALES[self.scale]


def check_unique(dims: Iterable[Dimension]) -> list[Dimension]:
    """`dims` as a list, refusing a name given twice and more than `MAX_DIMENSIONS`."""
    out: list[Dimension] = []
    seen: set[str] = set()
    for d in dims:
        if d.name in seen:
            raise ValueError(f"dimension {d.name!r} is declared twice")
        seen.add(d.name)
        out.append(d)
    if len(out) > MAX_DIMENSIONS:
        raise ValueError(f"at most {MAX_DIMENSIONS} dimensions (one number key each), not {len(out)}")
    return out


def dimensions_meta(dims: Iterable[Dimension]) -> list[dict]:
    """How a run records its dimensions in the session meta."""
    return [d.model_dump(mode="json", exclude_none=True) for d in dims]


def dimensions_of(meta: Mapping) -> tuple[Dimension, ...]:
    """The dimensions a session's meta declares; a malformed entry (a hand-edited
    or hostile import) is left out rather than failing the reader."""
    raw = meta.get(META_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(raw, list):
        return ()
    out: list[Dimension] = []
    for item in raw[:MAX_DIMENSIONS]:
        try:
            d = Dimension.model_validate(item)
        except ValidationError:
            continue
        if all(d.name != o.name for o in out):
            out.append(d)
    return tuple(out)


def valid_score(value: object) -> bool:
    """Whether `value` is a score on the 1-5 scale (a whole number, not a bool)."""
    lo, hi = SCALES["1-5"]
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
