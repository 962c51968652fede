"""A vote package is untrusted input, field by field, and is recognised
however it arrives.

- ids: no vote or tag of a package (by its id or its `supersedes`) can
  retract, supersede or remove a record of the owner's database;
- counts: of one rater's votes on one unit, the latest counts (40 copies of
  a vote with new ids are one vote);
- numbers: every number through `store.bounds` (exit 2, FILE: table row:
  field), a text where a time goes included;
- kinds: a package holds people's votes; a judge's verdict is refused;
- a voted package on a read-only share (WAL mode, no -shm can be made) is
  still read as a package, imported, and said to be read-only by `lineup
  vote`; `lineup vote` leaves a package in rollback-journal mode;
- a file with a package's stand-in contestants but no (or two) marker rows
  is refused, never merged as a database.

The read-only share is a read-only bind mount in a private mount namespace
(`unshare -m`), since root ignores file permissions; those tests are skipped
where no mount namespace can be made."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from core.answering.vote_queue import VoteQueue
from lineup.cli import main
from store import AsyncStore, Store
from store.ids import new_ulid
from store.records import ContestantRecord, OutputRecord, SessionRecord, TagRecord, TurnRecord, VoteRecord

REPO = Path(__file__).resolve().parents[1]
ALIASES = ["kestrel", "heron"]


def _owner(db: Path) -> tuple[str, VoteRecord, TagRecord]:
    """A blind run of two cases (c2 with a follow-up) and two contestants,
    with a vote and a tag of the owner's own (never shared)."""
    with Store.open(db) as store:
        s = SessionRecord(created=1.7e9, kind="run", title="nightly", blind=True,
                          contestants=[ContestantRecord(alias=a, provider="anthropic", model=f"{a}-large",
                                                        label="AB"[i], position=i) for i, a in enumerate(ALIASES)])
        store.create_session(s)
        pos, last = 0, {}
        for case, prompts in (("c1", ["two plus two?"]), ("c2", ["a loop", "in reverse"])):
            for f, prompt in enumerate(prompts):
                t = TurnRecord(session_id=s.id, position=pos, case_id=case, category="x", user_message=prompt,
                               follow_up_index=f, created=1.7e9 + pos)
                store.add_turn(t)
                pos += 1
                last[case] = t
                for c in s.contestants:
                    o = OutputRecord(session_id=s.id, turn_id=t.id, contestant=c.alias, label=c.label,
                                     status="complete", text=f"{c.alias} answers {prompt}")
                    store.start_output(o)
                    store.finish_output(o)
        mine = VoteRecord(session_id=s.id, turn_id=last["c1"].id, rater="olive", choice="A",
                          mapping={"A": "kestrel", "B": "heron"}, positions=["A", "B"], created=1.7e9 + 50)
        store.add_vote(mine)
        out = store.load_session(s.id).outputs[0]
        tag = TagRecord(output_id=out.id, tag="too_verbose", rater="olive", created=1.7e9 + 60)
        store.add_tag(tag)
        return s.id, mine, tag


async def _vote(pkg: Path, rater: str = "alice") -> None:
    """Vote every case of the package through its queue (picking the answer
    of the first model on screen) and tag the first answer of each."""
    store = await AsyncStore.open(pkg)
    try:
        queue = VoteQueue(store, rater=rater, rng=random.Random(3))
        await queue.load()
        while (item := queue.advance()) is not None:
            answers = queue.answers(item, item.targets[0])
            await queue.vote("A", confirm=True)
            await queue.tag(item, [answers[queue.labels[0]]], ("too_verbose",))
    finally:
        await store.aclose()


@pytest.fixture
def shared(tmp_path):
    """(owner db, session id, the owner's vote, the owner's tag, a package voted by alice)."""
    db = tmp_path / "owner.db"
    sid, mine, tag = _owner(db)
    pkg = tmp_path / "pkg.db"
    assert main(["share", sid, "-o", str(pkg), "--db", str(db)]) == 0
    anyio.run(_vote, pkg)
    return db, sid, mine, tag, pkg


