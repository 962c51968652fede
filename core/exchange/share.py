"""Blind vote packages: several raters judge the same answers without the
owner's database, and their votes come back to it mapped to the real models.

Why a module of its own: a package is the one place where records leave the
owner's hands for someone who must not learn which model wrote what, so what
goes in is decided here, in one function per record (`_session`, `_turn`,
`_answer`, `_check`), as an allow-list: a field not copied is not shared. A
package holds the cases (prompts, follow-ups, categories, references shown
after the vote), the answers (text, tool-call trace without protocol ids or
signatures, the error's kind and HTTP status only, and the reasoning only with
`reasoning=True`), check names and results, the blind labels, the dimensions
answers are scored on and the vote queue's shuffle seed; and nothing about a
contestant: no alias, model, provider, base URL, parameters, prices, error
bodies, finish reasons, token counts, costs, timings, attempts, writers, tags,
nor other sessions. Sessions, turns and answers get fresh ids (every one with
the same time part, so no order or time shows through them), contestants
random opaque names in a random order; the mapping back, with a content hash
of every turn and answer as shared, stays in the owner's database
(`share_map`, written through `store.share`).

A package is a lineup database, so `lineup vote FILE` is the ordinary
blind queue (`core.answering.vote_queue`: per-case shuffle, tags, notes, undo, skip,
resume) working on it. `import_package` merges its votes, tags and scores back:
refused whole (with the reason) when the package came from another database
or its answers, cases or contestants differ from what was shared; idempotent
otherwise, so several packages of one run, and the same package imported
again after more votes, merge into one record."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from core.answering.dimensions import META_KEY as DIMENSIONS_KEY, dimensions_meta, dimensions_of, valid_score
from core.ground.text import one_line
from core.stats.votes import (
    HUMAN,
    JUDGE_RATER_PREFIX,
    LABELS,
    VoteError,
    error_status,
    make_votes,
    rater_problem,
    record_problem,
    shown_reasoning,
    unit_key,
)
from store.db import Store, StoreError
from store.ids import derived_ulid, new_ulid
from store.imports import ImportFileError, ImportSummary, check_sound, snapshot, work_folder, write_imported
from store.records import (
    AnswerTrace,
    CheckResultRecord,
    ContestantRecord,
    LoadedSession,
    OutputRecord,
    ScoreRecord,
    SessionRecord,
    TagRecord,
    TraceCall,
    TraceStep,
    TurnRecord,
    VoteRecord,
)
from store.share import (
    PackageInfo,
    SharedPackage,
    ShareRow,
    check_package_file,
    every_score,
    merge_package_records,
    package_marks_at,
    read_package_info,
    record_share,
    share_origin,
    shared_package,
    tags_with_removals,
    write_package_info,
)

PACKAGE_FORMAT = 1
#: The provider every contestant of a package has (the real one stays with the owner).
STANDIN_PROVIDER = "blind"
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


class ShareError(ValueError):
    """Sessions that cannot be shared as asked (the message says why)."""


class ShareSummary(BaseModel):
    package_id: str
    path: str
    sessions: int
    cases: int
    answers: int


# --------------------------------------------------------------------------- what a package holds


def opaque_name(rng: secrets.SystemRandom) -> str:
    """A contestant's name in a package: random, meaningless, short enough to read."""
    return "x" + "".join(rng.choice(_ALPHABET) for _ in range(7))


def blind_trace(trace: AnswerTrace | None) -> AnswerTrace | None:
    """A tool-call trace without what tells a protocol or a server apart:
    call ids (`call_...`, `toolu_...`), Gemini's signatures, and whether the
    server refused native structured output. Steps, calls, arguments,
    scripted results and why it stopped stay: the rater judges them."""
    if trace is None:
        return None
    return AnswerTrace(
        steps=[TraceStep(text=s.text, calls=[TraceCall(name=c.name, arguments=c.arguments, result=c.result,
                                                       rule=c.rule) for c in s.calls]) for s in trace.steps],
        stopped=trace.stopped, max_steps=trace.max_steps)


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False,
                                     separators=(",", ":")).encode("utf-8", "surrogatepass")).hexdigest()


def turn_digest(t: TurnRecord) -> str:
    """The content hash of a turn as shared (what a rater is shown of it)."""
    return _digest(["turn", t.session_id, t.position, t.case_id, t.category, t.user_message, t.images,
                    t.follow_up_index, t.repeat_index])


