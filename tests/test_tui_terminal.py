"""Real-terminal tests: `lineup` in a tmux session (a real pty and
terminal emulator) with demo models, a prompt, a vote, quit; then the vote
must be in the database."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from store import Store
from tests.cli_support import ROOT, TMUX, Tmux, only_session, start_in_tmux

CONFIG = """
[models.quick]
provider = "demo"
model = "concise"

[models.wordy]
provider = "demo"
model = "thorough"
"""


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_lineup_in_a_real_terminal_records_a_vote(tmp_path):
    db = tmp_path / "lineup.db"
    config = tmp_path / "config.toml"
    config.write_text(CONFIG)
    env_vars = {"LINEUP_DB": str(db), "LINEUP_CONFIG": str(config), "LINEUP_DEMO_SPEED": "0",
                "LINEUP_RATER": "pty-tester", "TERM": "xterm-256color", "COLORTERM": "truecolor",
                "PYTHONPATH": str(ROOT)}
    env_prefix = " ".join(f"{k}={v!s}" for k, v in env_vars.items())
    command = f"cd {ROOT} && env -u COLUMNS -u LINES {env_prefix} {sys.executable} -m lineup; echo EXITED $?; sleep 30"
    tmux = Tmux(f"lineup-test-{os.getpid()}")
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "lineup", "-x", "140", "-y", "40", command)
    try:
        tmux("resize-window", "-t", "lineup", "-x", "140", "-y", "40", check=False)
        tmux.wait_for("Enter sends to all")
        tmux.type_line("explain python lists")
        screen = tmux.wait_for("Which answer is best?")
        assert "quick" in screen and "wordy" in screen
        tmux("send-keys", "-t", "lineup", "F2")          # to the vote bar: its keys show in the footer
        tmux.wait_for("a b best")                     # the letter keys, named once
        tmux("send-keys", "-t", "lineup", "b")           # the second answer is best
        tmux.wait_for("Vote saved")
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
    loaded = only_session(db)
    (vote,) = loaded.votes
    second = next(c.label for c in loaded.session.contestants if c.position == 1)
    assert vote.choice == second and vote.rater == "pty-tester"
    assert vote.mapping == {"quick": "quick", "wordy": "wordy"} and vote.positions == ["quick", "wordy"]
    assert [t.user_message for t in loaded.turns] == ["explain python lists"]
    assert {o.status for o in loaded.outputs} == {"complete"}


NAMES_SHOWN = ("demo/concise", "demo/quirky", "concise", "quirky")


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_blind_follow_ups_typed_after_and_while_answers_finish_never_vote(tmp_path):
    """The path of a blind chat: blind, send, wait for both answers, type a
    follow-up and Enter. It must go to both models as a turn; no letter of it
    is a vote, no name shows. Then keys typed while answers are still coming."""
    tmux = Tmux(f"lineup-test-blind-{os.getpid()}")
    # speed 0.5: the demo answers take a second or two, long enough to type into
    db = start_in_tmux(tmux, tmp_path, "chat --blind -m demo/concise -m demo/quirky --seed 2", "0.5")
    try:
        tmux.wait_for("Enter sends to all", forbid=NAMES_SHOWN)
        tmux.type_line("Name a colour.")
        tmux.wait_for("Which answer is best?", forbid=NAMES_SHOWN)   # shown once both answers are done
        tmux.type_line("also a fruit")
        tmux.wait_for("▌ also a fruit", forbid=NAMES_SHOWN + ("Vote saved",))   # a turn, in the panes
        tmux.wait_for("streaming", forbid=NAMES_SHOWN + ("Vote saved",))
        tmux("send-keys", "-t", "lineup", "-l", "and a bat")     # while the answers finish
        screen = tmux.wait_for("Which answer is best?", forbid=NAMES_SHOWN + ("Vote saved",))
        assert "and a bat" in screen                              # still in the prompt box
        tmux("send-keys", "-t", "lineup", "Enter")
        tmux.wait_for("▌ and a bat", forbid=NAMES_SHOWN + ("Vote saved",))
        tmux.wait_for("Which answer is best?", forbid=NAMES_SHOWN + ("Vote saved",))
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
    loaded = only_session(db)
    assert loaded.votes == [] and loaded.session.revealed_at is None
    assert [t.user_message for t in loaded.turns] == ["Name a colour.", "also a fruit", "and a bat"]
    for turn in loaded.turns:
        assert sorted(o.contestant for o in loaded.outputs_for(turn.id)) == ["demo/concise", "demo/quirky"]


MANY = "".join(f'[models.{alias}]\nprovider = "demo"\nmodel = "{style}"\n\n' for alias, style in (
    ("quick", "concise"), ("wordy", "thorough"), ("odd", "quirky"), ("deep", "thinker"), ("brief", "concise")))


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_picker_image_attach_and_copy_in_a_real_terminal(tmp_path):
    """Plain `lineup` with five models opens the picker: search, choose two,
    start. Ctrl+G attaches an image by a path completed with Tab; a second
    image is pasted as a path (tmux's bracketed paste). Both go with the
    prompt and show as placeholders. A copy reaches tmux's clipboard when
    `set-clipboard` is on (read back from tmux), and with it off the chat
    says it could not confirm the copy and writes it to a file instead."""
    db = tmp_path / "lineup.db"
    config = tmp_path / "config.toml"
    config.write_text(MANY)
    shots = tmp_path / "shots"
    shots.mkdir()
    shutil.copy(ROOT / "sample_sets" / "images" / "chart-quarterly-units.png", shots / "chart.png")
    shutil.copy(ROOT / "sample_sets" / "images" / "receipt-hardware.png", shots / "receipt.png")
    env_vars = {"LINEUP_DB": str(db), "LINEUP_CONFIG": str(config), "LINEUP_DEMO_SPEED": "0",
                "LINEUP_RATER": "pty-tester", "TERM": "xterm-256color", "COLORTERM": "truecolor",
                "PYTHONPATH": str(ROOT)}
    env_prefix = " ".join(f"{k}={v!s}" for k, v in env_vars.items())
    command = f"cd {tmp_path} && env -u COLUMNS -u LINES {env_prefix} {sys.executable} -m lineup; echo EXITED $?; sleep 30"
    tmux = Tmux(f"lineup-test-wb-{os.getpid()}")
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "lineup", "-x", "140", "-y", "40", command)
    saved = tmp_path / "copied.txt"
    try:
        tmux("resize-window", "-t", "lineup", "-x", "140", "-y", "40", check=False)
        tmux("set", "-g", "set-clipboard", "on")
        tmux.wait_for("5 models are configured")
        tmux("send-keys", "-t", "lineup", "-l", "wordy")
        tmux.wait_for("1 of 5 shown")
        tmux("send-keys", "-t", "lineup", "C-a")                      # choose what the search shows
        tmux.wait_for("1 chosen: wordy")
        tmux("send-keys", "-t", "lineup", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace")
        tmux.wait_for("odd  demo · quirky")                             # the search is empty again
        tmux("send-keys", "-t", "lineup", "-l", "quick")
        tmux.wait_for("1 of 5 shown")
        tmux("send-keys", "-t", "lineup", "Down", "Space")              # to the list, choose
        tmux.wait_for("2 chosen: wordy, quick")
        tmux("send-keys", "-t", "lineup", "Enter")
        screen = tmux.wait_for("Enter sends to all")
        assert "wordy" in screen and "quick" in screen and "odd" not in screen
        tmux("send-keys", "-t", "lineup", "C-g")
        tmux.wait_for("Attach an image")
        tmux("send-keys", "-t", "lineup", "-l", "shots/ch")
        tmux("send-keys", "-t", "lineup", "Tab")
        tmux.wait_for("shots/chart.png")
        tmux("send-keys", "-t", "lineup", "Enter")
        tmux.wait_for("attached: [image: chart.png")
        tmux("set-buffer", str(shots / "receipt.png"))
        tmux("paste-buffer", "-p", "-t", "lineup")                      # a bracketed paste of a path
        tmux.wait_for("[image: receipt.png")
        tmux.type_line("what do these show?")
        screen = tmux.wait_for("Which answer is best?")
        assert "[image: chart.png" in screen and "[image: receipt.png" in screen
        tmux("send-keys", "-t", "lineup", "Tab")                         # the first pane
        tmux.wait_for("y Copy")                                          # its keys are in the footer
        tmux("send-keys", "-t", "lineup", "y")
        # the toast's first words (its sentence wraps where the answer's length puts it: "tmux's" and
        # "clipboard" fell on two lines in some runs); the buffer read back below says where it went
        tmux.wait_for("Copied the answer")
        copied = tmux("show-buffer")
        assert "I looked at the 2 attached images" in copied or len(copied) > 20
        tmux("set", "-g", "set-clipboard", "external")
        tmux("send-keys", "-t", "lineup", "y")
        tmux.wait_for("Write the copied text to a file?")
        tmux("send-keys", "-t", "lineup", "C-u")
        tmux.wait_for("a file to write")                                 # the suggested name is gone
        tmux.type_line(str(saved))
        tmux.wait_for("Wrote the answer of")
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
    assert saved.read_text().rstrip("\n") == copied
    with Store.open(db) as store:
        (summary,) = store.list_sessions()
        loaded = store.load_session(summary.id)
        (turn,) = loaded.turns
        stored = store.images([i["sha256"] for i in turn.images])
    assert sorted(c.alias for c in loaded.session.contestants) == ["quick", "wordy"]
    assert [i["name"] for i in turn.images] == ["chart.png", "receipt.png"]
    assert stored[turn.images[0]["sha256"]][1] == (shots / "chart.png").read_bytes()


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_adaptive_vote_with_the_blinding_audit_typed_in_a_real_terminal(tmp_path, monkeypatch):
    """`lineup vote --adaptive --blinding-audit` in a pty: two answers, no
    name before the vote; the vote key asks who wrote A; "n" (no idea)
    answers it, and only then do the names show."""
    import json

    from lineup.cli import main

    tmux = Tmux(f"lineup-test-adaptive-{os.getpid()}")
    db = tmp_path / "lineup.db"
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    sample = tmp_path / "set.jsonl"
    sample.write_text("".join(json.dumps({"id": f"c{k}", "category": "colours", "prompt": f"Name a colour, take {k}"}) + "\n"
                              for k in range(3)))
    # seeded: demo/quirky's 5% of simulated server errors would otherwise fail one run in about seven
    assert main(["run", str(sample), "-m", "demo/concise", "-m", "demo/quirky", "-m", "demo/thorough",
                 "--seed", "0", "--quiet", "--db", str(db)]) == 0
    start_in_tmux(tmux, tmp_path, "vote --adaptive --blinding-audit", "0")
    try:
        tmux.wait_for("Which answer is best?", forbid=NAMES_SHOWN + ("thorough",))
        tmux("send-keys", "-t", "lineup", "a")
        tmux.wait_for("Which model do you think wrote A?")
        tmux("send-keys", "-t", "lineup", "n")
        tmux.wait_for("A · demo/")
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
    with Store.open(db) as store:
        (summary,) = store.list_sessions()
        loaded = store.load_session(summary.id)
        guesses = store.conn.execute("SELECT guess, options FROM blind_guess").fetchall()
    (vote,) = [v for v in loaded.current_votes() if v.rater == "pty-tester"]
    assert vote.choice == "A" and len(vote.mapping) == 2 and vote.choice_reason["mode"] == "adaptive"
    assert [(g, json.loads(o)) for g, o in guesses] == [(None, ["demo/concise", "demo/quirky", "demo/thorough"])]


def _launch(tmux: Tmux, tmp_path: Path, *, speed: str, size: tuple[int, int] = (140, 40)) -> tuple[Path, Path]:
    """`lineup` on two demo models in tmux, as its own process (`exec`, so the
    pid written is lineup's): (the database, the file holding the pid)."""
    db, config, pid = tmp_path / "lineup.db", tmp_path / "config.toml", tmp_path / "lineup.pid"
    config.write_text(CONFIG)
    env_vars = {"LINEUP_DB": str(db), "LINEUP_CONFIG": str(config), "LINEUP_DEMO_SPEED": speed,
                "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
    env_prefix = " ".join(f"{k}={v!s}" for k, v in env_vars.items())
    command = f"cd {ROOT} && echo $$ > {pid} && exec env -u COLUMNS -u LINES {env_prefix} {sys.executable} -m lineup"
    x, y = map(str, size)
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "lineup", "-x", x, "-y", y, command)
    tmux("resize-window", "-t", "lineup", "-x", x, "-y", y, check=False)
    return db, pid


def _sessions(db: Path) -> list[tuple[str, int]]:
    """(session id, turns) of every session, read without writing."""
    import sqlite3

    if not db.exists():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT s.id, (SELECT count(*) FROM turn t WHERE t.session_id = s.id) "
                            "FROM session s").fetchall()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
@pytest.mark.parametrize("size", [(80, 24), (140, 40)])
def test_launching_lineup_and_quitting_without_sending_leaves_no_session(tmp_path, size):
    """Every launch of `lineup` left a 0-turn session in `lineup sessions`;
    a session is recorded when its first prompt is sent. Then a launch that
    sends one prompt and quits leaves exactly that session."""
    tmux = Tmux(f"lineup-test-nosession-{os.getpid()}-{size[0]}")
    try:
        db, pid = _launch(tmux, tmp_path, speed="0", size=size)
        tmux.wait_for("quick")
        tmux("send-keys", "-t", "lineup", "C-q")
        for _ in range(200):
            if _gone(int(pid.read_text())):
                break
            time.sleep(0.1)
        assert _gone(int(pid.read_text()))
        assert _sessions(db) == []
        tmux("kill-server", check=False)

        db, pid = _launch(tmux, tmp_path, speed="0", size=size)
        tmux.wait_for("quick")
        tmux.type_line("explain python lists")
        tmux.wait_for("Which answer is best?" if size[0] > 100 else "F2")
        tmux("send-keys", "-t", "lineup", "C-q")
        for _ in range(200):
            if _gone(int(pid.read_text())):
                break
            time.sleep(0.1)
    finally:
        tmux("kill-server", check=False)
    assert [turns for _, turns in _sessions(db)] == [1]


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_quitting_lineup_gives_the_shell_back_as_it_was_at_80x24(tmp_path):
    """`lineup` started from a shell, one prompt answered, Ctrl+Q: the process
    ends without the interpreter's teardown (`lineup.cli.quick_exit`), so the
    terminal must already be whole: the shell's screen back (the alternate
    screen left), exit status 0, keys echoed as typed, and the session and its
    answers closed into the record (nothing left in the write-ahead log)."""
    tmux = Tmux(f"lineup-test-shell-{os.getpid()}")
    db, config = tmp_path / "lineup.db", tmp_path / "config.toml"
    config.write_text(CONFIG)
    env_prefix = (f"LINEUP_DB={db} LINEUP_CONFIG={config} LINEUP_DEMO_SPEED=0 TERM=xterm-256color "
                  f"PYTHONPATH={ROOT}")
    try:
        tmux("-f", "/dev/null", "new-session", "-d", "-s", "lineup", "-x", "80", "-y", "24",
             "env -u COLUMNS -u LINES PS1='$ ' bash --norc --noprofile")
        tmux("resize-window", "-t", "lineup", "-x", "80", "-y", "24", check=False)
        tmux.type_line(f"cd {ROOT}; echo before-lineup")
        tmux.wait_for("before-lineup\n")
        tmux.type_line(f"{env_prefix} {sys.executable} -m lineup")
        tmux.wait_for("quick")
        tmux.type_line("explain python lists")
        tmux.wait_for("F2")                                   # the answers are in: the vote keys show
        tmux("send-keys", "-t", "lineup", "C-q")
        tmux.wait_for("before-lineup")                        # the shell's own screen is back
        tmux.type_line("echo status-$? sum-$((40+2))")
        screen = tmux.wait_for("sum-42")
    finally:
        tmux("kill-server", check=False)
    assert "status-0 sum-42" in screen, screen
    assert "echo status-$? sum-$((40+2))" in screen          # typed keys echo: the terminal is not left raw
    assert "\x1b" not in screen and "[?10" not in screen, screen
    assert [turns for _, turns in _sessions(db)] == [1]
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0         # closed: every page is in the file itself


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_killing_lineup_after_the_first_prompt_keeps_the_session(tmp_path):
    """kill -9 while the answers to the first prompt still stream: the session
    and its prompt were written when it was sent, and stay."""
    import signal

    tmux = Tmux(f"lineup-test-killed-{os.getpid()}")
    try:
        db, pid = _launch(tmux, tmp_path, speed="0.2")       # slow demo answers: still streaming when killed
        tmux.wait_for("quick")
        tmux.type_line("explain python lists")
        for _ in range(300):                                   # until the prompt is in the record
            if any(turns for _, turns in _sessions(db)):
                break
            time.sleep(0.1)
        os.kill(int(pid.read_text()), signal.SIGKILL)
        for _ in range(100):
            if _gone(int(pid.read_text())):
                break
            time.sleep(0.1)
    finally:
        tmux("kill-server", check=False)
    assert [turns for _, turns in _sessions(db)] == [1]
    loaded = only_session(db)
    assert [t.user_message for t in loaded.turns] == ["explain python lists"]


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_a_press_on_a_panes_scrollbar_pages_it_in_a_real_terminal(tmp_path):
    """The panes draw their scrollbar in their own rows (tui/line_scroll_view.py):
    at 80x24, a mouse press (the terminal's own SGR report) on the track above
    the thumb of a pane whose answer is longer than it pages the pane up."""
    tmux = Tmux(f"lineup-test-bar-{os.getpid()}")
    start_in_tmux(tmux, tmp_path, "chat -m demo/thorough -m demo/concise --seed 1", "0")
    tmux("resize-window", "-t", "lineup", "-x", "80", "-y", "24", check=False)
    try:
        tmux.wait_for("Enter sends to all")
        tmux.type_line("Explain python decorators with a long example")
        tmux.wait_for("Which answer is best?")
        screen = tmux.screen()
        lines = screen.split("\n")
        top = next(i for i, ln in enumerate(lines) if ln.startswith("╭"))
        right = lines[top].index("╮")          # the left pane's right border
        bottom = next(i for i, ln in enumerate(lines) if ln.startswith("╰"))

        def left_pane(text: str) -> list[str]:
            return [ln[1:right] for ln in text.split("\n")[top + 2:bottom]]

        first = left_pane(screen)
        assert not any("▌" in ln for ln in first)      # followed to the end: the prompt is above
        for _ in range(10):                     # press the track's top row, as a mouse does, until the top
            x, y = right - 1, top + 3           # 1-based: the bar's first column, the first content row
            tmux("send-keys", "-t", "lineup", "-l", f"\x1b[<0;{x};{y}M\x1b[<0;{x};{y}m")
            time.sleep(0.3)
            if any("▌" in ln for ln in left_pane(tmux.screen())):
                break
        shown = left_pane(tmux.screen())
        assert any("▌" in ln for ln in shown), "\n".join(shown)     # paged back up to the prompt
        assert shown != first
    finally:
        tmux("kill-server", check=False)
