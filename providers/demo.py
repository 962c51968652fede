"""Offline demo models (provider ``demo``), so that a fresh install with
nothing configured still shows the whole experience: streaming at different
speeds, different answer styles, reasoning, and the faults real APIs have.

Answers are composed from templates around words taken from the prompt (they
read plausibly; they are not smart) and are deterministic for a given seed
(``SamplingParams.seed`` of the request, else of the model; temperature 0
without a seed means seed 0; otherwise each call draws a fresh seed, so
repeats vary like a real model's).

Styles (``model`` of a ``provider = "demo"`` alias):

- ``concise``  fast (~120 tokens/s, 0.25 s to first token), one or two sentences; valid compact JSON.
- ``thorough`` slower (~45 tokens/s, 0.8 s), long Markdown: headings, lists, a code fence when code is asked.
- ``quirky``   chatty (~70 tokens/s, 0.5 s). Faults: *malformed JSON* when asked for JSON; a *mid-stream
  server error* when the prompt contains "fail" (and at a 5% seeded rate); a *slow start* (+3 s, 10%).
- ``thinker``  streams reasoning deltas before its answer after a *slow start* (2.5 s, ~35 tokens/s).

The judge (``demo/judge``, not a contestant: `lineup judge -m demo/judge`)
reads a pairwise judging request in the MT-Bench convention (the question,
then "[The Start of Assistant A's Answer]"..., or the multi-turn
conversations) and answers with a short reason and ``[[A]]``, ``[[B]]`` or
``[[C]]``. Its verdict is a deterministic function of the material only: each
answer is scored on the question's key words it covers, its length (capped)
and, when JSON is asked for, whether it holds valid JSON; the higher score
wins, close scores tie. The order the answers come in changes nothing, so it
is position-consistent, and it never looks at anything but the text. With
a reference answer in the request (`lineup judge --reference`), an answer's
coverage of the reference's key words counts as well.

It also grades single answers (a rubric check, `core.answering.rubric`: the
rubric, the question, an optional reference, "[The Start of Assistant's
Answer]"): the share of the reference's key words the answer covers (of the
question's, without a reference) decides, `[[PASS]]` from one half up, or a
rating `[[1]]`..`[[5]]` when the instructions ask for one; the reason says
how many of whose key words it found.

Tools (a request with `tools`): each style decides whether a tool fits the
prompt (words of its name and description in the prompt), fills the
arguments from its parameters' schema (values named in the prompt, numbers,
capitalised names, enum values, and fields of earlier results, so a second
tool can take what the first returned) and answers from the results fed
back. ``concise`` makes one call and answers from it; ``thorough`` calls
every fitting tool at once, one call per name the prompt gives (parallel
calls), and follows up with a tool that needs what a result returned;
``thinker`` calls one tool per step (multi-step); ``quirky`` calls a tool
even when none fits and sends its first number as a string (a wrong type).
Structured output (`response_format`, or a schema on a line of the system
prompt): an instance of the schema from the prompt (``quirky`` leaves out a
required field and gets a type wrong, and ignores a schema given in words;
``thorough`` fences one given in words).

Code: a prompt that names one of a few textbook functions (``slugify(``,
``is_leap(``, ``moving_average(``) gets real code for it, right or with the
usual mistake depending on the style (``providers.demo_code``), so executed
tests (`code_tests`) pass for some styles and fail for others; any other
code prompt gets a generic function.

Follow-ups (more than one user message) reference the turn number and the
previous answer. ``max_tokens`` cuts the answer (finish reason ``length``),
``stop`` sequences end it (``stop``). Token counts in the `UsageReport` are
counts of the demo's own token pieces (the units it streams), not of any real
tokenizer; the record is marked demo anyway.

Speed: a multiplier from the constructor, ``extra_body["speed"]`` or the
environment variable ``LINEUP_DEMO_SPEED`` (``0`` or ``inf`` = no delays,
for tests). Delays are ``anyio.sleep`` calls, so `ChatStream.cancel` ends a
stream at once.

Why this file is past 600 lines: each demo style's answers, timings and
faults, and the offline judge, are data-like templates read together;
tools and code answers are `providers/demo_tools.py` and `providers/demo_code.py`."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

import anyio

from providers.base import Provider
from providers.catalogue import DEMO_JUDGE_NAME, DEMO_MODEL_NAMES, DEMO_STYLE_NAMES
from providers.demo_code import known_code
from providers.demo_tools import schema_in, structured_answer, tool_step
from providers.events import (
    ChatRequest,
    ErrorKind,
    Finish,
    ReasoningDelta,
    RequestSent,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCall,
    UsageReport,
)
from providers.model_config import DEMO_JUDGE, DEMO_MODELS, ModelConfig  # noqa: F401  (re-exported)

FAULT_WORD = "fail"


@dataclass(frozen=True)
class DemoStyle:
    name: str
    description: str
    tokens_per_s: float
    first_token_delay: float
    reasoning: bool = False
    malformed_json: bool = False
    fails_on_word: bool = False
    error_rate: float = 0.0
    slow_start_rate: float = 0.0
    slow_start_extra: float = 3.0


DEMO_STYLES: dict[str, DemoStyle] = {
    s.name: s for s in (
        DemoStyle("concise", "terse, fast", tokens_per_s=120, first_token_delay=0.25),
        DemoStyle("thorough", "long structured Markdown, slower", tokens_per_s=45, first_token_delay=0.8),
        DemoStyle("quirky", "chatty; malformed JSON, mid-stream errors, slow starts", tokens_per_s=70,
                  first_token_delay=0.5, malformed_json=True, fails_on_word=True, error_rate=0.05,
                  slow_start_rate=0.10),
        DemoStyle("thinker", "reasons first, slow start", tokens_per_s=35, first_token_delay=2.5, reasoning=True),
    )
}

assert tuple(DEMO_STYLES) == DEMO_MODEL_NAMES, "DEMO_STYLES and the catalogue's DEMO_MODEL_NAMES list the same models"

#: The offline judge (`lineup judge -m demo/judge`): a demo style that is never a contestant.
JUDGE_STYLE = DemoStyle(DEMO_JUDGE_NAME, "pairwise judge: [[A]], [[B]] or [[C]] from the answers' text",
                        tokens_per_s=200, first_token_delay=0.3)
#: Every demo style a `provider = "demo"` alias may name.
ALL_DEMO_STYLES: dict[str, DemoStyle] = {**DEMO_STYLES, JUDGE_STYLE.name: JUDGE_STYLE}
assert tuple(ALL_DEMO_STYLES) == DEMO_STYLE_NAMES, "the demo's styles are the catalogue's DEMO_STYLE_NAMES"

_TOKEN = re.compile(r"\s*\S{1,5}|\s+")


def demo_tokens(text: str) -> list[str]:
    """The demo's token pieces: up to 5 non-space characters with their
    leading whitespace. ``"".join(demo_tokens(t)) == t``."""
    return _TOKEN.findall(text)


def demo_speed(cfg: ModelConfig, env: Mapping[str, str] = os.environ) -> float:
    """The speed multiplier: extra_body["speed"], else LINEUP_DEMO_SPEED, else 1 (math.inf = no delays)."""
    for raw in (cfg.extra_body.get("speed"), env.get("LINEUP_DEMO_SPEED")):
        if raw is None or raw == "":
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        if value == 0 or value == math.inf:
            return math.inf
        if value > 0:
            return value
    return 1.0


class DemoProvider(Provider):
    """One demo alias; offline, no key, no network."""

    is_demo = True

    def __init__(self, cfg: ModelConfig, *, speed: float | None = None,
                 env: Mapping[str, str] = os.environ) -> None:
        if cfg.model not in ALL_DEMO_STYLES:
            raise ValueError(f"unknown demo style {cfg.model!r}; expected one of {', '.join(ALL_DEMO_STYLES)}")
        self.cfg = cfg
        self.style = ALL_DEMO_STYLES[cfg.model]
        self.speed = (math.inf if speed == 0 else speed) if speed is not None else demo_speed(cfg, env)

    def _seed(self, request: ChatRequest) -> int:
        for params in (request.params, self.cfg.params):
            if params.seed is not None:
                return params.seed
        temperature = request.params.temperature
        if temperature is None:
            temperature = self.cfg.params.temperature
        if temperature == 0:
            return 0
        return random.SystemRandom().randrange(2**32)

    async def _pause(self, seconds: float) -> None:
        await anyio.sleep(0 if self.speed == math.inf else seconds / self.speed)

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        yield RequestSent(t=time.perf_counter(), wall=time.time())
        style, seed = self.style, self._seed(request)
        plan = compose(style, request, seed)
        timing = random.Random(_digest(seed, style.name, "timing", plan.prompt))

        await self._pause(style.first_token_delay * timing.uniform(0.8, 1.25) + plan.extra_delay)

        budget = request.params.max_tokens or self.cfg.params.max_tokens
        emitted_reasoning = emitted_text = 0

        for kind, text in (("reasoning", plan.reasoning), ("text", plan.text)):
            tokens = demo_tokens(text)
            i = 0
            while i < len(tokens):
                if budget is not None and emitted_reasoning + emitted_text >= budget:
                    yield _usage(request, emitted_text, emitted_reasoning)
                    yield Finish(reason="length", t=time.perf_counter())
                    return
                if kind == "text" and plan.error_after is not None and emitted_text >= plan.error_after:
                    yield StreamError(kind=ErrorKind.server, t=time.perf_counter(),
                                      message=f"demo: simulated server error mid-stream after {emitted_text} "
                                              f"tokens ({plan.error_reason})")
                    return
                n = min(timing.choice((1, 1, 2, 2, 3)), len(tokens) - i)
                if budget is not None:
                    n = min(n, budget - emitted_reasoning - emitted_text)
                if kind == "text" and plan.error_after is not None:
                    n = min(n, plan.error_after - emitted_text)
                chunk = "".join(tokens[i:i + n])
                i += n
                await self._pause(n / style.tokens_per_s * timing.uniform(0.6, 1.4))
                if kind == "reasoning":
                    emitted_reasoning += n
                    yield ReasoningDelta(text=chunk, t=time.perf_counter())
                else:
                    emitted_text += n
                    yield TextDelta(text=chunk, t=time.perf_counter())
            if kind == "reasoning" and plan.reasoning:
                await self._pause(0.3 * timing.uniform(0.8, 1.25))   # the pause between thinking and answering

        for n, (name, arguments) in enumerate(plan.calls):
            await self._pause(len(demo_tokens(json.dumps(arguments))) / style.tokens_per_s)
            yield ToolCall(id=f"call_{_digest(seed, name, n, len(request.messages)) % 10**8:08d}", name=name,
                           arguments=arguments)
        yield _usage(request, emitted_text, emitted_reasoning)
        yield Finish(reason="tool_calls" if plan.calls else plan.finish_reason, t=time.perf_counter())


def _usage(request: ChatRequest, text_tokens: int, reasoning_tokens: int) -> UsageReport:
    prompt_chars = "".join(m.content for m in request.messages) + (request.system or "")
    return UsageReport(input_tokens=len(demo_tokens(prompt_chars)), output_tokens=text_tokens + reasoning_tokens,
                       reasoning_tokens=reasoning_tokens or None)


def _digest(*parts: object) -> int:
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(h[:8], "big")


# --------------------------------------------------------------------------- composition


@dataclass
class Plan:
    prompt: str
    text: str
    reasoning: str = ""
    finish_reason: str = "stop"
    error_after: int | None = None     # text tokens before a simulated mid-stream error
    error_reason: str = ""
    extra_delay: float = 0.0
    calls: list[tuple[str, dict]] = field(default_factory=list)   # tool calls after the text


_STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each either few for from further get give had has have having
he her here hers him his how i if in into is it its itself just let like make me more most my no nor not now of off
on once only or other our out over own please same she should show so some such tell than that the their them then
there these they this those through to too under until up use using very want was we were what when where which
while who whom why will with would write you your yours explain describe need thing things something one two
json code function script program snippet example python javascript typescript rust sql bash shell golang answer
question brief briefly short describing detail details return object list give provide generate create output
format table compare difference between
""".split())

