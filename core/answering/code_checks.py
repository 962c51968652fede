"""Executed code checks: an answer's code run against a case's tests in a
separate process, and the one way lineup runs a child process under limits
(`core.answering.custom_checks` runs a team's own checks with it too).

Per language one `Language` entry in `LANGUAGES` says which fenced blocks
hold its code, how the code and the tests are written to the scratch folder,
the command that runs them and what a spec may give; adding a language is
adding an entry (and its harness, when it reports like Python's).

What each run gets (the isolation, documented in docs/evaluate.md):

- a fresh scratch folder as its working directory (and HOME, TMPDIR),
  deleted afterwards, whatever happened;
- an empty environment (PATH, HOME, TMPDIR, LANG only): no API key, no
  variable of lineup's process reaches it;
- Python in isolated mode (`-I -S`: no user site, no site-packages, no
  PYTHON* variables): the standard library only;
- limits set before the code starts (`_LAUNCHER`): address space
  (RLIMIT_AS, the memory limit), CPU seconds (RLIMIT_CPU, one more than the
  time limit), 16 MB per written file (RLIMIT_FSIZE), no core dumps;
- a wall-clock time limit kept here: at the limit, or when the run is
  cancelled (Ctrl-C), the whole process group is killed (SIGKILL);
- no network where a network namespace can be made (`unshare -n`, or
  `unshare -rn` without root): only an unconfigured loopback is visible.
  Where it cannot, the result says so (`network_isolated: false`).

It is not a security sandbox: the code runs as the user who runs lineup,
sees the file system with that user's rights, and can fake its own result.
Run hostile code in a container or VM of its own.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio

from core.ground.text import server_text

#: The longest detail a result keeps (one line, escaped).
DETAIL_LIMIT = 300
#: Bytes of a file any child process may write (RLIMIT_FSIZE).
FILE_LIMIT_BYTES = 16 * 1024 * 1024
#: The most of the child's own output (stdout and stderr together) read back.
OUTPUT_TAIL_BYTES = 4096
#: The defaults and bounds a spec may give.
DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 120.0
DEFAULT_MEMORY_MB = 512
MIN_MEMORY_MB = 64
MAX_MEMORY_MB = 16384

Status = Literal["passed", "failed", "error", "timed_out", "crashed", "out_of_memory", "no_code"]


@dataclass(frozen=True)
class CodeResult:
    """One run of code against tests: its status (`passed`, `failed` at the
    first failing assertion, `error`: another exception, `timed_out`,
    `crashed`: killed by a signal or gone without a result, `out_of_memory`,
    `no_code`: the answer has no code block) and a one-line, escaped detail."""

    status: Status
    detail: str
    network_isolated: bool = False

    @property
    def passed(self) -> bool:
        return self.status == "passed"


# ---------------------------------------------------------------- running a child under limits

#: Sets the limits, then becomes the command (exec): one process, whose exit
#: status and signal are the command's own. Run as `python -I -S`.
_LAUNCHER = """\
import os, resource, sys
mem, cpu, fsize = (int(v) for v in sys.argv[1:4])
for what, value in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_FSIZE, fsize),
                    (resource.RLIMIT_CORE, 0)):
    if value >= 0:
        hard = value + 1 if what == resource.RLIMIT_CPU else value
        try:
            resource.setrlimit(what, (value, hard))
        except (ValueError, OSError):
            pass   # a system that refuses one (macOS and RLIMIT_AS): the wall-clock limit still holds
os.execv(sys.argv[4], sys.argv[4:])
"""


@functools.lru_cache(maxsize=1)
def network_wrapper() -> tuple[str, ...] | None:
    """The command prefix that runs a program without network (a new network
    namespace), or None where none can be made here. Probed once per process."""
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        return None
    for flags in ("-n", "-rn"):    # as root; else in a user namespace of one's own
        try:
            done = subprocess.run([unshare, flags, "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, timeout=5, env={"PATH": os.defpath})
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return (unshare, flags)
    return None


def minimal_env(home: Path) -> dict[str, str]:
    """The whole environment a child gets: nothing of lineup's own (no key)."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8"}


