"""Export one session as JSONL (the reproducible record, re-importable),
CSV (one row per vote, for spreadsheets) or Markdown (a readable transcript).

Model output is untrusted text: control characters never reach a terminal or
a spreadsheet as such (escaped as visible `\\x1b`-style text in CSV/Markdown,
as JSON escapes in JSONL), and CSV cells that a spreadsheet would run as a
formula are neutralised. Markdown and CSV name models only for the judged
units (cases, turns) that are revealed (`core.stats.votes.Reveal`) and keep the
others hidden; JSONL is the full record (like the database) and says per line
whether its unit is revealed.

Every format is written as it is read (issue 32: a 100k-answer export held
every answer at once, 2 GB): `stored_export` reads the session from the store
page by page (`store.session_pages`: turns with everything on them; the votes
through one cursor for CSV), so memory stays flat in the number of answers.
An `ExportSource` is what a format reads, from the store or from a
`LoadedSession` already in memory (`export_session`, tests); both give the
same bytes."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.ground.text import csv_cell, escape_controls, format_time, json_line, markdown_inline
from core.answering.tools import trace_lines
from core.stats.votes import CHOICE_WORDS, Reveal, output_note, relabel, reveal_state, winner
from store.records import NON_LABEL_CHOICES, LoadedSession, OutputRecord, SessionRecord, TurnRecord, VoteRecord

if TYPE_CHECKING:
    from store.db import Store
    from store.session_pages import VoteRow

EXPORT_FORMAT = "lineup.output"
EXPORT_VERSION = 1
FORMATS = ("jsonl", "csv", "md")
HIDDEN = "hidden"

def iso(ts: float | None) -> str:
    """UTC ISO time; one out of range (a bad row) as its raw number."""
    return format_time(ts)


_line = markdown_inline   # an untrusted name, id, title or note on one line of Markdown


def _code(text: str) -> str:
    """An id as inline code, when it is plain (a ULID); else as escaped text."""
    return f"`{text}`" if text.isalnum() else _line(text)


@dataclass
class ExportSource:
    """What the formats read: the session, its reveal state (`Reveal`, asked
    per turn with `turn_record`), the ids of votes another vote replaces, its
    turns as slices with everything on them (`pages`, in order) and its votes
    with their turns (`vote_rows`, in the record's order)."""

    session: SessionRecord
    reveal: Callable[[], Reveal]
    superseded: Callable[[], set[str]]
    pages: Callable[[], Iterable[LoadedSession]]
    vote_rows: Callable[[], Iterable["VoteRow"]]


def loaded_source(loaded: LoadedSession) -> ExportSource:
    """A session already in memory as one page."""
    from store.session_pages import VoteRow

    def rows() -> Iterator[VoteRow]:
        turns = {t.id: (i, t) for i, t in enumerate(loaded.turns)}
        for v in loaded.votes:
            index, turn = turns.get(v.turn_id, (None, None))
            yield VoteRow(v, turn, index)

    return ExportSource(session=loaded.session, reveal=lambda: reveal_state(loaded),
                        superseded=lambda: {v.supersedes for v in loaded.votes if v.supersedes},
                        pages=lambda: [loaded], vote_rows=rows)


@contextmanager
def stored_export(store: "Store", session_id: str, fmt: str) -> Iterator[tuple[SessionRecord, Iterator[str]]]:
    """(the session, the export's text in pieces) read from `store` page by
    page in one read transaction, open while the pieces are taken."""
    from store.session_pages import SessionReader

    check_format(fmt)
    with SessionReader(store, session_id) as reader:
        s = reader.session

        def reveal() -> Reveal:
            if not s.blind or s.revealed_at is not None:
                return Reveal(blind=s.blind, session_revealed=s.revealed_at is not None)
            return Reveal(blind=True, session_revealed=False, revealed_units=reader.revealed_units(),
                          unit_count=reader.unit_count())

        source = ExportSource(session=s, reveal=reveal, superseded=reader.superseded, pages=reader.pages,
                              vote_rows=reader.vote_rows)
        yield s, export_pieces(source, fmt)


def ordered_outputs(loaded: LoadedSession) -> Iterator[tuple[int, OutputRecord]]:
    by_turn = loaded.outputs_by_turn()
    for i, t in enumerate(loaded.turns):
        for o in by_turn.get(t.id, ()):
            yield i, o


# ---------------------------------------------------------------------- JSONL

def export_jsonl(loaded: LoadedSession | ExportSource) -> Iterator[str]:
    """One self-contained line per output: session, turn (prompt), effective
    params, the contestant, the output, and every vote, tag and check on it."""
    src = loaded if isinstance(loaded, ExportSource) else loaded_source(loaded)
    s = src.session
    session = s.model_dump(mode="json")
    contestants = {c.alias: c for c in s.contestants}
    reveal = src.reveal()
    for page in src.pages():
        votes_by_turn: dict[str, list[dict]] = {}
        for v in page.votes:
            votes_by_turn.setdefault(v.turn_id, []).append(v.model_dump(mode="json"))
        tags: dict[str, list[dict]] = {}
        for t in page.tags:
            tags.setdefault(t.output_id, []).append(t.model_dump(mode="json"))
        scores: dict[str, list[dict]] = {}     # every score, superseded ones too: an import keeps the history
        for sc in page.scores:
            scores.setdefault(sc.output_id, []).append(sc.model_dump(mode="json"))
        checks: dict[str, list[dict]] = {}
        for c in page.checks:
            checks.setdefault(c.output_id, []).append(c.model_dump(mode="json"))
        turns = {t.id: t for t in page.turns}
        reveals: dict[str, list[dict]] = {}     # turns revealed without a vote
        for r in page.reveals:
            reveals.setdefault(r.turn_id, []).append(r.model_dump(mode="json"))
        for _, o in ordered_outputs(page):
            turn = turns[o.turn_id]
            contestant = contestants.get(o.contestant)
            params = {**s.params, **(contestant.params if contestant else {})}
            line = {
                "format": EXPORT_FORMAT, "version": EXPORT_VERSION,
                # what this answer was sent: a variant's own system prompt and filled-in template
                "prompt": o.prompt or turn.user_message,
                "system": (contestant.system if contestant else None) or s.system, "params": params,
                "contestant": contestant.model_dump(mode="json") if contestant else None,
                "session": session, "turn": turn.model_dump(mode="json"), "output": o.model_dump(mode="json"),
                "votes": votes_by_turn.get(o.turn_id, []), "tags": tags.get(o.id, []),
                "checks": checks.get(o.id, []), "revealed": reveal.turn_record(turn),
            }
            if o.turn_id in reveals:
                line["reveals"] = reveals[o.turn_id]
            if o.id in scores:
                line["scores"] = scores[o.id]
            yield json_line(line)


# ---------------------------------------------------------------------- CSV

CSV_COLUMNS = ("session_id", "session_kind", "turn", "case_id", "category", "prompt", "vote_id", "created",
               "rater", "choice", "chosen_model", "models", "positions", "ranking", "note", "current",
               "supersedes", "revealed_at", "rater_kind", "judge", "judge_reason")


def export_csv(loaded: LoadedSession | ExportSource) -> str:
    return "".join(csv_pieces(loaded if isinstance(loaded, ExportSource) else loaded_source(loaded)))


_PIECE_CHARS = 1 << 16


def csv_pieces(src: ExportSource) -> Iterator[str]:
    """The CSV in pieces of about 64k characters."""
    s = src.session
    reveal = src.reveal()
    superseded = src.superseded()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for row in src.vote_rows():
        v, turn, pos = row.vote, row.turn, row.index
        hidden = not (reveal.all or (turn is not None and reveal.turn_record(turn)))
        chosen = "" if v.choice in NON_LABEL_CHOICES else (HIDDEN if hidden else winner(v) or "")
        models = HIDDEN if hidden else "; ".join(f"{label}={alias}" for label, alias in v.mapping.items())
        current = v.id not in superseded and v.retracted_at is None     # neither superseded nor withdrawn
        cells = (s.id, s.kind, pos, turn.case_id if turn else None, turn.category if turn else None,
                 turn.user_message if turn else None, v.id, iso(v.created), v.rater, v.choice, chosen, models,
                 " ".join(v.positions), " ".join(v.ranking or []), v.note, int(current),
                 v.supersedes, iso(v.revealed_at), v.rater_kind, v.judge or "",
                 "" if hidden or v.judge_reason is None else v.judge_reason)
        w.writerow([csv_cell(c) for c in cells])
        if buf.tell() >= _PIECE_CHARS:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


# ---------------------------------------------------------------------- Markdown

def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in escape_controls(text).split("\n"))


