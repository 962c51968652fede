"""Style control (`core.stats.style`, `lineup report --style-control`) and the
model-vs-model matrix (`core.report.matchups`) on stores with a planted
truth (`tests.synthetic.planted_store`): a planted taste for long answers
is recovered, and none is found where none was planted; the win / tie /
loss counts are the planted votes' and the predicted win probability is
Bradley-Terry's on the fitted ratings."""

from __future__ import annotations

import json
import math

import pytest

from core.report import ReportFilters, build_report
from lineup.cli import main
from store import Store
from tests.synthetic import Profile, planted_store

# two models equally good, one writing much longer answers, one in between
TRUTH = {"general": {"terse": 0, "verbose": 0, "mid": 0}}
PROFILES = {"terse": Profile(words=40), "verbose": Profile(words=240), "mid": Profile(words=100)}


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path / "style.db")
    yield s
    s.close()


def _coef(style, feature):
    return next(c for c in style.coefficients if c.feature == feature)


def test_a_planted_length_bias_is_recovered_and_the_adjusted_ratings_move_together(store):
    planted_store(store, TRUTH, 1500, seed=3, profiles=PROFILES, length_bias=3.0)
    report = build_report(store, ReportFilters(), rounds=200, seed=0, style_control=True)
    style = report.style
    assert style is not None and style.n_votes == 1500
    length = _coef(style, "length")
    assert length.coef > 0 and length.ci_low is not None and length.ci_low > 0, length
    rows = {r.name: r for r in style.models}
    # the raw ratings reward length: verbose clearly ahead of terse
    assert rows["verbose"].rating - rows["terse"].rating > 100
    assert rows["verbose"].ci_low > rows["terse"].ci_high
    # adjusted, the equally good models cannot be told apart
    # (model and length are entangled, each model having its own length, so
    # the adjusted ratings are less precise than the raw: intervals overlap)
    adjusted = [rows[n].adjusted for n in TRUTH["general"]]
    raw = [rows[n].rating for n in TRUTH["general"]]
    assert max(adjusted) - min(adjusted) < (max(raw) - min(raw)) / 4, rows
    for x in rows.values():
        for y in rows.values():
            assert x.adjusted_low < y.adjusted_high, (x, y)
    # nothing else was planted: every text is plain words, so no Markdown feature varies
    for feature in ("headers", "list_items", "bold"):
        assert not _coef(style, feature).varies


def test_no_bias_where_none_was_planted(store):
    planted_store(store, TRUTH, 1500, seed=5, profiles=PROFILES, length_bias=0.0)
    style = build_report(store, ReportFilters(), rounds=200, seed=0, style_control=True).style
    assert style is not None
    length = _coef(style, "length")
    assert length.ci_low is not None and length.ci_low < 0 < length.ci_high, length


def test_report_style_control_on_the_command_line(store, tmp_path, capsys):
    planted_store(store, TRUTH, 300, seed=1, profiles=PROFILES, length_bias=3.0)
    db = str(store.path)
    assert main(["report", "--db", db, "--bootstrap", "50", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["style"] is None
    assert main(["report", "--db", db, "--bootstrap", "50", "--json", "--style-control"]) == 0
    style = json.loads(capsys.readouterr().out)["style"]
    assert [c["feature"] for c in style["coefficients"]] == ["length", "headers", "list_items", "bold"]
    assert {r["name"] for r in style["models"]} == set(TRUTH["general"])
    md = tmp_path / "r.md"
    assert main(["report", "--db", db, "--bootstrap", "50", "--style-control", "--md", str(md)]) == 0
    assert "answer length" in md.read_text(encoding="utf-8")


def test_matchups_count_the_planted_votes_and_predict_from_the_ratings(store):
    truth = {"general": {"a": 100, "b": 0, "c": -50}}
    planted = planted_store(store, truth, 400, seed=7, tie=0.1)
    report = build_report(store, ReportFilters(), rounds=200, seed=0)
    m = report.matchups
    assert set(m.models) == {"a", "b", "c"}
    rating = {r.name: r.rating for r in report.models}
    for x in "abc":
        for y in "abc":
            if x == y:
                continue
            mine = [v for v in planted.votes if {v.model_a, v.model_b} == {x, y}]
            wins = sum(1 for v in mine if (v.outcome == "a") == (v.model_a == x) and v.outcome != "tie")
            ties = sum(1 for v in mine if v.outcome == "tie")
            cell = m.cell(x, y)
            assert cell is not None
            assert (cell.wins, cell.ties, cell.losses) == (wins, ties, len(mine) - wins - ties)
            want = 1.0 / (1.0 + 10 ** ((rating[y] - rating[x]) / 400.0))
            assert cell.predicted == pytest.approx(want, abs=1e-6)
            assert cell.ci_low <= cell.predicted <= cell.ci_high
    # the strongest model is predicted to beat the weakest
    assert m.cell("a", "c").predicted > 0.5 > m.cell("c", "a").predicted
    assert math.isclose(m.cell("a", "c").predicted + m.cell("c", "a").predicted, 1.0, abs_tol=1e-9)


def test_style_control_on_imported_arena_battles_with_conversations(tmp_path, capsys):
    """Arena battles that carry their conversations: the answers' texts are
    imported, so the style fit runs on them; raters here always pick the
    longer answer, whoever wrote it."""
    import random

    rng = random.Random(4)
    battles = []
    for k in range(600):
        a, b = rng.sample(["p", "q", "r"], 2)
        la, lb = rng.randint(5, 200), rng.randint(5, 200)
        if la == lb:
            lb += 1
        conv = lambda n, k=k: [{"role": "user", "content": f"question {k}"},            # noqa: E731
                          {"role": "assistant", "content": " ".join(["word"] * n)}]
        battles.append({"model_a": a, "model_b": b, "winner": "model_a" if la > lb else "model_b",
                        "question_id": f"q{k}", "tstamp": 1.7e9 + k, "conversation_a": conv(la),
                        "conversation_b": conv(lb)})
    src = tmp_path / "battles.json"
    src.write_text(json.dumps(battles), encoding="utf-8")
    db = str(tmp_path / "arena.db")
    assert main(["import", "--db", db, str(src)]) == 0
    capsys.readouterr()
    assert main(["report", "--db", db, "--bootstrap", "100", "--json", "--style-control"]) == 0
    style = json.loads(capsys.readouterr().out)["style"]
    assert style["n_votes"] == 600 and style["without_answers"] == 0
    length = style["coefficients"][0]
    assert length["feature"] == "length" and length["ci_low"] > 0
