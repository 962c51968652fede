"""Real-terminal tests at the sizes people have:
`lineup` in tmux at 80x24, the default of many terminals, and at 160x45,
with the demo models. At 80x24 every pane is reachable and named, every vote
choice (tie and all bad too) is on screen, the footer ends on a whole key and
the settings dialog shows every column and takes what is typed; at 160x45
code folds between tokens behind a mark, and the demo banner, the pane
headers and the footer end on whole words."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest
from tests.cli_support import ROOT, TMUX, Tmux, only_session

from tui.chat_screen import ChatScreen
from tui.panes import Pane
from tui.prompt_box import PromptBox
from tui.vote_bar import VoteBar

STYLES = ("concise", "thorough", "quirky", "thinker")
ALIASES = [f"{STYLES[i % 4]}{'' if i < 4 else i}" for i in range(8)]
CONFIG = "".join(f'[models.{alias}]\nprovider = "demo"\nmodel = "{STYLES[i % 4]}"\n\n'
                 for i, alias in enumerate(ALIASES))
PROMPT = "write a python list comprehension"

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


def footer_words() -> set[str]:
    """Every description the footer can end on (a key's last word)."""
    from textual.binding import Binding

    from tui.app import LineupApp

    words = set()
    for cls in (ChatScreen, VoteBar, Pane, PromptBox, LineupApp):
        for b in cls.BINDINGS:
            if isinstance(b, Binding):
                words.update(d.split()[-1] for d in (b.description, b.group and b.group.description) if d)
    return words


def start(tmux: Tmux, tmp_path: Path, args: str, size: tuple[int, int], config: str = CONFIG) -> Path:
    db = tmp_path / "lineup.db"
    (tmp_path / "config.toml").write_text(config)
    env_vars = {"LINEUP_DB": str(db), "LINEUP_CONFIG": str(tmp_path / "config.toml"), "LINEUP_DEMO_SPEED": "0",
                "LINEUP_RATER": "pty-tester", "TERM": "xterm-256color", "COLORTERM": "truecolor",
                "PYTHONPATH": str(ROOT)}
    env_prefix = " ".join(f"{k}={v!s}" for k, v in env_vars.items())
    # without COLUMNS and LINES: a shell that exported them at 80x24 would pin the app's size there
    command = (f"cd {ROOT} && env -u COLUMNS -u LINES {env_prefix} {sys.executable} -m lineup {args}; "
               "echo EXITED $?; sleep 30")
    w, h = (str(n) for n in size)
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "lineup", "-x", w, "-y", h, command)
    tmux("resize-window", "-t", "lineup", "-x", w, "-y", h, check=False)
    return db


def ask(tmux: Tmux) -> str:
    tmux.wait_for("Enter sends to all")
    tmux.type_line(PROMPT)
    return tmux.wait_for("Which answer is best?")


def assert_footer_whole(screen: str) -> str:
    footer = screen.rstrip("\n").splitlines()[-1].rstrip()
    assert footer.split()[-1] in footer_words(), f"the footer ends mid-word: {footer!r}"
    assert "Quit" in footer, footer
    return footer


