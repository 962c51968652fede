"""The report over a real store: JSON shape, what counts (current votes, no
demo, filters), the side tables, the empty/demo-only messages, and escaping
of recorded text in Markdown, HTML and the terminal."""

from __future__ import annotations

import json
import re

import pytest

from core.report import ReportFilters, build_report, render_html, render_markdown
from lineup.cli import main
from store import CheckResultRecord, Store, TagRecord
from tests.report_support import T0, Builder, two_way

EVIL = "<script>alert(1)</script>|x\x1b[31m"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "report.db"
    store = Store.open(path)
    yield store
    store.close()


KEYS = {"name", "rating", "ci_low", "ci_high", "rank_low", "rank_high", "votes", "wins", "ties", "losses"}


def test_json_shape_and_counts(db):
    b = Builder(db)
    two_way(b, {("alpha", "beta"): 6, ("beta", "alpha"): 3, ("beta", "gamma"): 5, ("gamma", "beta"): 2,
                 ("alpha", "gamma"): 4, ("gamma", "alpha"): 4})
    s = b.session(["alpha", "gamma"])
    b.vote(s, b.turn(s, 0), "tie")
    data = json.loads(build_report(db, rounds=50, seed=1).to_json())
    assert data["message"] is None and data["votes_used"] == 25
    rows = {m["name"]: m for m in data["models"]}
    assert set(rows) == {"alpha", "beta", "gamma"}
    for m in data["models"]:
        assert KEYS <= set(m)
        assert m["ci_low"] <= m["rating"] <= m["ci_high"]
        assert 1 <= m["rank_low"] <= m["rank_high"] <= 3
    assert (rows["alpha"]["wins"], rows["alpha"]["ties"], rows["alpha"]["losses"], rows["alpha"]["votes"]) == (10, 1, 7, 18)
    assert (rows["gamma"]["wins"], rows["gamma"]["ties"], rows["gamma"]["losses"]) == (6, 1, 9)
    assert [m["name"] for m in data["models"]] == sorted(rows, key=lambda n: -rows[n]["rating"])
    assert sum(m["rating"] for m in data["models"]) / 3 == pytest.approx(1000, abs=1e-6)
    for key in ("groups", "gaps", "position_bias", "consistency", "failure_modes", "engineering", "checks"):
        assert key in data


def test_superseded_votes_do_not_count(db):
    b = Builder(db)
    s = b.session(["p", "q"])
    t = b.turn(s, 0)
    old = b.vote(s, t, "p")
    b.vote(s, t, "q", supersedes=old.id, created=T0 + 5)
    rows = {m.name: m for m in build_report(db, rounds=10).models}
    assert rows["q"].wins == 1 and rows["p"].wins == 0 and rows["p"].votes == 1


def test_n_way_pick_and_ranking_from_the_store(db):
    b = Builder(db)
    s = b.session(["x", "y", "z"])
    b.vote(s, b.turn(s, 0), "y")
    b.vote(s, b.turn(s, 1), "z", ranking=["z", "x", "y"])
    b.vote(s, b.turn(s, 2), "all_bad")
    rows = {m.name: m for m in build_report(db, rounds=10).models}
    assert (rows["y"].wins, rows["y"].losses, rows["y"].ties) == (2, 2, 2)
    assert (rows["z"].wins, rows["z"].losses, rows["z"].ties) == (2, 1, 2)
    assert (rows["x"].wins, rows["x"].losses, rows["x"].ties) == (1, 2, 2)


def test_empty_database_says_so(db, tmp_path, capsys):
    report = build_report(db, rounds=10)
    assert report.models == [] and report.empty
    assert "no sessions" in report.message
    assert main(["report", "--db", str(db.path)]) == 0
    out = capsys.readouterr().out
    assert "no sessions" in out
    assert main(["report", "--db", str(tmp_path / "nothing-here.db")]) == 0
    assert "No database" in capsys.readouterr().out


