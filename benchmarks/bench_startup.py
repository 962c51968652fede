"""Cold-start benchmark: how long each command takes, in a fresh process,
until its first output, beside `python -c pass` and `python -c "import
textual"` measured in the same run.

Each figure is the median of 7 cold runs (a new interpreter each; one
untimed run first, so every figure has compiled bytecode and a warm file
cache, as a command typed a second time would). For a batch command, "first
output" is the first byte on its standard output or error (read through a
pipe, as `lineup sessions | less` would), "exit" the moment the process
ended. The TUI (`lineup chat -m demo/concise -m demo/thorough`) runs under a
pseudo-terminal of 140x40, and its first paint is the moment the terminal
has been sent the chat screen: the escape sequences stripped, the output
holds the title of its last pane; then it is sent Ctrl+Q.

Every run gets an empty home, no API keys and no config file (so `models`
lists the offline demo models, after its quick look for a local Ollama),
and databases built here with `tests.synthetic`: an empty one (migrated, no
sessions), ones of 150 and 1,500 sessions of 4 turns each (a third of them
blind; the table against `--json` on the larger), and a small one of 12
sessions for `report --json`.

Targets: every batch command's first output < 300 ms, the TUI's
first paint < 600 ms. The machine is shared and noisy: the load average is
printed before and after. The script fails (exit 1) only when a command
fails or never shows its first output, not on a missed target.

    .venv/bin/python benchmarks/bench_startup.py [--runs 7] [--only sessions,chat]
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BATCH_TARGET_S = 0.300
TUI_TARGET_S = 0.600
TUI_SIZE = (40, 140)                 # rows, columns
TUI_MARKER = b"demo/thorough"        # the last pane's title: the chat screen is painted
TUI_LIMIT_S = 20.0                   # a hang guard, not a target
ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def lineup_command() -> list[str]:
    """The `lineup` script installed beside this interpreter (what a user
    runs), else `python -m lineup`."""
    script = Path(sys.executable).with_name("lineup")
    return [str(script)] if script.exists() else [sys.executable, "-m", "lineup"]


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith(("LINEUP_", "OLLAMA_"))
           and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME", "PYTHONIMPORTTIME")}
    # no config file at all (the demo models, as for a new user), nothing from this user's folders
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), XDG_DATA_HOME=str(home / "data"),
               TERM="xterm-256color", COLORTERM="truecolor", LINEUP_DEMO_SPEED="0")
    return env


def build_databases(folder: Path, many: int) -> dict[str, Path]:
    from store import Store
    from tests.synthetic import synthetic_session, write_synthetic

    dbs = {"empty": folder / "empty.db", "populated": folder / "populated.db", "small": folder / "small.db",
           "tui": folder / "tui.db", "many": folder / "many.db"}
    for name in ("empty", "tui"):
        Store.open(dbs[name]).close()
    models = ["model-a", "model-b", "model-c", "model-d"]
    for name, count in (("populated", 150), ("many", many)):
        write_sessions(dbs[name], count, models)
    with Store.open(dbs["small"]) as store:
        for i in range(12):
            write_synthetic(store, *synthetic_session(turns=3, seed=i, aliases=[models[i % 4], models[(i + 1) % 4]],
                                                      created=1.7e9 + i * 600))
    return dbs


def write_sessions(path: Path, count: int, models: list[str]) -> None:
    """`count` sessions of 4 turns each, a third of them blind."""
    from store import Store
    from tests.synthetic import synthetic_session, write_synthetic

    with Store.open(path) as store:
        for i in range(count):
            pair = [models[i % 4], models[(i + 1 + i // 4) % 4]]
            if pair[0] == pair[1]:
                pair[1] = models[(i + 2) % 4]
            write_synthetic(store, *synthetic_session(turns=4, seed=i, blind=i % 3 == 0, aliases=pair,
                                                      created=1.7e9 + i * 600))


def time_batch(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds to the first byte on stdout or stderr, seconds to exit, exit code)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    first = None
    open_fds = {proc.stdout.fileno(), proc.stderr.fileno()}  # type: ignore[union-attr]
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [])
        for fd in ready:
            data = os.read(fd, 1 << 16)
            if not data:
                open_fds.discard(fd)
            elif first is None:
                first = time.perf_counter() - t0
    code = proc.wait()
    end = time.perf_counter() - t0
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    return (end if first is None else first), end, code


def time_tui(argv: list[str], env: dict[str, str]) -> tuple[float | None, float, int]:
    """(seconds until the chat screen was painted, seconds to exit after Ctrl+Q, exit code)."""
    from tests.cli_support import spawn_on_pty

    t0 = time.perf_counter()
    pid, fd = spawn_on_pty(argv, env, *TUI_SIZE)
    seen, painted = b"", None
    deadline = t0 + TUI_LIMIT_S
    try:
        while painted is None and time.perf_counter() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                break
            if not data:
                break
            seen += data
            if TUI_MARKER in ESCAPES.sub(b"", seen):
                painted = time.perf_counter() - t0
        os.write(fd, b"\x11")   # Ctrl+Q
        end = deadline + 10
        while time.perf_counter() < end:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return painted, time.perf_counter() - t0, os.waitstatus_to_exitcode(status)
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    os.read(fd, 1 << 16)
                except OSError:
                    pass
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        return painted, time.perf_counter() - t0, os.waitstatus_to_exitcode(status)
    finally:
        os.close(fd)


def median_of(runs: int, fn) -> tuple[float | None, float, int]:
    fn()   # untimed: bytecode compiled, files cached
    firsts, ends, codes = [], [], []
    for _ in range(runs):
        first, end, code = fn()
        if first is not None:
            firsts.append(first)
        ends.append(end)
        codes.append(code)
    bad = next((c for c in codes if c != 0), 0)
    first_med = statistics.median(firsts) if len(firsts) == runs else None
    return first_med, statistics.median(ends), bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="cold runs per command (median)")
    ap.add_argument("--only", default="", help="comma-separated names (e.g. sessions,chat); default all")
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.runs = 1
    only = [x for x in args.only.split(",") if x]
    lineup = lineup_command()
    print(f"cold start: median of {args.runs} fresh processes; load average {os.getloadavg()[0]:.2f} "
          f"({os.cpu_count()} cores); {Path(lineup[0]).name}")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = clean_env(home)
        t0 = time.perf_counter()
        many = 150 if args.smoke else 1500
        dbs = build_databases(Path(tmp), many)
        print(f"databases built in {time.perf_counter() - t0:.1f} s (150 and {many:,} sessions of 4 turns / "
              f"4 votes; 12 sessions for the report)")
        baselines = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ('python -c "import textual"', [sys.executable, "-c", "import textual"]),
        ]
        batch = [
            ("--version", ["--version"]),
            ("models", ["models"]),
            ("sessions (empty db)", ["sessions", "--db", str(dbs["empty"])]),
            ("sessions (150 sessions)", ["sessions", "--db", str(dbs["populated"])]),
            # the table draws only what is read: its time should hardly grow with the record
            (f"sessions ({many:,} sessions)", ["sessions", "--db", str(dbs["many"])]),
            (f"sessions --json ({many:,})", ["sessions", "--json", "--db", str(dbs["many"])]),
            ("report --json (small db)", ["report", "--json", "--db", str(dbs["small"])]),
            ("export (latest session)", ["export", "--db", str(dbs["populated"])]),
            ("run --help", ["run", "--help"]),
            ("sample --help", ["sample", "--help"]),
        ]
        chat = ["chat", "--db", str(dbs["tui"]), "-m", "demo/concise", "-m", "demo/thorough"]

        def wanted(name: str) -> bool:
            return not only or any(o in name for o in only)

        print(f"{'command':<34} {'first output':>12} {'exit':>8} {'x pass':>7}  target")
        base_pass = 0.0
        for name, cmd in baselines:
            _, end, code = median_of(args.runs, lambda cmd=cmd: time_batch(cmd, env))
            base_pass = base_pass or end
            print(f"{name:<34} {'':>12} {end * 1000:>6.0f}ms {end / base_pass:>6.1f}x  (baseline)")
        for name, cmd in batch:
            if not wanted(name):
                continue
            first, end, code = median_of(args.runs, lambda cmd=cmd: time_batch(lineup + cmd, env))
            first = first if first is not None else end
            verdict = "met" if first < BATCH_TARGET_S else "NOT met"
            print(f"lineup {name:<27} {first * 1000:>10.0f}ms {end * 1000:>6.0f}ms {first / base_pass:>6.1f}x  "
                  f"< {BATCH_TARGET_S * 1000:.0f} ms: {verdict}" + (f"  (exit {code})" if code else ""))
            failed += code != 0
        if wanted("chat"):
            painted, end, code = median_of(args.runs, lambda: time_tui(lineup + chat, env))
            if painted is None:
                print(f"lineup chat (first paint)          never painted its screen within {TUI_LIMIT_S:.0f} s")
                failed += 1
            else:
                verdict = "met" if painted < TUI_TARGET_S else "NOT met"
                print(f"{'lineup chat (first paint, pty)':<34} {painted * 1000:>10.0f}ms {end * 1000:>6.0f}ms "
                      f"{painted / base_pass:>6.1f}x  < {TUI_TARGET_S * 1000:.0f} ms: {verdict}"
                      + (f"  (exit {code})" if code else ""))
                failed += code != 0
        shutil.rmtree(home, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
