"""The prompt x model matrix in the report: the ratings of the contestants
that are variants (`[variants.NAME]`, `lineup run --variants`), grouped two
ways: per model, which of its prompts is better; per variant, which model is
better with it. Each line is the contestant's own rating and interval from
the report's one fit (so the two groupings and the main table agree); a
group names a best only when its interval lies above every other's.

Why a module of its own: the grouping is the only new part (the ratings
already hold every contestant); every renderer draws it through the same
`Block`s (`core.report.stretch.variant_blocks`), escaping names its own way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from core.stats.ratings import ModelRating

#: The row of a model's own answers (no variant) in its group.
PLAIN = "(no variant)"


class VariantRow(BaseModel):
    contestant: str = Field(description="the contestant's alias (MODEL@VARIANT)")
    model: str = Field(description="the model alias it is a variant of")
    variant: str = Field(description=f"the variant's name; {PLAIN!r} for the model itself")
    rating: ModelRating


class VariantGroup(BaseModel):
    name: str = Field(description="the model (by_model) or the variant (by_variant) the rows share")
    rows: list[VariantRow] = Field(default_factory=list, description="best rated first")
    best: str | None = Field(default=None, description="the contestant whose interval lies above every other "
                                                       "row's; None while the intervals overlap")


class VariantGroups(BaseModel):
    by_model: list[VariantGroup] = Field(default_factory=list, description="which prompt is better for a model")
    by_variant: list[VariantGroup] = Field(default_factory=list,
                                           description="which model is better with a prompt")


def split_alias(alias: str, base: str) -> str:
    """The variant's name in `alias` (a variant of `base`): MODEL@NAME gives NAME."""
    return alias.removeprefix(base + "@") if alias.startswith(base + "@") else alias


def _best(rows: Sequence[VariantRow]) -> str | None:
    top = rows[0].rating
    if top.ci_low is None or not top.ranked:
        return None
    for other in rows[1:]:
        if other.rating.ci_high is None or other.rating.ci_high >= top.ci_low:
            return None
    return rows[0].contestant


def _group(name: str, rows: list[VariantRow]) -> VariantGroup:
    rows.sort(key=lambda r: -r.rating.rating)
    return VariantGroup(name=name, rows=rows, best=_best(rows))


def variant_groups(ratings: Sequence[ModelRating], bases: Mapping[str, str]) -> VariantGroups | None:
    """The rated contestants grouped by model and by variant (`bases`: alias
    -> the model it is a variant of); a group needs two rows. None when no
    rated contestant is a variant."""
    rated = {r.name: r for r in ratings}
    variants = [VariantRow(contestant=a, model=b, variant=split_alias(a, b), rating=rated[a])
                for a, b in bases.items() if a in rated]
    if not variants:
        return None
    by_model: dict[str, list[VariantRow]] = {}
    by_variant: dict[str, list[VariantRow]] = {}
    for row in variants:
        by_model.setdefault(row.model, []).append(row)
        by_variant.setdefault(row.variant, []).append(row)
    for model, rows in by_model.items():
        if model in rated:   # the model's own answers beside its variants
            rows.append(VariantRow(contestant=model, model=model, variant=PLAIN, rating=rated[model]))
    return VariantGroups(
        by_model=[_group(m, rows) for m, rows in sorted(by_model.items()) if len(rows) > 1],
        by_variant=[_group(v, rows) for v, rows in sorted(by_variant.items()) if len(rows) > 1])


def verdict(group: VariantGroup, what: str) -> str:
    if group.best is not None:
        return f"Best {what}: {group.best} (its 95% interval lies above every other's)."
    return f"No {what} is better yet: the 95% intervals overlap."
