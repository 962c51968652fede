"""Bradley-Terry ratings: recovery of known strengths, interval coverage,
agreement with the FastChat recipe, vote decomposition and the edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.stats.ratings import (
    ALPHA,
    Battle,
    BattleSet,
    decompose_vote,
    rate,
)

NAMES = [f"m{i}" for i in range(8)]


def synthetic(seed: int, n_votes: int, strengths, tie: float = 0.0) -> BattleSet:
    """Two-way votes drawn from a Bradley-Terry model (natural scale: 1 = 400 Elo)."""
    rng = np.random.default_rng(seed)
    s = np.asarray(strengths, dtype=float)
    m = len(s)
    a = rng.integers(0, m, n_votes)
    b = (a + rng.integers(1, m, n_votes)) % m
    p = 1.0 / (1.0 + 10.0 ** (s[b] - s[a]))
    u = rng.random(n_votes)
    out = np.where(u < tie, "tie", np.where(u < tie + (1 - tie) * p, "a", "b"))
    return BattleSet.from_arrays([NAMES[i] for i in a], [NAMES[i] for i in b], out)


def true_elo(strengths) -> dict[str, float]:
    s = np.asarray(strengths, dtype=float)
    return {NAMES[i]: (s[i] - s.mean()) * 400 + 1000 for i in range(len(s))}


def by_name(result):
    return {m.name: m for m in result.models}


# ------------------------------------------------------------------ decomposition


def test_two_way_choices():
    assert decompose_vote(["x", "y"], "x") == [Battle("x", "y", "a")]
    assert decompose_vote(["x", "y"], "y") == [Battle("y", "x", "a")]
    assert decompose_vote(["x", "y"], "tie") == [Battle("x", "y", "tie")]
    assert decompose_vote(["x", "y"], "both_bad") == [Battle("x", "y", "tie")]


def test_n_way_pick_beats_each_other_contestant_only():
    got = decompose_vote(["x", "y", "z", "w"], "z")
    assert sorted((b.model_a, b.model_b, b.outcome) for b in got) == [
        ("z", "w", "a"), ("z", "x", "a"), ("z", "y", "a")]


def test_n_way_tie_and_all_bad_are_pairwise_ties():
    for choice in ("tie", "all_bad"):
        got = decompose_vote(["x", "y", "z"], choice)
        assert {frozenset((b.model_a, b.model_b)) for b in got} == {
            frozenset("xy"), frozenset("xz"), frozenset("yz")}
        assert all(b.outcome == "tie" for b in got)


def test_full_ranking_gives_every_ordered_pair():
    got = decompose_vote(["x", "y", "z", "w"], "y", ranking=["y", "w", "x", "z"])
    assert {(b.model_a, b.model_b) for b in got} == {
        ("y", "w"), ("y", "x"), ("y", "z"), ("w", "x"), ("w", "z"), ("x", "z")}
    assert all(b.outcome == "a" for b in got)


def test_partial_ranking_beats_the_unranked():
    got = decompose_vote(["x", "y", "z", "w"], "x", ranking=["x", "y"])
    assert {(b.model_a, b.model_b) for b in got} == {
        ("x", "y"), ("x", "z"), ("x", "w"), ("y", "z"), ("y", "w")}


def test_all_bad_with_ranking_keeps_the_order():
    got = decompose_vote(["x", "y", "z"], "all_bad", ranking=["z", "x", "y"])
    assert {(b.model_a, b.model_b, b.outcome) for b in got} == {
        ("z", "x", "a"), ("z", "y", "a"), ("x", "y", "a")}


@pytest.mark.parametrize("contestants, choice, ranking, needle", [
    (["x", "y"], "q", None, "not one of the contestants"),
    (["x"], "x", None, "at least two"),
    (["x", "x"], "x", None, "repeat"),
    (["x", "y", "z"], "x", ["y", "x", "z"], "starts with 'y'"),
    (["x", "y", "z"], "tie", ["y", "x"], "tie and a ranking"),
    (["x", "y", "z"], "x", ["x", "q"], "contestant .q. is not one of the contestants"),
])
def test_bad_votes_are_refused_with_a_reason(contestants, choice, ranking, needle):
    with pytest.raises(ValueError, match=needle):
        decompose_vote(contestants, choice, ranking)


def test_n_way_votes_are_resampled_whole():
    votes = [decompose_vote(["x", "y", "z"], "x"), decompose_vote(["x", "y", "z"], "tie"),
             decompose_vote(["y", "z"], "y")]
    bs = BattleSet.from_votes(votes)
    assert bs.n_votes == 3 and bs.a.size == 6
    r = rate(bs, rounds=50, seed=0)
    rows = by_name(r)
    assert rows["x"].votes == 2 and rows["x"].wins == 2 and rows["x"].ties == 2 and rows["x"].losses == 0
    assert rows["z"].votes == 3 and rows["z"].losses == 2 and rows["z"].ties == 2 and rows["z"].wins == 0


def test_fastchat_outcome_strings_are_understood():
    bs = BattleSet.from_arrays(["p", "p", "q", "p"], ["q", "q", "p", "q"],
                               ["model_a", "model_b", "tie (bothbad)", "tie"])
    assert bs.score.tolist() == [1.0, 0.0, 0.5, 0.5]
    with pytest.raises(ValueError, match="row 0"):
        BattleSet.from_arrays(["p"], ["q"], ["maybe"])
    with pytest.raises(ValueError, match="battle itself"):
        BattleSet.from_arrays(["p"], ["p"], ["a"])


# ------------------------------------------------------------------ recovery and coverage


def test_known_strengths_are_recovered():
    strengths = [-0.6, -0.25, 0.0, 0.1, 0.35, 0.7]
    result = rate(synthetic(3, 30_000, strengths), rounds=200, seed=3)
    truth = true_elo(strengths)
    rows = by_name(result)
    for name, value in truth.items():
        row = rows[name]
        half = (row.ci_high - row.ci_low) / 2
        assert abs(row.rating - value) < 2.5 * half, (name, row.rating, value, half)
        assert half < 20     # 30k votes: intervals of a few tens of points
    assert [m.name for m in result.models] == sorted(truth, key=truth.get, reverse=True)
    assert np.mean([m.rating for m in result.models]) == pytest.approx(1000.0, abs=1e-6)


def test_intervals_cover_the_truth_at_about_the_nominal_rate():
    strengths = [-0.5, -0.2, 0.0, 0.25, 0.45]
    truth = true_elo(strengths)
    hits = total = 0
    for seed in range(40):
        result = rate(synthetic(seed, 400, strengths), rounds=200, seed=seed)
        for row in result.models:
            total += 1
            hits += row.ci_low <= truth[row.name] <= row.ci_high
    coverage = hits / total
    assert 0.88 <= coverage <= 0.99, coverage


def test_same_seed_same_intervals_other_seed_other_intervals():
    bs = synthetic(7, 800, [0.0, 0.2, 0.4])
    one, two, other = rate(bs, rounds=100, seed=11), rate(bs, rounds=100, seed=11), rate(bs, rounds=100, seed=12)
    assert [(m.ci_low, m.ci_high) for m in one.models] == [(m.ci_low, m.ci_high) for m in two.models]
    assert [(m.ci_low, m.ci_high) for m in one.models] != [(m.ci_low, m.ci_high) for m in other.models]
    assert [m.rating for m in one.models] == [m.rating for m in other.models]


# ------------------------------------------------------------------ the reference recipe


def _reference_fastchat(bs: BattleSet, rounds: int, seed: int):
    """FastChat's compute_bt / compute_bootstrap_bt, written out with scipy, with
    lineup's resampling: the multinomial draws are over the unique rows with
    each row and its mirror image ((a, b, o) and (b, a, 1 - o): the same
    outcome of the same pair) as one class, classes in order of (lower model
    index, higher, outcome of the lower), each class's draw put on one of
    its rows. FastChat draws over the rows as they are; both resample votes
    with replacement, so the intervals agree in distribution, and with the
    same draws they agree to the fit's precision."""
    optimize = pytest.importorskip("scipy.optimize")
    m = len(bs.models)
    code = np.rint(bs.score * 2).astype(np.int64)
    sched = np.stack([bs.a, bs.b, code], axis=1)
    rows, row_of_vote, weights = np.unique(sched, return_inverse=True, return_counts=True, axis=0)
    matchups, outcomes, weights = rows[:, :2], rows[:, 2] / 2.0, weights.astype(float)
    canon = np.stack([np.minimum(bs.a, bs.b), np.maximum(bs.a, bs.b), np.where(bs.a < bs.b, code, 2 - code)], axis=1)
    classes, class_of_vote, class_weights = np.unique(canon, return_inverse=True, return_counts=True, axis=0)
    carrier = np.zeros(classes.shape[0], dtype=np.int64)   # the row that carries each class's draw
    carrier[class_of_vote.ravel()] = row_of_vote.ravel()

    def loss_grad(r, w):
        d = ALPHA * (r[matchups[:, 0]] - r[matchups[:, 1]])
        p = 1.0 / (1.0 + np.exp(-d))
        loss = -((np.log(p) * outcomes + np.log(1 - p) * (1 - outcomes)) * w).sum()
        g = -ALPHA * (outcomes - p) * w
        grad = np.zeros(m)
        np.add.at(grad, matchups[:, 0], g)
        np.add.at(grad, matchups[:, 1], -g)
        return loss, grad

    def fit(w):
        return optimize.minimize(loss_grad, np.zeros(m), args=(w,), jac=True, method="L-BFGS-B",
                                 options={"maxiter": 100, "gtol": 1e-6}).x * 400 + 1000

    point = fit(weights)
    n = int(weights.sum())
    draws = np.random.default_rng(seed).multinomial(n, class_weights / n, size=rounds) / n
    row_draws = np.zeros((rounds, rows.shape[0]))
    row_draws[:, carrier] = draws
    boot = np.array([fit(w) for w in row_draws])
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    return point, lo, hi


