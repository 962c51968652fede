"""The decision, model against model, style control and public / online
scores as HTML: sections the report's page (`core.report.html`) opens with
or carries, and the whole page of `lineup decide --html`. Charts are inline
SVG, like the rest of the report: P(best) bars, and the Pareto charts of
quality (mix score with its interval) against cost and against p95 duration,
the frontier drawn as a line through its models.

Why a module of its own: these sections are self-contained blocks of the
report (issue 13). Every recorded string goes through `core.ground.text.html_text`
(element text and attributes alike)."""

from __future__ import annotations

from collections.abc import Sequence

from core.decide.model import Decision, DecisionModel
from core.report import decision_format as F
from core.report.format import fmt, nice_step
from core.report.matchups import Matchups
from core.stats.style import StyleControl
from core.ground.text import html_text

_BOX = "background:#eef8ee;padding:.7em 1em;border-left:4px solid #4aa36b;font-size:1.1em"
_NONE = "background:#fff4e0;padding:.7em 1em;border-left:4px solid #e8a33d;font-size:1.1em"
_PAGE_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}.warn{background:#fff4e0;padding:.5em 1em;border-left:4px solid #e8a33d}
svg text{font:12px system-ui,sans-serif}.small{color:#666;font-size:.9em}
"""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells must already be escaped."""
    out = ["<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in header) + "</tr></thead><tbody>"]
    out += ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows]
    return "".join(out) + "</tbody></table>"


def _svg_p_best(d: Decision) -> str:
    rows = [m for m in d.models if m.p_best is not None or not m.feasible]
    if not rows:
        return ""
    label_w, plot_w, row_h = 220, 480, 22
    height = row_h * len(rows) + 16
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 230}" height="{height}" '
             'role="img" aria-label="P(best) per model">']
    for k, m in enumerate(rows):
        y = 8 + k * row_h
        p = m.p_best or 0.0
        colour = "#4aa36b" if m.name == d.recommendation else "#4a78c2" if m.feasible else "#bbb"
        note = F.p_best(m.p_best) if m.feasible else "infeasible"
        if m.name == d.recommendation:
            note += " · recommended"
        parts.append(f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end">{html_text(m.name)}</text>'
                     f'<rect x="{label_w}" y="{y + 2}" width="{plot_w}" height="14" fill="#f3f3f3"/>'
                     f'<rect x="{label_w}" y="{y + 2}" width="{p * plot_w:.1f}" height="14" fill="{colour}">'
                     f'<title>{html_text(m.name)}: P(best) {html_text(F.p_best(m.p_best))}</title></rect>'
                     f'<text x="{label_w + plot_w + 6}" y="{y + 13}" fill="#444">{html_text(note)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_pareto(d: Decision, attr: str, frontier: Sequence[str], xlabel: str, money: bool) -> str:
    pts: list[tuple[DecisionModel, float]] = [(m, getattr(m, attr)) for m in d.models
                                              if getattr(m, attr) is not None and m.rating is not None]
    if not pts:
        return ""
    W, H, left, right, top, bottom = 720, 340, 70, 200, 16, 44
    xs = [x for _, x in pts]
    ys = [v for m, _ in pts for v in (m.ci_low, m.ci_high, m.rating) if v is not None]
    x_lo, x_hi = F.axis_range(xs)
    y_lo, y_hi = min(ys), max(ys)
    pad = max(5.0, (y_hi - y_lo) * 0.08)
    y_lo, y_hi = y_lo - pad, y_hi + pad

    def X(v: float) -> float:
        return left + (v - x_lo) / (x_hi - x_lo) * (W - left - right)

    def Y(v: float) -> float:
        return top + (y_hi - v) / (y_hi - y_lo) * (H - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
             f'aria-label="quality against {html_text(xlabel)}">']
    step = nice_step((x_hi - x_lo) / 5)
    for t in F.ticks(x_lo, x_hi + 1e-12, step):
        label = F.money(t) if money else f"{t:,.0f}"
        parts.append(f'<line x1="{X(t):.1f}" y1="{top}" x2="{X(t):.1f}" y2="{H - bottom}" stroke="#eee"/>'
                     f'<text x="{X(t):.1f}" y="{H - bottom + 16}" text-anchor="middle" fill="#666">{label}</text>')
    ystep = nice_step((y_hi - y_lo) / 5)
    for t in F.ticks(y_lo, y_hi, ystep):
        parts.append(f'<line x1="{left}" y1="{Y(t):.1f}" x2="{W - right}" y2="{Y(t):.1f}" stroke="#eee"/>'
                     f'<text x="{left - 6}" y="{Y(t) + 4:.1f}" text-anchor="end" fill="#666">{t:.0f}</text>')
    parts.append(f'<text x="{(left + W - right) / 2:.0f}" y="{H - 6}" text-anchor="middle">'
                 f'{html_text(xlabel)}</text>'
                 f'<text x="14" y="{(top + H - bottom) / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(top + H - bottom) / 2:.0f})">mix score</text>')
    front = [(m, x) for m, x in sorted(pts, key=lambda p: p[1]) if m.name in frontier]
    if len(front) > 1:
        path = " ".join(f"{X(x):.1f},{Y(m.rating or 0):.1f}" for m, x in front)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#4aa36b" stroke-width="2" '
                     'stroke-dasharray="5 3"/>')
    for m, x in pts:
        on = m.name in frontier
        colour = "#4aa36b" if on else "#4a78c2" if m.feasible else "#aaa"
        if m.ci_low is not None and m.ci_high is not None:
            parts.append(f'<line x1="{X(x):.1f}" y1="{Y(m.ci_low):.1f}" x2="{X(x):.1f}" y2="{Y(m.ci_high):.1f}" '
                         f'stroke="{colour}" stroke-width="2"/>')
        fill = colour if on else "#fff"
        tip = f"{m.name}: {fmt(m.rating)} ({F.interval(m.ci_low, m.ci_high)}), {xlabel} " + (
            F.money(x) if money else f"{x:,.0f}") + (" · on the frontier" if on else "")
        parts.append(f'<circle cx="{X(x):.1f}" cy="{Y(m.rating or 0):.1f}" r="5" fill="{fill}" stroke="{colour}" '
                     f'stroke-width="2"><title>{html_text(tip)}</title></circle>'
                     f'<text x="{X(x) + 8:.1f}" y="{Y(m.rating or 0) + 4:.1f}">{html_text(m.name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def decision_html(d: Decision) -> str:
    """The decision section: what to ship, P(best) bars, the Pareto charts, the tables."""
    style = _BOX if d.recommendation else _NONE
    body = ["<h2>Decision</h2>", f'<p style="{style}"><b>{html_text(F.headline(d))}</b></p>',
            f"<p>{html_text(F.mix_line(d))} {html_text(F.limits_line(d))}</p>"]
    body += [f'<p class="warn">{html_text(w)}</p>' for w in d.warnings]
    if d.models:
        body += [f"<p class=small>{html_text(F.method_line(d))}</p>", _svg_p_best(d)]
        body += ["<h3>Quality against cost and latency (Pareto frontier: filled points on the dashed line)</h3>",
                 _svg_pareto(d, "cost_per_1k", d.pareto_cost, "cost per 1,000 answers", True),
                 _svg_pareto(d, "p95_duration_ms", d.pareto_latency, "p95 duration (ms)", False),
                 f"<p>{html_text(F.frontier_line(d))}</p>"]
        header = list(F.MODEL_HEADER)
        header[3] = f"{100 * d.confidence:.0f}% interval"
        body.append(_table(header, [[html_text(c) for c in F.model_row(m)] for m in d.models]))
    if d.routing:
        body += ["<h3>Routing per category</h3>",
                 _table(F.ROUTE_HEADER, [[html_text(c) for c in r] for r in F.route_rows(d)]),
                 f"<p>{html_text(F.routing_line(d))}</p>"]
    for name, sc in d.style_by_category.items():
        body.append(style_html(sc, f"Style control, category {name}"))
    return "\n".join(body)


def _shade(p: float | None) -> str:
    if p is None:
        return ""
    # white at 50%, green above, red below
    t = max(-1.0, min(1.0, (p - 0.5) * 2))
    r, g, b = (255, int(255 - 90 * -t), int(255 - 90 * -t)) if t < 0 else (int(255 - 90 * t), 255, int(255 - 90 * t))
    return f' style="background:rgb({r},{g},{b})"'


def matchups_html(mu: Matchups) -> str:
    if not mu.models:
        return ""
    grid = F.matchup_grid(mu)
    head = "".join(f"<th>{html_text(m)}</th>" for m in mu.models)
    rows = []
    for a, row in zip(mu.models, grid, strict=True):
        cells = "".join("<td>—</td>" if a == b else f"<td{_shade(c.predicted if c else None)}>"
                        f"{html_text(F.matchup_text(c))}</td>" for b, c in zip(mu.models, row, strict=True))
        rows.append(f"<tr><td>{html_text(a)}</td>{cells}</tr>")
    return (f"<h2>Model against model</h2><p class=small>{html_text(F.MATCHUP_LEGEND)}</p>"
            f"<table><thead><tr><th>model</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def style_html(sc: StyleControl, title: str = "Style control") -> str:
    parts = [f"<h2>{html_text(title)}</h2>",
             f"<p class=small>{html_text(F.style_about(sc))}</p>",
             f"<p class=recipe>{html_text(F.style_recipe(sc))}</p>"]
    parts += [f'<p class="warn">{html_text(w)}</p>' for w in sc.warnings]
    parts.append(_table(["feature", "coefficient", "95% interval"],
                        [[html_text(c.description), f"{c.coef:+.3f}" if c.varies else "not fitted",
                          F.interval(c.ci_low, c.ci_high, 3)] for c in sc.coefficients]))
    parts.append(_table(["model", "rating", "95% interval", "style-adjusted", "95% interval", "shift"],
                        [[html_text(r.name), fmt(r.rating), F.interval(r.ci_low, r.ci_high), fmt(r.adjusted),
                          F.interval(r.adjusted_low, r.adjusted_high), f"{r.adjusted - r.rating:+.0f}"]
                         for r in sc.models]))
    return "".join(parts)


def render_decision_html(d: Decision) -> str:
    """`lineup decide --html`: one self-contained page, no script, nothing fetched."""
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>lineup decide</title><style>{_PAGE_CSS}</style></head><body><h1>lineup decide</h1>"
            + decision_html(d) + "</body></html>\n")
