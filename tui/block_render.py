"""Rendering one Markdown block (a `Piece`) into cached lines (Strips).

Why this module exists: the stream view renders each finished block once, at
the pane width, and keeps the lines; this module is that rendering, apart
from the widget's scrolling and scheduling. Markdown goes through rich's
Markdown (one shared parser, hyperlinks off, raw HTML shown as text), fenced
code straight from pygments tokens to segments (rich's Syntax with wrapping
costs ~0.5 ms a line), user prompts, reasoning and notes as plain rich Text.

Model output is untrusted: it reaches here neutralised (`core.ground.text`), is
never parsed as Rich/Textual markup, and every rendered line goes through
`_clean`, the last line of defence (no control segments, control characters
or links leave this module).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt
from pygments.token import Token as PygmentsToken
from rich.cells import cell_len, get_character_cell_size
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Markdown, MarkdownContext, MarkdownElement, Paragraph
from rich.segment import Segment
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text, TextType
from textual.strip import Strip

from tui.markdown_blocks import Piece
from core.ground.text import one_line, shows_as_is_on_one_line
from tui.lean_strip import blank_line, drawn_line
from tui.text_lines import text_lines

if TYPE_CHECKING:
    from markdown_it.token import Token
    from pygments.lexer import Lexer
    from pygments.token import _TokenType
    from rich.console import RenderableType

__all__ = ["CODE_THEME", "estimate_height", "prose", "render_piece", "strips_of"]

CODE_THEME = "monokai"
_NO_LINK_ELEMENTS = dict(Markdown.elements)


class _HtmlBlock(MarkdownElement):
    """Raw HTML in an answer is shown as the text it is (rich drops it)."""

    new_line = True

    @classmethod
    def create(cls, markdown: Markdown, token: Token) -> _HtmlBlock:
        return cls()

    def __init__(self) -> None:
        self.text = ""

    def on_text(self, context: MarkdownContext, text: TextType) -> None:
        self.text += str(text)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(self.text.rstrip("\n"))


class _Paragraph(Paragraph):
    """A paragraph's lines straight from its text (`tui.text_lines`): what
    rich's Paragraph draws, its text wrapped at ~40% of rich's cost, in
    answers, list items and quotes alike; text it cannot vouch for is drawn
    by rich."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        self.text.justify = self.justify
        lines = text_lines(console, options, self.text)
        if lines is None:
            yield self.text
            return
        end = Segment.line()
        for line in lines:
            yield from line
            yield end


_NO_LINK_ELEMENTS["html_block"] = _HtmlBlock
_NO_LINK_ELEMENTS["paragraph_open"] = _Paragraph


class _BlockMarkdown(Markdown):
    """rich Markdown with one shared parser, hyperlinks off, raw HTML shown."""

    elements = _NO_LINK_ELEMENTS
    _parser: MarkdownIt | None = None

    def __init__(self, markup: str, style: str | Style = "none", parsed: list[Token] | None = None) -> None:
        """`parsed`: `markup`'s tokens, when another _BlockMarkdown parsed it."""
        parser = _BlockMarkdown._parser
        if parser is None:
            parser = _BlockMarkdown._parser = MarkdownIt().enable("strikethrough").enable("table")
        self.markup = markup
        self.parsed = parser.parse(markup) if parsed is None else parsed
        self.code_theme = CODE_THEME
        self.justify = None
        self.style = style
        self.hyperlinks = False
        self.inline_code_lexer = None
        self.inline_code_theme = CODE_THEME


_USER_BAR = Segment("\u258c ", Style(color="cyan", bold=True))
_REASONING_BAR = Segment("\u2502 ", Style(dim=True))
_REASONING_HEAD = Text("reasoning", style="dim italic")
_USER_STYLE = Style(bold=True)
_REASONING_STYLE = Style(dim=True, italic=True)
_NOTE_STYLE = Style(italic=True, color="yellow")
_TOOL_BAR = Segment("\u2699 ", Style(color="magenta", bold=True))
_TOOL_STYLE = Style(color="magenta")
_CODE_THEME = Syntax.get_theme(CODE_THEME)
_CODE_BG = _CODE_THEME.get_background_style()
_CODE_BASE = Syntax("", "text", theme=CODE_THEME)._get_base_style()
_LEXERS: dict[str, Lexer] = {}
_TOKEN_STYLES: dict[object, Style] = {}


