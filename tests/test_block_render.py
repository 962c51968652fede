"""tui.block_render: the tail of a code block streamed flush after flush."""

from __future__ import annotations

import random

import pytest
from rich.console import Console
from rich.style import Style

import tui.block_render as block_render
from tui.block_render import TailRender, render_piece
from tui.markdown_blocks import BlockSplitter

PYTHON = [
    "def total(items: list[int]) -> int:",
    '    """Sum of the even items,',
    "    for if in while: words inside a docstring.",
    '    """',
    "    total = 0  # a comment with ''' and \"\"\" quotes",
    "    for item in items:",
    "",
    "        if item % 2 == 0:",
    "            total += item * 3",
    "    text = '" + "wide 漢字 " * 9 + "'",
    "    /* not C */ x = `y`",
    "    return total \\",
    "        + 1",
    "\tprint(total([1, 2, 3]))",
]


def streamed_tails(text: str, seed: int):
    """Each tail a view shows while `text` arrives in pieces of 1 to 6 characters."""
    rng = random.Random(seed)
    splitter = BlockSplitter("md")
    at = 0
    while at < len(text):
        step = rng.randint(1, 6)
        splitter.feed(text[at:at + step])
        at += step
        splitter.take()
        piece = splitter.tail()
        if piece is not None:
            yield piece


@pytest.mark.parametrize("width", [12, 40, 100])
def test_a_code_tail_renders_as_the_whole_tail_does_after_every_flush(width):
    console = Console(width=120)
    style = Style(color="white")
    rng = random.Random(width)
    lines = ["```python"] + [rng.choice(PYTHON) for _ in range(60)] + ["```", ""]
    tail = TailRender()
    checked = 0
    for piece in streamed_tails("\n".join(lines), seed=width):
        assert tail.render(console, piece, width, True, style) == render_piece(console, piece, width, True, style)
        checked += 1
    assert checked > 100


def test_a_code_tail_lexes_each_line_about_once_not_once_per_flush(monkeypatch):
    """23 lines of code, four characters a flush: lexing the whole tail each
    time lexes ~130 times the text; with its complete lines kept, each line
    is lexed once more after its newline, and the line being written at
    each flush."""
    lexed: list[int] = []
    lexer = block_render._lexer("python")

    class Counting:
        def get_tokens(self, code):
            lexed.append(len(code))
            return lexer.get_tokens(code)

    monkeypatch.setattr(block_render, "_lexer", lambda lang: Counting())
    code = "\n".join(f"    value_{k} = compute(value_{k - 1}, {k})  # step {k}" for k in range(23))
    text = "```python\n" + code + "\n"
    console = Console(width=120)
    tails = []
    for end in range(4, len(text) + 1, 4):   # the tail at each flush
        splitter = BlockSplitter("md")
        splitter.feed(text[:end])
        if (piece := splitter.tail()) is not None:
            tails.append(piece)
    tail = TailRender()
    for piece in tails:
        tail.render(console, piece, 80, True)
    by_tail, lexed[:] = sum(lexed), []
    for piece in tails:
        render_piece(console, piece, 80, True)
    longest = max(len(line) for line in code.split("\n"))
    assert by_tail <= 2 * len(code) + len(tails) * (longest + 1)   # each line once, the one being written each flush
    assert by_tail * 10 < sum(lexed)


def test_kept_lines_of_a_code_tail_stay_the_same_objects():
    console = Console(width=120)
    tail = TailRender()
    splitter = BlockSplitter("md")
    splitter.feed("```python\nx = 1\ny = 2\nz = ")
    first = tail.render(console, splitter.tail(), 40, True)
    splitter.feed("3 + x")
    second = tail.render(console, splitter.tail(), 40, True)
    # gap, top padding, "x = 1", "y = 2": kept; the line being written and the bottom padding: new
    assert [a is b for a, b in zip(first, second, strict=True)] == [True] * 4 + [False] * 2
    assert second[-2].text.strip() == "z = 3 + x"


def test_inside_an_open_docstring_the_tail_is_lexed_whole():
    """New lines lexed on their own would start outside the string: while
    the complete lines leave one open, the tail is rendered whole."""
    console = Console(width=120)
    tail = TailRender()
    splitter = BlockSplitter("md")
    splitter.feed('```python\ndef f():\n    """Docs\n    for if in while\n    and ')
    piece = splitter.tail()
    assert tail.render(console, piece, 60, True) == render_piece(console, piece, 60, True)
    splitter.feed('more"""\n    return 1\n')
    piece = splitter.tail()
    assert tail.render(console, piece, 60, True) == render_piece(console, piece, 60, True)


@pytest.mark.parametrize("code, open_", [
    ('x = """doc', True), ('x = """doc"""\n', False), ("/* a */ b /* c", True), ("/* a */ b", False),
    ("s = `a", True), ("s = `a`", False), ("x = 1 + \\\n", True), ("'''", True), ("x = 1\n", False),
    ("*/ closes one the chunk before opened /* opens", True),
])
def test_may_continue_finds_constructs_left_open_in_order(code, open_):
    assert block_render._may_continue(code) is open_


def test_other_tails_render_as_before():
    console = Console(width=120)
    tail = TailRender()
    for text in ("A paragraph\nthat goes on", "- a list\n- of two", "```python\nx = 1"):
        splitter = BlockSplitter("md")
        splitter.feed(text)
        piece = splitter.tail()
        assert tail.render(console, piece, 30, False) == render_piece(console, piece, 30, False)
