"""The bootstrap's rounds kept between reports (`core.report.draw_cache`).

A report or a decision on votes already rated reads the rounds back instead
of drawing them again, and says exactly what it says without them; a change
to the votes, the seed, the rounds or the code is a miss; a kept file that
is damaged, changed or signed by someone else is never read, and is replaced;
the folder stays bounded; nothing kept breaks a report when it cannot be
written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.report import build_report
from core.report import draw_cache as DC
from core.report.decision import build_decision
from core.stats import ratings as R
from store import Store
from store import digest_keys as K
from store.records import VoteRecord
from store.ids import new_ulid
from tests.synthetic import synthetic_session, write_synthetic

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 60


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "votes.db"
    with Store.open(path) as store:       # a writer: the user's digest key is made at its close
        for i in range(6):
            write_synthetic(store, *synthetic_session(turns=6, contestants=3, seed=i, created=1.7e9 + i * 100))
    return path


@pytest.fixture
def drawn(monkeypatch) -> list[int]:
    """How many bootstraps were drawn (not read back): one chord start each."""
    calls: list[int] = []
    real = R._chord_start

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(R, "_chord_start", counted)
    return calls


def report(db: Path, **kw) -> dict:
    with Store.open(db, readonly=True) as store:
        out = json.loads(build_report(store, rounds=kw.pop("rounds", ROUNDS), seed=kw.pop("seed", 0), **kw).to_json())
    out.pop("generated_at")
    return out


def kept() -> list[Path]:
    return sorted(DC.folder().glob("*" + DC.SUFFIX))


def test_a_second_report_reads_its_rounds_back_and_says_the_same(db, drawn):
    first = report(db)
    n_drawn = len(drawn)
    assert n_drawn >= 4            # the whole and three categories at least
    assert len(kept()) == n_drawn
    second = report(db)
    assert len(drawn) == n_drawn, "the second report drew again"
    assert second == first
    assert report(db, cache=False) == first      # and the same as drawing them afresh
    assert len(drawn) == 2 * n_drawn
    assert first["models"] and all(m["ci_low"] is not None for m in first["models"])


def test_a_decision_reads_the_report_s_category_rounds(db, drawn):
    report(db)
    before = len(drawn)
    with Store.open(db, readonly=True) as store:
        cached = build_decision(store, rounds=ROUNDS, seed=0)
        assert len(drawn) == before
        fresh = build_decision(store, rounds=ROUNDS, seed=0, cache=False)
    assert cached.model_dump() == fresh.model_dump()


def test_new_votes_another_seed_or_other_rounds_are_drawn_again(db, drawn):
    report(db)
    n = len(drawn)
    # one new vote in one category: the whole and that category are drawn again, the others read back
    with Store.open(db) as store:
        sid = store.latest_session_id()
        session = store.load_session(sid)
        turn = next(t for t in session.turns if t.category == "math")
        labels = [c.label for c in session.session.contestants]
        store.add_vote(VoteRecord(id=new_ulid(), session_id=sid, turn_id=turn.id, choice=labels[0],
                                  mapping={c.label: c.alias for c in session.session.contestants},
                                  positions=labels, rater="tester", created=1.8e9))
    report(db)
    assert len(drawn) - n == 2
    n = len(drawn)
    report(db, seed=1)
    assert len(drawn) - n >= 4
    n = len(drawn)
    report(db, rounds=ROUNDS + 1)
    assert len(drawn) - n >= 4
    n = len(drawn)
    report(db, seed=None)          # a fresh stream: drawn, and never kept
    assert len(drawn) - n >= 4
    files = len(kept())
    report(db, seed=None)
    assert len(kept()) == files


def test_an_edit_to_the_rating_code_is_a_miss(db, drawn, monkeypatch):
    report(db)
    n = len(drawn)
    monkeypatch.setattr(R, "_code_fingerprint", lambda: b"another version of ratings.py")
    report(db)
    assert len(drawn) == 2 * n


def _resign(path: Path, body: bytes) -> None:
    """What only a holder of the key could write: `body` signed as this user."""
    k = K.key()
    assert k is not None
    lookup = bytes.fromhex(path.name[:-len(DC.SUFFIX)])
    cache = DC.DrawCache(path.parent, k)
    path.write_bytes(DC.MAGIC + k.id + cache._mac(lookup, body) + body)


def _damage(kind: str, path: Path) -> None:
    blob = path.read_bytes()
    head = DC.HEADER_BYTES
    if kind == "a value changed":
        path.write_bytes(blob[:-3] + bytes([blob[-3] ^ 1]) + blob[-2:])
    elif kind == "cut short":
        path.write_bytes(blob[:len(blob) // 2])
    elif kind == "a byte more":
        path.write_bytes(blob + b"\0")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "signed by another key":
        other = K.Key(b"\1" * K.KEY_BYTES, b"\2" * K.KEY_ID_BYTES)
        lookup = bytes.fromhex(path.name[:-len(DC.SUFFIX)])
        body = blob[head - 8:]
        path.write_bytes(DC.MAGIC + other.id + DC.DrawCache(path.parent, other)._mac(lookup, body) + body)
    elif kind == "signed, with a NaN":
        body = bytearray(blob[head - 8:])
        body[8:16] = np.float64(np.nan).tobytes()
        _resign(path, bytes(body))
    elif kind == "signed, another shape":
        rounds = int.from_bytes(blob[head - 8:head - 4], "little")
        models = int.from_bytes(blob[head - 4:head], "little")
        _resign(path, (rounds * models).to_bytes(4, "little") + (1).to_bytes(4, "little") + blob[head:])
    elif kind == "a folder":
        path.unlink()
        path.mkdir()
    elif kind == "a FIFO":
        path.unlink()
        os.mkfifo(path)
    elif kind == "a link to a device":
        path.unlink()
        path.symlink_to("/dev/zero")
    elif kind == "another format":
        path.write_bytes(b"LNB\x09" + blob[4:])
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["a value changed", "cut short", "a byte more", "empty", "signed by another key",
                                  "signed, with a NaN", "signed, another shape", "a folder", "a FIFO",
                                  "a link to a device", "another format"])
def test_a_damaged_or_foreign_kept_file_is_drawn_again_and_replaced(db, drawn, kind):
    first = report(db)
    n = len(drawn)
    for path in kept():
        _damage(kind, path)
    assert report(db) == first
    assert len(drawn) == 2 * n, "a damaged file was read"
    if kind != "a folder":           # replaced by good ones: the next report reads them back
        assert report(db) == first
        assert len(drawn) == 2 * n


def test_with_no_key_nothing_is_kept(db, drawn, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "someone-else"))   # no writer ran as this user
    first = report(db)
    assert kept() == []
    assert report(db) == first
    assert len(drawn) >= 8


def test_a_cache_folder_that_cannot_be_written_costs_time_not_the_report(db, drawn):
    DC.folder().parent.mkdir(parents=True)
    DC.folder().write_text("not a folder")
    first = report(db)
    assert report(db) == first
    assert DC.folder().read_text() == "not a folder"


def test_the_folder_stays_bounded_least_recently_used_first(tmp_path, monkeypatch):
    monkeypatch.setattr(DC, "MAX_ENTRIES", 5)
    monkeypatch.setattr(DC, "KEEP", 3)
    k = K.Key(b"\3" * K.KEY_BYTES, b"\4" * K.KEY_ID_BYTES)
    cache = DC.DrawCache(tmp_path / "draws", k)
    draws = np.arange(12.0).reshape(4, 3)
    keys = [bytes([i]) * 32 for i in range(6)]
    for i, lookup in enumerate(keys[:5]):
        cache.put(lookup, draws + i)
        os.utime(cache._path(lookup), (1e9 + i, 1e9 + i))
    assert cache.get(keys[0], (4, 3)) is not None          # used now: the newest
    (tmp_path / "draws" / f".{keys[0].hex()}{DC.SUFFIX}.1.aa").write_bytes(b"a part left by a kill")
    os.utime(tmp_path / "draws" / f".{keys[0].hex()}{DC.SUFFIX}.1.aa", (1e9, 1e9))
    (tmp_path / "draws" / f".{keys[1].hex()}{DC.SUFFIX}.2.bb").write_bytes(b"a part being written")
    cache.put(keys[5], draws + 5)
    left = sorted(p.name for p in (tmp_path / "draws").iterdir())
    assert len([n for n in left if not n.startswith(".")]) == 3
    assert {keys[0].hex() + DC.SUFFIX, keys[5].hex() + DC.SUFFIX, keys[4].hex() + DC.SUFFIX} <= set(left)
    assert f".{keys[1].hex()}{DC.SUFFIX}.2.bb" in left and f".{keys[0].hex()}{DC.SUFFIX}.1.aa" not in left
    np.testing.assert_array_equal(cache.get(keys[5], (4, 3)), draws + 5)
    assert cache.get(keys[5], (3, 4)) is None                # asked as another shape: not this entry
    assert oct(os.stat(cache._path(keys[5])).st_mode & 0o777) == "0o600"
    assert oct(os.stat(tmp_path / "draws").st_mode & 0o777) == "0o700"


def test_the_folder_stays_within_its_bytes(tmp_path, monkeypatch):
    """Few but large entries (many models, many rounds): bounded in bytes too."""
    entry = DC.HEADER_BYTES + 8 * 40 * 25
    monkeypatch.setattr(DC, "MAX_BYTES", 3 * entry)
    monkeypatch.setattr(DC, "KEEP_BYTES", 2 * entry)
    cache = DC.DrawCache(tmp_path / "draws", K.Key(b"\5" * K.KEY_BYTES, b"\6" * K.KEY_ID_BYTES))
    keys = [bytes([i]) * 32 for i in range(4)]
    for i, lookup in enumerate(keys):
        cache.put(lookup, np.full((40, 25), float(i)))
        os.utime(cache._path(lookup), (1e9 + i, 1e9 + i))
    assert sorted(p.name for p in (tmp_path / "draws").iterdir()) == sorted(k.hex() + DC.SUFFIX for k in keys[2:])


def test_only_a_seeded_bootstrap_is_kept():
    """`core.stats.ratings` alone, with a store in memory: the same result read
    back; a Generator or no seed (fresh streams) never goes through it."""

    class Memory:
        def __init__(self):
            self.kept: dict[bytes, np.ndarray] = {}

        def get(self, key, shape):
            found = self.kept.get(key)
            return None if found is None else found.copy()

        def put(self, key, draws):
            self.kept[key] = draws.copy()

    rng = np.random.default_rng(5)
    a = rng.integers(0, 4, 400)
    b = (a + rng.integers(1, 4, 400)) % 4
    bs = R.BattleSet.from_arrays([f"m{i}" for i in a], [f"m{i}" for i in b], rng.choice(["a", "b", "tie"], 400))
    memory = Memory()
    plain = R.rate(bs, rounds=50, seed=3)
    cold = R.rate(bs, rounds=50, seed=3, cache=memory)
    warm = R.rate(bs, rounds=50, seed=3, cache=memory)
    assert len(memory.kept) == 1
    for got in (cold, warm):
        np.testing.assert_array_equal(got.replicates, plain.replicates)
        assert [m.model_dump() for m in got.models] == [m.model_dump() for m in plain.models]
    R.rate(bs, rounds=50, seed=None, cache=memory)
    R.bootstrap_thetas(bs, 50, np.random.default_rng(3), lam=0.01, cache=memory)
    assert len(memory.kept) == 1


@pytest.mark.slow
def test_two_reports_at_once_share_the_folder(db):
    """Two processes drawing and keeping the same rounds at the same moment:
    each prints the report, and what is kept reads back the same."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "lineup", "report", "--json", "--bootstrap", "300", "--db", str(db)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-500:] for o in outs]
    reports = [json.loads(o[0]) for o in outs]
    for r in reports:
        r.pop("generated_at")
    assert reports[0] == reports[1]
    assert kept() and not [p for p in DC.folder().iterdir() if p.name.startswith(".")]
    inodes = {p.name: p.stat().st_ino for p in kept()}
    again = subprocess.run(cmd, env=env, capture_output=True, timeout=120, check=True)
    third = json.loads(again.stdout)
    third.pop("generated_at")
    assert third == reports[0]
    assert {p.name: p.stat().st_ino for p in kept()} == inodes     # read back, not written again
