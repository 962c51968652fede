"""The report's digests (`store.digests`): kept with the record, read the
same as the rows.

Each kind of write, merge and import is made on a store whose digests are
all in place; after it, every digest still stored must be what the rows
give now (a trigger deletes the others in the same transaction), and the
report's reads from the digests must equal its reads from the rows, in every
scope. Then the writer's refresh brings them back, and the same holds."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from core.report.build import rater_agreement
from core.report.agreement import agreement
from core.report.model import ReportFilters
from core.report.patterns import read_votes
from core.stats import votes as V
from store import Store
from store import digest_keys as K
from store import digests as D
from store import report_queries as Q
from store.imports import merge_database, write_imported
from store.records import OutputRecord, TurnRecord
from store.share import merge_package_records
from tests.synthetic import synthetic_session, write_synthetic

ROOT = Path(__file__).resolve().parents[1]


def stale(store: Store) -> list[str]:
    """Stored digests, of sessions and of groups, that are not what the rows
    give now (none may be)."""
    conn = store.conn
    k = K.key()
    assert k is not None
    rows = conn.execute("SELECT session_id, data, turns FROM report_digest").fetchall()
    fresh = D.build(conn, [sid for sid, *_ in rows])
    found = [sid for sid, blob, turns in rows if (blob, turns) != D.encode(fresh[sid], k)]
    for grp, blob, turns in conn.execute("SELECT grp, data, turns FROM report_group").fetchall():
        members = [r[0] for r in conn.execute("SELECT session_id FROM report_group_member WHERE grp = ? "
                                              "ORDER BY session_id", [grp])]
        built = D.build(conn, members)
        if (blob, turns) != D.encode(D.merge([built[sid] for sid in members]), k):
            found.append(f"group {grp}")
    return found


def stored(store: Store) -> tuple[int, bool]:
    """(session digests stored, whether every session is in a group whose digest is stored)."""
    conn = store.conn
    return (conn.execute("SELECT count(*) FROM report_digest").fetchone()[0],
            conn.execute("SELECT count(*) FROM session WHERE id NOT IN (SELECT m.session_id FROM "
                         "report_group_member m JOIN report_group g ON g.grp = m.grp)").fetchone()[0] == 0)


def scopes(store: Store) -> list[Q.Scope]:
    first = store.conn.execute("SELECT id FROM session ORDER BY id").fetchone()
    return [Q.Scope(), Q.Scope(category="code"), Q.Scope(rater="ann"), Q.Scope(since=1.7e9 + 1.5),
            Q.Scope(include_demo=True), Q.Scope(rater_kind="judge"), Q.Scope(category="math", include_demo=True),
            *([Q.Scope(sessions=(first[0],)), Q.Scope(sessions=(first[0], "no-such-session"))] if first else [])]


def assert_reads_agree(store: Store) -> None:
    """Votes, answers and values out of range: from the digests as from the rows."""
    for scope in scopes(store):
        for demo in (False, True):
            a = Q.read_votes(store, scope, with_ids=True, demo=demo)
            b = Q.read_votes(store, scope, with_ids=True, demo=demo, sql=True)
            assert (a.keys, a.metas, a.ids, a.demo_session) == (b.keys, b.metas, b.ids, b.demo_session), scope
            assert a.key.tolist() == b.key.tolist() and a.meta.tolist() == b.meta.tolist(), scope
        oa, ob = Q.read_outputs(store, scope), Q.read_outputs(store, scope, sql=True)
        assert [m for m, _ in oa.models] == [m for m, _ in ob.models], scope
        for (m, i), (_, j) in zip(oa.models, ob.models, strict=True):
            for col in ("status", "ttft", "duration", "cost", "input_tokens", "output_tokens", "estimated", "cached"):
                assert np.array_equal(getattr(oa, col)[i], getattr(ob, col)[j], equal_nan=True), (scope, m, col)
            if oa.raw is not None or ob.raw is not None:
                assert [[r[k] for k in i.tolist()] for r in oa.raw] == [[r[k] for k in j.tolist()] for r in ob.raw]
        assert (oa.answers, oa.kinds, oa.stale) == (ob.answers, ob.kinds, ob.stale), scope
        named = list(scope.sessions)
        assert Q.outputs_out_of_range(store, named) == store.out_of_range(named or None, tables=("output",))


def _vote(session, turn, choice_k: int, rater: str, at: float, supersedes=None):
    mapping = {c.label: c.alias for c in session.contestants}
    labels = list(mapping)
    return V.make_votes(session.id, [turn.id], labels[choice_k % len(labels)] if choice_k >= 0 else "tie",
                        mapping=mapping, positions=labels, rater=rater, revealed=False, now=at,
                        supersedes=supersedes)[0]


@pytest.fixture
def world(tmp_path):
    """Three sessions: two raters on shared cases, a demo session, answers
    with an error, a retry and a cost not recorded."""
    path = tmp_path / "d.db"
    made = []
    with Store.open(path) as store:
        for seed, aliases in enumerate((["m0", "m1"], ["m1", "m2"], ["demo-a", "m0"])):
            s, ts, outs, vs = synthetic_session(turns=6, contestants=2, words=4, seed=seed, aliases=aliases,
                                                created=1.7e9 + seed)
            outs[1] = outs[1].model_copy(update={"status": "error", "error_kind": "timeout", "text": ""})
            outs[2] = outs[2].model_copy(update={"cost": None})
            write_synthetic(store, s, ts, outs, vs)
            retry = outs[0].model_copy(update={"id": outs[0].id[:-1] + "Z", "attempt": 1,
                                               "created": outs[0].created + 0.25})
            store.finish_output(retry)
            for k, t in enumerate(ts[:4]):
                store.add_vote(_vote(s, t, k, "ann", 1.7e9 + 50 + k))
            made.append((s, ts, outs))
        store.refresh_digests()
        assert stored(store) == (3, True)
    return path, made


def _new_output(session, turn, k: int, **fields) -> OutputRecord:
    c = session.contestants[k % len(session.contestants)]
    base = dict(id=f"01NEWOUTPUT{k:015d}", session_id=session.id, turn_id=turn.id, contestant=c.alias,
                label=c.label, status="complete", text="new", ttft_ms=120.0, duration_ms=900.0,
                input_tokens=5, output_tokens=7, cost=1e-5, created=1.71e9 + k, is_demo=c.is_demo)
    base.update(fields)
    return OutputRecord(**base)


def _write_turn(store, made):
    s, ts, _ = made[0]
    store.add_turn(TurnRecord(session_id=s.id, position=99, case_id="case-new", category="code",
                              user_message="more", created=1.71e9))


def _write_output(store, made):
    s, ts, _ = made[1]
    store.finish_output(_new_output(s, ts[5], 1))


def _write_streaming(store, made):
    s, ts, _ = made[0]
    rec = _new_output(s, ts[3], 2, status="streaming")
    store.start_output(rec)
    store.checkpoint_output(rec.id, "partial")


def _write_vote(store, made):
    s, ts, _ = made[1]
    store.add_vote(_vote(s, ts[5], 1, "bob", 1.71e9))


def _write_superseding_vote(store, made):
    s, ts, _ = made[0]
    store.add_vote(_vote(s, ts[0], 1, "ann", 1.71e9))


def _write_retraction(store, made):
    vid = store.conn.execute("SELECT id FROM vote WHERE rater = 'ann' ORDER BY id LIMIT 1").fetchone()[0]
    assert store.retract_vote(vid)


def _write_reveal(store, made):
    ids = [r[0] for r in store.conn.execute("SELECT id FROM vote LIMIT 3")]
    store.reveal_votes(ids)


def _write_category(store, made):
    with store.batch():
        store.conn.execute("UPDATE turn SET category = 'writing' WHERE category = 'code'")


def _write_kind(store, made):
    s, _, _ = made[1]
    store.update_session(s.id, kind="load")


def _write_rename(store, made):
    s, _, _ = made[2]
    store.rename_session(s.id, "renamed")


def _write_contestants(store, made):
    s, _, _ = made[0]
    cs = [c.model_copy(update={"is_demo": True}) for c in s.contestants]
    store.update_session(s.id, contestants=cs)


def _write_delete(store, made):
    store.delete_session(made[0][0].id)


def _write_out_of_range(store, made):
    with store.batch():
        store.conn.execute("UPDATE output SET ttft_ms = -5 WHERE id = ?", [made[1][2][3].id])


def _write_vote_row_by_hand(store, made):
    with store.batch():
        store.conn.execute("DELETE FROM vote WHERE id = (SELECT max(id) FROM vote)")


def _write_import(store, made):
    s, ts, outs, vs = synthetic_session(turns=3, contestants=2, words=4, seed=9, aliases=["m2", "m3"],
                                        created=1.72e9)
    write_imported(store, [s], [*ts, *outs, *vs], "a test package")


def _write_merge(store, made, tmp_path):
    other = tmp_path / "other.db"
    with Store.open(other) as o:
        write_synthetic(o, *synthetic_session(turns=3, contestants=2, words=4, seed=11, aliases=["m3", "m0"],
                                              created=1.73e9))
    merge_database(store, other)


def _write_package_votes(store, made):
    s, ts, _ = made[2]
    merge_package_records(store, [_vote(s, ts[4], 0, "cat", 1.74e9)], [], "a package")


def _write_cross_session_supersedes(store, made):
    """A vote (from a hostile package) marked as superseding a vote of another session."""
    s, ts, _ = made[1]
    victim = store.conn.execute("SELECT id FROM vote WHERE session_id = ? ORDER BY id LIMIT 1",
                                [made[0][0].id]).fetchone()[0]
    merge_package_records(store, [_vote(s, ts[5], 0, "eve", 1.75e9, supersedes={ts[5].id: victim})], [], "hostile")


WRITES = {name.removeprefix("_write_"): fn for name, fn in globals().items() if name.startswith("_write_")}


@pytest.mark.parametrize("kind", sorted(WRITES))
def test_after_each_kind_of_write_no_stored_digest_is_stale(world, kind, tmp_path):
    path, made = world
    with Store.open(path) as store:
        fn = WRITES[kind]
        fn(store, made, tmp_path) if kind == "merge" else fn(store, made)
        assert stale(store) == []
        assert stored(store)[1] is False               # every change drops the digest of a group
        assert_reads_agree(store)
        store.refresh_digests()
        assert stored(store) == (store.conn.execute("SELECT count(*) FROM session").fetchone()[0], True)
        assert stale(store) == []
        assert_reads_agree(store)


def test_a_writer_brings_the_digests_back_when_it_closes_and_a_reader_never_writes(world):
    path, made = world
    with Store.open(path) as store:
        _write_vote(store, made)
        assert stored(store) == (2, False)
    with Store.open(path, readonly=True) as store:
        assert stored(store) == (3, True)
        assert_reads_agree(store)


def test_a_read_only_file_with_no_digests_reads_the_same(world):
    path, _ = world
    with sqlite3.connect(path) as conn:              # (a Store closing would build them again)
        conn.execute("DELETE FROM report_digest")
        conn.execute("DELETE FROM report_group")
    path.chmod(0o444)
    try:
        with Store.open(path, readonly=True) as store:
            assert stored(store) == (0, False)
            assert_reads_agree(store)
    finally:
        path.chmod(0o644)


def _signed(k: K.Key, body: bytes, turns: str) -> bytes:
    """A blob signed with `k` around `body` (what `D.encode` writes)."""
    return k.prefix + K.mac(k, body, turns.encode()) + body


def _damaged(k: K.Key, blob: bytes, turns: str, damage: str) -> bytes:
    body = blob[K.PREFIX_BYTES:]
    n_head = int.from_bytes(body[:4], "little")
    header = json.loads(body[4:4 + n_head])
    if damage == "garbage":
        return b"\x00" * 64
    if damage == "changed after signing":
        return blob[:-1] + bytes([blob[-1] ^ 1])
    if damage == "signed elsewhere":
        return _signed(K.Key(b"x" * 32, b"elsewhere"[:8]), body, turns)
    if damage == "another format":
        return b"LND\x09" + blob[4:]
    if damage == "truncated (signed)":
        return _signed(k, body[: len(body) // 2], turns)
    if damage == "header not json (signed)":
        return _signed(k, body[:4] + b"{" * n_head + body[4 + n_head:], turns)
    if damage == "codes out of range (signed)":
        header["lists"]["models"] = header["lists"]["models"][:1]
    elif damage == "lists of numbers (signed)":
        header["lists"]["keys"] = [1] * len(header["lists"]["keys"])
    elif damage == "votes out of id order (signed)":
        width, n = header["id_width"], header["sizes"][len(D.OUTPUT_ARRAYS)]
        ids = body[len(body) - n * width:]
        body = body[:len(body) - n * width] + b"".join(reversed([ids[i:i + width] for i in range(0, len(ids), width)]))
    head = json.dumps(header).encode()
    return _signed(k, len(head).to_bytes(4, "little") + head + body[4 + n_head:], turns)


@pytest.mark.parametrize("damage", ["garbage", "changed after signing", "signed elsewhere", "another format",
                                    "truncated (signed)", "header not json (signed)", "codes out of range (signed)",
                                    "lists of numbers (signed)", "votes out of id order (signed)"])
def test_a_damaged_or_planted_digest_is_ignored_and_rebuilt_from_the_rows(world, damage):
    """Damaged, signed with another key (a file from elsewhere), changed
    since it was signed, or signed but not a digest: not read."""
    path, _ = world
    with Store.open(path) as store:
        k = K.key()
        assert k is not None
        sid, blob, turns = store.conn.execute("SELECT session_id, data, turns FROM report_digest "
                                              "ORDER BY session_id").fetchone()
        assert D.decode(blob, turns, k) is not None
        bad = _damaged(k, blob, turns, damage)
        assert D.decode(bad, turns, k) is None
        with store.batch():
            store.conn.execute("UPDATE report_digest SET data = ? WHERE session_id = ?", [bad, sid])
            store.conn.execute("UPDATE report_group SET data = ?", [bad])
        assert_reads_agree(store)
        replaced = store.refresh_digests()   # one not signed here is replaced; a damaged signed one is skipped
        assert replaced == (1 if damage in ("garbage", "signed elsewhere", "another format") else 0)
        assert_reads_agree(store)


def test_digests_made_by_another_user_are_not_read_and_the_next_writer_here_replaces_them(world, tmp_path,
                                                                                       monkeypatch):
    path, made = world
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "someone-else"))
    assert K.key() is None                               # no key of ours yet: no digest is trusted
    with Store.open(path, readonly=True) as store:
        assert_reads_agree(store)
    with Store.open(path) as store:
        assert store.refresh_digests() == 3             # made a key, signed every session again
        assert K.key_path().stat().st_mode & 0o777 == 0o600
        assert stale(store) == []
        assert_reads_agree(store)


@pytest.mark.parametrize("content", [b"", b"\x00" * 32, bytes(range(32)), b"ab" * 10, b"zz" * 32],
                         ids=["empty", "raw zero bytes", "raw bytes", "short", "not hex"])
def test_a_damaged_key_file_is_replaced_by_the_next_writer_and_digests_come_back(world, tmp_path, monkeypatch,
                                                                                 content):
    """A key file that is not a key (cut short by a crash, an older format)
    must not turn the digests off for good: readers trust nothing signed with
    it, and the next writer replaces it with a new key (0600) and signs again."""
    path, made = world
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    K.key_path().parent.mkdir(parents=True)
    K.key_path().write_bytes(content)
    assert K.key() is None                              # a reader trusts nothing with it
    with Store.open(path, readonly=True) as store:
        assert_reads_agree(store)
    assert K.key_path().read_bytes() == content         # and leaves it alone
    with Store.open(path) as store:
        assert store.refresh_digests() == 3
        assert K.key_path().stat().st_mode & 0o777 == 0o600
        assert K.key() is not None and K.key_path().read_bytes() != content
        assert stale(store) == []
        assert_reads_agree(store)


def test_values_the_quick_read_does_not_take_read_from_the_rows(world):
    """Text where a number belongs, a BLOB in a vote's texts: the digest says
    not quick and the report reads the rows, as before."""
    path, made = world
    with Store.open(path) as store:
        with store.batch():
            store.conn.execute("UPDATE output SET ttft_ms = 'fast' WHERE id = ?", [made[0][2][0].id])
            store.conn.execute("UPDATE vote SET rater = CAST('x' AS BLOB) WHERE id = (SELECT min(id) FROM vote)")
        store.refresh_digests()
        d = D.whole(store.conn)
        assert not d.outputs_quick and not d.votes_quick
        assert_reads_agree(store)


@pytest.mark.parametrize("filters", [ReportFilters(), ReportFilters(category="code"), ReportFilters(rater="ann"),
                                     ReportFilters(include_demo=True)], ids=["all", "category", "rater", "demo"])
def test_the_report_from_digests_is_the_report_from_the_rows(world, monkeypatch, filters):
    path, _ = world
    with Store.open(path, readonly=True) as store:
        from core.report import build_report

        from_digests = build_report(store, filters, rounds=50, seed=0).model_dump(exclude={"generated_at"})
        monkeypatch.setattr(Q, "_votes_from_digest", lambda *a, **k: None)
        monkeypatch.setattr(Q, "_outputs_from_digest", lambda *a, **k: None)
        monkeypatch.setattr(Q, "outputs_out_of_range",
                            lambda s, sessions=(): s.out_of_range(list(sessions) or None, tables=("output",)))
        from_rows = build_report(store, filters, rounds=50, seed=0).model_dump(exclude={"generated_at"})
    assert from_digests == from_rows
    assert from_digests["votes_used"] > 0


def _agreement_per_vote(votes, rounds, seed):
    """The per-vote form `rater_agreement` replaced: the reference."""
    verdicts = [None if p.error is not None else (p.models, p.verdict()) for p in votes.patterns]
    rows = []
    for pattern, meta in zip(votes.pattern.tolist(), votes.meta.tolist(), strict=True):
        if verdicts[pattern] is not None:
            rows.append(((votes.metas[meta][2], verdicts[pattern][0]), votes.metas[meta][1], verdicts[pattern][1]))
    return agreement(rows, rounds=min(rounds, 1000), seed=seed)


@pytest.mark.parametrize("seed", range(6))
def test_agreement_from_tallies_is_agreement_vote_by_vote(tmp_path, seed):
    """Several raters, repeated votes (the last counts), a prompt under two
    categories, units one rater judged: the same alphas, pairs and raters."""
    rng = random.Random(seed)
    with Store.open(tmp_path / "a.db") as store:
        for k in range(3):
            s, ts, outs, _ = synthetic_session(turns=8, contestants=3, words=3, seed=seed * 10 + k, votes=False,
                                               aliases=["m0", "m1", "m2"], created=1.7e9 + k * 100)
            write_synthetic(store, s, ts, outs, [])
            for n in range(40):
                t = rng.choice(ts)
                store.add_vote(_vote(s, t, rng.randrange(-1, 3), rng.choice(["ann", "bob", "cy", "dee"]),
                                     1.7e9 + k * 100 + n))
        votes = read_votes(store, Q.Scope(), with_ids=False)[0]
    assert len(votes) > 50
    got, want = rater_agreement(votes, 200, seed), _agreement_per_vote(votes, 200, seed)
    assert got.model_dump() == want.model_dump()
    assert want.units > 0


CHILD = textwrap.dedent("""
    import sys, time
    from store import Store
    from tests.synthetic import synthetic_session, write_synthetic
    with Store.open(sys.argv[1]) as store:
        for k in range(40):
            write_synthetic(store, *synthetic_session(turns=2, contestants=2, words=3, seed=100 + k,
                                                      created=1.8e9 + k))