def _edit(pkg: Path, *sql: tuple[str, list]) -> None:
    conn = sqlite3.connect(pkg)
    try:
        conn.execute("PRAGMA foreign_keys = OFF")
        for statement, params in sql:
            conn.execute(statement, params)
        conn.commit()
    finally:
        conn.close()


def _copy_row(table: str, key: str, old: str, changes: dict) -> tuple[str, list]:
    """SQL that copies one row of `table` with some columns changed."""
    conn_cols = _COLUMNS[table]
    exprs = ["?" if c in changes else c for c in conn_cols]
    params = [changes[c] for c in conn_cols if c in changes]
    return (f"INSERT INTO {table} ({', '.join(conn_cols)}) SELECT {', '.join(exprs)} FROM {table} "
            f"WHERE {key} = ?", [*params, old])


_COLUMNS: dict[str, list[str]] = {}


def _columns(pkg: Path) -> None:
    conn = sqlite3.connect(pkg)
    try:
        for table in ("vote", "vote_contestant", "tag"):
            _COLUMNS[table] = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


def _package_votes(pkg: Path) -> list[tuple]:
    conn = sqlite3.connect(pkg)
    try:
        return conn.execute("SELECT v.id, v.created, t.case_id FROM vote v JOIN turn t ON t.id = v.turn_id "
                            "ORDER BY t.case_id").fetchall()
    finally:
        conn.close()


def _copy_vote(pkg: Path, vid: str, changes: dict) -> str:
    _columns(pkg)
    new = changes.setdefault("id", new_ulid())
    _edit(pkg, _copy_row("vote", "id", vid, changes),
          _copy_row("vote_contestant", "vote_id", vid, {"vote_id": new}))
    return new


def _import(pkg: Path, db: Path, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["import", str(pkg), "--db", str(db)])
    out, err = capsys.readouterr()
    return code, out, err


def _loaded(db: Path, sid: str):
    with Store.open(db) as store:
        return store.load_session(sid)


# ---------------------------------------------------------------------- ids


def test_a_package_cannot_retract_supersede_or_remove_the_owners_records(shared, capsys):
    db, sid, mine, tag, pkg = shared
    first = _package_votes(pkg)[0]
    # a vote under the id of the owner's vote, withdrawn; one that says it supersedes the owner's vote;
    # a tag under the id of the owner's tag, removed
    _copy_vote(pkg, first[0], {"id": mine.id, "retracted_at": 1.7e9 + 99, "current": 0})
    _copy_vote(pkg, first[0], {"supersedes": mine.id, "created": first[1] + 1})
    (pkg_tag,) = sqlite3.connect(pkg).execute("SELECT id FROM tag ORDER BY id LIMIT 1").fetchone()
    _columns(pkg)
    _edit(pkg, _copy_row("tag", "id", pkg_tag, {"id": tag.id, "removed_at": 1.7e9 + 99}))
    code, out, err = _import(pkg, db, capsys)
    assert code == 0, err
    ls = _loaded(db, sid)
    (owners,) = [v for v in ls.votes if v.id == mine.id]
    assert owners.rater == "olive" and owners.retracted_at is None
    assert mine.id in {v.id for v in ls.current_votes()}
    (owners_tag,) = [t for t in ls.tags if t.id == tag.id]
    assert owners_tag.rater == "olive"
    with Store.open(db) as store:
        assert store.conn.execute("SELECT removed_at FROM tag WHERE id = ?", [tag.id]).fetchone() == (None,)
    # what the package added is alice's, under ids of its own
    alice = [v for v in ls.votes if v.rater == "alice"]
    assert alice and not {v.id for v in alice} & {row[0] for row in _package_votes(pkg)}


# ---------------------------------------------------------------------- counts


