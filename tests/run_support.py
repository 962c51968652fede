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
