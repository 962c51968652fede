"""Graders calibrated to people (issue 29, item 5): style control on a
judge's own verdicts finds a judge planted to prefer long answers (its
length coefficient clearly positive) and its style-adjusted ratings recover
the planted ones, which its plain ratings miss; a judge that agrees with
people less than the team's threshold is flagged, in every renderer."""

from __future__ import annotations

import numpy as np

from core.answering.judge import JudgePrompt
from core.report import ReportFilters, build_report
from core.report.markdown import render_markdown
from core.stats.votes import JudgeFields
from lineup.cli import main
from store import Store
from tests.synthetic import Profile, planted_store
from tests.judge_support import planted, store_with_verdicts

#: The planted truth (Elo points, mean 1000): the best model writes the shortest answers.
TRUTH = {"m0": 1120.0, "m1": 1040.0, "m2": 960.0, "m3": 880.0}
WORDS = {"m0": 50.0, "m1": 90.0, "m2": 150.0, "m3": 250.0}


def _planted_judge(tmp_path, length_bias: float) -> Store:
    store = Store.open(tmp_path / "planted.db")
    fields = JudgeFields(alias="long-lover", prompt_hash=JudgePrompt().hash)
    planted_store(store, {"all": TRUTH}, 1500, seed=3, length_bias=length_bias,
                  profiles={m: Profile(words=w) for m, w in WORDS.items()}, judge=fields)
    return store


def test_a_judge_planted_to_prefer_long_answers_is_found_biased_and_corrected(tmp_path):
    with _planted_judge(tmp_path, length_bias=4.0) as store:
        report = build_report(store, ReportFilters(), rounds=200, seed=1, judge="long-lover")
    style = report.judge.style
    assert style.judge is not None and style.judge.n_battles == 1500
    length = next(c for c in style.judge.coefficients if c.feature == "length")
    assert length.coef > 0.5 and length.ci_low > 0          # biased: the interval excludes 0
    assert "a length bias" in style.summary
    rows = {r.name: r for r in style.judge.models}
    for name, truth in TRUTH.items():                       # corrected: each planted rating in its interval
        assert rows[name].adjusted_low <= truth <= rows[name].adjusted_high, (name, rows[name])
    # the plain judge ratings miss the truth: the long-winded worst model is lifted above its place
    missed = [n for n, t in TRUTH.items() if not rows[n].ci_low <= t <= rows[n].ci_high]
    assert "m3" in missed and rows["m3"].rating > TRUTH["m3"] + 60
    text = render_markdown(report)
    assert "Style control on the judge" in text and "style-adjusted" in text


def test_an_unbiased_judge_has_a_length_coefficient_near_zero(tmp_path):
    with _planted_judge(tmp_path, length_bias=0.0) as store:
        report = build_report(store, ReportFilters(), rounds=200, seed=1, judge="long-lover")
    length = next(c for c in report.judge.style.judge.coefficients if c.feature == "length")
    assert length.ci_low < 0 < length.ci_high
    assert "a length bias" not in report.judge.style.summary


def _pairs(kappa: float, n: int = 300, seed: int = 5) -> list[tuple[str, str, int, int]]:
    rng = np.random.default_rng(seed)
    human, judge = planted(rng, n, kappa)
    models = ["m0", "m1", "m2"]
    return [(models[k % 3], models[(k + 1) % 3], int(human[k]), int(judge[k])) for k in range(n)]


def test_a_judge_below_the_teams_agreement_threshold_is_flagged(tmp_path, capsys):
    with store_with_verdicts(tmp_path, _pairs(kappa=0.1)) as store:
        low = build_report(store, ReportFilters(), rounds=50, judge="judge")
        strict_ok = build_report(store, ReportFilters(), rounds=50, judge="judge", min_judge_agreement=0.1)
    cal = low.judge.calibration
    assert cal.agreement < 0.6 and cal.unreliable and cal.min_agreement == 0.6
    assert cal.flag.startswith("UNRELIABLE") and "below the team's threshold of 60%" in cal.flag
    assert "UNRELIABLE" in render_markdown(low)
    assert not strict_ok.judge.calibration.unreliable and strict_ok.judge.calibration.flag is None
    assert main(["report", "--db", str(tmp_path / "cal.db"), "--judge", "judge", "--bootstrap", "20",
                 "--min-judge-agreement", "0.2"]) == 0
    assert "UNRELIABLE" not in capsys.readouterr().out
    assert main(["report", "--db", str(tmp_path / "cal.db"), "--judge", "judge", "--bootstrap", "20"]) == 0
    assert "UNRELIABLE" in capsys.readouterr().out
    assert main(["report", "--db", str(tmp_path / "cal.db"), "--min-judge-agreement", "nan"]) == 2


def test_a_judge_that_agrees_with_people_is_not_flagged(tmp_path):
    with store_with_verdicts(tmp_path, _pairs(kappa=0.95)) as store:
        report = build_report(store, ReportFilters(), rounds=50, judge="judge")
    cal = report.judge.calibration
    assert cal.agreement > 0.9 and not cal.unreliable and cal.flag is None
    assert report.judge.style.judge is None and "texts" in report.judge.style.message   # no answers recorded