def test_agrees_with_the_fastchat_recipe():
    bs = synthetic(5, 3000, [-0.4, -0.1, 0.0, 0.3, 0.5], tie=0.15)
    point, lo, hi = _reference_fastchat(bs, rounds=100, seed=9)
    rows = by_name(rate(bs, rounds=100, seed=9))
    for k, name in enumerate(bs.models):
        assert abs(rows[name].rating - point[k]) < 1.0
        # same seed, same multinomial draws over the same classes of rows: same intervals
        assert abs(rows[name].ci_low - lo[k]) < 1.0
        assert abs(rows[name].ci_high - hi[k]) < 1.0


def test_how_the_models_were_placed_does_not_change_the_intervals():
    """"m0 beat m1" and "m1 lost to m0" are one outcome: the same votes with
    some pairs written the other way round (as a shuffled screen places
    them) give the same bootstrap rounds with the same seed."""
    bs = synthetic(4, 2000, [0.0, 0.1, 0.3, -0.2], tie=0.1)
    flip = np.random.default_rng(1).random(bs.a.size) < 0.5
    # the votes up to every model's first appearance as model_a stay as they were:
    # the models keep their order (first appearance), which orders the draws
    flip[:max(int(np.flatnonzero(bs.a == k)[0]) for k in range(len(bs.models))) + 1] = False
    names = np.array(bs.models)
    a, b = np.where(flip, bs.b, bs.a), np.where(flip, bs.a, bs.b)
    score = np.where(flip, 1.0 - bs.score, bs.score)
    other = BattleSet.from_arrays(names[a].tolist(), names[b].tolist(), score.tolist())
    assert other.models == bs.models and not np.array_equal(other.a, bs.a)
    one, two = rate(bs, rounds=200, seed=3), rate(other, rounds=200, seed=3)
    np.testing.assert_array_equal(one.replicates, two.replicates)
    assert [(m.name, m.ci_low, m.ci_high) for m in one.models] == [(m.name, m.ci_low, m.ci_high) for m in two.models]