_CODE = re.compile(r"\b(code|function|script|python|javascript|typescript|rust|golang|sql|regex|implement|program|"
                   r"class|bash|shell|snippet|algorithm)\b", re.IGNORECASE)
_LANGS = (("python", "python"), ("javascript", "javascript"), ("typescript", "typescript"), ("rust", "rust"),
          ("sql", "sql"), ("bash", "bash"), ("shell", "bash"), ("golang", "go"), ("go ", "go"))


def keywords(text: str, limit: int = 5) -> list[str]:
    """Content words of `text`, in order, without repeats or stop words."""
    out: list[str] = []
    for word in re.findall(r"[^\W\d_][\w'-]{2,}", text):
        w = word.lower().strip("'-")
        if w not in _STOP_WORDS and w not in out and len(w) > 2:
            out.append(w)
        if len(out) == limit:
            break
    return out


def _snippet(text: str, words: int = 8) -> str:
    plain = re.sub(r"[`#*_>\[\]{}]", "", text)
    parts = plain.split()
    return " ".join(parts[:words]) + ("..." if len(parts) > words else "")


def compose(style: DemoStyle, request: ChatRequest, seed: int) -> Plan:
    """The whole answer (and reasoning, faults, delays) for one request."""
    users = [m for m in request.messages if m.role == "user"]
    prompt = users[-1].content if users else ""
    turn = max(1, len(users))
    previous = next((m.content for m in reversed(request.messages[:-1]) if m.role == "assistant"), None)
    previous_prompt = users[-2].content if len(users) > 1 else None
    rng = random.Random(_digest(seed, style.name, turn, prompt, request.system or ""))

    kws = keywords(prompt) or keywords(previous_prompt or "") or ["your question"]
    while len(kws) < 3:
        kws.append(rng.choice(("context", "trade-offs", "details", "the basics", "edge cases")))
    ctx = _Context(prompt=prompt, kws=kws, topic=" ".join(kws[:3]), turn=turn, previous=previous,
                   previous_topic=" ".join(keywords(previous_prompt or "")[:3]) or "that",
                   wants_json=bool(re.search(r"\bjson\b", prompt, re.IGNORECASE)),
                   wants_code=bool(_CODE.search(prompt)), lang=_language(prompt),
                   images=len(users[-1].images) if users else 0, rng=rng, style=style.name)

    if style.name == JUDGE_STYLE.name:
        graded = grade_verdict(prompt, request.system or "")
        return Plan(prompt=prompt, text=graded if graded is not None else judge_verdict(prompt))
    plan = Plan(prompt=prompt, text=_WRITERS[style.name](ctx))
    asked = schema_in(request.system) if style.name != "quirky" else None
    if request.response_format is not None:
        plan.text = structured_answer(style.name, ctx, request.response_format.schema_)
    elif asked is not None:
        plan.text = structured_answer(style.name, ctx, asked, fenced=True)
    elif request.tools:
        plan.text, plan.calls = tool_step(style.name, ctx, request, lambda: _WRITERS[style.name](ctx))
    if style.reasoning:
        plan.reasoning = _reasoning(ctx)
    if style.fails_on_word and FAULT_WORD in prompt.lower():
        plan.error_reason = f"the prompt mentions {FAULT_WORD!r}"
    elif style.error_rate and rng.random() < style.error_rate:
        plan.error_reason = f"seeded fault, rate {style.error_rate:.0%}"
    if plan.error_reason:
        plan.error_after = max(3, int(len(demo_tokens(plan.text)) * rng.uniform(0.3, 0.6)))
    if style.slow_start_rate and rng.random() < style.slow_start_rate:
        plan.extra_delay = style.slow_start_extra

    stops = [s for s in (request.params.stop or ()) if s]
    cut = min((plan.text.find(s) for s in stops if s in plan.text), default=-1)
    if cut >= 0:
        plan.text = plan.text[:cut]
    return plan


