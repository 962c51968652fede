"""Running lineup's commands as a person does: in a process of its own
(`lineup`), on a pseudo-terminal of a given size (what a table fits into),
piped, or in a real terminal emulator (tmux); and what the tests around them
need: a small database, a disk that fills up, whether a process is gone.
Shared by the tests of commands, of bad input and of the app in a terminal."""

from __future__ import annotations

import hashlib
import os
import pty
import resource
import re
import select
import signal
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

from store import LoadedSession, Store
from tests.synthetic import synthetic_session, write_synthetic

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def spawn_on_pty(argv: list[str], env: dict[str, str], rows: int, cols: int) -> tuple[int, int]:
    """`argv` (argv[0] the executable's path) started in the checkout on a new
    pseudo-terminal of rows x cols: (its pid, the terminal's fd, to read and close).
    Also the start of `benchmarks/bench_startup.py`'s timed chat."""
    import fcntl
    import termios

    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(ROOT)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return pid, fd


def on_terminal(argv: list[str], rows: int, cols: int) -> str:
    """The command's output on a pseudo-terminal of rows x cols, escapes stripped."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    pid, fd = spawn_on_pty([sys.executable, "-m", "lineup", *argv], {**env, "TERM": "xterm-256color"}, rows, cols)
    out, deadline = b"", time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    data = os.read(fd, 1 << 16)
                except OSError:
                    break
                if not data:
                    break
                out += data
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return ESCAPES.sub("", out.decode()).replace("\r", "")


def piped(argv: list[str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "lineup", *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


TMUX = shutil.which("tmux")


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=20)
        if check and proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "lineup", check=False)

    def type_line(self, text: str) -> None:
        """`text` typed key by key as it is (`send-keys -l`: no key names
        read in it), then Enter."""
        self("send-keys", "-t", "lineup", "-l", text)
        self("send-keys", "-t", "lineup", "Enter")

    def quit(self) -> str:
        """Ctrl+Q, then the screen once lineup has exited, with status 0
        (`start_in_tmux` and its kind print EXITED and the status)."""
        self("send-keys", "-t", "lineup", "C-q")
        screen = self.wait_for("EXITED")
        assert "EXITED 0" in screen, screen
        return screen

    def wait_for(self, text: str, polls: int = 300, forbid: tuple[str, ...] = ()) -> str:
        """Poll the screen until `text` shows (a hang guard, not a timing check);
        fail at once if any of `forbid` shows on the way (case-insensitive)."""
        screen = ""
        for _ in range(polls):
            screen = self.screen()
            shown = [f for f in forbid if f.lower() in screen.lower()]
            assert not shown, f"{shown} appeared on the screen:\n{screen}"
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared; the screen was:\n{screen}")


def start_in_tmux(tmux: Tmux, tmp_path: Path, args: str, speed: str) -> Path:
    """`lineup ARGS` in a new tmux session of 140x40 with an empty config, demo
    answers at `speed`, rater pty-tester; the database's path. The pane stays
    after it exits (EXITED and its status)."""
    db = tmp_path / "lineup.db"
    config = tmp_path / "config.toml"
    config.write_text("")
    env_vars = {"LINEUP_DB": str(db), "LINEUP_CONFIG": str(config), "LINEUP_DEMO_SPEED": speed,
                "LINEUP_RATER": "pty-tester", "TERM": "xterm-256color", "COLORTERM": "truecolor",
                "PYTHONPATH": str(ROOT)}
    env_prefix = " ".join(f"{k}={v!s}" for k, v in env_vars.items())
    command = f"cd {ROOT} && env -u COLUMNS -u LINES {env_prefix} {sys.executable} -m lineup {args}; echo EXITED $?; sleep 30"
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "lineup", "-x", "140", "-y", "40", command)
    tmux("resize-window", "-t", "lineup", "-x", "140", "-y", "40", check=False)
    return db


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lineup_env(db: Path | None, extra: dict | None = None) -> dict:
    """This environment with the checkout first on the path, instant demo
    answers and `db` as the database, and `extra` over it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["LINEUP_DEMO_SPEED"] = "0"
    if db is not None:
        env["LINEUP_DB"] = str(db)
    env.update(extra or {})
    return env


def lineup(args: list[str], cwd: Path, db: Path | None = None, env: dict | None = None,
           preexec=None, stdout=None) -> subprocess.CompletedProcess:
    """`python -m lineup ARGS` in `cwd` to its end (`lineup_env`; output captured
    as text, or standard output to the file `stdout`)."""
    kwargs = {"stdout": stdout, "stderr": subprocess.PIPE} if stdout is not None else {"capture_output": True}
    return subprocess.run([sys.executable, "-m", "lineup", *args], text=True, cwd=cwd, env=lineup_env(db, env),
                          timeout=TIMEOUT, preexec_fn=preexec, **kwargs)


def existing_db(path: Path, sessions: int = 1) -> Path:
    """A database at `path` holding `sessions` small synthetic sessions."""
    with Store.open(path) as store:
        for seed in range(sessions):
            write_synthetic(store, *synthetic_session(turns=3, seed=4 + seed, created=1.7e9 + seed))
    return path


def file_size_limit(limit: int):
    """A `preexec_fn` that makes writes past `limit` bytes fail (a full disk)."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a failing write(), not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def gone(pid: int, limit: float = 5) -> bool:
    """Whether the process is dead (or dies within `limit`: SIGKILL is delivered
    when it is next scheduled)."""
    deadline = time.monotonic() + limit
    while not _dead(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie is gone too (it runs nothing); its parent, init, reaps it
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def pids_in(path: Path, n: int, limit: float = 30) -> list[int]:
    """The first `n` process ids written to `path` (waited for up to `limit` s)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            pids = [int(p) for p in path.read_text().split()]
        except (OSError, ValueError):
            pids = []
        if len(pids) >= n:
            return pids
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {n} pid(s)")


def only_session(db: Path) -> LoadedSession:
    """The one session the database at `db` holds, loaded (fails unless it holds exactly one)."""
    with Store.open(db) as store:
        (summary,) = store.list_sessions()
        return store.load_session(summary.id)
