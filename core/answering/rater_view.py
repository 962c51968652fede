"""What a rater's browser may receive (`lineup rate`): the one place that
decides it, `rater_view`. Everything the web front end sends about a case is
built here from the vote queue's state; the web layer adds nothing about a
case of its own.

Before the vote a case is its prompts and, per screen label, the answers' text
(a traced answer: its steps, calls and results without the notice that a
server refused structured output), a status word and the error line as
`core.stats.votes.output_note` gives it blind (kind and HTTP status only), and
the session's dimensions with this rater's own 1-5 scores per label. Never:
contestant aliases, models, providers, ids of records (ULIDs carry their
creation time, so an answer's id would time it), timings, token counts, tags
set automatically, reasoning (whether there is any, and how it reads, tells
models apart: `core.stats.votes.shown_reasoning` decides, as for every blind
view, and here it stays hidden until the names are shown). After the vote:
what was voted in labels, the checks' results per label, the case's reference
note, a gold pair's outcome, and the names only when the owner chose `--reveal
after-vote`. All text has control and bidi characters escaped
(`core.ground.text.escape_controls`); the page sets it as text, never as
markup."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.answering.attachments import placeholder
from core.ground.text import escape_controls
from core.answering.tools import trace_lines
from core.answering.vote_queue import check_summary
from core.stats.votes import bad_choice, describe, output_note, shown_prompt, shown_reasoning

if TYPE_CHECKING:
    from core.answering.vote_queue import QueueItem, VoteQueue
    from store.records import OutputRecord, TurnRecord

_ROLE = {"text": "answer", "call": "tool", "result": "tool", "notice": "note", "stop": "note"}


def _t(text: object) -> str:
    return escape_controls(text)


def _prompt(turn: TurnRecord, out: OutputRecord | None, hidden: bool = False, templated: bool = False) -> dict[str, str]:
    text = shown_prompt(turn.user_message, out, hidden=hidden, templated=templated)
    return {"role": "prompt", "text": _t(text + "".join("\n" + placeholder(img) for img in turn.images))}


def _answer(out: OutputRecord, hidden: bool) -> list[dict[str, str]]:
    trace = out.trace
    reasoning = shown_reasoning(out.reasoning, hidden=hidden)
    if trace is not None and trace.more_than_text:
        entries = [{"role": _ROLE[kind], "text": _t(text)} for kind, text in trace_lines(trace) if kind != "notice"]
    else:
        entries = [{"role": "answer", "text": _t(out.text or "")}]
    if reasoning:
        entries.insert(0, {"role": "reasoning", "text": _t(reasoning)})
    note = output_note(out, hidden=True)
    if note:
        entries.append({"role": "note", "text": _t(note)})
    return entries


def _pane(item: QueueItem, alias: str, label: str, hidden: bool) -> dict[str, Any]:
    entries: list[dict[str, str]] = []
    last: OutputRecord | None = None
    templated = any(getattr(c, "template", None) for c in item.contestants if c.alias == alias)
    for t in item.context:
        out = item.outputs.get((t.id, alias))
        entries.append(_prompt(t, out, hidden, templated))
        if out is not None:
            entries += _answer(out, hidden)
    for r, turns in enumerate(item.repeats):
        if len(item.repeats) > 1:
            entries.append({"role": "note", "text": f"repeat {r + 1} of {len(item.repeats)}"})
        for t in turns:
            out = item.outputs.get((t.id, alias))
            entries.append(_prompt(t, out, hidden, templated))
            if out is not None:
                entries += _answer(out, hidden)
                last = out
    status = "idle" if last is None else {"complete": "done"}.get(last.status, last.status)
    return {"label": label, "status": status, "entries": entries}


def rater_view(queue: VoteQueue, *, handle: str, names: bool, tags: tuple[str, ...], note: str | None,
               progress: dict[str, int], message: str | None = None) -> dict[str, Any]:
    """The JSON a rater's page gets for the queue's current state. `handle`
    is the page's opaque name for the case on screen (a vote must carry it);
    `names`: the owner reveals models after the vote."""
    view: dict[str, Any] = {"progress": progress, "message": _t(message) if message else None,
                            "note": _t(note) if note else None, "tags": [_t(t) for t in tags]}
    item = queue.current
    if item is None:
        view["state"] = "done"
        return view
    labels = queue.labels
    # reasoning, like the names, is shown only after the vote and only where the names are
    hidden = queue.waiting or not names or queue.gold is not None
    view.update(handle=handle, labels=labels, bad=bad_choice(len(labels)), rank=len(labels) > 2,
                case=_t(item.case_id) if item.case_id else None,
                category=_t(item.category) if item.category else None,
                panes=[_pane(item, alias, label, hidden) for label, alias in zip(labels, queue.order, strict=True)],
                mine={label: sorted({_t(t.tag) for o in _outs(item, alias) for t in item.tags.get(o.id, ())
                                     if not t.auto and t.rater == queue.rater})
                      for label, alias in zip(labels, queue.order, strict=True)})
    # the session's dimensions, scored 1-5 per answer before or after the vote (not on a check pair)
    dimensions = item.dimensions if queue.gold is None else ()
    view["dimensions"] = [{"name": _t(d.name), "description": _t(d.description) if d.description else None}
                          for d in dimensions]
    view["scores"] = {label: {d.name: v for d in dimensions if (v := queue.score_of(label, d.name)) is not None}
                      for label in labels} if dimensions else {}
    if queue.waiting:
        view["state"] = "vote"
        return view
    view["state"] = "voted"
    last = queue.history[-1] if queue.history and queue.history[-1].item is item else None
    if last is not None and last.gold is not None:
        g = last.gold
        kind = "a known better answer against a worse one" if g.source == "case" else "one answer was a spoiled copy"
        view["voted"] = f"a check pair ({kind}): " + ("you saw it" if g.correct else "you missed it")
    elif last is not None and last.votes:
        view["voted"] = _t("voted " + describe(last.votes[0], revealed=False))
    else:
        view["voted"] = "done"
    gold = queue.gold is not None
    view["checks"] = {} if gold else {label: _t(s) for label, alias in zip(labels, queue.order, strict=True)
                                      if (s := check_summary(item, alias))}
    view["reference"] = _t(item.reference) if item.reference and not gold else None
    view["names"] = {label: _t(alias) for label, alias in zip(labels, queue.order, strict=True)} if names and not gold else None
    return view


def _outs(item: QueueItem, alias: str) -> list[OutputRecord]:
    return [o for t in item.targets if (o := item.outputs.get((t.id, alias))) is not None]