def test_ties_count_half_a_win_each_way():
    # 3 wins + 2 ties out of 5: score 4/5 -> odds 4 -> 400*log10(4) apart
    bs = BattleSet.from_votes([decompose_vote(["x", "y"], c) for c in ["x", "x", "x", "tie", "tie"]])
    rows = by_name(rate(bs, rounds=0))
    assert rows["x"].rating - rows["y"].rating == pytest.approx(400 * math.log10(4), abs=0.5)
    assert rows["x"].rating + rows["y"].rating == pytest.approx(2000, abs=1e-6)


# ------------------------------------------------------------------ ranks, groups, gaps


def test_rank_ranges_and_groups_follow_the_intervals():
    # two models nearly equal at the top, one clearly worse
    result = rate(synthetic(1, 3000, [0.5, 0.49, -0.5]), rounds=200, seed=1)
    rows = by_name(result)
    top = {"m0", "m1"}
    for name in top:
        assert (rows[name].rank_low, rows[name].rank_high) == (1, 2)
    assert (rows["m2"].rank_low, rows["m2"].rank_high) == (3, 3)
    assert [set(g) for g in result.groups] == [top, {"m2"}]
    for row in result.models:   # the documented definitions, checked on every row
        assert row.rank_low == 1 + sum(o.ci_low > row.ci_high for o in result.models)
        assert row.rank_high == sum(o.ci_high >= row.ci_low for o in result.models)
    close, far = result.gaps
    assert not close.separated and close.more_votes > 0
    assert far.separated and far.more_votes == 0


