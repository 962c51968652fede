"""Stability of repeated answers: exact-match rate, similarity, check variance."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from core.answering.checks import Check, run_checks
from core.report.stability import exact_match_rate, normalise, similarity, stability


def test_identical_answers_are_fully_stable():
    r = stability(["Paris.", "paris.", "  Paris. "])
    assert r.runs == 3
    assert r.distinct_answers == 1
    assert r.exact_match_rate == 1.0
    assert r.modal_share == 1.0
    assert r.mean_similarity == 1.0 and r.min_similarity == 1.0


def test_exact_match_rate_counts_identical_pairs():
    # 4 answers, 2 identical: 1 identical pair out of 6
    assert exact_match_rate(["a", "a", "b", "c"]) == pytest.approx(1 / 6)
    assert exact_match_rate(["a", "b"]) == 0.0
    assert exact_match_rate(["x", "x", "x", "y"]) == pytest.approx(3 / 6)
    assert exact_match_rate(["only one"]) is None


def test_normalise_ignores_case_width_and_whitespace():
    assert normalise("  Ｈello\n\tWORLD ") == "hello world"


def test_similarity_is_token_set_jaccard():
    assert similarity("the cat sat", "the cat sat") == 1.0
    assert similarity("the cat sat", "The cat, sat!") == 1.0
    assert similarity("a b c d", "a b x y") == pytest.approx(2 / 6)
    assert similarity("", "") == 1.0
    assert similarity("word", "") == 0.0


def test_spread_of_different_answers():
    answers = ["The answer is 17.", "The answer is 17.", "I think it is 19."]
    r = stability(answers)
    assert r.distinct_answers == 2
    assert r.exact_match_rate == pytest.approx(1 / 3)
    assert r.modal_share == pytest.approx(2 / 3)
    sims = [1.0, similarity(answers[0], answers[2]), similarity(answers[1], answers[2])]
    assert r.mean_similarity == pytest.approx(sum(sims) / 3)
    assert r.min_similarity == pytest.approx(min(sims))
    assert 0 < r.mean_similarity < 1


def test_single_run_has_no_pairwise_figures():
    r = stability(["only"])
    assert r.runs == 1 and r.exact_match_rate is None and r.mean_similarity is None and r.modal_share is None


def test_check_pass_rate_variance():
    checks = TypeAdapter(list[Check]).validate_python([
        {"type": "regex", "pattern": r"\b17\b", "name": "answer"},
        {"type": "max_words", "limit": 10},
    ])
    answers = ["17", "17", "19", "17"]
    outcomes = [run_checks(checks, a) for a in answers]
    r = stability(answers, outcomes)
    first, second = r.checks
    assert first.name == "answer" and first.runs == 4
    assert first.pass_rate == pytest.approx(0.75)
    assert first.pass_variance == pytest.approx(0.75 * 0.25)
    assert first.score_variance == pytest.approx(0.1875)
    assert second.pass_rate == 1.0 and second.pass_variance == 0.0
    assert r.flaky_checks == 1
    assert r.mean_pass_variance == pytest.approx((0.1875 + 0.0) / 2)


def test_completeness_scores_feed_score_variance():
    [chk] = TypeAdapter(list[Check]).validate_python([{"type": "required_fields", "fields": ["a", "b"]}])
    answers = ['{"a": 1, "b": 2}', '{"a": 1}']
    r = stability(answers, [run_checks([chk], a) for a in answers])
    c = r.checks[0]
    assert c.score_mean == pytest.approx(0.75)
    assert c.score_variance == pytest.approx(0.0625)
    assert c.pass_rate == 0.5


def test_no_checks():
    r = stability(["a", "b"])
    assert r.checks == () and r.mean_pass_variance is None and r.flaky_checks == 0
