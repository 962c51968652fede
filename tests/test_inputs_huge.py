"""Huge and deep input, through the CLI as a user runs it.

Every command that reads a file the user names (a sample set for `run`,
request logs for `sample`, a file to `import`, the config) reads it one way
(`core.ground.inputs`): a regular file only, bounded in size and line length,
strict UTF-8, JSON nested at most 100 levels, no NaN or Infinity; a lone
surrogate written as a JSON escape becomes U+FFFD. What is refused is
refused with exit 2 and `FILE:LINE: what`, never a traceback or a hang, and
changes nothing: the database is unchanged byte for byte and no temporary
file is left behind."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from tests.cli_support import existing_db, file_size_limit, sha
from tests.cli_support import lineup as _lineup

DEEP = 10_000


def lineup(argv: list[str], cwd: Path, db: Path, env: dict | None = None, preexec=None):
    """The CLI, with no config of the user's in the way."""
    return _lineup(argv, cwd=cwd, db=db, env={"XDG_CONFIG_HOME": str(cwd / "cfg"), **(env or {})}, preexec=preexec)


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _stray(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _refused(proc, *patterns: str) -> str:
    message = proc.stderr + proc.stdout
    assert proc.returncode == 2, (proc.returncode, message[-2000:])
    assert "Traceback" not in message, message[-3000:]
    for pattern in patterns:
        assert pattern in message, f"{pattern!r} not in {message[-1500:]}"
    return message


@pytest.fixture
def db(tmp_path):
    return existing_db(tmp_path / "lineup.db")


# ---------------------------------------------------------------------- deep

def _deep_files(tmp: Path, levels: int) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, the file:line the message must name)."""
    deep = _nested(levels)
    (tmp / "set.jsonl").write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n"
                                   + '{"id": "b", "category": "x", "prompt": "hi", "tags": ' + deep + "}\n")
    (tmp / "logs.jsonl").write_text('{"prompt": "one", "cat": "a"}\n{"prompt": "two", "cat": ' + deep + "}\n")
    (tmp / "battles.jsonl").write_text(json.dumps({"model_a": "p", "model_b": "q", "winner": "tie"}) + "\n"
                                       + '{"model_a": "p", "model_b": "q", "winner": "tie", "conversation_a": '
                                       + deep + "}\n")
    (tmp / "battles.json").write_text('[\n{"model_a": "p", "model_b": "q", "winner": "tie"},\n'
                                      '{"model_a": "p", "model_b": "q", "winner": "tie", "conversation_a": ' + deep
                                      + "}\n]\n")
    return {
        "run": (["run", "set.jsonl", "-m", "demo/concise", "--quiet"], "set.jsonl:2"),
        "sample": (["sample", "logs.jsonl", "--by", "cat", "-n", "1", "-o", "out.jsonl"], "logs.jsonl:2"),
        "import-jsonl": (["import", "battles.jsonl"], "battles.jsonl:2"),
        "import-json": (["import", "battles.json"], "battles.json:3"),
    }


@pytest.mark.parametrize("levels", [DEEP, 150])
@pytest.mark.parametrize("command", ["run", "sample", "import-jsonl", "import-json"])
def test_json_nested_too_deeply_is_refused_with_file_and_line(tmp_path, db, command, levels):
    """10,000 levels used to raise RecursionError (a traceback, exit 1); 150
    levels parse, but nothing we read needs more than 100 and pydantic,
    jsonschema and SQLite's JSON would meet them next."""
    argv, where = _deep_files(tmp_path, levels)[command]
    before = sha(db)
    proc = lineup(argv, cwd=tmp_path, db=db)
    _refused(proc, f"{where}: nested deeper than 100 levels")
    assert sha(db) == before
    assert not (tmp_path / "out.jsonl").exists() and _stray(tmp_path) == []


