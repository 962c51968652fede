"""Sample sets: JSONL files, one evaluation case per line (format in
sample_sets/README.md).

`load_sample_set` validates the whole file up front, so a run never stops
half-way on a typo: every problem is reported as `FILE:LINE: FIELD: message`
(bad JSON, wrong types, unknown fields, bad check specs, a custom check's
function that cannot be found, duplicate ids,
missing, oversized or unsupported images).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
import base64
import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from core.answering.custom_checks import locate
from core.answering.dimensions import Dimension, check_unique
from core.answering.templates import PROMPT_VAR, missing, render, variables
from core.answering.checks import CHECK_TYPES, TOOL_CHECK_TYPES, AnswerFacts, Check, StructuredOutputCheck
from core.ground.inputs import InputError, decode, loads, read_input, shown_name, split_lines
from core.ground.jsonl import json_objects
from core.answering.tools import (
    DEFAULT_MAX_STEPS,
    DEFAULT_RESULT,
    MAX_STEPS_LIMIT,
    ScriptedResult,
    StructuredOutput,
    ToolScript,
    schema_problem,
    tool_problems,
)
from providers.events import ImagePart, Message, SamplingParams, ToolSpec
from store.records import AnswerTrace

MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_ERRORS_SHOWN = 20
MAX_LOGGED_CHARS = 200_000

# magic bytes -> MIME type: what the providers we speak accept as image parts.
_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class SampleSetError(Exception):
    """A sample set that cannot be used; `problems` are `FILE:LINE: FIELD: message` lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = problems[:MAX_ERRORS_SHOWN]
        extra = len(problems) - len(shown)
        text = "\n".join(shown) + (f"\n… and {extra} more problem(s)" if extra > 0 else "")
        super().__init__(text)


def _relative_path(value: str) -> str:
    if not value or Path(value).is_absolute():
        raise ValueError(f"image path {value!r} must be relative to the set file")
    return value


ImagePath = Annotated[str, AfterValidator(_relative_path)]


class ChatTurn(BaseModel):
    """One scripted message of a `messages` case."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"]
    content: str


class GoldAnswers(BaseModel):
    """A case's known better and worse answer to its last turn: the vote
    queue shows them as a gold pair (`lineup vote --gold-rate`) to measure a
    rater's accuracy; never a contestant, never in a rating."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    better: str = Field(min_length=1, description="the answer a careful rater prefers")
    worse: str = Field(min_length=1, description="a clearly worse answer to the same prompt")


