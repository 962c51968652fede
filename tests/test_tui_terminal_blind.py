"""Real-terminal tests of what a blind rater sees (tmux: a real pty and
terminal emulator, at 80x24 and large), with a reasoning model among the
contestants (demo/thinker, or a model on the loopback server, streams
reasoning before its answer): before the vote no pane shows reasoning,
after the vote it does; a table streamed row by row ends drawn as one; long
reasoning and a long paragraph (not blind) wrap at whole words as they
stream. And the keys around
it: tagging from the vote queue, Down from the sessions filter, the case
count after a vote."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
from tests.cli_support import ROOT, TMUX, Tmux, only_session


SIZES = [(80, 24), (160, 48)]
# words of demo/thinker's reasoning (providers/demo.py `_reasoning`), never of an answer
REASONING = ("The user is asking", "Key aspects", "Let me consider", "short numbered")
NAMES = ("demo/concise", "demo/thinker", "thinker", "concise")


def _wait_gone(tmux: Tmux, text: str, polls: int = 300) -> None:
    """Poll until `text` is off the screen (a hang guard, not a timing check)."""
    for _ in range(polls):
        screen = tmux.screen()
        if text not in screen:
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} stayed on the screen:\n{screen}")


def _start(tmux: Tmux, tmp_path: Path, args: str, size: tuple[int, int], db: Path | None = None,
           rater: str | None = "pty-tester") -> Path:
    db = db or tmp_path / "lineup.db"
    config = tmp_path / "config.toml"
    if not config.exists():
        config.write_text("")
    w, h = size
    # COLUMNS and LINES as the pane's: one inherited from the environment pytest runs in would win
    env_vars = {"LINEUP_DB": str(db), "LINEUP_CONFIG": str(config), "LINEUP_DEMO_SPEED": "0",
                "TERM": "xterm-256color", "COLORTERM": "truecolor",
                "PYTHONPATH": str(ROOT), "COLUMNS": str(w), "LINES": str(h)}
    if rater is not None:
        env_vars["LINEUP_RATER"] = rater
    env_prefix = " ".join(f"{k}={v!s}" for k, v in env_vars.items())
    # -u LINEUP_RATER: without one given, the rater is whatever the command line names
    command = (f"cd {ROOT} && env -u LINEUP_RATER {env_prefix} {sys.executable} -m lineup {args}; "
               "echo EXITED $?; sleep 30")
    # the size from the server's start (a resize after it may reach the app after its first draw)
    conf = tmp_path / "tmux.conf"
    conf.write_text(f"set -g default-size {w}x{h}\n")
    tmux("-f", str(conf), "new-session", "-d", "-s", "lineup", "-x", str(w), "-y", str(h), command)
    assert tmux("display", "-p", "-t", "lineup", "#{window_width}x#{window_height}").strip() == f"{w}x{h}"
    return db


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_blind_chat_shows_reasoning_only_after_the_vote(tmp_path, size):
    """`lineup chat --blind` with demo/thinker: until the vote no pane shows
    a reasoning block (its presence alone would say which one reasons); the
    vote reveals the names and the reasoning. Then Ctrl+O: Down from the
    filter goes to the list, so `r` renames instead of typing into the filter."""
    tmux = Tmux(f"lineup-test-blind-reasoning-{os.getpid()}")
    db = _start(tmux, tmp_path, "chat --blind -m demo/concise -m demo/thinker --seed 2", size)
    try:
        tmux.wait_for("Enter sends to all", forbid=NAMES + REASONING)
        tmux.type_line("explain recursion")
        tmux.wait_for("Which answer is best?", forbid=NAMES + REASONING)
        tmux("send-keys", "-t", "lineup", "F2")
        tmux.wait_for("b best", forbid=NAMES + REASONING)   # the vote bar's keys in the footer
        tmux("send-keys", "-t", "lineup", "a")
        tmux.wait_for("Vote saved")
        tmux.wait_for("short numbered")                  # the reasoning's end, once the names are out
        tmux("send-keys", "-t", "lineup", "C-o")
        tmux.wait_for("1 of 1 sessions")
        tmux("send-keys", "-t", "lineup", "/")
        tmux("send-keys", "-t", "lineup", "-l", "chat")
        for _ in range(300):       # the filter holds what was typed before Down leaves it
            if "words in id" not in tmux.screen():
                break
            time.sleep(0.1)
        tmux("send-keys", "-t", "lineup", "Down")
        tmux("send-keys", "-t", "lineup", "r")
        tmux.wait_for("Title for session", forbid=("chatr",))
        tmux("send-keys", "-t", "lineup", "Escape")
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
    loaded = only_session(db)
    thinker = [o for o in loaded.outputs if o.contestant == "demo/thinker"]
    assert thinker and all(o.reasoning for o in thinker)    # kept in the record all along
    assert "show_reasoning" not in loaded.session.meta


def _run_set(tmp_path: Path, db: Path, monkeypatch) -> None:
    from lineup.cli import main

    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    (tmp_path / "config.toml").write_text("")
    monkeypatch.setenv("LINEUP_CONFIG", str(tmp_path / "config.toml"))
    sample = tmp_path / "set.jsonl"
    sample.write_text("".join(json.dumps({"id": f"c{k}", "category": "words", "prompt": f"explain recursion, take {k}"})
                              + "\n" for k in range(3)))
    assert main(["run", str(sample), "-m", "demo/concise", "-m", "demo/thinker", "--seed", "0", "--quiet",
                 "--db", str(db)]) == 0


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_vote_queue_hides_reasoning_counts_the_case_and_tags_by_key(tmp_path, monkeypatch, size):
    """`lineup vote` over a run with demo/thinker: no reasoning before the
    vote, the reasoning after it; the info line still counts the case voted
    on ("case 1 of 3", not the next one's number) until Enter shows the next,
    which says nothing of the last vote; Ctrl+T (in the footer) opens the
    tags of an answer from the keyboard, asking which first."""
    db = tmp_path / "lineup.db"
    _run_set(tmp_path, db, monkeypatch)
    tmux = Tmux(f"lineup-test-queue-reasoning-{os.getpid()}")
    _start(tmux, tmp_path, "vote", size, db)
    try:
        tmux.wait_for("case 1 of 3", forbid=NAMES + REASONING)
        tmux.wait_for("^t Tag", forbid=NAMES + REASONING)               # tagging is in the footer
        tmux("send-keys", "-t", "lineup", "C-t")
        tmux.wait_for("Tag which answer?", forbid=NAMES + REASONING)
        tmux("send-keys", "-t", "lineup", "Down", "Enter")              # answer B
        tmux.wait_for("Tags for answer B", forbid=NAMES + REASONING)    # (saving one: test_tui_vote_queue)
        tmux("send-keys", "-t", "lineup", "Escape")
        _wait_gone(tmux, "Tags for answer")
        tmux("send-keys", "-t", "lineup", "a")
        screen = tmux.wait_for("short numbered")                        # the names and the reasoning
        assert "voted A best" in screen and "case 1 of 3" in screen and "case 2 of 3" not in screen
        tmux("send-keys", "-t", "lineup", "Enter")
        tmux.wait_for("case 2 of 3")
        screen = tmux.wait_for("Which answer is best?", forbid=NAMES + REASONING)
        assert "case 2 of 3" in screen and "voted" not in screen
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
    loaded = only_session(db)
    (vote,) = [v for v in loaded.current_votes() if v.rater == "pty-tester"]
    assert vote.choice == "A" and vote.revealed_at is not None


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_a_chat_rater_named_with_rater_is_the_one_replay_shows(tmp_path):
    """`lineup chat --rater NAME` (no LINEUP_RATER): the vote carries NAME,
    and replay's info line names NAME, not the login name."""
    import getpass

    db = tmp_path / "lineup.db"
    tmux = Tmux(f"lineup-test-rater-{os.getpid()}")
    _start(tmux, tmp_path, "chat --blind --rater 'Ada L' -m demo/concise -m demo/thinker --seed 2", SIZES[0], db,
           rater=None)
    try:
        tmux.wait_for("Enter sends to all")
        tmux.type_line("explain recursion")
        tmux.wait_for("Which answer is best?")
        tmux("send-keys", "-t", "lineup", "F2")
        tmux.wait_for("b best")
        tmux("send-keys", "-t", "lineup", "b")
        tmux.wait_for("Vote saved")
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
    loaded = only_session(db)
    (vote,) = loaded.votes
    assert vote.rater == "Ada L"
    tmux = Tmux(f"lineup-test-rater-replay-{os.getpid()}")
    _start(tmux, tmp_path, f"replay {loaded.session.id}", SIZES[1], db, rater=None)
    try:
        screen = tmux.wait_for("votes: Ada L: B best")
        login = getpass.getuser()
        assert f"{login}:" not in screen or login == "Ada L"
        tmux.quit()
    finally:
        tmux("kill-server", check=False)


# an answer whose tail is code, then a table growing row by row (tui/tail_render.py), in both panes
TABLE_ROWS = 24
TABLE_ANSWER = ("First the code:\n\n```python\ndef total(items):\n    return sum(items)\n```\n\n"
                "| model | score | note |\n|---|--:|---|\n"
                + "\n".join(f"| row-{k:02d} | {100 + k} | ok{'!' * (k % 3)} |" for k in range(TABLE_ROWS)))
THINKING = ("Weighing each row", "before the table")


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_blind_chat_streams_code_and_a_table_as_rows_with_a_reasoning_contestant(tmp_path, size):
    """Two models on the loopback server stream the same answer, code then a
    24-row table, a few characters at a time; one reasons first. Typed as a
    person would, blind: no name and no reasoning shows on the way, and once
    answered each pane ends on the table's last rows, one line each, in
    order, with nothing between them (a flush ending inside a row left no
    blank or doubled line behind); the vote then shows the names, and
    the record keeps the reasoning."""
    from tests.run_support import config_file
    from tests.server import Received, Reply, TestServer

    names = ("zorro", "quokka")
    with TestServer() as srv:
        def reply(rec: Received) -> Reply:
            model = rec.json.get("model") if isinstance(rec.json, dict) else None
            reasoning = " ".join(THINKING) + ", step by step." if model == "zorro-model" else ""
            return Reply(text=TABLE_ANSWER, reasoning=reasoning, chunk_chars=5, delay=0.01)

        srv.respond(reply)
        config_file(tmp_path / "config.toml", srv, {name: {"api_key_env": ""} for name in names})
        tmux = Tmux(f"lineup-test-blind-table-{os.getpid()}")
        db = _start(tmux, tmp_path, "chat --blind -m zorro -m quokka --seed 2", size)
        try:
            tmux.wait_for("Enter sends to all", forbid=names + THINKING)
            tmux.type_line("compare them in a table")
            screen = tmux.wait_for("Which answer is best?", forbid=names + THINKING)
            screen = tmux.wait_for(f"row-{TABLE_ROWS - 1}", forbid=names + THINKING)
            lines = screen.splitlines()
            last = max(i for i, line in enumerate(lines) if f"row-{TABLE_ROWS - 1}" in line)
            for back in range(4):    # the last rows, a line each, side by side in both panes
                assert lines[last - back].count(f"row-{TABLE_ROWS - 1 - back:02d}") == 2, screen
            assert "|---" not in screen and "| row-" not in screen, screen   # drawn as a table, not as text
            tmux("send-keys", "-t", "lineup", "F2")
            tmux.wait_for("b best", forbid=names + THINKING)
            tmux("send-keys", "-t", "lineup", "a")
            tmux.wait_for("Vote saved")
            tmux.wait_for("zorro")                       # the names, once voted (the reasoning is above, scrolled off)
            tmux.quit()
        finally:
            tmux("kill-server", check=False)
    loaded = only_session(db)
    assert sorted(o.text for o in loaded.outputs) == [TABLE_ANSWER, TABLE_ANSWER]
    assert [bool(o.reasoning) for o in sorted(loaded.outputs, key=lambda o: o.contestant)] == [False, True]


# a long paragraph of Markdown (a word in nine bold) and long reasoning, numbered word by word
LONG_WORDS = 240


def _words(letter: str, bold: bool = False) -> str:
    return " ".join(f"**{letter}{k:03d}**" if bold and k % 9 == 0 else f"{letter}{k:03d}"
                    for k in range(1, LONG_WORDS + 1))


def _consecutive(screen: str, letter: str) -> list[int]:
    """The numbers of the words `letter`NNN on the screen in reading order,
    asserted to follow each other (a word cut at a line's end, a line
    doubled or lost between flushes, would break the run)."""
    found = [int(n) for n in re.findall(rf"\b{letter}(\d{{3}})\b", screen)]
    if found:
        assert found == list(range(found[0], found[0] + len(found))), screen
    return found


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_long_reasoning_and_a_long_paragraph_stream_wrapped_at_whole_words(tmp_path, size):
    """Two models on the loopback server, not blind: one reasons at length
    (240 words, no blank line) and then answers with a 240-word paragraph of
    Markdown; the other answers with its own. A few characters at a time:
    on every screen polled on the way, each pane's words follow each other
    in reading order, none cut at a line's end; at the end each pane's last
    lines hold its last words, the bold drawn as bold (no asterisks)."""
    from tests.run_support import config_file
    from tests.server import Received, Reply, TestServer

    with TestServer() as srv:
        def reply(rec: Received) -> Reply:
            model = rec.json.get("model") if isinstance(rec.json, dict) else None
            if model == "zorro-model":
                return Reply(text=_words("a", bold=True), reasoning=_words("r"), chunk_chars=7, delay=0.005)
            return Reply(text=_words("b", bold=True), chunk_chars=5, delay=0.005)

        srv.respond(reply)
        config_file(tmp_path / "config.toml", srv, {name: {"api_key_env": ""} for name in ("zorro", "quokka")})
        tmux = Tmux(f"lineup-test-long-text-{os.getpid()}")
        _start(tmux, tmp_path, "chat -m zorro -m quokka", size)
        try:
            tmux.wait_for("Enter sends to all")
            tmux.type_line("think it through")
            seen = {"a": set(), "b": set(), "r": set()}
            for _ in range(600):             # every screen on the way (a hang guard, not a timing check)
                screen = tmux.screen()
                for letter in seen:
                    seen[letter].update(_consecutive(screen, letter))
                if f"a{LONG_WORDS:03d}" in screen and f"b{LONG_WORDS:03d}" in screen:
                    break
                time.sleep(0.05)
            else:
                raise AssertionError(f"the answers never ended:\n{screen}")
            assert len(seen["r"]) > 20 and len(seen["a"]) > 20 and len(seen["b"]) > 20, seen   # all three streamed
            assert "**" not in screen, screen
            for letter in ("a", "b"):
                assert _consecutive(screen, letter)[-1] == LONG_WORDS, screen
            tmux.quit()
        finally:
            tmux("kill-server", check=False)