def test_nesting_within_the_limit_is_read(tmp_path, db):
    (tmp_path / "logs.jsonl").write_text('{"prompt": "one", "cat": ' + _nested(99) + "}\n"
                                         '{"prompt": "two", "cat": "b"}\n')
    proc = lineup(["sample", "logs.jsonl", "--by", "cat", "-n", "2", "-o", "out.jsonl"], cwd=tmp_path, db=db)
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 2


# ---------------------------------------------------------------------- surrogates, NaN

LONE = "\\ud800"   # as the JSON text writes it: a backslash escape, not a character


def test_a_lone_surrogate_in_logs_becomes_a_replacement_character(tmp_path, db):
    """`sample` used to die on writing the set (UnicodeEncodeError) and leave `out.jsonl.tmp`."""
    (tmp_path / "logs.jsonl").write_text('{"prompt": "broken ' + LONE + ' text", "cat": "a' + LONE + '"}\n'
                                         '{"prompt": "a fine prompt", "cat": "b"}\n'
                                         '{"prompt": "an emoji \\ud83d\\ude00 pair is kept", "cat": "b"}\n')
    proc = lineup(["sample", "logs.jsonl", "--by", "cat", "-n", "3", "-o", "out.jsonl"], cwd=tmp_path, db=db)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    cases = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    prompts = {c["prompt"] for c in cases}
    assert prompts == {"broken \ufffd text", "a fine prompt", "an emoji \U0001F600 pair is kept"}
    assert {c["category"] for c in cases} == {"a\ufffd", "b"}
    assert _stray(tmp_path) == []


def test_a_lone_surrogate_in_an_arena_import_is_stored_as_a_replacement_character(tmp_path, db):
    """It used to end in PydanticSerializationError (a traceback)."""
    battle = ('{"model_a": "alpha' + LONE + '", "model_b": "beta", "winner": "model_a", "judge": "' + LONE + '", '
              '"conversation_a": [{"role": "user", "content": "q ' + LONE + '"}, '
              '{"role": "assistant", "content": "a ' + LONE + '"}]}')
    (tmp_path / "battles.jsonl").write_text(battle + "\n")
    (tmp_path / "battles.json").write_text("[" + battle.replace("alpha", "gamma") + "]")
    for name in ("battles.jsonl", "battles.json"):
        proc = lineup(["import", name], cwd=tmp_path, db=db)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    conn = sqlite3.connect(db)
    try:
        models = {r[0] for r in conn.execute("SELECT contestant FROM output")}
        texts = {r[0] for r in conn.execute("SELECT text FROM output WHERE contestant LIKE '%\ufffd'")}
        raters = {r[0] for r in conn.execute("SELECT rater FROM vote WHERE rater = '\ufffd'")}
    finally:
        conn.close()
    assert {"alpha\ufffd", "gamma\ufffd"} <= models and texts == {"a \ufffd"} and raters == {"\ufffd"}


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_are_not_json(tmp_path, db, value):
    (tmp_path / "set.jsonl").write_text('{"id": "a", "category": "x", "prompt": "hi"}\n'
                                        '{"id": "b", "category": "x", "prompt": "hi", "params": {"temperature": '
                                        + value + "}}\n")
    (tmp_path / "battles.jsonl").write_text('{"model_a": "p", "model_b": "q", "winner": "tie", "tstamp": '
                                            + value + "}\n")
    before = sha(db)
    _refused(lineup(["run", "set.jsonl", "-m", "demo/concise", "--quiet"], cwd=tmp_path, db=db), "set.jsonl:2: ")
    _refused(lineup(["import", "battles.jsonl"], cwd=tmp_path, db=db), "battles.jsonl:1: ", "nothing was imported")
    assert sha(db) == before


# ---------------------------------------------------------------------- not a regular file

