"""Rubric grading: a model grades one answer against a case's rubric (and its
reference, when the case has one), and its verdict is saved as the case's
`rubric` check result (`core.answering.checks.RubricCheck`).

Why a module of its own: every other check is a pure function of the
answer, run in `core.answering.checks`; this one asks a model, so it is
asynchronous, time-limited and can fail for reasons that are not the
answer's (the grader's server). A grading that fails is not a verdict: it is
not recorded, the unit counts as failed, and running the same command again
asks only for the gradings missing (`core.answering.runner`).

- Blind: the grader's material is the case's user turns, the answers'
  text as a rater sees it (`core.answering.judge_directed.answer_material`,
  no reasoning), the rubric and the reference. No model's name, alias,
  provider or label is in it.
- The prompt follows MT-Bench's single-answer grading ("single-v1", and
  "single-ref-v1" with a reference answer, Zheng et al. 2023), with the
  rubric in place of the generic criteria and the verdict as `[[PASS]]` /
  `[[FAIL]]` or `[[1]]`..`[[5]]`; the last marker in the reply counts.
- The grader's reply is untrusted text like any answer: scrubbed of every
  key of the run, its whitespace folded, controls escaped, cut to
  `MAX_REASON_CHARS` (`core.ground.text.server_text`). An answer that
  addresses the grader is tagged `judge_directed` when it is recorded (the
  runner, `core.answering.judge_directed`); its grade is kept and marked.
- Every request has a time limit (`DEFAULT_TIMEOUT_S` from its first byte
  sent to its verdict) on top of the provider's own, and is cancelled at
  once by a stop (Ctrl-C cancels the run's scope; nothing here shields it).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import anyio

from core.answering.checks import CheckOutcome, RubricCheck
from core.answering.judge_directed import answer_material, judge_directed
from core.ground.text import server_text
from providers.events import ChatRequest, Message, SamplingParams, StreamResult
from providers.model_config import ModelConfig
from store.records import OutputRecord

#: The most of a grader's reason kept in the check's detail.
MAX_REASON_CHARS = 2000
#: Seconds one grading may take, whole (the provider's connect and read limits apply too).
DEFAULT_TIMEOUT_S = 180.0
#: Gradings in flight at once per grader.
DEFAULT_CONCURRENCY = 4

#: MT-Bench's single-answer grading ("single-v1"), its criteria replaced by the rubric.
INSTRUCTIONS = (
    "Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant "
    "to the user question displayed below. Judge it against the rubric given, and only against it. Begin "
    "your evaluation by providing a short explanation. Be as objective as possible."
)
#: ... and with a reference answer ("single-ref-v1").
REFERENCE_INSTRUCTIONS = (
    "Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant "
    "to the user question displayed below. Judge it against the rubric given, and only against it. You will "
    "be given a reference answer and the assistant's answer. Begin your evaluation by comparing the "
    "assistant's answer with the reference answer. Identify and correct any mistakes. Be as objective as "
    "possible."
)
FORMATS = {
    "pass_fail": "After providing your explanation, output your final verdict by strictly following this format: "
                 "\"[[PASS]]\" if the response meets the rubric, \"[[FAIL]]\" if it does not.",
    "1-5": "After providing your explanation, you must rate the response on a scale of 1 to 5 by strictly "
           "following this format: \"[[rating]]\", for example: \"Rating: [[4]]\".",
}
MULTI_NOTE = " Your evaluation should focus on the assistant's answer to the last user question."

_PASS_FAIL = re.compile(r"\[\[\s*(PASS|FAIL)\s*\]\]", re.IGNORECASE)
_RATING = re.compile(r"\[\[\s*([1-5])\s*\]\]")


def parse_grade(text: str, scale: str) -> int | None:
    """The grade in a grader's reply: 1 (pass) / 0 (fail), or the rating
    1..5; the last marker counts (the verdict follows the explanation); None
    when there is none."""
    if scale == "pass_fail":
        found = _PASS_FAIL.findall(text or "")
        return None if not found else int(found[-1].upper() == "PASS")
    ratings = _RATING.findall(text or "")
    return int(ratings[-1]) if ratings else None


@dataclass(frozen=True)
class GradingPrompt:
    """The grader's instructions and material for one check."""

    rubric: str
    scale: str = "pass_fail"

    def instructions(self, reference: bool, multi: bool) -> str:
        base = REFERENCE_INSTRUCTIONS if reference else INSTRUCTIONS
        return base + (MULTI_NOTE if multi else "") + " " + FORMATS[self.scale]

    def messages(self, turns: Sequence[str], answers: Sequence[str], reference: str | None) -> tuple[str, str]:
        """(system, user): `turns` the user messages up to the graded answer,
        `answers` the assistant's answers to them (the last is graded)."""
        ref = (f"[The Start of Reference Answer]\n{reference}\n[The End of Reference Answer]\n\n"
               if reference else "")
        rubric = f"[Rubric]\n{self.rubric.strip()}\n\n"
        if len(turns) == 1:
            user = (f"{rubric}[Question]\n{turns[0]}\n\n{ref}"
                    f"[The Start of Assistant's Answer]\n{answers[0]}\n[The End of Assistant's Answer]")
        else:
            conversation = "\n\n".join(f"### User:\n{q}\n\n### Assistant:\n{a}"
                                       for q, a in zip(turns, answers, strict=True))
            user = (f"{rubric}{ref}<|The Start of Assistant's Conversation with User|>\n\n{conversation}\n\n"
                    "<|The End of Assistant's Conversation with User|>")
        return self.instructions(bool(reference), len(turns) > 1), user

    def hash(self) -> str:
        """sha256 of what defines the grading but the material (recorded with each grade)."""
        blob = json.dumps([self.rubric, self.scale, INSTRUCTIONS, REFERENCE_INSTRUCTIONS, FORMATS, MULTI_NOTE])
        return hashlib.sha256(blob.encode()).hexdigest()