def _lexer(lang: str) -> Lexer:
    """A pygments lexer per language name, built once (a lookup costs ~1 ms)."""
    lexer = _LEXERS.get(lang)
    if lexer is None:
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound

        options = {"stripnl": False, "ensurenl": True, "tabsize": 4}
        try:
            lexer = get_lexer_by_name(lang or "text", **options)
        except ClassNotFound:
            lexer = get_lexer_by_name("text", **options)
        if len(_LEXERS) < 256:  # names come from model output: bound the cache
            _LEXERS[lang] = lexer
    return lexer


def _fit(text: str, room: int) -> tuple[str, str]:
    """Split text after as many characters as fit in `room` cells."""
    used = 0
    for index, char in enumerate(text):
        size = get_character_cell_size(char)
        if used + size > room:
            return text[:index], text[index:]
        used += size
    return text, ""


_CONTINUED = "\u21aa "          # starts a code line folded from the one above: "↪ "
_CONTINUED_STYLE = _CODE_BASE + Style(dim=True)
_WORDS = re.compile(r"\s+|\S+")


def _code_lines(code: str, lang: str, width: int, first: bool, last: bool) -> list[list[Segment]]:
    """Highlighted code as padded lines (the look of rich's code blocks).

    A line too long for the pane folds between tokens (or between words of a
    string or comment), never inside one that fits on a line of its own, and
    the folded rest starts with a dim "↪ ", so it never reads as a new line
    of broken code. Only a token longer than a whole line is cut inside.

    Straight from pygments tokens to segments: rich's Syntax with word_wrap
    renders each line through Text and costs ~0.5 ms a line.
    """
    inner = max(1, width - 2)
    mark = _CONTINUED if inner >= 12 else ""
    mark_size = len(mark)
    pad = Segment(" ", _CODE_BG)
    blank = [Segment(" " * width, _CODE_BG)]
    out: list[list[Segment]] = [blank] if first else []
    styles = _TOKEN_STYLES
    get_style = _CODE_THEME.get_style_for_token
    line: list[Segment] = []
    col = 0
    start = 0            # where this row's code starts: after the mark on a folded row
    folded = False       # the next text continues a folded line: the mark goes first

    def end_line() -> None:
        nonlocal line, col, start
        if col < inner:
            line.append(Segment(" " * (inner - col), _CODE_BASE))
        out.append([pad, *line, pad])
        line = []
        col = start = 0

    def fold() -> None:
        nonlocal folded
        end_line()
        folded = True

    def put(text: str, style: Style, size: int) -> None:
        nonlocal col, start, folded
        if folded:
            line.append(Segment(mark, _CONTINUED_STYLE))
            col = start = mark_size
            folded = False
        line.append(Segment(text, style))
        col += size

    tokens: Iterable[tuple[_TokenType, str]]
    if code:
        tokens = _lexer(lang).get_tokens(code)
    else:  # an empty fence shows one empty row; a closing-only chunk just the bottom pad
        tokens = [(PygmentsToken.Text, "\n")] if first else []
    for token_type, value in tokens:
        style = styles.get(token_type)
        if style is None:
            style = styles[token_type] = _CODE_BASE + get_style(token_type)
        for k, part in enumerate(value.split("\n")):
            if k:
                if folded:       # a fold right before a line's end shows no empty row
                    folded = False
                else:
                    end_line()
            if not part:
                continue
            size = len(part) if part.isascii() else cell_len(part)
            here = mark_size if folded else col
            if here + size <= inner:
                put(part, style, size)
                continue
            for word in _WORDS.findall(part):     # too long here: fold between words
                size = len(word) if word.isascii() else cell_len(word)
                here = mark_size if folded else col
                if here + size <= inner:
                    put(word, style, size)
                    continue
                if word.isspace():               # spaces at a fold are dropped
                    if not folded:
                        fold()
                    continue
                if not folded and col > start and mark_size + size <= inner:
                    fold()                       # the word fits on the next row whole
                    put(word, style, size)
                    continue
                while word:                      # longer than a row: cut it
                    if folded:
                        put("", style, 0)
                    room = inner - col
                    head, word = _fit(word, room)
                    if not head and col == start:  # wider than the whole row: show a stand-in
                        head, word = "\ufffd", word[1:]
                    if head:
                        put(head, style, cell_len(head))
                    if word:
                        fold()
    if line:
        end_line()
    if last:
        out.append(blank)
    return out


