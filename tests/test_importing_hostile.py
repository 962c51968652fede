"""Hostile imports and a record that changes under us, through the CLI as a user runs it: exit codes, the message
naming the right file and field, no traceback, and a refused command leaving
the database byte for byte as it was.

- a database deleted or replaced while `lineup run` writes to it stops the
  run (exit 1, the file named) and never corrupts the file now at that path;
- every number an import brings is checked (times 1990..2200, durations and
  costs finite and not negative, counts whole and not negative): one out of
  range is refused with FILE:LINE and the field, exit 2, nothing imported;
  a bad number already stored never breaks the sessions list, an export or
  the report: they warn and show it as it is;
- another database is merged only if it passes SQLite's integrity check and
  every row's parent is in it (else exit 2, naming that file);
- names, ids, titles, raters and tags from an import reach no export and no
  listing with a control, escape or bidi character in them, nor a line break;
- a closed standard output ends a command quietly (exit 141), a full one is
  said (exit 1); a killed `export -o` leaves no temporary file behind.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_support import existing_db, lineup, lineup_env, sha
from tests.synthetic import synthetic_session, write_synthetic
from store import Store, TagRecord

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 120
pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX processes")

# What a terminal or a Markdown viewer could act on: C0 (but tab and newline), DEL, C1, bidi.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
HOSTILE = "\x1b]0;PWNED\x07\x1b[31mred\x9b2J\u202egnp.exe\u2066\n# injected heading\r\ttab"


def spawn(args: list[str], cwd: Path, db: Path | None = None, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lineup", *args], cwd=cwd, env=lineup_env(db, env), **kw)


def clean(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in (proc.stdout or ""), proc.stderr[-3000:]


def _dump(db: Path) -> dict[str, list]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}").fetchall()))
                for t in ("session", "contestant", "turn", "output", "vote", "tag", "check_result")}
    finally:
        conn.close()


def _integrity(db: Path) -> list:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()


def file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a failing write(), not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


# ---------------------------------------------------------------------- item 7: the file changes under a run

def _slow_run(tmp_path: Path, db: Path) -> subprocess.Popen:
    cases = tmp_path / "s30.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i}", "category": "x", "prompt": f"question {i}"}) + "\n"
                             for i in range(30)))
    return spawn(["run", str(cases), "-m", "demo/thorough"], cwd=tmp_path, db=db,
                 env={"LINEUP_DEMO_SPEED": "0.2"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_answers(db: Path, proc: subprocess.Popen, n: int = 2) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it could be disturbed"
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
            try:
                (done,) = conn.execute("SELECT count(*) FROM output WHERE status = 'complete'").fetchone()
            finally:
                conn.close()
            if done >= n:
                return
        except sqlite3.Error:
            pass
        time.sleep(0.1)
    raise AssertionError("no answers recorded within 60 s")


def test_a_database_deleted_while_a_run_writes_stops_the_run(tmp_path):
    db = tmp_path / "del.db"
    proc = _slow_run(tmp_path, db)
    _wait_for_answers(db, proc)
    for p in tmp_path.glob("del.db*"):
        p.unlink()
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, (proc.returncode, out[-500:], err[-2000:])
    assert "Traceback" not in err and "vote on it" not in out + err, err
    assert "del.db was replaced or deleted while lineup was writing to it" in err, err
    assert not list(tmp_path.glob("del.db*")), "the run wrote a new file at the path"


def test_a_database_replaced_while_a_run_writes_stops_and_the_new_file_stays_intact(tmp_path):
    db, other = tmp_path / "rep.db", tmp_path / "other.db"
    existing_db(other)
    conn = sqlite3.connect(other)
    conn.execute("PRAGMA journal_mode = DELETE")   # one self-contained file, like a backup copy
    conn.close()
    expected = _dump(other)
    proc = _slow_run(tmp_path, db)
    _wait_for_answers(db, proc)
    os.replace(other, db)   # `mv other.db rep.db` while the run writes
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, (proc.returncode, out[-500:], err[-2000:])
    assert "Traceback" not in err and "rep.db was replaced or deleted while lineup was writing" in err, err
    # the run's write-ahead log, left beside the new file, must not be replayed into it
    assert _integrity(db) == [("ok",)]
    assert _dump(db) == expected
    with Store.open(db) as store:
        assert store.counts()["session"] == 1


# ---------------------------------------------------------------------- item 9: numbers at the import boundary

ARENA = {"model_a": "a", "model_b": "b", "winner": "tie", "tstamp": 1.7e9}


def _ours(tmp_path: Path) -> list[dict]:
    """A real export of ours (one session), as records to spoil."""
    src = existing_db(tmp_path / "src.db")
    with Store.open(src) as store:
        sid = store.latest_session_id()
        out = store.load_session(sid).outputs[0]
        store.add_tag(TagRecord(output_id=out.id, tag="too_verbose", created=1.7e9))
    proc = lineup(["export", "--format", "jsonl"], cwd=tmp_path, db=src)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _set(rec: dict, path: str, raw: str) -> str:
    """`rec` as a JSON line with the field at dotted `path` set to the raw JSON `raw`."""
    marker = "__SPOILED__"
    node = rec
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = marker
    else:
        node[last] = marker
    return json.dumps(rec).replace(f'"{marker}"', raw)


BAD_ARENA = {"1e18": "1e18", "1e300": "1e300", "-1e12": "-1e12", "nan": "NaN", "inf": "Infinity",
             "neg-inf": "-Infinity", "1e999": "1e999"}
BAD_OURS = {  # where in the line -> (raw JSON value, the field as the message names it)
    "output.ttft_ms": ("Infinity", "output.ttft_ms"), "output.duration_ms": ("-5", "output.duration_ms"),
    "output.input_tokens": ("-1", "output.input_tokens"), "output.cost": ("NaN", "output.cost"),
    "output.created": ("1e18", "output.created"), "output.chunk_ms.0": ("-3", "output.chunk_ms"),
    "session.created": ("-1e12", "session.created"),
    "session.params.temperature": ("1e999", "session.params.temperature"),
    "turn.created": ("1e300", "turn.created"), "votes.0.created": ("NaN", "votes[0].created"),
    "tags.0.created": ("Infinity", "tags[0].created"),
    "session.seed": ("123456789012345678901234567890", "session.seed"),
}


@pytest.mark.parametrize("name", sorted(BAD_ARENA))
def test_an_arena_time_out_of_range_is_refused_naming_file_line_and_field(tmp_path, name):
    db = existing_db(tmp_path / "lineup.db")
    before = sha(db)
    src = tmp_path / "battles.jsonl"
    good = json.dumps(ARENA)
    src.write_text(good + "\n" + json.dumps(ARENA).replace("1700000000.0", BAD_ARENA[name]) + "\n")
    proc = lineup(["import", str(src)], cwd=tmp_path, db=db)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    clean(proc)
    assert f"{src}:2: tstamp:" in proc.stderr and "nothing was imported" in proc.stderr, proc.stderr
    assert sha(db) == before


@pytest.mark.parametrize("field", sorted(BAD_OURS))
def test_a_number_out_of_range_in_our_jsonl_is_refused_naming_the_field(tmp_path, field):
    records = _ours(tmp_path)
    tagged = next(i for i, r in enumerate(records) if r["tags"])
    lines = [json.dumps(r) for r in records]
    raw, shown = BAD_OURS[field]
    lines[tagged] = _set(records[tagged], field, raw)
    src = tmp_path / "ours.jsonl"
    src.write_text("\n".join(lines) + "\n")
    db = existing_db(tmp_path / "lineup.db", sessions=0)
    before = sha(db)
    proc = lineup(["import", str(src)], cwd=tmp_path, db=db)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    clean(proc)
    assert f"{src}:{tagged + 1}: {shown}:" in proc.stderr, proc.stderr
    assert "nothing was imported" in proc.stderr
    assert sha(db) == before


def _spoil(db: Path) -> None:
    """Rows that an older lineup (or a hand) could have left: times and timings out of range."""
    conn = sqlite3.connect(db)
    conn.execute("UPDATE session SET created = 1e18")
    conn.execute("UPDATE vote SET created = -1e12 WHERE id = (SELECT min(id) FROM vote)")
    conn.execute("UPDATE vote SET revealed_at = 1e300 WHERE id = (SELECT max(id) FROM vote)")
    conn.execute("UPDATE turn SET created = 9e15")
    conn.execute("UPDATE output SET ttft_ms = 9e999, duration_ms = -4, cost = 9e999 "
                 "WHERE id = (SELECT min(id) FROM output)")
    conn.execute("UPDATE output SET sent_at = -9e999 WHERE id = (SELECT max(id) FROM output)")
    conn.commit()
    conn.close()


def test_a_bad_number_already_in_the_database_never_breaks_a_reader(tmp_path):
    db = tmp_path / "lineup.db"
    with Store.open(db) as store:
        s, turns, outs, votes = synthetic_session(turns=3, seed=2, aliases=["demo/concise", "demo/thorough"])
        write_synthetic(store, s, turns, outs, votes)
    _spoil(db)
    sid = s.id
    listing = lineup(["sessions"], cwd=tmp_path, db=db)
    as_json = lineup(["sessions", "--json"], cwd=tmp_path, db=db)
    exports = {fmt: lineup(["export", "--format", fmt], cwd=tmp_path, db=db) for fmt in ("jsonl", "csv", "md")}
    html = tmp_path / "r.html"
    report = lineup(["report", "--include-demo", "--bootstrap", "20", "--html", str(html), "--md",
                     str(tmp_path / "r.md")], cwd=tmp_path, db=db)
    report_json = lineup(["report", "--include-demo", "--bootstrap", "0", "--json"], cwd=tmp_path, db=db)
    for name, proc in {"sessions": listing, "sessions --json": as_json, **exports, "report": report,
                       "report --json": report_json}.items():
        assert proc.returncode == 0, (name, proc.stderr[-2000:])
        clean(proc)
    assert sid in listing.stdout and "1e+18" in listing.stdout
    assert "warning" in listing.stderr and sid in listing.stderr
    rows = json.loads(as_json.stdout)
    assert rows[0]["id"] == sid and rows[0]["created"] == 1e18
    for fmt, proc in exports.items():
        assert "warning" in proc.stderr and "out of range" in proc.stderr, (fmt, proc.stderr)
    lines = [json.loads(x) for x in exports["jsonl"].stdout.splitlines()]   # strict JSON, no Infinity
    assert len(lines) == 6 and lines[0]["session"]["created"] == 1e18
    assert {x["output"]["ttft_ms"] for x in lines} >= {None}
    assert "created 1e+18" in exports["md"].stdout and "-1000000000000.0" in exports["md"].stdout
    csv_rows = list(csv.DictReader(io.StringIO(exports["csv"].stdout)))
    assert "1e+300" in {r["revealed_at"] for r in csv_rows}
    assert html.exists() and "out of range" in html.read_text()
    assert "out of range" in report.stdout + report.stderr
    def no_constant(name):
        raise AssertionError(f"report --json holds {name}")
    figures = json.loads(report_json.stdout, parse_constant=no_constant)   # the bad timings left out
    assert any("out of range" in w for w in figures["warnings"])


# ---------------------------------------------------------------------- item 10: merging another database

def _corrupt_an_index(db: Path) -> None:
    """Garble keys inside one index page (output_turn): the tables read fine,
    the file fails SQLite's integrity check."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'output_turn'").fetchone()
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    data = bytearray(db.read_bytes())
    start = (root - 1) * size
    page = bytes(data[start:start + size])
    for m in list(re.finditer(rb"[0-9A-HJKMNP-TV-Z]{26}", page))[::3]:
        k = start + m.start() + 20
        data[k] = ord("Z") if data[k] != ord("Z") else ord("Y")
    db.write_bytes(bytes(data))