class GraderError(Exception):
    """A grading that gave no verdict (the grader's error, time-out, no
    marker): not a result on the answer; asked again by the next run."""


def grader_for(check: RubricCheck, default: str | None) -> str | None:
    """The alias that grades `check`: its own `judge`, else the run's default."""
    return check.judge or default


def grader_aliases(cases: Sequence[Any], default: str | None) -> tuple[list[str], list[str]]:
    """(the grader aliases a set's rubric checks need, in order; the ids of
    cases with a rubric check no grader is named for)."""
    needed: list[str] = []
    missing: list[str] = []
    for case in cases:
        for check in case.all_checks:
            if not isinstance(check, RubricCheck):
                continue
            alias = grader_for(check, default)
            if alias is None:
                if case.id not in missing:
                    missing.append(case.id)
            elif alias not in needed:
                needed.append(alias)
    return needed, missing


class Graders:
    """The graders of one run: their configs, providers (made on first use,
    closed by `aclose`), and a limit on gradings in flight per grader.
    `secrets`: every key of the run, scrubbed from each reply."""

    def __init__(self, configs: Mapping[str, ModelConfig], default: str | None = None, *,
                 secrets: Sequence[str] = (), concurrency: int = DEFAULT_CONCURRENCY,
                 timeout_s: float | None = None, params: SamplingParams = SamplingParams()) -> None:
        self.configs = dict(configs)
        self.default = default
        self.timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        self.params = params
        self._providers: dict[str, Any] = {}
        self._limits = {alias: anyio.CapacityLimiter(concurrency) for alias in self.configs}
        keys = tuple(dict.fromkeys([*secrets, *(s for c in self.configs.values() for s in c.secrets())]))
        self._keys = keys

    def _scrub(self, text: str) -> str:
        if not self._keys:
            return text
        from providers.secrets import scrubber_for

        return scrubber_for(self._keys).scrub(text)

    def _provider(self, alias: str) -> Any:
        if alias not in self._providers:
            from providers import make_provider

            self._providers[alias] = make_provider(self.configs[alias])
        return self._providers[alias]

    async def grade(self, check: RubricCheck, turns: Sequence[str], answers: Sequence[OutputRecord],
                    reference: str | None, prompts: Sequence[str] = ()) -> CheckOutcome:
        """Grade the last of `answers` (to the user messages `turns`) on
        `check`; raises `GraderError` when no verdict came."""
        alias = grader_for(check, self.default)
        if alias is None or alias not in self.configs:
            raise GraderError("no grader named for this rubric (judge, --grader or the set's header)")
        cfg = self.configs[alias]
        prompt = GradingPrompt(check.rubric, check.scale)
        material = [answer_material(a) for a in answers]
        system, user = prompt.messages(list(turns), material, reference)
        request = ChatRequest(model=cfg.model, messages=(Message(role="user", content=user),), system=system,
                              params=cfg.params.merged(self.params))
        result = StreamResult()
        async with self._limits.get(alias) or nullcontext():
            provider = self._provider(alias)
            with anyio.move_on_after(self.timeout_s) as scope:
                async for event in provider.stream(request):
                    result.add(event)
        if scope.cancelled_caught:
            raise GraderError(f"timed out after {self.timeout_s:g} s")
        if result.error is not None:
            raise GraderError(f"grader error ({result.error.kind.value})")
        reply = self._scrub(result.text)
        grade = parse_grade(reply, check.scale)
        if grade is None:
            marker = "[[PASS]] or [[FAIL]]" if check.scale == "pass_fail" else "[[1]] to [[5]]"
            raise GraderError(f"no verdict ({marker}) in the reply")
        return self._outcome(check, alias, grade, reply, reference is not None, prompt,
                             judge_directed(material[-1], prompts))

    def _outcome(self, check: RubricCheck, alias: str, grade: int, reply: str, with_reference: bool,
                 prompt: GradingPrompt, directed: Any) -> CheckOutcome:
        if check.scale == "pass_fail":
            passed, score, said = bool(grade), float(grade), "PASS" if grade else "FAIL"
        else:
            passed, score, said = grade >= check.pass_at, (grade - 1) / 4.0, f"{grade}/5"
        reason = server_text(" ".join(reply.split()), None, MAX_REASON_CHARS)
        flag = ""
        extra: dict[str, Any] = {"grade": grade, "graded_by": alias, "with_reference": with_reference,
                                 "grading_prompt": prompt.hash()}
        if directed is not None:
            extra["judge_directed"] = directed.kind
            flag = f"; the answer talks to the grader ({directed.kind}: tagged judge_directed)"
        detail = f"{said} by {server_text(alias)}{' with the reference' if with_reference else ''}{flag}: {reason}"
        return CheckOutcome(type=check.type, name=check.label, spec=check.model_dump(by_alias=True, exclude_none=True),
                            passed=passed, score=score, detail=detail, extra=extra)

    async def aclose(self) -> None:
        for provider in self._providers.values():
            try:
                await provider.aclose()
            except Exception:
                pass
        self._providers.clear()
