"""Custom checks: a team's own Python function, named by a case's
`{"type": "python", "function": "my_checks:score"}`.

Where the function is found: `MODULE:FUNCTION` is a module beside the set
file (`my_checks.py`, or a package folder; dotted names look in subfolders),
imported with the set's folder on `sys.path` for the import only; a name
without a colon is an installed entry point of the group `lineup.checks`
(`[project.entry-points."lineup.checks"] score = "my_pkg.checks:score"`).
Both are checked when the set loads (the module exists and defines the
name, read without running it; the entry point is installed), so a typo is
a `FILE:LINE` error before anything runs.

It is called as `function(answer, case, trace)`: the answer's text, the
case as a dict (its JSON form) and the answer's tool trace as a dict (None
without one). It returns a bool, or a dict (or an object with those
attributes) with `passed` (bool), an optional `score` (0 to 1) and an
optional `reason`. Anything else, an exception or running past its time
limit fails the check with the reason.

Why a subprocess and not a thread with a deadline: a thread cannot be
stopped, so a check that never returns would keep running (and holding its
memory and a CPU) until lineup exits, and one spinning in C code holding the
GIL (a regular expression backtracking, a big computation in an extension)
would freeze the run itself, Ctrl-C included; a process is killed at its
limit or on Ctrl-C, and whatever it does to its interpreter (monkey-patching,
`sys.exit`, a crash) stays there. The price is a fresh interpreter per call
(tens of milliseconds), small beside the answer it checks. The child gets
the minimal environment of `core.answering.code_checks` (no API key), a
scratch folder as its working directory, lineup's own `sys.path` (so it
finds what lineup found when the set loaded) and the time limit; the
network is left to it (a team's check may ask a service of its own).
"""

from __future__ import annotations

import ast
import json
import math
import os
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from core.answering.code_checks import (
    Exit,
    Job,
    minimal_env,
    run_job,
    run_job_async,
    scratch,
    shown_detail,
    signal_name,
)

#: The entry point group an installed custom check is found in.
ENTRY_POINT_GROUP = "lineup.checks"

Status = Literal["passed", "failed", "error", "timed_out", "crashed"]


@dataclass(frozen=True)
class CustomResult:
    status: Status
    score: float
    detail: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class Target:
    """Where a custom check's function is: a module beside the set (`folder`,
    `module`, `function`) or an entry point (`entry`)."""

    folder: Path | None = None
    module: str = ""
    function: str = ""
    entry: str = ""


def parse_name(name: str) -> str | None:
    """Why `name` cannot name a function (`MODULE:FUNCTION` or an entry point), or None."""
    module, colon, function = name.partition(":")
    if colon:
        if not module or not all(part.isidentifier() for part in module.split(".")):
            return f"{module!r} is not a module name (MODULE:FUNCTION, e.g. my_checks:score)"
        if not function.isidentifier():
            return f"{function!r} is not a function name (MODULE:FUNCTION, e.g. my_checks:score)"
        return None
    if not name.strip() or any(c.isspace() for c in name):
        return f"{name!r} is neither MODULE:FUNCTION nor the name of an entry point"
    return None


def _module_file(folder: Path, module: str) -> Path | None:
    base = folder.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _defines(tree: ast.Module, name: str) -> bool:
    """Whether a module's top level binds `name` (a def, an assignment, an import)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.AsyncFunctionDef) and node.name == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            return True
    return False


def locate(name: str, set_dir: Path | None) -> Target | str:
    """The function `name` names, or why it cannot be found (read, never run)."""
    problem = parse_name(name)
    if problem:
        return problem
    module, colon, function = name.partition(":")
    if not colon:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            return f"no entry point {name!r} in the group {ENTRY_POINT_GROUP!r} is installed (MODULE:FUNCTION " \
                   "names a module beside the set file)"
        return Target(entry=name)
    if set_dir is None:
        return f"no set file to find {module!r} beside (a set rebuilt from a session)"
    path = _module_file(set_dir, module)
    if path is None:
        return f"no module {module!r} beside the set file ({module.replace('.', '/')}.py in {set_dir})"
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except SyntaxError as exc:
        return f"{path.name} line {exc.lineno}: {exc.msg}"
    except (OSError, ValueError) as exc:
        return f"{path.name} cannot be read: {exc}"
    if not _defines(tree, function):
        return f"{path.name} defines no {function!r}"
    return Target(folder=set_dir, module=module, function=function)


#: Imports the function, calls it with the input file's answer, case and
#: trace, and writes its normalised result (or the error) to the result file.
_HARNESS = """\
import json, os, sys, traceback