""")


def test_a_second_process_writing_while_digests_are_refreshed_leaves_none_stale(world):
    path, _ = world
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], cwd=ROOT)
    try:
        checks = 0
        with Store.open(path) as store:
            while child.poll() is None or checks < 3:
                store.refresh_digests(wait_s=2.0)
                store.conn.execute("BEGIN")
                try:
                    assert stale(store) == []
                finally:
                    store.conn.execute("COMMIT")
                checks += 1
    finally:
        child.wait(timeout=60)
    assert child.returncode == 0
    with Store.open(path, readonly=True) as store:
        assert store.conn.execute("SELECT count(*) FROM session").fetchone()[0] == 43
        assert_reads_agree(store)


def test_a_digest_is_built_under_the_write_lock(world):
    """Built outside it, a write landing between the read and the save would
    leave a stale digest: `refresh` runs inside the caller's BEGIN IMMEDIATE."""
    path, made = world
    with Store.open(path) as store:
        _write_vote(store, made)
        other = sqlite3.connect(path, timeout=0.05)
        other.execute("BEGIN IMMEDIATE")
        try:
            assert store.refresh_digests(wait_s=0.05) == 0       # the lock is held: nothing built
            assert stored(store) == (2, False)
        finally:
            other.rollback()
            other.close()
        assert store.refresh_digests() == 1