def _language(prompt: str) -> str:
    low = prompt.lower()
    for word, lang in _LANGS:
        if word in low:
            return lang
    return "python"


@dataclass
class _Context:
    prompt: str
    kws: list[str]
    topic: str
    turn: int
    previous: str | None
    previous_topic: str
    wants_json: bool
    wants_code: bool
    lang: str
    images: int
    rng: random.Random
    style: str = ""

    def pick(self, *options: str) -> str:
        return self.rng.choice(options)


def _ident(word: str) -> str:
    return re.sub(r"\W+", "_", word).strip("_").lower() or "item"


def _code(ctx: _Context) -> str:
    a, b = _ident(ctx.kws[0]), _ident(ctx.kws[1])
    bodies = {
        "python": f"def {a}_{b}(items):\n    \"\"\"Handle {ctx.kws[0]} for each {ctx.kws[1]}.\"\"\"\n"
                  f"    return [item for item in items if item]\n",
        "javascript": f"function {a}{b.title()}(items) {{\n  return items.filter(Boolean);\n}}\n",
        "typescript": f"function {a}{b.title()}(items: string[]): string[] {{\n  return items.filter(Boolean);\n}}\n",
        "rust": f"fn {a}_{b}(items: &[String]) -> Vec<&String> {{\n    items.iter().filter(|s| !s.is_empty()).collect()\n}}\n",
        "sql": f"SELECT {a}, COUNT(*) AS n\nFROM {b}\nGROUP BY {a}\nORDER BY n DESC;\n",
        "bash": f"#!/usr/bin/env bash\nset -euo pipefail\nfor f in \"$@\"; do echo \"{a}: $f\"; done\n",
        "go": f"func {a}{b.title()}(items []string) []string {{\n\tout := items[:0]\n\tfor _, s := range items {{\n"
              f"\t\tif s != \"\" {{\n\t\t\tout = append(out, s)\n\t\t}}\n\t}}\n\treturn out\n}}\n",
    }
    return f"```{ctx.lang}\n{known_code(ctx.style, ctx.prompt, ctx.lang) or bodies[ctx.lang]}```"