def answer_digest(o: OutputRecord) -> str:
    """The content hash of an answer as shared."""
    return _digest(["output", o.session_id, o.turn_id, o.contestant, o.label, o.status, o.text, o.reasoning,
                    o.error_kind, o.error_message,
                    None if o.trace is None else o.trace.model_dump(mode="json")])


def _latest_answers(loaded: LoadedSession) -> list[OutputRecord]:
    """The answer a rater judges per (turn, contestant): the latest attempt that is not still streaming."""
    out: dict[tuple[str, str], OutputRecord] = {}
    for o in loaded.outputs:
        if o.status == "streaming":
            continue
        key = (o.turn_id, o.contestant)
        if key not in out or o.attempt >= out[key].attempt:
            out[key] = o
    return list(out.values())


@dataclass
class Package:
    """The records of a package and the owner's mapping to them."""

    sessions: list[SessionRecord] = field(default_factory=list)
    records: list[TurnRecord | OutputRecord | CheckResultRecord] = field(default_factory=list)
    rows: list[ShareRow] = field(default_factory=list)
    cases: int = 0
    answers: int = 0


def build_package(loaded: Sequence[LoadedSession], *, reasoning: bool = False,
                  created: float | None = None) -> Package:
    """The package's records for these sessions (see the module doc for what
    goes in), with the owner's mapping and content hashes."""
    created = time.time() if created is None else created
    ms = int(created * 1000)
    rng = secrets.SystemRandom()
    pkg = Package()
    for ls in loaded:
        s = ls.session
        sid = new_ulid(ms)
        pkg.rows.append(ShareRow(kind="session", shared_id=sid, owner_id=s.id, session_id=s.id))
        demo = s.is_demo
        order = list(s.contestants)
        rng.shuffle(order)                         # positions and labels tell nothing of the owner's order
        names: dict[str, ContestantRecord] = {}
        for i, c in enumerate(order):
            name = opaque_name(rng)
            while name in {n.alias for n in names.values()}:
                name = opaque_name(rng)
            names[c.alias] = ContestantRecord(alias=name, provider=STANDIN_PROVIDER, model=name, label=LABELS[i],
                                              position=i, is_demo=demo)
            pkg.rows.append(ShareRow(kind="contestant", shared_id=name, owner_id=c.alias, session_id=s.id))
        pkg.sessions.append(_session(s, sid, list(names.values()), created))
        turn_ids: dict[str, str] = {}
        for t in sorted(ls.turns, key=lambda t: t.position):
            shared_turn = _turn(t, new_ulid(ms), sid, created)
            turn_ids[t.id] = shared_turn.id
            pkg.records.append(shared_turn)
            pkg.rows.append(ShareRow(kind="turn", shared_id=shared_turn.id, owner_id=t.id, session_id=s.id,
                                     digest=turn_digest(shared_turn)))
        pkg.cases += len({(t.case_id, t.repeat_index) if t.case_id else t.id for t in ls.turns})
        checks: dict[str, list[CheckResultRecord]] = {}
        for chk in ls.checks:
            checks.setdefault(chk.output_id, []).append(chk)
        answers = sorted(_latest_answers(ls), key=lambda o: rng.random())   # no order shows through
        for o in answers:
            if o.contestant not in names or o.turn_id not in turn_ids:
                continue
            shared = _answer(o, new_ulid(ms), sid, turn_ids[o.turn_id], names[o.contestant], created,
                             reasoning=reasoning)
            pkg.records.append(shared)
            pkg.rows.append(ShareRow(kind="output", shared_id=shared.id, owner_id=o.id, session_id=s.id,
                                     digest=answer_digest(shared)))
            pkg.records += [_check(c, new_ulid(ms), shared.id) for c in checks.get(o.id, ())]
            pkg.answers += 1
    return pkg


def _session(s: SessionRecord, sid: str, contestants: list[ContestantRecord], created: float) -> SessionRecord:
    references = s.meta.get("references") or {}
    dimensions = dimensions_of(s.meta)      # what raters score answers on, 1-5, as in the owner's queue
    meta: dict = {"references": dict(references)} if references else {}
    if dimensions:
        meta[DIMENSIONS_KEY] = dimensions_meta(dimensions)
    return SessionRecord(id=sid, created=created, kind=s.kind, title=s.sample_set_name or "shared session",
                         contestants=contestants, blind=True,
                         sample_set_name=s.sample_set_name, sample_set_hash=s.sample_set_hash, meta=meta)


