"""docs/cli.md is the parsers' own help: it cannot drift from the commands."""

from pathlib import Path

from lineup.cli_reference import render

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def test_the_command_reference_is_up_to_date():
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/cli.md is out of date: run `python -m lineup.cli_reference > docs/cli.md`")


def test_the_reference_covers_every_command_and_option():
    page = PAGE.read_text(encoding="utf-8")
    for heading in ("## lineup run", "## lineup vote", "## lineup decide"):
        assert heading in page
    assert "--repeat" in page and "--include-demo" in page
