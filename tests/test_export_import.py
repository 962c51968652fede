"""Export (JSONL / CSV / Markdown), import (our JSONL, Chatbot Arena, another
database), and every kind of bad input, through `lineup.cli.main`."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from tests.synthetic import synthetic_session, write_synthetic
from lineup.cli import main
from store import (
    SCHEMA_VERSION,
    CheckResultRecord,
    Store,
    StoreError,
    TagRecord,
    TurnRecord,
    VoteRecord,
)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rich_session(store: Store, *, blind: bool = False, seed: int = 1, created: float = 1.8e9):
    """A session with everything: superseded votes, tags (one removed), checks, odd text."""
    s, turns, outs, votes = synthetic_session(turns=3, blind=blind, seed=seed, created=created)
    outs[0] = outs[0].model_copy(update={"text": "ünïcode ✓ \x1b[31mred\x1b[0m \x9b2J line\u2028sep"})
    outs[1] = outs[1].model_copy(update={"status": "error", "error_kind": "rate_limited",
                                         "error_message": "model-1 said 429", "text": ""})
    write_synthetic(store, s, turns, outs, votes)
    labels = list(votes[0].mapping)
    store.add_vote(VoteRecord(session_id=s.id, turn_id=turns[0].id, choice=labels[1], mapping=votes[0].mapping,
                              positions=votes[0].positions, supersedes=votes[0].id, note="changed",
                              created=created + 50))
    keep = TagRecord(output_id=outs[2].id, tag="too_verbose", note="long")
    gone = TagRecord(output_id=outs[2].id, tag="hallucination")
    store.add_tag(keep)
    store.add_tag(gone)
    store.remove_tag(gone.id)
    store.add_check_result(CheckResultRecord(output_id=outs[2].id, check="regex", spec={"pattern": "x"},
                                             passed=True, detail=None))
    return s, turns, outs


def run_cli(*argv: str) -> int:
    return main(list(argv))


# ---------------------------------------------------------------------- JSONL

def test_jsonl_export_import_export_is_identical(tmp_path, capsys):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    with Store.open(a) as store:
        s, turns, outs = rich_session(store)
        rich_session(store, seed=2, created=1.7e9)  # an older session: not the default export
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    assert run_cli("export", "--db", str(a), "--format", "jsonl", "-o", str(first)) == 0
    assert run_cli("import", "--db", str(b), str(first)) == 0
    assert run_cli("export", "--db", str(b), s.id, "--format", "jsonl", "-o", str(second)) == 0
    assert first.read_bytes() == second.read_bytes()
    lines = [json.loads(x) for x in first.read_text().splitlines()]
    assert len(lines) == len(outs) == 6
    rec = lines[0]
    assert rec["session"]["id"] == s.id and rec["prompt"] == turns[0].user_message
    assert rec["params"]["max_tokens"] == 512 and rec["params"]["temperature"] == 0.0  # contestant overrides
    assert len(rec["votes"]) == 2 and rec["votes"][1]["supersedes"] == rec["votes"][0]["id"]
    assert "\x1b" not in first.read_text() and "\x9b" not in first.read_text()
    assert rec["output"]["text"] == outs[0].text  # ... yet the text itself is exact
    with Store.open(b) as store:
        loaded = store.load_session(s.id)
        assert [t.tag for t in loaded.tags] == ["too_verbose"] and len(loaded.checks) == 1
        assert len(loaded.current_votes()) == 3
    capsys.readouterr()
    assert run_cli("import", "--db", str(b), str(first)) == 0  # again: nothing new
    assert "nothing new" in capsys.readouterr().out
    with Store.open(b) as store:
        assert store.counts() == {"session": 1, "contestant": 2, "turn": 3, "output": 6, "vote": 4, "tag": 1,
                                  "check_result": 1}


def test_export_to_stdout_defaults_to_the_latest_session(tmp_path, capsys):
    db = tmp_path / "x.db"
    with Store.open(db) as store:
        old = rich_session(store, seed=1, created=1.7e9)[0]
        new = rich_session(store, seed=2, created=1.8e9)[0]
    assert run_cli("export", "--db", str(db), "--format", "jsonl") == 0
    ids = {json.loads(x)["session"]["id"] for x in capsys.readouterr().out.splitlines()}
    assert ids == {new.id}
    assert run_cli("export", "--db", str(db), old.id[:18], "--format", "md") == 0
    assert old.id in capsys.readouterr().out
    assert run_cli("export", "--db", str(db), "NOSUCH", "--format", "md") == 2
    assert "no session 'NOSUCH'" in capsys.readouterr().err
    assert run_cli("export", "--db", str(db), "--format", "csv", "-o", str(db)) == 2  # never over the database


# ---------------------------------------------------------------------- CSV

def test_csv_has_one_row_per_vote_and_neutralises_formulas(tmp_path, capsys):
    db = tmp_path / "x.db"
    with Store.open(db) as store:
        s, turns, outs = rich_session(store)
        store.add_turn(TurnRecord(session_id=s.id, position=3, user_message='=HYPERLINK("http://x","y")'))
        t = store.load_session(s.id).turns[-1]
        mapping = {c.label: c.alias for c in s.contestants}
        store.add_vote(VoteRecord(session_id=s.id, turn_id=t.id, choice="tie", mapping=mapping,
                                  positions=list(mapping), rater="@evil", note="+1 cmd|' /C calc'!A0",
                                  created=1.8e9 + 100))
        store.add_vote(VoteRecord(session_id=s.id, turn_id=t.id, choice="both_bad", mapping=mapping,
                                  positions=list(mapping), rater="-2+3", note="fine", created=1.8e9 + 101))
    assert run_cli("export", "--db", str(db), "--format", "csv") == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 6  # 3 synthetic + 1 changed + 2 above
    assert sum(r["current"] == "1" for r in rows) == 5
    last = rows[-2]
    assert last["prompt"].startswith("'=HYPERLINK") and last["rater"] == "'@evil" and last["note"].startswith("'+1")
    assert rows[-1]["rater"] == "'-2+3" and rows[-1]["note"] == "fine"
    assert not [v for r in rows for v in r.values() if v[:1] in ("=", "+", "-", "@")]
    assert rows[0]["models"] == "model-0=model-0; model-1=model-1"
    assert rows[3]["chosen_model"] == rows[3]["choice"]


def test_csv_and_markdown_hide_identities_until_revealed(tmp_path, capsys):
    db = tmp_path / "x.db"
    with Store.open(db) as store:
        s, _, _ = rich_session(store, blind=True)
    assert run_cli("export", "--db", str(db), "--format", "md") == 0
    md = capsys.readouterr().out
    assert run_cli("export", "--db", str(db), "--format", "csv") == 0
    table = capsys.readouterr().out
    for text in (md, table):
        assert "model-0" not in text and "model-1" not in text  # aliases, model names, error messages
    assert "### A" in md and "### B" in md and "identities hidden" in md
    # core.stats.votes.error_line, Markdown-escaped like every line of the export
    assert r"_(error \(rate limited\) — details after the vote)_" in md
    assert {r["models"] for r in csv.DictReader(io.StringIO(table))} == {"hidden"}
    assert "\x1b" not in md and "\\x1b[31mred" in md and "\\x9b2J" in md
    with Store.open(db) as store:
        store.reveal_session(s.id)
    assert run_cli("export", "--db", str(db), "--format", "md") == 0
    md = capsys.readouterr().out
    assert "### A (model-0)" in md and "model-1 said 429" in md and "openai/model-0-v1" in md


def test_a_reveal_without_a_vote_survives_export_import_and_merge(tmp_path, capsys):
    """A turn revealed by the rater without a vote: the Markdown export names
    its models, and the reveal travels with the JSONL record and a merge."""
    from store import RevealRecord

    a, b, c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    with Store.open(a) as store:
        s, turns, _ = rich_session(store, blind=True)
        store.add_reveal(RevealRecord(session_id=s.id, turn_id=turns[2].id, rater="tester", created=1.9e9))
        assert store.list_sessions()[0].reveal_note == "1 of 3 revealed"
    assert run_cli("export", "--db", str(a), "--format", "md") == 0
    md = capsys.readouterr().out
    assert "(model-0)" not in md.split("## Turn 3")[0] and "### A (model-0)" in md.split("## Turn 3")[1]
    out = tmp_path / "a.jsonl"
    assert run_cli("export", "--db", str(a), "--format", "jsonl", "-o", str(out)) == 0
    assert run_cli("import", "--db", str(b), str(out)) == 0
    assert run_cli("import", "--db", str(c), str(a)) == 0
    for db in (b, c):
        with Store.open(db) as store:
            (reveal,) = store.load_session(s.id).reveals
            assert (reveal.turn_id, reveal.rater, reveal.created) == (turns[2].id, "tester", 1.9e9)
            assert store.list_sessions()[0].reveal_note == "1 of 3 revealed"
    assert run_cli("import", "--db", str(c), str(a)) == 0           # again: nothing new
    with Store.open(c) as store:
        assert len(store.load_session(s.id).reveals) == 1


# ---------------------------------------------------------------------- Chatbot Arena

ARENA = [
    {"model_a": "gpt-4", "model_b": "claude-2", "winner": "model_a", "tstamp": 1700000000.5, "judge": "arena_user_1",
     "turn": 1, "question_id": "q1",
     "conversation_a": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello from A"}],
     "conversation_b": [{"role": "user", "content": "Hi?"}, {"role": "assistant", "content": "Hello from B"}]},
    {"model_a": "claude-2", "model_b": "llama-2", "winner": "tie (bothbad)", "tstamp": 1700000100.0, "turn": 2,
     "conversation_a": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "a1"},
                        {"role": "user", "content": "two"}, {"role": "assistant", "content": "a2"}],
     "conversation_b": [{"role": "user", "content": "one"}, {"role": "assistant", "content": "b1"},
                        {"role": "user", "content": "two"}, {"role": "assistant", "content": "b2"}]},
    {"model_a": "llama-2", "model_b": "gpt-4", "winner": "model_b"},
    {"model_a": "gpt-4", "model_b": "llama-2", "winner": "tie", "tstamp": 1700000200},
]


@pytest.mark.parametrize("shape", ["array", "jsonl"])
def test_arena_battles_become_sessions_turns_outputs_and_votes(tmp_path, capsys, shape):
    db, src = tmp_path / "x.db", tmp_path / f"battles.{'json' if shape == 'array' else 'jsonl'}"
    src.write_text(json.dumps(ARENA, indent=1) if shape == "array" else "\n".join(json.dumps(b) for b in ARENA))
    assert run_cli("import", "--db", str(db), str(src)) == 0
    assert "arena" in capsys.readouterr().out
    with Store.open(db) as store:
        [summary] = store.list_sessions()
        loaded = store.load_session(summary.id)
        counts = {m.alias: (m.votes, m.wins, m.losses, m.ties, m.bad) for m in store.votes_per_model()}
    assert summary.kind == "import" and summary.contestants == ["claude-2", "gpt-4", "llama-2"]
    assert [t.user_message for t in loaded.turns] == ["Hi?", "one", "two", "", ""]
    assert [t.follow_up_index for t in loaded.turns] == [0, 0, 1, 0, 0]
    first = loaded.outputs_for(loaded.turns[0].id)
    assert {(o.label, o.contestant, o.text) for o in first} == {("A", "gpt-4", "Hello from A"),
                                                                 ("B", "claude-2", "Hello from B")}
    votes = loaded.current_votes()
    assert sorted(v.choice for v in votes) == ["A", "B", "both_bad", "tie"]
    v0 = next(v for v in votes if v.turn_id == loaded.turns[0].id)
    assert v0.rater == "arena_user_1" and v0.mapping == {"A": "gpt-4", "B": "claude-2"} and v0.winner == "gpt-4"
    assert next(v for v in votes if v.turn_id == loaded.turns[2].id).choice == "both_bad"  # on the last turn
    assert counts == {"gpt-4": (3, 2, 0, 1, 0), "llama-2": (3, 0, 1, 1, 1), "claude-2": (2, 0, 1, 0, 1)}
    assert run_cli("import", "--db", str(db), str(src)) == 0  # idempotent
    assert "nothing new" in capsys.readouterr().out
    with Store.open(db) as store:
        assert store.counts()["vote"] == 4 and store.counts()["session"] == 1


def test_malformed_line_names_file_and_line_and_imports_nothing(tmp_path, capsys):
    db = tmp_path / "x.db"
    with Store.open(db) as store:
        rich_session(store)
        before = store.counts()
    good = [json.dumps(b) for b in ARENA]
    cases = {
        "syntax.jsonl": (good[:3] + ['{"model_a": "x", "model_b": '] + good[3:], ":4: invalid JSON"),
        "winner.jsonl": (good[:2] + ["", json.dumps({"model_a": "a", "model_b": "b", "winner": "model_c"})],
                         ":4: winner"),
        "missing.jsonl": (good[:1] + [json.dumps({"model_a": "a", "winner": "tie"})], ":2: model_b"),
        "neither.jsonl": (good[:1] + ['{"hello": 1}'], ":2: neither a lineup export record"),
        "scalar.jsonl": (good[:1] + ["42"], ":2: expected a JSON object"),
    }
    for name, (lines, expected) in cases.items():
        src = tmp_path / name
        src.write_text("\n".join(lines) + "\n")
        assert run_cli("import", "--db", str(db), str(src)) == 2, name
        err = capsys.readouterr().err
        assert f"{src}{expected}" in err and "nothing was imported" in err, (name, err)
    # our own format, one bad record among good ones
    exported = tmp_path / "ours.jsonl"
    assert run_cli("export", "--db", str(db), "--format", "jsonl", "-o", str(exported)) == 0
    lines = exported.read_text().splitlines()
    broken = json.loads(lines[2])
    broken["output"]["status"] = "exploded"
    other = tmp_path / "other.db"
    (tmp_path / "bad_ours.jsonl").write_text("\n".join(lines[:2] + [json.dumps(broken)] + lines[3:]) + "\n")
    assert run_cli("import", "--db", str(other), str(tmp_path / "bad_ours.jsonl")) == 2
    assert ":3: output.status" in capsys.readouterr().err
    with Store.open(db) as store:
        assert store.counts() == before
    with Store.open(other) as store:
        assert store.counts()["session"] == 0


# ---------------------------------------------------------------------- merging databases

def test_merging_another_database_is_idempotent(tmp_path, capsys):
    mine, theirs = tmp_path / "mine.db", tmp_path / "theirs.db"
    with Store.open(mine) as store:
        mine_s, _, _ = rich_session(store, seed=1)
    with Store.open(theirs) as store:
        theirs_s, _, theirs_outs = rich_session(store, seed=2)
        rich_session(store, seed=3, blind=True)
    # the teammate also has my session, where they removed a tag and revealed it
    assert run_cli("import", "--db", str(theirs), str(mine)) == 0
    with Store.open(theirs) as store:
        tag_id = store.load_session(mine_s.id).tags[0].id
        store.remove_tag(tag_id)
        expected = store.counts()
        expected_votes = {(m.alias, m.votes, m.wins) for m in store.votes_per_model()}
    theirs_hash = sha(theirs)
    capsys.readouterr()
    assert run_cli("import", "--db", str(mine), str(theirs)) == 0
    assert "lineup-db" in capsys.readouterr().out
    with Store.open(mine) as store:
        assert store.counts() == expected
        assert {(m.alias, m.votes, m.wins) for m in store.votes_per_model()} == expected_votes
        assert store.load_session(mine_s.id).tags == []  # the removal came across
        assert len(store.load_session(theirs_s.id).current_votes()) == 3
        assert store.search("ünïcode") and len(store.list_sessions()) == 3
    assert run_cli("import", "--db", str(mine), str(theirs)) == 0
    assert "nothing new" in capsys.readouterr().out
    with Store.open(mine) as store:
        assert store.counts() == expected
    assert sha(theirs) == theirs_hash  # the source is only read


def test_merge_refuses_a_database_that_is_not_lineup(tmp_path, capsys):
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.commit()
    conn.close()
    before = sha(foreign)
    assert run_cli("import", "--db", str(tmp_path / "x.db"), str(foreign)) == 2
    assert "not a lineup database" in capsys.readouterr().err
    assert run_cli("sessions", "--db", str(foreign)) == 2
    assert "not a lineup database" in capsys.readouterr().err
    assert sha(foreign) == before


# ---------------------------------------------------------------------- bad databases

def test_a_file_that_is_not_sqlite_is_reported_and_never_overwritten(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my precious notes\n" * 100)
    before = sha(notes)
    with pytest.raises(StoreError, match="not a SQLite database"):
        Store.open(notes)
    assert run_cli("import", "--db", str(notes), str(notes)) == 2
    assert "not a SQLite database" in capsys.readouterr().err
    assert run_cli("export", "--db", str(notes)) == 2
    assert sha(notes) == before
    assert {p.name for p in tmp_path.iterdir()} == {"notes.txt"}


@pytest.mark.slow
def test_a_corrupt_database_is_reported_and_left_untouched(tmp_path):
    db = tmp_path / "x.db"
    with Store.open(db) as store:
        rich_session(store)
    data = bytearray(db.read_bytes())
    data[100:4096] = os.urandom(3996)  # page 1: the schema itself
    db.write_bytes(bytes(data))
    before = sha(db)
    with pytest.raises(StoreError, match=f"{db}.*(corrupt|malformed|not a database)"):
        with Store.open(db) as store:
            store.load_session(store.latest_session_id() or "X")
    assert sha(db) == before


@pytest.mark.slow
def test_a_newer_schema_is_refused_naming_its_version(tmp_path, capsys):
    db = tmp_path / "x.db"
    with Store.open(db):
        pass
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                 "VALUES ('lineup', 'm999_from_the_future', 'tomorrow')")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = sha(db)
    for readonly in (False, True):
        with pytest.raises(StoreError, match=f"newer lineup \\(schema version {SCHEMA_VERSION + 1};"):
            Store.open(db, readonly=readonly)
    assert run_cli("export", "--db", str(db)) == 2
    assert f"schema version {SCHEMA_VERSION + 1}" in capsys.readouterr().err
    assert sha(db) == before


@pytest.mark.slow
def test_a_read_only_database_opens_for_reading(tmp_path):
    db = tmp_path / "x.db"
    with Store.open(db) as store:
        s, _, _ = rich_session(store)
    before = sha(db)
    with Store.open(db, readonly=True) as store:
        assert store.readonly and store.load_session(s.id).session == s
        assert store.list_sessions()[0].id == s.id and store.search("ünïcode")
        with pytest.raises(StoreError, match="read-only"):
            store.add_turn(TurnRecord(session_id=s.id, position=9, user_message="x"))
        with pytest.raises(StoreError, match="read-only"):
            store.remove_tag("whatever")
    assert sha(db) == before


READER = """
import site, sys
site.addsitedir(sys.argv[2])  # the project's virtualenv, for an interpreter outside it
from lineup.cli import main
from store import Store, StoreError, TurnRecord
store = Store.open(sys.argv[1])
assert store.readonly, "should have noticed it cannot write"
sid = store.latest_session_id()
store.load_session(sid)
try:
    store.add_turn(TurnRecord(session_id=sid, position=9, user_message="x"))
    raise SystemExit("write succeeded")
