"""Provider plugins (`providers.plugins`): the example plugin in tests/plugins
is installed for these tests as a real distribution (a `.dist-info` with an
`entry_points.txt` on sys.path, found by importlib.metadata as pip's would
be), used from a config, a chat session and `lineup models`; the broken
ones beside it are reported by name and never stop lineup; and the
guarantees the core keeps around any plugin's stream hold when the plugin
misbehaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from core.answering import config as cfgmod
from core.answering.config import ConfigError, load_config
from core.answering.sessions import ChatSession
from lineup.cli import main
from providers import accepts_images, make_provider
from providers import plugins as plugmod
from providers.events import ErrorKind, RequestSent
from providers.model_config import ModelConfig
from store import AsyncStore, Store
from tests.server import Reply, TestServer, chat_request, collect_async

PLUGINS = Path(__file__).resolve().parent / "plugins"
ROOT = Path(__file__).resolve().parent.parent
SECRET = "sk-plugin-PLANTED-0123456789abcdef"


@pytest.fixture
def installed(monkeypatch):
    """The example distributions on sys.path, as an installed package's would be."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    plugmod.refresh()
    yield
    plugmod.refresh()
    sys.modules.pop("lineup_echo_plugin", None)


def _collect(cfg: ModelConfig, text: str = "hello plugin world"):
    async def go():
        provider = make_provider(cfg)
        try:
            return await collect_async(provider, chat_request(text))
        finally:
            await provider.aclose()

    return anyio.run(go)


def _echo(model: str = "plain", **fields) -> ModelConfig:
    return ModelConfig(alias=f"echo-{model}", provider="echo", model=model, **fields)


def test_without_the_package_the_name_is_unknown():
    plugmod.refresh()
    assert "echo" not in plugmod.plugin_names()
    with pytest.raises(ValueError, match="unknown provider"):
        ModelConfig(alias="e", provider="echo", model="plain")


def test_each_declared_plugin_is_found_and_loaded_or_reported_by_name(installed):
    found = {p.name: p for p in plugmod.plugins()}
    assert found["echo"].cls is not None and found["echo"].cls.__name__ == "EchoProvider"
    assert found["echo"].dist == "lineup-echo-plugin" and found["echo"].protocol == "echo (example plugin)"
    broken, other, shadow = (found[n].error or "" for n in ("broken", "notaprovider", "openai"))
    assert "ModuleNotFoundError" in broken and "lineup_broken_plugin_missing_module" in broken
    assert "not a providers.base.Provider subclass" in other
    assert "built-in provider 'openai'" in shadow
    # a plugin never takes a built-in's name: the name still means the built-in protocol
    assert "openai" not in plugmod.plugin_names() and {"echo", "broken"} <= plugmod.plugin_names()


def test_the_example_plugin_streams_through_make_provider(installed):
    result, events = _collect(_echo())
    assert isinstance(events[0], RequestSent) and events[-1].type == "finish"
    assert result.text == "hello plugin world" and result.reasoning == "Echoing. "
    assert (result.input_tokens, result.output_tokens) == (3, 3)
    assert result.served_model == "echo-plain"
    assert not accepts_images(_echo())      # the plugin class says it takes no images


def test_an_http_plugin_gets_the_retries_and_errors_of_the_built_in_protocols(installed, monkeypatch):
    monkeypatch.setenv("ECHO_KEY", SECRET)
    with TestServer() as srv:
        srv.script(Reply(status=503, message="busy"), Reply(text="from the wire"))
        cfg = ModelConfig(alias="h", provider="echo-http", model="m", base_url=srv.base_url("openai"),
                          api_key_env="ECHO_KEY")
        from providers.http import RetryPolicy

        async def go():
            provider = make_provider(cfg, retry=RetryPolicy(base=0.001))
            try:
                return await collect_async(provider, chat_request("ping"))
            finally:
                await provider.aclose()

        result, events = anyio.run(go)
        assert result.text == "from the wire" and [e.type for e in events].count("retrying") == 1
        assert srv.requests[-1].json["prompt"] == "ping"
        assert srv.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
        srv.script(Reply(status=401, message=f"bad key {SECRET}"))
        result, events = anyio.run(go)
        assert events[-1].kind == ErrorKind.auth and SECRET not in events[-1].message
    # no base_url and no catalogue default: the model fails with a config error that says so
    _, events = _collect(ModelConfig(alias="h", provider="echo-http", model="m"))
    assert events[-1].kind == ErrorKind.config and "base_url is required" in events[-1].message


