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
