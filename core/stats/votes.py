"""What a vote means, decided in one place (no UI, no SQL).

Every view (chat, vote queue, replay, exports, sessions list, report, ratings)
goes through these functions, so a vote is read the same way everywhere:

- kinds: two-way (a label, `tie`, `both_bad`), N-way (a label, `tie`,
  `all_bad`), and a full ranking (best first) with its pick;
- validation: `check_choice` (the shape, against the labels judged) and
  `answer_warnings` (the chosen answer errored, was cancelled, is missing...:
  the UI shows these and asks for confirmation); `record_problem` is the same
  check for a stored record, which the store applies on every write (the
  record's own rules live beside the record, in `store.records`);
- attribution: a label means the model the vote's OWN `mapping` says, never the
  session's labels (the vote queue shuffles labels per case); the lookup
  (`label_of`, `model_of`) and the per-model outcome (`outcome`: win / loss /
  tie / bad) are the record's own rules (`store.records`), so the columns the
  store derives from a vote (`winner`, `vote_contestant.outcome`) say the same;
  `verdict` is what a vote says in those terms, so votes shown in different
  layouts compare;
- one current vote per rater, judged unit and set of models: a later one
  supersedes the earlier (the store applies it under its write lock, so two
  processes voting at once leave one; a vote package's are superseded
  within the package only, `core.exchange.share`);
- reveal per judged unit: a case (its follow-ups, one repeat) or a chat turn is
  revealed once a vote on it was revealed, once the rater revealed it without
  a vote, or when the whole session was;
- what an answer's error may say before its unit is revealed (`error_line`):
  its kind and HTTP status only, never its text (the store keeps the true text);
- an answer's reasoning before its unit is revealed (`reasoning_hidden`,
  `shown_reasoning`): nothing at all, unless the session was started with
  reasoning shown for all (`shows_reasoning`);
- ratings: `decompose_vote` turns a vote into pairwise outcomes;
- who voted: a person (`HUMAN`) or an LLM judge (`JUDGE`, `lineup judge`).
  Every figure made of people's votes counts people's votes only
  (`counts_as_human`); a judge's votes count only where a figure asks for
  them, under the judge's own name (`judge_rater`). A judge judges one pair
  at a time, in both orders (`--swap`): `pair_score` reads what one vote says
  about a pair and `combine_orders` what the orders say together (a verdict
  that flips with the order is a tie, and position-inconsistent);
- gold pairs (a known better answer, rater quality): `gold_correct`.

Why this file is past 600 lines: it is the one owner of what a vote means;
splitting the rules above would let two modules disagree on them."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from store.ids import new_ulid
from store.records import (
    ALL_BAD,
    BOTH_BAD,
    NON_LABEL_CHOICES,
    TIE,
    LoadedSession,
    OutputRecord,
    SessionRecord,
    TurnRecord,
    VoteError,
    VoteOutcome,
    VoteRecord,
    check_choice,
    label_of,  # noqa: F401  (part of this module's API: the mapping lookup is the record's)
    model_of,
    outcome_of,
    shared_outcome,
    unit_key,
)
from store.records import vote_problem as record_problem  # noqa: F401  (part of this module's API)

#: The blind labels, in the order contestants get them: the one list every
#: session, run, load profile, package and synthetic record takes them from.
LABELS = "ABCDEFGH"
#: As many contestants as there are labels (and vote keys).
MAX_CONTESTANTS = len(LABELS)


def labels_for(n: int) -> str:
    """The labels of `n` contestants (A, B, …); ValueError past the last label,
    so that no caller indexes past it."""
    if not 0 <= n <= MAX_CONTESTANTS:
        raise ValueError(f"at most {MAX_CONTESTANTS} models side by side (labels A to {LABELS[-1]}), not {n}")
    return LABELS[:n]
TIE_CHOICES = NON_LABEL_CHOICES
CHOICE_WORDS = {TIE: "a tie", BOTH_BAD: "both bad", ALL_BAD: "all bad"}


# --------------------------------------------------------------------------- kinds


def bad_choice(n_labels: int) -> str:
    """"Both bad" for two answers, "all bad" for more."""
    return BOTH_BAD if n_labels == 2 else ALL_BAD


def valid_choices(labels: Sequence[str]) -> list[str]:
    """What a new vote on these labels may choose: a label, tie, or both/all bad."""
    return list(labels) + [TIE, bad_choice(len(labels))]


def ranking_missing(ranking: Sequence[str], labels: Sequence[str]) -> list[str]:
    """The labels a ranking in progress has not placed yet (screen order)."""
    return [lab for lab in labels if lab not in ranking]


def ranking_with_last_implied(ranking: Sequence[str], labels: Sequence[str]) -> list[str]:
    """A ranking that places all but one label, with that one placed last. A
    UI may save this only after it has shown the rater the implied last place."""
    missing = ranking_missing(ranking, labels)
    if len(missing) != 1:
        raise VoteError(f"{len(missing)} labels are not placed; only the last one can be implied")
    return [*ranking, missing[0]]


# --------------------------------------------------------------------------- warnings


@dataclass(frozen=True, slots=True)
class VoteWarning:
    """Something the rater should confirm before the vote is saved. `message`
    names the label only, never the model, so it is safe to show blind."""

    label: str
    problem: Literal["missing", "error", "cancelled", "interrupted", "streaming", "empty"]
    message: str


class VoteNeedsConfirmation(VoteError):
    """The vote picks an answer with a problem; cast it again with `confirm=True`."""

    def __init__(self, warnings: Sequence[VoteWarning]) -> None:
        self.warnings = list(warnings)
        super().__init__("; ".join(w.message for w in self.warnings) + ". Vote again to confirm.")


def answer_warnings(choice: str, answers: Mapping[str, OutputRecord | None]) -> list[VoteWarning]:
    """Warnings when the answer chosen as best (`answers`: label -> the answer
    judged, None when there is none) errored, was cancelled, cut short, is
    still streaming, empty or missing. Tie / bad choices pick no answer."""
    if choice in NON_LABEL_CHOICES:
        return []
    out = answers.get(choice)
    if out is None:
        return [VoteWarning(choice, "missing", f"{choice} has no answer")]
    if out.status == "error":
        kind = f" ({out.error_kind.replace('_', ' ')})" if out.error_kind else ""
        return [VoteWarning(choice, "error", f"{choice}'s answer failed{kind}")]
    if out.status == "cancelled":
        return [VoteWarning(choice, "cancelled", f"{choice}'s answer was cancelled")]
    if out.status == "interrupted":
        return [VoteWarning(choice, "interrupted", f"{choice}'s answer was interrupted before it ended")]
    if out.status == "streaming":
        return [VoteWarning(choice, "streaming", f"{choice}'s answer is still streaming")]
    if not (out.text or "").strip():
        return [VoteWarning(choice, "empty", f"{choice}'s answer is empty")]
    return []


# --------------------------------------------------------------------------- errors before the reveal

AFTER_THE_VOTE = "details after the vote"
# What our HTTP clients put first in the message of a refused request ("HTTP 500: ...").
_LEADING_STATUS = re.compile(r"HTTP ([1-5]\d\d)\b")


def error_status(message: str | None) -> int | None:
    """The HTTP status at the start of an error message, as our clients write
    it; None when there is none (a timeout, a cut stream, a refused connection)."""
    m = _LEADING_STATUS.match(message or "")
    return int(m.group(1)) if m else None


def error_line(kind: str | None, message: str | None, *, hidden: bool) -> str:
    """An answer's error as a person sees it: on screen, in a notification,
    in an export. While its unit is `hidden` (blind, not revealed) only what
    cannot name a model: its kind and HTTP status, "error (server, HTTP 500) —
    details after the vote". The text of an error comes from the server, a
    proxy or our own client (hosts, model ids, vendor names, known or not), so
    none of it is shown; no list of names can tell which words give a model
    away. Once revealed: the stored message as it came (keys already scrubbed)."""
    if hidden:
        status = error_status(message)
        what = ", ".join(x for x in ((kind or "").replace("_", " "), f"HTTP {status}" if status else "") if x)
        return f"error ({what}) — {AFTER_THE_VOTE}" if what else f"error — {AFTER_THE_VOTE}"
    head = f"error ({kind})" if kind else "error"
    return f"{head}: {message}" if message else head


def exception_line(exc: BaseException, *, hidden: bool) -> str:
    """A failure's text for a notification. While `hidden`, only our own vote
    and store errors in full (they name labels and files, never a model);
    any other exception (from a client or a library: it may carry a host or a
    model id) by its type alone."""
    from store.db import StoreError

    if not hidden or isinstance(exc, (VoteError, StoreError)):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__} ({AFTER_THE_VOTE})"


def output_note(out: OutputRecord, *, hidden: bool) -> str | None:
    """The status line of a saved answer: its `error_line`, 'cancelled' or
    'interrupted'; None when it completed."""
    if out.status == "error":
        return error_line(out.error_kind, out.error_message, hidden=hidden)
    if out.status in ("cancelled", "interrupted"):
        return out.status
    return None


# --------------------------------------------------------------------------- reasoning before the reveal

#: The session meta key that records "reasoning shown before the vote" (`lineup chat --show-reasoning`).
SHOW_REASONING = "show_reasoning"


def shows_reasoning(session: SessionRecord) -> bool:
    """Was this session started with reasoning shown for every contestant
    before the vote (`--show-reasoning`)? Recorded in its meta, so a reader
    of its votes knows the raters may have told the reasoning models apart."""
    return session.meta.get(SHOW_REASONING) is True


def reasoning_hidden(*, hidden: bool, show_reasoning: bool = False) -> bool:
    """Does a view leave an answer's reasoning out? While its unit is `hidden`
    (blind, before the vote or a reveal), yes, unless the rater asked for
    reasoning for all (`show_reasoning`). Only some models reason, so a
    reasoning block, or a header, a placeholder or a "streaming" status for
    one, would tell them apart: hidden reasoning leaves nothing at all, the
    same for every answer (the store keeps it; it shows after the vote)."""
    return hidden and not show_reasoning


def shown_reasoning(reasoning: str | None, *, hidden: bool, show_reasoning: bool = False) -> str | None:
    """An answer's reasoning as a rater may see it: None while
    `reasoning_hidden`, else as stored (None when there is none)."""
    if not reasoning or reasoning_hidden(hidden=hidden, show_reasoning=show_reasoning):
        return None
    return reasoning


def shown_prompt(user_message: str, out: OutputRecord | None, *, hidden: bool, templated: bool = False) -> str:
    """The prompt an answer is shown under: the text it answered (`out.prompt`:
    an edited chat prompt, or a variant's template filled in) else the turn's.
    While `hidden`, a prompt only its own contestant was sent (`templated`: a
    variant's template) is not shown: it would tell which variant wrote the
    answer; the turn's own prompt, the same for every answer, stands in."""
    if out is None or not out.prompt or (hidden and templated):
        return user_message
    return out.prompt


# --------------------------------------------------------------------------- new votes


@dataclass(frozen=True, slots=True)
class JudgeFields:
    """What a judge's vote records besides its choice: the judge's alias,
    the hash of its instructions and template, the rubric that replaced the
    default instructions, its reply as it came, and what the request cost."""

    alias: str
    prompt_hash: str
    rubric: str | None = None
    reason: str | None = None
    cost: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def vote_fields(self) -> dict[str, Any]:
        return {"rater_kind": JUDGE, "judge": self.alias, "judge_prompt_hash": self.prompt_hash,
                "judge_rubric": self.rubric, "judge_reason": self.reason, "judge_cost": self.cost,
                "judge_input_tokens": self.input_tokens, "judge_output_tokens": self.output_tokens}



def make_votes(session_id: str, turn_ids: Sequence[str], choice: str, *, mapping: Mapping[str, str],
               positions: Sequence[str], ranking: Sequence[str] | None = None, rater: str,
               note: str | None = None, revealed: bool, answers: Mapping[str, OutputRecord | None] | None = None,
               confirm: bool = False, supersedes: Mapping[str, str] | None = None,
               now: float | None = None, ids: Sequence[str] | None = None, judge: JudgeFields | None = None,
               choice_reason: Mapping[str, Any] | None = None) -> list[VoteRecord]:
    """The records of one judgement: one vote per judged turn (repeats judged
    together share it), each carrying the label -> model mapping and the
    screen order it was cast on. Raises VoteError for a malformed vote and
    VoteNeedsConfirmation when `answers` show a problem with the pick and
    `confirm` is not set. `ids`, one per turn, when the records' ids are
    derived from their source (an import, synthetic data); else new ULIDs.
    The only place new VoteRecords are built (tests build odd ones by hand).

    `judge`: the vote is an LLM judge's (`lineup judge`), with what it was
    asked and what it cost; `rater` must then be `judge_rater(judge.alias)`.
    `choice_reason`: why the queue served this item (`--adaptive`)."""
    if ids is not None and len(ids) != len(turn_ids):
        raise ValueError(f"{len(ids)} ids for {len(turn_ids)} turns")
    if judge is not None and rater != judge_rater(judge.alias):
        raise VoteError(f"a judge's vote is cast as {judge_rater(judge.alias)!r}, not {rater!r}")
    labels = list(mapping)
    check_choice(choice, labels, ranking, complete=True)
    if choice in NON_LABEL_CHOICES and choice != TIE and choice != bad_choice(len(labels)):
        raise VoteError(f"choice {choice!r} is not one of {', '.join(valid_choices(labels))}")
    if sorted(positions) != sorted(labels):
        raise VoteError(f"positions {list(positions)} do not match the labels {labels}")
    if answers is not None and not confirm:
        warnings = answer_warnings(choice, answers)
        if warnings:
            raise VoteNeedsConfirmation(warnings)
    now = time.time() if now is None else now
    supersedes = supersedes or {}
    return [
        VoteRecord(id=new_ulid() if ids is None else ids[i], session_id=session_id, turn_id=turn_id, rater=rater,
                   choice=choice, ranking=list(ranking) if ranking else None, mapping=dict(mapping),
                   positions=list(positions), created=now, revealed_at=now if revealed else None, note=note,
                   supersedes=supersedes.get(turn_id),
                   choice_reason=dict(choice_reason) if choice_reason is not None else None,
                   **(judge.vote_fields() if judge is not None else {}))
        for i, turn_id in enumerate(turn_ids)
    ]


# --------------------------------------------------------------------------- attribution


def winner(v: VoteRecord) -> str | None:
    """The model chosen as best, through the vote's own mapping (None: tie /
    bad): the record's `winner`, which the store keeps in its `winner` column."""
    return v.winner


def ranking_models(v: VoteRecord) -> list[str] | None:
    """The ranking as models, best first."""
    if not v.ranking:
        return None
    return [model_of(v.mapping, lab) or lab for lab in v.ranking]


def models_shown(mapping: Mapping[str, str], positions: Sequence[str]) -> list[str]:
    """The models judged, left to right as they were on screen."""
    order = [lab for lab in positions if lab in mapping]
    order += [lab for lab in mapping if lab not in order]
    return [mapping[lab] for lab in order]


def relabel(v: VoteRecord, label_by_model: Mapping[str, str]) -> tuple[str, list[str] | None]:
    """The vote's choice and ranking in another layout's labels (e.g. the panes
    of a replay, laid out with the session's labels)."""
    def one(lab: str) -> str:
        model = model_of(v.mapping, lab)
        return label_by_model.get(model, lab) if model is not None else lab

    choice = v.choice if v.choice in NON_LABEL_CHOICES else one(v.choice)
    return choice, ([one(lab) for lab in v.ranking] if v.ranking else None)


def describe(v: VoteRecord, *, revealed: bool, label_by_model: Mapping[str, str] | None = None) -> str:
    """"B best (heron)", "a tie", "ranking B > A > C (heron > wren > lark)": in
    the labels of `label_by_model` when given (else the vote's own), models
    named only when `revealed`."""
    choice, ranking = relabel(v, label_by_model) if label_by_model is not None else (v.choice, v.ranking)
    if ranking:
        what = "ranking " + " > ".join(ranking)
        if revealed:
            what += " (" + " > ".join(ranking_models(v) or []) + ")"
        if v.choice in NON_LABEL_CHOICES:
            what = f"{CHOICE_WORDS.get(v.choice, v.choice)}, {what}"
        return what
    if v.choice in NON_LABEL_CHOICES:
        return CHOICE_WORDS.get(v.choice, v.choice)
    model = winner(v)
    return f"{choice} best" + (f" ({model})" if revealed and model is not None else "")


def verdict(choice: str, mapping: Mapping[str, str]) -> str:
    """What a vote says, wherever its answers were shown: "tie", "bad" (both
    or all bad) or "win:<model>", the model at the chosen label in the vote's
    own mapping ("win:None" when the label is not in it). Two votes on the
    same answers agree when their verdicts are equal (rater consistency).
    Built on the record's own rules (`store.records.shared_outcome`, `model_of`)."""
    shared = shared_outcome(choice)
    return shared if shared is not None else f"win:{model_of(mapping, choice)}"


def outcome(v: VoteRecord, model: str) -> VoteOutcome | None:
    """win / loss / tie / bad for one model judged by this vote (None: not
    judged): `store.records.outcome_of`, the rule the store's per-contestant
    rows (`vote_contestant.outcome`) are written with."""
    label = next((lab for lab, m in v.mapping.items() if m == model), None)
    return None if label is None else outcome_of(v.choice, v.mapping, label)


# --------------------------------------------------------------------------- ratings


@dataclass(frozen=True, slots=True)
class Battle:
    """One pairwise outcome: `outcome` is "a" (model_a won), "b" or "tie"."""

    model_a: str
    model_b: str
    outcome: Literal["a", "b", "tie"]

    def __post_init__(self) -> None:
        if self.outcome not in ("a", "b", "tie"):
            raise ValueError(f"outcome must be 'a', 'b' or 'tie', not {self.outcome!r}")
        if self.model_a == self.model_b:
            raise ValueError(f"a battle needs two different models, got {self.model_a!r} twice")


def decompose_vote(contestants: Sequence[str], choice: str,
                   ranking: Sequence[str] | None = None) -> list[Battle]:
    """The pairwise outcomes one vote stands for (ARCHITECTURE.md, "A vote").

    `contestants` are the models shown (names, not blind labels); `choice` is one
    of them or "tie" / "both_bad" / "all_bad".
    - two-way: a pick is a win; tie and both_bad are a tie;
    - N-way pick: the winner beats each other contestant (N-1 outcomes, nothing
      said about the others among themselves);
    - tie / all_bad: every pair ties;
    - a ranking (best first), when given, decomposes into every ordered pair:
      earlier beats later; a partial ranking (older records) also beats every
      unranked contestant. It must start with the pick when there is one; a
      ranking with "tie" is contradictory and refused. all_bad/both_bad with a
      ranking keeps the ranking (all bad, but in this order).
    """
    names = list(contestants)
    check_choice(choice, names, ranking, complete=False, noun="contestant")   # the one rule (a VoteError)
    if ranking:
        order = list(ranking)
        if len(order) >= 2 or (len(order) == 1 and choice in TIE_CHOICES):
            rest = [n for n in names if n not in order]
            out = [Battle(order[i], order[j], "a")
                   for i in range(len(order)) for j in range(i + 1, len(order))]
            out += [Battle(r, u, "a") for r in order for u in rest]
            return out
    if choice in TIE_CHOICES:
        return [Battle(names[i], names[j], "tie")
                for i in range(len(names)) for j in range(i + 1, len(names))]
    return [Battle(choice, other, "a") for other in names if other != choice]


def battles_of(choice: str, ranking: Sequence[str] | None, mapping: Mapping[str, str],
               positions: Sequence[str], vote_id: object = None) -> list[Battle]:
    """A stored vote's pairwise outcomes, its labels read through its own
    mapping. ValueError (naming the vote) when they do not fit the mapping."""
    if choice in TIE_CHOICES:
        pick = choice
    else:
        model = model_of(mapping, choice)
        if model is None:
            raise ValueError(f"vote {vote_id}: choice {choice!r} is not one of the labels {sorted(mapping)}")
        pick = model
    models = None
    if ranking:
        models = []
        for lab in ranking:
            model = model_of(mapping, lab)
            if model is None:
                raise ValueError(f"vote {vote_id}: ranking label {lab!r} is not in the mapping")
            models.append(model)
    return decompose_vote(models_shown(mapping, positions), pick, models)


# --------------------------------------------------------------------------- reveal per judged unit

@dataclass
class Reveal:
    """Which judged units of a session show their models. Not blind, or the
    whole session revealed: all. Else a unit is revealed once a vote on any of
    its turns was revealed (after each vote in the chat or the queue, or at
    the end of the queue), or once the rater revealed it without voting (a
    `RevealRecord`); votes withdrawn after their reveal still count, since
    the names were seen."""

    blind: bool
    session_revealed: bool
    turn_unit: dict[str, str] = field(default_factory=dict)     # turn id -> unit key
    units: list[str] = field(default_factory=list)              # in order
    revealed_units: set[str] = field(default_factory=set)
    #: the number of units when they are not listed (`units` empty): a paged
    #: export knows the count and the revealed ones, and asks by `turn_record`
    unit_count: int | None = None

    @property
    def _n_units(self) -> int:
        return len(self.units) if self.unit_count is None else self.unit_count

    @property
    def all(self) -> bool:
        return not self.blind or self.session_revealed or len(self.revealed_units) == self._n_units > 0

    @property
    def none(self) -> bool:
        return self.blind and not self.session_revealed and not self.revealed_units

    @property
    def counts(self) -> tuple[int, int]:
        """(revealed units, units)."""
        n = self._n_units
        return (n if self.all else len(self.revealed_units)), n

    def turn(self, turn_id: str) -> bool:
        """May the models of this turn's answers be shown?"""
        if self.all:
            return True
        unit = self.turn_unit.get(turn_id)
        return unit is not None and unit in self.revealed_units

    def turn_record(self, turn: TurnRecord) -> bool:
        """`turn` for a turn of the session at hand, without the turn map."""
        return self.all or unit_key(turn) in self.revealed_units

    def vote(self, v: VoteRecord) -> bool:
        """May this vote's mapping (who won) be shown?"""
        return self.turn(v.turn_id)

    def summary(self) -> str:
        """"hidden", "1 of 3 revealed" or "" (all shown)."""
        k, n = self.counts
        if self.all:
            return ""
        return f"{k} of {n} revealed" if k else "hidden"


def reveal_state(loaded: LoadedSession) -> Reveal:
    s = loaded.session
    state = Reveal(blind=s.blind, session_revealed=s.revealed_at is not None)
    units: dict[str, None] = {}
    for t in loaded.turns:
        key = state.turn_unit[t.id] = unit_key(t)
        units.setdefault(key)
    state.units = list(units)
    for v in loaded.votes:
        if v.revealed_at is not None and v.turn_id in state.turn_unit:
            state.revealed_units.add(state.turn_unit[v.turn_id])
    for r in loaded.reveals:      # revealed by the rater without a vote
        if r.turn_id in state.turn_unit:
            state.revealed_units.add(state.turn_unit[r.turn_id])
    return state


# --------------------------------------------------------------------------- who voted: people and judges

HUMAN: Literal["human"] = "human"
JUDGE: Literal["judge"] = "judge"
JUDGE_RATER_PREFIX = "judge:"


def judge_rater(alias: str) -> str:
    """The rater name a judge's votes carry: "judge:<alias>" (so a judge and
    a person never share a queue, a consistency row or a filter)."""
    return JUDGE_RATER_PREFIX + alias


RATER_MAX = 80


def rater_problem(name: str) -> str | None:
    """Why `name` cannot be a rater's name (None: it can): 1 to 80
    printable characters, not only spaces. The same rule for `--rater` and
    for the raters a vote package brings back (an untrusted file)."""
    if not name.strip() or len(name) > RATER_MAX or any(not ch.isprintable() for ch in name):
        return f"a name of 1 to {RATER_MAX} printable characters"
    return None


def counts_as_human(v: VoteRecord) -> bool:
    """Whether a vote is a person's: only these make the human figures
    (ratings, consistency, position bias, the sessions list, a rater's queue)."""
    return v.rater_kind == HUMAN


def human_votes(votes: Sequence[VoteRecord]) -> list[VoteRecord]:
    return [v for v in votes if counts_as_human(v)]


def pair_of(model_x: str, model_y: str) -> tuple[str, str]:
    """A pair of models in one canonical order (sorted), whatever the screen order."""
    if model_x == model_y:
        raise ValueError(f"a pair needs two different models, got {model_x!r} twice")
    return (model_x, model_y) if model_x < model_y else (model_y, model_x)


def pair_score(choice: str, ranking: Sequence[str] | None, mapping: Mapping[str, str],
               positions: Sequence[str], pair: tuple[str, str]) -> float | None:
    """What one vote says about `pair` (canonical, `pair_of`): 1.0 when
    pair[0] won, 0.0 when pair[1] won, 0.5 a tie (or both bad); None when the
    vote says nothing about it (a model not shown, or an N-way pick of a
    third model). Read through the vote's own pairwise decomposition, so a
    judge's two-answer vote and a person's N-way vote compare."""
    for b in battles_of(choice, ranking, mapping, positions):
        if {b.model_a, b.model_b} == set(pair):
            score = 1.0 if b.outcome == "a" else 0.0 if b.outcome == "b" else 0.5
            return score if b.model_a == pair[0] else 1.0 - score
    return None


def combine_orders(scores: Sequence[float]) -> tuple[float, bool]:
    """One judge's verdicts on the same pair and case shown in different
    orders (`lineup judge --swap`) as one: (score, consistent). The same
    verdict whatever the order counts as given; a verdict that changes with
    the order (a win that flips, or a win one way and a tie the other) is a
    tie and position-inconsistent (the MT-Bench convention)."""
    if not scores:
        raise ValueError("no verdicts to combine")
    first = scores[0]
    if all(s == first for s in scores):
        return first, True
    return 0.5, False


def gold_correct(choice: str, better: str) -> bool:
    """A gold pair is judged right only when the better answer is picked (a
    tie or "both bad" is not)."""
    return choice == better