class Logged(BaseModel):
    """What production answered this case, from its trace (`lineup sample
    --keep-answers`); `lineup run --with-logged` makes it a contestant. The
    timing is the log's, kept apart from measured timings."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str = Field(min_length=1, max_length=MAX_LOGGED_CHARS)
    model: str | None = Field(default=None, max_length=200)
    latency_ms: float | None = Field(default=None, ge=0, le=86_400_000)
    ttft_ms: float | None = Field(default=None, ge=0, le=86_400_000)
    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    cost: float | None = Field(default=None, ge=0)


class Case(BaseModel):
    """One evaluation case: a prompt (or a scripted conversation), optional
    follow-ups sent after each answer, images, checks and a reference note."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1, max_length=200, pattern=r"^[^\s]+$")
    category: str = Field(min_length=1, max_length=200)
    prompt: str | None = Field(default=None, min_length=1)
    messages: tuple[ChatTurn, ...] | None = None
    system: str | None = None
    follow_ups: tuple[str, ...] = ()
    images: tuple[ImagePath, ...] = Field(default=(), description="paths relative to the set file; sent with the first user turn")
    checks: tuple[Check, ...] = ()
    reference: str | None = None
    gold: GoldAnswers | None = Field(default=None, description="a known better and worse answer (gold pair)")
    tags: tuple[str, ...] = ()
    params: SamplingParams | None = Field(default=None, description="sampling overrides for this case")
    tools: tuple[ToolSpec, ...] = Field(default=(), description="functions the model may call")
    tool_results: tuple[ScriptedResult, ...] = Field(default=(), description="what calls return, first match wins")
    tool_default: Any = Field(default_factory=lambda: dict(DEFAULT_RESULT),
                              description="what a call no entry of tool_results matches returns")
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1, le=MAX_STEPS_LIMIT,
                           description="requests at most in one answer's tool loop")
    response_format: StructuredOutput | None = Field(default=None, description="native structured output")
    logged: Logged | None = Field(default=None, description="the answer production gave (a trace's)")
    vars: dict[str, str] | None = Field(default=None, description=(
        "values of the prompt's {{NAME}} placeholders (and of a variant's template): with vars, the prompt, "
        "the messages and the follow-ups are templates, filled in when the set is read"))

    @model_validator(mode="before")
    @classmethod
    def _leading_system_message(cls, data: Any) -> Any:
        """A leading {"role": "system"} message becomes `system` (OpenAI-style logs have one);
        with `vars`, the texts are filled in (`_fill_vars`)."""
        if not isinstance(data, dict):
            return data
        data = _fill_vars(data)
        msgs = data.get("messages")
        if isinstance(msgs, list) and msgs and isinstance(msgs[0], dict) and msgs[0].get("role") == "system":
            if data.get("system") is not None:
                raise ValueError("both a system message and a 'system' field")
            data = dict(data)
            data["system"] = msgs[0].get("content")
            data["messages"] = msgs[1:]
        return data

    @field_validator("follow_ups")
    @classmethod
    def _follow_ups_not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, text in enumerate(value):
            if not text.strip():
                raise ValueError(f"follow-up {i} is empty")
        return value

    @model_validator(mode="after")
    def _prompt_or_messages(self) -> "Case":
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of 'prompt' or 'messages'")
        if self.messages is not None:
            if not self.messages:
                raise ValueError("'messages' is empty")
            for i, m in enumerate(self.messages):
                if m.role == "system":
                    raise ValueError(f"messages.{i}: a system message may only come first")
            if self.messages[-1].role != "user":
                raise ValueError("'messages' must end with a user message (the one the model answers)")
            for a, b in pairwise(self.messages):
                if a.role == b.role:
                    raise ValueError("'messages' must alternate user and assistant")
            if self.messages[0].role != "user":
                raise ValueError("'messages' must start with a user message")
        for i, check in enumerate(self.checks):
            if check.turn is not None and not -self.answer_count <= check.turn < self.answer_count:
                raise ValueError(f"checks.{i}.turn: {check.turn} is outside the case's {self.answer_count} answer(s)")
        problems = self._tool_problems()
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def _tool_problems(self) -> list[str]:
        """Tools, scripted results, structured output and the checks on them,
        as "FIELD: message" lines (each reported on its own line)."""
        given = self.model_fields_set
        if not self.tools:
            problems = [f"{name}: needs 'tools' (the functions it is about)"
                        for name in ("tool_results", "tool_default", "max_steps") if name in given]
        else:
            problems = tool_problems(self.tools, self.tool_results)
        if self.tools and self.response_format is not None:
            problems.append("response_format: give either 'tools' or 'response_format', not both")
        if self.response_format is not None:
            problem = schema_problem(self.response_format.schema_)
            if problem:
                problems.append(f"response_format.schema: {problem}")
        declared = {t.name for t in self.tools}
        for i, check in enumerate(self.checks):
            if check.type in TOOL_CHECK_TYPES and not self.tools:
                problems.append(f"checks.{i}: a {check.type} check needs 'tools'")
            tool = getattr(check, "tool", None)
            if self.tools and tool is not None and tool not in declared:
                problems.append(f"checks.{i}.tool: {tool!r} is not one of the declared tools "
                                f"({', '.join(sorted(declared))})")
            if check.type == "structured_output" and self.response_format is None:
                problems.append(f"checks.{i}: a structured_output check needs 'response_format'")
        return problems

    @property
    def all_checks(self) -> tuple[Check, ...]:
        """The checks run on the case's answers: its own, and `structured_output`
        for a case with a `response_format` that does not list it."""
        if self.response_format is not None and not any(c.type == "structured_output" for c in self.checks):
            return (*self.checks, StructuredOutputCheck())
        return self.checks

    def answer_facts(self, traces: Sequence[AnswerTrace | None], set_dir: Path | None) -> list[AnswerFacts]:
        """What the checks read besides each answer's text (one per trace):
        the trace, the tools, the structured output, the case itself and the
        folder its set file is in (for a custom check's module)."""
        script, dumped = self.tool_script(), self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return [AnswerFacts(trace=t, script=script, structured=self.response_format, case=dumped, set_dir=set_dir)
                for t in traces]

    def tool_script(self) -> ToolScript | None:
        """The case's tools and their scripted results, or None without tools."""
        if not self.tools:
            return None
        return ToolScript(tools=self.tools, tool_results=self.tool_results, tool_default=self.tool_default,
                          max_steps=self.max_steps)

    @property
    def answer_count(self) -> int:
        """How many answers a model gives to this case (1 + follow-ups)."""
        return 1 + len(self.follow_ups)

    @property
    def opening_text(self) -> str:
        """The user message the first request answers (the prompt, or the last of `messages`)."""
        if self.prompt is not None:
            return self.prompt
        return (self.messages or ())[-1].content

    def template_values(self) -> dict[str, str]:
        """What a variant's template may use: the case's vars, and `prompt`
        (the case's own opening message) unless the vars name one."""
        return {PROMPT_VAR: self.opening_text, **(self.vars or {})}

    def prompt_for(self, template: str | None) -> str:
        """The opening user message a contestant with `template` sends (its
        own prompt without one); `KeyError` for a variable the case lacks
        (`SampleSet.template_problems` finds those before a run starts)."""
        return self.opening_text if template is None else render(template, self.template_values())

    def opening_messages(self, images: tuple[ImagePart, ...] = (), template: str | None = None) -> tuple[Message, ...]:
        """The history of the first request; `images` ride on its last user message,
        which a variant's `template` rewrites. Each follow-up is then sent after
        the model's answer, as a plain user message."""
        if self.prompt is not None:
            return (Message(role="user", content=self.prompt_for(template), images=images),)
        msgs = [Message(role=m.role, content=m.content) for m in self.messages or ()]
        msgs[-1] = Message(role="user", content=self.prompt_for(template), images=images)
        return tuple(msgs)


