"""Prompt templates: `{{name}}` in a case's prompt, filled from the case's
`vars`, and a variant's own template (`[variants.NAME] template = ...`),
where `{{prompt}}` is the case's prompt and `{{NAME}}` its `vars.NAME`.

Plain substitution, on purpose: no expressions, no filters, no loops, so a
template or a value can never run code or reach a file. Values are untrusted
text and are put in as they are, in one pass: a value holding `{{other}}` is
not expanded again. A name is letters, digits and `_` (spaces inside the
braces allowed); anything else between braces is left as it is written (a
prompt about Jinja or Handlebars keeps its braces).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: `{{ name }}`: bounded classes that cannot overlap, so matching is linear.
PLACEHOLDER = re.compile(r"\{\{[ \t]*([A-Za-z_][A-Za-z0-9_]{0,63})[ \t]*\}\}")

#: The variable a variant's template reads the case's own prompt from.
PROMPT_VAR = "prompt"


def variables(template: str) -> list[str]:
    """The names a template uses, each once, in order of first use."""
    return list(dict.fromkeys(m.group(1) for m in PLACEHOLDER.finditer(template)))


def missing(template: str, values: Mapping[str, str]) -> list[str]:
    """The names `template` uses that `values` does not give."""
    return [name for name in variables(template) if name not in values]


def render(template: str, values: Mapping[str, str]) -> str:
    """`template` with each `{{name}}` replaced by its value, in one pass;
    `KeyError` naming the first missing one (check with `missing` first)."""
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
