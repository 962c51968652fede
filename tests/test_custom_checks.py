"""Custom checks (`{"type": "python", "function": ...}`): a team's function
beside the set file or from an installed entry point, called in a child
process with the answer, the case and the trace; what it returns, raises or
never returns becomes a check result; bad specs are refused when the set loads."""

from __future__ import annotations

import json
from collections import Counter
import textwrap
from pathlib import Path

import anyio
import pytest

from core.answering.checks import AnswerFacts, PythonCheck, run_case_check_async, run_check
from core.answering.runner import sample_set_from_run
from core.answering.sampleset import SampleSetError, load_sample_set
from lineup.cli import main
from store import Store
from tests.cli_support import gone, pids_in

CHECKS = '''
import os, sys, time

def recorded(answer, case, trace):
    with open(os.path.join(os.path.dirname(__file__), "seen.json"), "w") as f:
        import json
        json.dump({"answer": answer, "case": case, "trace": trace}, f)
    return {"passed": "Lisbon" in answer, "score": 0.75, "reason": "mentions the city"}

def raises(answer, case, trace):
    return {}["no such key"]

def sleeps(answer, case, trace):
    open(os.path.join(os.path.dirname(__file__), "pid"), "w").write(str(os.getpid()))
    time.sleep(60)

def returns_a_number(answer, case, trace):
    return 3

def passed_is_a_string(answer, case, trace):
    return {"passed": "yes"}

def score_too_big(answer, case, trace):
    return {"passed": True, "score": 1.5}

def score_nan(answer, case, trace):
    return {"passed": True, "score": float("nan")}

class Verdict:
    def __init__(self):
        self.passed, self.score, self.reason = False, 0.25, "an object's attributes"

def an_object(answer, case, trace):
    return Verdict()

def plain_bool(answer, case, trace):
    return len(answer) > 3

def exits(answer, case, trace):
    os._exit(0)

def folder_not_on_path(answer, case, trace):
    here = os.path.dirname(os.path.abspath(__file__))
    return {"passed": here not in [os.path.abspath(p) for p in sys.path], "reason": "path checked"}

def no_key(answer, case, trace):
    return {"passed": not any("planted" in v for v in os.environ.values()), "reason": ",".join(sorted(os.environ))}

def hostile_reason(answer, case, trace):
    return {"passed": False, "reason": "\\x1b]0;owned\\x07\\x1b[31m[bold]" + "x" * 10000}
'''


@pytest.fixture
def beside(tmp_path) -> Path:
    (tmp_path / "my_checks.py").write_text(CHECKS)
    return tmp_path


def _run(folder: Path, function: str, answer: str = "It is sunny in Lisbon.", **kw):
    return run_check(PythonCheck(function=f"my_checks:{function}", **kw), answer, AnswerFacts(set_dir=folder))


def test_returns_become_results_with_score_and_reason(beside):
    ok = _run(beside, "recorded")
    assert (ok.passed, ok.score, ok.detail, ok.extra) == (True, 0.75, "mentions the city", {"status": "passed"})
    no = _run(beside, "recorded", answer="It is sunny.")
    assert (no.passed, no.score) == (False, 0.75)
    obj = _run(beside, "an_object")
    assert (obj.passed, obj.score, obj.detail) == (False, 0.25, "an object's attributes")
    assert (_run(beside, "plain_bool").passed, _run(beside, "plain_bool", answer="ab").passed) == (True, False)
    assert _run(beside, "plain_bool", answer="ab").score == 0.0


@pytest.mark.parametrize(("function", "says"), [
    ("raises", "the check raised: KeyError: 'no such key' (my_checks.py line 11)"),
    ("returns_a_number", "the check returned int, not a bool or {passed, score, reason}"),
    ("passed_is_a_string", "'passed' is str, not true or false"),
    ("score_too_big", "score 1.5 is not a number from 0 to 1"),
    ("score_nan", "score nan is not a number from 0 to 1"),
    ("exits", "exited with status 0 without a result"),
])
def test_exceptions_and_bad_returns_fail_with_the_reason(beside, function, says):
    outcome = _run(beside, function)
    assert not outcome.passed and outcome.score == 0.0
    assert outcome.detail == says
    assert outcome.extra["status"] in ("error", "crashed")