def test_a_change_drops_only_its_group_and_a_close_rebuilds_only_that(world, monkeypatch):
    path, made = world
    monkeypatch.setattr(D, "GROUP_SIZE", 2)
    with Store.open(path) as store:
        with store.batch():
            store.conn.execute("DELETE FROM report_group")
            store.conn.execute("DELETE FROM report_group_member")
        store.refresh_digests()
        groups = dict(store.conn.execute("SELECT session_id, grp FROM report_group_member").fetchall())
        assert sorted(groups.values()) == [0, 0, 1]
        before = dict(store.conn.execute("SELECT grp, data FROM report_group").fetchall())
        s, ts, _ = made[2]                                   # in the second group, alone
        store.add_vote(_vote(s, ts[5], 0, "bob", 1.76e9))
        assert sorted(r[0] for r in store.conn.execute("SELECT grp FROM report_group")) == [groups[made[0][0].id]]
        assert_reads_agree(store)
        store.refresh_digests()
        after = dict(store.conn.execute("SELECT grp, data FROM report_group").fetchall())
        assert after[0] == before[0] and after[1] != before[1]
        assert stale(store) == []
        assert_reads_agree(store)


KILLED = textwrap.dedent("""
    import sys
    from store import Store
    from tests.synthetic import synthetic_session, write_synthetic
    store = Store.open(sys.argv[1])
    for k in range(10_000):
        write_synthetic(store, *synthetic_session(turns=2, contestants=2, words=3, seed=200 + k,
                                                  created=1.8e9 + k))
        store.refresh_digests(wait_s=2.0)
        if k == 2:
            print("writing", flush=True)
""")