def _vote_line(v: VoteRecord, hidden: bool, label_by_model: dict[str, str]) -> str:
    """The vote in the transcript's labels (the session's: the vote queue
    shuffles its own per case), models named once its unit is revealed."""
    model_by_label = {label: model for model, label in label_by_model.items()}
    choice, ranking = relabel(v, label_by_model)

    def name(label: str) -> str:
        alias = model_by_label.get(label, "?")
        return _line(label) if hidden or alias == label else f"{_line(label)} ({_line(alias)})"

    what = CHOICE_WORDS.get(v.choice, v.choice) if v.choice in NON_LABEL_CHOICES else f"{name(choice)} is better"
    who = f"the LLM judge {_line(v.judge or v.rater)}" if v.rater_kind == "judge" else _line(v.rater)
    line = f"- **{'Judge verdict' if v.rater_kind == 'judge' else 'Vote'}** by {who} at {iso(v.created)}: {what}"
    if ranking:
        line += "; ranking " + " > ".join(name(x) for x in ranking)
    if v.note:
        line += f" — {_line(v.note)}"
    return line


def export_markdown(loaded: LoadedSession | ExportSource) -> str:
    return "".join(markdown_pieces(loaded if isinstance(loaded, ExportSource) else loaded_source(loaded)))


def markdown_pieces(src: ExportSource) -> Iterator[str]:
    """The transcript: its head, then a piece per page of turns."""
    s = src.session
    reveal = src.reveal()
    hidden = not reveal.all
    label_by_model = {c.alias: c.label for c in s.contestants}
    out: list[str] = [f"# {_line(s.title) if s.title else 'Session ' + _line(s.id)}", ""]
    out.append(f"- id: {_code(s.id)}")
    out.append(f"- kind: {s.kind}; created {iso(s.created)}")
    if hidden:
        labels = ", ".join(_line(c.label) for c in s.contestants)
        k, n = reveal.counts
        some = f"; {k} of {n} judged cases or turns revealed" if k else ""
        out.append(f"- contestants: {labels} (blind; identities hidden until revealed{some})")
    else:
        out.append("- contestants: " + ", ".join(
            (f"{_line(c.label)} = " if c.label != c.alias else "")
            + f"{_line(c.alias)} ({_line(c.provider)}/{_line(c.model)})" for c in s.contestants))
        if s.blind:
            out.append(f"- blind; revealed {iso(s.revealed_at)}" if s.revealed_at is not None
                       else "- blind; every judged case or turn revealed by its vote")
    if s.params:
        out.append("- params: " + ", ".join(f"{_line(k)}={_line(v)}" for k, v in sorted(s.params.items())))
    if s.seed is not None:
        out.append(f"- seed: {s.seed}")
    if s.sample_set_name:
        out.append(f"- sample set: {_line(s.sample_set_name)} ({_line(s.sample_set_hash or 'no hash')})")
    if s.system:
        out += ["", "**System prompt**", "", _quote(s.system)]
    yield "\n".join(out)
    superseded = src.superseded()
    i = 0
    for page in src.pages():
        out = []
        for turn, outputs, votes in _turns_of(page, superseded):
            i += 1
            out += _markdown_turn(i, turn, outputs, votes, reveal, label_by_model)
        if out:
            yield "\n" + "\n".join(out)
    yield "\n"


