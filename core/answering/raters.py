"""Team raters (`lineup rate`), without HTTP: who may vote, on what, and how
far they are. A team is a set of sessions served to named raters; each
rater's link carries an unguessable token that the database keeps only as its
SHA-256 (`store.raters`), so a copy of the database opens no page. Each unit
(a `core.answering.vote_queue.QueueItem` key: a case, or a chat turn) goes to
`overlap` raters, the least loaded first, so agreement can be measured; a
unit that appears later (a run still going) is assigned when a rater's queue
is next loaded. What a rater's queue serves is `VoteQueue(units=...)`, so
the blinding, votes, gold pairs and adaptive choice are the queue's own.

How far each rater is, and how far they agree, is the report's business:
`core.report.team`."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from core.answering.vote_queue import build_items
from store import raters as SR
from store.ids import new_ulid

if TYPE_CHECKING:
    from store.db import Store
    from store.records import LoadedSession

#: Bytes of randomness in a link's token (256 bits).
TOKEN_BYTES = 32
MAX_RATERS = 500


class RaterError(ValueError):
    """A bad team: a rater name, an overlap, a file of names. Says which."""


def new_token() -> str:
    """An unguessable token for a link (URL-safe)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    """What the database keeps of a token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def same_token(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def check_name(name: str, where: str = "--rater") -> str:
    """A rater's name as it is recorded with their votes: 1 to 80 printable
    characters, no surrounding space."""
    from core.stats.votes import rater_problem

    name = name.strip()
    problem = rater_problem(name)
    if problem:
        raise RaterError(f"{where}: {problem}")
    return name


def names_from_file(path: str | Path) -> list[str]:
    """Rater names, one a line (blank lines and `#` comments skipped), read
    through `core.ground.inputs`; errors name FILE:LINE."""
    from core.ground.inputs import decode, read_input, shown_name

    text = decode(read_input(path), shown_name(path))
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        out.append(check_name(line, f"{shown_name(path)}:{n}"))
    return out


def check_team(raters: Sequence[str], overlap: int) -> list[str]:
    """The raters, each once in the order given; an overlap they can meet."""
    names = list(dict.fromkeys(raters))
    if not names:
        raise RaterError("name at least one rater (--rater NAME or --raters FILE)")
    if len(names) > MAX_RATERS:
        raise RaterError(f"at most {MAX_RATERS} raters in one team, not {len(names)}")
    if not 1 <= overlap <= len(names):
        raise RaterError(f"--overlap: each unit goes to 1 to {len(names)} raters (the raters named), not {overlap}")
    return names


# --------------------------------------------------------------------------- assignment

def _spread(unit: str, rater: str) -> str:
    """A fixed tie-break between equally loaded raters that differs per unit."""
    return hashlib.sha256(f"{unit}\0{rater}".encode("utf-8", "surrogatepass")).hexdigest()


def assign(units: Sequence[str], raters: Sequence[str], overlap: int,
           existing: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """New (unit, rater) rows so that each unit has `overlap` of `raters`
    (never the same rater twice): the least loaded raters first, ties broken
    per unit. Assignments already made are kept, whoever holds them."""
    load = Counter(r for _, r in existing)
    have: dict[str, set[str]] = {}
    for u, r in existing:
        have.setdefault(u, set()).add(r)
    want = min(overlap, len(raters))
    new: list[tuple[str, str]] = []
    for unit in units:
        got = have.setdefault(unit, set())
        need = want - len(got & set(raters))
        if need <= 0:
            continue
        for r in sorted((r for r in raters if r not in got), key=lambda r: (load[r], _spread(unit, r)))[:need]:
            new.append((unit, r))
            load[r] += 1
            got.add(r)
    return new


def team_units(loaded: Sequence[LoadedSession], repeats: str = "separate") -> list[str]:
    """Every judgeable unit of the sessions, in the order they were run."""
    return [item.key for ls in loaded for item in build_items(ls, rater=None, repeats=repeats)]


# --------------------------------------------------------------------------- the team

@dataclass
class Team:
    id: str
    sessions: list[str]
    overlap: int
    raters: list[str]
    links: dict[str, str | None] = field(default_factory=dict)   # rater -> new token (None: link issued before)
    owner_token: str = ""


def open_team(store: Store, sessions: Sequence[str], raters: Sequence[str], overlap: int, *,
              new_links: bool = False) -> Team:
    """The team over these sessions with this overlap (made the first time):
    each rater named who holds no link yet gets one (every one of them with
    `new_links`, the old links then stop working), and the owner a fresh one
    each time (the owner is at the terminal)."""
    names = check_team(raters, overlap)
    team_id = SR.find_team(store, sessions, overlap)
    if team_id is None:
        team_id = new_ulid()
        SR.create_team(store, team_id, sessions, overlap)
    held = set(SR.team_raters(store, team_id))
    team = Team(id=team_id, sessions=sorted(sessions), overlap=overlap, raters=names)
    for name in names:
        if name in held and not new_links:
            team.links[name] = None
            continue
        token = new_token()
        SR.set_link(store, team_id, name, "rater", token_hash(token))
        team.links[name] = token
    team.owner_token = new_token()
    SR.set_link(store, team_id, "", "owner", token_hash(team.owner_token))
    return team


def link_holder(store: Store, token: str) -> tuple[str, str, str] | None:
    """(team id, rater, role) for a token from a URL, or None. Only tokens of
    the shape `new_token` makes are looked up."""
    if not (20 <= len(token) <= 100) or not all(ch.isalnum() or ch in "-_" for ch in token):
        return None
    return SR.link_of(store, token_hash(token))


def assigned_units(store: Store, team: Team, units: Sequence[str], rater: str) -> set[str]:
    """The units `rater` is to judge, assigning the units no one holds yet."""
    existing = SR.assignments(store, team.id)
    new = assign(units, team.raters, team.overlap, existing)
    if new:
        SR.add_assignments(store, team.id, new)
        existing = existing + new
    return {u for u, r in existing if r == rater}