def test_a_report_whose_votes_are_all_on_demo_models_shows_them_marked_demo(db, capsys):
    """Every vote in scope on demo models: the report used to say only that
    they were left out (empty, exit 0). It shows them, marked demo, and the
    same with --include-demo (not marked: asked for)."""
    b = Builder(db)
    s = b.session(["demo-fast", "demo-slow"], demo={"demo-fast", "demo-slow"})
    t = b.turn(s, 0)
    b.output(s, t, "demo-fast")
    b.output(s, t, "demo-slow")
    b.vote(s, t, "demo-fast")
    report = build_report(db, rounds=10)
    assert report.demo and report.message is None and report.votes_demo_excluded == 0
    assert {m.name for m in report.models} == {"demo-fast", "demo-slow"}
    assert {e.model for e in report.engineering} == {"demo-fast", "demo-slow"}
    assert main(["report", "--db", str(db.path)]) == 0
    assert capsys.readouterr().out.startswith("DEMO: every vote here is on demo models")
    shown = build_report(db, ReportFilters(include_demo=True), rounds=10)
    assert {m.name for m in shown.models} == {"demo-fast", "demo-slow"} and shown.message is None
    assert not shown.demo


def test_votes_with_a_demo_contestant_are_left_out(db):
    b = Builder(db)
    two_way(b, {("real1", "real2"): 2})
    s = b.session(["real1", "demo-x"], demo={"demo-x"})
    b.vote(s, b.turn(s, 0), "real1")
    report = build_report(db, rounds=10)
    assert {m.name for m in report.models} == {"real1", "real2"} and report.votes_demo_excluded == 1


def test_filters(db):
    b = Builder(db)
    s1 = b.session(["a1", "b1"])
    b.vote(s1, b.turn(s1, 0, category="code"), "a1", rater="ann", created=T0)
    b.vote(s1, b.turn(s1, 1, category="math"), "b1", rater="bob", created=T0 + 86400 * 10)
    s2 = b.session(["a1", "c1"])
    b.vote(s2, b.turn(s2, 0, category="code"), "c1", rater="ann", created=T0)

    def wins(filters):
        return {m.name: m.wins for m in build_report(db, filters, rounds=10).models}

    assert wins(ReportFilters(category="code")) == {"a1": 1, "b1": 0, "c1": 1}
    assert wins(ReportFilters(rater="bob")) == {"a1": 0, "b1": 1}
    assert wins(ReportFilters(sessions=[s2.id])) == {"a1": 0, "c1": 1}
    assert wins(ReportFilters(since=T0 + 86400)) == {"a1": 0, "b1": 1}
    report = build_report(db, rounds=10)
    assert set(report.by_category) == {"code", "math"} and set(report.by_rater) == {"ann", "bob"}
    assert {m.name for m in report.by_category["math"].models} == {"a1", "b1"}
    nothing = build_report(db, ReportFilters(category="poetry"), rounds=10)
    assert nothing.models == [] and "filters" in nothing.message


