"""Scored dimensions (issue 29 item 4): declared in a set's header, kept with
a run, scored 1-5 by people and judges, and reported per model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lineup.cli import main
from store import Store

CASE = {"id": "capital", "category": "facts", "prompt": "What is the capital of France?"}
DIMS = [{"name": "correctness", "scale": "1-5", "description": "Is it right?"},
        {"name": "tone"}]


@pytest.fixture(autouse=True)
def _fast_demo(monkeypatch):
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")


def _write(path: Path, *lines: dict) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_a_set_header_declares_dimensions_that_a_run_records(tmp_path):
    from core.answering.dimensions import dimensions_of
    from core.answering.runner import sample_set_from_run
    from core.answering.sampleset import load_sample_set

    path = _write(tmp_path / "set.jsonl", {"set": {"dimensions": DIMS}}, CASE)
    loaded_set = load_sample_set(path)
    assert [d.name for d in loaded_set.header.dimensions] == ["correctness", "tone"]
    assert loaded_set.header.dimensions[0].description == "Is it right?"
    assert loaded_set.header.dimensions[1].scale == "1-5"
    db = tmp_path / "lineup.db"
    assert main(["run", str(path), "-m", "demo/concise", "-m", "demo/thorough", "--quiet", "--db", str(db)]) == 0
    with Store.open(db) as store:
        (s,) = store.list_sessions(kind="run")
        loaded = store.load_session(s.id)
    assert [d.name for d in dimensions_of(loaded.session.meta)] == ["correctness", "tone"]
    rebuilt, _ = sample_set_from_run(loaded)
    assert rebuilt.header.dimensions == loaded_set.header.dimensions


def test_a_run_adds_dimensions_of_its_own_and_other_dimensions_start_a_new_run(tmp_path, capsys):
    from core.answering.dimensions import dimensions_of

    path = _write(tmp_path / "set.jsonl", {"set": {"dimensions": [DIMS[0]]}}, CASE)
    db = tmp_path / "lineup.db"
    base = ["run", str(path), "-m", "demo/concise", "-m", "demo/thorough", "--quiet", "--db", str(db)]
    assert main([*base, "--dimension", "tone:Warm and brief", "--dimension", "clarity"]) == 0
    assert main([*base, "--dimension", "tone:Warm and brief", "--dimension", "clarity"]) == 0    # resumed
    with Store.open(db) as store:
        (s,) = store.list_sessions(kind="run")
        dims = dimensions_of(store.load_session(s.id).session.meta)
    assert [(d.name, d.description) for d in dims] == [("correctness", "Is it right?"), ("tone", "Warm and brief"),
                                                       ("clarity", None)]
    capsys.readouterr()
    assert main([*base, "--dimension", "tone"]) == 0
    assert "dimensions ['correctness', 'tone', 'clarity'] -> ['correctness', 'tone']" in capsys.readouterr().err
    with Store.open(db) as store:
        assert len(store.list_sessions(kind="run")) == 2
    for bad, problem in (("1st", "is not an identifier"), ("correctness", "declared twice"),
                         ("tone:" + "x" * 501, "at most 500")):
        assert main([*base, "--dimension", bad]) == 2
        err = capsys.readouterr().err
        assert "--dimension" in err and problem in err, err


@pytest.mark.parametrize(("dims", "problem"), [
    ([{"name": "tone"}, {"name": "tone"}], "declared twice"),
    ([{"name": "1st"}], "is not an identifier"),
    ([{"name": "tone; drop"}], "is not an identifier"),
    ([{"name": "tone", "scale": "1-10"}], "set.dimensions.0.scale"),
    ([{"name": "tone", "weight": 2}], "set.dimensions.0.weight"),
    ([{"name": f"d{i}"} for i in range(10)], "at most 9 dimensions"),
])
def test_a_bad_dimension_is_refused_naming_the_line(tmp_path, dims, problem):
    from core.answering.sampleset import SampleSetError, load_sample_set

    with pytest.raises(SampleSetError) as exc:
        load_sample_set(_write(tmp_path / "s.jsonl", {"set": {"dimensions": dims}}, CASE))
    assert "s.jsonl:1: set" in str(exc.value) and problem in str(exc.value)


def test_dimensions_read_from_a_hostile_meta_keep_only_the_sound_ones():
    from core.answering.dimensions import dimensions_of

    meta = {"dimensions": [{"name": "tone"}, {"name": "tone"}, {"name": "x" * 500}, "nope", {"name": "ok", "scale": 7}]}
    assert [d.name for d in dimensions_of(meta)] == ["tone"]
    assert dimensions_of({"dimensions": "tone"}) == () and dimensions_of({}) == ()


def _run(tmp_path: Path, db: Path) -> str:
    path = _write(tmp_path / "set.jsonl", {"set": {"dimensions": DIMS}}, CASE)
    assert main(["run", str(path), "-m", "demo/concise", "-m", "demo/thorough", "--quiet", "--db", str(db)]) == 0
    with Store.open(db) as store:
        (s,) = store.list_sessions(kind="run")
    return s.id


def test_a_raters_latest_score_of_an_answer_on_a_dimension_is_the_one_that_counts(tmp_path):
    from store.records import ScoreRecord, current_scores

    db = tmp_path / "lineup.db"
    sid = _run(tmp_path, db)
    with Store.open(db) as store:
        a, b = store.load_session(sid).outputs
        store.add_score(ScoreRecord(output_id=a.id, dimension="tone", value=2, rater="ann", created=1e9))
        store.add_score(ScoreRecord(output_id=a.id, dimension="tone", value=4, rater="ann", created=1e9 + 1))
        store.add_score(ScoreRecord(output_id=a.id, dimension="tone", value=1, rater="bob", created=1e9))
        store.add_score(ScoreRecord(output_id=a.id, dimension="correctness", value=5, rater="ann", created=1e9))
        store.add_score(ScoreRecord(output_id=b.id, dimension="tone", value=3, rater="demo/judge",
                                    rater_kind="judge", created=1e9))
        loaded = store.load_session(sid)
    assert len(loaded.scores) == 5
    now = {(s.output_id == a.id, s.dimension, s.rater): s.value for s in current_scores(loaded.scores)}
    assert now == {(True, "tone", "ann"): 4, (True, "tone", "bob"): 1, (True, "correctness", "ann"): 5,
                   (False, "tone", "demo/judge"): 3}


@pytest.mark.parametrize("value", [0, 6, 2.5, True, "3"])
def test_a_score_off_the_scale_is_refused(value):
    from pydantic import ValidationError

    from store.records import ScoreRecord

    with pytest.raises(ValidationError):
        ScoreRecord.model_validate({"output_id": "x", "dimension": "tone", "value": value})


def test_scores_travel_in_the_export_and_are_merged_by_imports_once(tmp_path):
    from core.exchange.export import export_jsonl
    from core.exchange.importing import import_file
    from store.imports import merge_database
    from store.records import ScoreRecord

    db = tmp_path / "lineup.db"
    sid = _run(tmp_path, db)
    with Store.open(db) as store:
        a, _ = store.load_session(sid).outputs
        store.add_score(ScoreRecord(output_id=a.id, dimension="tone", value=2, rater="ann", created=1e9))
        store.add_score(ScoreRecord(output_id=a.id, dimension="tone", value=5, rater="ann", created=1e9 + 1))
        lines = list(export_jsonl(store.load_session(sid)))
    exported = [json.loads(x) for x in lines]
    assert sorted(s["value"] for row in exported for s in row.get("scores", [])) == [2, 5]
    jsonl = tmp_path / "export.jsonl"
    jsonl.write_text("".join(x if x.endswith("\n") else x + "\n" for x in lines))
    for target in ("imported.db", "merged.db"):
        with Store.open(tmp_path / target) as other:
            for _ in range(2):      # idempotent
                if target == "imported.db":
                    summary = import_file(other, jsonl)
                else:
                    summary = merge_database(other, db)
                added = summary.added.get("score", 0)
                assert added in (0, 2)
            scores = other.load_session(sid).scores
        assert sorted((s.value, s.rater) for s in scores) == [(2, "ann"), (5, "ann")]
    bad = [json.loads(x) for x in lines]
    for row in bad:
        for s in row.get("scores", []):
            s["value"] = 9
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in bad))
    from store.imports import ImportFileError
    with Store.open(tmp_path / "third.db") as other, pytest.raises(ImportFileError) as exc:
        import_file(other, jsonl)
    assert "scores.0.value" in str(exc.value)


def test_the_vote_queue_records_a_raters_scores_before_after_or_instead_of_the_vote(tmp_path):
    import random

    import anyio

    from core.answering.vote_queue import VoteQueue
    from store import AsyncStore
    from store.records import current_scores

    db = tmp_path / "lineup.db"
    sid = _run(tmp_path, db)

    async def go():
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="ann", session_id=sid, rng=random.Random(3))
        await queue.load()
        item = queue.advance()
        assert [d.name for d in item.dimensions] == ["correctness", "tone"]
        alias_a = queue.mapping["A"]
        await queue.score("A", "tone", 2)
        await queue.score("A", "tone", 4)      # a change of mind supersedes
        assert queue.score_of("A", "tone") == 4 and queue.score_of("B", "tone") is None
        for bad in (("Z", "tone", 3), ("A", "style", 3), ("A", "tone", 6), ("A", "tone", 0)):
            try:
                await queue.score(*bad)
            except ValueError:
                continue
            raise AssertionError(f"{bad} was accepted")
        await queue.vote("A")
        await queue.score("B", "correctness", 5)
        await store.aclose()
        return alias_a

    alias_a = anyio.run(go)
    with Store.open(db) as store:
        loaded = store.load_session(sid)
    by_output = {o.id: o.contestant for o in loaded.outputs}
    now = {(by_output[s.output_id], s.dimension): (s.value, s.rater, s.rater_kind)
           for s in current_scores(loaded.scores)}
    alias_b = next(a for a in ("demo/concise", "demo/thorough") if a != alias_a)
    assert now == {(alias_a, "tone"): (4, "ann", "human"), (alias_b, "correctness"): (5, "ann", "human")}
    assert len(loaded.scores) == 3

    async def instead():     # scored without a vote: the case still waits for bob's vote
        store = await AsyncStore.open(db)
        queue = VoteQueue(store, rater="bob", session_id=sid, rng=random.Random(3))
        await queue.load()
        queue.advance()
        await queue.score("B", "tone", 1)
        queue.skip()
        await store.aclose()
        again = await AsyncStore.open(db)
        queue = VoteQueue(again, rater="bob", session_id=sid, rng=random.Random(3))
        await queue.load()
        item = queue.advance()
        await again.aclose()
        return item

    item = anyio.run(instead)
    assert item is not None and [s.value for ss in item.scores.values() for s in ss] == [1]


def test_a_rubric_that_names_a_dimension_records_its_grade_as_the_judges_score(tmp_path):
    from store.records import current_scores

    rubric = {"type": "rubric", "rubric": "Is it right?", "scale": "1-5", "dimension": "correctness",
              "name": "right"}
    path = _write(tmp_path / "set.jsonl", {"set": {"grader": "demo/judge", "dimensions": DIMS}},
                  {**CASE, "checks": [rubric, {"type": "rubric", "rubric": "Clear?", "scale": "1-5"}]})
    db = tmp_path / "lineup.db"
    assert main(["run", str(path), "-m", "demo/concise", "-m", "demo/thorough", "--quiet", "--db", str(db)]) == 0
    with Store.open(db) as store:
        (s,) = store.list_sessions(kind="run")
        loaded = store.load_session(s.id)
    grades = {c.output_id: c.spec["grade"] for c in loaded.checks if c.check == "right"}
    scores = current_scores(loaded.scores)
    assert len(grades) == 2 and len(scores) == 2     # the other rubric names no dimension: no score
    assert {(x.output_id, x.value) for x in scores} == set(grades.items())
    assert {(x.dimension, x.rater, x.rater_kind) for x in scores} == {("correctness", "demo/judge", "judge")}


def test_a_rubric_dimension_must_be_declared_and_scaled_1_to_5(tmp_path):
    from core.answering.sampleset import SampleSetError, load_sample_set

    rubric = {"type": "rubric", "rubric": "Is it right?", "scale": "1-5", "dimension": "style"}
    with pytest.raises(SampleSetError) as exc:
        load_sample_set(_write(tmp_path / "a.jsonl", {"set": {"dimensions": DIMS}}, {**CASE, "checks": [rubric]}))
    assert "a.jsonl:2: checks.0.dimension: 'style' is not a dimension the set header declares" in str(exc.value)
    pass_fail = {**rubric, "dimension": "tone", "scale": "pass_fail"}
    with pytest.raises(SampleSetError) as exc:
        load_sample_set(_write(tmp_path / "b.jsonl", {"set": {"dimensions": DIMS}}, {**CASE, "checks": [pass_fail]}))
    assert 'scale "1-5"' in str(exc.value)


def test_interval_alpha_matches_a_hand_computed_example():
    from core.report.agreement import krippendorff_alpha

    # units [1,2] [3,3] [2,4]: D_o = (2 + 0 + 8) / 6; pooled 1,2,2,3,3,4: D_e = 66 / 30; alpha = 1 - 25/33
    assert krippendorff_alpha([[1, 2], [3, 3], [2, 4]], "interval") == pytest.approx(8 / 33)
    assert krippendorff_alpha([[1, 1], [5, 5], [3, 3]], "interval") == pytest.approx(1.0)
    assert krippendorff_alpha([[2, 2], [2, 2]], "interval") is None        # no variation: undefined
    # nominal, unchanged: 4 disagreeing coincidences of 6, expected 36 - (1 + 4 + 4 + 1); a near miss
    # counts as much as a far one there
    assert krippendorff_alpha([["1", "2"], ["3", "3"], ["2", "4"]]) == pytest.approx(1 - 5 * 4 / (36 - 10))
    assert krippendorff_alpha([[1, 2], [3, 3], [2, 4]], "interval") != krippendorff_alpha(
        [["1", "2"], ["3", "3"], ["2", "4"]])


def test_dimension_figures_give_means_intervals_repeat_spread_and_agreement_people_and_judges_apart():
    from core.report.dimensions import dimension_figures

    rows = []
    # model m: repeat 0 scored 4 and 4, repeat 1 scored 2 and 2 (two answers each), by ann and bob alike
    for i, (repeat, value) in enumerate([(0, 4), (0, 4), (1, 2), (1, 2)]):
        for rater in ("ann", "bob"):
            rows.append((f"m{i}", "m", "tone", value, rater, "human", repeat))
    rows.append(("m0", "m", "tone", 1, "demo/judge", "judge", 0))
    rows.append(("n0", "n", "tone", 5, "ann", "human", 0))
    fig = dimension_figures(rows, rounds=200, seed=1)
    got = {(s.model, s.rater_kind): s for s in fig.scores}
    people = got[("m", "human")]
    assert people.mean == pytest.approx(3.0) and people.scores == 8 and people.answers == 4
    assert people.repeat_sd == pytest.approx(2 ** 0.5) and people.repeats == 2     # sd of 4 and 2
    assert people.ci_low is not None and 2.0 <= people.ci_low <= 3.0 <= people.ci_high <= 4.0
    judge = got[("m", "judge")]
    assert judge.mean == 1.0 and judge.scores == 1 and judge.ci_low is None and judge.repeat_sd is None
    assert got[("n", "human")].mean == 5.0
    agreed = {(a.dimension, a.rater_kind): a for a in fig.agreement}
    assert agreed[("tone", "human")].alpha == pytest.approx(1.0) and agreed[("tone", "human")].units == 4
    assert agreed[("tone", "judge")].alpha is None and agreed[("tone", "judge")].units == 0


def test_a_judge_is_set_beside_people_on_the_answers_both_scored_and_flagged_below_the_threshold():
    """Planted: people's median is the truth; 'close' is off by at most one point,
    'harsh' scores two points under people (its lean is -2), 'few' scored 4 answers."""
    from core.report.dimensions import MIN_SHARED_ANSWERS, dimension_figures

    truth = [1 + i % 5 for i in range(40)]
    rows = []
    for i, value in enumerate(truth):
        out = f"o{i}"
        rows += [(out, "m", "tone", value, "ann", "human", 0), (out, "m", "tone", value, "bob", "human", 0)]
        rows.append((out, "m", "tone", min(5, value + (i % 2)), "close", "judge", 0))
        rows.append((out, "m", "tone", max(1, value - 2), "harsh", "judge", 0))
        if i < 4:
            rows.append((out, "m", "tone", value, "few", "judge", 0))
    rows.append(("lone", "m", "tone", 3, "close", "judge", 0))     # no person scored it: left out
    fig = dimension_figures(rows, rounds=100, seed=1, min_agreement=0.6)
    got = {j.judge: j for j in fig.judges}
    close, harsh, few = got["close"], got["harsh"], got["few"]
    assert close.answers == 40 and close.within_one == 1.0 and not close.unreliable
    assert close.exact == pytest.approx(sum(1 for i, v in enumerate(truth) if i % 2 == 0 or v == 5) / 40)
    assert close.alpha is not None and close.alpha > 0.8 and 0 < close.lean < 1
    assert close.ci_low is not None and close.ci_low < 1.0 <= close.ci_high
    assert sum(map(sum, close.confusion)) == 40 and close.confusion[4][4] == 8     # people 5, judge 5
    # harsh: within one point only where the truth is 1 or 2 (clipped at 1), 16 of 40
    assert harsh.within_one == pytest.approx(16 / 40) and harsh.unreliable
    assert harsh.lean < -1 and harsh.alpha < close.alpha
    assert harsh.confusion[4][2] == 8                                               # people 5, judge 3
    assert few.answers == 4 < MIN_SHARED_ANSWERS and few.within_one is None and not few.unreliable
    assert "only 4 answers" in few.message
    lenient = {j.judge: j for j in dimension_figures(rows, rounds=100, seed=1, min_agreement=0.3).judges}
    assert not lenient["harsh"].unreliable                                          # 40% is above 30%


def test_the_report_shows_dimension_scores_in_json_terminal_markdown_and_html(tmp_path):
    import io

    from rich.console import Console

    from core.report import ReportFilters, build_report
    from core.report.html import render_html
    from core.report.markdown import render_markdown
    from core.report.terminal import print_report
    from store.records import ScoreRecord

    rubric = {"type": "rubric", "rubric": "Is it right?", "scale": "1-5", "dimension": "correctness"}
    path = _write(tmp_path / "set.jsonl", {"set": {"grader": "demo/judge", "dimensions": DIMS}},
                  {**CASE, "checks": [rubric]}, {**CASE, "id": "other", "prompt": "Name a colour", "checks": [rubric]})
    db = tmp_path / "lineup.db"
    assert main(["run", str(path), "-m", "demo/concise", "-m", "demo/thorough", "--repeat", "2", "--quiet",
                 "--db", str(db)]) == 0
    with Store.open(db) as store:
        (s,) = store.list_sessions(kind="run")
        outputs = store.load_session(s.id).outputs
        for k, o in enumerate(outputs):
            for rater, shift in (("ann", 0), ("bob", 1)):
                value = 1 + (k + shift) % 5 if o.contestant == "demo/concise" else 5
                store.add_score(ScoreRecord(output_id=o.id, dimension="tone", value=value, rater=rater))
            store.add_score(ScoreRecord(output_id=o.id, dimension="correctness", value=3, rater="ann"))
        report = build_report(store, ReportFilters(include_demo=True), rounds=50)
    dims = json.loads(report.to_json())["dimensions"]
    kinds = {(r["model"], r["dimension"], r["rater_kind"]) for r in dims["scores"]}
    assert {("demo/concise", "tone", "human"), ("demo/thorough", "tone", "human"),
            ("demo/concise", "correctness", "judge")} <= kinds
    thorough = next(r for r in dims["scores"] if r["model"] == "demo/thorough" and r["dimension"] == "tone")
    assert thorough["mean"] == 5.0 and thorough["scores"] == 2 * 4 and thorough["repeats"] == 2
    assert thorough["repeat_sd"] == 0.0
    tone = next(a for a in dims["agreement"] if a["dimension"] == "tone" and a["rater_kind"] == "human")
    assert tone["raters"] == 2 and tone["units"] == 8 and tone["alpha"] is not None
    (judged,) = dims["judges"]      # the rubric grader beside ann, on the 8 answers both scored: too few
    assert judged["judge"] == "demo/judge" and judged["dimension"] == "correctness" and judged["answers"] == 8
    assert judged["within_one"] is None and "only 8 answers" in judged["message"]
    md = render_markdown(report)
    assert "## Scored dimensions" in md and "| demo/thorough | tone | people | 5.00" in md
    assert "| correctness | demo/judge | 8 |" in md
    html = render_html(report)
    assert "Scored dimensions" in html and "Krippendorff" in html and "Judges beside people" in html
    out = io.StringIO()
    print_report(report, Console(file=out, width=160))
    assert "Scored dimensions" in out.getvalue() and "correctness" in out.getvalue()
    assert "Judges beside people" in out.getvalue() and "only 8 answers" in out.getvalue()


def test_lineup_serve_publishes_the_scores_of_the_answers_it_shows(tmp_path):
    import sqlite3

    from store.publish import write_published_copy
    from store.records import ScoreRecord
    from tests.tui_sessions import CASES, make_run

    db = tmp_path / "open.db"
    sid = make_run(db, CASES[:1], meta={"dimensions": DIMS})      # not blind: published whole
    with Store.open(db) as store:
        out = store.load_session(sid).outputs[0]
        store.add_score(ScoreRecord(output_id=out.id, dimension="tone", value=3, rater="ann"))
    published = write_published_copy(db, tmp_path / "pub.db")
    assert published.rows["score"] == 1
    conn = sqlite3.connect(tmp_path / "pub.db")
    assert conn.execute("SELECT output_id, dimension, value FROM score").fetchall() == [(out.id, "tone", 3)]
    conn.close()