def _json_payload(ctx: _Context) -> dict:
    return {"topic": ctx.topic, "answer": f"It mostly depends on {ctx.kws[0]} and {ctx.kws[1]}.",
            "keywords": ctx.kws[:3], "confidence": round(ctx.rng.uniform(0.55, 0.95), 2)}


def _concise(ctx: _Context) -> str:
    if ctx.wants_json:
        return json.dumps(_json_payload(ctx), ensure_ascii=False)
    lead = ""
    if ctx.turn > 1:
        lead = f"(Turn {ctx.turn}) Building on my last answer about {ctx.previous_topic}: "
    if ctx.wants_code:
        return lead + f"Here you go:\n\n{_code(ctx)}"
    first = ctx.pick(
        f"{ctx.topic.capitalize()} mostly comes down to {ctx.kws[0]} and {ctx.kws[1]}.",
        f"Short answer: focus on {ctx.kws[0]}, then {ctx.kws[1]}.",
        f"In brief, {ctx.kws[0]} matters most here; {ctx.kws[2]} is secondary.",
    )
    second = ctx.pick("", f" Check {ctx.kws[2]} if results look off.", " That covers the main case.")
    if ctx.images:
        first = f"The image shows something related to {ctx.kws[0]}. " + first
    return lead + first + second


