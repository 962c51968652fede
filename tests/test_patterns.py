"""Patterns from a set or a schema cannot hang a run.

A regex check or a JSON-schema `pattern` that backtracks catastrophically
used to run in `re` for ever: Ctrl-C and SIGTERM were ignored (the match
never came back to Python) and the check was never saved, so a rerun hung
again. Every such pattern now runs under a time limit (`core.ground.patterns`): the
issue's own examples finish (the `regex` engine defuses them), a pattern
that still runs out is saved as a failed check with the reason, and a stop
ends the run within about a check's budget.

Checks that would hang the old code run in a child process with a bound, so
that they fail instead of hanging; every bound is a hang guard with generous
slack, not a timing benchmark.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.server import Reply, TestServer

REPO = Path(__file__).resolve().parents[1]
GUARD_S = 60.0
#: How long a stopped run may take to exit: the 2 s the README promises, with slack for a busy machine.
STOP_BOUND_S = 10.0

HOSTILE = "a" * 40 + "!"
#: Catastrophic for `re` and for `regex` alike: only the time limit ends it.
SLOW = r"^(a|a)*$"


def _in_child(code: str) -> dict:
    """Run `code` (which prints one JSON line) in a fresh interpreter, bounded."""
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True,
                              text=True, timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the check was still running after {GUARD_S:.0f} s (a pattern without a time limit)")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _outcomes(checks: list[dict], answer: str) -> list[dict]:
    return _in_child(f"""
        import json
        from pydantic import TypeAdapter
        from core.answering.checks import Check, run_checks
        checks = [TypeAdapter(Check).validate_python(c) for c in {checks!r}]
        print(json.dumps([o.model_dump() for o in run_checks(checks, {answer!r})]))
    """)


# ---------------------------------------------------------------------- checks

def test_the_issues_regex_finishes_with_the_right_verdict():
    """`^(\\w+\\s?)*$` on "a"*40+"!" hung `re`; it now answers: no match."""
    first, second = _outcomes([{"type": "regex", "pattern": r"^(\w+\s?)*$"},
                               {"type": "regex", "pattern": r"^(\w+\s?)*$", "negate": True}], HOSTILE)
    assert (first["passed"], first["detail"]) == (False, r"no match for '^(\\w+\\s?)*$'")
    assert (second["passed"], second["detail"]) == (True, "no match (as required)")


def test_the_issues_schema_pattern_finishes_with_the_right_verdict():
    """A schema `pattern` of `^(a+)+$` hung jsonschema's `re`; it now answers."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}}
    bad, good = (_outcomes([{"type": "json_schema", "schema": schema}], json.dumps({"name": text}))[0]
                 for text in (HOSTILE, "a" * 40))
    assert not bad["passed"] and "does not match" in bad["detail"]
    assert good["passed"]


def test_a_regex_that_runs_out_of_time_fails_with_the_reason():
    [outcome] = _outcomes([{"type": "regex", "pattern": SLOW, "name": "slow"}], HOSTILE)
    assert not outcome["passed"] and outcome["score"] == 0.0
    assert outcome["detail"].startswith("timed out: the pattern '^(a|a)*$' took longer than 1 s")


def test_a_negated_regex_that_runs_out_of_time_fails_too():
    """Out of time is not "no match": a forbidden pattern cannot be cleared."""
    [outcome] = _outcomes([{"type": "regex", "pattern": SLOW, "negate": True}], HOSTILE)
    assert not outcome["passed"] and outcome["detail"].startswith("timed out")


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "string", "pattern": SLOW}},
    {"type": "object", "patternProperties": {SLOW: {"type": "string"}}},
    {"type": "object", "patternProperties": {SLOW: {}}, "additionalProperties": False},
], ids=["pattern", "patternProperties", "additionalProperties"])
def test_schema_patterns_share_one_budget_per_check(schema):
    """Thirty strings (or keys) against a catastrophic pattern: the check ends
    in one budget, not thirty, failed with the reason."""
    value = [HOSTILE + str(i) for i in range(30)]
    if schema["type"] == "object":
        value = {v: "x" for v in value}
    started = time.monotonic()
    [outcome] = _outcomes([{"type": "json_schema", "schema": schema}], json.dumps(value))
    assert not outcome["passed"] and outcome["detail"].startswith("timed out"), outcome
    assert time.monotonic() - started < 20, "each match had its own budget"


def test_tool_arguments_are_matched_under_the_limit():
    """A tool's parameters schema comes from the set too: `tool_args_valid`
    matches the model's arguments under the same limit."""
    result = _in_child(f"""
        import json
        from core.answering.checks import AnswerFacts, run_checks
        from core.answering.checks import ToolArgsValidCheck
        from core.answering.tools import ToolScript
        from store.records import AnswerTrace, TraceCall, TraceStep
        script = ToolScript.model_validate({{"tools": [{{"name": "look", "description": "d", "parameters": {{
            "type": "object", "properties": {{"q": {{"type": "string", "pattern": {SLOW!r}}}}}}}}}]}})
        call = TraceCall(id="1", name="look", arguments={{"q": {HOSTILE!r}}}, result="r")
        trace = AnswerTrace(steps=[TraceStep(calls=[call])])
        [o] = run_checks([ToolArgsValidCheck()], "done", AnswerFacts(trace=trace, script=script))
        print(json.dumps(o.model_dump()))
    """)
    assert not result["passed"] and "timed out" in result["detail"]


