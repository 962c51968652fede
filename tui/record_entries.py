"""Saved records as `StreamView.set_conversation` entries, shared by the
resumed chat, the replay and the vote queue."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.answering.attachments import placeholder
from core.answering.tools import trace_lines
from core.stats.votes import output_note, shown_prompt, shown_reasoning

if TYPE_CHECKING:
    from core.answering.sessions import TurnRecord
    from core.stats.votes import OutputRecord

Entry = tuple[str, str]
_ROLE = {"text": "assistant", "call": "tool", "result": "tool", "notice": "note", "stop": "note"}


def prompt_entry(turn: TurnRecord, out: OutputRecord | None = None, *, hidden: bool = False,
                 templated: bool = False) -> Entry:
    """A saved turn's prompt as `out` answered it (edited and re-sent, a
    variant's template filled in, or as first typed), with a placeholder line
    per attached image; while `hidden`, never a variant's own prompt
    (`core.stats.votes.shown_prompt`)."""
    text = shown_prompt(turn.user_message, out, hidden=hidden, templated=templated)
    return ("user", text + "".join("\n" + placeholder(img) for img in turn.images))


def answer_entries(out: OutputRecord, note: str | None = None, *, hidden: bool = False,
                   show_reasoning: bool = False) -> list[Entry]:
    """One saved answer: its reasoning, its text (for a traced answer: each
    step's text, calls and results in order, `core.answering.tools.trace_lines`), then
    a note line if any. While `hidden` (blind, before the reveal) the notice
    that a server refused native structured output is left out: which
    servers do could tell which model this is; so is the reasoning, unless
    `show_reasoning` (`core.stats.votes.shown_reasoning`)."""
    entries: list[Entry] = []
    reasoning = shown_reasoning(out.reasoning, hidden=hidden, show_reasoning=show_reasoning)
    if reasoning:
        entries.append(("reasoning", reasoning))
    trace = out.trace
    if trace is not None and trace.more_than_text:
        entries += [(_ROLE[kind], text) for kind, text in trace_lines(trace) if not (hidden and kind == "notice")]
    else:
        entries.append(("assistant", out.text or ""))
    if note:
        entries.append(("note", note))
    return entries


def pane_status(out: OutputRecord) -> str:
    """The pane header status of a saved answer."""
    return {"complete": "done"}.get(out.status, out.status)


def status_note(out: OutputRecord, *, hidden: bool) -> str | None:
    """'error (kind): message' ('error (kind, HTTP n) — details after the vote'
    while `hidden`: see `core.stats.votes.error_line`), 'cancelled' or
    'interrupted'; None when complete."""
    return output_note(out, hidden=hidden)
