"""tui.text_lines draws wrapped text as rich does: the same lines, segment
for segment, on random texts, spans, styles and widths, and the same
Markdown paragraphs and list items; text it cannot vouch for is left to rich."""

from __future__ import annotations

import random

import pytest
from rich._wrap import divide_line
from rich.console import Console
from rich.markdown import Paragraph
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text

from tui.block_render import _NO_LINK_ELEMENTS, _BlockMarkdown, _lines
from tui.text_lines import breaks, line_breaks, one_cell, text_lines

PIECES = ["a", "to", "word", "answer", "x" * 9, "y" * 23, " ", " ", "  ", "   ", "\u00a0", "\u2014", "\u2019",
          "\u2026", "\u00e9t\u00e9", "\u0416\u0443\u043a", "\u2500\u2500", "-", ".", ","]
STYLES: list[str | Style] = [Style(bold=True), Style(italic=True), Style(color="red"), Style(bgcolor="blue"),
                             Style(bold=True, color="green"), "bold", "markdown.code", "not a style", Style.null(),
                             "none"]
BASES: list[str | Style] = ["", "dim", Style(italic=True, dim=True), Style.null(), "none", Style(bgcolor="black")]


def random_text(rng: random.Random) -> Text:
    plain = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))
    spans = []
    for _ in range(rng.randint(0, 5)):
        start = rng.randint(0, len(plain))
        spans.append(Span(start, rng.randint(start, len(plain)), rng.choice(STYLES)))
    return Text(plain, style=rng.choice(BASES), spans=spans, justify=rng.choice([None, "left", "default"]),
                overflow=rng.choice([None, "fold"]))


def rich_lines(console: Console, text: Text, width: int) -> list[list[Segment]]:
    options = console.options.update(width=width, height=None, no_wrap=False)
    return list(Segment.split_lines(console.render(text, options)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_texts_are_drawn_segment_for_segment_as_rich_draws_them(seed):
    rng = random.Random(seed)
    console = Console(width=120, color_system="truecolor", force_terminal=True)
    drawn = 0
    for _ in range(3000):
        text, width = random_text(rng), rng.randint(1, 30)
        options = console.options.update(width=width, height=None, no_wrap=False)
        got = text_lines(console, options, text.copy())
        if got is None:
            assert not text.plain or not one_cell(text.plain), repr(text)
            continue
        drawn += 1
        assert got == rich_lines(console, text, width), (width, repr(text), text.spans)
    assert drawn > 2000


def test_text_it_cannot_vouch_for_is_left_to_rich():
    console = Console(width=80)
    options = console.options.update(width=20)
    for text in (Text("two\nlines"), Text("a\ttab"), Text("wide \u6f22\u5b57"), Text("zero\u200bwidth"),
                 Text("right", justify="right"), Text("centred", justify="center"), Text("crop", overflow="crop"),
                 Text("no wrap", no_wrap=True), Text("end", end=""), Text("")):
        assert text_lines(console, options, text) is None, repr(text)
    assert text_lines(console, options.update(no_wrap=True), Text("no wrap")) is None
    assert text_lines(console, options, Text("plain words")) is not None


def test_line_breaks_are_richs():
    rng = random.Random(5)
    checked = 0
    for _ in range(20000):
        plain = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 20)))
        width = rng.randint(1, 15)
        wide = plain + "\u6f22\u5b57 " + plain   # (two cells each: rich's own breaks)
        assert line_breaks(wide, width) == divide_line(wide, width, fold=True), (wide, width)
        assert line_breaks(plain, width) == divide_line(plain, width, fold=True), (plain, width)
        if one_cell(plain):
            checked += 1
            assert breaks(plain, width) == divide_line(plain, width, fold=True), (plain, width)
    assert checked > 15000


class _RichParagraphs(_BlockMarkdown):
    """The same Markdown, its paragraphs drawn by rich's own Paragraph."""

    elements = {**_NO_LINK_ELEMENTS, "paragraph_open": Paragraph}


INLINE = ["plain", "words", "**bold words**", "*em*", "`code`", "**open", "close**", "[a link](http://x.y)",
          r"\*escaped", "&amp;", "_under_", "~~gone~~", "\u2014", "it\u2019s", "y" * 30, "a*b*c", "<b>"]


@pytest.mark.parametrize("seed", [0, 1])
def test_markdown_paragraphs_and_list_items_are_drawn_as_richs(seed):
    rng = random.Random(seed)
    console = Console(width=120, color_system="truecolor", force_terminal=True)
    for _ in range(400):
        words = [" ".join(rng.choice(INLINE) for _ in range(rng.randint(1, 25))) for _ in range(rng.randint(1, 4))]
        shape = rng.choice(["paragraph", "bullets", "numbers", "quote", "two paragraphs"])
        if shape == "bullets":
            markup = "\n".join(f"- {w}" for w in words)
        elif shape == "numbers":
            markup = "\n".join(f"{k + 1}. {w}" for k, w in enumerate(words))
        elif shape == "quote":
            markup = "> " + "\n> ".join(words)
        elif shape == "two paragraphs":
            markup = "\n\n".join(words)
        else:
            markup = "\n".join(words)
        width = rng.randint(4, 60)
        assert _lines(console, _BlockMarkdown(markup), width) == _lines(console, _RichParagraphs(markup), width), \
            (width, markup)