def test_a_config_names_a_plugin_provider_and_a_typo_lists_the_plugins(installed, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[models.e]\nprovider = "echo"\nmodel = "plain"\n', encoding="utf-8")
    assert load_config(path).models["e"].provider == "echo"
    path.write_text('[models.e]\nprovider = "ecko"\nmodel = "plain"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "unknown provider 'ecko'" in str(err.value) and "echo" in str(err.value)


@pytest.mark.parametrize(("mode", "kind", "words", "kept"), [
    ("raise", ErrorKind.bad_response, "raised RuntimeError: the echo plugin broke mid-stream", "hello"),
    ("no-terminal", ErrorKind.truncated, "ended without a terminal event", "hello plugin world"),
    ("junk", ErrorKind.bad_response, "sent str, not an event", "hello"),
])
def test_a_misbehaving_plugin_ends_its_stream_with_one_named_error(installed, mode, kind, words, kept):
    result, events = _collect(_echo(mode))
    assert sum(e.type in ("finish", "error") for e in events) == 1 and events[-1].type == "error"
    assert events[-1].kind == kind and words in events[-1].message
    assert events[-1].message.startswith("provider plugin 'echo':")
    assert result.text == kept             # what came before the fault is kept


def test_a_plugin_cannot_leak_the_key_in_its_error(installed, monkeypatch):
    monkeypatch.setenv("ECHO_KEY", SECRET)
    result, events = _collect(_echo("leak", api_key_env="ECHO_KEY"))
    assert events[-1].type == "error" and events[-1].kind == ErrorKind.auth
    for ev in events:
        assert SECRET not in ev.model_dump_json() and SECRET[:16] not in ev.model_dump_json()


def test_a_plugin_is_held_to_the_answer_deadline_and_size_limit(installed):
    _, events = _collect(_echo("slow", answer_deadline=0.3))
    assert events[-1].type == "error" and events[-1].kind == ErrorKind.timeout
    assert "answer_deadline" in events[-1].message
    _, events = _collect(_echo(max_answer_bytes=1024), "word " * 400)
    assert events[-1].type == "error" and events[-1].kind == ErrorKind.truncated
    assert "max_answer_bytes" in events[-1].message


def test_a_plugin_that_cannot_be_imported_fails_its_pane_not_the_session(installed, tmp_path):
    models = [_echo(), ModelConfig(alias="b", provider="broken", model="x")]

    async def go():
        store = AsyncStore(Store.open(tmp_path / "s.db"))
        session = await ChatSession.create(store, models)
        await session.send("hi there")
        await session.aclose()
        loaded = await store.load_session(session.id)
        await store.aclose()
        return loaded

    by = {o.contestant: o for o in anyio.run(go).outputs}
    assert by["echo-plain"].status == "complete" and by["echo-plain"].text == "hi there"
    assert by["b"].status == "error" and by["b"].error_kind == "config"
    assert "provider plugin 'broken' cannot be imported" in by["b"].error_message


def test_lineup_models_lists_plugins_and_reports_broken_ones(installed, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cfgmod, "default_config_path", lambda: tmp_path / "none.toml")
    path = tmp_path / "c.toml"
    path.write_text('[models.e]\nprovider = "echo"\nmodel = "plain"\n[models.b]\nprovider = "broken"\nmodel = "x"\n',
                    encoding="utf-8")
    code = main(["models", "--config", str(path), "--check"])
    out = capsys.readouterr().out
    assert code == 1                      # the broken model's check failed; lineup did not
    assert "Provider plugins" in out and "echo (example plugin)" in out
    assert "broken" in out and "FAILED: cannot be imported: ModuleNotFoundError" in out
    code = main(["models", "--config", str(path), "--check", "--json"])
    data = json.loads(capsys.readouterr().out)
    checks = {m["alias"]: m["check"] for m in data["models"] if m["configured"]}
    assert checks["e"]["ok"] and not checks["b"]["ok"] and checks["b"]["problem"] == "plugin"
    plugins = {p["name"]: p for p in data["plugins"]}
    assert plugins["echo"]["ok"] and plugins["echo"]["distribution"] == "lineup-echo-plugin"
    assert not plugins["notaprovider"]["ok"] and "not a providers.base.Provider" in plugins["notaprovider"]["error"]


def test_an_installed_plugin_works_in_a_fresh_process(tmp_path):
    """No monkeypatching at all: the distribution is on the path of a new interpreter."""
    path = tmp_path / "c.toml"
    path.write_text('[models.e]\nprovider = "echo"\nmodel = "plain"\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "lineup", "models", "--config", str(path), "--check", "--json"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["models"][0]["check"]["ok"] is True
    assert {p["name"] for p in data["plugins"]} >= {"echo", "echo-http", "broken", "notaprovider"}


def test_a_session_recorded_with_a_plugin_since_uninstalled_still_opens(tmp_path, monkeypatch):
    """Resuming needs the models as recorded: a plugin that is gone fails its
    pane with a config error, and the session, its record and the other
    panes go on."""
    from core.answering.config import Config

    db = tmp_path / "s.db"
    monkeypatch.syspath_prepend(str(PLUGINS))
    plugmod.refresh()
    demo = ModelConfig(alias="d", provider="demo", model="concise")

    async def record():
        store = AsyncStore(Store.open(db))
        session = await ChatSession.create(store, [_echo(), demo])
        await session.send("first words")
        await session.aclose()
        await store.aclose()
        return session.id

    session_id = anyio.run(record)
    monkeypatch.undo()                   # the package is uninstalled
    sys.modules.pop("lineup_echo_plugin", None)
    plugmod.refresh()
    assert "echo" not in plugmod.plugin_names()
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")

    async def resume():
        store = AsyncStore(Store.open(db))
        session = await ChatSession.resume(store, session_id, Config())
        await session.send("second words")
        await session.aclose()
        loaded = await store.load_session(session_id)
        await store.aclose()
        return loaded

    loaded = anyio.run(resume)
    second = {o.contestant: o for o in loaded.outputs if o.turn_id == loaded.turns[-1].id}
    assert second["echo-plain"].status == "error" and second["echo-plain"].error_kind == "config"
    assert "no installed provider plugin declares it" in second["echo-plain"].error_message
    assert second["d"].status == "complete"