def _orphans(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("DELETE FROM turn WHERE position = 1")   # foreign keys off: its outputs and vote stay
    conn.commit()
    conn.close()


def _drop_a_table(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("DROP TABLE check_result")
    conn.commit()
    conn.close()


def _bad_time(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("UPDATE vote SET created = 1e18")
    conn.commit()
    conn.close()


BAD_SOURCES = {
    "corrupt-index": (_corrupt_an_index, r"fails SQLite's integrity check"),
    "orphan-rows": (_orphans, r"refer to records missing from it"),
    "missing-table": (_drop_a_table, r"not a complete lineup database"),
    "time-out-of-range": (_bad_time, r"out of range"),
}


@pytest.mark.parametrize("name", sorted(BAD_SOURCES))
def test_a_bad_source_database_is_refused_naming_it(tmp_path, name):
    spoil, pattern = BAD_SOURCES[name]
    source = tmp_path / "theirs.db"
    with Store.open(source) as store:
        write_synthetic(store, *synthetic_session(turns=30, seed=5))
    spoil(source)
    mine = existing_db(tmp_path / "mine.db")
    before, source_before = sha(mine), sha(source)
    proc = lineup(["import", str(source)], cwd=tmp_path, db=mine)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    clean(proc)
    assert re.search(pattern, proc.stderr), proc.stderr
    assert str(source) in proc.stderr and "nothing was imported" in proc.stderr
    assert "mine.db" not in proc.stderr, "the message blames the user's own database"
    assert sha(mine) == before and sha(source) == source_before


# ---------------------------------------------------------------------- item 15: hostile names in exports

def test_hostile_names_from_imports_reach_no_export_and_no_listing_raw(tmp_path):
    db = tmp_path / "lineup.db"
    evil = [f"gpt{HOSTILE}", f"claude\u009d{HOSTILE}"]
    battles = [{"model_a": evil[0], "model_b": evil[1], "winner": "model_a", "tstamp": 1.7e9,
                "judge": f"judge{HOSTILE}", "question_id": f"q{HOSTILE}",
                "conversation_a": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "A"}],
                "conversation_b": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "B"}]},
               {"model_a": evil[1], "model_b": "plain", "winner": "tie", "tstamp": 1.7e9 + 1}]
    arena = tmp_path / "arena.jsonl"
    arena.write_text("".join(json.dumps(b) + "\n" for b in battles))
    # and our own format, with a hostile title, sample set, case id, category, rater, tag and check
    records = _ours(tmp_path)
    for r in records:
        r["session"]["title"] = f"title{HOSTILE}"
        r["session"]["sample_set_name"] = f"set{HOSTILE}.jsonl"
        r["session"]["params"] = {f"p{HOSTILE}": f"v{HOSTILE}"}
        r["turn"]["case_id"], r["turn"]["category"] = f"case{HOSTILE}", f"cat{HOSTILE}"
        r["output"].update(status="error", error_kind=f"kind{HOSTILE}", error_message=f"msg{HOSTILE}")
        for v in r["votes"]:
            v["rater"], v["note"] = f"rater{HOSTILE}", f"note{HOSTILE}"
        for t in r["tags"]:
            t["tag"] = f"tag{HOSTILE}"
    ours = tmp_path / "ours.jsonl"
    ours.write_text("".join(json.dumps(r) + "\n" for r in records))
    for src in (arena, ours):
        proc = lineup(["import", str(src)], cwd=tmp_path, db=db)
        assert proc.returncode == 0, proc.stderr
        clean(proc)
    with Store.open(db) as store:
        ids = [s.id for s in store.list_sessions()]
    assert len(ids) == 2
    outputs = {"sessions": lineup(["sessions"], cwd=tmp_path, db=db),
               "sessions --json": lineup(["sessions", "--json"], cwd=tmp_path, db=db)}
    for sid in ids:
        for fmt in ("jsonl", "csv", "md"):
            outputs[f"{fmt} {sid}"] = lineup(["export", sid, "--format", fmt], cwd=tmp_path, db=db)
        outputs[f"md -o {sid}"] = lineup(["export", sid, "--format", "md", "-o", str(tmp_path / f"{sid}.md")],
                                         cwd=tmp_path, db=db)
    for name, proc in outputs.items():
        assert proc.returncode == 0, (name, proc.stderr)
        clean(proc)
        found = RAW.search(proc.stdout + proc.stderr)
        assert found is None, (name, repr(found.group()), proc.stdout[max(0, found.start() - 80):found.end() + 80])
    for sid in ids:
        md = (tmp_path / f"{sid}.md").read_text()
        assert RAW.search(md) is None
        assert outputs[f"md {sid}"].stdout == md
        # a name never breaks out of its line into a heading (or a line) of its own
        assert "injected heading" in md
        assert not re.search(r"^[\\#> ]*injected", md, re.M), md
        for line in outputs[f"jsonl {sid}"].stdout.splitlines():
            json.loads(line)
        rows = list(csv.reader(io.StringIO(outputs[f"csv {sid}"].stdout)))
        assert all(len(r) == len(rows[0]) for r in rows)
    arena_md = outputs[f"md {ids[1]}"].stdout + outputs[f"md {ids[0]}"].stdout
    assert "x1b" in arena_md and "PWNED" in arena_md      # still readable, as visible escapes
    assert "PWNED" in outputs["sessions"].stdout and "\u241b" in outputs["sessions"].stdout   # ␛ on screen