def _fill_vars(data: dict) -> dict:
    """A case's prompt, messages and follow-ups with its `vars` put in (a case
    without vars is left as it is: its braces are text). A name used and not
    given is reported as `vars.NAME`; values must be text or numbers."""
    values = data.get("vars")
    if values is None:
        return data
    if not isinstance(values, dict):
        return data   # the field's own validation says what is wrong
    text: dict[str, str] = {}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"vars.{name}: must be a string or a number")
        text[str(name)] = value if isinstance(value, str) else json.dumps(value)
    data = dict(data, vars=text)
    wanted: list[str] = []
    if isinstance(data.get("prompt"), str):
        wanted += variables(data["prompt"])
    msgs = data.get("messages")
    if isinstance(msgs, list):
        wanted += [n for m in msgs if isinstance(m, dict) and isinstance(m.get("content"), str)
                   for n in variables(m["content"])]
    ups = data.get("follow_ups")
    if isinstance(ups, list):
        wanted += [n for u in ups if isinstance(u, str) for n in variables(u)]
    lacking = [n for n in dict.fromkeys(wanted) if n not in text]
    if lacking:
        raise ValueError("\n".join(f"vars.{n}: the prompt uses {{{{{n}}}}} and vars does not give it"
                                   for n in lacking))
    if isinstance(data.get("prompt"), str):
        data["prompt"] = render(data["prompt"], text)
    if isinstance(msgs, list):
        data["messages"] = [dict(m, content=render(m["content"], text))
                            if isinstance(m, dict) and isinstance(m.get("content"), str) else m for m in msgs]
    if isinstance(ups, list):
        data["follow_ups"] = [render(u, text) if isinstance(u, str) else u for u in ups]
    return data


