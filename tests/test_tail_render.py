"""tui.tail_render: the tail of a code block or a table, rendered flush after flush."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from rich.console import Console
from rich.style import Style
from rich.table import Table
from rich.text import Text

import tui.block_render as block_render
import tui.table_cells as table_cells
import tui.tail_render as tail_render
from tui.block_render import render_piece
from tui.tail_render import TailRender
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


def streamed_tails(text: str, seed: int, most: int = 6, kind: str = "md"):
    """Each tail a view shows while `text` arrives in pieces of 1 to `most` characters."""
    rng = random.Random(seed)
    splitter = BlockSplitter(kind)
    at = 0
    while at < len(text):
        step = rng.randint(1, most)
        splitter.feed(text[at:at + step])
        at += step
        splitter.take()
        piece = splitter.tail()
        if piece is not None:
            yield piece


def counted(counts: list[int], tails, width: int, gap: bool, tail: TailRender | None = None) -> tuple[int, int]:
    """What `counts` adds up to while `tails` render one after another by a
    TailRender, then each whole: (by the tail, whole)."""
    console = Console(width=120)
    tail = tail or TailRender()
    counts[:] = []
    for piece in tails:
        tail.render(console, piece, width, gap)
    by_tail, counts[:] = sum(counts), []
    for piece in tails:
        render_piece(console, piece, width, gap)
    return by_tail, sum(counts)


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
    tails = []
    for end in range(4, len(text) + 1, 4):   # the tail at each flush
        splitter = BlockSplitter("md")
        splitter.feed(text[:end])
        if (piece := splitter.tail()) is not None:
            tails.append(piece)
    by_tail, whole = counted(lexed, tails, 80, True)
    longest = max(len(line) for line in code.split("\n"))
    assert by_tail <= 2 * len(code) + len(tails) * (longest + 1)   # each line once, the one being written each flush
    assert by_tail * 10 < whole


def test_kept_lines_of_a_code_tail_stay_the_same_objects():
    console = Console(width=120)
    tail = TailRender()
    splitter = BlockSplitter("md")
    splitter.feed("```python\nx = 1\ny = 2\nz = ")
    first = tail.render(console, splitter.tail(), 40, True)
    splitter.feed("3 + x")
    second = tail.render(console, splitter.tail(), 40, True)
    # gap, top padding, "x = 1", "y = 2": kept; the line being written: new; the bottom padding,
    # drawn again alike: the same line (`lean_strip.drawn_line`)
    assert [a is b for a, b in zip(first, second, strict=True)] == [True] * 4 + [False, True]
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
    assert tail_render._may_continue(code) is open_


def test_other_tails_render_as_before():
    console = Console(width=120)
    tail = TailRender()
    for text in ("A paragraph\nthat goes on", "- a list\n- of two", "```python\nx = 1"):
        splitter = BlockSplitter("md")
        splitter.feed(text)
        piece = splitter.tail()
        assert tail.render(console, piece, 30, False) == render_piece(console, piece, 30, False)


CELLS = ["gpt-4o", "**bold** word", "`a | b`", "漢字 wide", "a b c d e f", "x" * 14, "", "right", r"a \| b",
         "[link](http://example.com)", "1.5", "*em*"]


def streamed_table(rng: random.Random) -> str:
    columns = rng.randint(1, 5)
    header = "| " + " | ".join(rng.choice(CELLS) or "h" for _ in range(columns)) + " |"
    delimiter = "|" + "|".join(rng.choice(["---", ":--", "--:", ":-:"]) for _ in range(columns)) + "|"
    rows = []
    for _ in range(rng.randint(1, 16)):
        cells = [rng.choice(CELLS) for _ in range(columns + rng.choice([0, 0, 0, -1, 1]))]
        rows.append(("| " if rng.random() < 0.9 else "") + " | ".join(cells) + (" |" if rng.random() < 0.9 else ""))
    before = rng.choice(["", "", "Here is the table:\n"])
    return before + "\n".join([header, delimiter, *rows]) + "\n\nAfter it.\n"


@pytest.mark.parametrize("seed", [0, 1, 2, pytest.param(3, marks=pytest.mark.slow),
                                  pytest.param(4, marks=pytest.mark.slow), pytest.param(5, marks=pytest.mark.slow)])
def test_a_table_tail_renders_as_the_whole_tail_does_after_every_flush(seed):
    """Random tables (1-5 columns, aligned, inline Markdown, wide characters,
    escaped pipes, rows short or long of a cell, wider than the pane or not),
    a few characters a flush: each flush's lines are the whole tail's."""
    rng = random.Random(seed)
    console = Console(width=120)
    style = Style(color="white") if seed % 2 else None
    tail = TailRender()
    checked = 0
    for _ in range(5):
        width = rng.choice([20, 40, 78, 120])
        for piece in streamed_tails(streamed_table(rng), seed=seed, most=12):
            assert tail.render(console, piece, width, seed % 3 == 0, style) == \
                render_piece(console, piece, width, seed % 3 == 0, style), (width, piece.text)
            checked += 1
    assert checked > 100


@pytest.fixture
def drawn(monkeypatch) -> list[int]:
    """The number of rows of each rich Table drawn while a test runs, and a
    1 for each row painted without one (`_RowPainter`)."""
    counts: list[int] = []
    draw = Table.__rich_console__
    paint = tail_render._RowPainter.line

    def counting(self, console, options):
        counts.append(len(self.rows))
        return draw(self, console, options)

    def painting(self, cells, ranges):
        counts.append(1)
        return paint(self, cells, ranges)

    monkeypatch.setattr(Table, "__rich_console__", counting)
    monkeypatch.setattr(tail_render._RowPainter, "line", painting)
    return counts


def test_a_table_tail_draws_the_new_rows_not_the_whole_table_at_each_flush(drawn):
    """40 rows arriving a few characters a flush: drawing the whole table
    each time draws ~40 times the rows; kept rows are drawn again only when
    a column's width changes."""
    rows = "\n".join(f"| model-{k % 7} | {100 + k} | fine, {'quick ' * (k % 3)}and sure |" for k in range(40))
    text = "| model | score | note |\n|---|--:|---|\n" + rows
    by_tail, whole = counted(drawn, list(streamed_tails(text, seed=1, most=12)), 78, True)
    assert by_tail * 4 < whole   # 286 against 5,035 rows when written


