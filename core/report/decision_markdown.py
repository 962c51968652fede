"""The decision, model against model, style control and public / online
scores as Markdown: sections the report's Markdown (`core.report.markdown`)
puts in place, and the whole of `lineup decide --md`.

Why a module of its own: these sections are self-contained blocks of the
report (issue 13), kept apart from the other sections' code. Every recorded
string goes through `core.ground.text.markdown_inline`."""

from __future__ import annotations

from collections.abc import Sequence

from core.decide.model import Decision
from core.report import decision_format as F
from core.report.format import fmt
from core.report.matchups import Matchups
from core.stats.style import StyleControl
from core.ground.text import markdown_inline


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _bar(p: float | None, width: int = 20) -> str:
    if p is None:
        return ""
    full = int(round(p * width * 8))
    return "█" * (full // 8) + ("▏▎▍▌▋▊▉"[full % 8 - 1] if full % 8 else "")


def decision_lines(d: Decision, heading: str = "##") -> list[str]:
    lines = [f"{heading} Decision", "", f"**{markdown_inline(F.headline(d))}**", ""]
    lines += [markdown_inline(F.mix_line(d)), "", markdown_inline(F.limits_line(d)), ""]
    if d.message and d.recommendation is not None:
        lines += [f"> {markdown_inline(d.message)}", ""]
    lines += [f"- warning: {markdown_inline(w)}" for w in d.warnings]
    if d.warnings:
        lines.append("")
    if d.models:
        lines += [markdown_inline(F.method_line(d)), ""]
        rows = []
        for m in d.models:
            row = [markdown_inline(c) for c in F.model_row(m)]
            row.insert(2, _bar(m.p_best))
            rows.append(row)
        header = list(F.MODEL_HEADER)
        header.insert(2, "")
        header[4] = f"{100 * d.confidence:.0f}% interval"
        lines += _table(header, rows)
    if d.routing:
        lines += [f"{heading}# Routing", ""]
        lines += _table(F.ROUTE_HEADER, [[markdown_inline(c) for c in r] for r in F.route_rows(d)])
        lines += [markdown_inline(F.routing_line(d)), ""]
    if d.pareto_cost or d.pareto_latency:
        lines += [f"{heading}# Pareto frontier", "", markdown_inline(F.frontier_line(d)), ""]
    for name, sc in d.style_by_category.items():
        lines += style_lines(sc, f"{heading}# Style control, category {markdown_inline(name)}")
    return lines


def matchups_lines(mu: Matchups, heading: str = "##") -> list[str]:
    if not mu.models:
        return []
    lines = [f"{heading} Model against model", "", F.MATCHUP_LEGEND, ""]
    grid = F.matchup_grid(mu)
    rows = [[markdown_inline(a)] + [("—" if a == b else F.matchup_text(c)) for b, c in zip(mu.models, row, strict=True)]
            for a, row in zip(mu.models, grid, strict=True)]
    return lines + _table(["model"] + [markdown_inline(m) for m in mu.models], rows)


def style_lines(sc: StyleControl, title: str = "## Style control") -> list[str]:
    lines = [title, "",
             F.style_about(sc), "", F.style_recipe(sc), ""]   # our own words: no recorded text in them
    lines += [f"- warning: {markdown_inline(w)}" for w in sc.warnings]
    if sc.warnings:
        lines.append("")
    lines += _table(["feature", "coefficient", "95% interval"],
                    [[c.description, f"{c.coef:+.3f}" if c.varies else "not fitted",
                      F.interval(c.ci_low, c.ci_high, 3)] for c in sc.coefficients])
    lines += _table(["model", "rating", "95% interval", "style-adjusted", "95% interval", "shift"],
                    [[markdown_inline(r.name), fmt(r.rating), F.interval(r.ci_low, r.ci_high), fmt(r.adjusted),
                      F.interval(r.adjusted_low, r.adjusted_high), f"{r.adjusted - r.rating:+.0f}"]
                     for r in sc.models])
    return lines


def render_decision_markdown(d: Decision) -> str:
    return "\n".join(["# lineup decide", ""] + decision_lines(d)).rstrip() + "\n"
