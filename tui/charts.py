"""Report charts as lines of `rich.text.Text`, drawn with block and line
characters for a given width: rating whiskers, failure-mode bars, latency
box plots, speed/error bars and check pass rates.

Why plain functions of (data, width) and no widgets: the report screen redraws
them on every resize, the tests read them without a terminal, and they mirror
the choices of the HTML report, `core.report.html` (shared scale padded 5%,
open sides drawn to the edge, one colour per group of models that cannot be
told apart, tag colours shared across models, latency p5-p95 whisker, p25-p75
box, median).
Every recorded string (model, tag, check names) goes through `one_line()` into a
`Text`: never markup, control characters made visible."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text

from core.stats.ratings import ModelRating
from core.report.format import cell, fit_names, fmt_ci, fmt_rank, line, name_width, nice_step
from core.report.model import CheckRate, Engineering, FailureModes, Quantiles
from core.ground.text import one_line

GROUP_COLOURS = ("#4a78c2", "#c2574a", "#4aa36b", "#8a5ac2", "#c29a4a", "#4ab0c2")
TAG_COLOURS = ("#c2574a", "#4a78c2", "#4aa36b", "#8a5ac2", "#c29a4a", "#4ab0c2", "#999999", "#b04ab0",
               "#2d6a4f", "#9c6644", "#3d5a80", "#e07a5f")
GRID = "#555555"
EIGHTHS = "▏▎▍▌▋▊▉"

DOT, LINE, DASH, CLOSE_LO, CLOSE_HI, OPEN_LO, OPEN_HI = "●", "─", "╌", "├", "┤", "◀", "▶"
RATINGS_LEGEND = ("● rating   ├─┤ 95% interval   ◀╌ ╌▶ open side: no finite bound   "
                  "┏┃┗ bracket, same colour: cannot be told apart")


@dataclass
class Scale:
    """Values lo..hi onto columns 0..width-1."""

    lo: float
    hi: float
    width: int

    def col(self, v: float) -> int:
        span = self.hi - self.lo or 1.0
        return min(self.width - 1, max(0, round((v - self.lo) / span * (self.width - 1))))

    def ticks(self) -> list[float]:
        step = nice_step((self.hi - self.lo) / max(2, min(6, self.width // 10)))
        t = math.ceil(self.lo / step) * step
        out = []
        while t <= self.hi + 1e-9:
            out.append(t)
            t += step
        return out


class Row:
    """A row of cells, each a character and a style."""

    def __init__(self, width: int, scale: Scale | None = None) -> None:
        self.chars = [" "] * width
        self.styles = [""] * width
        if scale is not None:
            for t in scale.ticks():
                self.put(scale.col(t), "┊", GRID)

    def put(self, col: int, char: str, style: str = "") -> None:
        if 0 <= col < len(self.chars):
            self.chars[col], self.styles[col] = char, style

    def span(self, a: int, b: int, char: str, style: str = "") -> None:
        for c in range(min(a, b), max(a, b) + 1):
            self.put(c, char, style)

    def text(self) -> Text:
        out = Text(no_wrap=True, overflow="crop", end="")
        start = 0
        for k in range(1, len(self.chars) + 1):     # one span per run of a style
            if k == len(self.chars) or self.styles[k] != self.styles[start]:
                out.append("".join(self.chars[start:k]), self.styles[start] or None)
                start = k
        return out


def axis(scale: Scale, indent: int, label=lambda v: f"{v:g}") -> list[Text]:
    """A rule with tick marks under the plot and the tick values centred under them."""
    rule = Row(scale.width)
    rule.span(0, scale.width - 1, "─", GRID)
    labels = [" "] * (scale.width + 8)
    taken = -2
    for t in scale.ticks():
        c = scale.col(t)
        rule.put(c, "┴", GRID)
        s = label(t)
        start = max(0, c - len(s) // 2)
        if start <= taken + 1 or start + len(s) > len(labels):
            continue
        labels[start:start + len(s)] = list(s)
        taken = start + len(s)
    return [line(" " * indent, rule.text()),
            line(" " * indent, ("".join(labels).rstrip(), "dim"))]


# --------------------------------------------------------------------------- ratings


def rating_scale(models: Sequence[ModelRating], width: int) -> Scale:
    """Shared over every finite bound and rating, padded 5% (at least 10 points)."""
    values = [m.rating for m in models]
    values += [v for m in models for v in (m.ci_low, m.ci_high) if v is not None]
    lo, hi = min(values), max(values)
    pad = max(10.0, (hi - lo) * 0.05)
    return Scale(lo - pad, hi + pad, width)


def _group_marks(models: Sequence[ModelRating]) -> list[str]:
    """A bracket beside each run of adjacent rows from the same group of two or more."""
    size: dict[tuple[int, int], int] = {}
    for m in models:
        size[(m.component, m.group)] = size.get((m.component, m.group), 0) + 1
    marks = []
    for k, m in enumerate(models):
        key = (m.component, m.group)
        if size[key] < 2:
            marks.append(" ")
            continue
        up = k > 0 and (models[k - 1].component, models[k - 1].group) == key
        down = k + 1 < len(models) and (models[k + 1].component, models[k + 1].group) == key
        marks.append({(False, True): "┏", (True, True): "┃", (True, False): "┗"}.get((up, down), " "))
    return marks


def _rating_text(m: ModelRating) -> str:
    """The rating; an open side says it is a bound (">" at least, "<" at most)."""
    prefix = ">" if m.open_high and not m.open_low else "<" if m.open_low and not m.open_high else ""
    return prefix + f"{m.rating:.0f}"


def whisker(m: ModelRating, scale: Scale, colour: str) -> Row:
    row = Row(scale.width, scale)
    open_ = m.open_low or m.open_high
    a = scale.col(m.ci_low) if m.ci_low is not None else (0 if m.open_low else None)
    b = scale.col(m.ci_high) if m.ci_high is not None else (scale.width - 1 if m.open_high else None)
    if a is not None or b is not None:      # no bootstrap: no interval, the point only
        centre = scale.col(m.rating)
        a = centre if a is None else a
        b = centre if b is None else b
        row.span(a, b, DASH if open_ else LINE, colour)
        row.put(a, OPEN_LO if m.open_low else CLOSE_LO, colour)
        row.put(b, OPEN_HI if m.open_high else CLOSE_HI, colour)
    row.put(scale.col(m.rating), DOT, f"bold {colour}")
    return row


def ratings_chart(models: Sequence[ModelRating], width: int) -> list[Text]:
    """One row per model: group bracket, rank range, name, rating, whisker on a
    shared scale, interval; an axis under it. Models of a separate comparison
    graph (no votes linking them to the rest) come under a divider."""
    if not models:
        return []
    nw = name_width([m.name for m in models], width)
    names = fit_names([m.name for m in models], nw)
    show_ci = width >= 72
    left = 1 + 5 + 1 + nw + 1 + 5 + 1
    plot = max(10, width - left - (13 if show_ci else 0))
    scale = rating_scale(models, plot)
    marks = _group_marks(models)
    out: list[Text] = []
    for k, m in enumerate(models):
        if k and m.component != models[k - 1].component:
            out.append(line(("╌╌ not compared with the models above (no votes link them) ╌╌", "dim")))
        colour = GROUP_COLOURS[m.group % len(GROUP_COLOURS)]
        parts: list[tuple[str, str] | str | Text] = [(marks[k], colour), cell(fmt_rank(m), 5, right=True), " ", (cell(names[m.name], nw), "bold"), " ",
                 (cell(_rating_text(m), 5, right=True), colour), " ", whisker(m, scale, colour).text()]
        if show_ci:
            parts += [" ", (cell(fmt_ci(m), 12, right=True), "dim")]
        out.append(line(*parts))
    out += axis(scale, left, lambda v: f"{v:.0f}")
    return out


# --------------------------------------------------------------------------- bars


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of `fraction` (0..1) of `width` cells, in eighths; any
    non-zero fraction shows at least a sliver."""
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    if fraction > 0 and eighths == 0:
        eighths = 1
    full, rest = divmod(eighths, 8)
    return "█" * full + (EIGHTHS[rest - 1] if rest else "")