# ---------------------------------------------------------------------- item 18: standard output and -o FILE

def _many_sessions(db: Path, n: int = 1000) -> Path:
    with Store.open(db) as store:
        with store.batch():
            for seed in range(n):
                write_synthetic(store, *synthetic_session(turns=1, seed=seed, created=1.7e9 + seed))
    return db


@pytest.mark.parametrize("argv", [["sessions", "--json"], ["sessions", "--limit", "0"], ["export", "--format", "jsonl"]])
def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path, argv):
    """Output larger than a pipe holds (a piped table draws 100 rows unless
    `--limit 0` asks for all 1,000), read one line and closed: exit 141, silent."""
    db = _many_sessions(tmp_path / "lineup.db")
    if argv[0] == "export":
        with Store.open(db) as store:
            write_synthetic(store, *synthetic_session(turns=200, words=400, seed=1, created=1.8e9))
    proc = spawn(argv, cwd=tmp_path, db=db, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()   # `| head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=TIMEOUT)
    assert first
    assert proc.returncode == 141, (proc.returncode, err)
    assert err == "", err


def test_a_full_standard_output_is_reported(tmp_path):
    db = tmp_path / "lineup.db"
    with Store.open(db) as store:
        write_synthetic(store, *synthetic_session(turns=40, words=400, seed=2))
    with open("/dev/full", "w") as full:
        proc = lineup(["export", "--format", "jsonl"], cwd=tmp_path, db=db, stdout=full)
    assert proc.returncode == 1, proc.stderr
    clean(proc)
    assert "cannot write to standard output" in proc.stderr and "No space left" in proc.stderr
    # `> out.jsonl` on a disk that fills half way: not reported as done
    with open(tmp_path / "out.jsonl", "w") as out:
        proc = lineup(["export", "--format", "jsonl"], cwd=tmp_path, db=db, stdout=out,
                      preexec=file_size_limit(64 * 1024))
    assert proc.returncode == 1, proc.stderr
    clean(proc)
    assert "cannot write to standard output" in proc.stderr
    with Store.open(db) as store:   # and the others
        write_synthetic(store, *synthetic_session(turns=1, seed=3, created=1.9e9))
    for argv in (["sessions", "--json"], ["report", "--bootstrap", "0"]):
        with open("/dev/full", "w") as full:
            proc = lineup(argv, cwd=tmp_path, db=db, stdout=full)
        assert proc.returncode == 1, (argv, proc.stderr)
        clean(proc)
        assert "standard output" in proc.stderr


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "md"])
def test_export_to_a_full_disk_leaves_the_old_file_and_no_temporary(tmp_path, fmt):
    db = tmp_path / "lineup.db"
    with Store.open(db) as store:   # every format well over the limit (the CSV: 600 votes)
        write_synthetic(store, *synthetic_session(turns=600, words=60, seed=2))
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / f"export.{fmt}"
    target.write_text("the previous export\n")
    proc = lineup(["export", "--format", fmt, "-o", str(target)], cwd=tmp_path, db=db,
                  preexec=file_size_limit(64 * 1024))
    assert proc.returncode == 1, proc.stderr
    clean(proc)
    assert str(target) in proc.stderr
    assert target.read_text() == "the previous export\n"
    assert sorted(p.name for p in folder.iterdir()) == [target.name]