def test_forty_copies_of_one_vote_count_once(shared, capsys):
    db, sid, _, _, pkg = shared
    votes = _package_votes(pkg)
    (vid, created, case) = votes[0]
    copies = [_copy_vote(pkg, vid, {"created": created + 1 + i, "choice": "B" if i % 2 else "A"}) for i in range(40)]
    code, out, err = _import(pkg, db, capsys)
    assert code == 0, err
    ls = _loaded(db, sid)
    turn_case = {t.id: t.case_id for t in ls.turns}
    current = [v for v in ls.current_votes() if v.rater == "alice"]
    assert sorted(turn_case[v.turn_id] for v in current) == ["c1", "c2"]     # one per unit
    (latest,) = [v for v in current if turn_case[v.turn_id] == case]
    assert latest.choice == "B" and latest.created == created + 40           # the last copy counts
    # re-importing changes nothing; a copy added since supersedes the one that counted
    code, out, _ = _import(pkg, db, capsys)
    assert code == 0 and "nothing new" in out
    _copy_vote(pkg, copies[-1], {"created": created + 100, "choice": "tie"})
    assert _import(pkg, db, capsys)[0] == 0
    current = [v for v in _loaded(db, sid).current_votes() if v.rater == "alice"]
    assert len(current) == 2 and {v.choice for v in current if turn_case[v.turn_id] == case} == {"tie"}


# ---------------------------------------------------------------------- numbers


@pytest.mark.parametrize("table, field, value, says", [
    ("vote", "created", 1e18, "is not a time"),
    ("vote", "created", -5, "is not a time"),
    ("vote", "created", "nan", "'nan' is not a number"),
    ("vote", "retracted_at", "yesterday", "'yesterday' is not a number"),
    ("vote", "created", float("inf"), "inf is not a finite number"),
    ("tag", "created", "soon", "'soon' is not a number"),
    ("tag", "removed_at", 9e15, "is not a time"),
])
def test_a_number_out_of_range_in_a_package_is_refused_naming_table_row_and_field(shared, capsys, table, field,
                                                                                     value, says):
    db, sid, _, _, pkg = shared
    (rid,) = sqlite3.connect(pkg).execute(f"SELECT id FROM {table} ORDER BY id LIMIT 1").fetchone()
    _edit(pkg, (f"UPDATE {table} SET {field} = ? WHERE id = ?", [value, rid]))
    code, out, err = _import(pkg, db, capsys)
    assert code == 2, (out, err)
    assert f"{pkg}: {table} {rid}: {field}: " in err and says in err and "nothing was imported" in err
    assert "Traceback" not in err
    ls = _loaded(db, sid)
    assert not [v for v in ls.votes if v.rater == "alice"] and not [t for t in ls.tags if t.rater == "alice"]


# ---------------------------------------------------------------------- kinds


@pytest.mark.parametrize("changes, says", [
    ({"rater_kind": "judge", "judge": "gpt-judge", "rater": "judge:gpt-judge"}, "judge"),
    ({"judge_reason": "A is better", "judge_cost": 0.5}, "judge's verdict"),
    ({"rater": "judge:gpt-judge"}, "judge's name"),
    ({"rater": "eve\x1b[31m"}, "printable"),
])
def test_a_package_holds_peoples_votes_only(shared, capsys, changes, says):
    db, sid, _, _, pkg = shared
    (vid, _, _) = _package_votes(pkg)[0]
    sets = ", ".join(f"{k} = ?" for k in changes)
    _edit(pkg, (f"UPDATE vote SET {sets} WHERE id = ?", [*changes.values(), vid]))
    code, out, err = _import(pkg, db, capsys)
    assert code == 2, (out, err)
    assert says in err and "altered" in err and "nothing was imported" in err
    ls = _loaded(db, sid)
    assert [v.rater for v in ls.votes] == ["olive"]


# ---------------------------------------------------------------------- recognised however it arrives


