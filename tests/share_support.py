"""The owner's database for the tests of blind vote packages and of raters'
pages: `lineup run` against the loopback server with contestants under names
no list of vendors knows, one failing with an error body that names its model
and host (`owner`, a fixture), and every string of their configs that must
never reach a rater (`config_strings`)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from core.answering.runner import Runner
from core.answering.sampleset import load_sample_set
from lineup.cli import main
from providers.events import SamplingParams
from providers.model_config import Price
from store import AsyncStore, Store
from tests.server import Reply, TestServer, model_config

# Each contestant's answers start with a phrase of its own (not a name from its config),
# so a test can tell from a package which answer is whose without the package saying so.
PHRASES = {"quokka-prime": "Ripe mango", "wombat-seven": "Blue harbor", "numbat-x": "Quiet lantern"}


MODELS = {"quokka-prime": "zorblax-13b-instruct", "wombat-seven": "flumphcorp/thrumble-9",
          "numbat-x": "vexillo-2-mini"}
KEY_VAR, KEY = "ZORBLAX_TOKEN_VAR", "sk-zorb-9d8e7f6a5b4c3d2e1f"


def _set(path: Path) -> Path:
    cases = [{"id": f"case-{i}", "category": "math" if i % 2 else "format", "prompt": f"Question number {i}?"}
             for i in range(4)]
    cases[0]["follow_ups"] = ["And shorter?"]
    cases[1]["reference"] = "the expected answer, shown after the vote"
    cases[2]["checks"] = [{"type": "contains", "value": "mango"}]
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return path


def _configs(srv):
    protos = {"quokka-prime": "openai", "wombat-seven": "anthropic", "numbat-x": "gemini"}
    return [model_config(srv, protos[alias], alias=alias, model=MODELS[alias], max_retries=0, read_timeout=5,
                         api_key_env=KEY_VAR if alias == "quokka-prime" else None,
                         params=SamplingParams(temperature=0.25 + 0.25 * i, max_tokens=333 + i),
                         price=Price(input_per_mtok=1.75 + i, output_per_mtok=9.5 + i),
                         extra_body={"zq_vendor_switch": f"thrumblemode-{i}"})
            for i, alias in enumerate(protos)]


def _reply_for(rec) -> Reply:
    body = json.dumps(rec.json or {})
    model = next(m for m in MODELS.values() if m in body or m in rec.path)
    alias = next(a for a, m in MODELS.items() if m == model)
    if alias == "numbat-x" and "Question number 3" in body:
        # an error body that names the model, its vendor and its host
        return Reply(status=500, message=f"{model} on vexillo-gateway.internal is overloaded (flumph quota)")
    prompt = next((m.split("?")[0] for m in body.split('"') if m.startswith("Question number")), "a follow-up")
    return Reply(text=f"{PHRASES[alias]}: my answer to {prompt}.", reasoning="Let me think step by step.",
                 usage=(17, 23, None), chunk_chars=3)


def _run(db: Path, set_path: Path, srv) -> str:
    async def go():
        store = AsyncStore(Store.open(db))
        try:
            await Runner(store, load_sample_set(set_path), _configs(srv), concurrency=3).run()
        finally:
            await store.aclose()

    anyio.run(go)
    with Store.open(db) as store:
        return store.list_sessions(kind="run")[0].id


@pytest.fixture
def owner(tmp_path, monkeypatch):
    """The owner's database with one blind run of three contestants (and a
    second session, not shared, whose names must not reach a package)."""
    monkeypatch.setenv(KEY_VAR, KEY)
    db = tmp_path / "owner.db"
    with TestServer() as srv:
        srv.respond(_reply_for)
        sid = _run(db, _set(tmp_path / "set.jsonl"), srv)
        other_set = tmp_path / "other.jsonl"
        other_set.write_text(json.dumps({"id": "other-1", "category": "x", "prompt": "Question number 9?"}) + "\n")
        other = _run(db, other_set, srv)
    with Store.open(db) as store:
        store.update_session(other, title="secret-other-session-title")
    return db, sid, other


def config_strings(db: Path, session_ids: list[str]) -> list[str]:
    """Every string that could tell a contestant apart: its alias, provider,
    model (and its parts), base URL (and its host and port), key variable and
    key, parameter names and text values, the error bodies, the owner's ids."""
    found = {KEY, KEY_VAR, "vexillo-gateway", "flumph quota", "secret-other-session-title", "zq_vendor_switch",
             "thrumblemode", "max_tokens", "temperature", "input_per_mtok"}
    with Store.open(db) as store:
        for sid in session_ids:
            ls = store.load_session(sid)
            found.add(ls.session.id)
            found.update(t.id for t in ls.turns)
            found.update(o.id for o in ls.outputs)
            found.add(str(ls.session.meta.get("run_key")))
            for c in ls.session.contestants:
                found.update({c.alias, c.provider, c.model, *c.model.split("/")})
                if c.base_url:
                    found.add(c.base_url)
                    host_port = c.base_url.split("//", 1)[1].split("/", 1)[0]
                    found.update({host_port, host_port.rsplit(":", 1)[1]})
            found.update(o.error_message[len("HTTP 500: "):] for o in ls.outputs if o.error_message)
    return sorted(s for s in found if s)


def share_package(db: Path, out: Path, *sessions: str, extra=()) -> int:
    """`lineup share SESSIONS -o OUT` on `db`: its exit code."""
    return main(["share", *sessions, "-o", str(out), "--db", str(db), *extra])
