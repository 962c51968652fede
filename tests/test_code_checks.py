"""Executed code checks (`code_tests`): an answer's code run against a case's
tests in a child process under limits, hostile answers included, and the
shipped code set run end to end on the demo models."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from core.answering import code_checks
from core.answering.checks import CodeTestsCheck, run_case_check_async, run_check
from core.answering.code_checks import CodeSpec, run_tests
from lineup.cli import main
from store import Store
from tests.cli_support import gone, pids_in

ROOT = Path(__file__).resolve().parents[1]


def _spec(tests: str = "pass", **kw) -> CodeSpec:
    return CodeSpec(language="python", tests=tests, entry="solution", **{"timeout_s": 5, "memory_mb": 256, **kw})


def _answer(code: str) -> str:
    return f"Here it is:\n\n```python\n{textwrap.dedent(code)}```\n"


# ---------------------------------------------------------------- outcomes

def test_right_code_passes_and_wrong_code_names_the_first_failing_assertion():
    check = CodeTestsCheck(tests="assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(0, 0) == 0\n")
    right = run_check(check, _answer("def add(a, b):\n    return a + b\n"))
    assert right.passed and right.score == 1.0 and right.detail == "all tests passed"
    assert right.extra["status"] == "passed"
    wrong = run_check(check, _answer("def add(a, b):\n    return a * b\n"))
    assert not wrong.passed and wrong.score == 0.0 and wrong.extra["status"] == "failed"
    # 1*2 != 3 fails first; both sides are shown
    assert wrong.detail.startswith("tests line 1: assert add(1, 2) == 3: 2 != 3"), wrong.detail


def test_the_last_python_block_is_run_and_an_answer_without_code_fails():
    check = CodeTestsCheck(tests="assert f() == 2")
    two_blocks = "First try:\n```python\ndef f(): return 1\n```\nBetter:\n```python\ndef f(): return 2\n```\n"
    assert run_check(check, two_blocks).passed
    shell_then_bare = "```bash\nexit 1\n```\n```\ndef f(): return 2\n```"
    assert run_check(check, shell_then_bare).passed          # an unlabelled block, not another language's
    prose = run_check(check, "Just use a function that returns 2.")
    assert not prose.passed and prose.extra["status"] == "no_code"
    assert "no python code block" in prose.detail


def test_code_that_raises_or_does_not_compile_is_an_error_with_the_reason():
    raised = run_tests(_spec("assert f() == 1"), "def f():\n    return {}['missing']\n")
    assert raised.status == "error" and "tests line 1" in raised.detail and "KeyError" in raised.detail
    broken = run_tests(_spec(), "def f(:\n    pass\n")
    assert broken.status == "error" and "does not compile: line 1" in broken.detail
    exits = run_tests(_spec(), "import sys\nsys.exit(0)\n")
    assert exits.status == "error" and "SystemExit" in exits.detail


# ---------------------------------------------------------------- hostile answers

def test_an_infinite_loop_times_out_and_its_whole_process_group_is_killed(tmp_path):
    pids = tmp_path / "pids"
    code = f"""
import os
if os.fork() == 0:              # a child of its own, spinning too
    open({str(pids)!r}, "a").write(f"{{os.getpid()}} ")
    while True:
        pass
open({str(pids)!r}, "a").write(f"{{os.getpid()}} ")
while True:
    pass
"""
    result = run_tests(_spec(timeout_s=1), code)
    assert result.status == "timed_out" and "timed out after 1 s" in result.detail
    for pid in pids_in(pids, 2):
        assert gone(pid), f"process {pid} outlived the time limit"


def test_an_answer_that_kills_itself_is_reported_crashed():
    result = run_tests(_spec("assert True"), "import os\nos.kill(os.getpid(), 9)\n")
    assert result.status == "crashed" and "SIGKILL" in result.detail
    gone = run_tests(_spec("assert True"), "import os\nos._exit(3)\n")
    assert gone.status == "crashed" and "status 3 before the tests finished" in gone.detail


def test_a_memory_bomb_stops_at_the_memory_limit():
    result = run_tests(_spec("assert len(hog()) > 0", memory_mb=128),
                       "def hog():\n    return bytearray(4 * 1024 ** 3)\n")
    assert result.status == "out_of_memory" and "limit 128 MB" in result.detail


def test_a_planted_api_key_is_absent_inside_and_the_folder_is_scratch(tmp_path, monkeypatch):
    planted = "sk-planted-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", planted)
    monkeypatch.setenv("LINEUP_TEST_SECRET", planted)
    seen = tmp_path / "seen.json"
    code = f"""
