"""The report screen: rating whiskers on a shared scale (open sides drawn as
arrows, groups bracketed), the votes that would separate neighbours,
failure-mode bars, latency box plots, check pass rates; the demo toggle and
the category filter; empty and demo-only databases; how it is reached (F4,
the palette, `lineup report --tui`) and when it is refused (blind answers on
show)."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest
from tests.report_tui_data import MODELS, ODD, make_report_db
from rich.cells import cell_len
from tests.tui_support import open_store, run, screen_text, wait_for

from core.stats.ratings import ModelRating
from core.report import ReportFilters, build_report
from lineup.cli import main
from providers.demo import DEMO_MODELS
from store import Store
from tui import charts
from tui.app import ChatOptions, LineupApp, ReportOptions
from tui.help_screen import binding_groups
from tui.report_screen import ReportScreen

ROUNDS, SEED = 200, 3


@pytest.fixture(autouse=True)
def _instant_demo(monkeypatch):
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")


def expected(path, **filters):
    with Store.open(path, readonly=True) as store:
        return build_report(store, ReportFilters(**filters), rounds=ROUNDS, seed=SEED)


async def opened(pilot, loads: int = 1) -> ReportScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen) and app.screen.loads >= loads
                   and not app.screen.computing, "the report")
    await pilot.pause()
    return app.screen


def report_app(store, **options) -> LineupApp:
    return LineupApp(store, report=ReportOptions(rounds=ROUNDS, seed=SEED, **options), rater="tester")


def test_whiskers_failures_latency_and_checks(tmp_path):
    db = tmp_path / "r.db"
    make_report_db(db)
    want = expected(db)
    assert {m.name for m in want.models} == set(MODELS)

    async def scenario():
        store = await open_store(db)
        app = report_app(store)
        async with app.run_test(size=(100, 50)) as pilot:
            screen = await opened(pilot)
            assert screen.report.model_dump(exclude={"generated_at"}) == want.model_dump(exclude={"generated_at"})
            rows = screen.chart("ratings").plain_text().splitlines()
            for k, m in enumerate(want.models):          # one row per model, in rank order
                row = rows[k]
                assert m.name in row and f"{m.rating:.0f}" in row and "●" in row, row
                assert charts.fmt_rank(m) in row
            zenith = next(r for r in rows if "zenith" in r)
            assert "▶" in zenith and ">" in zenith and "+inf" in zenith    # never lost: open above
            assert all("▶" not in r and "◀" not in r for r in rows if "zenith" not in r)
            # the three that cannot be told apart share one bracket
            group = [r for r in rows[:4] if r[0] in "┏┃┗"]
            assert [r[0] for r in group] == ["┏", "┃", "┗"] and len(want.groups) == 2
            body = screen.body_text()
            for g in want.gaps:
                if not g.separated:
                    assert f"{g.upper} vs {g.lower}: gap {g.gap:.0f}" in body
                    assert f"~{g.more_votes:,} more votes" in body
            assert "zenith: lower bound: never lost or tied" in body

            fails = screen.chart("failures").plain_text()
            for f in want.failure_modes:
                for tag, stat in f.tags.items():
                    bar_and_count = rf"{tag}\s+█+[▏▎▍▌▋▊▉]?\s+{stat.count} \({100 * stat.rate:.0f}%\)"
                    assert re.search(bar_and_count, fails), fails
            assert "borealis  32 answers, 11 tagged (34%)" in fails
            assert "zenith  5 answers, 0 tagged (0%)  no tags" in fails

            ttft = screen.chart("ttft").plain_text()
            for e in want.engineering:
                line = next(r for r in ttft.splitlines() if r.startswith(e.model))
                assert "┃" in line and "█" in line and f"{e.ttft_ms.p50:,.0f} ms / {e.ttft_ms.p95:,.0f} ms" in line
            speed = screen.chart("speed").plain_text()
            assert re.search(r"cyg\[bold\]nus .*12\.1%.*timeout 4", speed)
            checks = screen.chart("checks").plain_text()
            assert "62.5% (45/72)" in checks and "json_valid" in checks and "72.2% (26/36)" in checks

            shown = screen_text(app)
            assert ODD in shown                  # markup-looking name shown verbatim
            assert "Ratings · 53 votes · 200 bootstrap rounds · seed 3" in shown
            assert "4 demo votes out" in shown
        await store.aclose()

    run(scenario())


def test_the_report_is_built_off_the_writer_thread(tmp_path):
    """The bootstrap must not hold up the writes of a stream still in flight,
    nor wait for them: with the store's writer thread busy, the report still
    computes and shows, the same report as ever."""
    db = tmp_path / "r.db"
    make_report_db(db)
    want = expected(db)
    release = threading.Event()

    async def scenario():
        store = await open_store(db)
        app = report_app(store)
        async with app.run_test(size=(100, 40)) as pilot:
            await opened(pilot)
            held = asyncio.ensure_future(store.call(lambda s: release.wait(30)))   # the writer thread, busy
            await pilot.pause()
            await pilot.press("r")
            screen = await opened(pilot, loads=2)
            assert not release.is_set() and not held.done()
            assert screen.report.model_dump(exclude={"generated_at"}) == want.model_dump(exclude={"generated_at"})
            release.set()
            await held
        await store.aclose()

    run(scenario())


def test_charts_fit_80_columns_and_scale_wider(tmp_path):
    db = tmp_path / "r.db"
    make_report_db(db)
    r = expected(db)
    draws = {
        "ratings": lambda w: charts.ratings_chart(r.models, w),
        "failures": lambda w: charts.failure_chart(r.failure_modes, w),
        "ttft": lambda w: charts.latency_chart(r.engineering, "ttft_ms", w),
        "speed": lambda w: charts.speed_chart(r.engineering, w),
        "checks": lambda w: charts.checks_chart(r.checks, w),
    }
    for name, draw in draws.items():
        narrow, wide = draw(78), draw(160)
        assert narrow and all(cell_len(t.plain) <= 78 for t in narrow), name
        assert all(cell_len(t.plain) <= 160 for t in wide), name
        assert max(cell_len(t.plain) for t in wide) > max(cell_len(t.plain) for t in narrow), name
    whisker = lambda lines: max(t.plain.count("─") for t in lines[:4])   # noqa: E731
    assert whisker(draws["ratings"](160)) > whisker(draws["ratings"](78))


def test_open_below_no_interval_and_separate_graphs():
    rows = [
        ModelRating(name="top", rating=1100, ci_low=1050, ci_high=1150, rank_low=1, rank_high=1, votes=30,
                    wins=20, ties=0, losses=10, group=0),
        ModelRating(name="never-won", rating=900, ci_low=None, ci_high=980, rank_low=2, rank_high=2, votes=5,
                    wins=0, ties=0, losses=5, group=1, open_low=True),
        ModelRating(name="island", rating=1000, ci_low=None, ci_high=None, rank_low=1, rank_high=1, votes=3,
                    wins=1, ties=0, losses=2, component=1, group=2),
    ]
    lines = [t.plain for t in charts.ratings_chart(rows, 80)]
    low = next(x for x in lines if "never-won" in x)
    assert "◀" in low and "<900" in low and "-inf .. 980" in low
    assert low.index("◀") < low.index("●") < low.index("┤")
    island = next(x for x in lines if "island" in x)
    # no bootstrap for it: the point only
    assert "●" in island and not set("├┤◀▶─╌") & set(island.split("island")[1])
    assert any("not compared with the models above" in x for x in lines)


def test_demo_only_database_shows_them_marked_demo_and_d_keeps_them_in(tmp_path):
    db = tmp_path / "demo.db"
    make_report_db(db, real=False)

    async def scenario():
        store = await open_store(db)
        app = report_app(store)
        async with app.run_test(size=(100, 40)) as pilot:
            screen = await opened(pilot)
            shown = screen_text(app)
            assert screen.report.demo and screen.report.message is None and "press d" not in shown
            assert "DEMO: every vote here is on demo models" in shown
            rows = screen.chart("ratings").plain_text()
            assert "demo-fast" in rows and "demo-slow" in rows
            await pilot.press("d")
            screen = await opened(pilot, loads=2)
            assert screen.report.message is None and screen.report.filters.include_demo
            assert not screen.report.demo and "DEMO: every vote" not in screen.body_text()
            rows = screen.chart("ratings").plain_text()
            assert "demo-fast" in rows and "demo-slow" in rows
        await store.aclose()

    run(scenario())


def test_empty_database_says_so(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "empty.db")
        app = report_app(store)
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await opened(pilot)
            assert "no sessions yet" in screen_text(app)
            assert not screen.query("Chart")
            assert not screen.query_one("#report-category").display      # nothing to pick
        await store.aclose()

    run(scenario())


def test_category_filter(tmp_path):
    db = tmp_path / "r.db"
    make_report_db(db)
    want = expected(db, category="math")

    async def scenario():
        store = await open_store(db)
        app = report_app(store)
        async with app.run_test(size=(100, 40)) as pilot:
            screen = await opened(pilot)
            assert screen.categories == ["code", "math"] and screen.query_one("#report-category").display
            screen.set_category("math")
            screen = await opened(pilot, loads=2)
            assert screen.report.filters.category == "math"
            assert screen.report.votes_used == want.votes_used < 53
            assert "category math" in screen_text(app)
            rows = screen.chart("ratings").plain_text()
            for m in want.models:
                assert f"{m.rating:.0f}" in rows
            names = [name for name, _, _ in screen.palette_commands()]
            assert "Report: all categories" in names
            screen.set_category(None)
            screen = await opened(pilot, loads=3)
            assert screen.report.filters.category is None and screen.report.votes_used == 53
        await store.aclose()

    run(scenario())


def test_f4_and_palette_open_it_from_chat_escape_goes_back(tmp_path):
    db = tmp_path / "r.db"
    make_report_db(db)

    async def scenario():
        store = await open_store(db)
        app = LineupApp(store, chat=ChatOptions(models=DEMO_MODELS[:2], seed=1), rater="tester")
        async with app.run_test(size=(100, 40)) as pilot:
            await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat")
            entries = {name: cb for name, _, cb in app.chat_screen.palette_commands() + app.palette_commands()}
            assert "Report" in entries
            await pilot.press("f4")
            screen = await opened(pilot)
            assert not screen.standalone and "zenith" in screen.chart("ratings").plain_text()
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.chat_screen, "back to the chat")
            entries["Report"]()
            await opened(pilot)
        await store.aclose()

    run(scenario())


def test_refused_while_blind_answers_are_on_show(tmp_path):
    async def scenario():
        store = await open_store(tmp_path / "b.db")
        app = LineupApp(store, chat=ChatOptions(models=DEMO_MODELS[:2], seed=1, blind=True, label_seed=3),
                        rater="tester")
        async with app.run_test(size=(100, 40)) as pilot:
            await wait_for(pilot, lambda: app.chat_screen is not None and app.screen is app.chat_screen, "chat")
            await pilot.press(*"hello", "enter")
            await wait_for(pilot, lambda: app.chat_screen.sends == 1 and not app.chat_screen.sending
                           and not app.session.streaming, "the answers")
            await pilot.press("f4")
            await pilot.pause()
            assert app.screen is app.chat_screen
            assert any("Vote first" in message for _, message in app.notices)
            await pilot.press("f2", "a")             # to the vote bar, then vote: names revealed
            await wait_for(pilot, lambda: app.session.revealed, "the reveal")
            await pilot.press("f4")
            await opened(pilot)
        await store.aclose()

    run(scenario())


def test_help_lists_the_report_keys():
    groups = dict(binding_groups(LineupApp))
    assert {b.id for b in groups["Report"]} == {"report.demo", "report.category", "report.refresh", "report.back",
                                                "report.decision"}
    assert "app.report" in {b.id for b in groups["Everywhere"]}


def test_cli_tui_flag_opens_the_app_on_the_report(tmp_path, monkeypatch, capsys):
    db = tmp_path / "r.db"
    make_report_db(db)
    with Store.open(db, readonly=True) as store:
        sid = store.list_sessions()[0].id
    calls = []
    import lineup.launch as launch

    monkeypatch.setattr(launch, "run_app", lambda path, config, **kw: calls.append((path, kw)) or 0)
    assert main(["report", "--db", str(db), "--tui", "--category", "code", "--session", sid,
                 "--bootstrap", "50", "--seed", "7", "--include-demo"]) == 0
    (path, kw), = calls
    opts = kw["report"]
    assert path == db and isinstance(opts, ReportOptions)
    assert (opts.rounds, opts.seed, opts.category, opts.include_demo, opts.sessions) == (50, 7, "code", True, [sid])
    assert main(["report", "--db", str(db), "--tui", "--json"]) == 2
    assert "--tui" in capsys.readouterr().err


def test_refused_over_a_blind_replay_and_an_unjudged_queue_case(tmp_path):
    from tests.tui_sessions import make_chat

    from tui.app import ReplayOptions, VoteOptions

    db = tmp_path / "b.db"
    sid = make_chat(db, blind=True)

    async def scenario(**options):
        store = await open_store(db)
        app = LineupApp(store, rater="tester", **options)
        async with app.run_test(size=(100, 40)) as pilot:
            await wait_for(pilot, lambda: getattr(app.screen, "panes", None), "the blind answers")
            shown = app.screen
            await pilot.press("f4")
            await pilot.pause()
            assert app.screen is shown and not isinstance(app.screen, ReportScreen)
            assert any("would tell which model wrote which" in m for _, m in app.notices)
        await store.aclose()

    run(scenario(replay=ReplayOptions(sid)))
    run(scenario(vote=VoteOptions(sid, shuffle_seed=1)))


def test_p_and_the_palette_scroll_to_the_decision(tmp_path):
    """The decision for the mix of the report's votes, as `lineup report`
    computes it: P(best) bars (the favourite's figure), the recommendation,
    the Pareto chart; and the model-against-model matrix."""
    db = tmp_path / "r.db"
    make_report_db(db)
    want = expected(db)
    assert want.decision is not None and want.decision.recommendation is not None

    async def scenario():
        store = await open_store(db)
        app = report_app(store)
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await opened(pilot)
            body = screen.query_one("#report-body")
            assert body.scroll_y == 0
            pbest = screen.chart("pbest").plain_text()
            for m in want.decision.models:
                assert m.name in pbest
            assert "◀ recommended" in pbest
            assert screen.chart("pareto-latency") is not None
            text = screen.body_text()
            assert "Model against model" in text and "predicted" in text
            await pilot.press("p")
            await pilot.pause()
            target = screen.query_one("#report-decision")
            assert body.scroll_y > 0 and body.scroll_y == pytest.approx(target.virtual_region.y, abs=1)
            body.scroll_home(animate=False)
            await pilot.pause()
            entries = {name: cb for name, _, cb in screen.palette_commands()}
            entries["Report: decision"]()
            await pilot.pause()
            assert body.scroll_y > 0
        await store.aclose()

    run(scenario())


def test_one_vote_is_one_vote_on_screen_in_the_terminal_and_the_page(tmp_path, capsys):
    """Counts read as English wherever the report shows them: "1 vote", not
    "1 votes" (seen in tmux after a first vote in the chat)."""
    from core.report import render_html
    from core.report.terminal import print_report
    from tests.synthetic import synthetic_session, write_synthetic

    db = tmp_path / "one.db"
    with Store.open(db) as s:
        write_synthetic(s, *synthetic_session(turns=1, contestants=2, seed=0))
    with Store.open(db, readonly=True) as s:
        report = build_report(s, rounds=1, seed=SEED)
    assert report.votes_used == 1
    print_report(report)
    assert "Ratings (1 vote, 1 bootstrap round, " in " ".join(capsys.readouterr().out.split())
    assert "1 vote, 1 bootstrap round, seed" in render_html(report)

    async def scenario():
        store = await open_store(db)
        app = LineupApp(store, report=ReportOptions(rounds=1, seed=SEED), rater="tester")
        async with app.run_test(size=(100, 40)) as pilot:
            screen = await opened(pilot)
            assert "Ratings · 1 vote · 1 bootstrap round · seed" in screen.body_text()
            assert "1 vote" in screen_text(app) and "1 votes" not in screen_text(app)
        await store.aclose()

    run(scenario())


def test_two_versions_of_a_model_stay_told_apart_where_a_chart_cuts_names():
    """At 80 columns a chart gives names 20 cells: "anthropic/claude-sonnet-4"
    and "anthropic/claude-sonnet-4.5" were both "anthropic/claude-so…". Cut
    names that would look the same keep their ends instead."""
    names = ["anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4.5", "openai/gpt-4.1"]
    rows = [ModelRating(name=n, rating=1000 + 10 * k, ci_low=990 + 10 * k, ci_high=1010 + 10 * k, rank_low=1,
                        rank_high=3, votes=30, wins=10, ties=0, losses=20, group=0) for k, n in enumerate(names)]
    for width in (60, 80, 100):
        lines = [t.plain for t in charts.ratings_chart(rows, width)][:3]
        shown = [ln[7:7 + charts.name_width(names, width)].strip() for ln in lines]
        assert len(set(shown)) == 3, (width, shown)
        assert all(cell_len(ln) <= width for ln in lines)
        assert "openai/gpt-4.1" in shown                  # a name that fits is untouched
        assert [s.endswith(("sonnet-4", "sonnet-4.5")) for s in shown].count(True) >= 2 or width == 100, shown


def test_fit_names_fits_every_name_and_tells_cut_ones_apart():
    from core.report.format import fit_names

    cases = [["anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4.5", "short"],
             ["模型/大型-语言-模型-第四版-甲", "模型/大型-语言-模型-第四版-乙"],
             ["x" * 5000 + "a", "x" * 5000 + "b", "x" * 5000 + "c"],
             ["prefix-" + "m" * 30 + str(k) for k in range(8)]]
    for names in cases:
        for width in (4, 10, 20, 40):
            out = fit_names(names, width)
            assert set(out) == set(names)
            assert all(cell_len(v) <= width for v in out.values()), (width, out)
            assert all(v == n for n, v in out.items() if cell_len(n) <= width)
            assert len(set(out.values())) == len(names), (width, out)
