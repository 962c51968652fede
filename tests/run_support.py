"""Files a run test writes: a config of models on the loopback test server, a
small sample set, a tool-calling case with its scripted server
(`weather_case`, `weather_server`); and runs recorded straight into a store
with planted results (`planted_run`, `planted_cases`). Shared by the tests of
runs, tools, the cache, batches, drift, load and compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from store import Store
from store.ids import new_ulid
from store.records import CheckResultRecord, ContestantRecord, OutputRecord, SessionRecord, TurnRecord
from tests.server import Received, Reply, TestServer

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


def planted_run(store: Store, alias: str, model: str, cases: list[dict], *, blind: bool = True,
         others: tuple[str, ...] = ()) -> str:
    """A recorded run of one model (plus `others` answering the same), each
    case a dict: text, passed (the check 'contains' result, None: no check),
    ttft, duration, cost, category, status."""
    sid = new_ulid()
    aliases = (alias, *others)
    store.create_session(SessionRecord(
        id=sid, kind="run", blind=blind, title="run",
        contestants=[ContestantRecord(alias=a, provider="openai", model=model if a == alias else a, label="AB"[i],
                                      position=i) for i, a in enumerate(aliases)]))
    for i, case in enumerate(cases):
        turn = TurnRecord(session_id=sid, position=i, case_id=case.get("id", f"c{i:03d}"),
                          category=case.get("category", "general"), user_message=f"question {i}",
                          repeat_index=case.get("repeat", 0))
        store.add_turn(turn)
        for k, a in enumerate(aliases):
            out = OutputRecord(session_id=sid, turn_id=turn.id, contestant=a, label="AB"[k],
                               status=case.get("status", "complete"), text=case["text"] if a == alias else "other",
                               ttft_ms=case.get("ttft"), duration_ms=case.get("duration"), cost=case.get("cost"),
                               served_model=case.get("served", model))
            store.finish_output(out)
            if case.get("passed") is not None and out.status == "complete" and a == alias:
                store.add_check_result(CheckResultRecord(output_id=out.id, check="contains:ok",
                                                         passed=case["passed"]))
    return sid


def planted_cases(n: int, *, fail: set[int] = frozenset(), text=lambda i: f"answer {i}", ttft=lambda i: 100.0 + i % 7,
           duration=lambda i: 1000.0 + 10 * (i % 11), cost=0.001, category=lambda i: "general") -> list[dict]:
    return [{"text": text(i), "passed": i not in fail, "ttft": ttft(i), "duration": duration(i), "cost": cost,
             "category": category(i)} for i in range(n)]


WEATHER = {"name": "get_weather", "description": "Current weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def weather_case(**extra: Any) -> dict[str, Any]:
    case = {"id": "w1", "category": "tools", "prompt": "Weather in Paris?", "tools": [WEATHER],
            "tool_results": [{"name": "get_weather", "arguments": {"city": "Paris"}, "result": {"temp_c": 18}}],
            "tool_default": {"error": "unknown city"},
            "checks": [{"type": "tool_called", "tool": "get_weather", "arguments": {"city": "Paris"}},
                       {"type": "tool_args_valid"}, {"type": "max_steps", "limit": 2},
                       {"type": "contains", "value": "18"}]}
    case.update(extra)
    return case


def write_set(path: Path, *cases: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


def body_text(rec: Received) -> str:
    return json.dumps(rec.json)


def weather_server(rec: Received) -> Reply:
    """Calls get_weather(Paris) until it sees the result, then answers with it."""
    if "temp_c" in body_text(rec):
        return Reply(text="It is 18 degrees in Paris.")
    return Reply(text="Let me check.", tool_calls=[{"id": "call_1", "name": "get_weather",
                                                    "arguments": {"city": "Paris"}}], chunk_chars=3)