def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="needs FIFOs and /dev/zero")
@pytest.mark.parametrize("target", ["fifo", "/dev/zero", "folder", "socket"])
def test_only_regular_files_are_read(tmp_path, db, target):
    """`run` and `sample` on /dev/zero or a FIFO used to grow without end or
    hang; `import` said "no such file". Each is refused at once, saying what it
    is, and a FIFO's writer is never waited for."""
    what = {"fifo": "(it is a FIFO)", "/dev/zero": "(it is a character device)", "folder": "is a directory",
            "socket": "(it is a socket)"}[target]
    if target == "fifo":
        path = str(_fifo(tmp_path / "logs.jsonl"))
    elif target == "socket":
        import socket

        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(tmp_path / "logs.jsonl"))
        path = str(tmp_path / "logs.jsonl")
    elif target == "folder":
        (tmp_path / "folder").mkdir()
        path = str(tmp_path / "folder")
    else:
        path = target
    before = sha(db)
    for argv in (["run", path, "-m", "demo/concise", "--quiet"],
                 ["sample", path, "--by", "cat", "-n", "1", "-o", "out.jsonl"],
                 ["import", path],
                 ["run", "set.jsonl", "-m", "demo/concise", "--config", path]):
        (tmp_path / "set.jsonl").write_text('{"id": "a", "category": "x", "prompt": "hi"}\n')
        proc = lineup(argv, cwd=tmp_path, db=db)
        message = _refused(proc, what)
        assert "no such file" not in message
    if target == "socket":
        listener.close()
    assert sha(db) == before and not (tmp_path / "out.jsonl").exists()


def test_an_import_refused_before_anything_is_opened_creates_no_database(tmp_path):
    _fifo(tmp_path / "battles.jsonl")
    _refused(lineup(["import", "battles.jsonl"], cwd=tmp_path, db=tmp_path / "new.db"), "(it is a FIFO)")
    assert not (tmp_path / "new.db").exists()


# ---------------------------------------------------------------------- huge

def test_a_file_over_the_size_limit_is_refused(tmp_path, db):
    (tmp_path / "set.jsonl").write_text("".join(json.dumps({"id": f"c{i}", "category": "x", "prompt": "hi " * 20})
                                                + "\n" for i in range(20)))
    (tmp_path / "logs.jsonl").write_text("".join(json.dumps({"prompt": f"p{i} " * 20, "cat": "a"}) + "\n"
                                                 for i in range(20)))
    (tmp_path / "battles.jsonl").write_text("".join(json.dumps({"model_a": "p", "model_b": "q", "winner": "tie",
                                                                "question_id": f"q{i}" * 20}) + "\n"
                                                    for i in range(20)))
    (tmp_path / "small.jsonl").write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n")
    (tmp_path / "big.toml").write_text("# a config padded with comments\n" * 40 + '[defaults]\ntemperature = 0.5\n')
    env = {"LINEUP_MAX_INPUT_BYTES": "1000"}
    before = sha(db)
    for argv, name in ((["run", "set.jsonl", "-m", "demo/concise", "--quiet"], "set.jsonl"),
                       (["run", "small.jsonl", "-m", "demo/concise", "--quiet", "--config", "big.toml"], "big.toml"),
                       (["sample", "logs.jsonl", "--by", "cat", "-n", "1", "-o", "out.jsonl"], "logs.jsonl"),
                       (["import", "battles.jsonl"], "battles.jsonl")):
        _refused(lineup(argv, cwd=tmp_path, db=db, env=env),
                 f"{name}: ", "more than the 1000 bytes lineup reads", "LINEUP_MAX_INPUT_BYTES")
    assert sha(db) == before and not (tmp_path / "out.jsonl").exists()
    # the same files are fine under the default limit (1 GiB)
    assert lineup(["sample", "logs.jsonl", "--by", "cat", "-n", "1", "-o", "out.jsonl"], cwd=tmp_path,
                  db=db).returncode == 0


