"""`lineup decide` on stores with a planted truth (`tests.synthetic.planted_store`):
P(best) against a brute-force bootstrap written here from scratch (its own
resampling of votes, its own Bradley-Terry fit by Zermelo's iteration), limits
that flip feasibility, routing that finds the planted winner of each
category, the recommendation and its saving, the JSON shape, the mix from
logs, and bad input (exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.report.decision import build_decision
from core.decide.choose import decide
from core.decide.model import Limits
from core.stats.ratings import BattleSet, rate
from lineup.cli import main
from store import Store
from tests.synthetic import Profile, planted_store


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path / "planted.db")
    yield s
    s.close()


def brute_force_p_best(votes, mix, names, rounds, seed):
    """Bootstrap by hand: per category, draw its votes with replacement, fit
    Bradley-Terry by the MM iteration (Zermelo / Hunter 2004) on the win
    counts, put each fit on the Elo scale, add up share x rating, count how
    often each model comes out on top."""
    rng = np.random.default_rng(seed)
    m = len(names)
    idx = {n: k for k, n in enumerate(names)}
    scores = np.zeros((rounds, m))
    for cat, share in mix.items():
        mine = [v for v in votes if v.category == cat]
        winner = np.array([idx[v.model_a if v.outcome == "a" else v.model_b] for v in mine])
        loser = np.array([idx[v.model_b if v.outcome == "a" else v.model_a] for v in mine])
        draw = rng.integers(0, len(mine), size=(rounds, len(mine)))
        key = (np.arange(rounds)[:, None] * m * m + winner[draw] * m + loser[draw]).ravel()
        wins = np.bincount(key, minlength=rounds * m * m).reshape(rounds, m, m).astype(float)
        games = wins + wins.transpose(0, 2, 1)
        p = np.ones((rounds, m))
        for _ in range(2000):
            denom = (games / (p[:, :, None] + p[:, None, :])).sum(axis=2)
            new = wins.sum(axis=2) / denom
            new /= np.exp(np.log(new).mean(axis=1, keepdims=True))
            done = np.abs(new - p).max() < 1e-10
            p = new
            if done:
                break
        scores += share * 400.0 * np.log10(p)
    top = scores.argmax(axis=1)
    return {n: float(np.mean(top == k)) for n, k in idx.items()}


@pytest.mark.slow
def test_p_best_matches_a_brute_force_bootstrap(store):
    truth = {"code": {"a": 40, "b": 20, "c": 0}, "writing": {"a": 0, "b": 25, "c": 10}}
    planted = planted_store(store, truth, 300, seed=4)
    mix = {"code": 0.5, "writing": 0.5}
    got = build_decision(store, mix=mix, rounds=10_000, seed=1)
    want = brute_force_p_best(planted.votes, mix, ["a", "b", "c"], rounds=10_000, seed=2)
    p = {m.name: m.p_best for m in got.models}
    assert 0.2 < want["a"] < 0.8 and 0.2 < want["b"] < 0.8          # a real contest, not a foregone one
    for name in want:
        assert p[name] == pytest.approx(want[name], abs=0.02), (p, want)
    assert sum(p.values()) == pytest.approx(1.0)
    # another mix, another answer: all of the weight on code makes a the favourite
    code_only = build_decision(store, mix={"code": 1}, rounds=4000, seed=1)
    want_code = brute_force_p_best(planted.votes, {"code": 1.0}, ["a", "b", "c"], rounds=4000, seed=3)
    for m in code_only.models:
        assert m.p_best == pytest.approx(want_code[m.name], abs=0.03)
    assert code_only.best == "a"


def test_categories_draw_independently(store):
    """Each category's bootstrap has its own seed: with the same seed for all,
    two categories of identical votes would draw identical rounds."""
    truth = {"x": {"a": 0, "b": 0}, "y": {"a": 0, "b": 0}}
    planted_store(store, truth, 200, seed=9)
    d = build_decision(store, rounds=200, seed=0)
    assert set(d.votes_by_category) == {"x", "y"}
    from core.report import ReportFilters, build_report

    report = build_report(store, ReportFilters(), rounds=200, seed=0)
    x, y = report.by_category["x"], report.by_category["y"]
    assert [m.ci_low for m in x.models] != [m.ci_low for m in y.models]


def test_limits_flip_feasibility(store):
    truth = {"general": {"fast": 0, "slow": 120, "pricey": 60}}
    profiles = {"fast": Profile(ttft_ms=200, duration_ms=900, cost=0.5e-3, pass_rate=0.95),
                "slow": Profile(ttft_ms=1500, duration_ms=6000, cost=1e-3, pass_rate=0.9),
                "pricey": Profile(ttft_ms=250, duration_ms=1000, cost=4e-3, pass_rate=0.6)}
    planted_store(store, truth, 600, seed=2, profiles=profiles)
    free = build_decision(store, rounds=500)
    assert free.recommendation == "slow" and free.best == "slow"
    assert all(m.feasible for m in free.models)

    fast_only = build_decision(store, rounds=500, limits=Limits(max_p95_ttft_ms=1000))
    rows = {m.name: m for m in fast_only.models}
    assert not rows["slow"].feasible and rows["slow"].p_best == 0.0
    assert "p95 time to first token" in rows["slow"].why_infeasible and "above the limit of 1,000 ms" in \
        rows["slow"].why_infeasible
    assert fast_only.recommendation == "pricey" and rows["pricey"].feasible
    assert sum(m.p_best for m in fast_only.models) == pytest.approx(1.0)

    cheap = build_decision(store, rounds=500, limits=Limits(max_p95_ttft_ms=1000, max_cost_per_1k=2.0))
    rows = {m.name: m for m in cheap.models}
    assert rows["pricey"].cost_per_1k == pytest.approx(4.0)
    assert not rows["pricey"].feasible and "cost per 1,000 answers $4 is above the limit of $2" in \
        rows["pricey"].why_infeasible
    assert cheap.recommendation == "fast" and rows["fast"].p_best == 1.0

    strict = build_decision(store, rounds=500, limits=Limits(min_pass_rate=0.99, max_p95_ttft_ms=1000))
    assert strict.recommendation is None and all(m.p_best == 0.0 for m in strict.models)
    assert strict.binding_limit == "--min-pass-rate 0.99"          # rules out all three
    assert "No feasible model" in strict.message and "--min-pass-rate 0.99" in strict.message
    for m in strict.models:
        assert "check pass rate" in m.why_infeasible and "below the minimum of 99.0%" in m.why_infeasible


def test_a_limit_on_a_figure_never_recorded_is_not_met(store):
    planted_store(store, {"g": {"a": 50, "b": 0}}, 200, seed=1)      # no checks recorded
    d = build_decision(store, rounds=200, limits=Limits(min_pass_rate=0.5))
    assert d.recommendation is None
    for m in d.models:
        assert m.pass_rate is None and "no check pass rate recorded to check against" in m.why_infeasible


def test_the_recommendation_is_the_cheapest_model_tied_with_the_best(store):
    """Two models the votes cannot tell apart, one three times cheaper: it is
    recommended, with what it saves; a clearly worse and cheaper one is not."""
    truth = {"g": {"top": 30, "twin": 25, "weak": -200}}
    profiles = {"top": Profile(cost=3e-3), "twin": Profile(cost=1e-3), "weak": Profile(cost=0.1e-3)}
    planted_store(store, truth, 300, seed=5, profiles=profiles)
    d = build_decision(store, rounds=1000)
    assert set(d.tied_with_best) == {"top", "twin"} and d.tied_with_best[0] == d.best
    assert d.recommendation == "twin"
    best_cost = next(m.cost_per_1k for m in d.models if m.name == d.best)
    assert d.saving_vs_best == pytest.approx(best_cost - 1.0)
    assert "weak" not in d.tied_with_best


def test_routing_picks_the_planted_winner_of_each_category(store):
    truth = {"code": {"coder": 200, "writer": 0, "mathlete": 0},
             "writing": {"coder": 0, "writer": 200, "mathlete": 0},
             "math": {"coder": 0, "writer": 0, "mathlete": 200}}
    profiles = {"coder": Profile(cost=1e-3), "writer": Profile(cost=2e-3), "mathlete": Profile(cost=3e-3)}
    planted_store(store, truth, 300, seed=7, profiles=profiles)
    mix = {"code": 0.5, "writing": 0.3, "math": 0.2}
    d = build_decision(store, mix=mix, rounds=1000)
    routes = {r.category: r for r in d.routing}
    assert {c: r.choose for c, r in routes.items()} == {"code": "coder", "writing": "writer", "math": "mathlete"}
    assert all(r.tied == [r.choose] and r.p_best > 0.99 for r in routes.values())
    assert d.recommendation == "coder"          # half the traffic is code
    # the saving: what each category's choice saves over sending it to the recommendation
    assert routes["code"].saving == pytest.approx(0.0)
    assert routes["writing"].saving == pytest.approx(0.3 * (1.0 - 2.0))
    assert routes["math"].saving == pytest.approx(0.2 * (1.0 - 3.0))
    assert d.routing_saving == pytest.approx(sum(r.saving for r in d.routing))
    assert d.routing_cost_per_1k == pytest.approx(0.5 * 1 + 0.3 * 2 + 0.2 * 3)


def test_a_model_without_votes_in_a_category_is_reported_not_dropped(store):
    planted_store(store, {"code": {"a": 50, "b": 0, "c": 0}, "chat": {"a": 0, "b": 0}}, 300, seed=3)
    d = build_decision(store, mix={"code": 0.5, "chat": 0.5}, rounds=300)
    rows = {m.name: m for m in d.models}
    assert rows["c"].p_best is None and rows["c"].missing_categories == ["chat"]
    assert any("not scored for this mix" in w and "c (chat)" in w for w in d.warnings)
    assert rows["a"].p_best + rows["b"].p_best == pytest.approx(1.0)
    # a mix category with no votes at all: said, and the rest of the mix carries the decision
    d = build_decision(store, mix={"code": 0.5, "legal": 0.5}, rounds=300)
    assert d.unrated_categories == ["legal"] and any("no votes at all in legal" in w for w in d.warnings)
    assert d.mix == {"code": 0.5, "legal": 0.5} and [r.category for r in d.routing] == ["code"]


def test_pareto_frontier(store):
    truth = {"g": {"best": 100, "mid": 50, "bad_deal": 40, "cheap": 0}}
    profiles = {"best": Profile(cost=4e-3, duration_ms=4000), "mid": Profile(cost=2e-3, duration_ms=2000),
                "bad_deal": Profile(cost=3e-3, duration_ms=1000), "cheap": Profile(cost=1e-3, duration_ms=3000)}
    planted_store(store, truth, 800, seed=11, profiles=profiles, )
    d = build_decision(store, rounds=300)
    assert d.pareto_cost == ["cheap", "mid", "best"]             # bad_deal: mid is cheaper and better
    assert "bad_deal" in d.pareto_latency and "cheap" not in d.pareto_latency
    rows = {m.name: m for m in d.models}
    assert rows["mid"].on_cost_frontier and not rows["bad_deal"].on_cost_frontier


def test_decide_is_a_plain_function_of_ratings():
    """The arithmetic without a store: two categories, a shared model set."""
    rng = np.random.default_rng(0)
    results = {}
    for cat, edge in (("x", 1.0), ("y", -1.0)):
        a = ["m1"] * 200 + ["m2"] * 200
        b = ["m2"] * 200 + ["m1"] * 200
        p = 0.5 + 0.2 * edge
        out = (rng.random(400) < np.r_[np.full(200, p), np.full(200, 1 - p)]).astype(float)
        results[cat] = rate(BattleSet.from_arrays(a, b, out), rounds=400, seed=hash(cat) % 100)
    even = decide(results, [], [], mix={"x": 1, "y": 1}, rounds=400)
    skewed = decide(results, [], [], mix={"x": 9, "y": 1}, rounds=400)
    assert skewed.best == "m1" and {m.name: m.p_best for m in skewed.models}["m1"] > 0.95
    assert 0.05 < {m.name: m.p_best for m in even.models}["m1"] < 0.95


# ------------------------------------------------------------------ the command


def _lineup(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_shape(store, tmp_path, capsys):
    planted_store(store, {"code": {"a": 60, "b": 0}, "chat": {"a": 0, "b": 60}}, 200, seed=1)
    code, out, _ = _lineup(["decide", "--db", str(store.path), "--mix", "code=30", "chat=70", "--json",
                            "--bootstrap", "200"], capsys)
    assert code == 0
    data = json.loads(out)
    assert list(data)[:5] == ["mix", "models", "recommendation", "tied_with_best", "routing"]
    assert data["mix"] == {"code": 0.3, "chat": 0.7}
    assert list(data["models"][0])[:11] == ["name", "p_best", "feasible", "why_infeasible", "rating", "ci_low",
                                            "ci_high", "p95_ttft_ms", "p95_duration_ms", "cost_per_1k", "pass_rate"]
    assert list(data["routing"][0])[:4] == ["category", "choose", "p_best", "saving"]
    assert data["recommendation"] == "b"
    # the same store, mix and seed: the same decision
    assert _lineup(["decide", "--db", str(store.path), "--mix", "code=30", "chat=70", "--json",
                    "--bootstrap", "200"], capsys)[1] == out


def test_mix_from_logs_takes_the_strata_lineup_sample_shows(store, tmp_path, capsys):
    planted_store(store, {"code": {"a": 60, "b": 0}, "chat": {"a": 0, "b": 60}}, 200, seed=1)
    logs = tmp_path / "logs.jsonl"
    logs.write_text("".join(json.dumps({"prompt": f"q{k}", "kind": "code" if k % 4 == 0 else "chat"}) + "\n"
                            for k in range(100)))
    code, out, _ = _lineup(["decide", "--db", str(store.path), "--mix-from", str(logs), "--by", "kind", "--json",
                            "--bootstrap", "100"], capsys)
    assert code == 0
    data = json.loads(out)
    assert data["mix"] == {"chat": 0.75, "code": 0.25}
    assert "logs.jsonl by kind: 100 records" in data["mix_source"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x", "kind": "a"}\n{"prompt": 3, "kind": "b"}\n')
    code, _, err = _lineup(["decide", "--db", str(store.path), "--mix-from", str(bad), "--by", "kind"], capsys)
    assert code == 2 and "bad.jsonl:2" in err


@pytest.mark.parametrize("args, says", [
    (["--mix", "code"], "expected CATEGORY=SHARE"),
    (["--mix", "code=lots"], "'lots' is not a number"),
    (["--mix", "code=-1"], "finite number of 0 or more"),
    (["--mix", "code=0"], "at least one share must be above 0"),
    (["--mix", "nothing=1"], "no votes in any category of the mix (nothing)"),
    (["--min-pass-rate", "2"], "--min-pass-rate must be between 0 and 1"),
    (["--max-p95-ttft-ms", "-5"], "--max-p95-ttft-ms must be 0 or more"),
    (["--mix-from", "x.jsonl"], "--mix-from needs --by FIELD"),
    (["--by", "kind"], "--by goes with --mix-from"),
    (["--bootstrap", "0"], "--bootstrap must be at least 1"),
    (["--confidence", "1.5"], "--confidence must be between 0 and 1"),
])
def test_bad_input_exits_2_and_says_what(store, capsys, args, says):
    planted_store(store, {"code": {"a": 60, "b": 0}}, 50, seed=1)
    code, _, err = _lineup(["decide", "--db", str(store.path), *args], capsys)
    assert code == 2 and says in err, err


def test_the_terminal_markdown_and_html_say_the_same(store, tmp_path, capsys):
    planted_store(store, {"code": {"a<b>": 60, "[bold]b": 0}}, 200, seed=1,
                  profiles={"a<b>": Profile(cost=2e-3), "[bold]b": Profile(cost=1e-3)})
    code, out, _ = _lineup(["decide", "--db", str(store.path), "--bootstrap", "200"], capsys)
    assert code == 0
    d = build_decision(store, rounds=200)
    assert f"Recommendation: {d.recommendation}" in out and "[bold]b" in " ".join(out.split())
    assert "Routing per category" in out and "Quality against cost per 1,000 answers" in out
    md, html = tmp_path / "d.md", tmp_path / "d.html"
    assert _lineup(["decide", "--db", str(store.path), "--bootstrap", "200", "--md", str(md)], capsys)[0] == 0
    assert _lineup(["decide", "--db", str(store.path), "--bootstrap", "200", "--html", str(html)], capsys)[0] == 0
    page = html.read_text()
    assert "<b>a</b>" not in page and "a&lt;b&gt;" in page
    assert page.index("<h2>Decision</h2>") < page.index("P(best) per model") < page.index("quality against cost")
    text = md.read_text()
    assert text.startswith("# lineup decide\n\n## Decision") and "\\[bold\\]b" in text


def test_the_html_report_opens_with_the_decision(store, tmp_path, capsys):
    """`lineup report --html`: the decision (recommendation, P(best) bars,
    Pareto chart as inline SVG) comes before the ratings table."""
    planted_store(store, {"code": {"a": 80, "b": 0}, "writing": {"a": 0, "b": 10}}, 150, seed=6,
                  profiles={"a": Profile(cost=2e-3), "b": Profile(cost=1e-3)})
    page_file = tmp_path / "r.html"
    code, _, _ = _lineup(["report", "--db", str(store.path), "--bootstrap", "100", "--html", str(page_file)], capsys)
    assert code == 0
    page = page_file.read_text(encoding="utf-8")
    decision = page.index("<h2>Decision</h2>")
    assert decision < page.index("<svg", decision) < page.index("<h2>Ratings</h2>")
    assert decision < page.index("P(best) per model") < page.index("quality against cost") < page.index(
        "<h2>Ratings</h2>")
    report = json.loads(_lineup(["report", "--db", str(store.path), "--bootstrap", "100", "--json"], capsys)[1])
    assert report["decision"]["recommendation"] in {"a", "b"}
    assert f"Recommendation: {report['decision']['recommendation']}" in page


def test_axis_of_costs_equal_but_for_rounding_has_ticks_that_advance():
    """Costs summed in another order differ by an ulp: the axis must treat
    them as equal (this once looped forever drawing the Pareto chart)."""
    from core.report import decision_format as F

    lo, hi = F.axis_range([1.0, 1.0 + 2.220446049250313e-16])
    assert hi - lo > 0.05
    ticks = F.ticks(lo, hi, 0.05)
    assert 1 <= len(ticks) <= 50 and all(lo <= t <= hi + 1e-12 for t in ticks)
    assert len(F.ticks(0.0, 1.0, 1e-20)) == 50


def test_one_uncategorised_vote_does_not_blank_the_default_decision(store):
    """A single chat vote without a category used to put "(none)" in the
    default mix, where no model has the votes to be rated: no model was rated
    in every category, so there was no P(best) at all. The default mix takes
    the categories where every model is rated, and says what it left out."""
    from core.report.build import build_report

    planted_store(store, {"code": {"a": 300, "b": 0}, None: {"a": 0, "b": 0}}, {"code": 200, None: 1}, seed=5)
    for d in (build_decision(store, rounds=300), build_report(store, rounds=300).decision):
        assert d.recommendation == "a" and d.best == "a"
        assert d.mix == {"code": 1.0}
        assert d.left_out_categories == ["(none)"]
        assert any("left out of the mix: (none) (1 vote" in w and "not every model is rated there" in w
                   for w in d.warnings), d.warnings
    # a mix given on the command line is taken as given
    d = build_decision(store, mix={"code": 0.5, "(none)": 0.5}, rounds=300)
    assert d.recommendation is None and d.left_out_categories == []


def test_the_default_mix_keeps_every_category_when_none_rates_every_model(store):
    """Too few votes everywhere: nothing is left out of the mix (there is no
    better mix to fall back to), and the decision says why there is no P(best)."""
    planted_store(store, {"code": {"a": 0, "b": 0}, "chat": {"a": 0, "b": 0}}, {"code": 4, "chat": 4}, seed=5)
    d = build_decision(store, rounds=100)
    assert set(d.mix) == {"code", "chat"} and d.left_out_categories == []
    assert d.message == "No model is rated in every category of the mix: no P(best)."


def test_at_80_columns_model_names_stay_whole_and_the_whys_go_below(store):
    """An 80-column terminal: the models table keeps each model's name on one
    line (it folded "demo/c" / "oncise") and says why a model is out of the
    limits, or not scored, under the table, not squeezed into a cell."""
    import io

    from rich.console import Console

    from core.report.decision_terminal import print_decision

    profiles = {"fast-and-cheap-model": Profile(ttft_ms=200, duration_ms=900, cost=0.5e-3),
                "slow-expensive-model": Profile(ttft_ms=1500, duration_ms=6000, cost=1e-3)}
    planted_store(store, {"code": {"fast-and-cheap-model": 20, "slow-expensive-model": 0}}, 300, seed=3,
                  profiles=profiles)
    d = build_decision(store, rounds=100, limits=Limits(max_p95_ttft_ms=1000))
    out = io.StringIO()
    print_decision(d, Console(file=out, width=80, force_terminal=False, color_system=None))
    text = out.getvalue()
    assert all(len(ln) <= 80 for ln in text.split("\n")), text
    rows = [ln for ln in text.split("\n") if ln.startswith("│ ") and ln.split("│")[1].strip().endswith("-model")]
    assert set(ln.split("│")[1].strip() for ln in rows) == {"fast-and-cheap-model", "slow-expensive-model"}
    why = next(ln for ln in text.split("\n") if ln.startswith("* slow-expensive-model: no: "))
    assert "p95 time to first token" in why


def test_a_table_too_wide_for_the_terminal_splits_its_columns_and_keeps_every_figure_whole(store):
    """At 80 columns the models and routing tables are split into tables of
    their columns that fit, each led by the name column, so that no figure
    is folded ("1,04" over "7 ms" before); at 160 columns each is one table
    with its headers on one line."""
    import io

    from rich.console import Console

    from core.report import decision_format as F
    from core.report.decision_terminal import print_decision

    profiles = {"fast-and-cheap-model": Profile(ttft_ms=200, duration_ms=900, cost=0.5e-3),
                "slow-expensive-model": Profile(ttft_ms=1500, duration_ms=6000, cost=1e-3)}
    planted_store(store, {"code": {"fast-and-cheap-model": 20, "slow-expensive-model": 0},
                          "writing": {"fast-and-cheap-model": 0, "slow-expensive-model": 20}}, 300, seed=3,
                  profiles=profiles)
    d = build_decision(store, rounds=100, limits=Limits(max_p95_ttft_ms=1000))
    assert d.routing
    cells = [c for m in d.models for c in F.model_row(m)[1:-1]] + [c for r in F.route_rows(d) for c in r[1:]]
    assert any(" " in c for c in cells)     # figures with a unit: the ones a fold cut in two
    for width in (80, 160):
        out = io.StringIO()
        print_decision(d, Console(file=out, width=width, force_terminal=False, color_system=None))
        text = out.getvalue()
        assert all(len(ln) <= width for ln in text.split("\n")), text
        table_cells = {c.strip() for ln in text.split("\n") if ln.startswith("│") for c in ln.split("│")}
        assert all(c in table_cells for c in cells if c), (width, text)
        continued = text.count("Models for this mix (continued)") + text.count("Routing per category (continued)")
        if width == 160:
            assert continued == 0, text
            assert "┃ model                ┃ P(best) ┃ mix score ┃" in text
        else:
            assert continued >= 2, text


def test_the_pareto_charts_axis_labels_stay_inside_the_width(store):
    """At 80 columns the last tick label of the duration axis ("5,000") ran
    past the chart's width and wrapped onto a line of its own."""
    from core.report.decision_terminal import pareto_chart

    profiles = {"fast": Profile(ttft_ms=100, duration_ms=1200, cost=0.4e-3),
                "slow": Profile(ttft_ms=900, duration_ms=4000, cost=3e-3),
                "mid": Profile(ttft_ms=120, duration_ms=2500, cost=0)}
    planted_store(store, {"code": {"fast": 20, "slow": 0, "mid": -30}}, 300, seed=3, profiles=profiles)
    d = build_decision(store, rounds=50)
    seen = 0
    for width in range(40, 131, 7):
        for attr, money in (("p95_duration_ms", False), ("cost_per_1k", True)):
            chart = pareto_chart(d, attr, d.pareto_latency, width, money=money)
            assert chart
            drawn = chart[:14]               # 12 rows, the rule and its labels; the legend lines wrap as text
            assert all(t.cell_len <= width for t in drawn), (width, attr, [t.plain for t in drawn])
            axis = chart[13].plain           # the tick labels, under the rule
            seen += len(axis.split())
            assert len(axis.split()) >= 2, (width, attr, axis)
    assert seen


def test_pbest_chart_tells_two_versions_apart_at_80_columns(store):
    from core.report.decision_terminal import pbest_chart

    a, b = "anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4.5"
    planted_store(store, {"code": {a: 0, b: 20}}, 200, seed=5)
    d = build_decision(store, rounds=50)
    rows = [t.plain for t in pbest_chart(d, 80)]
    shown = [r.split("  ")[0].strip() for r in rows]
    assert len(rows) == 2 and len(set(shown)) == 2, rows
    assert all(len(r) <= 80 for r in rows)