@pytest.mark.parametrize("n", [2, 4, 8])
def test_at_80x24_every_pane_and_every_vote_choice_is_on_screen(tmp_path, n):
    """Four models (and two, and eight) at 80x24. The
    tab strip names every pane, Alt+Right reaches the last, the vote bar shows
    every choice with tie and all bad, and x votes all bad."""
    tmux = Tmux(f"lineup-size-{n}-{os.getpid()}")
    args = "chat " + " ".join(f"-m {alias}" for alias in ALIASES[:n])
    db = start(tmux, tmp_path, args, (80, 24))
    try:
        screen = ask(tmux)
        def tab_strip(screen: str) -> str:      # one row, not a pane's border, marks every pane finished
            # ✓ done, or ✗ error: the demo's quirky style fails 5% of its answers on purpose
            return next((line for line in screen.splitlines()
                         if line.count("✓") + line.count("✗") == n and "╭" not in line), "")

        if n > 2:       # the tab strip follows the panes' status a moment later (longer on a loaded machine)
            for _ in range(300):
                screen = tmux.screen()
                if tab_strip(screen):
                    break
                time.sleep(0.1)
        lines = screen.splitlines()
        if n > 2:       # tabs: one row names them all
            tabs = tab_strip(screen)
            assert tabs, screen
            shown = [re.split("[✓✗]", t)[0].strip() for t in tabs.split("│")]
            assert len(shown) == n and len(set(shown)) == n, tabs
            for alias, tab in zip(ALIASES[:n], shown, strict=True):
                head, _, tail = tab.partition("…")
                assert head and alias.startswith(head) and alias.endswith(tail), tabs
        bad = "both bad" if n == 2 else "all bad"
        vote = "\n".join(lines[lines.index(next(line for line in lines if "Which answer is best?" in line)):][:2])
        assert "tie" in vote and bad in vote and f"{'abcdefgh'[n - 1]}" in vote, screen
        assert (n == 2) == ("rank…" not in vote)
        assert_footer_whole(screen)
        if n > 2:
            for _ in range(n - 1):
                tmux("send-keys", "-t", "lineup", "M-Right")
            last = ALIASES[n - 1]
            tmux.wait_for(f"│ {last}  done")                    # the last pane, shown with its header
        tmux("send-keys", "-t", "lineup", "F2")
        screen = tmux.wait_for("best t Tie")                # the vote bar has the keys now
        assert_footer_whole(screen)
        tmux("send-keys", "-t", "lineup", "x")
        tmux.wait_for("Vote saved")
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
    (vote,) = only_session(db).votes
    assert vote.choice == ("both_bad" if n == 2 else "all_bad")


def test_at_80x24_the_settings_show_every_column_and_keep_what_is_typed(tmp_path):
    tmux = Tmux(f"lineup-size-settings-{os.getpid()}")
    start(tmux, tmp_path, "chat " + " ".join(f"-m {alias}" for alias in ALIASES[:4]), (80, 24))
    try:
        tmux.wait_for("Enter sends to all")
        tmux("send-keys", "-t", "lineup", "C-s")
        tmux.wait_for("System prompt and parameters")
        time.sleep(0.5)                                                  # every row drawn
        screen = tmux.screen()
        heads = next(line for line in screen.splitlines() if "top_p" in line)
        for heading in ("temp", "top_p", "max tok", "seed", "effort", "extra{}"):
            assert heading in heads, heads
        for row in ("session", *ALIASES[:4]):
            line = next(line for line in screen.splitlines() if f"│ {row} " in line)
            cells = re.split(r"\s{2,}", line.split(f"│ {row} ")[-1].split("│")[0].strip())
            assert len(cells) == 6 and "default" in cells, line          # every field drawn
        tmux("send-keys", "-t", "lineup", "Tab")
        tmux("send-keys", "-t", "lineup", "-l", "0.5")
        screen = tmux.wait_for("session        0.5")                     # typed into the first field
        tmux("send-keys", "-t", "lineup", "C-s")
        tmux.wait_for("temperature 0.5")                                 # the session bar
        tmux.quit()
    finally:
        tmux("kill-server", check=False)


def test_at_160x45_code_folds_between_tokens_and_lines_end_on_whole_words(tmp_path):
    """Four panes side by side at 160x45 are 37 columns wide: the demo's
    `return [item for item in items if item]` folds before a whole token with
    a mark; the demo banner, the pane headers and the footer end whole."""
    tmux = Tmux(f"lineup-size-160-{os.getpid()}")
    start(tmux, tmp_path, "", (160, 45), config="")              # no config: the demo models and banner
    try:
        screen = ask(tmux)
        screen = tmux.wait_for("↪ ")                                     # the answers drawn: folded code
        assert not re.search(r"in item\s*│", screen), screen             # "items" cut mid-identifier
        assert not re.search(r"│\s*s if item\]", screen), screen
        for line in screen.splitlines():
            for cell in line.split("│"):
                assert not cell.rstrip().endswith("·"), line             # a header cut inside its figures
        assert_footer_whole(screen)
        assert "`lineup models`." in screen                               # the banner, whole
        tmux.quit()
    finally:
        tmux("kill-server", check=False)
