"""Bad input everywhere, through the CLI as a user runs it.

Exit codes, decided once for the whole app:
- 2: bad input (a config, sample set, import file or database we refuse),
  reported in one line that names the file and the line or field;
- 1: a runtime failure while working (the disk refused a write), reported
  with the database's path; what was recorded before stays intact;
- no traceback ever, and the existing database is unchanged byte for byte
  (a refused command never writes).
`lineup models --check` is a diagnostic: a model that cannot be checked (its key
variable missing included) is a failed check, exit 1, named in the table.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import sqlite3
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from tests.cli_support import existing_db, file_size_limit, lineup, sha
from tests.synthetic import synthetic_session, write_synthetic
from store import Store
from tests.server import Reply, TestServer

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 120


def _dump(db: Path) -> dict[str, list]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}").fetchall()))
                for t in ("session", "contestant", "turn", "output", "vote", "tag", "check_result")}
    finally:
        conn.close()


# ---------------------------------------------------------------------- the table

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64


def _files(tmp: Path) -> None:
    """Every bad (and one good) input file the table refers to."""
    (tmp / "good.jsonl").write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n")
    (tmp / "bad.toml").write_text('[models.x]\nprovider = "openai"\nmodel = "m\n')
    (tmp / "unknown.toml").write_text('[models.x]\nprovider = "frobnicate"\nmodel = "m"\n')
    (tmp / "nokey.toml").write_text('[models.x]\nprovider = "openai"\nmodel = "m"\n'
                                    'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "LINEUP_TEST_ABSENT_KEY"\n')
    (tmp / "badjson.jsonl").write_text('{"id": "a", "category": "x", "prompt": "hi"}\n{"id": "b", oops}\n')
    (tmp / "types.jsonl").write_text('{"id": "a", "category": "x", "prompt": 42}\n')
    (tmp / "dups.jsonl").write_text('{"id": "a", "category": "x", "prompt": "hi"}\n'
                                    '{"id": "a", "category": "x", "prompt": "again"}\n')
    (tmp / "noimg.jsonl").write_text('{"id": "a", "category": "x", "prompt": "hi", "images": ["gone.png"]}\n')
    (tmp / "huge.png").write_bytes(PNG + b"\0" * (6 * 1024 * 1024))
    (tmp / "bigimg.jsonl").write_text('{"id": "a", "category": "x", "prompt": "hi", "images": ["huge.png"]}\n')
    (tmp / "picture.png").write_bytes(PNG)
    (tmp / "empty.jsonl").write_bytes(b"")
    (tmp / "table.csv").write_text("model_a,model_b,winner\nx,y,model_a\n")
    (tmp / "notsqlite.db").write_bytes(b"this is not a database, just some text that must survive\n" * 50)
    newer = tmp / "newer.db"
    with Store.open(newer) as store:
        write_synthetic(store, *synthetic_session(turns=1, seed=9))
    conn = sqlite3.connect(newer)
    conn.execute("PRAGMA user_version = 99")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()


DEMO = ["-m", "demo/concise"]
# name -> (argv, database ("db" = the good existing one), exit code, patterns the message must contain)
CASES: dict[str, tuple[list[str], str, int, list[str]]] = {
    "toml-syntax-run": (["run", "good.jsonl", "--config", "bad.toml", *DEMO], "db", 2, [r"bad\.toml", r"line 3"]),
    "toml-syntax-models": (["models", "--config", "bad.toml"], "db", 2, [r"bad\.toml", r"line 3"]),
    # the report reads the config only for prices: it warns, names the file, and still reports from the record
    "toml-syntax-report": (["report", "--config", "bad.toml", "--bootstrap", "0"], "db", 0,
                           [r"bad\.toml", r"line 3", r"config not used"]),
    "unknown-provider": (["run", "good.jsonl", "--config", "unknown.toml", "-m", "x"], "db", 2,
                         [r"unknown\.toml", r"models\.x\.provider", r"frobnicate"]),
    "unknown-alias": (["run", "good.jsonl", "-m", "nope"], "db", 2, [r"unknown model alias 'nope'"]),
    "missing-key-run": (["run", "good.jsonl", "--config", "nokey.toml", "-m", "x"], "db", 2,
                        [r"LINEUP_TEST_ABSENT_KEY", r"nokey\.toml"]),
    "missing-key-check": (["models", "--check", "--config", "nokey.toml"], "db", 1, [r"LINEUP_TEST_ABSENT_KEY"]),
    "set-missing": (["run", "nothere.jsonl", *DEMO], "db", 2, [r"nothere\.jsonl", r"no such file"]),
    "set-bad-json": (["run", "badjson.jsonl", *DEMO], "db", 2, [r"badjson\.jsonl:2", r"invalid JSON"]),
    "set-wrong-type": (["run", "types.jsonl", *DEMO], "db", 2, [r"types\.jsonl:1", r"prompt"]),
    "set-duplicate-id": (["run", "dups.jsonl", *DEMO], "db", 2, [r"dups\.jsonl:2", r"duplicate id 'a'"]),
    "set-missing-image": (["run", "noimg.jsonl", *DEMO], "db", 2, [r"noimg\.jsonl:1", r"images", r"gone\.png"]),
    "set-oversized-image": (["run", "bigimg.jsonl", *DEMO], "db", 2,
                            [r"bigimg\.jsonl:1", r"images", r"huge\.png", r"too large"]),
    "import-png": (["import", "picture.png"], "db", 2, [r"picture\.png", r"nothing was imported"]),
    "import-empty": (["import", "empty.jsonl"], "db", 2, [r"empty\.jsonl", r"nothing was imported"]),
    "import-csv": (["import", "table.csv"], "db", 2, [r"table\.csv:1", r"nothing was imported"]),
    "import-missing": (["import", "nothere.jsonl"], "db", 2, [r"nothere\.jsonl"]),
    "export-unknown-session": (["export", "ZZZZ"], "db", 2, [r"ZZZZ"]),
}
for _cmd in (["run", "good.jsonl", *DEMO], ["sessions"], ["export"], ["report", "--bootstrap", "0"],
             ["import", "good.jsonl"]):
    CASES[f"not-sqlite-{_cmd[0]}"] = (_cmd, "notsqlite.db", 2, [r"notsqlite\.db", r"not a SQLite database"])
    CASES[f"newer-{_cmd[0]}"] = (_cmd, "newer.db", 2, [r"newer\.db", r"newer lineup", r"99"])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inputs")
    _files(tmp)
    return tmp


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_refused_clearly_and_changes_nothing(name, workdir, tmp_path):
    argv, which, want_rc, patterns = CASES[name]
    db = existing_db(tmp_path / "lineup.db") if which == "db" else workdir / which
    before = sha(db)
    siblings = sorted(p.name for p in db.parent.iterdir())
    proc = lineup(argv, cwd=workdir, db=db, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert proc.returncode == want_rc, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    message = proc.stderr + proc.stdout
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in: {message[-1500:]}"
    assert sha(db) == before, "a refused command changed the database"
    if want_rc:   # a refused command does not even leave SQLite's -wal/-shm files behind
        assert sorted(p.name for p in db.parent.iterdir()) == siblings, "stray files next to the database"


def test_a_missing_key_is_named_before_any_request(tmp_path):
    with TestServer() as srv:
        srv.script(Reply(text="should never be asked"))
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[models.x]\nprovider = "openai"\nmodel = "m"\nbase_url = "{srv.base_url("openai")}"\n'
                       'api_key_env = "LINEUP_TEST_ABSENT_KEY"\n')
        (tmp_path / "s.jsonl").write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n")
        db = tmp_path / "l.db"
        run = lineup(["run", "s.jsonl", "--config", str(cfg), "-m", "x"], cwd=tmp_path, db=db)
        check = lineup(["models", "--check", "--config", str(cfg)], cwd=tmp_path, db=db)
        assert srv.requests == []
    assert run.returncode == 2 and "LINEUP_TEST_ABSENT_KEY" in run.stderr
    assert not db.exists(), "nothing should be recorded for a run that cannot start"
    assert check.returncode == 1 and "LINEUP_TEST_ABSENT_KEY" in check.stdout


# ---------------------------------------------------------------------- read-only

RO_RUNNER = """
import site, sys
site.addsitedir(sys.argv[1])
sys.path.insert(0, sys.argv[2])
from lineup.cli import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.slow
def test_a_read_only_database_refuses_writes_and_serves_reads():
    root = Path(tempfile.mkdtemp(prefix="lineup-ro-", dir="/tmp"))
    folder = root / "ro"
    folder.mkdir()
    db = existing_db(folder / "x.db")
    (root / "s.jsonl").write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n")
    (root / "arena.jsonl").write_text(json.dumps({"model_a": "p", "model_b": "q", "winner": "tie"}) + "\n")
    before = sha(db)
    try:
        os.chmod(db, 0o444)
        os.chmod(folder, 0o555)
        os.chmod(root, 0o755)
        os.chmod(root / "s.jsonl", 0o644)
        os.chmod(root / "arena.jsonl", 0o644)
        python, kwargs = sys.executable, {}
        if os.geteuid() == 0:   # root ignores file modes: act as an ordinary user
            kwargs = {"user": 65534, "group": 65534}
            version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
            python = shutil.which(version, path="/usr/local/bin:/usr/bin") or python
        env = {**os.environ, "LINEUP_DEMO_SPEED": "0", "HOME": str(root), "XDG_CONFIG_HOME": str(root / "cfg")}

        def cli(*argv):
            try:
                return subprocess.run([python, "-c", RO_RUNNER, sysconfig.get_paths()["purelib"], str(REPO),
                                       *argv, "--db", str(db)], capture_output=True, text=True, cwd=root,
                                      env=env, timeout=TIMEOUT, **kwargs)
            except PermissionError as exc:
                pytest.skip(f"no Python an unprivileged user may run here: {exc}")

        results = {
            "run": cli("run", "s.jsonl", "-m", "demo/concise"),
            "import": cli("import", "arena.jsonl"),
            "chat": cli("chat", "-m", "demo/concise", "-m", "demo/thorough"),
            "vote": cli("vote"),
            "sessions": cli("sessions"),
            "export": cli("export", "--format", "md"),
            "report": cli("report", "--bootstrap", "0"),
        }
        if "ModuleNotFoundError" in results["sessions"].stderr:
            pytest.skip(f"the unprivileged user cannot import lineup here: {results['sessions'].stderr[-300:]}")
        for name, proc in results.items():
            assert "Traceback" not in proc.stderr, (name, proc.stderr)
        for name in ("run", "import", "chat", "vote"):
            assert results[name].returncode == 2, (name, results[name].stderr)
            assert "read-only" in results[name].stderr and "x.db" in results[name].stderr
        for name in ("sessions", "export", "report"):
            assert results[name].returncode == 0, (name, results[name].stderr)
        assert "synthetic" in results["sessions"].stdout or "model-0" in results["sessions"].stdout
        assert "## Turn 1" in results["export"].stdout
        assert sha(db) == before and sorted(p.name for p in folder.iterdir()) == ["x.db"]
    finally:
        os.chmod(folder, stat.S_IRWXU)
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------- disk full


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE")
def test_a_full_disk_is_reported_and_loses_nothing(tmp_path):
    """The disk "fills up" (RLIMIT_FSIZE: writes past the limit fail with EFBIG)
    during a run, an import and an export: exit 1, the database named, no
    traceback, the database intact with every earlier record unchanged, and
    nothing half-imported."""
    db = existing_db(tmp_path / "lineup.db")
    before = _dump(db)
    limit = db.stat().st_size + 48 * 1024
    cases = tmp_path / "big.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i}", "category": "x", "prompt": f"{i} " + "long prompt " * 400})
                             + "\n" for i in range(40)))
    run = lineup(["run", str(cases), "-m", "demo/concise", "-m", "demo/thorough", "--quiet"], cwd=tmp_path, db=db,
                 preexec=file_size_limit(limit))
    assert run.returncode == 1, (run.returncode, run.stderr[-2000:])
    assert "Traceback" not in run.stderr and "lineup.db" in run.stderr and "disk" in run.stderr, run.stderr
    for table, rows in before.items():
        assert set(rows) <= set(_dump(db)[table]), f"an earlier {table} row changed"
    # The run could not close its answers in flight (the disk refused): the next
    # open, with room again, marks them interrupted; that is recovery, not import.
    with Store.open(db):
        pass
    after_run = _dump(db)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM output WHERE status = 'streaming'").fetchone() == (0,)
    finally:
        conn.close()

    arena = tmp_path / "arena.jsonl"
    arena.write_text("".join(json.dumps({"model_a": f"m{i % 5}", "model_b": f"n{i % 7}", "winner": "model_a",
                                         "conversation_a": [{"role": "user", "content": "q" * 300}],
                                         "conversation_b": [{"role": "user", "content": "q" * 300}]}) + "\n"
                             for i in range(2000)))
    limit = db.stat().st_size + 48 * 1024
    imp = lineup(["import", str(arena)], cwd=tmp_path, db=db, preexec=file_size_limit(limit))
    assert imp.returncode == 1, (imp.returncode, imp.stderr[-2000:])
    assert "Traceback" not in imp.stderr and "lineup.db" in imp.stderr and "disk" in imp.stderr, imp.stderr
    assert _dump(db) == after_run, "a failed import left part of itself behind"

    big = tmp_path / "big.db"
    with Store.open(big) as store:
        write_synthetic(store, *synthetic_session(turns=40, words=400, seed=2))
    exp = lineup(["export", "--format", "jsonl", "-o", str(tmp_path / "out.jsonl")], cwd=tmp_path, db=big,
                 preexec=file_size_limit(64 * 1024))
    assert exp.returncode == 1 and "out.jsonl" in exp.stderr and "Traceback" not in exp.stderr, exp.stderr
    assert not (tmp_path / "out.jsonl").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")], "a temporary file was left behind"

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    with Store.open(db) as store:   # and it still works once there is room again
        assert store.counts()["session"] >= 1


