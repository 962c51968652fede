"""The load profile (`lineup load`), over real HTTP on loopback: the
figures follow a server whose latency grows with concurrency as configured
(`TestServer.load_profile`), a level caps the requests in flight, a server's
`concurrency` is respected unless exceeded on purpose, errors are counted by
kind, Ctrl-C exits 130 with the record kept, bad arguments exit 2 naming
the flag, and a profile's answers stay out of the vote queue and the report.

Timings on a busy 2-core machine are noisy: the assertions are orderings and
ratios with wide margins, never tight timings."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.answering.vote_queue import build_items
from lineup.cli import main
from store import Store
from store.report_queries import Scope, read_outputs
from tests.server import Received, Reply, TestServer
from tests.run_support import config_file, sample_set

ROOT = Path(__file__).resolve().parents[1]


def _load_json(capsys: pytest.CaptureFixture, argv: list[str]) -> dict:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _levels(data: dict, alias: str) -> dict[int, dict]:
    (model,) = [m for m in data["models"] if m["alias"] == alias]
    return {f["level"]: f for f in model["levels"]}


@pytest.mark.slow
def test_figures_follow_the_servers_growth_and_each_level_caps_the_requests_in_flight(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "l.db"
    sample = sample_set(tmp_path / "set.jsonl", 4)
    with TestServer() as srv:
        srv.script(Reply(text="a steady answer of some length", usage=(5, 12, None)))
        srv.load_profile(base_ms=50, per_inflight_ms=50)
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        data = _load_json(capsys, ["load", str(sample), "-m", "m0", "--levels", "1,4,8", "--requests", "16",
                                   "--exceed-server-limit", "--json", "--quiet", "--db", str(db),
                                   "--config", str(config), "--bootstrap", "200"])
        arrived = [r.in_flight for r in srv.requests if r.method == "POST"]
        assert srv.max_in_flight <= 8
    assert data["schema"] == "lineup.load/1" and data["levels"] == [1, 4, 8] and data["requests"] == 16
    assert data["complete"] is True and data["exceed_server_limit"] is True
    # the levels run one after another: each one's requests never had more than the level in flight
    assert len(arrived) == 48
    for k, level in enumerate((1, 4, 8)):
        seen = arrived[16 * k:16 * (k + 1)]
        assert max(seen) <= level
        assert max(seen) > level // 2   # and the level was really reached (concurrency happened)
    figures = _levels(data, "m0")
    for f in figures.values():
        assert f["sent"] == f["complete"] == 16 and f["errors"] == {} and f["error_rate"] == 0.0
        assert f["ttft_ms"]["n"] == 16 and f["tokens_per_s_p50"] is not None and f["answers_per_s"] > 0
        assert f["ttft_ms"]["p95_low"] <= f["ttft_ms"]["p95"] <= f["ttft_ms"]["p95_high"]
    # configured: first token after 50 ms + 50 ms per other request in flight (50, 200, 400 ms)
    p95 = {level: f["ttft_ms"]["p95"] for level, f in figures.items()}
    assert p95[1] >= 45 and p95[1] < p95[4] < p95[8]
    g4, g8 = (figures[level]["ttft_p95_growth"]["ratio"] for level in (4, 8))
    assert g4 == pytest.approx(p95[4] / p95[1])
    assert 1.5 < g4 < 6 and 2.5 < g8 < 12 and g8 > 1.2 * g4
    assert figures[1]["ttft_p95_growth"] is None
    assert figures[8]["duration_p95_growth"]["ratio"] > 1.5
    with Store.open(db) as store:
        (summary,) = store.list_sessions()
        loaded = store.load_session(summary.id)
    assert loaded.session.kind == "load" and summary.id == data["session_id"]
    assert len(loaded.outputs) == 48 and {o.status for o in loaded.outputs} == {"complete"}
    # the figures are the record's: level 4's p95, computed here independently of numpy
    level_of = {t.id: (1, 4, 8)[t.repeat_index // 16] for t in loaded.turns}
    ttft4 = [o.ttft_ms for o in loaded.outputs if level_of[o.turn_id] == 4]
    assert p95[4] == pytest.approx(statistics.quantiles(ttft4, n=20, method="inclusive")[18])
    assert figures[4]["ttft_ms"]["p50"] == pytest.approx(statistics.median(ttft4))
    # the record alone gives the same figures again
    again = _load_json(capsys, ["load", "--report", summary.id[:12], "--json", "--db", str(db),
                                "--bootstrap", "200"])
    assert again == data
    # and the table says them
    capsys.readouterr()
    assert main(["load", "--report", summary.id, "--db", str(db), "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "m0: 16 requests per level" in out and f"x{g8:.2f}" in out
    # with its intervals, written as the report writes one ("1,006 .. 1,038"), not "1006-1038"
    assert main(["load", "--report", summary.id, "--db", str(db), "--bootstrap", "200"]) == 0
    out = capsys.readouterr().out
    q8 = _levels(again, "m0")[8]["ttft_ms"]
    assert f"{q8['p95_low']:,.0f} .. {q8['p95_high']:,.0f}" in out, out


def test_a_servers_concurrency_is_respected_unless_exceeded_on_purpose(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "l.db"
    sample = sample_set(tmp_path / "set.jsonl", 6)
    with TestServer() as srv:
        srv.script(Reply(text="ok", first_delay=0.05))
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        common = [str(sample), "-m", "m0", "--quiet", "--db", str(db), "--config", str(config), "--json"]
        # the local default (1 at once) is below level 4: refused, before any request or record
        capsys.readouterr()
        assert main(["load", *common, "--levels", "1,4"]) == 2
        err = capsys.readouterr().err
        assert "--levels" in err and "--exceed-server-limit" in err and "'m0'" in err
        assert srv.requests == [] and not db.exists()
        # a configured `concurrency` of 3 is the cap at every level up to it
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"concurrency": 3}})
        data = _load_json(capsys, ["load", *common, "--levels", "1,3"])
        assert srv.max_in_flight <= 3
        assert _levels(data, "m0")[3]["complete"] == 6
        assert data["models"][0]["server_concurrency"] == 3


def test_errors_are_counted_by_kind_at_each_level(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sample = sample_set(tmp_path / "set.jsonl", 5)
    lock = threading.Lock()
    seen: list[int] = []

    def answer(rec: Received) -> Reply:
        with lock:
            seen.append(1)
            k = len(seen) - 1
        # of every 10 requests: 2 rate limited, 1 server error, the rest answered
        return Reply(status=429, message="slow down") if k % 10 in (0, 5) else \
            Reply(status=500, message="boom") if k % 10 == 7 else Reply(text="fine")

    with TestServer() as srv:
        srv.respond(answer)
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"concurrency": 2}})
        data = _load_json(capsys, ["load", str(sample), "-m", "m0", "--levels", "1,2", "--requests", "10",
                                   "--json", "--quiet", "--db", str(tmp_path / "l.db"), "--config", str(config)])
    assert len(seen) == 20   # no retries by default: a refusal is counted, not hidden
    for f in _levels(data, "m0").values():
        assert f["sent"] == 10 and f["complete"] == 7
        assert f["errors"] == {"rate_limited": 2, "server": 1}
        assert f["error_rate"] == pytest.approx(0.3)
        assert f["ttft_ms"]["n"] == 7


def test_bad_arguments_exit_2_naming_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sample = sample_set(tmp_path / "set.jsonl", 2)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"concurrency": 4}})
        common = [str(sample), "--db", str(tmp_path / "l.db"), "--config", str(config), "--quiet"]
        for extra, named in ((["-m", "m0", "--levels", "0"], "--levels"),
                             (["-m", "m0", "--levels", "x"], "--levels"),
                             (["-m", "m0", "--levels", "1,,4"], "--levels"),
                             (["-m", "m0", "--levels", "2,2"], "--levels"),
                             (["-m", "nope"], "-m/--model:"),
                             (["-m", "m0", "--requests", "0"], "--requests"),
                             (["-m", "m0", "--levels", "1,4", "--requests", "3"], "--requests 3 is below")):
            capsys.readouterr()
            assert main(["load", *common, *extra]) == 2, extra
            err = capsys.readouterr().err
            assert named in err, (extra, err)
            assert "unknown model alias 'nope'" in err or extra[1] != "nope"
        assert srv.requests == []
    assert not (tmp_path / "l.db").exists()


def _env(db: Path, config: Path) -> dict[str, str]:
    return {**os.environ, "LINEUP_DB": str(db), "LINEUP_CONFIG": str(config), "PYTHONUNBUFFERED": "1"}


@pytest.mark.slow
def test_ctrl_c_mid_load_exits_130_and_keeps_the_record(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    sample = sample_set(tmp_path / "set.jsonl", 4)
    with TestServer() as srv:
        srv.script(Reply(text="slowly, slowly", chunk_chars=2, delay=0.15))
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"concurrency": 2}})
        proc = subprocess.Popen([sys.executable, "-m", "lineup", "load", str(sample), "-m", "m0",
                                 "--levels", "1,2", "--requests", "8"], env=_env(db, config), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        done = 0
        while time.monotonic() < deadline and proc.poll() is None and not done:
            time.sleep(0.2)
            try:
                with Store.open(db, create=False) as store:
                    done = sum(o.status == "complete" for s in store.list_sessions()
                               for o in store.load_session(s.id).outputs)
            except Exception:
                continue
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "stopped: what was recorded is kept" in err and "Traceback" not in err
    assert "m0: 8 requests per level" in out   # the figures of what was recorded
    with Store.open(db, create=False) as store:
        (summary,) = store.list_sessions()
        loaded = store.load_session(summary.id)
    statuses = [o.status for o in loaded.outputs]
    assert loaded.session.kind == "load"
    assert statuses.count("complete") >= 1 and len(statuses) < 16
    assert set(statuses) <= {"complete", "cancelled", "interrupted"}   # stopped by us, not by the server
    assert all(o.text for o in loaded.outputs if o.status == "complete")


def test_a_load_profile_stays_out_of_the_vote_queue_and_the_report_unless_named(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "l.db"
    sample = sample_set(tmp_path / "set.jsonl", 3)
    with TestServer() as srv:
        srv.script(Reply(text="an answer"))
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"concurrency": 2}, "m1": {"concurrency": 2}})
        data = _load_json(capsys, ["load", str(sample), "-m", "m0", "-m", "m1", "--levels", "1,2", "--json",
                                   "--quiet", "--db", str(db), "--config", str(config)])
        assert {m["alias"] for m in data["models"]} == {"m0", "m1"}
        # a plain run beside it, on the same database
        assert main(["run", str(sample), "-m", "m0", "-m", "m1", "--quiet", "--db", str(db),
                     "--config", str(config)]) == 0
    sid = data["session_id"]
    with Store.open(db) as store:
        load = store.load_session(sid)
        (run,) = [s for s in store.list_sessions() if s.kind == "run"]
        # 3 cases, 4 requests per level by default (twice the highest level), 2 models, 2 levels
        assert len(load.outputs) == 16 and build_items(load, rater="me") == []   # nothing to vote on
        assert len(build_items(store.load_session(run.id), rater="me")) == 3
        everything = read_outputs(store, Scope())
        named = read_outputs(store, Scope(sessions=(sid,)))
    # the report's answers (latency, cost, errors) are the run's alone unless the profile is named
    assert sum(everything.answers.values()) == 6
    assert sum(named.answers.values()) == 16
    capsys.readouterr()
    assert main(["sessions", "--kind", "load", "--db", str(db), "--json"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)] == [sid]
