"""The command reference (docs/cli.md), written from the parsers' own help.

`python -m lineup.cli_reference > docs/cli.md` regenerates it;
tests/test_cli_reference.py fails when the page and the parsers disagree."""

from __future__ import annotations

import argparse

from lineup.cli import COMMANDS, build_parser

WIDTH = 88   # fixed, so the page does not depend on the terminal it was made in


def render() -> str:
    parser = build_parser(width=WIDTH)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = ["# Command reference", "",
             "Generated from the parsers' `--help` by `python -m lineup.cli_reference > docs/cli.md`;",
             "a test fails when this page is out of date.", "",
             "```", parser.format_help().rstrip(), "```", ""]
    for name in COMMANDS:
        parts += [f"## lineup {name}", "", "```", sub.choices[name].format_help().rstrip(), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    print(render(), end="")
