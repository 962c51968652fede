"""`lineup rate` started as a real process on a free loopback port, for the
HTTP and browser tests: its links read from what it prints, stopped (or
killed) by the test that started it; and their run of two demo models scored
on two dimensions (`scored`, a fixture)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.run_support import scored_run

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"^  (.+?): (http://\S+/[ro]/\S+)$")


@dataclass
class Rating:
    proc: subprocess.Popen
    links: dict[str, str] = field(default_factory=dict)     # rater -> link
    owner: str = ""
    lines: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return self.owner.split("/o/")[0]

    def stop(self) -> str:
        """SIGTERM, then what it printed after the links."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rest = self.proc.stdout.read() if self.proc.stdout else ""
        return "\n".join(self.lines) + "\n" + rest

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait()


def start(db: Path, *args: str, timeout: float = 60) -> Rating:
    """`lineup rate --db DB --port 0 ARGS`, once it printed every link and answers."""
    env = {**_env(db), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "lineup", "rate", "--db", str(db), "--port", "0", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    r = Rating(proc)
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError("lineup rate ended:\n" + "\n".join(r.lines))
        line = line.rstrip("\n")
        r.lines.append(line)
        m = LINK.match(line)
        if m and m.group(1) == "owner (progress)":
            r.owner = m.group(2)
            break
        if m:
            r.links[m.group(1)] = m.group(2)
    else:
        proc.kill()
        raise AssertionError("no links in time:\n" + "\n".join(r.lines))
    while time.monotonic() < deadline:
        try:
            httpx.get(r.base + "/static/rate.css", timeout=2)
            return r
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("not answering")


def run_cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = _env(db)
    return subprocess.run([sys.executable, "-m", "lineup", *args, "--db", str(db)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _env(db: Path) -> dict[str, str]:
    """No config file: a fresh config folder beside the database."""
    env = {k: v for k, v in os.environ.items() if k != "LINEUP_CONFIG"}
    env["XDG_CONFIG_HOME"] = str(db.parent / "xdg-config")
    return env


@pytest.fixture
def scored(tmp_path, monkeypatch) -> tuple[Path, str]:
    """A run of two demo models on two cases whose answers are scored on two dimensions."""
    return scored_run(tmp_path, monkeypatch)