def test_a_line_over_64_mib_is_refused_without_being_kept(tmp_path, db):
    huge = b'{"prompt": "' + b"x" * (65 << 20) + b'", "cat": "a"}\n'
    (tmp_path / "logs.jsonl").write_bytes(b'{"prompt": "fine", "cat": "a"}\n' + huge)
    (tmp_path / "battles.jsonl").write_bytes(huge)
    _refused(lineup(["sample", "logs.jsonl", "--by", "cat", "-n", "1", "-o", "out.jsonl"], cwd=tmp_path, db=db),
             "logs.jsonl:2: line longer than 64 MiB")
    _refused(lineup(["import", "battles.jsonl"], cwd=tmp_path, db=db), "battles.jsonl:1: line longer than 64 MiB")


def test_a_bad_limit_setting_is_named(tmp_path, db):
    (tmp_path / "set.jsonl").write_text('{"id": "a", "category": "x", "prompt": "hi"}\n')
    _refused(lineup(["run", "set.jsonl", "-m", "demo/concise", "--quiet"], cwd=tmp_path, db=db,
                    env={"LINEUP_MAX_INPUT_BYTES": "lots"}), "LINEUP_MAX_INPUT_BYTES: must be a whole number")


def test_bad_utf8_names_the_line(tmp_path, db):
    (tmp_path / "battles.json").write_bytes(b'[\n{"model_a": "p", "model_b": "q", "winner": "tie"},\n'
                                            b'{"model_a": "p\xff", "model_b": "q", "winner": "tie"}\n]\n')
    (tmp_path / "logs.jsonl").write_bytes(b'{"prompt": "one", "cat": "a"}\n{"prompt": "t\xc3", "cat": "a"}\n')
    _refused(lineup(["import", "battles.json"], cwd=tmp_path, db=db), "battles.json:3: not UTF-8 text")
    _refused(lineup(["sample", "logs.jsonl", "--by", "cat", "-n", "1", "-o", "o.jsonl"], cwd=tmp_path, db=db),
             "logs.jsonl:2: not UTF-8 text")


# ---------------------------------------------------------------------- writing the set

def test_sample_writes_its_set_atomically_even_when_the_disk_fills(tmp_path, db):
    """A write that fails (here: the file size limit, as on a full disk) is
    exit 1 naming the file; the set that was there is untouched and no
    temporary file is left."""
    (tmp_path / "logs.jsonl").write_text("".join(json.dumps({"prompt": f"prompt number {i} " + "word " * 300,
                                                             "cat": f"c{i % 3}"}) + "\n" for i in range(200)))
    (tmp_path / "out.jsonl").write_text("the earlier set\n")
    proc = lineup(["sample", "logs.jsonl", "--by", "cat", "-n", "150", "-o", "out.jsonl"], cwd=tmp_path, db=db,
                  preexec=file_size_limit(64 * 1024))
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "out.jsonl" in proc.stderr and "nothing was written" in proc.stderr
    assert (tmp_path / "out.jsonl").read_text() == "the earlier set\n"
    assert _stray(tmp_path) == []


def test_a_fifo_with_a_writer_waiting_is_still_refused(tmp_path, db):
    """Even with someone writing into it, a FIFO is not read (it could be endless)."""
    fifo = _fifo(tmp_path / "set.jsonl")
    stop = threading.Event()

    def writer() -> None:
        try:
            fd = os.open(fifo, os.O_WRONLY)
        except OSError:
            return
        try:
            while not stop.is_set():
                os.write(fd, b'{"id": "a", "category": "x", "prompt": "hi"}\n' * 100)
        except OSError:   # the reader went away: a broken pipe
            pass
        finally:
            os.close(fd)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        _refused(lineup(["run", "set.jsonl", "-m", "demo/concise", "--quiet"], cwd=tmp_path, db=db), "(it is a FIFO)")
    finally:
        stop.set()
        try:   # let the writer's open return, if nobody opened the other end
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            pass
        thread.join(5)