def _thorough(ctx: _Context) -> str:
    k = ctx.kws
    parts: list[str] = []
    if ctx.turn > 1:
        parts.append(f"## Follow-up (turn {ctx.turn})\n\nYou asked earlier about *{ctx.previous_topic}*. "
                     f"My previous answer began with \u201c{_snippet(ctx.previous or '')}\u201d; "
                     f"here is how {k[0]} fits in.")
    if ctx.wants_json:
        body = json.dumps(_json_payload(ctx), indent=2, ensure_ascii=False)
        parts.append(f"Here is the JSON you asked for:\n\n```json\n{body}\n```\n\n"
                     "- `topic`: what the answer is about\n- `answer`: a one-sentence summary\n"
                     "- `keywords`: the terms it hinges on\n- `confidence`: how sure the answer is (0 to 1)")
        return "\n\n".join(parts)
    parts.append(f"## Overview\n\n{ctx.pick('Good question.', 'Let us break this down.', 'There are a few parts to this.')} "
                 f"When it comes to {ctx.topic}, the essentials are **{k[0]}**, **{k[1]}** and **{k[2]}**."
                 + (f" (I looked at the {ctx.images} attached image{'s' if ctx.images > 1 else ''}.)" if ctx.images else ""))
    parts.append("## Key points\n\n" + "\n".join((
        f"- **{k[0].capitalize()}**: {ctx.pick('the starting point', 'the part most people get wrong', 'the core idea')}; "
        f"get it right before anything else.",
        f"- **{k[1].capitalize()}**: {ctx.pick('depends on the context', 'interacts with the first point', 'often overlooked')}.",
        f"- **{k[2].capitalize()}**: worth checking once the basics work.",
    )))
    parts.append("## Step by step\n\n" + "\n".join((
        f"1. Clarify what you need from {k[0]}.",
        f"2. Work through {k[1]} {ctx.pick('carefully', 'one case at a time', 'with a small example')}.",
        f"3. Verify the result against {k[2]}.",
        "4. Iterate: small changes, checked each time.",
    )))
    if ctx.wants_code:
        parts.append(f"## Example\n\n{_code(ctx)}\n\nThe function keeps the logic small so that it is easy to test.")
    parts.append(f"## Summary\n\n{ctx.topic.capitalize()} is manageable once you treat {k[0]} and {k[1]} "
                 f"separately. {ctx.pick('Hope this helps.', 'Happy to expand on any step.', '')}".rstrip())
    return "\n\n".join(parts)


