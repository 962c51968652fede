"""`lineup diff` and `lineup gate` (core.decide.compare): runs paired case by case,
McNemar's test (exact below 25 discordant pairs) with Holm's correction,
planted regressions caught and identical runs passed, latency at the
configured threshold, cost, ratings, blind runs, the stable JSON, exit codes.
Runs are recorded through the store (planted exactly) and, end to end,
through `lineup run` against the loopback server."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest
from scipy import stats

from core.decide.compare import SCHEMA, compare_runs, holm, mcnemar, similarity
from core.ground.errors import UsageError
from lineup.cli import main
from store import Store
from store.ids import new_ulid
from store.records import (
    ContestantRecord,
    SessionRecord,
    TurnRecord,
    VoteRecord,
)
from tests.server import Reply, TestServer
from tests.run_support import config_file, planted_cases, planted_run

# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("b,c", [(0, 0), (1, 0), (5, 1), (10, 3), (20, 0), (12, 12), (24, 0)])
def test_mcnemar_exact_is_the_two_sided_binomial_test(b: int, c: int) -> None:
    p, method = mcnemar(b, c)
    if b + c == 0:
        assert (p, method) == (1.0, "none")
        return
    assert method == "exact"
    assert p == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-12)


@pytest.mark.parametrize("b,c", [(30, 10), (100, 80), (25, 0), (40, 41)])
def test_mcnemar_chi2_with_continuity_correction_above_25_discordant(b: int, c: int) -> None:
    p, method = mcnemar(b, c)
    assert method == "chi2"
    chi2 = (abs(b - c) - 1) ** 2 / (b + c)
    assert p == pytest.approx(stats.chi2.sf(chi2, 1), rel=1e-9)


def test_holm_matches_its_definition() -> None:
    rng = random.Random(3)
    for _ in range(50):
        ps = [rng.random() ** 3 for _ in range(rng.randint(1, 12))]
        order = sorted(range(len(ps)), key=lambda i: ps[i])
        m = len(ps)
        expected = [0.0] * m
        best = 0.0
        for rank, i in enumerate(order):
            best = max(best, min(1.0, (m - rank) * ps[i]))
            expected[i] = best
        assert holm(ps) == pytest.approx(expected)
        # never below the raw p, never above Bonferroni
        assert all(p <= a <= min(1.0, m * p) + 1e-12 for p, a in zip(ps, holm(ps), strict=True))


def test_similarity() -> None:
    assert similarity("same text", "same text") == 1.0
    assert similarity("a b c d", "w x y z") == 0.0
    assert 0.4 < similarity("the cat sat on the mat", "the cat sat on a hat") < 1.0


# --------------------------------------------------------------------------- planted runs


def _load(db: Path, *sids: str):
    store = Store.open(db)
    try:
        return [store.load_session(s) for s in sids]
    finally:
        store.close()


@pytest.mark.slow
def test_a_twenty_point_drop_on_100_cases_regresses_and_identical_runs_do_not(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    with Store.open(db) as store:
        base = planted_run(store, "m", "model-1", planted_cases(100, fail=set(range(10))))                 # 90% pass
        same = planted_run(store, "m", "model-1", planted_cases(100, fail=set(range(10))))                 # identical
        worse = planted_run(store, "m", "model-2", planted_cases(100, fail=set(range(30)),                # 70% pass
                                                   text=lambda i: f"answer {i}" if i >= 30 else "nope"))
    a, b, c = _load(db, base, same, worse)
    identical = compare_runs(a, b)
    assert identical.regressions == [] and not identical.regressed
    (cmp_same,) = identical.comparisons
    assert cmp_same.cases == [] and cmp_same.answers.identical == 100 and cmp_same.answers.identical_rate == 1.0
    assert all(t.p_value == 1.0 and not t.regressed for t in cmp_same.tests)

    report = compare_runs(a, c)
    (cmp_worse,) = report.comparisons
    check = next(t for t in cmp_worse.tests if t.scope == "check")
    assert (check.pairs, check.regressions, check.improvements) == (100, 20, 0)
    assert check.baseline_pass_rate == 0.9 and check.candidate_pass_rate == 0.7
    assert check.method == "exact" and check.p_value == pytest.approx(2 * 0.5 ** 20)
    assert check.regressed and check.p_adjusted < 0.05
    category = next(t for t in cmp_worse.tests if t.scope == "category")
    assert category.name == "general" and category.regressed
    assert any("check contains:ok 90% -> 70%" in r for r in report.regressions)
    failing = [k for k in cmp_worse.cases if k.change == "newly_failing"]
    assert sorted(k.case_id for k in failing) == [f"c{i:03d}" for i in range(10, 30)]
    assert all(k.checks == ["contains:ok"] and k.candidate_replay == f"lineup replay {worse}" for k in failing)
    changed = [k for k in cmp_worse.cases if k.change == "changed"]
    assert len(changed) == 10 and all(k.similarity is not None and k.similarity < 1 for k in changed)
    assert cmp_worse.answers.identical == 70


def test_a_small_drop_is_not_significant_and_holm_keeps_the_family_honest(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    with Store.open(db) as store:
        base = planted_run(store, "m", "x", planted_cases(40))
        cand = planted_run(store, "m", "x", planted_cases(40, fail={1, 2, 3}))     # 3 discordant: p = 0.25
    a, b = _load(db, base, cand)
    report = compare_runs(a, b)
    check = next(t for t in report.comparisons[0].tests if t.scope == "check")
    assert check.regressions == 3 and check.p_value == pytest.approx(0.25) and not check.regressed
    assert report.regressions == []
    assert report.tests == len(report.comparisons[0].tests) == 3          # answered, check, category
    assert [t.p_adjusted for t in report.comparisons[0].tests] == holm([t.p_value for t in report.comparisons[0].tests])


def test_an_answer_that_failed_counts_as_failing_its_checks_and_as_not_answered(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    cand_cases = planted_cases(60)
    for k in range(20):
        cand_cases[k] = {**cand_cases[k], "status": "error", "passed": None, "ttft": None, "duration": None}
    with Store.open(db) as store:
        base = planted_run(store, "m", "x", planted_cases(60))
        cand = planted_run(store, "m", "x", cand_cases)
    report = compare_runs(*_load(db, base, cand))
    tests = {(t.scope, t.name): t for t in report.comparisons[0].tests}
    assert tests[("answered", "answered")].regressions == 20 and tests[("answered", "answered")].regressed
    assert tests[("check", "contains:ok")].regressions == 20
    assert report.comparisons[0].latency[0].pairs == 40


@pytest.mark.slow
def test_latency_is_flagged_at_the_configured_threshold(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    rng = random.Random(7)
    base_t = [rng.uniform(80, 120) for _ in range(200)]
    with Store.open(db) as store:
        base = planted_run(store, "m", "x", planted_cases(200, ttft=lambda i: base_t[i]))
        slow = planted_run(store, "m", "x", planted_cases(200, ttft=lambda i: base_t[i] * 1.5))       # +50%
        noisy = planted_run(store, "m", "x", planted_cases(200, ttft=lambda i: base_t[i] + rng.uniform(-3, 3)))
    a, b, c = _load(db, base, slow, noisy)
    at_40 = compare_runs(a, b, max_p95_regression_pct=40)
    ttft = at_40.comparisons[0].latency[0]
    assert ttft.metric == "ttft_ms" and ttft.p95_change_pct == pytest.approx(50, abs=0.5)
    assert ttft.p95_ci is not None and ttft.p95_ci.low > 0 and ttft.regressed
    assert any(r.startswith("m vs m: ttft_ms p95") for r in at_40.regressions)
    at_60 = compare_runs(a, b, max_p95_regression_pct=60)
    assert not at_60.comparisons[0].latency[0].regressed and at_60.regressions == []
    # without a threshold latency is reported, never gated
    assert compare_runs(a, b).regressions == []
    # noise around the same latency is not a regression even at a 0% threshold
    jitter = compare_runs(a, c, max_p95_regression_pct=0).comparisons[0].latency[0]
    assert jitter.p95_ci is not None and jitter.p95_ci.low < 0 < jitter.p95_ci.high and not jitter.regressed
    # the interval is reproducible with the seed
    assert compare_runs(a, b, seed=5).comparisons[0].latency == compare_runs(a, b, seed=5).comparisons[0].latency


@pytest.mark.slow
def test_cost_ratings_and_runs_on_different_models(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    with Store.open(db) as store:
        base = planted_run(store, "big", "model-big", planted_cases(30, cost=0.01), others=("judge",))
        cand = planted_run(store, "small", "model-small", planted_cases(30, cost=0.002), others=("judge",))
        # votes against the common opponent: big wins 25 of 30, small 10 of 30
        for sid, alias, wins in ((base, "big", 25), (cand, "small", 10)):
            loaded = store.load_session(sid)
            for k, turn in enumerate(loaded.turns):
                store.add_vote(VoteRecord(session_id=sid, turn_id=turn.id, choice="A" if k < wins else "B",
                                          mapping={"A": alias, "B": "judge"}, positions=["A", "B"],
                                          revealed_at=1.0))
    a, b = _load(db, base, cand)
    (cmp,) = compare_runs(a, b, models=["big:small"]).comparisons
    assert cmp.baseline.alias == "big" and cmp.candidate.alias == "small"
    assert cmp.cost.baseline_total == pytest.approx(0.3) and cmp.cost.candidate_total == pytest.approx(0.06)
    assert cmp.cost.change_pct == pytest.approx(-80)
    rating = cmp.rating
    assert rating is not None and rating.diff is not None and rating.ci is not None and rating.votes == 60
    assert rating.diff < 0 and rating.ci.high < 0           # the small model is rated lower, clearly
    # the same two runs, asked for a model one of them does not have
    with pytest.raises(UsageError, match="has no model 'nope'"):
        compare_runs(a, b, models=["nope:small"])
    # without --model: the alias both runs have
    assert [(c.baseline.alias, c.candidate.alias) for c in compare_runs(a, b).comparisons] == [("judge", "judge")]
    # two models each and none shared: say which
    with pytest.raises(UsageError, match="say which models"):
        compare_runs(a, a.model_copy(update={"session": a.session.model_copy(update={"contestants": [
            ContestantRecord(alias=x, provider="openai", model=x, label=x) for x in ("p", "q")]})}))


@pytest.mark.slow
def test_two_models_of_one_run_compare_the_same_way(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    with Store.open(db) as store:
        sid = planted_run(store, "big", "model-big", planted_cases(10), others=("small",), blind=False)
    (loaded,) = _load(db, sid)
    (cmp,) = compare_runs(loaded, loaded, models=["big:small"]).comparisons
    assert cmp.paired_units == 10 and cmp.answers.identical == 0


@pytest.mark.slow
def test_blind_runs_list_no_case_until_it_is_revealed(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    with Store.open(db) as store:
        base = planted_run(store, "m", "x", planted_cases(30), others=("o",))
        cand = planted_run(store, "m", "x", planted_cases(30, fail=set(range(30))), others=("o",))
    report = compare_runs(*_load(db, base, cand), models=["m"])
    (cmp,) = report.comparisons
    assert cmp.cases == [] and cmp.hidden_cases > 0          # which answer failed would say who wrote it
    assert report.regressed                                 # the aggregate still counts


def test_the_json_shape_is_stable(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "g.db"
    with Store.open(db) as store:
        base = planted_run(store, "m", "x", planted_cases(20))
        cand = planted_run(store, "m", "x", planted_cases(20, fail={0}))
    assert main(["diff", base, cand, "--db", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == SCHEMA and data["correction"] == "holm" and data["alpha"] == 0.05
    assert set(data) == {"schema", "alpha", "correction", "tests", "max_p95_regression_pct", "seed", "comparisons",
                         "regressions"}
    (cmp,) = data["comparisons"]
    assert set(cmp) == {"baseline", "candidate", "paired_units", "baseline_only", "candidate_only", "tests", "answers",
                        "latency", "cost", "rating", "cases", "hidden_cases"}
    assert set(cmp["tests"][0]) == {"scope", "name", "pairs", "baseline_pass_rate", "candidate_pass_rate",
                                    "regressions", "improvements", "method", "p_value", "p_adjusted", "regressed",
                                    "improved"}
    assert all(math.isfinite(t["p_value"]) for t in cmp["tests"])


@pytest.mark.slow
def test_gate_exit_codes_and_what_it_prints(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "g.db"
    with Store.open(db) as store:
        base = planted_run(store, "m", "x", planted_cases(100, fail=set(range(10))))
        same = planted_run(store, "m", "x", planted_cases(100, fail=set(range(10))))
        worse = planted_run(store, "m", "x", planted_cases(100, fail=set(range(30))))
    common = ["--db", str(db)]
    assert main(["gate", "--baseline", base, "--candidate", same, *common]) == 0
    assert "no significant regression" in capsys.readouterr().err
    assert main(["gate", "--baseline", base, "--candidate", worse, *common]) == 3
    err = capsys.readouterr().err
    assert "regression" in err and "check contains:ok 90% -> 70%" in err
    # bad usage: exit 2, one line
    assert main(["gate", "--baseline", base, "--candidate", "NOSUCH", *common]) == 2
    assert "no session 'NOSUCH'" in capsys.readouterr().err
    assert main(["gate", "--baseline", base, "--candidate", same, "--alpha", "1.5", *common]) == 2
    with pytest.raises(SystemExit) as exited:                          # argparse: --candidate is required
        main(["gate", "--baseline", base, *common])
    assert exited.value.code == 2


def test_a_chat_session_is_not_a_run(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    with Store.open(db) as store:
        chat = new_ulid()
        store.create_session(SessionRecord(id=chat, kind="chat", contestants=[
            ContestantRecord(alias="m", provider="demo", model="d", label="m")]))
        store.add_turn(TurnRecord(session_id=chat, position=0, user_message="hi"))
        run = planted_run(store, "m", "x", planted_cases(3))
    with pytest.raises(UsageError, match="no sample-set cases"):
        compare_runs(*_load(db, chat, run))


# --------------------------------------------------------------------------- end to end


def _set_with_check(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"c{i}", "category": "k" if i % 2 else "j", "prompt": f"question {i}",
                                        "checks": [{"type": "contains", "value": "loopback"}]}) + "\n"
                            for i in range(n)))
    return path


def _session_ids(db: Path) -> list[str]:
    store = Store.open(db)
    try:
        return [s.id for s in sorted(store.list_sessions(kind="run"), key=lambda s: s.created)]
    finally:
        store.close()


@pytest.mark.slow
def test_end_to_end_through_lineup_run_and_the_gate(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "e.db"
    sample = _set_with_check(tmp_path / "set.jsonl", 30)
    with TestServer() as good, TestServer() as bad:
        good.script(Reply(text="a loopback answer"))
        bad.script(Reply(text="something else entirely", first_delay=0.25))
        config = config_file(tmp_path / "config.toml", good, {"base": {}, "again": {}})
        config.write_text(config.read_text() + "\n[models.cand]\nprovider = \"openai\"\nmodel = \"cand-model\"\n"
                          f"base_url = \"{bad.base_url('openai')}\"\nmax_retries = 0\n")
        for alias in ("base", "again", "cand"):
            assert main(["run", str(sample), "-m", alias, "--db", str(db), "--config", str(config), "--quiet",
                         "--temperature", "0"]) in (0, 1)
    base, again, cand = _session_ids(db)
    capsys.readouterr()
    assert main(["gate", "--baseline", base, "--candidate", again, "--db", str(db),
                 "--max-p95-regression", "5000"]) == 0
    assert main(["gate", "--baseline", base, "--candidate", cand, "--db", str(db)]) == 3
    err = capsys.readouterr().err
    assert "cand vs base: check contains 100% -> 0%" in err and "cand vs base: answered" not in err
    # latency: 250 ms more to the first token, caught at a 50% threshold
    assert main(["gate", "--baseline", base, "--candidate", cand, "--db", str(db), "--json",
                 "--max-p95-regression", "50"]) == 3
    data = json.loads(capsys.readouterr().out)
    ttft = data["comparisons"][0]["latency"][0]
    assert ttft["metric"] == "ttft_ms" and ttft["regressed"] and ttft["p95_ci"]["low"] > 100
    # the table form lists the cases with the replay command of each run
    assert main(["diff", base, cand, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"lineup replay {cand}" in out and "newly failing" in out


@pytest.mark.slow
def test_the_readme_ci_example_runs_as_written(tmp_path: Path) -> None:
    """The `run:` block of the CI job in docs/evaluate.md, run by bash: exit 0 for a
    candidate as good as the baseline, 3 for a worse one, gate.json written."""
    import os
    import re
    import subprocess
    import sys

    readme = (Path(__file__).resolve().parents[1] / "docs" / "evaluate.md").read_text()
    block = re.search(r"  run: \|\n((?:    .*\n)+)", readme)
    assert block is not None, "docs/evaluate.md's CI example has a run: block"
    script = "\n".join(line[4:] for line in block.group(1).splitlines())
    (tmp_path / "eval").mkdir()
    _set_with_check(tmp_path / "eval" / "set.jsonl", 12)
    bindir = str(Path(sys.executable).parent)
    for text, expected in (("a loopback answer", 0), ("worse", 3)):
        with TestServer() as srv:
            # a fixed 250 ms before the first byte, so that a busy machine's tens of ms are no p95 regression (25%)
            srv.script(Reply(text="a loopback answer", first_delay=0.25))
            config = config_file(tmp_path / "config.toml", srv, {"candidate": {}})
            env = dict(os.environ, LINEUP_CONFIG=str(config), OPENAI_API_KEY="",
                       PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
            env["LINEUP_DB"] = "eval/lineup.db"
            db = tmp_path / "eval" / "lineup.db"
            if not (tmp_path / "eval" / "baseline_run").exists():
                assert main(["run", str(tmp_path / "eval" / "set.jsonl"), "-m", "candidate", "--temperature", "0",
                             "--seed", "0", "--quiet", "--db", str(db), "--config", str(config)]) == 0
                (tmp_path / "eval" / "baseline_run").write_text(_session_ids(db)[0])
            srv.script(Reply(text=text, first_delay=0.25))
            done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=120)
        assert done.returncode == expected, done.stderr
        assert json.loads((tmp_path / "gate.json").read_text())["schema"] == SCHEMA


def test_in_a_narrow_terminal_figures_wrap_between_words_and_ids_stay_whole(tmp_path: Path, capsys, monkeypatch) -> None:
    """`lineup diff` printed every line unwrapped so that ids and replay
    commands stay whole to be copied; the terminal then cut the latency
    line's figures ("243 -> 2" over "81 ms"). Now only the lines with a
    session id or a replay command are left to the terminal; the figures
    wrap between words."""
    db = tmp_path / "d.db"
    sample = _set_with_check(tmp_path / "set.jsonl", 8)
    for _ in range(2):
        assert main(["run", str(sample), "-m", "demo/concise", "--db", str(db), "--quiet", "--new",
                     "--seed", "1"]) in (0, 1)
    base, cand = _session_ids(db)
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "50")      # narrower than a line with a session id
    assert main(["diff", base, cand, "--db", str(db)]) == 0
    lines = capsys.readouterr().out.split("\n")
    whole = [ln for ln in lines if base in ln or cand in ln]
    assert whole and all(ln.startswith(("baseline ", "candidate ", "cases (open")) for ln in whole), whole
    assert all(len(ln) > 50 for ln in whole)          # left whole: the terminal wraps it
    rest = [ln for ln in lines if ln not in whole]
    assert all(len(ln) <= 50 for ln in rest), [ln for ln in rest if len(ln) > 50]
    latency = " ".join(ln for ln in rest if not ln.startswith(("┃", "│", "┏", "┡", "└", "pass rates")))
    for figure in re.findall(r"p50 \S+ -> \S+ ms", latency):
        assert re.fullmatch(r"p50 [\d,]+ -> [\d,]+ ms", figure), figure
    assert re.search(r"ttft_ms \(\d+ pairs;", latency) and re.search(r"p95 [\d,]+ -> [\d,]+ ms", latency), latency