def _clean(line: list[Segment]) -> list[Segment]:
    """Last line of defence: no control segments, characters or links leave here."""
    for segment in line:
        style = segment.style
        if segment.control or (style is not None and style._link):
            break
    else:
        if shows_as_is_on_one_line("".join([segment.text for segment in line])):
            return line
    out = []
    for text, style, control in line:
        if control:
            continue
        text = one_line(text, tab_width=4)
        if style is not None and style._link:
            style = style.update_link(None)
        out.append(Segment(text, style))
    return out


def _is_blank(line: list[Segment]) -> bool:
    return all(not seg.text.strip() and (seg.style is None or seg.style.bgcolor is None)
               for seg in line)


def _lines(console: Console, renderable: RenderableType, width: int, trim: bool = True) -> list[list[Segment]]:
    options = console.options.update(width=max(1, width), height=None, highlight=False,
                                     markup=False, no_wrap=False)
    found = text_lines(console, options, renderable) if isinstance(renderable, Text) else None
    lines = found if found is not None else Segment.split_lines(console.render(renderable, options))
    lines = [_clean(line) for line in lines]
    if trim:
        while lines and _is_blank(lines[0]):
            lines.pop(0)
        while lines and _is_blank(lines[-1]):
            lines.pop()
    return lines


def render_piece(console: Console, piece: Piece, width: int, gap: bool,
                  style: Style | None = None) -> list[Strip]:
    """A piece as Strips of exactly `width` cells, with the widget's base `style` applied.

    Applying the base style here (not per painted line) makes each cached line
    one Strip rather than two: every Strip carries seven small caches, and
    those objects are what the cycle collector walks on its full passes.
    """
    width = max(4, width)
    kind = piece.kind
    if kind == "md":
        return strips_of(_lines(console, _BlockMarkdown(piece.text), width), width, gap, style)
    if kind == "code":
        lines = [_clean(line) for line in _code_lines(piece.text, piece.lang, width, piece.first, piece.last)]
        return strips_of(lines, width, gap, style)
    text, room, prefix, head = prose(piece, width)
    lines = _lines(console, head, room) if head is not None else []
    return strips_of(lines + _lines(console, text, room), width, gap, style, prefix)


#: The plain-text kinds: (the bar before each line, the text's style). A tool
#: call or its result is plain text behind its own bar; "plain" is a Markdown
#: block too long to parse (`MAX_BLOCK_CHARS`).
_PROSE: dict[str, tuple[Segment | None, Style | None]] = {
    "user": (_USER_BAR, _USER_STYLE), "reasoning": (_REASONING_BAR, _REASONING_STYLE),
    "note": (None, _NOTE_STYLE), "tool": (_TOOL_BAR, _TOOL_STYLE), "plain": (None, None)}


def prose(piece: Piece, width: int) -> tuple[Text, int, Segment | None, Text | None]:
    """A plain-text piece (any kind but md and code) as `render_piece` draws
    it in `width` cells: (its text, folded at word ends; the cells it is
    wrapped in; the bar before each line; a heading above it)."""
    prefix, text_style = _PROSE.get(piece.kind, _PROSE["plain"])
    head = _REASONING_HEAD if piece.kind == "reasoning" and piece.first else None
    text = Text(piece.text, style=text_style or "", overflow="fold")
    return text, width - (prefix.cell_length if prefix is not None else 0), prefix, head


def strips_of(lines: list[list[Segment]], width: int, gap: bool, style: Style | None = None,
              prefix: Segment | None = None) -> list[Strip]:
    """Rendered lines as Strips of exactly `width` cells (`render_piece`'s last step)."""
    style = style or None  # a null style changes nothing
    strips = [blank_line(width, style)] if gap else []
    adjust = Segment.adjust_line_length
    simplify = Segment.simplify  # fewer segments: fewer objects kept
    add = style.__add__ if style is not None else None
    for line in lines:
        if prefix is not None:
            line = [prefix, *line]
        line = adjust(line, width)
        if add is not None:  # what Strip.apply_style does, without the extra Strip
            line = [Segment(text, None if control else add(seg_style), control)
                    for text, seg_style, control in line]
        strips.append(drawn_line(tuple(simplify(line)), width))
    if not strips:
        strips.append(blank_line(width, style))
    return strips


def estimate_height(piece: Piece, width: int, gap: bool) -> int:
    """Height guess for a block not rendered at this width yet."""
    usable = max(1, width - 4)
    lines = sum(len(line) // usable + 1 for line in piece.text.split("\n"))
    if piece.kind == "code":
        lines += piece.first + piece.last
    elif piece.kind == "reasoning":
        lines += piece.first
    return max(1, lines + gap)