def _quirky(ctx: _Context) -> str:
    k = ctx.kws
    opener = ctx.pick(f"Ooh, {ctx.topic}! Great question.", f"Okay, so, {ctx.topic}. I love this one.",
                      f"Ha, {k[0]}! You know, people ask me about this all the time.")
    if ctx.turn > 1:
        opener = (f"Oh, we're on turn {ctx.turn} already! Going back to what I said before "
                  f"(\u201c{_snippet(ctx.previous or '', 6)}\u201d), let me add something. " + opener)
    if ctx.wants_json:
        # deliberately malformed: single quotes, a bare word, a trailing comma, no closing brace
        return (f"{opener} Here's your JSON, hot off the press:\n\n"
                f"{{'topic': '{ctx.topic}', 'answer': 'it depends on {k[0]}', "
                f"'keywords': ['{k[0]}', '{k[1]}',], 'confidence': high,\n")
    middle = (f" So here's the thing: {k[0]} is kind of the heart of it, honestly. "
              f"And then there's {k[1]}, which, between you and me, trips up a lot of folks. "
              f"{ctx.pick('Fun fact:', 'Side note:', 'Random aside:')} {k[2]} is more interesting than it sounds!")
    code = f"\n\nAnyway, some code, because why not:\n\n{_code(ctx)}\n\n" if ctx.wants_code else ""
    closer = ctx.pick(f" Want me to dig deeper into {k[1]}?", f" Does that help? I could ramble about {k[2]} forever.",
                      " Anyway, that's my two cents!")
    return opener + middle + (code + closer.lstrip() if code else closer)


