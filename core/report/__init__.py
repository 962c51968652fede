"""The report: everything the record says about the models (ratings with
their intervals, position bias, rater consistency, failure modes, speed,
errors, cost, checks, stability), as one data model with renderings.

The package, one concern per module:
- `model`: the pydantic data model; its JSON is the stable shape;
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
"""

from core.stats.ratings import Gap, ModelRating
from core.report.build import build_report
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



def __getattr__(name: str):
    """The renderers load on first use: `lineup report --json` needs neither."""
    if name == "render_html":
        from core.report.html import render_html
        return render_html
    if name == "render_markdown":
        from core.report.markdown import render_markdown
        return render_markdown
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NO_CATEGORY", "CheckRate", "Consistency", "Engineering", "FailureModes", "Gap", "ModelRating", "PositionBias",
    "PositionRow", "Quantiles", "RaterAgreement", "RatingTable", "Report", "ReportFilters", "StabilityRow", "TagStat",
    "build_report", "render_html", "render_markdown",
]