import json, os
json.dump({{"env": dict(os.environ), "cwd": os.getcwd()}}, open({str(seen)!r}, "w"))
"""
    result = run_tests(_spec("import os\nassert 'OPENAI_API_KEY' not in os.environ"), code)
    assert result.status == "passed", result.detail
    inside = json.loads(seen.read_text())
    assert planted not in json.dumps(inside["env"])
    assert set(inside["env"]) <= {"PATH", "HOME", "TMPDIR", "LANG"}
    assert inside["env"]["HOME"] == inside["cwd"]
    assert not Path(inside["cwd"]).exists(), "the scratch folder is deleted afterwards"


def _listener() -> socket.socket:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.5)
    return srv


def _accepted(srv: socket.socket) -> bool:
    try:
        conn, _ = srv.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


def test_no_network_a_loopback_listener_is_not_reached(monkeypatch):
    if code_checks.network_wrapper() is None:
        pytest.skip("no network namespace can be made on this machine (unshare -n / -rn)")
    code = "import socket\ndef reach(port):\n    socket.create_connection(('127.0.0.1', port), timeout=2).close()\n"
    with _listener() as srv:
        port = srv.getsockname()[1]
        result = run_tests(_spec(f"reach({port})"), code)
        assert result.status == "error" and "OSError" in result.detail and result.network_isolated
        assert not _accepted(srv)
        # the same code without the namespace reaches it, and the result says it was not isolated
        monkeypatch.setattr(code_checks, "network_wrapper", lambda: None)
        open_result = run_tests(_spec(f"reach({port})"), code)
        assert open_result.status == "passed" and not open_result.network_isolated
        assert "network not isolated" in open_result.detail
        assert _accepted(srv)


def test_the_result_text_is_escaped_and_bounded():
    hostile = "\x1b]0;owned\x07\x1b[31m" + "é" * 5000 + "\u202e\n[bold]x[/bold]"
    result = run_tests(_spec("assert f() == 1, f()"), f"def f():\n    return {hostile!r}\n")
    assert result.status == "failed"
    assert len(result.detail) <= code_checks.DETAIL_LIMIT
    assert "\x1b" not in result.detail and "\x07" not in result.detail and "\n" not in result.detail
    assert "\u202e" not in result.detail and "\\x1b" in result.detail


# ---------------------------------------------------------------- cancelling

def test_cancelling_a_run_kills_its_process_and_removes_its_folder(tmp_path):
    marker = tmp_path / "pid"
    code = f"import os\nopen({str(marker)!r}, 'w').write(f'{{os.getpid()}} {{os.getcwd()}}')\nwhile True:\n    pass\n"
    check = CodeTestsCheck(tests="pass", timeout_s=60)
    state: dict = {}

    async def scenario() -> None:
        # far below the check's own 60 s: the cancel does not wait for it
        with anyio.fail_after(30), anyio.CancelScope() as outer:
            async with anyio.create_task_group() as tg:
                async def run() -> None:
                    state["outcome"] = await run_case_check_async(check, [_answer(code)])

                tg.start_soon(run)
                while not marker.exists() or len(marker.read_text().split()) < 2:
                    await anyio.sleep(0.02)
                outer.cancel()

    anyio.run(scenario)
    assert "outcome" not in state
    pid, folder = marker.read_text().split()
    assert gone(int(pid)) and not Path(folder).exists()


def test_ctrl_c_during_a_long_check_ends_the_run_at_once(tmp_path):
    """`lineup run` with a check whose tests never end: SIGINT stops the run
    (exit 130) without waiting for the check's time limit, and its process is gone."""
    marker = tmp_path / "pid"
    tests = f"import os\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\nwhile True:\n    pass\n"
    case = {"id": "loop", "category": "code", "prompt": "Write a Python function slugify(title).",
            "checks": [{"type": "code_tests", "tests": tests, "timeout_s": 15}]}
    set_path = tmp_path / "set.jsonl"
    set_path.write_text(json.dumps(case) + "\n")
    env = {**os.environ, "LINEUP_DB": str(tmp_path / "run.db"), "LINEUP_DEMO_SPEED": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "lineup", "run", str(set_path), "-m", "demo/concise", "--quiet"],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (pid,) = pids_in(marker, 1, limit=60)
        asked = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        waited = time.monotonic() - asked
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert waited < 12, f"the stop waited {waited:.1f} s: for the check's time limit"
    assert gone(pid)