@pytest.mark.parametrize("after_s", [0.05, 0.2, 0.5])
def test_kill_9_between_writes_and_refreshes_leaves_no_stale_digest(world, after_s):
    import signal
    import time

    path, _ = world
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "writing"
        time.sleep(after_s)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    with Store.open(path, readonly=True) as store:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert stale(store) == []
        assert_reads_agree(store)


def test_a_full_disk_at_close_leaves_the_record_and_no_stale_digest(world):
    """The refresh is the close's last write and derived: when the file can
    grow no more it is given up, the close succeeds, nothing recorded is lost."""
    path, made = world
    store = Store.open(path)
    _write_vote(store, made)
    _write_import(store, made)
    (pages,) = store.conn.execute("PRAGMA page_count").fetchone()
    store.conn.execute(f"PRAGMA max_page_count = {pages}")
    assert store.refresh_digests() == 0
    store.close()
    with Store.open(path, readonly=True) as reader:
        assert reader.conn.execute("SELECT count(*) FROM vote WHERE rater = 'bob'").fetchone()[0] == 1
        assert stale(reader) == []
        assert stored(reader)[1] is False
        assert_reads_agree(reader)


def test_a_refresh_asked_for_inside_a_batch_leaves_the_batch_alone(world):
    path, made = world
    with Store.open(path) as store:
        with store.batch():
            _write_vote(store, made)
            assert store.refresh_digests() == 0
            assert store.conn.in_transaction
        assert store.conn.execute("SELECT count(*) FROM vote WHERE rater = 'bob'").fetchone()[0] == 1


