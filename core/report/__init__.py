"""The report: everything the record says about the models (ratings with
their intervals, position bias, rater consistency, failure modes, speed,
errors, cost, checks, stability), as one data model with renderings.

The package, one concern per module:
- `model`: the pydantic data model; its JSON is the stable shape;
- `start`: the votes in scope read and their ratings begun in worker threads;
- `build`: `build_report(store, filters)` fills it from the store's reads
  (`store.report_queries`: the SQL lives with the schema, none here);
- `patterns`: the votes as distinct patterns, decomposed once (`core.stats.votes`
  decides what a vote means);
- `figures`: the derived numbers (quantiles, rates, intervals, groups);
- `format`: how numbers, intervals, ranks and hints are written;
- `variants`: the prompt x model matrix, the ratings of variants grouped by
  model and by variant (drawn by `stretch.variant_blocks`);
- renderers, plain functions of the model: `markdown.render_markdown`,
  `html.render_html` (with SVG charts), `terminal.print_report` (Rich tables,
  imported on its own so that `--json` never loads Rich). The TUI's report
  screen and charts draw the same model.

All text that came from a model, a config or a rater is untrusted: every
renderer routes it through `core.ground.text`.

The names below load on first use (PEP 562), as the store's do: a module of
the package (`core.report.start`, which begins the ratings) imports without
the others, so `lineup report` starts the bootstraps before the sections and
the data model are loaded, and `--json` never loads a renderer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.report.build import build_report
    from core.report.html import render_html
    from core.report.markdown import render_markdown
    from core.report.model import (
        NO_CATEGORY,
        CheckRate,
        Consistency,
        Engineering,
        FailureModes,
        PositionBias,
        PositionRow,
        Quantiles,
        RaterAgreement,
        RatingTable,
        Report,
        ReportFilters,
        StabilityRow,
        TagStat,
    )
    from core.stats.ratings import Gap, ModelRating

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "Gap": "core.stats.ratings", "ModelRating": "core.stats.ratings", "build_report": "core.report.build",
    "render_html": "core.report.html", "render_markdown": "core.report.markdown",
    **{name: "core.report.model" for name in (
        "NO_CATEGORY", "CheckRate", "Consistency", "Engineering", "FailureModes", "PositionBias", "PositionRow",
        "Quantiles", "RaterAgreement", "RatingTable", "Report", "ReportFilters", "StabilityRow", "TagStat")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
