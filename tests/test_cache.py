"""The response cache (`lineup run --cache`): what a request key covers, a
cached re-run that makes no request at all (the loopback server counts
them), answers marked cached and left out of latency, speed and cost,
`--refresh`, and the config default."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.answering.cache import request_key
from core.answering.config import ConfigError, parse_config
from core.report import ReportFilters, build_report
from lineup.cli import main
from providers.events import ChatRequest, ImagePart, Message, SamplingParams
from providers.model_config import ModelConfig
from store import Store
from tests.server import Reply, TestServer
from tests.run_support import config_file, sample_set


def _key(cfg: ModelConfig | None = None, request: ChatRequest | None = None, repeat: int = 0) -> str:
    cfg = cfg or ModelConfig(alias="a", provider="openai", model="gpt-x", base_url="http://h/v1")
    request = request or ChatRequest(model="gpt-x", messages=(Message(role="user", content="hi"),),
                                     params=SamplingParams(temperature=0.0, seed=1))
    return request_key(cfg, request, repeat)


def test_the_key_covers_what_determines_the_answer_and_nothing_else() -> None:
    base_cfg = ModelConfig(alias="a", provider="openai", model="gpt-x", base_url="http://h/v1")
    base_req = ChatRequest(model="gpt-x", messages=(Message(role="user", content="hi"),),
                           params=SamplingParams(temperature=0.0, seed=1))
    key = _key(base_cfg, base_req)
    assert key == _key(base_cfg, base_req) and len(key) == 64
    different = {
        "provider": _key(base_cfg.model_copy(update={"provider": "ollama"}), base_req),
        "model": _key(base_cfg.model_copy(update={"model": "gpt-y"}), base_req),
        "base_url": _key(base_cfg.model_copy(update={"base_url": "http://other/v1"}), base_req),
        "message": _key(base_cfg, base_req.model_copy(update={"messages": (Message(role="user", content="ho"),)})),
        "history": _key(base_cfg, base_req.model_copy(update={"messages": (
            Message(role="user", content="x"), Message(role="assistant", content="y"),
            Message(role="user", content="hi"))})),
        "image": _key(base_cfg, base_req.model_copy(update={"messages": (
            Message(role="user", content="hi", images=(ImagePart(mime="image/png", data="AAAA"),)),)})),
        "system": _key(base_cfg, base_req.model_copy(update={"system": "be brief"})),
        "temperature": _key(base_cfg, base_req.model_copy(update={"params": SamplingParams(temperature=0.5,
                                                                                            seed=1)})),
        "seed": _key(base_cfg, base_req.model_copy(update={"params": SamplingParams(temperature=0.0, seed=2)})),
        "model params": _key(base_cfg.model_copy(update={"params": SamplingParams(top_p=0.5)}), base_req),
        "extra_body": _key(base_cfg.model_copy(update={"extra_body": {"top_k": 3}}), base_req),
        "repeat": _key(base_cfg, base_req, repeat=1),
    }
    assert len(set(different.values()) | {key}) == len(different) + 1, different
    # names and bounds do not change an answer
    same = base_cfg.model_copy(update={"alias": "b", "read_timeout": 5.0, "max_retries": 0, "concurrency": 2,
                                       "api_key_env": "OTHER"})
    assert _key(same, base_req) == key
    # the provider's default server is the server a model without base_url reaches
    assert _key(base_cfg.model_copy(update={"base_url": None}), base_req) == \
        _key(base_cfg.model_copy(update={"base_url": "https://api.openai.com/v1/"}), base_req)


def _outputs(db: Path) -> list[tuple]:
    store = Store.open(db)
    try:
        return [tuple(r.values()) for r in store.query(
            "SELECT o.session_id, o.origin, o.cached_from, o.ttft_ms, o.duration_ms, o.cost, o.text, "
            "o.request_key, o.served_model FROM output o ORDER BY o.created, o.id")]
    finally:
        store.close()


def test_a_cached_rerun_makes_no_request_and_is_left_out_of_latency(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "c.db"
    sample = sample_set(tmp_path / "set.jsonl", 5, follow_ups=["and then?"])
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {"price": {"input_per_mtok": 1.0,
                                                                          "output_per_mtok": 2.0}}})
        srv.script(Reply(text="first answers", served_model="snap-1", delay=0.002))
        common = ["--db", str(db), "--config", str(config), "-m", "m0", "--temperature", "0", "--quiet"]
        assert main(["run", str(sample), *common]) == 0
        first = len(srv.requests)
        assert first == 10                                   # 5 cases x 2 turns
        srv.script(Reply(text="the server would now say something else"))
        assert main(["run", str(sample), *common, "--new", "--cache"]) == 0
        assert len(srv.requests) == first                    # not one request
        assert "10 answers came from the cache" in capsys.readouterr().err
        # --refresh calls the provider again, every time
        assert main(["run", str(sample), *common, "--new", "--refresh"]) == 0
        assert len(srv.requests) == first + 10
    rows = _outputs(db)
    sessions = list(dict.fromkeys(r[0] for r in rows))
    assert len(sessions) == 3
    original = {r[7]: r for r in rows if r[0] == sessions[0]}
    cached = [r for r in rows if r[0] == sessions[1]]
    assert all(r[1] == "stream" for r in original.values())
    for r in cached:
        src = original[r[7]]                                 # the same request key
        assert r[1] == "cache" and r[6] == src[6] == "first answers" and r[8] == "snap-1"
        assert r[3] is None and r[4] is None and r[5] == 0.0     # no timings, nothing spent
        assert r[2] is not None and r[2] != r[0]
    assert {r[6] for r in rows if r[0] == sessions[2]} == {"the server would now say something else"}
    assert {r[1] for r in rows if r[0] == sessions[2]} == {"stream"}

    # the report's engineering figures count the requests that were made
    store = Store.open(db)
    try:
        only_cached = build_report(store, ReportFilters(sessions=[sessions[1]]))
        both = build_report(store, ReportFilters(sessions=sessions[:2]))
        alone = build_report(store, ReportFilters(sessions=[sessions[0]]))
    finally:
        store.close()
    (eng,) = only_cached.engineering
    assert eng.requests == 0 and eng.ttft_ms is None and eng.duration_ms is None and not eng.cost
    (eng_both,), (eng_alone,) = both.engineering, alone.engineering
    assert eng_both.requests == eng_alone.requests == 10
    assert eng_both.ttft_ms == eng_alone.ttft_ms and eng_both.cost == eng_alone.cost


def test_the_config_turns_the_cache_on_and_refresh_turns_it_off(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    sample = sample_set(tmp_path / "set.jsonl", 3)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        config.write_text("[run]\ncache = true\n\n" + config.read_text())
        common = ["--db", str(db), "--config", str(config), "-m", "m0", "--quiet", "--new"]
        assert main(["run", str(sample), *common]) == 0
        assert len(srv.requests) == 3                # nothing to reuse yet
        assert main(["run", str(sample), *common]) == 0
        assert len(srv.requests) == 3                # the config's default: reused
        assert main(["run", str(sample), *common, "--refresh"]) == 0
        assert len(srv.requests) == 6


def test_a_different_seed_or_repeat_is_not_a_hit(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    sample = sample_set(tmp_path / "set.jsonl", 2)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        common = ["--db", str(db), "--config", str(config), "-m", "m0", "--quiet", "--new", "--cache"]
        assert main(["run", str(sample), *common, "--seed", "1"]) == 0
        assert len(srv.requests) == 2
        assert main(["run", str(sample), *common, "--seed", "2"]) == 0
        assert len(srv.requests) == 4
        assert main(["run", str(sample), *common, "--seed", "1", "--repeat", "2"]) == 0
        assert len(srv.requests) == 6                # repeat 0 reused, repeat 1 is a new sample
        sent = [r.json["seed"] for r in srv.requests]
        assert sent == [1, 1, 2, 2, 1, 1]


def test_a_failed_answer_is_never_reused(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    sample = sample_set(tmp_path / "set.jsonl", 1)
    with TestServer() as srv:
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        common = ["--db", str(db), "--config", str(config), "-m", "m0", "--quiet", "--new", "--cache"]
        srv.script(Reply(status=400, message="bad"))
        assert main(["run", str(sample), *common]) == 1
        srv.script(Reply(text="fine"))
        assert main(["run", str(sample), *common]) == 0
        assert len(srv.requests) == 2


def test_the_run_table_is_checked() -> None:
    assert parse_config({"run": {"cache": True}}).run_cache is True
    assert parse_config({}).run_cache is False
    with pytest.raises(ConfigError, match=r"run\.cache: must be true or false"):
        parse_config({"run": {"cache": "yes"}}, source="config.toml")
    with pytest.raises(ConfigError, match=r"run\.refresh: unknown key"):
        parse_config({"run": {"refresh": True}})


def test_a_tool_loop_is_reused_only_with_the_same_tools_and_results_and_keeps_its_trace(tmp_path: Path) -> None:
    # the first request of a tool loop is the same whatever the scripted results say; the answer is not
    from tests.run_support import weather_case, weather_server, write_set

    db = tmp_path / "c.db"
    same = write_set(tmp_path / "a.jsonl", weather_case())
    other = write_set(tmp_path / "b.jsonl", weather_case(
        tool_results=[{"name": "get_weather", "arguments": {"city": "Paris"}, "result": {"temp_c": 31}}]))
    with TestServer() as srv:
        srv.respond(weather_server)
        config = config_file(tmp_path / "config.toml", srv, {"m0": {}})
        common = ["--db", str(db), "--config", str(config), "-m", "m0", "--quiet", "--new", "--cache"]
        assert main(["run", str(same), *common]) == 0
        first = len(srv.requests)
        assert first == 2                                   # the call, then the answer with its result
        assert main(["run", str(same), *common]) == 0
        assert len(srv.requests) == first                   # the whole loop reused
        assert main(["run", str(other), *common]) == 0
        assert len(srv.requests) == 2 * first               # other scripted results: asked again
    with Store.open(db) as store:
        rows = store.query("SELECT origin, trace FROM output ORDER BY created, id")
    assert [r["origin"] for r in rows] == ["stream", "cache", "stream"]
    assert rows[1]["trace"] is not None and rows[1]["trace"] == rows[0]["trace"]
