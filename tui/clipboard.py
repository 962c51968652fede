"""Copying text so that the person is told what actually happened.

Why this module exists: a terminal application has two ways to a clipboard
and neither reports back. The terminal clipboard sequence (OSC 52) is written
to the terminal and silently dropped by many (GNU screen, the Linux console,
tmux unless `set-clipboard on`, or a terminal that does not take it); a
system clipboard tool (wl-copy, xclip, xsel, pbcopy) works only where its
display is reachable, and over SSH it fills the remote machine's clipboard.
This module decides, from the environment, where a copy can go, runs the
tool, checks what can be checked (the tool's exit status; the tmux buffer,
which tmux fills from OSC 52 when `set-clipboard` is on) and words the
outcome; when nothing is confirmed the chat offers to write the text to a
file (`write_copy`). Writing the OSC 52 sequence itself is the TUI's (it owns
the terminal). No Textual here.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.ground.files import write_text_atomic

__all__ = ["CopyReport", "Route", "SYSTEM_TOOLS", "copy_report", "osc52", "system_tool", "terminal_route",
           "write_copy", "default_copy_path"]

TOOL_TIMEOUT_S = 3.0

#: (name, command line, the variable its display needs or None); tried in this order.
SYSTEM_TOOLS: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("wl-copy", ("wl-copy",), "WAYLAND_DISPLAY"),
    ("xclip", ("xclip", "-selection", "clipboard"), "DISPLAY"),
    ("xsel", ("xsel", "--clipboard", "--input"), "DISPLAY"),
    ("pbcopy", ("pbcopy",), None),
)

RouteKind = Literal["terminal", "tmux", "screen", "console"]


@dataclass(frozen=True)
class Route:
    """Where an OSC 52 sequence goes from here: straight to a terminal
    (`terminal`: it may or may not take it; nothing reports back), through
    tmux (`set_clipboard` its setting: only "on" takes it from applications;
    `passthrough`: `allow-passthrough` is on, so a wrapped sequence reaches
    the outer terminal), or into GNU screen or the Linux console (dropped)."""

    kind: RouteKind
    set_clipboard: str | None = None
    passthrough: bool = False

    @property
    def dropped(self) -> bool:
        """Known to go nowhere."""
        if self.kind in ("screen", "console"):
            return True
        return self.kind == "tmux" and self.set_clipboard != "on" and not self.passthrough


def _tmux_option(name: str, env: Mapping[str, str]) -> str | None:
    tmux = shutil.which("tmux", path=env.get("PATH"))
    if tmux is None:
        return None
    try:
        proc = subprocess.run([tmux, "show-options", "-gv", name], capture_output=True, text=True,
                              timeout=TOOL_TIMEOUT_S, env=dict(env))
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def terminal_route(env: Mapping[str, str] = os.environ) -> Route:
    """Where OSC 52 goes from this process (tmux asked for its settings)."""
    if env.get("TMUX"):
        clip = _tmux_option("set-clipboard", env)
        passthrough = _tmux_option("allow-passthrough", env) in ("on", "all")
        return Route("tmux", clip, passthrough)
    if env.get("STY"):
        return Route("screen")
    if env.get("TERM") == "linux":
        return Route("console")
    return Route("terminal")


def osc52(text: str, *, tmux_passthrough: bool = False) -> str:
    """The terminal clipboard sequence for `text` (wrapped for tmux's passthrough when asked)."""
    seq = f"\x1b]52;c;{base64.b64encode(text.encode('utf-8')).decode('ascii')}\a"
    if tmux_passthrough:
        return "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq


def system_tool(env: Mapping[str, str] = os.environ) -> tuple[str, tuple[str, ...]] | None:
    """The first clipboard tool that is installed and whose display is set, as (name, argv)."""
    for name, argv, display in SYSTEM_TOOLS:
        if display is not None and not env.get(display):
            continue
        found = shutil.which(argv[0], path=env.get("PATH"))
        if found:
            return name, (found, *argv[1:])
    return None


def _run_tool(argv: tuple[str, ...], text: str, env: Mapping[str, str]) -> str | None:
    """None when the tool took the text (exit 0), else why not."""
    try:
        proc = subprocess.run(list(argv), input=text.encode("utf-8"), capture_output=True,
                              timeout=TOOL_TIMEOUT_S, env=dict(env))
    except subprocess.TimeoutExpired:
        return f"it did not finish in {TOOL_TIMEOUT_S:g} s"
    except OSError as exc:
        return exc.strerror or str(exc)
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"exit {proc.returncode}" + (f": {err[0][:120]}" if err else "")
    return None


def tmux_buffer(env: Mapping[str, str] = os.environ) -> str | None:
    """tmux's newest paste buffer, or None."""
    tmux = shutil.which("tmux", path=env.get("PATH"))
    if tmux is None:
        return None
    try:
        proc = subprocess.run([tmux, "show-buffer"], capture_output=True, timeout=TOOL_TIMEOUT_S, env=dict(env))
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None


@dataclass(frozen=True)
class CopyReport:
    """What became of one copy."""

    route: Route
    tool: str | None = None               # the system clipboard tool tried
    tool_problem: str | None = None       # why it failed (None: it took the text)
    in_tmux_buffer: bool = False          # tmux took the OSC 52 sequence (checked in its buffer)
    remote: bool = False                  # over SSH: the tool filled the remote machine's clipboard

    @property
    def tool_ok(self) -> bool:
        return self.tool is not None and self.tool_problem is None

    @property
    def confirmed(self) -> bool:
        """Some clipboard is known to hold the text."""
        return self.tool_ok or self.in_tmux_buffer

    @property
    def doubtful(self) -> bool:
        """Nothing is confirmed and the terminal route is known to drop it:
        the text is probably in no clipboard (offer a file)."""
        return not self.confirmed and self.route.dropped

    def message(self, what: str) -> str:
        """`what` ("the answer of A (1,234 characters)") and where it went, in one sentence."""
        places: list[str] = []
        if self.tool_ok:
            places.append(f"the system clipboard ({self.tool}{', on the remote machine' if self.remote else ''})")
        r = self.route
        if self.in_tmux_buffer:
            places.append("tmux's clipboard (its paste buffer, and the outer terminal's if it takes OSC 52)")
        elif r.kind == "tmux" and r.passthrough:
            places.append("the terminal outside tmux (OSC 52 through tmux's passthrough; not confirmable)")
        elif r.kind == "terminal":
            places.append("the terminal clipboard (OSC 52; the terminal does not confirm it)")
        notes: list[str] = []
        if self.tool is not None and self.tool_problem:
            notes.append(f"{self.tool} failed: {self.tool_problem}")
        elif self.tool is None and not self.in_tmux_buffer:
            notes.append("no clipboard tool (wl-copy, xclip, xsel, pbcopy) is usable here")
        if r.dropped and not self.in_tmux_buffer:
            notes.append(_dropped_why(r))
        if places:
            text = f"Copied {what} to " + " and ".join(places) + "."
            return text + (f" ({'; '.join(notes)})" if notes and not self.confirmed else "")
        return f"Could not confirm the copy of {what}: " + "; ".join(notes) + "."


def _dropped_why(route: Route) -> str:
    if route.kind == "tmux":
        return (f"tmux drops the terminal clipboard sequence (set-clipboard is {route.set_clipboard or 'unknown'}; "
                "`tmux set -g set-clipboard on` lets it through)")
    if route.kind == "screen":
        return "GNU screen drops the terminal clipboard sequence"
    return "the Linux console has no clipboard sequence"


def copy_report(text: str, env: Mapping[str, str] = os.environ, *, route: Route | None = None,
                osc52_written: bool = True, wait: Callable[[float], None] = time.sleep) -> CopyReport:
    """Copy `text` with the system tool (when one is usable) and check what
    the OSC 52 sequence (already written by the caller, when
    `osc52_written`) did: in tmux with `set-clipboard on`, the tmux buffer
    is read back, for up to two seconds, until it holds the text (a busy
    machine or a slow link takes more than half a second; a copy that got
    there returns at once). Blocking: run it off the event loop."""
    route = route or terminal_route(env)
    found = system_tool(env)
    tool = problem = None
    if found is not None:
        tool, argv = found
        problem = _run_tool(argv, text, env)
    in_buffer = False
    if osc52_written and route.kind == "tmux" and route.set_clipboard == "on":
        for _ in range(40):
            if tmux_buffer(env) == text:
                in_buffer = True
                break
            wait(0.05)
    remote = bool(env.get("SSH_CONNECTION") or env.get("SSH_TTY"))
    return CopyReport(route, tool, problem, in_buffer, remote)


def default_copy_path(folder: str | os.PathLike[str] | None = None) -> Path:
    """Where the offer to write a copy to a file starts: `lineup-copy-YYYYmmdd-HHMMSS.txt` in `folder` (the
    working folder by default)."""
    return Path(folder or os.getcwd()) / time.strftime("lineup-copy-%Y%m%d-%H%M%S.txt")


def write_copy(text: str, path: str | os.PathLike[str]) -> Path:
    """Write `text` to `path` (`~` expanded) whole or not at all; OSError names the file."""
    target = Path(os.path.expanduser(os.fspath(path)))
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a folder: name a file")
    write_text_atomic(target, text if text.endswith("\n") else text + "\n")
    return target
