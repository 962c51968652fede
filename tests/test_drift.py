"""The drift watch: `lineup drift SET -m A` records canary runs, and
`lineup drift --report` flags a drift in the served model, its fingerprint,
the answers, the checks and latency at the run where it started; runs over
real HTTP on loopback, planted timings through the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.decide.drift import drift_report, fisher_greater
from lineup.cli import main
from store import Store
from store.runs import canary_session_ids
from tests.server import Reply, TestServer
from tests.run_support import config_file, planted_cases, planted_run


def sample_set(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"c{i}", "category": "k", "prompt": f"question {i}",
                                        "checks": [{"type": "contains", "value": "stable"}]}) + "\n"
                            for i in range(n)))
    return path


def test_fisher_greater_matches_scipy() -> None:
    from scipy import stats

    for x1, n1, x2, n2 in ((10, 10, 0, 20), (1, 10, 1, 20), (0, 5, 3, 5), (4, 30, 2, 60)):
        expected = stats.fisher_exact([[x1, n1 - x1], [x2, n2 - x2]], alternative="greater").pvalue
        assert fisher_greater(x1, n1, x2, n2) == pytest.approx(expected, rel=1e-9)


@pytest.mark.slow
def test_a_drift_in_fingerprint_and_answers_is_flagged_at_the_run_where_it_started(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "d.db"
    sample = sample_set(tmp_path / "canary.jsonl", 10)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        common = [str(sample), "-m", "m0", "--db", str(db), "--config", str(config), "--quiet"]
        old = Reply(text="a stable answer", served_model="gpt-x-0613", system_fingerprint="fp_a")
        new = Reply(text="a different answer", served_model="gpt-x-1106", system_fingerprint="fp_b")
        for k in range(5):
            srv.script(old if k < 3 else new)
            assert main(["drift", *common]) == 0
        # every canary request was deterministic by default
        assert {(r.json["temperature"], r.json["seed"]) for r in srv.requests} == {(0, 0)}
    with Store.open(db) as store:
        assert len(canary_session_ids(store)) == 5
        assert store.list_sessions(kind="run")[0].kind == "run"
    capsys.readouterr()
    # (latency on a shared loopback machine is noise here: this test is about what the server said)
    assert main(["drift", "--report", "--json", "--db", str(db), "--latency-change", "10000"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "lineup.drift/1"
    (model,) = data["models"]
    assert model["alias"] == "m0" and len(model["runs"]) == 5
    assert [r["served_models"] for r in model["runs"]] == [{"gpt-x-0613": 10}] * 3 + [{"gpt-x-1106": 10}] * 2
    assert [r["change_rate"] for r in model["runs"]] == [None, 0.0, 0.0, 1.0, 0.0]
    flags = {(f["kind"], f["run"]) for f in model["flags"]}
    assert flags == {("served_model", 3), ("fingerprint", 3), ("answers", 3), ("checks", 3)}
    started = {f["session_id"] for f in model["flags"]}
    assert started == {model["runs"][3]["session_id"]}
    # the table says the same
    assert main(["drift", "--report", "--db", str(db), "--latency-change", "10000"]) == 0
    out = capsys.readouterr().out
    assert f"CHANGED at run 3 ({model['runs'][3]['session_id']}): served model gpt-x-0613 -> gpt-x-1106" in out
    assert "system_fingerprint fp_a -> fp_b" in out


@pytest.mark.slow
def test_steady_canaries_flag_nothing_and_a_plain_run_is_not_a_canary(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "d.db"
    sample = sample_set(tmp_path / "canary.jsonl", 4)
    with TestServer() as srv:
        srv.script(Reply(text="a stable answer", system_fingerprint="fp_a"))
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        common = [str(sample), "-m", "m0", "--db", str(db), "--config", str(config), "--quiet"]
        assert main(["run", *common]) == 0
        assert main(["drift", *common, "--every", "0.05s", "--times", "3"]) == 0
        assert len(srv.requests) == 16            # the plain run and three canaries: never resumed
        assert main(["drift", *common]) == 0
    with Store.open(db) as store:
        assert len(canary_session_ids(store)) == 4
    capsys.readouterr()
    assert main(["drift", "--report", "--json", "--db", str(db), "--latency-change", "10000"]) == 0
    (model,) = json.loads(capsys.readouterr().out)["models"]
    assert len(model["runs"]) == 4 and model["flags"] == []


@pytest.mark.slow
def test_latency_drift_and_sampled_runs(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    with Store.open(db) as store:
        sids = [planted_run(store, "m", "x", planted_cases(60, ttft=lambda i: 100.0 + i % 5)) for _ in range(3)]
        sids.append(planted_run(store, "m", "x", planted_cases(60, ttft=lambda i: 180.0 + i % 5)))      # +80% from here
        for sid in sids:
            store.update_session(sid, meta={"canary": True}, sample_set_name="s", params={"temperature": 0})
        loaded = [store.load_session(s) for s in canary_session_ids(store)]
    report = drift_report(loaded)
    (model,) = report.models
    assert [(f.kind, f.run) for f in model.flags] == [("ttft_ms", 3)]
    # a larger threshold than the move: not flagged
    assert drift_report(loaded, latency_pct=90).models[0].flags == []
    # sampled (temperature 0.7, no seed): answers that change are expected, never flagged
    changed = [ld.model_copy(update={
        "session": ld.session.model_copy(update={"params": {"temperature": 0.7}}),
        "outputs": ld.outputs if k < 2 else [o.model_copy(update={"text": "something new " + o.id})
                                             for o in ld.outputs]})
        for k, ld in enumerate(loaded)]
    flags = drift_report(changed).models[0].flags
    assert "answers" not in {f.kind for f in flags}
    assert drift_report(changed).models[0].runs[2].change_rate == 1.0


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "d.db"
    assert main(["drift", "--db", str(db)]) == 2
    assert main(["drift", "x.jsonl", "--report", "--db", str(db)]) == 2
    assert main(["drift", "x.jsonl", "--every", "soon", "--db", str(db)]) == 2
    assert main(["drift", "x.jsonl", "--times", "2", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "--every: 'soon' is not a duration" in err and "--times N (at least 1) goes with --every" in err


def test_in_an_80_column_terminal_each_run_is_told_apart(tmp_path: Path) -> None:
    """The report cut every run id to "01M96K…", every date to "2026-1…" and
    the served model and fingerprint to a few letters at 80 columns, so no run
    could be told from another nor what it was served. A narrow terminal now
    shows each run as the shortest prefix that names it (`lineup replay` takes
    one) and its date without the year, and splits the table into tables that
    fit, each led by the run's number; a wide one shows ids whole."""
    from tests.cli_support import on_terminal

    db = tmp_path / "d.db"
    sample = sample_set(tmp_path / "canary.jsonl", 2)
    served = ["gpt-x-2024-08-06", "gpt-x-2024-08-06", "gpt-x-2024-11-20"]
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        for k, model in enumerate(served):
            srv.script(Reply(text="a stable answer", served_model=model, system_fingerprint=f"fp_{k}a7c3e91"))
            assert main(["drift", str(sample), "-m", "m0", "--db", str(db), "--config", str(config), "--quiet"]) == 0
    with Store.open(db) as store:
        ids = canary_session_ids(store)
    assert len(ids) == 3
    for cols in (80, 200):
        text = on_terminal(["drift", "--report", "--db", str(db)], 40, cols)
        lines = text.split("\n")
        # the tables fit; a CHANGED line keeps its session id whole (the terminal wraps it)
        assert all(len(ln) <= cols for ln in lines if ln[:1] in "┏┃┡│└"), text
        tables: list[dict[str, list[str]]] = []        # each table: its columns' cells, by header
        head: list[list[str]] = []
        for ln in lines:
            if ln.startswith("┃"):
                head.append([c.strip() for c in ln.split("┃")[1:-1]])
            elif ln.startswith("┡"):
                tables.append({" ".join(p for p in parts if p): [] for parts in zip(*head, strict=True)})
                head = []
            elif ln.startswith("│") and tables:
                for name, cell in zip(tables[-1], [c.strip() for c in ln.split("│")[1:-1]], strict=True):
                    tables[-1][name].append(cell)
        column = {name: cells for t in tables for name, cells in t.items() if name != "#"}
        shown = column["run"]
        assert all(sum(i.startswith(s) for i in ids) == 1 for s in shown), shown    # each names one run
        assert {next(i for i in ids if i.startswith(s)) for s in shown} == set(ids), shown
        assert [c.split(" ")[0] for c in column["served model"]] == served, column["served model"]
        assert [c.split(" ")[0] for c in column["fingerprint"]] == [f"fp_{k}a7c3e91" for k in range(3)]
        if cols == 200:
            assert len(tables) == 1 and all(len(s) == 26 for s in shown)
        else:
            assert len(tables) > 1 and all(t["#"] == ["0", "1", "2"] for t in tables)