def test_the_demo_model_fills_arguments_under_the_limit():
    """The demo model checks the values it puts in a tool call against the
    schema's `pattern`; a catastrophic one counts as no match instead of hanging."""
    result = _in_child(f"""
        import json
        from providers.demo_tools import _Filler
        schema = {{"type": "object", "properties": {{"code": {{"type": "string", "pattern": {SLOW!r}}}}},
                  "required": ["code"]}}
        slow = _Filler("The code: {HOSTILE}", []).instance(schema)
        schema["properties"]["code"]["pattern"] = "^a+!$"
        print(json.dumps([slow, _Filler("The code: {HOSTILE}", []).instance(schema)]))
    """)
    assert result == [{}, {"code": HOSTILE}]


def test_schemas_whose_patterns_cannot_run_under_the_limit_are_refused():
    from core.answering.tools import schema_problem

    problem = schema_problem({"type": "object", "patternProperties": {"^x": {}}, "unevaluatedProperties": False})
    assert problem is not None and "unevaluatedProperties together with patternProperties" in problem
    problem = schema_problem({"properties": {"a": {"type": "string", "pattern": r"\p{"}}})
    assert problem is not None and "properties/a/pattern" in problem
    # a property called "pattern" and an enum value with a "pattern" key are data, not patterns
    assert schema_problem({"properties": {"pattern": {"enum": [{"pattern": "("}]}}}) is None


# ---------------------------------------------------------------------- a real run

def _config(path: Path, srv: TestServer) -> Path:
    path.write_text(textwrap.dedent(f"""
        [models.m0]
        provider = "openai"
        model = "m0-model"
        base_url = "{srv.base_url('openai')}"
        max_retries = 0
    """))
    return path


def _env(db: Path, config: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(LINEUP_DB=str(db), LINEUP_CONFIG=str(config), PYTHONUNBUFFERED="1",
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def _checks_saved(db: Path) -> list[tuple[str, int, str]]:
    try:
        conn = sqlite3.connect(db)
        try:
            return conn.execute("SELECT check_name, passed, detail FROM check_result ORDER BY check_name").fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return []


def _answered(db: Path) -> bool:
    try:
        conn = sqlite3.connect(db)
        try:
            return conn.execute("SELECT count(*) FROM output WHERE status = 'complete'").fetchone()[0] > 0
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return False


@pytest.mark.skipif(not hasattr(signal, "SIGTERM"), reason="needs POSIX signals")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_stop_ends_a_run_checking_a_catastrophic_pattern(tmp_path, sig):
    """`lineup run` busy matching catastrophic patterns (twelve checks of a
    second each) exits soon after SIGINT or SIGTERM, with the check it was
    running saved as failed with the reason; the old code ignored both."""
    db = tmp_path / "run.db"
    checks = [{"type": "regex", "pattern": SLOW, "name": f"slow {i:02d}"} for i in range(12)]
    set_path = tmp_path / "set.jsonl"
    set_path.write_text(json.dumps({"id": "c0", "category": "k", "prompt": "say a", "checks": checks}) + "\n")
    with TestServer() as srv:
        srv.script(Reply(text=HOSTILE))
        config = _config(tmp_path / "config.toml", srv)
        cmd = [sys.executable, "-m", "lineup", "run", str(set_path), "-m", "m0", "--quiet"]
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(db, config), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + GUARD_S
            while not _answered(db):   # the answer is in: the checks are running
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.05)
            time.sleep(0.3)
            proc.send_signal(getattr(signal, sig))
            stopped = time.monotonic()
            try:
                _, err = proc.communicate(timeout=STOP_BOUND_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"still running {STOP_BOUND_S:.0f} s after {sig}")
            took = time.monotonic() - stopped
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, err
    assert took < STOP_BOUND_S
    saved = _checks_saved(db)
    assert 1 <= len(saved) < len(checks), "the run was not stopped between checks"
    assert all(not passed and detail.startswith("timed out: the pattern") for _, passed, detail in saved)


def test_a_timed_out_check_is_saved_so_a_rerun_does_not_run_it_again(tmp_path):
    db = tmp_path / "run.db"
    set_path = tmp_path / "set.jsonl"
    set_path.write_text(json.dumps({"id": "c0", "category": "k", "prompt": "say a",
                                    "checks": [{"type": "regex", "pattern": SLOW, "name": "slow"}]}) + "\n")
    with TestServer() as srv:
        srv.script(Reply(text=HOSTILE))
        config = _config(tmp_path / "config.toml", srv)
        cmd = [sys.executable, "-m", "lineup", "run", str(set_path), "-m", "m0", "--quiet"]
        first = subprocess.run(cmd, cwd=REPO, env=_env(db, config), capture_output=True, text=True, timeout=GUARD_S)
        assert first.returncode == 0, first.stderr
        [(name, passed, detail)] = _checks_saved(db)
        assert (name, passed) == ("slow", 0) and "took longer than 1 s" in detail
        again = subprocess.run(cmd, cwd=REPO, env=_env(db, config), capture_output=True, text=True, timeout=GUARD_S)
    assert again.returncode == 0, again.stderr
    assert "1 conversations were already done" in again.stderr
    assert len(_checks_saved(db)) == 1
