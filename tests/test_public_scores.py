"""`lineup import --leaderboard / --online` and the report's section on
them (`core.stats.public_scores`): rows stored and replaced, Kendall tau between
public and own ranks (checked against a count of pairs written here) with a
bootstrap interval, the models whose rank changes most, Wilson intervals of
online rates and whether the orderings agree; bad CSV -> FILE:LINE: field,
exit 2, nothing imported."""

from __future__ import annotations

import itertools
import json

import pytest

from core.stats.ratings import wilson_interval
from lineup.cli import main
from store import Store
from tests.synthetic import planted_store

TRUTH = {"general": {"a": 150, "b": 75, "c": 0, "d": -75}}


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "p.db"
    with Store.open(path) as s:
        planted_store(s, TRUTH, 800, seed=2)
    return str(path)


def report(db, capsys):
    assert main(["report", "--db", db, "--bootstrap", "200", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def tau_by_hand(x, y):
    conc = disc = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        s = (x[i] - x[j]) * (y[i] - y[j])
        conc += s > 0
        disc += s < 0
    return (conc - disc) / (conc + disc)


def test_leaderboard_beside_the_ratings(db, tmp_path, capsys):
    csv = tmp_path / "lb.csv"
    # public order: b, a, c, d, e (e has no votes here); own (planted): a, b, c, d
    csv.write_text("model,score,ci_low,ci_high,source,date\n"
                   "a,1250,1240,1260,arena,2026-11\nb,1300,,,arena,2026-11\nc,1100,,,arena,2026-11\n"
                   "d,1000,,,arena,2026-11\ne,1400,,,arena,2026-11\n", encoding="utf-8")
    assert main(["import", "--db", db, "--leaderboard", str(csv)]) == 0
    assert "imported 5 public scores" in capsys.readouterr().out
    data = report(db, capsys)
    own = {m["name"]: m["rating"] for m in data["models"]}
    board = data["public"]["leaderboards"][0]
    assert (board["source"], board["date"]) == ("arena", "2026-11")
    assert board["only_public"] == ["e"]
    scores = {"a": 1250, "b": 1300, "c": 1100, "d": 1000}
    names = sorted(scores)
    assert board["tau"] == pytest.approx(tau_by_hand([scores[n] for n in names], [own[n] for n in names]))
    assert board["tau_low"] <= board["tau"] <= board["tau_high"]
    rows = {r["model"]: r for r in board["models"]}
    assert rows["a"]["public_rank"] == 2 and rows["a"]["own_rank"] == 1 and rows["a"]["rank_change"] == 1
    assert set(board["biggest_changes"]) == {"a", "b"}
    # importing again replaces the rows, never doubles them
    assert main(["import", "--db", db, "--leaderboard", str(csv)]) == 0
    capsys.readouterr()
    assert len(report(db, capsys)["public"]["leaderboards"][0]["models"]) == 4
    md = tmp_path / "r.md"
    assert main(["report", "--db", db, "--bootstrap", "50", "--md", str(md)]) == 0
    assert "Public leaderboard: arena 2026-11" in md.read_text(encoding="utf-8")


def test_online_metrics_with_wilson_intervals_and_agreement(db, tmp_path, capsys):
    csv = tmp_path / "online.csv"
    csv.write_text("model,metric,value,n,period,higher_is_better\n"
                   "a,first_pass,0.8,500,w48,true\nb,first_pass,0.7,400,w48,true\nc,first_pass,0.6,300,w48,\n"
                   "a,rework,0.1,500,w48,false\nb,rework,0.3,400,w48,false\nc,rework,0.2,300,w48,false\n",
                   encoding="utf-8")
    assert main(["import", "--db", db, "--online", str(csv)]) == 0
    capsys.readouterr()
    online = {m["metric"]: m for m in report(db, capsys)["public"]["online"]}
    fp = online["first_pass"]
    assert [r["model"] for r in fp["models"]] == ["a", "b", "c"] and fp["agrees"] is True and fp["tau"] == 1.0
    lo, hi = wilson_interval(400, 500)
    assert (fp["models"][0]["ci_low"], fp["models"][0]["ci_high"]) == pytest.approx((lo, hi))
    rw = online["rework"]          # lower is better: a, c, b online against a, b, c offline
    assert rw["higher_is_better"] is False and [r["model"] for r in rw["models"]] == ["a", "c", "b"]
    assert rw["agrees"] is False and rw["tau"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("kind,text,says", [
    ("--leaderboard", "model,score\na,12\nb,twelve\n", ":3: score: 'twelve' is not a number"),
    ("--leaderboard", "name,score\na,1\n", ":1: header: missing column model"),
    ("--leaderboard", "model,score,ci_low,ci_high\na,10,11,12\n", ":2: ci_low/ci_high"),
    ("--leaderboard", "model,score,ci_low\na,10,9\n", ":2: ci_low/ci_high: give both"),
    ("--online", "model,metric,value,n\na,fp,0.5,0\n", ":2: n:"),
    ("--online", "model,metric,value,n,higher_is_better\na,fp,0.5,10,maybe\n", ":2: higher_is_better"),
    ("--online", "model,metric,value,n\n,fp,0.5,10\n", ":2: model: empty"),
])
def test_bad_csv_names_file_line_and_field_and_imports_nothing(db, tmp_path, capsys, kind, text, says):
    csv = tmp_path / "bad.csv"
    csv.write_text(text, encoding="utf-8")
    assert main(["import", "--db", db, kind, str(csv)]) == 2
    err = capsys.readouterr().err
    assert f"{csv}{says}" in err and "nothing was imported" in err
    assert report(db, capsys)["public"] is None