def test_rows_that_fit_a_line_each_are_painted_without_a_rich_table(monkeypatch):
    """Rich's Table is left for the header and for rows that wrap: a table
    whose rows fit a line each streams with none of its rows drawn by one,
    and every flush is still the whole tail's lines."""
    rich_rows: list[int] = []
    draw = Table.__rich_console__

    def counting(self, console, options):
        rich_rows.append(len(self.rows))
        return draw(self, console, options)

    monkeypatch.setattr(Table, "__rich_console__", counting)
    rows = "\n".join(f"| model-{k % 7} | **{100 + k}** | `fine` 漢字 |" for k in range(30))
    console = Console(width=120)
    tail = TailRender()
    for piece in streamed_tails("| model | score | note |\n|---|--:|:-:|\n" + rows, seed=3, most=12):
        rich_rows[:] = []
        assert tail.render(console, piece, 78, True) == render_piece(console, piece, 78, True)
        if tail._table is not None:
            assert sum(rich_rows[:-1]) == 0, piece.text   # (the last: the whole render's)


def test_a_tail_found_not_to_be_a_table_does_not_stop_the_next_table_with_its_header_being_kept(drawn):
    """Answers repeat their table headers: a tail that was no table under a
    header (a table followed by a list item, before the split) leaves the
    next table under the same header kept row by row, not drawn whole."""
    head = "| model | score |\n|---|--:|\n"
    console = Console(width=120)
    tail = TailRender()
    not_one = BlockSplitter("md")
    not_one.feed(head + "| a | 1 |\n| b | 2 |\n| c | 3 |\n- x")
    piece = not_one.tail()
    assert piece is not None and piece.text.endswith("- x")
    assert tail.render(console, piece, 78, False) == render_piece(console, piece, 78, False)
    tails = list(streamed_tails(head + "\n".join(f"| model-{k % 7} | {100 + k} |" for k in range(30)), seed=2))
    by_tail, whole = counted(drawn, tails, 78, False, tail)
    assert by_tail * 4 < whole