def _holds_a_file_in(pid: int, folder: Path) -> bool:
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return any(link.startswith(str(folder) + "/") for link in links)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to see the export writing")
def test_an_export_killed_while_writing_leaves_no_temporary_file(tmp_path):
    db = tmp_path / "lineup.db"
    s, turns, outs, votes = synthetic_session(turns=2, seed=3)
    outs = [o.model_copy(update={"text": f"{i} " + "long answer " * 2_500_000}) for i, o in enumerate(outs)]
    with Store.open(db) as store:
        write_synthetic(store, s, turns, outs, votes)
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "big.jsonl"
    target.write_text("the previous export\n")
    killed_while_writing = 0
    for _ in range(5):
        proc = spawn(["export", "--format", "jsonl", "-o", str(target)], cwd=tmp_path, db=db,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if _holds_a_file_in(proc.pid, folder):   # it is writing the new export
                proc.send_signal(signal.SIGKILL)
                killed_while_writing += 1
                break
            time.sleep(0.0005)
        proc.wait(timeout=TIMEOUT)
        if proc.returncode == -signal.SIGKILL:
            break
        target.write_text("the previous export\n")   # it finished first: try again
    assert killed_while_writing, "never caught the export while it wrote"
    assert target.read_text() == "the previous export\n"
    assert sorted(p.name for p in folder.iterdir()) == ["big.jsonl"], "a temporary file was left behind"


def test_temporary_files_of_dead_exports_are_removed_on_the_next_export(tmp_path):
    """What a kill leaves where no unnamed temporary file can be made (or an
    older lineup left): `.NAME.PID.tmp` of a process that is gone."""
    db = existing_db(tmp_path / "lineup.db")
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "x.md"
    writer = subprocess.Popen([sys.executable, "-c", "import os, sys, time\n"
                               "open(os.path.join(sys.argv[1], '.x.md.%d.tmp' % os.getpid()), 'w').write('half')\n"
                               "print('ok', flush=True)\ntime.sleep(600)\n", str(folder)],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline() == "ok\n"
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    live = folder / f".x.md.{os.getpid()}.tmp"    # a live process's: another export still writing
    live.write_text("in progress")
    (folder / ".other.md.1.tmp").write_text("not ours")
    proc = lineup(["export", "--format", "md", "-o", str(target)], cwd=tmp_path, db=db)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted([".other.md.1.tmp", live.name, "x.md"])