class SetHeader(BaseModel):
    """What a set says of itself, on its first line as `{"set": {...}}`:
    `grader`, the model alias that grades its `rubric` checks that name none
    (`lineup run --grader` overrides it); `dimensions`, what its answers are
    scored on 1-5 besides the pairwise pick (`core.answering.dimensions`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    grader: str | None = Field(default=None, min_length=1, max_length=200)
    dimensions: tuple[Dimension, ...] = ()

    @field_validator("dimensions")
    @classmethod
    def _unique_dimensions(cls, value: tuple[Dimension, ...]) -> tuple[Dimension, ...]:
        return tuple(check_unique(value))


class SampleSet(BaseModel):
    """A loaded, validated set. `sha256` is the file's content hash, so a run
    records exactly which version of the set it used."""

    model_config = ConfigDict(frozen=True)
    name: str
    path: str
    sha256: str
    cases: tuple[Case, ...]
    from_file: bool = Field(default=True, description="False for a set rebuilt from a recorded session")
    header: SetHeader = Field(default_factory=SetHeader)
    _images: dict[str, ImagePart] = PrivateAttr(default_factory=dict)
    _lines: dict[str, int] = PrivateAttr(default_factory=dict)   # case id -> its line in the file

    def where(self, case: Case) -> str:
        """`FILE:LINE` of a case (`FILE: case ID` for a set not read from a file)."""
        line = self._lines.get(case.id)
        return f"{shown_name(Path(self.path))}:{line}" if line else f"{self.path}: case {case.id}"

    def template_problems(self, models: Any) -> list[str]:
        """Why some contestant's template cannot be filled for some case, as
        `FILE:LINE: vars.NAME: ...` lines: found before any request is made."""
        problems = []
        for m in models:
            template = getattr(m, "template", None)
            if template is None:
                continue
            for case in self.cases:
                for name in missing(template, case.template_values()):
                    problems.append(f"{self.where(case)}: vars.{name}: the template of {m.alias} uses "
                                    f"{{{{{name}}}}} and the case's vars do not give it")
        return problems

    @property
    def base_dir(self) -> Path:
        return Path(self.path).parent

    @property
    def set_dir(self) -> Path | None:
        """The folder of the set file (a custom check's module is beside it); None for a set from a session."""
        return self.base_dir.resolve() if self.from_file else None

    @property
    def categories(self) -> list[str]:
        return sorted({c.category for c in self.cases})

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)

    def image_path(self, rel: str) -> Path:
        return self.base_dir / rel

    def images_for(self, case: Case) -> tuple[ImagePart, ...]:
        """The case's images, loaded (and cached) as base64 image parts."""
        parts = []
        for rel in case.images:
            part = self._images.get(rel)
            if part is None:
                part = self._images[rel] = load_image(self.image_path(rel), label=rel)
            parts.append(part)
        return tuple(parts)


def image_mime(data: bytes) -> str | None:
    """The MIME type from the file's magic bytes (not its name), or None."""
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _check_image(path: Path) -> str | None:
    """Why the image cannot be sent, or None if it can."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"image file not found: {path}"
    except OSError as exc:
        return f"image file unreadable: {path}: {exc.strerror}"
    if not path.is_file():
        return f"image is not a file: {path}"
    if size > MAX_IMAGE_BYTES:
        return f"image too large: {path} is {size / 1e6:.1f} MB (limit {MAX_IMAGE_BYTES / 1e6:.0f} MB)"
    with path.open("rb") as f:
        head = f.read(16)
    if image_mime(head) is None:
        return f"unsupported image type: {path} (PNG, JPEG, GIF or WebP)"
    return None


def load_image(path: str | Path, *, label: str | None = None) -> ImagePart:
    """An image file as an `ImagePart` (base64 data, MIME from magic bytes, sha256).
    `label` is the path recorded in the part (default: the path given)."""
    path = Path(path)
    problem = _check_image(path)
    if problem:
        raise SampleSetError([problem])
    data = path.read_bytes()
    return ImagePart(
        mime=image_mime(data) or "application/octet-stream",
        data=base64.b64encode(data).decode("ascii"),
        path=label if label is not None else str(path),
        sha256=hashlib.sha256(data).hexdigest(),
    )


def _loc(loc: tuple[Any, ...]) -> str:
    """Pydantic's error location as a dotted field path, without union tags."""
    parts: list[str] = []
    for i, p in enumerate(loc):
        # A discriminated union adds the tag ("regex") after the index: drop it.
        if i == 2 and loc[0] == "checks" and isinstance(p, str) and p in CHECK_TYPES:
            continue
        if isinstance(p, str) and p.startswith("function-"):
            continue
        parts.append(str(p))
    return ".".join(parts)