def test_more_votes_estimate_is_about_right():
    """Replicating the votes keeps the gap and shrinks the intervals ~1/sqrt(k):
    with comfortably more than the estimate the pair separates, with well
    under it it does not."""
    votes = [decompose_vote(["p", "q"], c) for c in ["p"] * 33 + ["q"] * 27]
    base = rate(BattleSet.from_votes(votes), rounds=300, seed=2)
    gap = base.gaps[0]
    assert not gap.separated and gap.more_votes > 0
    factor = (60 + gap.more_votes) / 60
    enough = rate(BattleSet.from_votes(votes * math.ceil(factor * 1.5)), rounds=300, seed=2)
    short = rate(BattleSet.from_votes(votes * max(1, math.floor(factor * 0.5))), rounds=300, seed=2)
    assert enough.gaps[0].separated
    assert not short.gaps[0].separated


# ------------------------------------------------------------------ edge cases


def _edge_votes():
    votes = []
    votes += [decompose_vote(["A", "B"], "A" if i < 3 else "B") for i in range(5)]
    votes += [decompose_vote(["B", "C"], "B" if i < 3 else "C") for i in range(5)]
    votes += [decompose_vote(["D", "A"], "D"), decompose_vote(["D", "B"], "D")]   # D never loses
    votes += [decompose_vote(["W", "C"], "C"), decompose_vote(["W", "A"], "A")]   # W never wins
    votes += [decompose_vote(["E", "C"], "tie")]                                  # E: one vote
    return votes


def test_model_that_never_loses_has_an_open_upper_end():
    result = rate(BattleSet.from_votes(_edge_votes()), rounds=200, seed=0, min_votes=1)
    rows = by_name(result)
    d = rows["D"]
    assert d.open_high and not d.open_low and d.ci_high is None
    assert math.isfinite(d.rating) and d.rating > max(rows[x].rating for x in "ABC")
    assert d.rank_low == 1 and d.wins == 2 and d.losses == 0
    assert any("never lost" in note for note in d.notes)
    assert any("D" in w and "no finite" in w for w in result.warnings)


def test_a_model_with_too_few_votes_is_listed_last_and_not_ranked():
    """D won its only two votes: rated highest, but not the leader of the table."""
    result = rate(BattleSet.from_votes(_edge_votes()), rounds=200, seed=0)
    rows = by_name(result)
    d = rows["D"]
    assert d.votes == 2 and not d.ranked and d.rank_low is None and d.rank_high is None
    assert "only 2 votes: not ranked until it has 10" in d.notes and any("never lost" in n for n in d.notes)
    assert result.models[0].ranked and result.models[0].rank_low == 1
    ranked = [m for m in result.models if m.ranked]
    assert result.models[:len(ranked)] == ranked and all(m.votes >= 10 for m in ranked)
    assert [m.rating for m in ranked] == sorted((m.rating for m in ranked), reverse=True)
    for gap in result.gaps:   # no estimate that involves a model with too few votes
        if not (rows[gap.upper].ranked and rows[gap.lower].ranked):
            assert gap.more_votes is None