def _turn(t: TurnRecord, tid: str, sid: str, created: float) -> TurnRecord:
    # an image's name and size only (the owner's path is not the rater's business; the bytes are not carried)
    images = [{"path": os.path.basename(str(i.get("path", ""))), "sha256": i.get("sha256"), "mime": i.get("mime"),
               **({"size": i["size"]} if type(i.get("size")) is int else {})}
              for i in t.images if isinstance(i, dict)]
    return TurnRecord(id=tid, session_id=sid, position=t.position, case_id=t.case_id, category=t.category,
                      user_message=t.user_message, images=images, follow_up_index=t.follow_up_index,
                      repeat_index=t.repeat_index, created=created)


def _answer(o: OutputRecord, oid: str, sid: str, tid: str, c: ContestantRecord, created: float, *,
            reasoning: bool) -> OutputRecord:
    status = error_status(o.error_message) if o.status == "error" else None
    return OutputRecord(id=oid, session_id=sid, turn_id=tid, contestant=c.alias, label=c.label, attempt=1,
                        status=o.status, text=o.text,
                        # a package is blind: reasoning only when its owner asked (`--reasoning`)
                        reasoning=shown_reasoning(o.reasoning, hidden=True, show_reasoning=reasoning),
                        error_kind=o.error_kind if o.status == "error" else None,
                        # what the vote queue shows of an error before the vote: its kind and HTTP status
                        error_message=f"HTTP {status}" if status else None,
                        is_demo=c.is_demo, created=created, trace=blind_trace(o.trace))


def _check(c: CheckResultRecord, cid: str, oid: str) -> CheckResultRecord:
    # its detail is left out: it may quote an error or what a check found, and the queue shows pass/fail only
    return CheckResultRecord(id=cid, output_id=oid, check=c.check, spec=c.spec, passed=c.passed)


# --------------------------------------------------------------------------- lineup share


def share_sessions(store: Store, session_ids: Sequence[str], out: str | os.PathLike, *,
                   tags: Sequence[str] = (), reasoning: bool = False) -> ShareSummary:
    """Write a package of these sessions to `out` (never over an existing
    file) and keep its mapping in `store`. ShareError for sessions that
    cannot be judged or a file that exists."""
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise ShareError(f"{out} already exists (a package may hold votes: it is never overwritten)")
    ids: list[str] = []
    for sid in session_ids:
        full = store.resolve_session(sid)
        if full in ids:
            raise ShareError(f"session {full} is named twice")
        ids.append(full)
    if not ids:
        raise ShareError("no session to share")
    loaded = [store.load_session(sid) for sid in ids]
    for ls in loaded:
        if len(ls.session.contestants) < 2:
            raise ShareError(f"session {ls.session.id} has {len(ls.session.contestants)} contestant: "
                             "there is nothing to compare")
        if not _latest_answers(ls):
            raise ShareError(f"session {ls.session.id} has no answers to judge")
    created = time.time()
    pkg = build_package(loaded, reasoning=reasoning, created=created)
    package_id = new_ulid()
    origin = share_origin(store) or new_ulid()
    info = PackageInfo(id=package_id, origin=origin, created=created, format=PACKAGE_FORMAT,
                       seed=secrets.token_hex(16), tags=list(tags))
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise ShareError(f"{folder}: no such folder")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        tmp.unlink()   # Store.open creates it, as a lineup database
        package = Store.open(tmp)
        try:
            write_imported(package, pkg.sessions, pkg.records, str(out))
            write_package_info(package, info)
            package.conn.execute("PRAGMA journal_mode = DELETE")   # one file to hand over, no -wal beside it
        finally:
            package.close()
        record_share(store, SharedPackage(id=package_id, created=created, origin=origin, sessions=ids,
                                          file_name=str(out.resolve()), rows=pkg.rows))
        try:
            os.link(tmp, out)    # never over a file that appeared meanwhile
        except FileExistsError:
            raise ShareError(f"{out} already exists (a package may hold votes: it is never overwritten)") from None
        except OSError:          # a file system without hard links
            if out.exists():
                raise ShareError(f"{out} already exists") from None
            os.replace(tmp, out)
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            leftover.unlink(missing_ok=True)
    return ShareSummary(package_id=package_id, path=str(out), sessions=len(ids), cases=pkg.cases,
                        answers=pkg.answers)