def test_a_row_being_begun_leaves_the_rows_before_it_kept(drawn):
    """A flush often ends just after a new row's first pipe: that row is
    blank (and trimmed, as the whole table's last line is), and the rows
    before it are not drawn again, nor when its cells come."""
    console = Console(width=120)
    tail = TailRender()
    text = "| model | score |\n|---|--:|\n| model-0 | 100 |"
    splitter = BlockSplitter("md")
    splitter.feed(text)
    for k in range(1, 30):
        for more in ("\n| ", f"model-{k % 7} | {100 + k} |"):
            splitter.feed(more)
            splitter.take()
            piece = splitter.tail()
            assert piece is not None
            drawn[:] = []
            assert tail.render(console, piece, 78, False) == render_piece(console, piece, 78, False)
            if k > 2:   # (from three rows on: fewer are drawn whole)
                assert sum(drawn[:-1]) <= 1, (k, more, drawn)   # by the tail: the new row alone


#: Pieces of rows: plain text, what trims or splits a cell, and what an inline rule acts on.
ROW_BITS = ["a", "Zeta", "gpt-4o", "漢字", "é", "1.5", " ", "   ", "|", "||", "-", ":", "#", "+", "=", ">", "%",
            "'", '"', "(x)", "\u3000", "\xa0", "\t", "\x0b", "\x1c", "\x1b[31m", "*", "_", "`", "\\", "\\|",
            "&amp;", "<b>", "[x]", "~~", "!", "http://x.y"]


def described(rows: list[list[Text]]) -> list[list[tuple]]:
    return [[(c.plain, c.spans, c.style, c.justify, c.overflow, c.no_wrap, c.end, c.tab_size) for c in row]
            for row in rows]


@pytest.mark.parametrize("seed", [0, 1])
def test_rows_of_plain_text_are_read_into_the_cells_rich_reads(seed):
    """The table tail reads a plain row's cells without the parser
    (`row_cells`): for random rows of plain text, of white characters
    other than the space, of pipes and of inline Markdown, under headers
    of 1-5 aligned columns, its cells are rich's, and most plain rows take
    that path."""
    rng = random.Random(seed)
    console = Console(width=120)
    plain = 0
    for _ in range(600):
        columns = rng.randint(1, 5)
        head = ("| " + " | ".join(rng.choice(["model", "score", "note", "漢字"]) for _ in range(columns)) + " |\n|"
                + "|".join(rng.choice(["---", ":--", "--:", ":-:"]) for _ in range(columns)) + "|")
        header = table_cells.table_cells(console, head)[0]
        row = rng.choice(["|", "| ", "", " |"]) + "".join(rng.choices(ROW_BITS[:rng.choice([20, 26, 36])],
                                                                     k=rng.randint(0, 12)))
        parsed = table_cells.table_cells(console, head + "\n" + row)
        read = table_cells.row_cells(console, head, [row], header)
        assert (None if read is None else described(read)) == \
            (None if parsed is None or len(parsed[1]) != 1 else described(parsed[1])), (head, row)
        plain += bool(table_cells._PLAIN_ROW.fullmatch(row) and row.isprintable())
    assert plain > 100


WORDS = ["so", "the", "answer", "is", "ab" * 9, "漢字", "wait,", "  ", "x" * 45, "reconsider", "\n", "é"]


def streamed_reasoning(rng: random.Random, words: int) -> str:
    """Reasoning as models write it: long runs of words, some wide, some
    longer than a line, odd spaces, a line break here and there."""
    return " ".join(rng.choice(WORDS) for _ in range(words)).replace("\n ", "\n") + "\n\nNext thought.\n"