@dataclass
class Job:
    """One child process to run: its command, folder, environment and limits;
    what it wrote to stdout and stderr goes to `output` (a file, never a pipe:
    a child that prints without end cannot block on a full pipe)."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    timeout_s: float
    output: Path
    memory_mb: int | None = None
    cpu_s: int | None = None
    network: tuple[str, ...] | None = None

    def command(self) -> list[str]:
        limits = [str(self.memory_mb * 1024 * 1024 if self.memory_mb else -1), str(self.cpu_s or -1),
                  str(FILE_LIMIT_BYTES)]
        launched = [sys.executable, "-I", "-S", "-c", _LAUNCHER, *limits, *self.argv]
        return [*(self.network or ()), *launched]


@dataclass
class Exit:
    """How a child ended: its return code (negative: the signal that killed
    it) and whether lineup killed it at the time limit."""

    returncode: int
    timed_out: bool
    output_tail: str = field(default="")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - OUTPUT_TAIL_BYTES, 0))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_job(job: Job) -> Exit:
    """Run `job` to its end or its time limit (then its process group is
    killed); blocking. For a caller in an event loop, `run_job_async`."""
    with job.output.open("wb") as out:
        proc = subprocess.Popen(job.command(), cwd=job.cwd, env=job.env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=job.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc.pid)    # at the limit, on an interrupt, and whatever it left behind
            proc.wait()
    return Exit(proc.returncode, timed_out, _tail(job.output))


async def run_job_async(job: Job) -> Exit:
    """`run_job` in an event loop: waiting does not block it, and a cancel
    (Ctrl-C) kills the process group at once and is then re-raised."""
    with job.output.open("wb") as out:
        proc = await anyio.open_process(job.command(), cwd=job.cwd, env=job.env, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = True
        try:
            with anyio.move_on_after(job.timeout_s):
                await proc.wait()
                timed_out = False
        finally:
            with anyio.CancelScope(shield=True):
                _kill_group(proc.pid)
                await proc.wait()
    returncode = proc.returncode
    assert returncode is not None
    return Exit(returncode, timed_out, _tail(job.output))


@contextmanager
def scratch(prefix: str = "lineup-check-") -> Iterator[Path]:
    """A fresh private folder, deleted afterwards (whatever the child left in it)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def shown_detail(text: str, limit: int = DETAIL_LIMIT) -> str:
    """Untrusted text (the code's messages, the tests' lines) as a detail:
    control characters escaped, on one line, cut to `limit`."""
    return server_text(text, limit=limit)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# ---------------------------------------------------------------- languages

