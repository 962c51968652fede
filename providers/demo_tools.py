"""How the demo models call tools and write structured output.

Why a module of its own: `providers.demo` composes plain answers; this is
the part a tool loop and a `response_format` need: which declared tool fits
a prompt (words of its name and description in the prompt), whether its
required arguments can be filled yet, the arguments themselves (from fields
of earlier results, values the prompt labels, numbers, names in the prompt,
enum values, each checked against the parameter's pattern or format), the
answer written from the results fed back, and an instance of a JSON schema.
A tool that needs an id no result has given yet waits, so chains (find a
customer, then list their orders) come out in order. It reads a request and
the demo's context (`ctx`: the prompt, its keywords and topic) and returns
text and calls; the demo provider streams them. Deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import regex

from providers.events import ChatRequest, ToolResultPart, ToolSpec

_TOOL_STOP = frozenset(
    "get set fetch find lookup look list current tool function query search return returns value values data info "
    "information given for the and with from this that your you what which when where how are can will about into "
    "use using one two all any its their them they has have had was were".split())
_NAME = re.compile(r"[A-Z][\w'’.-]*(?:[ \t]+[A-Z][\w'’.-]*)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|--\s*)$")
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?")
_LAST_WORDS = frozenset({"to", "destination", "dest", "target", "end", "into"})
Call = tuple[str, dict[str, Any]]


def _stem(word: str) -> str:
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[A-Za-z]+", text) if len(w) > 2 and w.lower() not in _TOOL_STOP}


def fitting_tools(prompt: str, tools: tuple[ToolSpec, ...]) -> list[ToolSpec]:
    """The tools whose name or description shares words with the prompt, best first."""
    said = _words(prompt)
    scored = [(len(_words(t.name.replace("_", " ") + " " + t.description) & said), i, t) for i, t in enumerate(tools)]
    return [t for score, _, t in sorted(scored, key=lambda x: (-x[0], x[1])) if score > 0]


def names_in(prompt: str) -> list[str]:
    """Quoted strings and capitalised names in the prompt (cities, people,
    codes), in order; a lone capitalised word that starts a sentence is not one."""
    out: list[str] = re.findall(r'"([^"\n]{1,60})"', prompt)
    for m in _NAME.finditer(prompt):
        words = m.group(0).rstrip(".").split()
        if len(words) == 1 and _SENTENCE_START.search(prompt[:m.start()]):
            continue
        name = " ".join(words).strip("'’")
        if len(name) > 1 and name not in out:
            out.append(name)
    return out


def _key_parts(key: str) -> list[str]:
    return [p for p in re.split(r"[_\W]+", key.lower()) if p]


def _labelled(prompt: str, key: str) -> str | None:
    """The value the prompt labels with `key` ("VAT ID: DE81...", "total = 9")."""
    parts = _key_parts(key)
    if not parts:
        return None
    label = r"[\s_-]*".join(re.escape(p) for p in parts)
    m = re.search(rf"(?i)\b{label}\b\s*[:=]\s*([^,;\n]+?)\s*(?:[,;\n]|\.(?:\s|$)|$)", prompt)
    return m.group(1).strip() if m else None


def _number_near(prompt: str, key: str) -> float | None:
    """A number the prompt puts next to a word of `key` ("for 90 minutes", "Total: 222.50")."""
    for part in _key_parts(key):
        if len(part) < 3:
            continue
        stem = re.escape(part.rstrip("s"))
        m = (re.search(rf"(?i)(-?\d+(?:\.\d+)?)\s*{stem}", prompt)
             or re.search(rf"(?i)\b{stem}\w*\W{{1,3}}(-?\d+(?:\.\d+)?)", prompt))
        if m:
            return float(m.group(1))
    return None


def _from_results(results: list[ToolResultPart], key: str) -> Any:
    """The value of field `key` in an earlier result (latest first, depth-first)."""
    def find(value: Any) -> Any:
        if isinstance(value, dict):
            if key in value and not isinstance(value[key], (dict, list)):
                return value[key]
            for v in value.values():
                found = find(v)
                if found is not None:
                    return found
        elif isinstance(value, list):
            for v in value:
                found = find(v)
                if found is not None:
                    return found
        return None

    for r in reversed(results):
        found = find(r.content)
        if found is not None:
            return found
    return None


class _Filler:
    """Fills a schema from one prompt and the results so far; `missing` lists
    the required fields it could not fill (a tool that waits for a result)."""

    def __init__(self, prompt: str, results: list[ToolResultPart], entity: str | None = None,
                 full: bool = False) -> None:
        self.prompt = prompt
        self.results = results
        self.entity = entity
        self.full = full
        self.names = names_in(prompt)
        self.used: set[str] = set()
        self.missing: list[str] = []

    def instance(self, schema: dict[str, Any], parent: str = "") -> dict[str, Any]:
        found = schema.get("properties")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        required = [n for n in schema.get("required") or () if n in props]
        out = {}
        for name in (list(props) if self.full or not required else required):
            sub = props[name] if isinstance(props[name], dict) else {}
            value = self.value(sub, name, parent)
            if value is not None:
                out[name] = value
            elif name in required:
                self.missing.append(name)
        return out

    def value(self, schema: dict[str, Any], key: str, parent: str = "") -> Any:
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if schema.get("enum"):
            return self._enum(schema["enum"], key)
        if kind == "object" or "properties" in schema:
            return self.instance(schema, key)
        if kind == "array":
            given = schema.get("items")
            items: dict[str, Any] = given if isinstance(given, dict) else {"type": "string"}
            if items.get("type", "string") == "string" and "enum" not in items:
                return [n for n in self.names if n not in self.used][:3] or None
            item = self.value(items, key, parent)
            return None if item is None else [item]
        earlier = _from_results(self.results, key)
        if earlier is not None:
            return earlier
        if kind in ("integer", "number"):
            labelled = _labelled(self.prompt, key)
            m = _NUMBER.search(labelled) if labelled else None
            number = float(m.group(0).replace(",", "")) if m else _number_near(self.prompt, key)
            if number is None:
                m = _NUMBER.search(self.prompt)
                number = float(m.group(0).replace(",", "")) if m else 1.0
            return int(number) if kind == "integer" else number
        if kind == "boolean":
            return True
        return self._string(schema, key, parent)

    def _enum(self, options: list[Any], key: str) -> Any:
        """The option the prompt names (the last one named for a `to_...` field), else the first."""
        low = self.prompt.lower()
        named = sorted((low.find(str(o).lower()), i, o) for i, o in enumerate(options) if str(o).lower() in low)
        if not named:
            return options[0]
        return named[-1][2] if _LAST_WORDS & set(_key_parts(key)) else named[0][2]

    def _string(self, schema: dict[str, Any], key: str, parent: str) -> str | None:
        pattern = schema.get("pattern")
        fmt = schema.get("format")
        candidates: list[str] = []
        for label in (f"{parent} {key}".strip(), parent if key in ("name", "value") else "", key):
            if label:
                found = _labelled(self.prompt, label)
                if found:
                    candidates.append(found)
        if fmt == "date":
            candidates += re.findall(r"\d{4}-\d{2}-\d{2}", self.prompt)
        elif fmt == "email":
            candidates += re.findall(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", self.prompt)
        if self.entity and not fmt and pattern is None:
            candidates.append(self.entity)
            self.entity = None   # one argument per call takes it
        names = [n for n in self.names if n not in self.used]
        if _LAST_WORDS & set(_key_parts(key)):
            names.reverse()
        is_id = "id" in _key_parts(key)
        if not is_id and not fmt:
            candidates += names
        for value in candidates:
            if (pattern is None or _matches(pattern, value)) and (fmt != "date" or re.fullmatch(r"\d{4}-\d{2}-\d{2}", value)):
                if value in self.names:
                    self.used.add(value)
                return value
        return None


def _matches(pattern: str, value: str) -> bool:
    """A schema's `pattern` (from a set) on a value, under a time limit as
    every pattern from outside (core/ground/patterns.py; providers cannot import
    it): one that backtracks for too long counts as no match."""
    try:
        return regex.search(pattern, value, timeout=0.2) is not None
    except (TimeoutError, regex.error):
        return False


def _ready(tool: ToolSpec, prompt: str, results: list[ToolResultPart]) -> bool:
    filler = _Filler(prompt, results)
    filler.instance(tool.parameters)
    return not filler.missing


def _entities_for(tool: ToolSpec, prompt: str, many: bool) -> list[str | None]:
    """One entity per call: every name the prompt gives when `many` and the
    tool takes exactly one free-text argument (parallel calls), else none
    (the arguments are filled in order)."""
    props = tool.parameters.get("properties") or {}
    text = [n for n, p in props.items() if isinstance(p, dict) and p.get("type") == "string" and "enum" not in p
            and "pattern" not in p and "format" not in p and "id" not in _key_parts(n)]
    options = {str(o).lower() for p in props.values() if isinstance(p, dict) for o in p.get("enum") or ()}
    names = [n for n in names_in(prompt) if n.lower() not in options]
    if many and len(text) == 1 and len(names) > 1:
        return list(names[:4])
    return [names[0]] if len(text) == 1 and names else [None]


def tool_step(style: str, ctx: Any, request: ChatRequest, plain: Callable[[], str]) -> tuple[str, list[Call]]:
    """(text, calls) for one step of a tool loop; `plain()` is the answer
    without tools (when none fits)."""
    prompt = ctx.prompt
    last_user = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=-1)
    since = request.messages[last_user + 1:]
    results = [r for m in since if m.role == "tool" for r in m.tool_results]
    called = {c.name for m in since for c in m.tool_calls}
    fitting = fitting_tools(prompt, request.tools)
    ready = [t for t in fitting if t.name not in called and _ready(t, prompt, results)]

    def call(tool: ToolSpec, entity: str | None = None, quirk: bool = False) -> Call:
        args = _Filler(prompt, results, entity, full=style == "thorough").instance(tool.parameters)
        if quirk:
            for key, value in args.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    args[key] = str(value)   # the wrong type, as some models send it
                    break
        return tool.name, args

    calls: list[Call] = []
    if style == "concise":
        if not results and ready:
            calls = [call(ready[0], _entities_for(ready[0], prompt, many=False)[0])]
    elif style == "thorough":
        for tool in ready if not results else ready[:2]:
            calls += [call(tool, e) for e in _entities_for(tool, prompt, many=not results)]
    elif style == "thinker":
        if ready:
            calls = [call(ready[0], _entities_for(ready[0], prompt, many=False)[0])]
    elif style == "quirky":
        if not results:
            target = (ready or fitting or list(request.tools))[0]
            calls = [call(target, quirk=True)]
    if calls:
        lead = {"thorough": "Let me gather what I need first.", "quirky": "Ooh, tools! Let me poke at one."}
        return lead.get(style, ""), calls
    if not results:
        return plain(), []
    return _from_tool_results(style, ctx, results), []


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _from_tool_results(style: str, ctx: Any, results: list[ToolResultPart]) -> str:
    """The answer written from the results fed back."""
    if style == "concise":
        r = results[-1]
        return f"{r.name} returned {_shown(r.content)}."
    if style == "thorough":
        lines = "\n".join(f"- **{r.name}**: `{_shown(r.content)}`" for r in results)
        return (f"## What the tools returned\n\n{lines}\n\n## Answer\n\nPutting these together for "
                f"{ctx.topic}: the figures above are the ones to use.")
    if style == "thinker":
        steps = "\n".join(f"{i}. {r.name} gave {_shown(r.content)}." for i, r in enumerate(results, 1))
        return f"**Answer.** Step by step:\n\n{steps}\n\nSo the last result answers the question."
    return f"So the tool said {_shown(results[0].content)}, which is kind of neat, honestly!"


def schema_in(system: str | None) -> dict[str, Any] | None:
    """A JSON schema given in a system prompt (structured output asked in
    words), or None: the last line that parses as an object with a "type"."""
    for line in reversed((system or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and "type" in value:
                return value
    return None


def structured_answer(style: str, ctx: Any, schema: dict[str, Any], fenced: bool = False) -> str:
    """A structured answer: an instance of `schema` as JSON (`quirky`: a
    required field left out and a number sent as a string; `thorough`
    fences it when asked in words, `fenced`)."""
    value = _Filler(ctx.prompt, [], full=style == "thorough").instance(schema)
    if style == "quirky":
        required = [n for n in schema.get("required") or () if n in value]
        if len(required) > 1:
            del value[required[-1]]
        for key, v in value.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                value[key] = str(v)
                break
        return json.dumps(value, ensure_ascii=False)
    text = json.dumps(value, ensure_ascii=False, indent=2 if style == "thorough" else None)
    return f"```json\n{text}\n```" if fenced and style == "thorough" else text