def failure_chart(rows: Sequence[FailureModes], width: int) -> list[Text]:
    """Per model: a header (answers, tagged), then one bar per tag, the share of
    its answers with that tag, on a scale shared by every model (like the HTML)."""
    tags = sorted({t for f in rows for t in f.tags})
    if not tags:
        return []
    top = max(s.rate for f in rows for s in f.tags.values()) or 1.0
    tw = min(max(cell_len(one_line(t)) for t in tags), max(12, width // 4))
    plot = max(8, min(60, width - 4 - tw - 1 - 12))
    names = fit_names(tags, tw)
    out: list[Text] = []
    for f in rows:
        share = f"{100 * f.tagged / f.answers:.0f}%" if f.answers else "-"
        head = [(one_line(f.model), "bold"), (f"  {f.answers} answers, {f.tagged} tagged ({share})", "dim")]
        if not f.tags:
            head.append(("  no tags", "dim"))
        out.append(line(*head))
        for t, s in f.tags.items():
            colour = TAG_COLOURS[tags.index(t) % len(TAG_COLOURS)]
            drawn = bar(s.rate / top, plot)
            out.append(line("    ", cell(names[t], tw), " ", (drawn, colour),
                            " " * (plot - cell_len(drawn) + 1), f"{s.count:>4} ({100 * s.rate:.0f}%)"))
    return out


def _ms(v: float) -> str:
    return f"{v / 1000:.1f} s" if v >= 10_000 else f"{v:,.0f} ms"


def latency_chart(rows: Sequence[Engineering], attr: str, width: int) -> list[Text]:
    """Box plots on one axis from 0: p5-p95 whisker, p25-p75 box, median bar;
    p50 / p95 as numbers on the right."""
    data: list[tuple[str, Quantiles]] = [(e.model, getattr(e, attr)) for e in rows
                                         if getattr(e, attr) is not None]
    if not data:
        return []
    nw = name_width([m for m, _ in data], width)
    names = fit_names([m for m, _ in data], nw)
    right = 22
    left = nw + 1
    plot = max(10, width - left - 1 - right)
    hi = max(q.p95 for _, q in data) * 1.05 or 1.0
    scale = Scale(0.0, hi, plot)
    out: list[Text] = []
    for model, q in data:
        row = Row(plot, scale)
        a, b = scale.col(q.p5), scale.col(q.p95)
        row.span(a, b, "─", "#888888")
        row.put(a, "├", "#888888")
        row.put(b, "┤", "#888888")
        row.span(scale.col(q.p25), scale.col(q.p75), "█", "#4a78c2")
        row.put(scale.col(q.p50), "┃", "bold #ffffff on #1d3f7a")
        nums = f"{_ms(q.p50)} / {_ms(q.p95)}"
        out.append(line((cell(names[model], nw), "bold"), " ", row.text(), " ", cell(nums, right, right=True)))
    out += axis(scale, left, lambda v: f"{v:,.0f}")
    return out


def speed_chart(rows: Sequence[Engineering], width: int) -> list[Text]:
    """Per model: output tokens/s (median) as a bar, the error rate with its
    kinds, requests and cost."""
    if not rows:
        return []
    nw = name_width([e.model for e in rows], width)
    names = fit_names([e.model for e in rows], nw)
    fixed = nw + 1 + 1 + 10 + 1 + 8 + 1 + 9
    tail = max(cell_len(_speed_tail(e)) for e in rows)
    plot = max(6, min(40, width - fixed - tail))
    top = max((e.output_tokens_per_s_p50 or 0.0) for e in rows) or 1.0
    out = [line((cell("model", nw), "dim"), " ", (cell("tokens/s (median)", plot + 11), "dim"), " ",
                (cell("errors", 8, right=True), "dim"), " ", (cell("cost", 9, right=True), "dim"))]
    for e in rows:
        rate = e.output_tokens_per_s_p50
        drawn = bar(rate / top, plot) if rate else ""
        err = "-" if e.error_rate is None else f"{100 * e.error_rate:.1f}%"
        err_style = "bold red" if e.errors else ""
        cost = "-" if e.cost is None else f"${e.cost:.4f}"
        out.append(line((cell(names[e.model], nw), "bold"), " ", (cell(drawn, plot), "#4aa36b"), " ",
                        cell("-" if rate is None else f"{rate:,.1f}", 10, right=True), " ",
                        (cell(err, 8, right=True), err_style), " ", cell(cost, 9, right=True),
                        (_speed_tail(e), "dim")))
    return out


def _speed_tail(e: Engineering) -> str:
    kinds = ", ".join(f"{k} {v}" for k, v in e.errors_by_kind.items())
    return f"  {e.requests} req" + (f"; {one_line(kinds)}" if kinds else "")


def checks_chart(rows: Sequence[CheckRate], width: int) -> list[Text]:
    """Pass rate per model on a 0-100% track, then per check when there are
    several kinds of check."""
    overall = [c for c in rows if c.check is None]
    if not overall:
        return []
    per_check = [c for c in rows if c.check is not None]
    several = len({c.check for c in per_check}) > 1
    labels = [c.model for c in overall] + (["  " + (c.check or "") for c in per_check] if several else [])
    nw = name_width(labels, width)
    names = fit_names(labels, nw)
    plot = max(8, min(50, width - nw - 2 - 18))
    out: list[Text] = []

    def row(label: str, c: CheckRate, bold: bool) -> Text:
        drawn = bar(c.rate, plot)
        colour = "#4aa36b" if c.rate >= 0.8 else "#c29a4a" if c.rate >= 0.5 else "#c2574a"
        return line((cell(names[label], nw), "bold" if bold else ""), " ", (drawn, colour),
                    ("░" * (plot - cell_len(drawn)), GRID), " ",
                    f"{100 * c.rate:5.1f}% ({c.passed}/{c.total})")

    for c in overall:
        out.append(row(c.model, c, True))
        if several:
            for d in per_check:
                if d.model == c.model:
                    out.append(row("  " + (d.check or ""), d, False))
    return out