# --------------------------------------------------------------------------- lineup vote FILE


def package_tags(info: PackageInfo, where: str) -> tuple[str, ...]:
    """The custom tags a package offers, checked like a config's (the file is untrusted)."""
    from core.answering.config import ConfigError, parse_config

    try:
        return parse_config({"tags": list(info.tags)}, source=f"{where}: package_info").tags
    except ConfigError as exc:
        raise ImportFileError(str(exc)) from None


# --------------------------------------------------------------------------- lineup import FILE


def import_package(store: Store, path: str | os.PathLike) -> ImportSummary:
    """Merge a package's votes and tags into `store` (the owner's database),
    mapped to the real sessions, turns, answers and models. ImportFileError
    (nothing imported) when it is no package, came from another database,
    differs from what was shared, or holds a record no rater's queue makes
    (see `_mapped_records`); idempotent otherwise."""
    path = Path(path)
    summary = ImportSummary(source=str(path), format="lineup-package")
    with work_folder("package") as tmp:
        copy = tmp / "package.db"
        snapshot(path, copy)
        check_sound(copy, path)
        check_package_file(copy, path)
        try:
            src = Store.open(copy)
        except StoreError as exc:
            raise ImportFileError(str(exc).replace(str(copy), str(path))) from None
        try:
            info = read_package_info(src.conn)
            if info is None:
                raise ImportFileError(f"{path} is not a vote package as shared: its package_info row is unreadable; "
                                      "it was altered")
            votes, superseded, tags, scores = _mapped_records(store, src, info, path)
        finally:
            src.close()
    summary.records = len(votes)
    added = merge_package_records(store, votes, tags, str(path), superseded=superseded, scores=scores)
    summary.added = {k: v for k, v in added.items()}
    return summary


def looks_like_package(path: str | os.PathLike) -> bool:
    """Whether a SQLite file is (or was) a vote package: a package_info row,
    or a contestant with the stand-in provider (a package whose marker was
    removed or doubled is still one, and is refused as altered rather than
    merged as a database with its opaque names as models)."""
    marks = package_marks_at(path, standin_provider=STANDIN_PROVIDER)
    return marks is not None and (marks.markers > 0 or marks.standins > 0)


def _package_id(info: PackageInfo, kind: str, rec_id: str, created: float) -> str:
    """The id a package's vote or tag gets in the owner's database: derived
    from the package and its id there, so the same record maps to the same
    id on every import, and no id a package holds can name one of the
    owner's records."""
    return derived_ulid(int(created * 1000), f"package:{info.id}:{kind}:{rec_id}")


_JUDGE_FIELDS = ("judge", "judge_prompt_hash", "judge_rubric", "judge_reason", "judge_cost", "judge_input_tokens",
                 "judge_output_tokens")


def _mapped_records(store: Store, src: Store, info: PackageInfo, path: Path
                    ) -> tuple[list[VoteRecord], set[str], list[tuple[TagRecord, float | None]], list[ScoreRecord]]:
    """The package's votes and tags in the owner's terms, after checking that
    the package is one this database issued, unchanged; and the ids of the
    votes a later one of the same rater on the same unit supersedes.

    A package may only add votes, notes and tags by its raters on the units
    it carries: each is rebuilt from an allow-list of its fields (a person's
    vote, never a judge's; not revealed; the package's own `supersedes` is
    not read), under an id derived from the package, so nothing of the
    owner's records can be named, superseded, withdrawn or removed by it;
    of one rater's votes on one unit, the latest counts. In steps: the
    package is one this database issued; its content is what was shared;
    its votes, then its tags and its scores, rebuilt."""
    issued, ours = _issued(store, info, path)
    loaded, alias_of, units = _shared_content(src, issued, ours, path)
    votes, superseded = _package_votes(loaded, ours, alias_of, units, info, path)
    return votes, superseded, _package_tags(src, ours, info, path), _package_scores(store, src, ours, info, path)


def _altered(path: Path, what: str) -> ImportFileError:
    # `what` quotes the package's own ids and fields: bounded and on one line, whatever they hold
    return ImportFileError(f"{path} was altered since it was shared: {one_line(what, 500)}")


def _q(value: object) -> str:
    """A package's id or field, as a refusal quotes it (`_altered` bounds the whole)."""
    return repr(one_line(value, 60))


