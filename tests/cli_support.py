"""Running lineup's commands as a person does: on a pseudo-terminal of a
given size (what a table fits into), or piped. Shared by the tests of
commands that draw for a terminal (sessions, models, drift)."""

from __future__ import annotations

import os
import pty
import re
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