def _thinker(ctx: _Context) -> str:
    k = ctx.kws
    lead = f"Continuing from turn {ctx.turn - 1} on {ctx.previous_topic}: " if ctx.turn > 1 else ""
    if ctx.wants_json:
        return lead + json.dumps(_json_payload(ctx), ensure_ascii=False, indent=1)
    body = (f"**Answer.** {lead}{ctx.topic.capitalize()} hinges on {k[0]}.\n\n"
            f"1. {k[0].capitalize()} sets the constraint.\n"
            f"2. {k[1].capitalize()} follows from it.\n"
            f"3. {k[2].capitalize()} is the check that the reasoning holds.\n\n"
            f"**Why:** once {k[0]} is fixed, {k[1]} has only one consistent option.")
    if ctx.wants_code:
        body += f"\n\n{_code(ctx)}"
    return body


def _reasoning(ctx: _Context) -> str:
    k = ctx.kws
    follow = f" This is turn {ctx.turn}; my last answer covered {ctx.previous_topic}." if ctx.turn > 1 else ""
    return (f"The user is asking about {ctx.topic}.{follow} Key aspects: {k[0]}, {k[1]}, {k[2]}. "
            f"Let me consider {k[0]} first, since {k[1]} depends on it. "
            f"{'They want JSON, so the answer must be a single object. ' if ctx.wants_json else ''}"
            f"{'They want code; a short example will do. ' if ctx.wants_code else ''}"
            "I'll answer with a short numbered explanation.")


_WRITERS = {"concise": _concise, "thorough": _thorough, "quirky": _quirky, "thinker": _thinker}


# --------------------------------------------------------------------------- the demo judge

_SINGLE_ANSWER = re.compile(r"\[The Start of Assistant (A|B)'s Answer\]\n(.*?)\n\[The End of Assistant \1's Answer\]",
                            re.DOTALL)
_CONVERSATION = re.compile(r"<\|The Start of Assistant (A|B)'s Conversation with User\|>\n(.*?)\n"
                           r"<\|The End of Assistant \1's Conversation with User\|>", re.DOTALL)
_QUESTION = re.compile(r"\[User Question\]\n(.*?)\n\n\[The Start of (?:Reference|Assistant)", re.DOTALL)
_REFERENCE = re.compile(r"(?:\[|<\|)The Start of Reference Answer(?:\]|\|>)\n+(.*?)\n+(?:\[|<\|)The End of Reference "
                        r"Answer(?:\]|\|>)", re.DOTALL)
_GRADED_ANSWER = re.compile(r"\[The Start of Assistant's Answer\]\n(.*?)\n\[The End of Assistant's Answer\]", re.DOTALL)
_GRADED_CONVERSATION = re.compile(r"<\|The Start of Assistant's Conversation with User\|>\n\n(.*?)\n\n"
                                  r"<\|The End of Assistant's Conversation with User\|>", re.DOTALL)
_GRADED_QUESTION = re.compile(r"\[Question\]\n(.*?)\n\n\[The Start of", re.DOTALL)
_GRADED_TURN = re.compile(r"### User:\n(.*?)\n\n### Assistant:\n(.*?)(?=\n\n### User:\n|\Z)", re.DOTALL)
#: A grade passes from this share of key words covered up.
GRADE_PASS_SHARE = 0.5
_TURN = re.compile(r"### User:\n(.*?)\n\n### Assistant (?:A|B):\n(.*?)(?=\n\n### User:\n|\Z)", re.DOTALL)
#: Score differences below this are a tie.
JUDGE_TIE_MARGIN = 0.75