#: The harness that runs the answer's code as module ENTRY, then the tests in
#: a namespace holding the module's names, and writes what happened to the
#: result file. `assert a == b` is rewritten to report both sides.
_PYTHON_HARNESS = """\
import ast, json, os, sys

def main():
    work, entry, tests_path, result_path = sys.argv[1:5]
    sys.argv = [entry]
    sys.path.insert(0, work)
    sys.dont_write_bytecode = True

    def finish(status, detail, line=None):
        try:
            with open(result_path, "w", encoding="utf-8") as f:
                json.dump({"status": status, "detail": str(detail)[:4000]}, f)
        finally:
            try:
                sys.stdout.flush()
            finally:
                os._exit(0)

    def short(value):
        try:
            text = repr(value)
        except BaseException as exc:
            text = f"<unprintable {type(exc).__name__}>"
        return text if len(text) <= 120 else text[:119] + "..."

    def describe(exc):
        text = str(exc) if not isinstance(exc, MemoryError) else ""
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

    with open(tests_path, encoding="utf-8") as f:
        source = f.read()
    lines = source.splitlines()

    def where(tb):
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "<tests>":
                line = tb.tb_lineno
            tb = tb.tb_next
        if line is None or not 0 < line <= len(lines):
            return ""
        return f"tests line {line}: {lines[line - 1].strip()}: "

    class Equals(ast.NodeTransformer):
        def visit_Assert(self, node):
            test = node.test
            if node.msg is None and isinstance(test, ast.Compare) and len(test.ops) == 1 \\
                    and isinstance(test.ops[0], ast.Eq):
                call = ast.Call(func=ast.Name("_lineup_equal", ast.Load()),
                                args=[test.left, test.comparators[0]], keywords=[])
                return ast.copy_location(ast.Expr(call), node)
            return node

    def equal(left, right):
        if not (left == right):
            raise AssertionError(f"{short(left)} != {short(right)}")

    try:
        tree = Equals().visit(ast.parse(source, "<tests>"))
        code = compile(ast.fix_missing_locations(tree), "<tests>", "exec")
    except SyntaxError as exc:
        finish("error", f"the tests do not compile: line {exc.lineno}: {exc.msg}")
    try:
        module = __import__(entry)
    except MemoryError:
        finish("out_of_memory", "while loading the code")
    except SyntaxError as exc:
        finish("error", f"the code does not compile: line {exc.lineno}: {exc.msg}")
    except BaseException as exc:
        finish("error", f"loading the code raised {describe(exc)}")
    namespace = dict(vars(module))
    namespace.update({"__name__": "__lineup_tests__", entry: module, "_lineup_equal": equal})
    try:
        exec(code, namespace)
    except AssertionError as exc:
        finish("failed", where(exc.__traceback__) + (str(exc) or "assertion failed"))
    except MemoryError as exc:
        finish("out_of_memory", where(exc.__traceback__).rstrip(": "))
    except BaseException as exc:
        finish("error", where(exc.__traceback__) + describe(exc))
    finish("passed", "all tests passed")

main()
"""


def _python_problem_in_tests(tests: str) -> str | None:
    try:
        ast.parse(tests, "<tests>")
    except SyntaxError as exc:
        return f"the tests do not compile: line {exc.lineno}: {exc.msg}"
    except ValueError as exc:   # a NUL character
        return f"the tests do not compile: {exc}"
    return None


def _python_problem_in_entry(entry: str) -> str | None:
    if not entry.isidentifier() or entry.startswith("_lineup"):
        return f"entry {entry!r} must be a Python module name (an identifier)"
    if entry in sys.stdlib_module_names:
        return f"entry {entry!r} is a module of the standard library; name the code's module otherwise"
    return None


def _python_command(root: Path, work: Path, entry: str) -> list[str]:
    return [sys.executable, "-I", "-S", str(root / "harness.py"), str(work), entry, str(root / "tests.py"),
            str(root / "result.json")]


@dataclass(frozen=True)
class Language:
    """How to run one language's code against its tests.

    `labels`: the fence labels of its blocks (```python). `suffix`: the code
    file's. `harness`: written to the scratch root as `harness.py` when given.
    `command(root, work, entry)`: the command line; the code is at
    work/ENTRY+suffix, the tests at root/tests.py, and the command writes
    {"status", "detail"} to root/result.json. `tests_problem` and
    `entry_problem` say why a spec's tests or entry cannot run (checked when
    the set loads)."""

    name: str
    labels: tuple[str, ...]
    suffix: str
    command: Callable[[Path, Path, str], list[str]]
    harness: str | None = None
    default_entry: str = "solution"
    tests_problem: Callable[[str], str | None] = lambda _tests: None
    entry_problem: Callable[[str], str | None] = lambda _entry: None


LANGUAGES: dict[str, Language] = {
    "python": Language(name="python", labels=("python", "py", "python3"), suffix=".py", command=_python_command,
                       harness=_PYTHON_HARNESS, tests_problem=_python_problem_in_tests,
                       entry_problem=_python_problem_in_entry),
}


def find_code(blocks: Sequence[tuple[str, str]], language: str) -> str | None:
    """The code to run among an answer's fenced blocks ((label, body), in
    order): the last one labelled with the language, else the last unlabelled one."""
    lang = LANGUAGES[language]
    for wanted in (set(lang.labels), {""}):
        for label, body in reversed(blocks):
            if label in wanted and body.strip():
                return body
    return None