except StoreError as exc:
    assert "read-only" in str(exc), exc
store.close()
sys.exit(main(["export", "--db", sys.argv[1], "--format", "md"]))
"""


@pytest.mark.slow
def test_a_database_in_a_read_only_folder_is_detected_and_readable():
    """File mode 0444 in a 0555 folder: opened read-only without being told (no -wal/-shm can be made)."""
    root = Path(tempfile.mkdtemp(prefix="lineup-ro-", dir="/tmp"))
    folder = root / "ro"
    folder.mkdir()
    db = folder / "x.db"
    try:
        with Store.open(db) as store:
            rich_session(store)
        before = sha(db)
        os.chmod(db, 0o444)
        os.chmod(folder, 0o555)
        os.chmod(root, 0o755)
        python, kwargs = sys.executable, {}
        if os.geteuid() == 0:  # root ignores file modes: read as an ordinary user
            kwargs = {"user": 65534, "group": 65534}
            # our interpreter may live in root's home; a system one of the same version can load the venv
            version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
            python = shutil.which(version, path="/usr/local/bin:/usr/bin") or python
        try:
            proc = subprocess.run([python, "-c", READER, str(db), sysconfig.get_paths()["purelib"]],
                                  capture_output=True, text=True, timeout=60, cwd="/", **kwargs)
        except PermissionError as exc:
            pytest.skip(f"no Python an unprivileged user may run here: {exc}")
        if proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr:
            pytest.skip(f"the unprivileged user cannot import lineup here: {proc.stderr[-300:]}")
        assert proc.returncode == 0, proc.stderr
        assert "## Turn 1" in proc.stdout
        assert sha(db) == before and sorted(p.name for p in folder.iterdir()) == ["x.db"]
    finally:
        os.chmod(folder, stat.S_IRWXU)
        shutil.rmtree(root, ignore_errors=True)