# ---------------------------------------------------------------------- sampling parameters

BAD_PARAMS = [({"temperature": 5}, "params.temperature: must be between 0 and 2"),
              ({"temperature": -0.1}, "params.temperature: must be between 0 and 2"),
              ({"top_p": 0}, "params.top_p: must be greater than 0 and at most 1"),
              ({"max_tokens": 0}, "params.max_tokens: must be at least 1"),
              ({"max_tokens": 10**7}, "params.max_tokens: must be at most 1,000,000"),
              ({"seed": 2**64}, "params.seed: must be a 64-bit integer"),
              ({"temperature": True}, "params.temperature: must be a number")]


@pytest.mark.parametrize("params,message", BAD_PARAMS, ids=[next(iter(p)) + "=" + str(next(iter(p.values())))
                                                             for p, _ in BAD_PARAMS])
def test_a_case_with_sampling_params_out_of_range_is_refused(tmp_path, params, message):
    """Issue 11, item 18: a set with `"temperature": 1e999` used to run (exit 0)
    and send `Infinity` to the server; every case parameter is range-checked
    and named FILE:LINE: field, before anything is recorded or sent."""
    (tmp_path / "s.jsonl").write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n"
                                      + json.dumps({"id": "b", "category": "x", "prompt": "hi", "params": params})
                                      + "\n")
    db = tmp_path / "l.db"
    proc = lineup(["run", "s.jsonl", "-m", "demo/concise", "--quiet"], cwd=tmp_path, db=db,
                  env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"s.jsonl:2: {message}" in proc.stderr
    assert not db.exists()


@pytest.mark.parametrize("flag,value,message", [
    ("--temperature", "nan", "--temperature: must be between 0 and 2"),
    ("--temperature", "inf", "--temperature: must be between 0 and 2"),
    ("--temperature", "2.5", "--temperature: must be between 0 and 2"),
    ("--max-tokens", "0", "--max-tokens: must be at least 1"),
    ("--seed", str(2**64), "--seed: must be a 64-bit integer")])
def test_sampling_flags_out_of_range_are_refused(tmp_path, flag, value, message):
    (tmp_path / "s.jsonl").write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n")
    db = tmp_path / "l.db"
    proc = lineup(["run", "s.jsonl", "-m", "demo/concise", "--quiet", flag, value], cwd=tmp_path, db=db,
                  env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert message in proc.stderr and not db.exists()


@pytest.mark.slow
@pytest.mark.parametrize("toml,message", [
    ("[defaults]\ntemperature = nan\n", "defaults.temperature: must be between 0 and 2"),
    ("[defaults]\ntemperature = inf\n", "defaults.temperature: must be between 0 and 2"),
    ('[models.x]\nprovider = "openai"\nmodel = "m"\nparams = { top_p = inf }\n',
     "models.x.params.top_p: must be greater than 0 and at most 1"),
    ('[models.x]\nprovider = "openai"\nmodel = "m"\nparams = { max_tokens = 0 }\n',
     "models.x.params.max_tokens: must be at least 1")])
def test_config_sampling_params_out_of_range_are_refused(tmp_path, toml, message):
    """TOML has nan and inf; a config that sets them is refused, key path named."""
    (tmp_path / "c.toml").write_text(toml + '\n[models.d]\nprovider = "demo"\nmodel = "concise"\n')
    (tmp_path / "s.jsonl").write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n")
    db = tmp_path / "l.db"
    proc = lineup(["run", "s.jsonl", "--config", "c.toml", "-m", "d", "--quiet"], cwd=tmp_path, db=db)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"c.toml: {message}" in proc.stderr and not db.exists()


@pytest.mark.slow
def test_no_request_body_ever_carries_nan_or_infinity(tmp_path):
    """The last line of defence, at the provider boundary: `extra_body` is sent
    as is, and TOML can put inf in it. The answer fails (bad_request, said
    why), no invalid JSON reaches the server, the run goes on and exits 1."""
    with TestServer() as srv:
        srv.script(Reply(text="never asked"))
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[models.x]\nprovider = "openai"\nmodel = "m"\nbase_url = "{srv.base_url("openai")}"\n'
                       'max_retries = 0\nextra_body = { boost = inf }\n'
                       '[models.d]\nprovider = "demo"\nmodel = "concise"\n')
        (tmp_path / "s.jsonl").write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n")
        db = tmp_path / "l.db"
        proc = lineup(["run", "s.jsonl", "--config", str(cfg), "-m", "x", "-m", "d", "--quiet"], cwd=tmp_path, db=db)
        assert srv.requests == []
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "bad_request" in proc.stdout + proc.stderr
    conn = sqlite3.connect(db)
    try:
        rows = dict(conn.execute("SELECT contestant, error_kind || ': ' || error_message FROM output "
                                 "WHERE status != 'complete'").fetchall())
        done = {r[0] for r in conn.execute("SELECT contestant FROM output WHERE status = 'complete'")}
    finally:
        conn.close()
    assert set(rows) == {"x"} and "cannot build the request" in rows["x"] and "JSON" in rows["x"], rows
    assert done == {"d"}


# ---------------------------------------------------------------------- a terminal

def _under_a_terminal(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = TIMEOUT) -> tuple[int, bytes]:
    """Run the CLI with a pseudo-terminal as stdin, stdout and stderr (as a
    person runs it): (exit code, every byte it wrote to the terminal)."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    full = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40", **env}
    full.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "lineup", *argv], stdin=slave, stdout=slave, stderr=slave,
                            cwd=cwd, env=full, start_new_session=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:   # EIO: the other side is closed
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return rc, bytes(out)


HOSTILE_NAME = "esc\x1b]0;PWN\x07\x1b[31m"


@pytest.mark.slow
def test_a_hostile_set_file_name_never_reaches_the_terminal_as_escapes(tmp_path):
    """Issue 11, item 15: the set's name (from its file name) is the title of
    `lineup run`'s progress table; with `\\e]0;PWN\\a` in it a terminal set its
    window title. Under a real pseudo-terminal, what reaches it holds no BEL,
    no OSC and no escape but the CSI sequences of the display itself; the name
    shows with visible stand-ins. An error naming the file does the same."""
    good = tmp_path / f"{HOSTILE_NAME}.jsonl"
    good.write_text(json.dumps({"id": "a", "category": "x", "prompt": "hi"}) + "\n")
    bad = tmp_path / f"{HOSTILE_NAME}-bad.jsonl"
    bad.write_text('{"id": "a", oops}\n')
    env = {"LINEUP_DB": str(tmp_path / "l.db"), "LINEUP_DEMO_SPEED": "0", "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    shown = "esc␛]0;PWN␇␛[31m"
    for path, want_rc in ((good, 0), (bad, 2)):
        rc, out = _under_a_terminal(["run", str(path), "-m", "demo/concise", "-m", "demo/thorough"], tmp_path, env)
        text = out.decode("utf-8", "replace")
        assert rc == want_rc, text[-2000:]
        assert "Traceback" not in text
        assert b"\x07" not in out and b"\x1b]" not in out and b"\x1b[31m" not in out, out[-2000:]
        assert not re.search(rb"\x1b(?!\[[0-9;?]*[A-Za-z])", out), out[-2000:]   # only the display's own CSI
        assert shown in text, text[-2000:]
    assert "ETA" in _under_a_terminal(["run", str(good), "-m", "demo/concise"], tmp_path, env)[1].decode()


def test_the_default_config_is_read_for_prices_only_when_an_answer_needs_one(tmp_path, monkeypatch, capsys):
    """`lineup report` reads the default config (not named by --config or
    LINEUP_CONFIG) only when an answer has no cost and its session recorded
    no price: then it prices those answers from it (or, broken, warns and
    reports without); a record that does not need it reports without reading
    it, so a broken default config costs nothing there."""
    from lineup.cli import main
    from tests.synthetic import synthetic_session

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("LINEUP_CONFIG", raising=False)
    config = tmp_path / "cfg" / "lineup" / "config.toml"
    config.parent.mkdir(parents=True)
    priced, unpriced = tmp_path / "priced.db", tmp_path / "unpriced.db"
    with Store.open(priced) as store:
        write_synthetic(store, *synthetic_session(turns=2, aliases=["m-a", "m-b"], seed=1))
    session, turns, outputs, votes = synthetic_session(turns=2, aliases=["m-a", "m-b"], seed=2)
    session = session.model_copy(update={"contestants": [c.model_copy(update={"price": None})
                                                         for c in session.contestants]})
    outputs = [o.model_copy(update={"cost": None, "input_tokens": 1000, "output_tokens": 500}) for o in outputs]
    with Store.open(unpriced) as store:
        write_synthetic(store, session, turns, outputs, votes)

    def report(db: Path) -> tuple[dict, str]:
        capsys.readouterr()
        assert main(["report", "--db", str(db), "--json", "--bootstrap", "0"]) == 0
        out, err = capsys.readouterr()
        return {e["model"]: e["cost"] for e in json.loads(out)["engineering"]}, err

    config.write_text('[models.m-a]\nprovider = "openai"\nmodel = "x"\n'
                      'price = { input_per_mtok = 2.0, output_per_mtok = 4.0 }\n')
    costs, err = report(unpriced)
    n = sum(1 for o in outputs if o.contestant == "m-a")
    assert costs["m-a"] == pytest.approx(n * (1000 * 2.0 + 500 * 4.0) / 1e6) and costs["m-b"] is None
    assert err == ""
    config.write_text("[models\n")                  # broken
    costs, err = report(unpriced)
    assert costs == {"m-a": None, "m-b": None} and "config not used for prices" in err and "line 1" in err
    costs, err = report(priced)                     # every answer has its cost: the config is not read
    assert costs["m-a"] is not None and err == ""