def test_a_check_that_never_returns_is_killed_at_its_time_limit(beside):
    outcome = _run(beside, "sleeps", timeout_s=1)
    assert not outcome.passed and outcome.extra["status"] == "timed_out"
    assert outcome.detail == "timed out after 1 s (killed)"
    (pid,) = pids_in(beside / "pid", 1)
    assert gone(pid)


def test_cancelling_kills_a_running_custom_check(beside):
    async def scenario() -> None:
        with anyio.fail_after(30), anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_case_check_async, PythonCheck(function="my_checks:sleeps", timeout_s=60),
                              ["x"], [AnswerFacts(set_dir=beside)])
                while not (beside / "pid").exists():
                    await anyio.sleep(0.02)
                scope.cancel()

    anyio.run(scenario)
    (pid,) = pids_in(beside / "pid", 1)
    assert gone(pid)


def test_the_set_folder_is_on_the_path_for_the_import_only_and_no_key_reaches_it(beside, monkeypatch):
    assert _run(beside, "folder_not_on_path").passed
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-0123456789abcdef")
    outcome = _run(beside, "no_key")
    assert outcome.passed and "OPENAI_API_KEY" not in outcome.detail


def test_the_reason_is_untrusted_text_escaped_and_bounded(beside):
    outcome = _run(beside, "hostile_reason")
    assert "\x1b" not in outcome.detail and "\x07" not in outcome.detail and len(outcome.detail) <= 300
    assert outcome.detail.startswith("\\x1b]0;owned\\x07")


def test_an_installed_entry_point_is_found_and_called(tmp_path, monkeypatch):
    site = tmp_path / "site"
    dist = site / "team_checks-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: team-checks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[lineup.checks]\nteam_polite = team_checks_mod:polite\n")
    (site / "team_checks_mod.py").write_text(
        "def polite(answer, case, trace):\n    return {'passed': 'please' in answer, 'reason': case['id']}\n")
    monkeypatch.syspath_prepend(str(site))
    set_path = tmp_path / "set.jsonl"
    set_path.write_text(json.dumps({"id": "ep-1", "category": "c", "prompt": "p",
                                    "checks": [{"type": "python", "function": "team_polite"}]}) + "\n")
    sample = load_sample_set(set_path)
    case = sample.cases[0]
    [facts] = case.answer_facts([None], sample.set_dir)
    outcome = run_check(case.checks[0], "yes, please", facts)
    assert (outcome.passed, outcome.detail) == (True, "ep-1")


def test_bad_custom_specs_are_refused_when_the_set_loads_with_file_and_line(beside, capsys):
    (beside / "broken.py").write_text("def score(:\n    pass\n")
    lines = [
        {"id": "ok", "category": "c", "prompt": "p", "checks": [{"type": "python", "function": "my_checks:recorded"}]},
        {"id": "a", "category": "c", "prompt": "p", "checks": [{"type": "python", "function": "my_checks:absent"}]},
        {"id": "b", "category": "c", "prompt": "p", "checks": [{"type": "python", "function": "nowhere:score"}]},
        {"id": "c", "category": "c", "prompt": "p", "checks": [{"type": "python", "function": "broken:score"}]},
        {"id": "d", "category": "c", "prompt": "p", "checks": [{"type": "python", "function": "no_such_entry"}]},
        {"id": "e", "category": "c", "prompt": "p", "checks": [{"type": "python", "function": "my checks:x"}]},
        {"id": "f", "category": "c", "prompt": "p", "checks": [{"type": "python", "function": "m:f", "timeout_s": 0}]},
    ]
    set_path = beside / "set.jsonl"
    set_path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(SampleSetError) as raised:
        load_sample_set(set_path)
    problems = [p.replace(str(set_path), "set.jsonl") for p in raised.value.problems]
    assert problems == [
        "set.jsonl:2: checks.0.function: my_checks.py defines no 'absent'",
        f"set.jsonl:3: checks.0.function: no module 'nowhere' beside the set file (nowhere.py in {beside})",
        "set.jsonl:4: checks.0.function: broken.py line 1: invalid syntax",
        "set.jsonl:5: checks.0.function: no entry point 'no_such_entry' in the group 'lineup.checks' is installed "
        "(MODULE:FUNCTION names a module beside the set file)",
        "set.jsonl:6: checks.0.function: 'my checks' is not a module name (MODULE:FUNCTION, e.g. my_checks:score)",
        "set.jsonl:7: checks.0.timeout_s: input should be greater than 0",
    ]
    capsys.readouterr()
    assert main(["run", str(set_path), "-m", "demo/concise", "--db", str(beside / "x.db")]) == 2
    err = capsys.readouterr().err
    assert "set.jsonl:2: checks.0.function: my_checks.py defines no 'absent'" in err


