"""The Markdown block splitter (tui.markdown_blocks), without Textual or Rich.

This module imports neither: the splitter is plain text work, tested on its
own (a subprocess checks that importing this test module loads neither).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.markdown_blocks import BlockSplitter, fenced_code_blocks

ROOT = Path(__file__).resolve().parents[1]


def pieces(text: str, chunks: list[int] | None = None, kind: str = "md"):
    splitter = BlockSplitter(kind)
    if chunks is None:
        splitter.feed(text)
    else:
        start = 0
        for size in chunks:
            splitter.feed(text[start:start + size])
            start += size
        splitter.feed(text[start:])
    splitter.finish()
    return [(p.kind, p.text) for p in splitter.take()]


def test_blocks_split_at_blank_lines_but_not_inside_code_fences():
    text = (
        "# Title\n"
        "Intro paragraph\nstill intro\n\n"
        "```python\ndef f():\n\n    # not a heading\n    return 1\n```\n"
        "~~~\nfoo\n\n```\nstill tilde code\n~~~\n\n"
        "Tail paragraph"
    )
    got = pieces(text)
    assert got == [
        ("md", "# Title"),
        ("md", "Intro paragraph\nstill intro"),
        ("code", "def f():\n\n    # not a heading\n    return 1"),
        ("code", "foo\n\n```\nstill tilde code"),
        ("md", "Tail paragraph"),
    ]


def test_lists_are_split_per_item_without_gaps_and_keep_nested_content():
    got = BlockSplitter("md")
    got.feed("- one\n- two\n  - nested\n\n  continued two\n- three\n\nAfter\n")
    got.finish()
    result = [(p.kind, p.text, p.gap) for p in got.take()]
    assert result == [
        ("md", "- one", True),
        ("md", "- two\n  - nested\n\n  continued two", False),
        ("md", "- three", False),
        ("md", "After", True),
    ]


def test_long_code_blocks_are_committed_in_seamless_chunks():
    code = "\n".join(f"x{i} = {i}" for i in range(100))
    splitter = BlockSplitter("md")
    splitter.feed(f"```python\n{code}\n```\n")
    splitter.finish()
    chunks = splitter.take()
    assert len(chunks) > 3
    assert all(c.kind == "code" and c.lang == "python" for c in chunks)
    assert chunks[0].first and not chunks[0].last
    assert chunks[-1].last and not any(c.first for c in chunks[1:])
    assert "\n".join(c.text for c in chunks if c.text) == code


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=40), max_size=30))
def test_splitting_does_not_depend_on_how_the_stream_was_chunked(chunks):
    text = ("## Heading\n\nSome text with `code`\nand more.\n\n1. a\n2. b\n\n```js\nlet x = 1;\n\n"
            "x += 2;\n```\n\n> quote\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nend")
    assert pieces(text, chunks) == pieces(text)


def test_pathological_blocks_are_chunked():
    big_paragraph = "word " * 60_000  # 300 KB without a newline
    got = pieces(big_paragraph)
    assert len(got) > 10
    assert all(len(t) <= 16_384 for _, t in got)
    assert "".join(t for _, t in got).split() == big_paragraph.split()
    lines = "\n".join(str(i) for i in range(20_000))
    got = pieces(lines)
    assert max(len(t) for _, t in got) <= 16_384
    assert {kind for kind, _ in got} <= {"md", "plain"}


def test_fenced_code_blocks_for_copy():
    text = ("First:\n```python\nprint(1)\n```\nthen\n~~~\nraw ``` inside\n\nkept\n~~~\n"
            "1. step\n   ```bash\n   echo hi\n     indented\n   ```\n```js\nlet open = 1;\n")
    assert fenced_code_blocks(text) == ["print(1)", "raw ``` inside\n\nkept", "echo hi\n  indented",
                                        "let open = 1;\n"]
    assert fenced_code_blocks("no code, `inline` only") == []


def test_splitter_and_this_test_module_load_neither_textual_nor_rich():
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import test_markdown_blocks\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "assert 'textual' not in sys.modules, bad\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