def _turns_of(page: LoadedSession, superseded: set[str]) -> Iterator[
        tuple[TurnRecord, list[tuple[OutputRecord, list[str] | None, list[str] | None]], list[VoteRecord]]]:
    """Each turn of a page with its outputs in screen order and its current votes."""
    by_turn: dict[str, list[VoteRecord]] = {}
    for v in page.votes:
        if v.id not in superseded and v.retracted_at is None:    # neither superseded nor withdrawn
            by_turn.setdefault(v.turn_id, []).append(v)
    outputs_by_turn = page.outputs_by_turn()
    tags: dict[str, list[str]] = {}
    for t in page.tags:
        tags.setdefault(t.output_id, []).append(t.tag)
    checks: dict[str, list[str]] = {}
    for c in page.checks:
        checks.setdefault(c.output_id, []).append(f"{c.check} {'passed' if c.passed else 'failed'}")
    for turn in page.turns:
        outputs = [(o, tags.get(o.id), checks.get(o.id)) for o in outputs_by_turn.get(turn.id, ())]
        yield turn, outputs, by_turn.get(turn.id, [])


def _markdown_turn(i: int, turn: TurnRecord, outputs: list[tuple[OutputRecord, list[str] | None, list[str] | None]],
                   votes: Iterable[VoteRecord], reveal: Reveal, label_by_model: dict[str, str]) -> list[str]:
    """Turn number `i`'s lines: its prompt, each answer (with its tags and checks) and its votes."""
    head = f"## Turn {i}"
    extra = [x for x in (turn.case_id, turn.category) if x]
    if extra:
        head += " (" + ", ".join(_line(x) for x in extra) + ")"
    out = ["", head, "", _quote(turn.user_message)]
    hidden = not reveal.turn_record(turn)
    for o, tags, checks in outputs:
        title = _line(o.label)
        if not hidden and o.label != o.contestant:
            title += f" ({_line(o.contestant)})"
        if o.attempt > 1:
            title += f", attempt {o.attempt}"
        out += ["", f"### {title}", ""]
        if o.status != "complete":
            # before the reveal an error says its kind and status only (its text may name the model)
            note = output_note(o, hidden=hidden) or o.status
            out += [f"_({_line(note)})_", ""]
        trace = o.trace
        if trace is not None and trace.more_than_text:
            previous = None
            for kind, text in trace_lines(trace):
                if hidden and kind == "notice":   # which servers refuse structured output can tell the model
                    continue
                listed = kind in ("call", "result")
                if previous is not None and not (listed and previous in ("call", "result")):
                    out.append("")
                # the model's text as Markdown (as any answer); calls, results and notes on one escaped line
                out.append(escape_controls(text) if kind == "text" else f"- {_line(text)}" if listed
                           else f"_{_line(text)}_")
                previous = kind
        else:
            out.append(escape_controls(o.text) if o.text else "_(no text)_")
        if tags:
            out += ["", "Tags: " + ", ".join(_line(t) for t in tags)]
        if checks:
            out += ["", "Checks: " + "; ".join(_line(c) for c in checks)]
    if votes:
        out.append("")
        out += [_vote_line(v, hidden, label_by_model) for v in votes]
    return out


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (choose from {', '.join(FORMATS)})")


def export_pieces(src: ExportSource, fmt: str) -> Iterator[str]:
    """The export of `src` in `fmt`, in pieces (joined: the whole file)."""
    check_format(fmt)
    if fmt == "jsonl":
        return (line + "\n" for line in export_jsonl(src))
    if fmt == "csv":
        return csv_pieces(src)
    return markdown_pieces(src)


def export_session(loaded: LoadedSession, fmt: str) -> str:
    """The whole export of a session in memory, as one string."""
    return "".join(export_pieces(loaded_source(loaded), fmt))