def _issued(store: Store, info: PackageInfo, path: Path) -> tuple[SharedPackage, dict[tuple[str, str], ShareRow]]:
    """The package as this database issued it, and its rows by (kind, shared id)."""
    issued = shared_package(store, info.id)
    if issued is None:
        raise ImportFileError(f"{path} was not shared from this database ({store.path}): its package "
                              f"{info.id} is unknown here; it came from another database (import it into that "
                              "one), or this database was replaced since")
    if issued.origin != info.origin:
        raise ImportFileError(f"{path} says it came from database {info.origin}, but this database shared it "
                              f"as {issued.origin}: it was altered")
    ours: dict[tuple[str, str], ShareRow] = {(r.kind, r.shared_id): r for r in issued.rows}

    return issued, ours


def _shared_content(src: Store, issued: SharedPackage, ours: dict[tuple[str, str], ShareRow], path: Path
                    ) -> tuple[list[LoadedSession], dict[tuple[str, str], str], dict[str, str]]:
    """The package's sessions, checked against what was shared (sessions,
    contestants, turns and answers by content hash); the owner's alias of
    each opaque name, and the unit each turn is judged as."""
    loaded = [src.load_session(sid) for sid in _session_ids(src)]
    shared_sessions = {r.shared_id for r in issued.rows if r.kind == "session"}
    if {ls.session.id for ls in loaded} != shared_sessions:
        extra = sorted({ls.session.id for ls in loaded} - shared_sessions)
        raise _altered(path, f"session {extra[0]} was not in it" if extra else "a session shared in it is missing")
    alias_of: dict[tuple[str, str], str] = {}      # (package session, opaque name) -> the owner's alias
    units: dict[str, str] = {}                     # package turn -> the unit it is judged as
    for ls in loaded:
        sid = ls.session.id
        owner_sid = ours[("session", sid)].owner_id
        names = {c.alias for c in ls.session.contestants}
        wanted = {r.shared_id for r in issued.rows if r.kind == "contestant" and r.session_id == owner_sid}
        if names != wanted:
            raise _altered(path, f"the contestants of session {sid} are not those shared")
        for n in names:
            alias_of[(sid, n)] = ours[("contestant", n)].owner_id
        for t in ls.turns:
            row = ours.get(("turn", t.id))
            if row is None or row.session_id != owner_sid:
                raise _altered(path, f"turn {t.id} was not shared")
            if row.digest != turn_digest(t):
                raise _altered(path, f"the prompt of turn {t.id}" + (f" (case {t.case_id})" if t.case_id else "")
                              + " differs from what was shared (content hash)")
            units[t.id] = unit_key(t)
        for o in ls.outputs:
            row = ours.get(("output", o.id))
            if row is None or row.session_id != owner_sid:
                raise _altered(path, f"answer {o.id} was not shared")
            if row.digest != answer_digest(o):
                raise _altered(path, f"answer {o.id} differs from what was shared (content hash)")
        if len(ls.turns) != sum(1 for r in issued.rows if r.kind == "turn" and r.session_id == owner_sid) or \
                len(ls.outputs) != sum(1 for r in issued.rows if r.kind == "output" and r.session_id == owner_sid):
            raise _altered(path, f"turns or answers of session {sid} are missing")

    return loaded, alias_of, units


