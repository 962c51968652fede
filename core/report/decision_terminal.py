"""The decision, model against model and style control in a terminal: Rich
tables and text charts (P(best) bars; the Pareto charts of quality against
cost and against p95 duration, each model's interval a vertical whisker,
the frontier marked). `lineup decide` prints `print_decision`; `lineup
report` prints these sections among its own; the TUI's decision screen
draws the same charts (`pbest_chart`, `pareto_chart`) for its width.

Why a module of its own: these sections are self-contained blocks of the
report (issue 13). Charts are plain functions of (decision, width) returning
lines of `rich.text.Text`; every recorded string goes in through
`core.ground.text.one_line`, never as markup."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from core.decide.model import Decision
from core.report import decision_format as F
from core.report.format import cell, fit_names, fmt, line, name_width, nice_step
from core.report.matchups import Matchups
from core.report.tables import print_table
from core.stats.style import StyleControl
from core.ground.text import one_line

GREEN, BLUE, GREY = "#4aa36b", "#4a78c2", "#888888"
EIGHTHS = "▏▎▍▌▋▊▉"
MARKERS = "123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _bar(fraction: float, width: int) -> str:
    eighths = int(round(max(0.0, min(1.0, fraction)) * width * 8))
    return "█" * (eighths // 8) + (EIGHTHS[eighths % 8 - 1] if eighths % 8 else "")


def pbest_chart(d: Decision, width: int) -> list[Text]:
    """One row per model: name, bar of P(best) (0-100%), the figure and a note."""
    rows = d.models
    if not rows:
        return []
    nw = name_width([m.name for m in rows], width)
    tail = 26
    plot = max(10, width - nw - 2 - tail)
    names = fit_names([m.name for m in rows], nw)
    out = []
    for m in rows:
        colour = GREEN if m.name == d.recommendation else BLUE if m.feasible else GREY
        note = F.p_best(m.p_best) if m.feasible or m.p_best is None else "0% infeasible"
        if m.name == d.recommendation:
            note += " ◀ recommended"
        elif m.name == d.best:
            note += " (best)"
        bar = _bar(m.p_best or 0.0, plot)
        out.append(line(cell(names[m.name], nw), "  ", (bar, colour), " " * (plot - cell_len(bar)), " ",
                         (cell(note, tail - 1), "bold" if m.name == d.recommendation else "")))
    return out


def pareto_chart(d: Decision, attr: str, frontier: Sequence[str], width: int, height: int = 12,
                 money: bool = True) -> list[Text]:
    """Mix score (up) against `attr` (right): a marker per model at its score,
    its interval a whisker (│); frontier models in bold green (◆ in the
    legend). A legend line per model under the axis."""
    pts = [(m, getattr(m, attr)) for m in d.models if getattr(m, attr) is not None and m.rating is not None]
    if not pts:
        return []
    label_w = 6
    plot = max(20, width - label_w - 2)
    ys = [v for m, _ in pts for v in (m.ci_low, m.ci_high, m.rating) if v is not None]
    y_lo, y_hi = min(ys), max(ys)
    pad = max(2.0, (y_hi - y_lo) * 0.05)
    y_lo, y_hi = y_lo - pad, y_hi + pad
    x_lo, x_hi = F.axis_range([x for _, x in pts])

    def col(x: float) -> int:
        return min(plot - 1, max(0, round((x - x_lo) / (x_hi - x_lo) * (plot - 1))))

    def row(y: float) -> int:
        return min(height - 1, max(0, round((y_hi - y) / (y_hi - y_lo) * (height - 1))))

    chars = [[" "] * plot for _ in range(height)]
    styles = [[""] * plot for _ in range(height)]
    marker = {m.name: MARKERS[k % len(MARKERS)] for k, (m, _) in enumerate(pts)}
    for m, x in pts:
        c = col(x)
        colour = GREEN if m.name in frontier else BLUE if m.feasible else GREY
        if m.ci_low is not None and m.ci_high is not None:
            for r in range(row(m.ci_high), row(m.ci_low) + 1):
                if chars[r][c] == " ":
                    chars[r][c], styles[r][c] = "│", colour
    for m, x in pts:
        c, r = col(x), row(m.rating or 0.0)
        on = m.name in frontier
        chars[r][c] = marker[m.name]
        styles[r][c] = f"bold {GREEN}" if on else (BLUE if m.feasible else GREY)
    out: list[Text] = []
    for r in range(height):
        label = f"{y_hi - r * (y_hi - y_lo) / (height - 1):.0f}" if r in (0, height // 2, height - 1) else ""
        t = Text(no_wrap=True, overflow="crop", end="")
        t.append(cell(label, label_w, right=True) + " ┤", "dim")
        start = 0
        for k in range(1, plot + 1):
            if k == plot or styles[r][k] != styles[r][start]:
                t.append("".join(chars[r][start:k]), styles[r][start] or None)
                start = k
        out.append(t)
    rule = ["─"] * plot
    labels = [" "] * plot      # under the plot, no wider: the chart is `width` cells
    step = nice_step((x_hi - x_lo) / 4)
    taken = -2
    for tick in F.ticks(x_lo, x_hi + 1e-12, step):
        c = col(tick)
        rule[c] = "┴"
        s = F.money(tick) if money else f"{tick:,.0f}"
        start = max(0, min(c - len(s) // 2, plot - len(s)))    # centred on its tick, or ending at the edge
        if start > taken + 1 and start + len(s) <= len(labels):
            labels[start:start + len(s)] = list(s)
            taken = start + len(s)
    out.append(line(" " * label_w + " └", ("".join(rule), "dim")))
    out.append(line(" " * (label_w + 2), ("".join(labels).rstrip(), "dim")))
    for m, x in pts:
        on = m.name in frontier
        fig = F.money(x) if money else F.ms(x)
        out.append(line("  ", (marker[m.name], f"bold {GREEN}" if on else ""), " ",
                         one_line(f"{m.name}{' ◆ frontier' if on else ''} · {fig} · {fmt(m.rating)} "
                                  f"({F.interval(m.ci_low, m.ci_high)})" + ("" if m.feasible else " · infeasible"))))
    return out


#: Columns of text, not figures: left-justified (the first column always is).
TEXT_COLUMNS = ("feasible", "route to", "best there")


def _console(console: Console | None) -> Console:
    if console is None:
        console = Console(highlight=False, soft_wrap=False)
        if not console.is_terminal:
            console = Console(highlight=False, soft_wrap=False, width=160)
    return console


def print_decision_section(d: Decision, console: Console) -> None:
    width = min(console.width, 120)
    console.print(Text(one_line(F.headline(d)), style="bold"))
    console.print(Text(one_line(F.mix_line(d))))
    console.print(Text(one_line(F.limits_line(d))))
    for w in d.warnings:
        console.print(Text("warning: " + one_line(w), style="yellow"))
    if d.message and d.recommendation is not None:
        console.print(Text(one_line(d.message)))
    if not d.models:
        return
    console.print(Text(one_line(F.method_line(d)), style="dim"))
    if any(m.p_best is not None for m in d.models):
        console.print(Text("P(best)", style="bold"))
        for t in pbest_chart(d, width):
            console.print(t)
    header = list(F.MODEL_HEADER)
    header[3] = f"{100 * d.confidence:.0f}% interval"
    rows, notes = [], []
    for m in d.models:
        row = F.model_row(m)
        if row[-1] not in ("yes", "no"):    # why: below the table, where a narrow terminal can show it
            notes.append(f"* {m.name}: {row[-1]}")
            row[-1] = ("yes" if m.feasible else "no") + "*"
        rows.append(row)
    print_table(console, "Models for this mix", header, rows, left=TEXT_COLUMNS)
    for note in notes:
        console.print(Text(one_line(note)))
    if d.routing:
        print_table(console, "Routing per category", F.ROUTE_HEADER, F.route_rows(d), left=TEXT_COLUMNS)
        console.print(Text(one_line(F.routing_line(d))))
    for title, attr, frontier, money in (("Quality against cost per 1,000 answers", "cost_per_1k", d.pareto_cost, True),
                                         ("Quality against p95 duration", "p95_duration_ms", d.pareto_latency, False)):
        chart = pareto_chart(d, attr, frontier, width, money=money)
        if chart:
            console.print(Text(title + " (Pareto frontier in bold green)", style="bold"))
            for t in chart:
                console.print(t)
    for name, sc in d.style_by_category.items():
        print_style(sc, console, f"Style control, category {name}")


def print_decision(d: Decision, console: Console | None = None) -> None:
    """`lineup decide` in a terminal."""
    print_decision_section(d, _console(console))


def print_matchups(mu: Matchups, console: Console) -> None:
    if not mu.models:
        return
    grid = F.matchup_grid(mu)
    rows = [[a] + ["—" if a == b else F.matchup_text(c) for b, c in zip(mu.models, row, strict=True)]
            for a, row in zip(mu.models, grid, strict=True)]
    print_table(console, "Model against model (row vs column: W-T-L, predicted win probability)",
                 ["model"] + list(mu.models), rows)


def print_style(sc: StyleControl, console: Console, title: str = "Style control") -> None:
    for w in sc.warnings:
        console.print(Text("warning: " + one_line(w), style="yellow"))
    console.print(Text(one_line(F.style_recipe(sc)), style="italic"))
    print_table(console, f"{title}: coefficients (log-odds per {F.style_unit(sc)} of the normalised difference)",
                 ["feature", "coefficient", "95% interval"],
                 [[c.description, f"{c.coef:+.3f}" if c.varies else "not fitted",
                   F.interval(c.ci_low, c.ci_high, 3)] for c in sc.coefficients])
    print_table(console, f"{title}: ratings, raw and style-adjusted",
                 ["model", "rating", "95% interval", "style-adjusted", "95% interval", "shift"],
                 [[r.name, fmt(r.rating), F.interval(r.ci_low, r.ci_high), fmt(r.adjusted),
                   F.interval(r.adjusted_low, r.adjusted_high), f"{r.adjusted - r.rating:+.0f}"]
                  for r in sc.models])
