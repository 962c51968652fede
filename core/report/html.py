"""The report as one self-contained HTML page: inline CSS and SVG charts
(ratings with their intervals, failure modes, latency box plots), no script,
nothing fetched.

Why a module of its own: a renderer is a plain function of the model
(`render_html(report)`). Every recorded string goes through
`core.ground.text.html_text` before it reaches the page (element text and
attributes alike)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from core.stats.ratings import Gap, ModelRating
from core.report import agreement as AG
from core.report.decision_html import decision_html, matchups_html, style_html
from core.report.format import fmt, fmt_ci, fmt_rank, nice_step, pct
from core.report.model import DEMO_NOTE, Engineering, FailureModes, Report
from core.report.public_section import public_html
from core.report.stretch import Block, stretch_blocks
from core.report import dimensions as DIM
from core.report.structured import HEADER as STRUCTURED_HEADER
from core.report.structured import table_rows as structured_table
from core.ground.text import html_text

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child,td.l,th.l{text-align:left}.warn{background:#fff4e0;padding:.5em 1em;border-left:4px solid #e8a33d}
.demo{background:#ffe3e3;padding:.7em 1em;border-left:6px solid #c0392b;font-weight:bold}.msg{background:#eef4ff;padding:.7em 1em;border-left:4px solid #4a78c2}svg text{font:12px system-ui,sans-serif}
.small{color:#666;font-size:.9em}
"""


def _svg_ratings(models: Sequence[ModelRating]) -> str:
    if not models:
        return ""
    lo = min([m.ci_low for m in models if m.ci_low is not None] + [m.rating for m in models])
    hi = max([m.ci_high for m in models if m.ci_high is not None] + [m.rating for m in models])
    pad = max(10.0, (hi - lo) * 0.05)
    lo, hi = lo - pad, hi + pad
    label_w, plot_w, row_h = 220, 620, 24
    height = row_h * len(models) + 40

    def x(v: float) -> float:
        return label_w + (v - lo) / (hi - lo) * plot_w

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 20}" height="{height}" '
             'role="img" aria-label="ratings with 95% intervals">']
    step = nice_step((hi - lo) / 6)
    tick = math.ceil(lo / step) * step
    while tick <= hi:
        parts.append(f'<line x1="{x(tick):.1f}" y1="10" x2="{x(tick):.1f}" y2="{height - 25}" stroke="#eee"/>'
                     f'<text x="{x(tick):.1f}" y="{height - 8}" text-anchor="middle" fill="#666">{tick:.0f}</text>')
        tick += step
    colours = ["#4a78c2", "#c2574a", "#4aa36b", "#8a5ac2", "#c29a4a", "#4ab0c2"]
    for k, m in enumerate(models):
        y = 22 + k * row_h
        col = colours[m.group % len(colours)]
        a = x(m.ci_low) if m.ci_low is not None else label_w
        b = x(m.ci_high) if m.ci_high is not None else label_w + plot_w
        parts.append(f'<text x="{label_w - 8}" y="{y + 4}" text-anchor="end">{html_text(m.name)}</text>')
        dash = ' stroke-dasharray="4 3"' if (m.ci_low is None or m.ci_high is None) else ""
        parts.append(f'<line x1="{a:.1f}" y1="{y}" x2="{b:.1f}" y2="{y}" stroke="{col}" stroke-width="2"{dash}/>')
        for end, open_ in ((a, m.ci_low is None), (b, m.ci_high is None)):
            if not open_:
                parts.append(f'<line x1="{end:.1f}" y1="{y - 5}" x2="{end:.1f}" y2="{y + 5}" stroke="{col}" stroke-width="2"/>')
        parts.append(f'<circle cx="{x(m.rating):.1f}" cy="{y}" r="4" fill="{col}"><title>{html_text(m.name)}: '
                     f'{m.rating:.0f} ({html_text(fmt_ci(m))})</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_failures(rows: Sequence[FailureModes]) -> str:
    tags = sorted({t for f in rows for t in f.tags})
    if not tags:
        return ""
    label_w, plot_w, bar_h = 220, 500, 14
    colours = ["#c2574a", "#4a78c2", "#4aa36b", "#8a5ac2", "#c29a4a", "#4ab0c2", "#777", "#b04ab0",
               "#2d6a4f", "#9c6644", "#3d5a80", "#e07a5f"]
    top = max(s.rate for f in rows for s in f.tags.values()) or 1.0
    y = 10
    parts = []
    for f in rows:
        if not f.tags:
            continue
        parts.append(f'<text x="0" y="{y + 12}" font-weight="bold">{html_text(f.model)} '
                     f'<tspan fill="#666" font-weight="normal">({f.answers} answers)</tspan></text>')
        y += 18
        for t in tags:
            s = f.tags.get(t)
            if s is None:
                continue
            w = s.rate / top * plot_w
            col = colours[tags.index(t) % len(colours)]
            parts.append(f'<text x="{label_w - 8}" y="{y + 11}" text-anchor="end">{html_text(t)}</text>'
                         f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{col}"/>'
                         f'<text x="{label_w + w + 6:.1f}" y="{y + 11}" fill="#444">{s.count} ({100 * s.rate:.0f}%)</text>')
            y += bar_h + 4
        y += 8
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 120}" height="{y + 10}" '
            f'role="img" aria-label="failure modes per model">' + "".join(parts) + "</svg>")