@pytest.mark.parametrize("marks", [0, 2])
def test_a_package_without_its_one_marker_row_is_refused_not_merged(shared, capsys, marks):
    db, sid, _, _, pkg = shared
    if marks == 0:
        _edit(pkg, ("DELETE FROM package_info", []))
    else:
        _edit(pkg, ("INSERT INTO package_info (id, origin, created, format, seed, tags) "
                    "SELECT id || 'x', origin, created, format, seed, tags FROM package_info", []))
    code, out, err = _import(pkg, db, capsys)
    assert code == 2, (out, err)
    assert f"{marks} package_info rows" in err and "nothing was imported" in err
    with Store.open(db) as store:
        assert len(store.list_sessions()) == 1
        assert store.conn.execute("SELECT count(*) FROM contestant WHERE provider = 'blind'").fetchone() == (0,)


def _journal_mode_byte(path: Path) -> int:
    """Byte 18 of a SQLite header: 1 rollback journal, 2 WAL."""
    return path.read_bytes()[18]


def test_lineup_vote_leaves_the_package_in_rollback_journal_mode(shared, tmp_path, monkeypatch):
    db, sid, _, _, _ = shared
    pkg = tmp_path / "fresh.db"
    assert main(["share", sid, "-o", str(pkg), "--db", str(db)]) == 0
    assert _journal_mode_byte(pkg) == 1
    import lineup.launch

    def queue_instead_of_screen(path, config, *, vote, rater):   # the rater's votes, as the TUI casts them
        anyio.run(_vote, Path(path), rater)
        assert _journal_mode_byte(Path(path)) == 2         # a store writes in WAL mode
        return 0

    monkeypatch.setattr(lineup.launch, "run_app", queue_instead_of_screen)
    assert main(["vote", str(pkg), "--rater", "bob"]) == 0
    assert _journal_mode_byte(pkg) == 1
    assert not Path(f"{pkg}-wal").exists()
    with Store.open(pkg, readonly=True) as store:
        assert {v.rater for v in store.load_session(store.list_sessions()[0].id).votes} == {"bob"}


# ---------------------------------------------------------------------- a read-only share


def _read_only_share(tmp_path: Path, files: list[Path], command: list[str]) -> subprocess.CompletedProcess:
    """Run `lineup COMMAND` where `files` lie on a read-only bind mount
    (`share/`), in a private mount namespace; skipped where none can be made."""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare(1) to mount a read-only share")
    src, view = tmp_path / "share-src", tmp_path / "share"
    src.mkdir()
    view.mkdir()
    for f in files:
        shutil.copy(f, src / f.name)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {src} {view} && "
                            f"mount -o remount,bind,ro {view}"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {probe.stderr.strip()}")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    lineup = " ".join(f"'{a}'" for a in [sys.executable, "-m", "lineup", *command])
    return subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {src} {view} && "
                           f"mount -o remount,bind,ro {view} && exec {lineup}"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_a_voted_package_on_a_read_only_share_is_imported_as_a_package(shared, tmp_path):
    db, sid, _, _, pkg = shared
    assert _journal_mode_byte(pkg) == 2      # voted by a store: WAL mode, no -shm on a read-only share
    proc = _read_only_share(tmp_path, [pkg], ["import", str(tmp_path / "share" / pkg.name), "--db", str(db)])
    assert proc.returncode == 0, proc.stderr
    assert "lineup-package" in proc.stdout and "Traceback" not in proc.stderr
    with Store.open(db) as store:
        assert len(store.list_sessions()) == 1             # no opaque session merged beside the real one
        assert store.conn.execute("SELECT count(*) FROM contestant WHERE provider = 'blind'").fetchone() == (0,)
    current = [v for v in _loaded(db, sid).current_votes() if v.rater == "alice"]
    assert len(current) == 2 and all(set(v.mapping.values()) == set(ALIASES) for v in current)


def test_lineup_vote_on_a_read_only_package_says_it_is_read_only(shared, tmp_path):
    db, sid, _, _, pkg = shared
    proc = _read_only_share(tmp_path, [pkg], ["vote", str(tmp_path / "share" / pkg.name), "--rater", "bob"])
    assert proc.returncode == 2, proc.stderr
    assert "read-only" in proc.stderr and "not a vote package" not in proc.stderr