def test_model_that_never_wins_has_an_open_lower_end():
    rows = by_name(rate(BattleSet.from_votes(_edge_votes()), rounds=200, seed=0, min_votes=1))
    w = rows["W"]
    assert w.open_low and not w.open_high and w.ci_low is None and w.ci_high is not None
    assert w.rating < min(rows[x].rating for x in "ABC")
    assert w.rank_high == len(rows)


def test_core_models_keep_finite_intervals_anchored_at_1000():
    rows = by_name(rate(BattleSet.from_votes(_edge_votes()), rounds=200, seed=0))
    core = ["A", "B", "C", "E"]
    for name in core:
        assert not rows[name].open_low and not rows[name].open_high
        assert rows[name].ci_low is not None and rows[name].ci_high is not None
    assert np.mean([rows[x].rating for x in core]) == pytest.approx(1000.0, abs=1e-6)


def test_model_with_one_vote():
    rows = by_name(rate(BattleSet.from_votes(_edge_votes()), rounds=200, seed=0))
    e = rows["E"]
    assert e.votes == 1 and e.ties == 1 and "one vote only: not ranked until it has 10" in e.notes
    assert not e.ranked and e.rank_low is None
    # a tie with C: same rating as C, very wide interval
    assert e.rating == pytest.approx(rows["C"].rating, abs=5)
    assert e.ci_high - e.ci_low > 300


def test_single_vote_win_is_open_not_a_number_pretending():
    result = rate(BattleSet.from_votes([decompose_vote(["x", "y"], "x")]), rounds=50, seed=0)
    rows = by_name(result)
    assert rows["x"].open_high and rows["y"].open_low
    assert rows["x"].ci_high is None and rows["y"].ci_low is None


def test_disconnected_graph_is_rated_per_component():
    votes = [decompose_vote(["A", "B"], c) for c in "AABAB"]
    votes += [decompose_vote(["X", "Y"], c) for c in "XYYY"] + [decompose_vote(["X", "Z"], c) for c in "XZ"]
    result = rate(BattleSet.from_votes(votes), rounds=100, seed=0, min_votes=1)
    assert not result.connected
    assert [set(c) for c in result.components] == [{"X", "Y", "Z"}, {"A", "B"}]
    assert any("disconnected" in w for w in result.warnings)
    rows = by_name(result)
    for comp in result.components:
        assert np.mean([rows[x].rating for x in comp]) == pytest.approx(1000.0, abs=1e-6)
        assert sorted(rows[x].rank_low for x in comp)[0] == 1
        assert all(rows[x].rank_high <= len(comp) for x in comp)
    assert rows["A"].component != rows["X"].component
    # never a gap across components
    assert all({g.upper, g.lower} <= {"A", "B"} or {g.upper, g.lower} <= {"X", "Y", "Z"}
               for g in result.gaps)


def test_no_votes():
    result = rate(BattleSet.from_votes([]), rounds=10)
    assert result.models == [] and result.n_votes == 0 and result.warnings


def test_subset_is_the_same_as_building_from_those_votes():
    votes = [decompose_vote(["x", "y", "z"], "x"), decompose_vote(["y", "w"], "w"),
             decompose_vote(["z", "w"], "tie"), decompose_vote(["x", "y"], "y")]
    whole = BattleSet.from_votes(votes)
    part = whole.subset(np.array([1, 2, 3]))
    direct = BattleSet.from_votes(votes[1:])
    assert part.models == direct.models
    for attr in ("a", "b", "score", "vote"):
        assert getattr(part, attr).tolist() == getattr(direct, attr).tolist()