def _svg_latency(rows: Sequence[Engineering], attr: str, title: str) -> str:
    data = [(e.model, getattr(e, attr)) for e in rows if getattr(e, attr) is not None]
    if not data:
        return ""
    hi = max(q.p95 for _, q in data) * 1.05 or 1.0
    label_w, plot_w, row_h = 220, 560, 26
    height = row_h * len(data) + 40

    def x(v: float) -> float:
        return label_w + v / hi * plot_w

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + 30}" height="{height}" '
             f'role="img" aria-label="{html_text(title)}">']
    step = nice_step(hi / 6)
    tick = 0.0
    while tick <= hi:
        parts.append(f'<line x1="{x(tick):.1f}" y1="8" x2="{x(tick):.1f}" y2="{height - 25}" stroke="#eee"/>'
                     f'<text x="{x(tick):.1f}" y="{height - 8}" text-anchor="middle" fill="#666">{tick:g}</text>')
        tick += step
    for k, (model, q) in enumerate(data):
        y = 20 + k * row_h
        parts.append(f'<text x="{label_w - 8}" y="{y + 4}" text-anchor="end">{html_text(model)}</text>'
                     f'<line x1="{x(q.p5):.1f}" y1="{y}" x2="{x(q.p95):.1f}" y2="{y}" stroke="#888"/>'
                     f'<rect x="{x(q.p25):.1f}" y="{y - 7}" width="{max(1.0, x(q.p75) - x(q.p25)):.1f}" height="14" '
                     f'fill="#cfe0f7" stroke="#4a78c2"/>'
                     f'<line x1="{x(q.p50):.1f}" y1="{y - 7}" x2="{x(q.p50):.1f}" y2="{y + 7}" stroke="#1d3f7a" '
                     f'stroke-width="2"><title>{html_text(model)}: p50 {q.p50:.0f} ms, p95 {q.p95:.0f} ms, n={q.n}</title></line>')
    parts.append("</svg>")
    return "".join(parts)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells must already be escaped."""
    out = ["<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in header) + "</tr></thead><tbody>"]
    out += ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows]
    return "".join(out) + "</tbody></table>"


def _html_ratings(models: Sequence[ModelRating], gaps: Sequence[Gap]) -> str:
    parts = [_svg_ratings(models), _html_table(
        ["model", "rank", "rating", "95% interval", "votes", "W", "T", "L", "group", "notes"],
        [[html_text(m.name), fmt_rank(m), fmt(m.rating), html_text(fmt_ci(m)), str(m.votes), str(m.wins), str(m.ties),
          str(m.losses), str(m.group + 1), html_text("; ".join(m.notes))] for m in models])]
    close = [g for g in gaps if not g.separated]
    if close:
        parts.append("<p class=small>Not yet separated (rough further votes, same mix, at the current gap): "
                     + "; ".join(f"{html_text(g.upper)} vs {html_text(g.lower)}: gap {g.gap:.0f}, "
                                 f"{'not enough votes to estimate' if g.more_votes is None else f'~{g.more_votes:,}'}"
                                 for g in close) + "</p>")
    return "".join(parts)


def _html_blocks(blocks: Sequence[Block]) -> list[str]:
    """The judge and rater-quality sections (`core.report.stretch`), every string escaped."""
    out: list[str] = []
    for b in blocks:
        if b.kind in ("h2", "h3"):
            out.append(f"<{b.kind}>{html_text(b.text)}</{b.kind}>")
        elif b.kind == "p":
            out.append(f"<p>{html_text(b.text)}</p>")
        else:
            out.append(_html_table([html_text(h) for h in b.header], [[html_text(c) for c in row] for row in b.rows]))
    return out


def render_html(r: Report) -> str:
    """A self-contained page: inline CSS and SVG, no script, every piece of
    recorded text escaped."""
    body = ["<h1>lineup report</h1>",
            f"<p class=small>{r.votes_used} vote{'s' if r.votes_used != 1 else ''}, {r.rounds} bootstrap "
            f"round{'s' if r.rounds != 1 else ''}, seed {html_text(r.seed)}. "
            "Bradley-Terry on the Elo scale (mean 1000), 95% bootstrap intervals; dashed whiskers are open "
            "(no finite rating on that side).</p>"]
    if r.demo:
        body.insert(1, f'<p class="demo">{html_text(DEMO_NOTE)}</p>')
    if r.message:
        body.append(f'<p class="msg">{html_text(r.message)}</p>')
    if r.decision is not None and r.models:
        body.append(decision_html(r.decision))
    body += [f'<p class="warn">{html_text(w)}</p>' for w in r.warnings]
    if r.models:
        body += ["<h2>Ratings</h2>", _html_ratings(r.models, r.gaps)]
    if r.style is not None:
        body.append(style_html(r.style))
    body.append(matchups_html(r.matchups))
    body.append(public_html(r.public))
    for title, tables in (("By category", r.by_category), ("By rater", r.by_rater)):
        if len(tables) > 1:
            body.append(f"<h2>{title}</h2>")
            for name, t in tables.items():
                body += [f"<h3>{html_text(name)}</h3>", _html_ratings(t.models, t.gaps)]
    if r.position_bias.rows:
        body += ["<h2>Position bias</h2>", _html_table(
            ["position", "votes", "wins", "win rate", "95% interval", "expected"],
            [[str(p.position + 1), str(p.votes), str(p.wins), pct(p.win_rate),
              f"{pct(p.ci_low)} .. {pct(p.ci_high)}", pct(p.expected)] for p in r.position_bias.rows])]
    c = r.consistency
    if c.raters or c.inter_rater_pairs:
        body += ["<h2>Rater consistency</h2>", _html_table(
            ["rater", "judged twice", "same verdict", "rate"],
            [[html_text(x.rater), str(x.repeated), str(x.agreed), pct(x.rate)] for x in c.raters])]
        if c.inter_rater_pairs:
            body.append(f"<p>Between raters: {c.inter_rater_agreed} of {c.inter_rater_pairs} pairs agree "
                        f"({pct(c.inter_rater_rate)}).</p>")
    if r.agreement.units:
        body += ["<h2>Agreement between raters</h2>", f"<p>{html_text(AG.summary_line(r.agreement))}</p>",
                 _html_table(AG.PAIR_HEADER, [[html_text(c) for c in row] for row in AG.pair_rows(r.agreement)])]
    if any(f.tags for f in r.failure_modes):
        body += ["<h2>Failure modes</h2>", _svg_failures(r.failure_modes)]
    if r.engineering:
        body += ["<h2>Speed, errors and cost</h2>",
                 "<h3>Time to first token (ms): p5-p95 whisker, p25-p75 box, median line</h3>",
                 _svg_latency(r.engineering, "ttft_ms", "time to first token"),
                 "<h3>Duration (ms)</h3>", _svg_latency(r.engineering, "duration_ms", "duration"),
                 _html_table(["model", "requests", "error rate", "errors by kind", "TTFT p50", "TTFT p95",
                              "tok/s p50", "tokens in / out", "cost"],
                             [[html_text(e.model), str(e.requests), pct(e.error_rate),
                               html_text(", ".join(f"{k} {v}" for k, v in e.errors_by_kind.items())),
                               fmt(e.ttft_ms.p50 if e.ttft_ms else None),
                               fmt(e.ttft_ms.p95 if e.ttft_ms else None),
                               fmt(e.output_tokens_per_s_p50, 1), f"{e.input_tokens:,} / {e.output_tokens:,}",
                               "-" if e.cost is None else f"${e.cost:.4f}"] for e in r.engineering])]
    if r.checks:
        body += ["<h2>Automated checks</h2>", _html_table(
            ["model", "check", "passed", "rate"],
            [[html_text(x.model), html_text(x.check or "all"), f"{x.passed}/{x.total}", pct(x.rate)] for x in r.checks])]
        if r.checks_by_category:
            body.append(_html_table(["model", "category", "passed", "rate"],
                                    [[html_text(x.model), html_text(x.category), f"{x.passed}/{x.total}", pct(x.rate)]
                                     for x in r.checks_by_category]))
    if r.structured:
        body += ["<h2>Structured output</h2>", "<p>Answers to cases with a <code>response_format</code>: valid "
                 "against the schema, mean field completeness, and each failure mode (an answer may have several), "
                 "with Wilson 95% intervals.</p>", _html_table(
                     STRUCTURED_HEADER, [[html_text(c) for c in row] for row in structured_table(r.structured)])]
    if r.dimensions.scores:
        body += ["<h2>Scored dimensions</h2>", "<p>Scores from 1 to 5 on the sets' dimensions (a rater's latest on "
                 "an answer), people and judges apart: the mean with a bootstrap 95% interval over answers, and the "
                 "sd of the per-repeat means; then Krippendorff's alpha (interval) between raters.</p>",
                 _html_table(DIM.SCORE_HEADER, [[html_text(c) for c in row] for row in DIM.score_cells(r.dimensions)]),
                 _html_table(DIM.AGREEMENT_HEADER,
                             [[html_text(c) for c in row] for row in DIM.agreement_cells(r.dimensions)])]
        if r.dimensions.judges:
            body += [f"<p>{html_text(DIM.JUDGES_NOTE)}</p>", _html_table(
                DIM.JUDGE_HEADER, [[html_text(c) for c in row] for row in DIM.judge_cells(r.dimensions)])]
            for title, header, rows in DIM.confusion_tables(r.dimensions):
                body += [f"<p>{html_text(title)}</p>", _html_table([html_text(c) for c in header],
                                                                   [[html_text(c) for c in row] for row in rows])]
    if r.stability:
        body += ["<h2>Stability over repeats</h2>", _html_table(
            ["model", "cases", "runs", "identical", "similarity mean / min", "flaky checks",
             "pass-rate sd mean / max"],
            [[html_text(s.model), str(s.cases), str(s.runs), pct(s.exact_match_rate),
              f"{fmt(s.mean_similarity, 2)} / {fmt(s.min_similarity, 2)}", f"{s.flaky_checks}/{s.checks}",
              f"{fmt(s.pass_rate_sd_mean, 2)} / {fmt(s.pass_rate_sd_max, 2)}"] for s in r.stability])]
    body += _html_blocks(stretch_blocks(r))
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>lineup report{' (demo models)' if r.demo else ''}</title><style>{_CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