def _validation_problems(where: str, exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors(include_url=False):
        field = _loc(tuple(err["loc"]))
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        for line in msg.split("\n"):   # a validator that found several problems: one line each
            line = line[0].lower() + line[1:] if line else line
            out.append(f"{where}: {field}: {line}" if field else f"{where}: {line}")
    return out


def load_tool_script(path: str | Path) -> ToolScript:
    """A chat's tools file (`lineup chat --tools FILE`): one JSON object with
    a case's tool fields (`tools`, `tool_results`, `tool_default`,
    `max_steps`), checked as a case's are; `SampleSetError` lists every
    problem as `FILE: FIELD: message`."""
    path = Path(path)
    shown = shown_name(path)
    try:
        data = loads(decode(read_input(path), shown), shown)
    except InputError as exc:
        raise SampleSetError([str(exc)]) from None
    if not isinstance(data, dict):
        raise SampleSetError([f"{shown}: a tools file must be a JSON object, not {type(data).__name__}"])
    unknown = sorted(set(data) - {"tools", "tool_results", "tool_default", "max_steps"})
    if unknown:
        raise SampleSetError([f"{shown}: {name}: not a field of a tools file (tools, tool_results, "
                              "tool_default, max_steps)" for name in unknown])
    if not data.get("tools"):
        raise SampleSetError([f"{shown}: tools: declare at least one tool"])
    try:
        case = Case.model_validate({"id": "tools", "category": "tools", "prompt": "-", **data})
    except ValidationError as exc:
        raise SampleSetError(_validation_problems(shown, exc)) from None
    script = case.tool_script()
    assert script is not None
    return script


def load_sample_set(path: str | Path) -> SampleSet:
    """Read and validate a sample set; raise `SampleSetError` listing every problem."""
    path = Path(path)
    shown = shown_name(path)
    try:
        raw = read_input(path)
    except InputError as exc:
        raise SampleSetError([str(exc)]) from None
    problems: list[str] = []
    cases: list[Case] = []
    first_line: dict[str, int] = {}
    checked_images: dict[str, str | None] = {}
    located: dict[str, str | None] = {}   # a custom check's function -> why it cannot be found
    header = SetHeader()
    for index, (lineno, where, data, problem) in enumerate(json_objects(split_lines(raw, shown), shown, "a case")):
        if problem:
            problems.append(problem)
            continue
        if isinstance(data, dict) and "set" in data:
            if index or len(data) != 1 or not isinstance(data["set"], dict):
                problems.append(f"{where}: set: a set header is the first line, alone: {{\"set\": {{...}}}}")
                continue
            try:
                header = SetHeader.model_validate(data["set"])
            except ValidationError as exc:
                problems.extend(p.replace(f"{where}: ", f"{where}: set.", 1) for p in _validation_problems(where, exc))
            continue
        try:
            case = Case.model_validate(data)
        except ValidationError as exc:
            problems.extend(_validation_problems(where, exc))
            continue
        declared = {d.name for d in header.dimensions}
        for n, check in enumerate(case.checks):
            dimension = getattr(check, "dimension", None)
            if dimension is not None and dimension not in declared:
                problems.append(f"{where}: checks.{n}.dimension: {dimension!r} is not a dimension the set "
                                "header declares")
        if case.id in first_line:
            problems.append(f"{where}: id: duplicate id {case.id!r} (first on line {first_line[case.id]})")
            continue
        first_line[case.id] = lineno
        for i, check in enumerate(case.checks):
            if check.type == "python":
                if check.function not in located:
                    found = locate(check.function, path.parent)
                    located[check.function] = found if isinstance(found, str) else None
                if located[check.function]:
                    problems.append(f"{where}: checks.{i}.function: {located[check.function]}")
        for i, rel in enumerate(case.images):
            if rel not in checked_images:
                checked_images[rel] = _check_image(path.parent / rel)
            if checked_images[rel]:
                problems.append(f"{where}: images.{i}: {checked_images[rel]}")
        cases.append(case)
    if not problems and not cases:
        problems.append(f"{shown}: no cases")
    if problems:
        raise SampleSetError(problems)
    loaded = SampleSet(name=path.stem, path=str(path), sha256=hashlib.sha256(raw).hexdigest(), cases=tuple(cases),
                       header=header)
    loaded._lines.update(first_line)
    return loaded