def _package_votes(loaded: list[LoadedSession], ours: dict[tuple[str, str], ShareRow],
                   alias_of: dict[tuple[str, str], str], units: dict[str, str], info: PackageInfo, path: Path
                   ) -> tuple[list[VoteRecord], set[str]]:
    """Each vote rebuilt from its allowed fields in the owner's terms, and
    the ids of those a later vote of the same rater on the same unit supersedes."""
    votes: list[VoteRecord] = []
    latest: dict[tuple[str, str, str, tuple[str, ...]], VoteRecord] = {}
    superseded: set[str] = set()
    for ls in loaded:
        sid = ls.session.id
        for v in sorted(ls.votes, key=lambda v: (v.created, v.id)):
            problem = record_problem(v) or _rater_problem(v.rater)
            if problem:
                raise _altered(path, f"vote {v.id}: {problem}" if not problem.startswith("vote ") else problem)
            if v.rater_kind != HUMAN or any(getattr(v, f) is not None for f in _JUDGE_FIELDS):
                raise _altered(path, f"vote {v.id} is a judge's verdict (a package holds people's votes only)")
            turn = ours.get(("turn", v.turn_id))
            if v.session_id != sid or turn is None or turn.session_id != ours[("session", sid)].owner_id:
                raise _altered(path, f"vote {v.id} is on a turn that was not shared")
            mapping: dict[str, str] = {}
            for label, name in v.mapping.items():
                if (sid, name) not in alias_of:
                    raise _altered(path, f"vote {v.id} names a contestant that was not shared")
                mapping[label] = alias_of[(sid, name)]
            key = (sid, v.rater, units[v.turn_id], tuple(sorted(mapping.values())))
            before = latest.get(key)
            new_id = _package_id(info, "vote", v.id, v.created)
            try:
                # the rater saw opaque names only: in the owner's record nothing was revealed by this vote
                (mine,) = make_votes(turn.session_id, [turn.owner_id], v.choice, mapping=mapping,
                                     positions=v.positions, ranking=v.ranking, rater=v.rater, note=v.note,
                                     revealed=False, now=v.created, ids=[new_id],
                                     supersedes={turn.owner_id: before.id} if before is not None else None)
            except VoteError as exc:
                raise _altered(path, f"vote {v.id}: {exc}") from None
            if v.retracted_at is not None:
                mine = mine.model_copy(update={"retracted_at": v.retracted_at})
            if before is not None:
                superseded.add(before.id)
            latest[key] = mine
            votes.append(mine)
    return votes, superseded


def _package_tags(src: Store, ours: dict[tuple[str, str], ShareRow], info: PackageInfo, path: Path
                  ) -> list[tuple[TagRecord, float | None]]:
    """The raters' tags (automatic ones left out), on the owner's answers."""
    tags: list[tuple[TagRecord, float | None]] = []
    for tag, removed_at in tags_with_removals(src):
        row = ours.get(("output", tag.output_id))
        if row is None:
            raise _altered(path, f"tag {tag.id} is on an answer that was not shared")
        if tag.auto:
            continue    # none were shared; an automatic tag in a package was not a rater's
        problem = _rater_problem(tag.rater)
        if problem:
            raise _altered(path, f"tag {tag.id}: {problem}")
        tags.append((TagRecord(id=_package_id(info, "tag", tag.id, tag.created), output_id=row.owner_id,
                               tag=tag.tag, rater=tag.rater, note=tag.note, created=tag.created), removed_at))
    return tags


def _package_scores(store: Store, src: Store, ours: dict[tuple[str, str], ShareRow], info: PackageInfo,
                    path: Path) -> list[ScoreRecord]:
    """The raters' 1-5 scores (every row, whatever it names), on the owner's
    answers, each on a dimension the owner's session declares (the package's
    own list is not read)."""
    scores: list[ScoreRecord] = []
    declared: dict[str, set[str]] = {}
    for sc in every_score(src):
        row = ours.get(("output", sc.output_id))
        if row is None:
            raise _altered(path, f"score {_q(sc.id)} is on an answer that was not shared")
        if row.session_id not in declared:
            declared[row.session_id] = {d.name for d in dimensions_of(store.get_session(row.session_id).meta)}
        if sc.rater_kind != HUMAN:
            raise _altered(path, f"score {_q(sc.id)} is not a person's (rater_kind {_q(sc.rater_kind)}: a package holds "
                                 "people's scores only)")
        problem = _rater_problem(sc.rater)
        if problem:
            raise _altered(path, f"score {_q(sc.id)}: {problem}")
        if sc.dimension not in declared[row.session_id]:
            raise _altered(path, f"score {_q(sc.id)} is on {_q(sc.dimension)}, which is not a dimension of the "
                                 "session shared")
        if not valid_score(sc.value):
            raise _altered(path, f"score {_q(sc.id)}: {_q(sc.value)} is not a score from 1 to 5")
        scores.append(ScoreRecord(id=_package_id(info, "score", sc.id, sc.created), output_id=row.owner_id,
                                  dimension=sc.dimension, value=sc.value, rater=sc.rater, rater_kind=HUMAN,
                                  created=sc.created))
    return scores


def _rater_problem(rater: str) -> str | None:
    problem = rater_problem(rater)
    if problem:
        return f"its rater is not {problem}"
    if rater.startswith(JUDGE_RATER_PREFIX):
        return f"its rater {rater!r} is a judge's name (a package holds people's votes only)"
    return None


def _session_ids(src: Store) -> list[str]:
    return [s.id for s in src.list_sessions()]