REPLACER = textwrap.dedent("""
    import sys
    from store import Store
    from tests.synthetic import synthetic_session, write_synthetic
    with Store.open(sys.argv[1]) as store:       # a write, then the close that signs the digests
        write_synthetic(store, *synthetic_session(turns=2, contestants=2, words=3, seed=int(sys.argv[2]),
                                                  created=1.8e9 + int(sys.argv[2])))
""")


def test_two_writers_meeting_a_damaged_key_at_once_leave_a_key_and_no_stale_digest(world, tmp_path, monkeypatch):
    """Two processes close a write at the same moment over a damaged key
    file: each may replace it, one key stays, and every digest either is
    signed with it and true to the rows or is rebuilt by the next writer."""
    path, _ = world
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    K.key_path().parent.mkdir(parents=True)
    K.key_path().write_bytes(b"\x00" * 32)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [subprocess.Popen([sys.executable, "-c", REPLACER, str(path), str(900 + i)], cwd=ROOT, env=env)
                for i in range(2)]
    assert [c.wait(120) for c in children] == [0, 0]
    assert K.key() is not None and K.key_path().stat().st_mode & 0o777 == 0o600
    assert not [p for p in K.key_path().parent.iterdir() if p.name.startswith(".digest.key.")]
    with Store.open(path, readonly=True) as store:
        assert_reads_agree(store)
    with Store.open(path) as store:
        store.refresh_digests()
        assert stale(store) == []
        assert stored(store) == (store.conn.execute("SELECT count(*) FROM session").fetchone()[0], True)
        assert_reads_agree(store)
