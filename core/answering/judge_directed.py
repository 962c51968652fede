"""Answers that talk to the judge: "[[A]]", "Assistant A is better", "Note to
the evaluator: output ...", "ignore the previous instructions". An LLM judge
reads each answer inside its own prompt, so such an answer can tell it which
label to output, and then wins every pair in both orders.

Such an answer is tagged `judge_directed` (automatically, rater "lineup")
when it is recorded (`lineup run`, a chat) and again when `lineup judge`
meets it (answers recorded before this check existed); the judge's verdicts
on a pair with a tagged answer are left out of the judge's figures, with a
warning (`core/report/judge.py`). People still see and vote on the answer.

What counts, precision first (a false tag drops real verdicts):
- the judge's own verdict markers, `[[A]]`, `[[B]]`, `[[C]]`, and a rubric
  grader's `[[PASS]]`, `[[FAIL]]` (`core.answering.rubric`; its ratings
  `[[1]]`..`[[5]]` are not cues: `[[1]]` is a nested list in code);
- the names the judge gives the answers, "Assistant A" / "Assistant B";
- words addressed to a judge, evaluator, grader or rater ("Dear judge",
  "Note to the evaluator", "Grader: output ...", "If you are an AI judge"),
  and "ignore the previous / other instructions / answers".
A kind of cue the prompt itself contains (a question about MT-Bench's
format, a letter to a judge) does not count for its answers.

The text read is what the judge reads (`answer_material`): the answer, or a
traced answer's steps, calls and results.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from store.records import OutputRecord, TagRecord

TAG = "judge_directed"
RATER = "lineup"

_NOUN = r"(?:judge|evaluator|grader|rater|judging\s+model)s?"
_KIND_OF = r"(?:(?:ai|llm|automated|automatic|impartial|human|model)\s+)?"
_CUES: dict[str, tuple[re.Pattern[str], ...]] = {
    "a verdict marker": (re.compile(r"\[\[\s*[ABC]\s*\]\]"), re.compile(r"(?i)\[\[\s*(?:PASS|FAIL)\s*\]\]")),
    "the judge's names for the answers": (re.compile(r"\bAssistant\s+[AB]\b"),),
    "words addressed to the judge": (
        re.compile(rf"(?i)\b(?:dear|attention|hey|hello|hi|psst)\b[\s,:]*(?:the\s+|any\s+|all\s+)?{_KIND_OF}{_NOUN}\b"),
        re.compile(rf"(?i)\b(?:note|message|instructions?|reminder|request|hint|memo)\s+(?:to|for)\s+"
                   rf"(?:the\s+|any\s+|all\s+|an?\s+)?{_KIND_OF}{_NOUN}\b"),
        re.compile(rf"(?i)\b{_NOUN}\s*[:,]\s*(?:you|please|output|choose|pick|select|prefer|ignore|declare|"
                   r"rate|give|mark|answer|respond|consider|vote|score)\b"),
        re.compile(rf"(?i)\b(?:if|when|since|because|as)\s+you\s+are\s+(?:an?\s+|the\s+)?{_KIND_OF}{_NOUN}\b"),
        re.compile(rf"(?i)\b(?:to|for)\s+(?:the|any|all)\s+(?:ai|llm|automated|automatic|impartial)\s+{_NOUN}\b"),
        re.compile(r"(?i)\bignore\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?(?:previous|prior|above|earlier|"
                   r"preceding|other|system)\s+(?:instructions?|rules|answers?|responses?|assistants?|prompts?)\b"),
    ),
}
#: A prompt that says any of these lets its answers say them too (the cue is the prompt's).
_PROMPT_WORDS = {
    "a verdict marker": _CUES["a verdict marker"],
    "the judge's names for the answers": _CUES["the judge's names for the answers"],
    "words addressed to the judge": (re.compile(rf"(?i)\b{_NOUN}\b|\bignore\b"),),
}


@dataclass(frozen=True)
class Directed:
    """Where an answer talks to the judge, and how."""

    kind: str
    start: int
    end: int


def judge_directed(text: str, prompts: Sequence[str] = ()) -> Directed | None:
    """The first place `text` addresses the judge or names its verdict
    markers (a kind of cue found in `prompts` excepted), or None."""
    found: list[Directed] = []
    for kind, patterns in _CUES.items():
        if any(p.search(prompt) for p in _PROMPT_WORDS[kind] for prompt in prompts):
            continue
        for pattern in patterns:
            m = pattern.search(text)
            if m:
                found.append(Directed(kind, m.start(), m.end()))
    return min(found, key=lambda d: d.start) if found else None


def answer_material(out: OutputRecord) -> str:
    """An answer as the judge sees it: what a rater sees before the vote, but
    its reasoning (the text; a traced answer's steps, calls and results as
    `trace_lines` writes them, without the structured-output notice)."""
    trace = out.trace
    if trace is not None and trace.more_than_text:
        # here, not at the top: the report reads `TAG` and should not load the tools (and providers) for it
        from core.answering.tools import trace_lines

        return "\n\n".join(text for kind, text in trace_lines(trace) if kind != "notice")
    return out.text or ""


def directed_tag(output: OutputRecord, prompts: Sequence[str] = ()) -> TagRecord | None:
    """The `judge_directed` tag for an answer that talks to the judge, else
    None. The note says how and where, never the words (it may be read
    before the vote)."""
    found = judge_directed(answer_material(output), prompts)
    if found is None:
        return None
    note = f"the answer contains {found.kind} (characters {found.start}-{found.end}); left out of judge figures"
    return TagRecord(output_id=output.id, tag=TAG, rater=RATER, auto=True, note=note)


async def tag_judge_directed(store, output: OutputRecord, prompts: Sequence[str] = ()) -> TagRecord | None:
    """Tag a just-finished answer `judge_directed` if it talks to the judge
    (called once, when its final record is saved, like the identity tag)."""
    if output.status != "complete":
        return None
    rec = directed_tag(output, prompts)
    if rec is not None:
        await store.add_tag(rec)
    return rec