# ---------------------------------------------------------------- one run of the tests

@dataclass(frozen=True)
class CodeSpec:
    """What a `code_tests` check asks (the spec model is in `core.answering.checks`)."""

    language: str
    tests: str
    entry: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_mb: int = DEFAULT_MEMORY_MB


@contextmanager
def _prepared(spec: CodeSpec, code: str) -> Iterator[tuple[Job, Path]]:
    lang = LANGUAGES[spec.language]
    with scratch() as root:
        work = root / "work"
        work.mkdir()
        (work / f"{spec.entry}{lang.suffix}").write_text(code, encoding="utf-8", errors="surrogatepass")
        (root / "tests.py").write_text(spec.tests, encoding="utf-8", errors="surrogatepass")
        if lang.harness is not None:
            (root / "harness.py").write_text(lang.harness, encoding="utf-8")
        job = Job(argv=lang.command(root, work, spec.entry), cwd=work, env=minimal_env(work),
                  timeout_s=spec.timeout_s, output=root / "output.txt", memory_mb=spec.memory_mb,
                  cpu_s=math.ceil(spec.timeout_s) + 1, network=network_wrapper())
        yield job, root / "result.json"


def _verdict(spec: CodeSpec, ended: Exit, result_path: Path, isolated: bool) -> CodeResult:
    def done(status: Status, detail: str) -> CodeResult:
        if not isolated:
            detail += " (network not isolated: no network namespace could be made here)"
        return CodeResult(status, shown_detail(detail), isolated)

    if ended.timed_out:
        return done("timed_out", f"timed out after {spec.timeout_s:g} s (killed)")
    if ended.returncode == -signal.SIGXCPU:
        return done("timed_out", f"used more than {math.ceil(spec.timeout_s) + 1} s of CPU (killed)")
    if ended.returncode < 0:
        what = signal_name(-ended.returncode)
        why = " (wrote past the file size limit)" if ended.returncode == -signal.SIGXFSZ else ""
        return done("crashed", f"killed by {what}{why}" + _last_words(ended))
    try:
        with result_path.open("rb") as f:
            result = json.loads(f.read(65536).decode("utf-8", "replace"))
        status, detail = result["status"], str(result["detail"])
    except (OSError, ValueError, KeyError, TypeError):
        return done("crashed", f"exited with status {ended.returncode} before the tests finished"
                    + _last_words(ended))
    if status not in ("passed", "failed", "error", "out_of_memory") or ended.returncode != 0:
        return done("crashed", f"exited with status {ended.returncode}" + _last_words(ended))
    if status == "out_of_memory":
        detail = f"ran out of memory (limit {spec.memory_mb} MB)" + (f": {detail}" if detail else "")
    return done(status, detail)


def _last_words(ended: Exit) -> str:
    lines = [line for line in ended.output_tail.splitlines() if line.strip()]
    return f"; last output: {lines[-1].strip()}" if lines else ""


def _no_runner() -> CodeResult | None:
    if os.name != "posix":
        return CodeResult("error", "code tests need a Unix system (process limits)")
    return None


def run_tests(spec: CodeSpec, code: str | None) -> CodeResult:
    """Run `code` against the spec's tests; blocking (`run_tests_async` in an event loop)."""
    if code is None:
        return CodeResult("no_code", f"no {spec.language} code block found in the answer")
    refused = _no_runner()
    if refused is not None:
        return refused
    with _prepared(spec, code) as (job, result_path):
        ended = run_job(job)
        return _verdict(spec, ended, result_path, job.network is not None)


async def run_tests_async(spec: CodeSpec, code: str | None) -> CodeResult:
    """`run_tests` in an event loop; a cancel kills the process and removes its folder."""
    if code is None:
        return CodeResult("no_code", f"no {spec.language} code block found in the answer")
    refused = _no_runner()
    if refused is not None:
        return refused
    with _prepared(spec, code) as (job, result_path):
        ended = await run_job_async(job)
        return _verdict(spec, ended, result_path, job.network is not None)