# ---------------------------------------------------------------- the shipped set, end to end

def test_the_code_set_runs_its_tests_on_the_demo_models_and_reports_them(tmp_path, monkeypatch, capsys):
    db = tmp_path / "code.db"
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    code = main(["run", str(ROOT / "sample_sets" / "code.jsonl"), "-m", "demo/concise", "-m", "demo/thorough",
                 "-m", "demo/thinker", "--quiet", "--seed", "1", "--db", str(db)])
    assert code == 0, capsys.readouterr().err
    store = Store.open(db)
    try:
        (summary,) = store.list_sessions(kind="run")
        loaded = store.load_session(summary.id)
    finally:
        store.close()
    who = {o.id: o.contestant for o in loaded.outputs}
    executed = {(who[c.output_id], c.check): c for c in loaded.checks if c.spec.get("type") == "code_tests"}
    assert len(executed) == 3 * 3     # three cases with tests, three models
    statuses = {c.spec["status"] for c in executed.values()}
    assert statuses == {"passed", "failed"}
    assert executed[("demo/concise", "is_leap passes its tests")].detail.startswith(
        "tests line 2: assert is_leap(1900) == False: True != False")
    assert executed[("demo/thorough", "is_leap passes its tests")].passed
    custom = [c for c in loaded.checks if c.spec.get("type") == "python"]
    assert sorted(c.passed for c in custom) == [False, False, True]   # thorough wrote its asserts
    capsys.readouterr()
    assert main(["report", "--json", "--include-demo", "--bootstrap", "0", "--db", str(db)]) == 0
    report = json.loads(capsys.readouterr().out)
    rates = {(r["model"], r["check"] or "all"): r for r in report["checks"]}
    leap = [rates[(m, "is_leap passes its tests")]["passed"] for m in ("demo/concise", "demo/thorough", "demo/thinker")]
    assert leap == [0, 1, 1]
    per_model = {rates[(m, "all")]["rate"] for m in ("demo/concise", "demo/thorough", "demo/thinker")}
    assert len(per_model) == 3, "the figures differ from model to model"


def test_answers_from_a_loopback_server_are_run_hostile_ones_included(tmp_path, monkeypatch):
    """A run over real HTTP: one model answers right, one loops for ever, one
    reads the environment for the key it was called with, one prints no
    code. Each result is recorded, and the key never reached the code."""
    from core.answering.runner import Runner
    from core.answering.sampleset import load_sample_set
    from store import AsyncStore
    from tests.server import Reply, TestServer, model_config

    planted = "sk-loopback-planted-0123456789"
    monkeypatch.setenv("LOOPBACK_TEST_KEY", planted)
    answers = {
        "right": _answer("def add(a, b):\n    return a + b\n"),
        "loops": _answer("def add(a, b):\n    while True:\n        pass\n"),
        "snoops": _answer("import os\nSEEN = repr(dict(os.environ))\ndef add(a, b):\n    return a + b\n"),
        "prose": "Add them with the + operator.",
    }
    case = {"id": "add", "category": "code", "prompt": "Write add(a, b) in Python.",
            "checks": [{"type": "code_tests", "timeout_s": 2,
                        "tests": f"assert add(2, 3) == 5\nassert {planted[:12]!r} not in SEEN if 'SEEN' in dir() "
                                 "else True\n"}]}
    set_path = tmp_path / "set.jsonl"
    set_path.write_text(json.dumps(case) + "\n")
    with TestServer() as srv:
        srv.respond(lambda received: Reply(text=answers[received.json["model"]]))
        models = [model_config(srv, "openai", alias=name, model=name, max_retries=0, read_timeout=10,
                               api_key_env="LOOPBACK_TEST_KEY") for name in answers]

        async def go() -> None:
            store = AsyncStore(Store.open(tmp_path / "run.db"))
            try:
                await Runner(store, load_sample_set(set_path), models, concurrency=4).run()
            finally:
                await store.aclose()

        anyio.run(go)
        assert all(r.headers.get("authorization") == f"Bearer {planted}" for r in srv.requests)
    store = Store.open(tmp_path / "run.db")
    try:
        (summary,) = store.list_sessions(kind="run")
        loaded = store.load_session(summary.id)
    finally:
        store.close()
    who = {o.id: o.contestant for o in loaded.outputs}
    status = {who[c.output_id]: (c.spec["status"], c.passed) for c in loaded.checks}
    assert status == {"right": ("passed", True), "loops": ("timed_out", False), "snoops": ("passed", True),
                      "prose": ("no_code", False)}
