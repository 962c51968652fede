"""Calibration of an LLM judge against people's votes, on simulated raters
and judges of known agreement: Cohen's kappa comes out within 0.05 of the
planted value (directly and through `lineup report --judge` on a store),
its bootstrap interval covers it, and too little overlap is said in words."""

from __future__ import annotations

import numpy as np
import pytest

from core.stats import calibration as C
from core.report import ReportFilters, build_report
from store import Store
from tests.judge_support import MODELS, planted, store_with_verdicts


def test_kappa_is_within_005_of_the_planted_value():
    for seed, target in enumerate((0.2, 0.5, 0.8)):
        x, y = planted(np.random.default_rng(seed), 3000, target)
        k = C.cohen_kappa(x, y)
        assert k is not None and abs(k - target) < 0.05, (target, k)


def test_kappa_bootstrap_interval_covers_the_planted_value_about_95_percent_of_the_time():
    covered, widths = [], []
    for seed in range(200):
        x, y = planted(np.random.default_rng(1000 + seed), 400, 0.5)
        lo, hi = C.kappa_interval(x, y, rounds=400, seed=seed)
        covered.append(lo <= 0.5 <= hi)
        widths.append(hi - lo)
    coverage = float(np.mean(covered))
    print(f"kappa bootstrap 95% interval: coverage {coverage:.3f} over 200 seeded repetitions, "
          f"mean width {np.mean(widths):.3f}")
    assert 0.90 <= coverage <= 0.99


def test_kappa_edge_cases_and_confusion():
    assert C.cohen_kappa(np.array([0, 1, 2]), np.array([0, 1, 2])) == 1.0
    assert C.cohen_kappa(np.array([0, 0]), np.array([0, 0])) is None        # chance agreement is certain
    assert C.cohen_kappa(np.array([], dtype=int), np.array([], dtype=int)) is None
    table = C.confusion(np.array([0, 0, 2, 1]), np.array([0, 2, 2, 1]))
    assert table.tolist() == [[1, 0, 1], [0, 1, 0], [0, 0, 1]]


SCORE_OF = {0: 1.0, 1: 0.5, 2: 0.0}


@pytest.mark.slow
def test_report_judge_recovers_the_planted_kappa_from_a_store(tmp_path):
    rng = np.random.default_rng(7)
    n = 2400
    human, judge = planted(rng, n, 0.6)
    pairs = []
    for k in range(n):
        x, y = sorted(rng.choice(MODELS, size=2, replace=False).tolist())
        pairs.append((x, y, int(human[k]), int(judge[k])))
    with store_with_verdicts(tmp_path, pairs) as store:
        report = build_report(store, ReportFilters(), rounds=200, judge="judge")
    cal = report.judge.calibration
    assert cal.enough and cal.comparisons == n
    assert abs(cal.kappa - 0.6) < 0.05 and cal.kappa_ci_low < 0.6 < cal.kappa_ci_high
    assert sum(map(sum, cal.confusion)) == n
    assert np.trace(np.array(cal.confusion)) == int(np.sum(human == judge))
    assert {r.name for r in cal.by_category} == {"odd", "even"} and {r.name for r in cal.by_rater} == {"ana", "bo"}
    assert report.judge.position.rate == 1.0          # the same verdict in both orders
    # people's ratings are people's: the report's table counts the n human votes only
    assert report.votes_used == n and report.judge_votes_excluded == 2 * n
    methods = [t.method for t in report.judge.ratings]
    assert methods == ["human", "judge", "ppi"] and all(t.rows for t in report.judge.ratings)


def test_too_few_overlapping_pairs_are_said_in_words(tmp_path):
    with store_with_verdicts(tmp_path, [("m-alpha", "m-beta", 0, 0)] * 3) as store:
        report = build_report(store, ReportFilters(), rounds=50, judge="judge")
    cal = report.judge.calibration
    assert not cal.enough and cal.kappa is None
    assert cal.message.startswith("only 3 comparisons") and "too few" in cal.message
    assert all(t.rows == [] and t.message for t in report.judge.ratings)
    with Store.open(tmp_path / "other.db") as empty:
        missing = build_report(empty, ReportFilters(), rounds=10, judge="nobody").judge
    assert missing.notes and "no verdicts of the judge nobody" in missing.notes[0]
