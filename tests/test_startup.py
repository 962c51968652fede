"""What each command loads before its first output.

Speed itself is measured by benchmarks/bench_startup.py, never here; these
tests pin down the structure that makes it fast, in a fresh interpreter each
(`sys.modules` after the command ran): building the parser loads no command's
machinery, an up-to-date database opens without sqlite-utils (which imports
numpy whenever it is installed), the store's small modules load without the
rest of it, and `lineup models` without a local Ollama never loads httpx."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synthetic import synthetic_session, write_synthetic
from store import Store

ROOT = Path(__file__).resolve().parents[1]


def loaded_after(code: str, *, env: dict[str, str] | None = None) -> set[str]:
    """The top-level names of the modules loaded once `code` ran in a fresh interpreter
    (and the full names of our own, so `store.db` is told from `store`)."""
    script = (
        "import json, sys\n"
        f"{code}\n"
        "names = {m.split('.')[0] for m in sys.modules} | {m for m in sys.modules\n"
        "         if m.split('.')[0] in ('core', 'store', 'providers', 'tui', 'lineup')}\n"
        "sys.__stdout__.write('\\n@@' + json.dumps(sorted(names)) + '\\n')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return set(json.loads(proc.stdout.rpartition("\n@@")[2]))


def run_cli(*argv: str) -> str:
    return f"from lineup.cli import main\nrc = main({list(argv)!r})\nassert rc == 0, rc"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def populated_db(tmp_path):
    db = tmp_path / "populated.db"
    with Store.open(db) as store:
        for i in range(3):
            write_synthetic(store, *synthetic_session(turns=2, seed=i, blind=i == 1, created=1.7e9 + i))
    return db


# Heavy parts no quick command needs before its first output.
NEVER_AT_START = {"numpy", "sqlite_utils", "httpx", "httpcore", "textual", "jsonschema"}


def test_the_parser_alone_loads_no_command_machinery():
    """`lineup --version`, `lineup run --help`: building the parser imports
    every command module, and each keeps its heavy imports inside run()."""
    loaded = loaded_after("from lineup.cli import build_parser\nbuild_parser().format_help()")
    heavy = {"pydantic", "rich", "store", "store.db", "store.records", "core.answering.config", "core.ground.text", "providers"}
    assert loaded & (NEVER_AT_START | heavy) == set()
    assert "lineup.commands.run_cmd" in loaded and "lineup.commands.models_cmd" in loaded


def test_the_store_s_small_modules_load_without_the_rest_of_it():
    loaded = loaded_after("import store.bounds, store.ids\nimport core.ground.text")
    assert {"store.db", "store.records", "store.schema", "pydantic", "sqlite_utils"} & loaded == set()


def test_the_store_s_names_load_on_first_use():
    """`from store import X` still gives every name the package lists, the same
    object its module defines; an unknown name is an AttributeError."""
    import importlib

    import store

    for name in store.__all__:
        value = getattr(store, name)
        defining = {"Store": "store.db", "StoreError": "store.db", "default_db_path": "store.db",
                    "SCHEMA_VERSION": "store.schema", "AsyncStore": "store.writer"}.get(name, "store.records")
        assert value is getattr(importlib.import_module(defining), name), name
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = store.no_such_name
    assert {"Store", "VoteRecord", "AsyncStore"} <= set(dir(store))


def test_an_up_to_date_database_opens_without_sqlite_utils(populated_db):
    """Writing and reading: only a file that needs migrating loads sqlite-utils."""
    loaded = loaded_after(f"from store import Store\n"
                          f"with Store.open({str(populated_db)!r}) as s: assert len(s.list_sessions()) == 3\n"
                          f"with Store.open({str(populated_db)!r}, readonly=True) as s: s.load_session(s.latest_session_id())")
    assert {"sqlite_utils", "numpy"} & loaded == set()


def test_a_new_database_is_still_migrated(tmp_path):
    """The other side: a new file gets every migration (through sqlite-utils)."""
    db = tmp_path / "new.db"
    loaded = loaded_after(f"from store import Store\nStore.open({str(db)!r}).close()")
    assert "sqlite_utils" in loaded
    from store.schema import MIGRATION_NAMES, SCHEMA_VERSION

    with Store.open(db, readonly=True) as store:
        assert store.schema_version == SCHEMA_VERSION == len(MIGRATION_NAMES) >= 6
        applied = [r[0] for r in store.conn.execute("SELECT name FROM _sqlite_migrations ORDER BY rowid")]
    assert applied == list(MIGRATION_NAMES)


@pytest.mark.parametrize("argv", [
    ("sessions",), ("sessions", "--json"), ("export",), ("export", "--format", "md"), ("export", "--format", "csv"),
])
def test_reading_commands_load_nothing_heavy(populated_db, argv):
    loaded = loaded_after(run_cli(*argv, "--db", str(populated_db)))
    assert loaded & NEVER_AT_START == set()
    assert "store.db" in loaded      # it did open the database


def test_models_without_a_local_ollama_never_loads_httpx():
    """Nothing listens where Ollama would be: known from one refused
    connection, without the HTTP client (a listening one is still asked:
    tests/test_config.py, test_ollama_probe_lists_models)."""
    env = {"OLLAMA_HOST": f"127.0.0.1:{_closed_port()}", "LINEUP_CONFIG": ""}
    loaded = loaded_after(run_cli("models"), env=env)
    assert loaded & NEVER_AT_START == set()
    assert "core.answering.config" in loaded
    assert "providers.demo" not in loaded    # the demo models are listed without the demo's streaming code


def test_the_report_loads_numpy_for_its_ratings_and_nothing_else_heavy(populated_db):
    loaded = loaded_after(run_cli("report", "--json", "--bootstrap", "20", "--db", str(populated_db)))
    assert "numpy" in loaded
    assert loaded & (NEVER_AT_START - {"numpy"}) == set()
    assert "providers.demo" not in loaded    # the config is read for prices only


def test_the_report_json_loads_no_renderer_or_checks(populated_db):
    # JSON needs neither the HTML/Markdown renderers (nor Rich, which they load), nor the
    # checks' models and their regex engine (only repeated answers need them), nor the
    # tools' models (only structured answers and traced judge material need them)
    loaded = loaded_after(run_cli("report", "--json", "--bootstrap", "20", "--db", str(populated_db)))
    assert "core.report.build" in loaded
    assert loaded & {"core.report.html", "core.report.markdown", "core.report.stability",
                     "core.answering.checks", "regex", "core.answering.tools"} == set()
    assert "rich" not in loaded


def test_the_chat_app_loads_no_numpy_jsonschema_or_sqlite_utils():
    # the chat's first paint: the TUI and the session core, not the statistics (a check's
    # constant once pulled core.stats.ratings, and numpy with it, into every chat)
    loaded = loaded_after("import tui.app")
    assert "textual" in loaded and "core.answering.sessions" in loaded
    assert loaded & {"numpy", "jsonschema", "sqlite_utils"} == set()
    assert "core.stats.ratings" not in loaded and "core.report" not in loaded