def test_a_run_calls_the_check_with_the_answer_the_case_and_the_trace(beside, monkeypatch, capsys):
    case = {"id": "weather", "category": "tools", "prompt": "What's the weather in Lisbon?",
            "tools": [{"name": "get_weather", "description": "Current weather for a city.",
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                      "required": ["city"]}}],
            "tool_results": [{"name": "get_weather", "result": {"temp_c": 21, "conditions": "sunny"}}],
            "checks": [{"type": "python", "function": "my_checks:recorded", "name": "says the city"}]}
    set_path = beside / "set.jsonl"
    set_path.write_text(json.dumps(case) + "\n")
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    db = beside / "run.db"
    assert main(["run", str(set_path), "-m", "demo/concise", "--quiet", "--db", str(db)]) == 0, capsys.readouterr()
    store = Store.open(db)
    try:
        (summary,) = store.list_sessions(kind="run")
        loaded = store.load_session(summary.id)
    finally:
        store.close()
    (output,) = loaded.outputs
    (result,) = loaded.checks
    seen = json.loads((beside / "seen.json").read_text())
    assert seen["answer"] == output.text
    assert seen["case"]["id"] == "weather" and seen["case"]["tools"][0]["name"] == "get_weather"
    assert seen["trace"]["steps"][0]["calls"][0]["name"] == "get_weather"
    assert result.check == "says the city" and result.spec["type"] == "python"
    assert result.spec["score"] == 0.75 and result.spec["status"] == ("passed" if result.passed else "failed")
    assert result.detail == "mentions the city"
    # a re-run from the record (`lineup replay --rerun`) has no set folder: the check is named as not re-run
    rebuilt, lost = sample_set_from_run(loaded)
    assert rebuilt.case("weather").checks == ()
    assert lost == ["case weather: the custom check 'says the city' (its module is found beside the set file, "
                    "which the record does not keep; re-run the set file instead)"]


def test_the_shipped_custom_check_counts_asserts_in_the_code_not_in_prose():
    sets = Path(__file__).resolve().parents[1] / "sample_sets"
    sample = load_sample_set(sets / "code.jsonl")
    case = sample.case("co-008")
    (check,) = [c for c in case.checks if c.type == "python"]
    [facts] = case.answer_facts([None], sample.set_dir)
    prose = "You should assert is_leap(2000), assert not is_leap(1900), assert is_leap(2024).\n" \
            "```python\ndef is_leap(y):\n    return y % 4 == 0\n```"
    code = textwrap.dedent("""\
        ```python
        def is_leap(y):
            return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)

        assert is_leap(2000)
        assert not is_leap(1900)
        assert is_leap(2024)
        ```""")
    assert not run_check(check, prose, facts).passed
    assert run_check(check, code, facts).passed


MARKING = '''
import os

def marks(answer, case, trace):
    open(os.path.join(os.path.dirname(__file__), "custom-ran"), "w").write("ran")
    return True
'''