def _material(prompt: str) -> tuple[str, dict[str, str]] | None:
    """(the last question, {label: the answer to it}) of a pairwise judging
    request, or None when the text is not one."""
    answers = {m.group(1): m.group(2) for m in _SINGLE_ANSWER.finditer(prompt)}
    if set(answers) == {"A", "B"}:
        q = _QUESTION.search(prompt)
        return (q.group(1) if q else ""), answers
    conversations = {m.group(1): m.group(2) for m in _CONVERSATION.finditer(prompt)}
    if set(conversations) != {"A", "B"}:
        return None
    last: dict[str, tuple[str, str]] = {}
    for label, conv in conversations.items():
        turns = _TURN.findall(conv.strip())
        if not turns:
            return None
        last[label] = turns[-1]
    return last["A"][0], {label: t[1] for label, t in last.items()}


def _has_json(text: str) -> bool:
    candidates = [text.strip()] + re.findall(r"```(?:json)?\n(.*?)```", text, re.DOTALL)
    for c in candidates:
        try:
            json.loads(c)
            return True
        except ValueError:
            continue
    return False


def judge_score(question: str, answer: str, reference: str | None = None) -> tuple[float, int, int]:
    """(score, key words of the question covered, of how many) of one
    answer; with a reference, each of its key words covered adds too."""
    words = keywords(question, 8)
    low = answer.lower()
    covered = sum(1 for w in words if w in low)
    score = 2.0 * covered + min(len(answer.split()) / 50.0, 4.0)
    if reference:
        score += 2.0 * sum(1 for w in keywords(reference, 8) if w in low)
    if re.search(r"\bjson\b", question, re.IGNORECASE):
        score += 3.0 if _has_json(answer) else -3.0
    return score, covered, len(words)


def grade_verdict(prompt: str, system: str) -> str | None:
    """The demo grader's reply to a single-answer grading request (a rubric
    check), or None when the text is not one."""
    answer = _GRADED_ANSWER.search(prompt)
    if answer is not None:
        q = _GRADED_QUESTION.search(prompt)
        question, text = (q.group(1) if q else ""), answer.group(1)
    else:
        conv = _GRADED_CONVERSATION.search(prompt)
        turns = _GRADED_TURN.findall(conv.group(1)) if conv else []
        if not turns:
            return None
        question, text = turns[-1]
    ref = _REFERENCE.search(prompt)
    whose = "the reference answer's" if ref else "the question's"
    words = keywords(ref.group(1) if ref else question, 8)
    low = text.lower()
    covered = sum(1 for w in words if w in low)
    share = covered / len(words) if words else 0.0
    reason = f"The answer covers {covered} of {whose} {len(words)} key words."
    if "[[PASS]]" in system:
        return reason + (" It meets the rubric. [[PASS]]" if share >= GRADE_PASS_SHARE else " It falls short. [[FAIL]]")
    return reason + f" Rating: [[{1 + round(4 * share)}]]"


def judge_verdict(prompt: str) -> str:
    """The demo judge's reply: a short reason, then its verdict."""
    found = _material(prompt)
    if found is None:
        return "I could not find two answers to compare in this request. [[C]]"
    question, answers = found
    ref = _REFERENCE.search(prompt)
    reference = ref.group(1) if ref else None
    (sa, ca, n), (sb, cb, _) = (judge_score(question, answers["A"], reference),
                                judge_score(question, answers["B"], reference))
    against = ""
    if reference is not None:
        words = keywords(reference, 8)
        ra, rb = (sum(1 for w in words if w in answers[k].lower()) for k in ("A", "B"))
        against = f"of the reference answer's {len(words)} key words, A covers {ra} and B {rb}; "
    reason = (f"Assistant A covers {ca} of the question's {n} key words, Assistant B {cb}; {against}"
              f"weighing coverage, detail and format, A scores {sa:.1f} and B {sb:.1f}.")
    if abs(sa - sb) < JUDGE_TIE_MARGIN:
        return reason + " They are about equally good. [[C]]"
    return reason + (" Assistant A is better. [[A]]" if sa > sb else " Assistant B is better. [[B]]")