@pytest.mark.parametrize("seed", [0, 1, 2, pytest.param(3, marks=pytest.mark.slow)])
def test_a_reasoning_tail_renders_as_the_whole_tail_does_after_every_flush(seed):
    """Long reasoning paragraphs a few characters a flush, at widths from
    one that folds most words to a wide pane: each flush's lines are the
    whole tail's, and lines are kept from one flush to the next."""
    rng = random.Random(seed)
    style = Style(color="white") if seed % 2 else None
    tail = TailRender()
    counts = [wrapped_as_whole(tail, [replace(piece, first=first) for piece in streamed_tails(
                  streamed_reasoning(rng, 160), seed=seed, most=9, kind="reasoning")], width, seed % 3 == 0, style)
              for first in (True, False) for width in (12, 40, 100)]
    checked, kept = sum(c for c, _ in counts), sum(k for _, k in counts)
    assert checked > 300 and kept > checked // 2


def wrapped_as_whole(tail: TailRender, pieces, width: int, gap: bool, style: Style | None) -> tuple[int, int]:
    """Each piece rendered by `tail`, its lines asserted to be the whole
    render's: (how many, of which how many kept their first line's Strip
    from the flush before)."""
    console = Console(width=120)
    checked = kept = 0
    for piece in pieces:
        before = tail._prose.lines[0] if tail._prose is not None and tail._prose.lines else None
        assert tail.render(console, piece, width, gap, style) == render_piece(console, piece, width, gap, style), \
            (width, piece.text)
        kept += before is not None and tail._prose is not None and tail._prose.lines[0] is before
        checked += 1
    return checked, kept


def test_a_reasoning_tail_wraps_its_last_lines_not_the_whole_paragraph(monkeypatch):
    """A 600-word paragraph, a few characters a flush: the characters
    wrapped into lines per flush (by rich, or by `tui.text_lines` for the
    lines `block_render` draws) stay a few lines' worth instead of growing
    with it."""
    wrapped: list[int] = []
    wrap, draw = Text.wrap, block_render.text_lines

    def counting(self, *args, **kwargs):
        wrapped.append(len(self.plain))
        return wrap(self, *args, **kwargs)

    def counting_lines(console, options, text):
        wrapped.append(len(text.plain))
        return draw(console, options, text)

    monkeypatch.setattr(Text, "wrap", counting)
    monkeypatch.setattr(block_render, "text_lines", counting_lines)
    text = " ".join(random.Random(4).choice(["so", "the", "answer", "is", "reconsider"]) for _ in range(600))
    by_tail, whole = counted(wrapped, list(streamed_tails(text, seed=4, kind="reasoning")), 78, True)
    assert by_tail * 8 < whole   # 81k characters against 836k when written


INLINE = ["plain", "words", "**bold words**", "*em*", "`code`", "**open", "close**", "[a link](http://x.y)",
          r"\*escaped", "漢字", "y" * 30, "&amp;", "_under_", "~~gone~~", "end.  \n", "\n", "<b>", "a*b*c"]


def streamed_paragraph(rng: random.Random, words: int) -> str:
    """One Markdown paragraph of prose: inline markup opened and closed
    later (or never), links, escapes, wide characters, a long word, soft
    and hard line breaks; some paragraphs plain until a late `code`."""
    pool = ["plain", "words", "so", "it", "is"] if rng.random() < 0.3 else INLINE
    body = " ".join(rng.choice(pool) for _ in range(words)).replace("\n ", "\n")
    return body + (" then `late`" if pool is not INLINE else "") + "\n\nAfter it.\n"


@pytest.mark.parametrize("seed", [0, 1, 2, pytest.param(3, marks=pytest.mark.slow),
                                  pytest.param(4, marks=pytest.mark.slow)])
def test_a_paragraph_tail_renders_as_the_whole_tail_does_after_every_flush(seed):
    """Markdown paragraphs a few characters a flush: each flush's lines are
    the whole tail's (a closing `**` restyling what came before, a first
    span in a paragraph that had none), and lines are kept between flushes."""
    rng = random.Random(seed)
    style = Style(color="white") if seed % 2 else None
    tail = TailRender()
    counts = [wrapped_as_whole(tail, list(streamed_tails(streamed_paragraph(rng, 90), seed=seed, most=9)), width,
                               seed % 3 == 0, style) for width in (16, 40, 100) for _ in range(2)]
    checked, kept = sum(c for c, _ in counts), sum(k for _, k in counts)
    assert checked > 200 and kept > checked // 3