def test_no_exec_runs_no_code_and_the_same_command_without_it_runs_only_those_checks(tmp_path, monkeypatch,
                                                                                      capsys):
    """`lineup run --no-exec`: the answers and the checks that run no code
    are recorded, the answers' code tests and the set's Python checks are
    neither run (nothing they would write exists) nor recorded; run again
    with it, nothing runs; run without it, the same session gets only those
    checks, no new answer."""
    (tmp_path / "my_checks.py").write_text(MARKING)
    code_ran = tmp_path / "code-ran"
    case = json.loads(Path("sample_sets/code.jsonl").read_text().splitlines()[0])
    case["checks"] += [{"type": "code_tests", "name": "marks", "tests": f"open({str(code_ran)!r}, 'w').write('x')\n"},
                       {"type": "python", "function": "my_checks:marks", "name": "custom marks"}]
    set_path = tmp_path / "set.jsonl"
    set_path.write_text(json.dumps(case) + "\n")
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    db = tmp_path / "run.db"
    command = ["run", str(set_path), "-m", "demo/concise", "-m", "demo/thorough", "--quiet", "--db", str(db)]

    def recorded() -> tuple[int, list[tuple[str, str]]]:
        with Store.open(db) as store:
            (summary,) = store.list_sessions(kind="run")
            loaded = store.load_session(summary.id)
        return len(loaded.outputs), sorted((c.output_id, c.check) for c in loaded.checks)

    for _ in range(2):
        assert main([*command, "--no-exec"]) == 0
        err = capsys.readouterr().err
        assert "6 checks that run code not run (--no-exec" in " ".join(err.split()), err
        assert not code_ran.exists() and not (tmp_path / "custom-ran").exists()
        answers, checks = recorded()
        assert answers == 2 and {name for _, name in checks} == {"only one code block", "regex"}
        assert len(checks) == 4
    assert main(command) == 0
    assert "not run" not in capsys.readouterr().err
    assert code_ran.exists() and (tmp_path / "custom-ran").exists()
    answers_after, checks_after = recorded()
    assert answers_after == 2 and len(checks_after) == 10
    assert set(checks) < set(checks_after)


def test_a_no_exec_run_and_a_full_one_at_once_record_each_check_once(tmp_path):
    """Two processes on one database run the same set at the same time, one
    with --no-exec: however they share the units, every answer is there
    once and every check (code ones included, run by the full one or by a
    final full run) once, none twice."""
    import os
    import subprocess
    import sys

    (tmp_path / "my_checks.py").write_text(MARKING)
    cases = [json.loads(line) for line in Path("sample_sets/code.jsonl").read_text().splitlines()[:3]]
    for case in cases:
        case["checks"] += [{"type": "python", "function": "my_checks:marks", "name": "custom marks"}]
    set_path = tmp_path / "set.jsonl"
    set_path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    db = tmp_path / "run.db"
    env = {**os.environ, "LINEUP_DEMO_SPEED": "0.2", "PYTHONPATH": str(Path.cwd())}
    command = [sys.executable, "-m", "lineup", "run", str(set_path), "-m", "demo/concise", "-m", "demo/thorough",
               "--quiet", "--concurrency", "2", "--db", str(db)]
    both = [subprocess.Popen(command + extra, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for extra in (["--no-exec"], [])]
    for p in both:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert subprocess.run(command, env=env, capture_output=True, text=True, timeout=300).returncode == 0
    alone = tmp_path / "alone.db"             # the same run in one process: what must be recorded
    assert subprocess.run(command[:-1] + [str(alone)], env=env, capture_output=True, text=True,
                          timeout=300).returncode == 0

    def recorded(path: Path) -> Counter:
        """(case, model, check) -> results, and the answers per (case, model)."""
        with Store.open(path) as store:
            (summary,) = store.list_sessions(kind="run")
            loaded = store.load_session(summary.id)
        case_of = {t.id: t.case_id for t in loaded.turns}
        answer = {o.id: (case_of[o.turn_id], o.contestant) for o in loaded.outputs}
        assert {o.status for o in loaded.outputs} == {"complete"}
        return Counter([*answer.values(), *((*answer[c.output_id], c.check) for c in loaded.checks)])

    got, want = recorded(db), recorded(alone)
    assert got == want
    assert sum(n for k, n in want.items() if len(k) == 2) == 6                          # answers
    assert sum(n for k, n in want.items() if k[-1] in ("custom marks", "slugify passes its tests")) == 8
