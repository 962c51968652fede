"""core.ground.text: the one place untrusted text is made inert (screen and file forms)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from core.ground.text import (
    csv_cell,
    escape_controls,
    html_text,
    json_line,
    markdown_inline,
    neutralise,
    one_line,
    server_text,
    shows_as_is_on_one_line,
)

REPO = Path(__file__).resolve().parents[1]
# What a terminal acts on: C0 but tab/newline, DEL, C1, bidi controls, lone surrogates.
ACTS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
HOSTILE = "ansi \x1b[31mred\x1b]0;title\x07 c1 \x9b2J bidi \u202egnp.exe lone \ud800 nul \x00 sep\u2028x\tend\r\n"


def test_a_server_field_is_scrubbed_then_escaped_then_bounded():
    from providers.secrets import scrubber_for

    scrub = scrubber_for(("sk-abcdefghijklmnop", "hdr-0123456789")).scrub
    # a key wrapped over a line, a neighbour's secret header value, an OSC 52 write, a huge tail
    value = server_text("m-sk-abcdef\nghijklmnop\x1b]52;c;aGk=\x07 hdr-0123456789" + "y" * 100_000, scrub)
    assert value.startswith("m-[redacted]\\x1b]52;c;aGk=\\x07 [redacted]yyy")
    assert len(value) == 200 and value.endswith("…") and ACTS.search(value) is None
    assert server_text(HOSTILE, None, 10_000) == escape_controls(HOSTILE, keep_newlines=False)
    assert server_text("gpt-4o-2024-08-06", scrub) == "gpt-4o-2024-08-06"   # a plain value stays as it came


def test_screen_forms_show_every_control_as_a_stand_in():
    shown = neutralise(HOSTILE)
    assert not ACTS.search(shown)
    assert "␛[31mred␛]0;title␇" in shown and "\t" in shown and "\n" in shown and "\u2028" not in shown
    line = one_line(HOSTILE)
    assert not ACTS.search(line) and "\n" not in line and "\t" not in line
    assert one_line("a\tb", tab_width=4) == "a    b"
    assert one_line("x" * 10, limit=5) == "xxxx…"
    assert shows_as_is_on_one_line("plain words") and not shows_as_is_on_one_line("a\nb")


def test_file_forms_escape_controls_readably():
    esc = escape_controls(HOSTILE)
    assert not ACTS.search(esc)
    assert "\\x1b[31mred" in esc and "\\x9b2J" in esc and "\\u202e" in esc and "\\ud800" in esc
    assert "\n" in esc and "\\x0a" in escape_controls("a\nb", keep_newlines=False)
    md = markdown_inline("| **x** <b>\n")
    assert "|" not in md.replace("\\|", "") and "<b>" not in md and "\n" not in md
    assert html_text('<script>"x"</script>\x1b') == "&lt;script&gt;&quot;x&quot;&lt;/script&gt;\\x1b"
    assert csv_cell("=HYPERLINK(1)") == "'=HYPERLINK(1)" and csv_cell(3) == 3
    assert "\u202e" not in json_line({"a": "\u202e\x85"}) and "\\u202e" in json_line({"a": "\u202e"})


@given(st.text())
def test_no_form_lets_a_terminal_control_through(text):
    for out in (neutralise(text), one_line(text), escape_controls(text), markdown_inline(text), html_text(text),
                json_line(text)):
        assert not ACTS.search(out), (text, out)
    out.encode("utf-8")  # no lone surrogate survives either


def test_no_module_keeps_a_neutraliser_of_its_own():
    """One owner: control characters are matched or translated only in core/ground/text.py."""
    found = subprocess.run(
        ["git", "grep", "-nE", r"x00-\\x1f|x00-\\x08|0x2400|:02x\}|unicodedata\.category\(ch\)|isprintable\(\) else",
         "--", "*.py", ":!tests/*", ":!core/ground/text.py"],
        cwd=REPO, capture_output=True, text=True)
    assert found.returncode == 1, found.stdout