def test_cli_filters_and_bad_input(db, capsys):
    b = Builder(db)
    two_way(b, {("m1", "m2"): 3})
    assert main(["report", "--db", str(db.path), "--since", "last tuesday"]) == 2
    assert "--since" in capsys.readouterr().err
    assert main(["report", "--db", str(db.path), "--session", "NOPE"]) == 2
    assert "NOPE" in capsys.readouterr().err
    assert main(["report", "--db", str(db.path), "--json", "--bootstrap", "20", "--since", "2020-01-01"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {m["name"] for m in data["models"]} == {"m1", "m2"} and data["rounds"] == 20


def test_position_bias(db):
    b = Builder(db)
    s = b.session(["l", "r"])
    for k in range(30):   # whoever is on the left wins, sides alternate
        positions = ["A", "B"] if k % 2 == 0 else ["B", "A"]
        b.vote(s, b.turn(s, k), "l" if k % 2 == 0 else "r", positions=positions)
    b.vote(s, b.turn(s, 99), "tie")
    bias = build_report(db, rounds=10).position_bias
    left, right = bias.rows
    assert (left.position, left.votes, left.wins, left.win_rate) == (0, 30, 30, 1.0)
    assert right.wins == 0 and left.expected == 0.5
    assert 0.85 < left.ci_low < 1.0 and left.ci_high == 1.0
    assert bias.decisive_votes == 30 and bias.no_winner_votes == 1


def test_rater_consistency(db):
    b = Builder(db)
    s1, s2 = b.session(["u", "v"]), b.session(["v", "u"])
    b.vote(s1, b.turn(s1, 0, case_id="c1"), "u", rater="ann")
    b.vote(s2, b.turn(s2, 0, case_id="c1"), "v", rater="ann")     # ann changed her mind
    b.vote(s1, b.turn(s1, 1, case_id="c2"), "u", rater="ann")
    b.vote(s2, b.turn(s2, 1, case_id="c2"), "u", rater="ann")     # consistent
    b.vote(s2, b.turn(s2, 2, case_id="c2"), "u", rater="bob")     # agrees with ann twice
    c = build_report(db, rounds=10).consistency
    ann = next(r for r in c.raters if r.rater == "ann")
    assert (ann.repeated, ann.agreed, ann.rate) == (2, 1, 0.5)
    assert (c.inter_rater_pairs, c.inter_rater_agreed) == (2, 2)


def test_grouping_by_counting_gives_np_unique_s_groups():
    """`figures._ranks` counts instead of sorting where keys are dense; it
    must number groups exactly as `np.unique(..., return_inverse=True)`
    does, dense or sparse, with repeats, a single key, none."""
    import numpy as np

    from core.report.figures import _ranks

    rng = np.random.default_rng(7)
    cases = [rng.integers(0, 50, 1000), rng.integers(0, 10 ** 9, 1000), np.array([5, 5, 5]), np.array([0]),
             np.zeros(0, dtype=np.int64), np.arange(3000)[::-1] * 2, rng.integers(0, 5000, 1000)]
    for key in cases:
        expected = np.unique(key, return_inverse=True)[1].reshape(-1)
        np.testing.assert_array_equal(_ranks(key), expected)


def test_failure_modes_engineering_checks(db):
    b = Builder(db)
    s = b.session(["fast", "slow"], prices={"slow": {"input_per_mtok": 1.0, "output_per_mtok": 10.0}})
    tags = []
    for k in range(4):
        t = b.turn(s, k, category="code" if k < 2 else "math")
        f = b.output(s, t, "fast", ttft=100.0 + k, duration=600.0, out_tokens=100, cost=0.5)
        if k == 3:
            b.output(s, t, "slow", status="error", error_kind="rate_limit", ttft=None, duration=None,
                     out_tokens=None, in_tokens=None)
            sl = b.output(s, t, "slow", attempt=2, ttft=2000.0, duration=4000.0, out_tokens=20)
        else:
            sl = b.output(s, t, "slow", ttft=2000.0, duration=4000.0, out_tokens=20)
        tags.append(TagRecord(output_id=sl.id, tag="too_verbose", rater="ann"))
        if k == 0:
            tags.append(TagRecord(output_id=f.id, tag="format_error", rater="ann"))
            tags.append(TagRecord(output_id=f.id, tag="hallucination", rater="ann"))
        db.add_check_result(CheckResultRecord(output_id=f.id, check="valid_json", passed=True))
        db.add_check_result(CheckResultRecord(output_id=sl.id, check="valid_json", passed=k % 2 == 0))
    for tag in tags:
        db.add_tag(tag)
    db.remove_tag(tags[-1].id)          # removed tags do not count
    report = build_report(db, rounds=10)

    fm = {f.model: f for f in report.failure_modes}
    assert fm["slow"].answers == 4 and fm["slow"].tags["too_verbose"].count == 3
    assert fm["slow"].tags["too_verbose"].rate == 0.75
    assert fm["fast"].tagged == 1 and set(fm["fast"].tags) == {"format_error", "hallucination"}

    eng = {e.model: e for e in report.engineering}
    assert eng["slow"].requests == 5 and eng["slow"].errors == 1 and eng["slow"].errors_by_kind == {"rate_limit": 1}
    assert eng["slow"].error_rate == pytest.approx(0.2)
    assert eng["fast"].ttft_ms.p50 == pytest.approx(101.5) and eng["fast"].ttft_ms.n == 4
    assert eng["fast"].output_tokens_per_s_p50 == pytest.approx(100 / 0.4985, rel=0.02)
    assert eng["fast"].cost == pytest.approx(2.0)                      # recorded costs
    assert eng["slow"].cost == pytest.approx(4 * (10 * 1.0 + 20 * 10.0) / 1e6)   # from the session's price
    assert eng["slow"].cost_known == 4

    checks = {(c.model, c.check): c for c in report.checks}
    assert checks[("slow", None)].rate == 0.5 and checks[("fast", "valid_json")].rate == 1.0
    cats = {(c.model, c.category): c for c in report.checks_by_category}
    assert cats[("slow", "code")].passed == 1 and cats[("slow", "math")].total == 2


def test_stability_from_repeats(db):
    b = Builder(db)
    s = b.session(["steady", "shaky"], kind="run")
    for r in range(3):
        t = b.turn(s, r, case_id="case-1", repeat=r)
        st = b.output(s, t, "steady", text="The answer is 42.")
        sh = b.output(s, t, "shaky", text=["42", "forty two, I think", "no idea"][r])
        db.add_check_result(CheckResultRecord(output_id=st.id, check="contains", passed=True))
        db.add_check_result(CheckResultRecord(output_id=sh.id, check="contains", passed=r == 0))
    rows = {x.model: x for x in build_report(db, rounds=10).stability}
    assert rows["steady"].cases == 1 and rows["steady"].runs == 3
    assert rows["steady"].flaky_checks == 0 and rows["steady"].pass_rate_sd_mean == 0
    assert rows["shaky"].flaky_checks == 1 and rows["shaky"].pass_rate_sd_mean > 0.4
    if rows["steady"].exact_match_rate is not None:       # core.report.stability present
        assert rows["steady"].exact_match_rate == 1.0 and rows["shaky"].exact_match_rate == 0.0


def test_markdown_html_and_terminal_escape_recorded_text(db, tmp_path, capsys):
    b = Builder(db)
    two_way(b, {(EVIL, "plain"): 3, ("plain", EVIL): 1})
    s = b.session([EVIL, "plain"])
    t = b.turn(s, 0, category="<b>cat</b>")
    o = b.output(s, t, EVIL)
    db.add_tag(TagRecord(output_id=o.id, tag="<img src=x onerror=alert(1)>", rater="ann"))
    report = build_report(db, rounds=20)

    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert "<script" not in page and "<img" not in page and "<b>cat" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "\x1b" not in page
    assert not re.search(r"<(link|script)\b|src=\"http", page)        # self-contained

    text = render_markdown(report)
    assert "\x1b" not in text and "<script>" not in text
    table = [ln for ln in text.splitlines() if ln.startswith("| ") and "script" in ln][0]
    assert table.count(" | ") == 9      # the pipe in the name did not add a column

    md_file, html_file = tmp_path / "r.md", tmp_path / "r.html"
    assert main(["report", "--db", str(db.path), "--bootstrap", "20", "--md", str(md_file),
                 "--html", str(html_file)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "alert(1)" in out and "plain" in out
    assert md_file.read_text(encoding="utf-8") == render_markdown(report)
    assert "<svg" in html_file.read_text(encoding="utf-8")


def test_report_ratings_match_the_ratings_module(db):
    from core.stats.ratings import BattleSet, decompose_vote, rate

    b = Builder(db)
    pairs = {("a", "b"): 7, ("b", "a"): 4, ("b", "c"): 6, ("c", "b"): 3, ("c", "a"): 2, ("a", "c"): 5}
    two_way(b, pairs)
    direct = rate(BattleSet.from_votes([decompose_vote([x, y], x) for (x, y), n in pairs.items()
                                        for _ in range(n)]), rounds=0)
    via_store = build_report(db, rounds=0)
    assert {m.name: round(m.rating, 6) for m in via_store.models} == \
        {m.name: round(m.rating, 6) for m in direct.models}


def test_report_is_reproducible(db):
    b = Builder(db)
    two_way(b, {("a", "b"): 7, ("b", "a"): 4, ("b", "c"): 6, ("c", "b"): 3})
    one = build_report(db, rounds=30, seed=5).model_dump(exclude={"generated_at"})
    two = build_report(db, rounds=30, seed=5).model_dump(exclude={"generated_at"})
    assert one == two


def test_votes_needed_is_a_number_only_where_it_means_something(db, tmp_path, capsys):
    """Issue 11, item 19. Two models tied 20-20 (gap ~0) and a model with one
    lucky win: the report used to print a nine-digit "~N more votes" for the
    tie and put the one-vote model at the top of the table with "~N more
    votes" of its own. Now: "not enough votes" in both places, and the
    one-vote model keeps its row, after the ranked ones, with no rank."""
    b = Builder(db)
    # even1 and even2 end up 0.0003 Elo points apart
    two_way(b, {("even1", "even2"): 20, ("even2", "even1"): 20, ("even1", "steady"): 20, ("steady", "even1"): 10,
                 ("even2", "steady"): 22, ("steady", "even2"): 11, ("lucky", "steady"): 1})
    md, html_path = tmp_path / "r.md", tmp_path / "r.html"
    assert main(["report", "--db", str(db.path), "--bootstrap", "200", "--seed", "1", "--md", str(md),
                 "--html", str(html_path)]) == 0
    out = capsys.readouterr().out
    assert main(["report", "--db", str(db.path), "--bootstrap", "200", "--seed", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {m["name"]: m for m in data["models"]}
    votes = data["votes_used"]

    # no estimate that extrapolates past 100x the votes so far, and none for a gap of ~0
    for g in data["gaps"]:
        if g["more_votes"] is not None:
            assert g["more_votes"] <= 100 * votes and g["gap"] >= 1
    tie = next(g for g in data["gaps"] if {g["upper"], g["lower"]} == {"even1", "even2"})
    assert tie["gap"] < 1 and tie["more_votes"] is None
    # the one-vote model: rated, listed last, not ranked, and says why
    assert rows["lucky"]["votes"] == 1 and rows["lucky"]["rating"] == max(m["rating"] for m in data["models"])
    assert not rows["lucky"]["ranked"] and rows["lucky"]["rank_low"] is None
    assert data["models"][-1]["name"] == "lucky" and data["models"][0]["ranked"]
    assert data["models"][0]["rank_low"] == 1
    assert "one vote only: not ranked until it has 10" in rows["lucky"]["notes"]
    for g in data["gaps"]:
        if "lucky" in (g["upper"], g["lower"]):
            assert g["more_votes"] is None

    # the terminal, Markdown and HTML say so in words, never with a huge number
    for text in (out, md.read_text(), html_path.read_text()):
        assert "not enough votes" in text
        assert not re.search(r"~\d{1,3}(,\d{3}){2,} more votes", text), text   # no ~1,000,000 and up
        assert "unknown" not in text
    first_row = next(line for line in out.splitlines() if re.match(r"^│\s*\d", line))
    assert "lucky" not in first_row
    lucky_row = next(line for line in out.splitlines() if "lucky" in line and "│" in line)
    assert re.match(r"^│\s*-\s*│", lucky_row), lucky_row
    note = next(line for line in out.splitlines() if line.startswith("  lucky: "))
    assert note.endswith("one vote only: not ranked until it has 10"), note


def test_at_80_columns_a_long_model_name_breaks_after_its_slash_or_dash_not_mid_word(db):
    """The ratings table at 80 columns folded "anthropic/claude-sonnet-4" into
    "anthropic/cla" over "ude-sonnet-4"; a name now breaks only after a "/",
    "-", "_", ":" or space, its lines joined give the name back, and at 160
    columns it is whole on one line. The figures stay whole either way."""
    import io

    from rich.console import Console

    from core.report.format import fmt
    from core.report.terminal import print_report
    from tests.synthetic import planted_store

    names = ["anthropic/claude-sonnet-4", "openai/gpt-4.1-mini", "ollama/llama3.1:8b"]
    planted_store(db, {"code": {names[0]: 20, names[1]: 0, names[2]: -30}}, 300, seed=3)
    report = build_report(db, rounds=50, seed=0)
    for width in (80, 160):
        out = io.StringIO()
        print_report(report, Console(file=out, width=width, force_terminal=False, color_system=None))
        lines = out.getvalue().split("\n")
        start = next(k for k, ln in enumerate(lines) if ln.startswith("Ratings ("))
        end = next(k for k in range(start + 3, len(lines)) if lines[k].startswith("└"))
        rows = [ln.split("│") for ln in lines[start + 4:end]]
        assert all(len(ln) <= width for ln in lines[start:end + 1])
        seen: list[list[str]] = []
        for cells in rows:
            if cells[1].strip():          # a new model's first line: its rank
                seen.append([])
            seen[-1].append(cells[2].strip())
        assert sorted("".join(parts) for parts in seen) == sorted(names), seen
        for parts in seen:
            assert all(p[-1] in " /-_:" for p in parts[:-1]), parts
            assert len(parts) == 1 if width == 160 else len(parts) > 1 or len(parts[0]) <= 13, parts
        figures = {c.strip() for cells in rows for c in cells[3:]}
        assert all(fmt(m.rating) in figures for m in report.models)


def test_fold_at_keeps_every_cell_of_a_name_within_the_width():
    """Names from the record are untrusted: wide characters, no break at all,
    the narrowest width (two cells: one wide character), 100,000 characters;
    every line fits and the lines give the name back."""
    from rich.cells import cell_len

    from core.report.format import fold_at

    for name in ("anthropic/claude-sonnet-4", "模型/大型-语言-模型-第四版", "x" * 40, "a/" * 30, "-/-/-", "",
                 "qwen2.5:72b-instruct-q4_K_M"):
        for width in (2, 3, 5, 8, 13, 24, 80):
            lines = fold_at(name, width).split("\n")
            assert all(cell_len(ln) <= width for ln in lines), (name, width, lines)
            assert "".join(lines) == name, (name, width, lines)
    long = "ab-" * 33_333
    lines = fold_at(long, 20).split("\n")
    assert "".join(lines) == long and max(map(len, lines)) <= 20


def test_eight_models_against_each_other_fit_80_columns_with_every_cell_whole(db):
    """The matchups grid of 8 models with long names: at 80 columns it is split
    into tables of the columns that fit, headers broken after a name's "/" or
    "-", and each "W-T-L p%" cell whole."""
    import io

    from rich.console import Console

    from core.report import decision_format as F
    from core.report.decision_terminal import print_matchups
    from tests.synthetic import planted_store

    names = ["openai/gpt-4.1", "openai/gpt-4.1-mini", "anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4.5",
             "google/gemini-2.5-pro", "meta/llama-4-maverick", "qwen/qwen3-235b", "mistral/large-2"]
    planted_store(db, {"code": {n: 5 * k for k, n in enumerate(names)}}, 800, seed=3)
    mu = build_report(db, rounds=20, seed=0).matchups
    out = io.StringIO()
    print_matchups(mu, Console(file=out, width=80, force_terminal=False, color_system=None))
    lines = out.getvalue().split("\n")
    assert all(len(ln) <= 80 for ln in lines)
    cells = {c.strip() for ln in lines if ln.startswith("│") for c in ln.split("│")}
    grid = F.matchup_grid(mu)
    for a, row in zip(mu.models, grid, strict=True):
        for b, c in zip(mu.models, row, strict=True):
            if a != b:
                assert F.matchup_text(c) in cells, (a, b, F.matchup_text(c))
    # each table's header, its lines joined column by column, names the models whole
    shown: list[str] = []
    head: list[list[str]] = []
    for ln in lines:
        if ln.startswith("┃"):
            head.append([c.strip() for c in ln.split("┃")[1:-1]])
        elif ln.startswith("┡"):
            shown += ["".join(parts) for parts in zip(*head, strict=True)][1:]
            head = []
    assert shown == list(mu.models), shown
    # names as headers break after "/" or "-": three tables of columns, not one a name
    assert 1 <= sum("(continued)" in ln for ln in lines) <= 2


def test_a_name_of_thousands_of_characters_takes_a_few_lines_not_hundreds(db):
    """Model names come from records (an Arena import takes any length): one
    of 5,000 characters filled 380 lines of the ratings table at 80 columns,
    and as a matchup header as many again. A name is now cut with "…" past
    three lines of its column, and a header past two names' width."""
    import io

    from rich.console import Console

    from core.report.terminal import print_report
    from tests.synthetic import planted_store

    huge = "vendor/" + "x" * 5000
    planted_store(db, {"code": {huge: 20, "openai/gpt-4.1": 0, "anthropic/claude-sonnet-4": -20}}, 300, seed=3)
    report = build_report(db, rounds=20, seed=0)
    out = io.StringIO()
    print_report(report, Console(file=out, width=80, force_terminal=False, color_system=None))
    lines = out.getvalue().split("\n")
    start = next(k for k, ln in enumerate(lines) if ln.startswith("Ratings ("))
    end = next(k for k in range(start, len(lines)) if lines[k].startswith("└"))
    assert end - start < 20, "\n".join(lines[start:end + 1])
    assert any("vendor/" in ln and "…" in "".join(lines[start:end + 1]) for ln in lines[start:end + 1])
    mu = next(k for k, ln in enumerate(lines) if ln.startswith("Model against model"))
    mu_end = next(k for k in range(mu, len(lines)) if lines[k].startswith("Decision"))
    assert mu_end - mu < 60, "\n".join(lines[mu:mu_end])
    assert all(len(ln) <= 80 for ln in lines[start:mu_end])
