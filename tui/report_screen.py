"""The report screen: `lineup report` as charts. Ratings as whiskers on a
shared scale (groups that cannot be told apart bracketed and coloured alike,
open sides drawn to the edge), the votes that would separate close
neighbours, failure-mode bars, latency box plots, speed/errors/cost and check
pass rates. Filters: demo models in or out, one category. The decision
for the mix of the report's votes (P(best) bars, Pareto charts, routing) and
the model-against-model matrix sit right under the ratings; `p` (or the
palette) scrolls to the decision.

The report is computed off the event loop and off the store's writer thread
(`AsyncStore.read`: a read-only connection in a worker thread), so neither
the screen nor the writes of a stream still in flight wait for the
bootstrap; the charts are `tui.charts` functions redrawn for the width at
hand."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Checkbox, Footer, Header, Select, Static

from core.stats.ratings import DEFAULT_ROUNDS
from core.report import decision_format as DF
from core.report.build import build_report
from core.report.decision_terminal import pareto_chart, pbest_chart
from core.report.format import gap_hint as report_gap_hint
from core.report.model import DEMO_NOTE, NO_CATEGORY, Report, ReportFilters
from core.report.stretch import stretch_blocks
from core.report.structured import HEADER as STRUCTURED_HEADER
from core.report.structured import table_rows as structured_table
from core.ground.text import one_line
from tui import charts

if TYPE_CHECKING:
    from tui.host import Host


class Chart(Widget):
    """A chart drawn by `draw(width) -> lines` for its current width."""

    DEFAULT_CSS = """
    Chart {
        height: auto;
        width: 1fr;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    """

    def __init__(self, draw: Callable[[int], list[Text]], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._draw = draw
        self._cache: tuple[int, list[Text]] | None = None

    def lines(self, width: int | None = None) -> list[Text]:
        width = max(20, width if width is not None else (self.content_size.width or 80))
        if self._cache is None or self._cache[0] != width:
            lines = self._draw(width)
            for t in lines:         # a chart never wraps: what does not fit is cut
                t.truncate(width, overflow="crop")
            self._cache = (width, lines)
        return self._cache[1]

    def render(self) -> Text:
        out = Text("\n", no_wrap=True, overflow="crop").join(self.lines())
        out.no_wrap, out.overflow = True, "crop"
        return out

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, len(self.lines(width)))

    def plain_text(self) -> str:
        return "\n".join(t.plain for t in self.lines())


def prose(text: str | Text, classes: str = "report-prose") -> Static:
    """Wrapping text; a str is untrusted and shown as is (never markup)."""
    return Static(text if isinstance(text, Text) else Text(one_line(text)), classes=classes)


def gap_hint(g) -> str:
    """As `lineup report` says it."""
    return report_gap_hint(g)


def categories_of(report: Report) -> list[str]:
    """The categories a filter can pick (turns without one cannot be picked)."""
    found = set(report.by_category) | {c.category for c in report.checks_by_category if c.category}
    return sorted(found - {NO_CATEGORY})


def report_widgets(report: Report) -> list[Widget]:
    """Everything the screen shows for one report, top to bottom."""
    out: list[Widget] = []
    if report.demo:
        out.append(prose(Text(one_line(DEMO_NOTE), style="bold reverse"), "report-demo-note"))
    if report.message:
        msg = Text(one_line(report.message))
        if "--include-demo" in report.message and not report.filters.include_demo:
            msg.append("\nHere: press d (or tick “demo models”) to see them.", style="bold")
        out.append(prose(msg, "report-message"))
    for w in report.warnings:
        out.append(prose(Text("warning: " + one_line(w)), "report-warning"))
    if report.models:
        out.append(prose(Text(f"Ratings · {report.votes_used:,} vote{'s' if report.votes_used != 1 else ''} · "
                              f"{report.rounds} bootstrap round{'s' if report.rounds != 1 else ''} · "
                              f"seed {report.seed}"), "report-section"))
        out.append(Chart(partial(charts.ratings_chart, report.models), id="chart-ratings"))
        out.append(prose(Text(charts.RATINGS_LEGEND)))
        notes = [Text(one_line(f"{m.name}: " + "; ".join(m.notes))) for m in report.models if m.notes]
        hints = [Text(one_line(gap_hint(g))) for g in report.gaps if not g.separated]
        if hints:
            out.append(prose(Text("More votes to separate neighbours:\n") + Text("\n").join(hints),
                             "report-hints"))
        if notes:
            out.append(prose(Text("\n").join(notes)))
    if report.agreement.units:
        from core.report import agreement as AG

        out.append(prose(Text("Agreement between raters"), "report-section"))
        rows = [Text(one_line(AG.summary_line(report.agreement)))]
        rows += [Text(one_line(" · ".join(f"{h} {c}" for h, c in zip(AG.PAIR_HEADER, row, strict=True))))
                 for row in AG.pair_rows(report.agreement)]
        out.append(prose(Text("\n").join(rows), "report-agreement"))
    out += decision_widgets(report)
    if any(f.tags for f in report.failure_modes):
        out.append(prose(Text("Failure modes · share of each model's answers with the tag"), "report-section"))
        out.append(Chart(partial(charts.failure_chart, report.failure_modes), id="chart-failures"))
    eng = report.engineering
    if any(e.ttft_ms for e in eng):
        out.append(prose(Text("Time to first token · ├─┤ p5–p95, █ p25–p75, ┃ median; right: p50 / p95"),
                         "report-section"))
        out.append(Chart(lambda w: charts.latency_chart(eng, "ttft_ms", w), id="chart-ttft"))
    if any(e.duration_ms for e in eng):
        out.append(prose(Text("Duration · ├─┤ p5–p95, █ p25–p75, ┃ median; right: p50 / p95"),
                         "report-section"))
        out.append(Chart(lambda w: charts.latency_chart(eng, "duration_ms", w), id="chart-duration"))
    if eng:
        out.append(prose(Text("Speed, errors and cost"), "report-section"))
        out.append(Chart(lambda w: charts.speed_chart(eng, w), id="chart-speed"))
    if report.checks:
        out.append(prose(Text("Automated checks · pass rate"), "report-section"))
        out.append(Chart(partial(charts.checks_chart, report.checks), id="chart-checks"))
    if report.structured:
        out.append(prose(Text("Structured output · schema-valid, completeness, failure modes (Wilson 95% intervals)"),
                         "report-section"))
        lines = [Text(one_line(" · ".join(f"{h} {c}" if i else c for i, (h, c) in enumerate(zip(STRUCTURED_HEADER, row, strict=True)))))
                 for row in structured_table(report.structured)]
        out.append(prose(Text("\n").join(lines), "report-structured"))
    out += stretch_widgets(report)
    return out


def stretch_widgets(report: Report) -> list[Widget]:
    """The judge and rater-quality sections (`core.report.stretch`): headings,
    prose, and each table as aligned lines of inert text."""
    out: list[Widget] = []
    for b in stretch_blocks(report):
        if b.kind in ("h2", "h3"):
            out.append(prose(Text(one_line(b.text)), "report-section" if b.kind == "h2" else "report-prose"))
        elif b.kind == "p":
            out.append(prose(b.text, "report-hints"))
        else:
            cells = [list(b.header)] + [list(r) for r in b.rows]
            widths = [max(len(one_line(row[i])) for row in cells) for i in range(len(b.header))]
            lines = [Text("  ".join(one_line(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()) for row in cells]
            out.append(prose(Text("\n").join(lines), "report-table"))
    return out


def decision_widgets(report: Report) -> list[Widget]:
    """The decision for the mix of the report's own votes and the model
    against model matrix (issue 13's sections: `core.decide`,
    `core.report.matchups`), said as `lineup report` says them."""
    out: list[Widget] = []
    d = report.decision
    if d is not None and report.models:
        out.append(Static(Text("Decision · for the mix of these votes (`lineup decide` for your own mix and limits)"),
                          classes="report-section", id="report-decision"))
        out.append(prose(Text(one_line(DF.headline(d)), style="bold"), "report-hints"))
        out.append(prose(Text(one_line(DF.mix_line(d)) + "\n" + one_line(DF.limits_line(d)))))
        if any(m.p_best is not None for m in d.models):
            out.append(prose(Text("P(best)"), "report-section"))
            out.append(Chart(lambda w: pbest_chart(d, w), id="chart-pbest"))
        if d.routing:
            rows = [Text(one_line(" · ".join(r))) for r in DF.route_rows(d)]
            out.append(prose(Text("Routing per category: " + " · ".join(DF.ROUTE_HEADER)), "report-section"))
            out.append(prose(Text("\n").join(rows + [Text(one_line(DF.routing_line(d)))]), "report-hints"))
        for title, attr, frontier, money, key in (
                ("Quality against cost per 1,000 answers", "cost_per_1k", d.pareto_cost, True, "pareto-cost"),
                ("Quality against p95 duration", "p95_duration_ms", d.pareto_latency, False, "pareto-latency")):
            if any(getattr(m, attr) is not None and m.rating is not None for m in d.models):
                out.append(prose(Text(title + " · Pareto frontier in bold green"), "report-section"))
                out.append(Chart(partial(pareto_chart, d, attr, frontier, money=money), id=f"chart-{key}"))
    mu = report.matchups
    if mu.models:
        out.append(prose(Text("Model against model · row vs column: W-T-L, predicted win probability"),
                         "report-section"))
        grid = DF.matchup_grid(mu)
        lines = [Text(one_line(a) + ": " + " · ".join(f"{one_line(b)} {DF.matchup_text(c)}"
                                                      for b, c in zip(mu.models, row, strict=True) if b != a))
                 for a, row in zip(mu.models, grid, strict=True)]
        out.append(prose(Text("\n").join(lines), "report-hints"))
    return out


class ReportScreen(Screen):
    """`standalone`: opened by `lineup report --tui`; Esc quits the app."""

    DEFAULT_CSS = """
    #report-bar {
        height: 1;
        padding: 0 1;
        background: $boost;
    }
    #report-demo {
        width: auto;
        margin: 0 2 0 0;
    }
    #report-category {
        width: 26;
        margin: 0 2 0 0;
    }
    #report-status {
        width: 1fr;
        color: $text-muted;
    }
    #report-body {
        height: 1fr;
        padding: 0 1;
    }
    .report-section {
        margin: 1 0 0 0;
        text-style: bold;
        color: $accent;
    }
    .report-message {
        margin: 1 0;
        padding: 0 1;
        border-left: thick $primary;
        background: $primary-background;
    }
    .report-warning {
        color: $warning;
    }
    .report-prose {
        color: $text-muted;
    }
    .report-hints {
        color: $text;
    }
    """

    BINDINGS = [
        Binding("d", "toggle_demo", "Demo in/out", id="report.demo", tooltip="Include or leave out demo models"),
        Binding("c", "focus_category", "Category", id="report.category", tooltip="Pick one category (or all)"),
        Binding("r", "recompute", "Refresh", id="report.refresh", tooltip="Recompute from the record"),
        Binding("p", "show_decision", "Decision", id="report.decision",
                tooltip="Scroll to the decision: P(best), recommendation, routing, charts"),
        Binding("escape", "close", "Back", id="report.back"),
    ]

    def __init__(self, *, standalone: bool = False, rounds: int = DEFAULT_ROUNDS, seed: int | None = 0,
                 include_demo: bool = False, category: str | None = None, sessions: list[str] | None = None,
                 rater: str | None = None, since: float | None = None) -> None:
        super().__init__()
        self.sessions = list(sessions or [])
        self.rater = rater
        self.since = since
        self.standalone = standalone
        self.rounds = rounds
        self.seed = seed
        self.include_demo = include_demo
        self.category = category
        self.categories: list[str] = [category] if category else []
        self.report: Report | None = None
        self.loads = 0          # reports shown (tests wait on it)
        self.computing = False

    def compose(self):
        yield Header(show_clock=False, icon="≡")
        with Horizontal(id="report-bar"):
            yield Checkbox("demo models", self.include_demo, id="report-demo", compact=True)
            yield Select(self._options(), prompt="all categories", id="report-category", compact=True,
                         value=self.category if self.category else Select.NULL)
            yield Static("", id="report-status")
        yield VerticalScroll(id="report-body")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.title = "lineup"
        self.sub_title = "report"
        self.query_one("#report-category").display = len(self.categories) > 1
        self.query_one("#report-body").focus()
        self.recompute()

    def _options(self) -> list[tuple[Text, str]]:
        return [(Text(one_line(c)), c) for c in self.categories]

    @property
    def lineup(self) -> Host:
        """The app, as the lineup app it is (its store, its notices)."""
        return cast("Host", self.app)

    # ----- computing ----------------------------------------------------------
    def filters(self) -> ReportFilters:
        return ReportFilters(sessions=self.sessions, category=self.category, rater=self.rater, since=self.since,
                             include_demo=self.include_demo)

    def _prices(self) -> dict:
        config = getattr(self.app, "config", None)
        models = config.models if config is not None else {}
        return {alias: m.price for alias, m in models.items() if m.price is not None}

    @work(exclusive=True, group="report", exit_on_error=False)
    async def recompute(self) -> None:
        """Build the report off the writer thread and show it."""
        filters, rounds, seed, prices = self.filters(), self.rounds, self.seed, self._prices()
        self.computing = True
        self._status(f"computing ({rounds} bootstrap rounds)…")
        try:
            report = await self.lineup.store.read(
                lambda store: build_report(store, filters, rounds=rounds, seed=seed, prices=prices))
        except Exception as exc:
            self.computing = False
            self._status("")
            if self.standalone and self.report is None:
                self.app.exit(2, message=f"lineup report: {exc}")
            else:
                self.lineup.say(f"Report failed: {exc}", severity="error")
            return
        await self.show(report)
        self.computing = False
        self.loads += 1

    async def show(self, report: Report) -> None:
        self.report = report
        if report.filters.category is None:
            cats = categories_of(report)
            if cats != self.categories:
                self.categories = cats
                self.query_one("#report-category", Select).set_options(self._options())
        self.query_one("#report-category").display = len(self.categories) > 1 or self.category is not None
        body = self.query_one("#report-body", VerticalScroll)
        await body.remove_children()
        await body.mount_all(report_widgets(report))
        body.scroll_home(animate=False)
        parts = [f"{report.votes_used:,} vote{'s' if report.votes_used != 1 else ''}"]
        if report.votes_demo_excluded and not report.filters.include_demo:
            n = report.votes_demo_excluded
            parts.append(f"{n:,} demo vote{'s' if n != 1 else ''} out")
        if report.filters.category is not None:
            parts.append(f"category {one_line(report.filters.category)}")
        self._status(" · ".join(parts))

    def _status(self, text: str) -> None:
        self.query_one("#report-status", Static).update(Text(text))

    def chart(self, name: str) -> Chart | None:
        """The chart `name` (ratings, failures, ttft, duration, speed, checks), if shown."""
        found = self.query(f"#chart-{name}")
        return found.first(Chart) if found else None

    def body_text(self) -> str:
        """Every line of the report as plain text, scrolled out or not (tests, copy)."""
        parts = []
        for w in self.query_one("#report-body").children:
            if isinstance(w, Chart):
                parts.append(w.plain_text())
            elif isinstance(w, Static):
                parts.append(str(w.render()))
        return "\n".join(parts)

    # ----- filters --------------------------------------------------------------
    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        if event.value != self.include_demo:
            self.include_demo = event.value
            self.recompute()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        value = event.value if isinstance(event.value, str) else None
        if value != self.category:
            self.category = value
            self.recompute()

    def action_toggle_demo(self) -> None:
        box = self.query_one("#report-demo", Checkbox)
        box.value = not box.value          # Changed -> recompute

    def action_focus_category(self) -> None:
        select = self.query_one("#report-category", Select)
        if not select.display:
            self.lineup.say("Only one category in this report.")
            return
        select.focus()
        select.expanded = True

    def set_category(self, category: str | None) -> None:
        select = self.query_one("#report-category", Select)
        if category is None:
            select.clear()
        else:
            select.value = category        # Changed -> recompute

    def action_recompute(self) -> None:
        self.recompute()

    def action_show_decision(self) -> None:
        found = self.query("#report-decision")
        if not found:
            self.lineup.say("No decision in this report: it needs votes.")
            return
        self.query_one("#report-body", VerticalScroll).scroll_to_widget(found.first(), top=True, animate=False)

    def action_close(self) -> None:
        if self.standalone:
            self.app.exit(0)
        else:
            self.dismiss()

    # ----- command palette --------------------------------------------------------
    def palette_commands(self):
        demo = "Report: leave out demo models" if self.include_demo else "Report: include demo models"
        cmds = [
            (demo, "demo answers and votes in or out", self.action_toggle_demo),
            ("Report: refresh", "recompute from the record", self.action_recompute),
            ("Report: decision", "P(best), recommendation, routing and Pareto charts", self.action_show_decision),
            ("Report: back", "close the report", self.action_close),
        ]
        if len(self.categories) > 1:
            cmds.append(("Report: pick a category", "one category or all", self.action_focus_category))
        if self.category is not None:
            cmds.append(("Report: all categories", "drop the category filter", lambda: self.set_category(None)))
        return cmds