def main():
    mode, where, module, function, input_path, result_path = sys.argv[1:7]

    def finish(result):
        try:
            with open(result_path, "w", encoding="utf-8") as f:
                json.dump(result, f)
        finally:
            os._exit(0)

    def failed(why, exc=None):
        if exc is not None:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
            at = f" ({os.path.basename(frames[-1].filename)} line {frames[-1].lineno})" if frames else ""
            text = str(exc)
            why += f": {type(exc).__name__}" + (f": {text}" if text else "") + at
        finish({"error": why[:4000]})

    with open(input_path, encoding="utf-8") as f:
        data = json.load(f)
    sys.path[:] = data["sys_path"]   # lineup's own: what it found the check in when the set loaded
    try:
        if mode == "file":
            sys.path.insert(0, where)
            try:
                __import__(module)
                fn = sys.modules[module]
            finally:
                if where in sys.path:
                    sys.path.remove(where)
            for part in function.split("."):
                fn = getattr(fn, part)
        else:
            from importlib.metadata import entry_points
            found = [ep for ep in entry_points(group="lineup.checks") if ep.name == module]
            if not found:
                failed(f"the entry point {module!r} is not installed")
            fn = found[0].load()
    except BaseException as exc:
        failed("the check could not be loaded", exc)
    try:
        value = fn(data["answer"], data["case"], data["trace"])
    except BaseException as exc:
        failed("the check raised", exc)
    if isinstance(value, bool):
        finish({"passed": value})
    if isinstance(value, dict):
        fields = value
    elif hasattr(value, "passed"):
        fields = {k: getattr(value, k) for k in ("passed", "score", "reason") if hasattr(value, k)}
    else:
        failed(f"the check returned {type(value).__name__}, not a bool or {{passed, score, reason}}")
    out = {}
    for key in ("passed", "score", "reason"):
        item = fields.get(key)
        if key == "reason" and item is not None:
            item = str(item)[:4000]
        elif key == "score" and item is not None and not isinstance(item, (int, float)):
            failed(f"score is {type(item).__name__}, not a number")
        out[key] = item
    finish(out)

main()
"""


def _bad(detail: str) -> CustomResult:
    return CustomResult("error", 0.0, shown_detail(detail))


def _interpret(ended: Exit, result_path: Path, timeout_s: float) -> CustomResult:
    if ended.timed_out:
        return CustomResult("timed_out", 0.0, f"timed out after {timeout_s:g} s (killed)")
    if ended.returncode < 0:
        return CustomResult("crashed", 0.0, f"killed by {signal_name(-ended.returncode)}")
    try:
        with result_path.open("rb") as f:
            result = json.loads(f.read(1 << 20).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return CustomResult("crashed", 0.0, f"exited with status {ended.returncode} without a result")
    if not isinstance(result, dict):
        return _bad("the check's result could not be read")
    if "error" in result:
        return _bad(str(result["error"]))
    passed, score, reason = result.get("passed"), result.get("score"), result.get("reason")
    if not isinstance(passed, bool):
        return _bad(f"'passed' is {type(passed).__name__}, not true or false")
    if score is None:
        score = 1.0 if passed else 0.0
    if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score) \
            or not 0.0 <= score <= 1.0:
        return _bad(f"score {shown_detail(str(score), 40)} is not a number from 0 to 1")
    detail = str(reason) if reason else ("passed" if passed else "failed")
    return CustomResult("passed" if passed else "failed", float(score), shown_detail(detail))


def _input(answer: str, case: dict[str, Any] | None, trace: dict[str, Any] | None) -> bytes:
    path = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    return json.dumps({"answer": answer, "case": case or {}, "trace": trace, "sys_path": path},
                      ensure_ascii=True).encode("ascii")


class _Prepared:
    """The scratch folder of one call: the harness, the input, the job."""

    def __init__(self, root: Path, target: Target, data: bytes, timeout_s: float) -> None:
        (root / "harness.py").write_text(_HARNESS, encoding="utf-8")
        (root / "input.json").write_bytes(data)
        work = root / "work"
        work.mkdir()
        self.result = root / "result.json"
        mode = "file" if target.folder is not None else "entry"
        argv = [sys.executable, str(root / "harness.py"), mode, str(target.folder or ""),
                target.module or target.entry, target.function, str(root / "input.json"), str(self.result)]
        self.job = Job(argv=argv, cwd=work, env=minimal_env(work), timeout_s=timeout_s, output=root / "output.txt")


def run_custom(name: str, set_dir: Path | None, answer: str, case: dict[str, Any] | None,
               trace: dict[str, Any] | None, timeout_s: float) -> CustomResult:
    """Call the custom check `name` in a child process; blocking."""
    target = locate(name, set_dir)
    if isinstance(target, str):
        return _bad(target)
    with scratch("lineup-custom-") as root:
        prepared = _Prepared(root, target, _input(answer, case, trace), timeout_s)
        return _interpret(run_job(prepared.job), prepared.result, timeout_s)


async def run_custom_async(name: str, set_dir: Path | None, answer: str, case: dict[str, Any] | None,
                           trace: dict[str, Any] | None, timeout_s: float) -> CustomResult:
    """`run_custom` in an event loop: a cancel kills the child at once."""
    target = locate(name, set_dir)
    if isinstance(target, str):
        return _bad(target)
    with scratch("lineup-custom-") as root:
        prepared = _Prepared(root, target, _input(answer, case, trace), timeout_s)
        return _interpret(await run_job_async(prepared.job), prepared.result, timeout_s)
