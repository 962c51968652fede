"""The code the demo models write for a few textbook functions, so that a
set with executed tests (`code_tests` checks, `sample_sets/code.jsonl`) gives
figures that are not all one value offline: some styles get a function
right, others make the mistake people make.

Why a table: the demo composes answers from templates, it does not solve
problems; to pass or fail real tests it needs real code, so it knows these
functions by name (found in the prompt as `name(`) and writes, per style,
the correct body or a plausible wrong one. Deterministic: the same style
always passes the same tests. Any other function gets the demo's generic
template (`providers.demo`).

| function | correct | wrong (the usual mistake) |
| --- | --- | --- |
| slugify | concise, thorough, thinker | quirky (only spaces replaced) |
| is_leap | thorough, quirky, thinker | concise (every fourth year) |
| moving_average | thorough, quirky | concise, thinker (the off-by-one kept) |
"""

from __future__ import annotations

import re

_SLUGIFY_RIGHT = '''import re


def slugify(title: str) -> str:
    """Lower-case, runs of anything but a-z and 0-9 as one hyphen, no hyphen at either end."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
'''

_SLUGIFY_WRONG = '''def slugify(title: str) -> str:
    return title.strip().lower().replace(" ", "-")
'''

_IS_LEAP_RIGHT = '''def is_leap(year: int) -> bool:
    """Gregorian: every fourth year, except centuries not divisible by 400."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
'''

_IS_LEAP_TESTS = '''

assert is_leap(2000)
assert not is_leap(1900)
assert is_leap(2024)
assert not is_leap(2023)
'''

_IS_LEAP_WRONG = '''def is_leap(year: int) -> bool:
    return year % 4 == 0
'''

_MOVING_RIGHT = '''def moving_average(xs, k):
    out = []
    for i in range(len(xs) - k + 1):
        out.append(sum(xs[i:i + k]) / k)
    return out
'''

_MOVING_WRONG = '''def moving_average(xs, k):
    out = []
    for i in range(len(xs) - k):
        out.append(sum(xs[i:i + k]) / k)
    return out
'''

#: function -> (its right code, its wrong code, the styles that get it right)
_FUNCTIONS: dict[str, tuple[str, str, frozenset[str]]] = {
    "slugify": (_SLUGIFY_RIGHT, _SLUGIFY_WRONG, frozenset({"concise", "thorough", "thinker"})),
    "is_leap": (_IS_LEAP_RIGHT, _IS_LEAP_WRONG, frozenset({"thorough", "quirky", "thinker"})),
    "moving_average": (_MOVING_RIGHT, _MOVING_WRONG, frozenset({"thorough", "quirky"})),
}
_NAMED = re.compile(r"\b(" + "|".join(_FUNCTIONS) + r")\s*\(")


def known_code(style: str, prompt: str, lang: str) -> str | None:
    """The Python code `style` writes for the first known function the prompt
    names, or None (then the generic template is used)."""
    if lang != "python":
        return None
    found = _NAMED.search(prompt)
    if found is None:
        return None
    right, wrong, who = _FUNCTIONS[found.group(1)]
    code = right if style in who else wrong
    if found.group(1) == "is_leap" and style == "thorough" and re.search(r"\bassert", prompt):
        code += _IS_LEAP_TESTS   # asked for asserts: the thorough style writes them
    return code
