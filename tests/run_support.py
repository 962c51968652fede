"""Files a run test writes: a config of models on the loopback test server, and
a small sample set. Shared by the tests of runs, the cache, batches, drift,
load and compare."""

from __future__ import annotations

import json
from pathlib import Path

from tests.server import TestServer

REPO = Path(__file__).resolve().parents[1]


def config_file(path: Path, srv: TestServer, models: dict[str, dict]) -> Path:
    lines = []
    for alias, fields in models.items():
        fields = {"provider": "openai", "model": f"{alias}-model", "base_url": srv.base_url("openai"),
                  "max_retries": 0, "read_timeout": 10, **fields}
        lines.append(f"[models.{alias}]")
        for k, v in fields.items():
            lines.append(f"{k} = {json.dumps(v) if not isinstance(v, dict) else inline_table(v)}")
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def inline_table(d: dict) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in d.items()) + " }"


def sample_set(path: Path, n: int, **extra) -> Path:
    path.write_text("".join(json.dumps({"id": f"c{i}", "category": "k", "prompt": f"question {i}", **extra}) + "\n"
                            for i in range(n)))
    return path


def scored_run(tmp_path: Path, monkeypatch) -> tuple[Path, str]:
    """A run of two demo models on two cases whose answers are scored on two
    dimensions (`--dimension`): (database, session id)."""
    import sqlite3

    from lineup.cli import main

    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")
    cases = tmp_path / "set.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i}", "category": "explain", "prompt": f"Explain idea {i} briefly."})
                             + "\n" for i in range(2)))
    db = tmp_path / "scored.db"
    assert main(["run", str(cases), "-m", "demo/concise", "-m", "demo/thorough", "--quiet", "--db", str(db),
                 "--dimension", "clarity:easy to follow", "--dimension", "accuracy"]) == 0
    with sqlite3.connect(db) as conn:
        (sid,) = conn.execute("SELECT id FROM session").fetchone()
    return db, sid
