"""The incumbent as a contestant: a set sampled from a trace with
`--keep-answers` runs with `--with-logged` (or `-m logged`); production's
answer is recorded with origin "logged" (no request, no measured timing),
judged blind beside the candidates, and rated in the report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from lineup.cli import main
from lineup.commands import sample_cmd
from store import Store
from tests.server import Reply, TestServer
from tests.run_support import config_file
from tests.trace_producers import litellm_payload, write_lines


@pytest.fixture(autouse=True)
def _fast_demo(monkeypatch):
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    monkeypatch.setenv("COLUMNS", "300")


def _sampled_set(tmp_path: Path, n: int = 4) -> Path:
    rows = [litellm_payload([{"role": "user", "content": f"Question {i}: how do I sort a list of {i} items?"}],
                            f"production answer {i}", model="gpt-4o-2024-08-06", at=i, latency_ms=700 + 10 * i,
                            tokens=(11, 22), cost=0.002, requester={"feature": "code" if i % 2 else "chat"})
            for i in range(n)]
    trace = write_lines(tmp_path / "litellm.jsonl", rows)
    out = tmp_path / "set.jsonl"
    parser = argparse.ArgumentParser()
    sample_cmd.configure(parser)
    assert sample_cmd.run(parser.parse_args([str(trace), "--by", "feature", "-n", str(n), "--keep-answers",
                                             "-o", str(out)])) == 0
    return out


def _outputs(db: Path) -> list[tuple]:
    with Store.open(db) as store:
        return [tuple(r.values()) for r in store.query(
            "SELECT o.contestant, o.origin, o.text, o.ttft_ms, o.duration_ms, o.served_model, o.input_tokens, "
            "o.cost, o.label FROM output o ORDER BY o.created, o.id")]


def test_the_logged_answer_runs_as_a_contestant_without_a_request(tmp_path, capsys):
    sample = _sampled_set(tmp_path)
    db = tmp_path / "l.db"
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"cand": {}})
        srv.script(Reply(text="candidate answer", delay=0.002))
        assert main(["run", str(sample), "--db", str(db), "--config", str(config), "-m", "cand",
                     "--with-logged", "--quiet"]) == 0
        assert len(srv.requests) == 4                     # the candidate's only
    rows = _outputs(db)
    logged = [r for r in rows if r[0] == "logged"]
    cand = [r for r in rows if r[0] == "cand"]
    assert len(logged) == len(cand) == 4
    assert sorted(r[2] for r in logged) == [f"production answer {i}" for i in range(4)]
    for r in logged:
        assert r[1] == "logged" and r[3] is None and r[4] is None     # no measured timing
        assert r[5] == "gpt-4o-2024-08-06" and r[6] == 11 and r[7] == pytest.approx(0.002)
    assert {r[1] for r in cand} == {"stream"} and all(r[3] is not None for r in cand)
    err = capsys.readouterr().err
    assert "latency p50 715 ms as logged, not measured" in err


def test_the_logged_answer_is_judged_blind_and_rated(tmp_path):
    from core.report import ReportFilters, build_report
    from core.answering.vote_queue import build_items

    sample = _sampled_set(tmp_path)
    db = tmp_path / "lineup.db"
    assert main(["run", str(sample), "--db", str(db), "-m", "demo/concise", "-m", "logged", "--quiet"]) == 0
    with Store.open(db) as store:
        (session,) = store.list_sessions(kind="run")
        loaded = store.load_session(session.id)
        items = build_items(loaded, rater="me")
    assert len(items) == 4
    for item in items:
        assert sorted(item.aliases) == ["demo/concise", "logged"]
        labels = {c.label for c in item.contestants}
        assert labels <= {"A", "B", "C", "D"}             # what a rater sees: labels, never the alias
    assert main(["judge", "--db", str(db), "-m", "demo/judge"]) == 0
    with Store.open(db) as store:
        report = build_report(store, ReportFilters(include_demo=True), rounds=50, judge="demo/judge")
        eng = {e.model: e for e in report.engineering}
    assert report.judge is not None and report.judge.verdicts > 0
    assert eng["logged"].ttft_ms is None                     # production's timing is not a measured one


def test_with_logged_needs_a_set_with_logged_answers(tmp_path, capsys):
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"id": "c1", "category": "k", "prompt": "hi"}) + "\n")
    assert main(["run", str(plain), "--db", str(tmp_path / "x.db"), "-m", "demo/concise", "--with-logged",
                 "--quiet"]) == 2
    assert "no case holds a logged answer" in capsys.readouterr().err
