"""The online canary: `lineup canary plan` (LiteLLM's router config, loaded
by LiteLLM's own parser when it is installed), a loopback gateway routing by
the plan's weights and logging as LiteLLM does, `lineup canary report` on
those traces (per arm and category, feedback joined by trace id), the
always-valid test's validity (false "ship" under a planted null, looked at
often) and power (a candidate planted 3 points better), and the calibration
that names the category where offline and online disagree."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from core.report.offline import offline_pairs
from core.decide.canary import (
    OfflinePair,
    Outcome,
    calibrate,
    canary_report,
    outcomes,
    read_feedback,
    sequential,
    spearman,
    sticky_arm,
)
from tests.synthetic import planted_store
from core.exchange.traces import TraceError, read_calls
from lineup.cli import main
from store import Store
from tests.trace_producers import OtelRecorder, litellm_payload, write_lines

CONFIG = """
[models.prod]
provider = "openai"
model = "gpt-4o"
api_key_env = "OPENAI_API_KEY"

[models.next]
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "ANTHROPIC_API_KEY"
"""


def _plan(tmp_path: Path, share: str = "5", experiment: str = "chat") -> dict:
    yaml = pytest.importorskip("yaml")
    config = tmp_path / "config.toml"
    config.write_text(CONFIG)
    out = tmp_path / "litellm.yaml"
    assert main(["canary", "plan", "--config", str(config), "--incumbent", "prod", "--candidate", "next",
                 "--share", share, "--experiment", experiment, "-o", str(out)]) == 0
    return yaml.safe_load(out.read_text())


def test_plan_weights_the_arms_by_the_share_and_names_each_arm(tmp_path):
    plan = _plan(tmp_path)
    group = [m for m in plan["model_list"] if m["model_name"] == "chat"]
    assert [(m["litellm_params"]["model"], m["litellm_params"]["weight"], m["model_info"]["id"]) for m in group] == \
        [("openai/gpt-4o", 95, "chat-incumbent"), ("anthropic/claude-sonnet-4-5", 5, "chat-candidate")]
    assert group[0]["litellm_params"]["api_key"] == "os.environ/OPENAI_API_KEY"     # the variable, never a key
    assert {m["model_name"] for m in plan["model_list"]} == {"chat", "chat-incumbent", "chat-candidate"}
    assert plan["router_settings"]["routing_strategy"] == "simple-shuffle"


def test_plan_refuses_a_share_outside_0_100(tmp_path, capsys):
    assert main(["canary", "plan", "--incumbent", "a", "--candidate", "b", "--share", "100"]) == 2
    assert "--share" in capsys.readouterr().err


def test_plan_loads_in_litellms_own_config_parser(tmp_path):
    try:
        from litellm.proxy.proxy_server import ProxyConfig
    except ImportError as exc:
        pytest.skip(f"litellm's proxy is not installed ({exc}); the plan's config is checked by its parser "
                    f"where it is (pip install 'litellm[proxy]')")
    import asyncio

    _plan(tmp_path)
    path = tmp_path / "litellm.yaml"

    async def load():
        from litellm import Router

        config = await ProxyConfig().get_config(config_file_path=str(path))
        return config, Router(model_list=config["model_list"], **config.get("router_settings", {}))

    config, router = asyncio.run(load())
    assert sorted(router.get_model_names()) == ["chat", "chat", "chat-candidate", "chat-incumbent"]
    weights = {d["model_info"]["id"]: d["litellm_params"].get("weight") for d in router.model_list}
    assert weights["chat-incumbent"] == 95 and weights["chat-candidate"] == 5


def test_sticky_arm_keeps_a_user_and_gives_the_candidate_its_share():
    users = [f"user-{i}" for i in range(20_000)]
    arms = [sticky_arm("chat", u, 5) for u in users]
    assert arms == [sticky_arm("chat", u, 5) for u in users]
    assert 0.045 < arms.count("candidate") / len(users) < 0.055


# ---------------------------------------------------------------- a loopback gateway


def gateway_traffic(plan: dict, *, requests: int, categories: dict[str, tuple[float, float]], seed: int,
                    latency: dict[str, float]) -> tuple[list[dict], list[dict]]:
    """Requests routed as LiteLLM's simple-shuffle routes them (by the plan's
    weights) and logged as its logging payload; users' thumbs per (category,
    arm) from `categories` (incumbent, candidate rate). Returns the payloads
    and the feedback rows (by trace id)."""
    rng = random.Random(seed)
    group = [m for m in plan["model_list"] if m["model_name"] == "chat"]
    weights = [m["litellm_params"]["weight"] for m in group]
    payloads, feedback = [], []
    cats = list(categories)
    for i in range(requests):
        dep = rng.choices(group, weights=weights)[0]
        arm = dep["model_info"]["lineup_arm"]
        cat = cats[i % len(cats)]
        p = litellm_payload([{"role": "user", "content": f"q{i}"}], f"a{i}",
                            model=dep["litellm_params"]["model"].split("/", 1)[1], model_id=dep["model_info"]["id"],
                            model_group="chat", requester={"category": cat}, at=i,
                            latency_ms=rng.gauss(latency[arm], 50), error="RateLimitError" if rng.random() < 0.01
                            else None)
        payloads.append(p)
        rate = categories[cat][0 if arm == "incumbent" else 1]
        feedback.append({"trace_id": p["trace_id"], "thumbs": "up" if rng.random() < rate else "down"})
    return payloads, feedback


def test_report_reads_arms_categories_and_feedback_from_the_gateways_logs(tmp_path, capsys):
    plan = _plan(tmp_path, share="30")
    cats = {"code": (0.6, 0.75), "chat": (0.7, 0.8)}
    payloads, fb = gateway_traffic(plan, requests=3000, categories=cats, seed=3,
                                   latency={"incumbent": 900, "candidate": 700})
    traces = write_lines(tmp_path / "litellm-log.jsonl", payloads)
    fb_file = write_lines(tmp_path / "feedback.jsonl", fb)
    assert main(["canary", "report", str(traces), "--incumbent", "prod", "--candidate", "next",
                 "--experiment", "chat", "--category", "category", "--feedback", str(fb_file), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    inc, cand = rep["arms"]
    assert inc["arm"] == "incumbent" and cand["arm"] == "candidate"
    assert inc["requests"] + cand["requests"] == 3000
    assert 0.25 < cand["requests"] / 3000 < 0.35                     # the plan's share
    assert cand["latency_p50"]["low"] < 700 < cand["latency_p50"]["high"]
    assert inc["feedback"]["low"] < 0.65 < inc["feedback"]["high"]
    assert set(rep["categories"]) == {"code", "chat"}
    assert rep["test"]["verdict"] == "ship"                          # the candidate is better
    # and in words
    assert main(["canary", "report", str(traces), "--incumbent", "prod", "--candidate", "next",
                 "--experiment", "chat", "--category", "category", "--feedback", str(fb_file),
                 "--metric", "latency"]) == 0
    out = capsys.readouterr().out
    assert "verdict: SHIP: the candidate is better" in out and "category code" in out


def test_report_reads_otel_spans_tagged_with_the_arm(tmp_path, capsys):
    rec = OtelRecorder()
    rng = random.Random(1)
    for i in range(120):
        arm = "candidate" if i % 4 == 0 else "incumbent"
        rec.chat([{"role": "user", "content": f"q{i}"}], "a", model="gpt-4o" if arm == "incumbent" else "o4",
                 attrs={"lineup.arm": arm, "lineup.experiment": "chat", "app.feedback": rng.random() < 0.5},
                 start_ns=1_700_000_000_000_000_000 + i * 10**9, latency_ms=500 + rng.random() * 100,
                 error="timeout" if i == 7 else None)
    path = rec.write(tmp_path / "otel.jsonl")
    assert main(["canary", "report", str(path), "--incumbent", "gpt-4o", "--candidate", "o4", "--experiment",
                 "chat", "--feedback-field", "app.feedback", "--metric", "errors", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [a["requests"] for a in rep["arms"]] == [90, 30]
    assert rep["arms"][0]["errors"]["value"] == pytest.approx(1 / 90)
    assert rep["arms"][0]["feedback_n"] == 90


def test_feedback_file_errors_name_the_line(tmp_path):
    bad = tmp_path / "fb.csv"
    bad.write_text("trace_id,score\nabc,1\ndef,7\n")
    with pytest.raises(TraceError, match=r"fb\.csv:3.*score"):
        read_feedback(bad)
    good = tmp_path / "fb.jsonl"
    good.write_text('{"id": "x", "value": 0.25}\n{"trace_id": "y", "thumbs": "down"}\n')
    assert read_feedback(good) == {"x": 0.25, "y": 0.0}


# ---------------------------------------------------------------- the test's validity and power


def _looks(rng: np.random.Generator, p_a: float, p_b: float, n: int, every: int) -> tuple[list, np.ndarray, np.ndarray]:
    a = (rng.random(n) < p_a).astype(float)
    b = (rng.random(n) < p_b).astype(float)
    ks = list(range(every, n + 1, every))
    return ks, np.cumsum(a), np.cumsum(b)


def _verdicts(ks, ca, cb) -> list[str]:
    out = []
    for k in ks:
        ma, mb = ca[k - 1] / k, cb[k - 1] / k
        out.append(sequential("feedback", k, ma, ma * (1 - ma) * k / (k - 1), k, mb, mb * (1 - mb) * k / (k - 1),
                              alpha=0.05).verdict)
    return out


def test_false_ship_rate_under_a_planted_null_stays_under_nominal_however_often_checked():
    rng = np.random.default_rng(20261205)
    reps, n, every = 300, 3000, 50                      # 60 looks per canary
    ship = naive = 0
    for _ in range(reps):
        ks, ca, cb = _looks(rng, 0.7, 0.7, n, every)
        ship += "ship" in _verdicts(ks, ca, cb)
        z_any = False
        for k in ks:                                    # a fixed-sample one-sided 5% test, looked at as often
            ma, mb = ca[k - 1] / k, cb[k - 1] / k
            se = math.sqrt((ma * (1 - ma) + mb * (1 - mb)) / k)
            z_any = z_any or (se > 0 and (mb - ma) / se >= 1.645)
        naive += z_any
    assert ship / reps <= 0.05
    assert naive / reps > 0.10                          # peeking breaks the fixed test: the simulation can tell


def test_a_candidate_planted_3_points_better_is_found():
    rng = np.random.default_rng(7)
    reps, found, stopped = 60, 0, 0
    for _ in range(reps):
        ks, ca, cb = _looks(rng, 0.70, 0.73, 20_000, 1000)
        verdicts = _verdicts(ks, ca, cb)
        found += "ship" in verdicts
        stopped += "stop" in verdicts
    assert found / reps >= 0.95 and stopped == 0


def test_not_worse_by_the_margin_ships_an_equal_candidate():
    rng = np.random.default_rng(11)
    ks, ca, cb = _looks(rng, 0.7, 0.7, 20_000, 20_000)
    k = ks[-1]
    ma, mb = ca[-1] / k, cb[-1] / k
    args = ("feedback", k, ma, ma * (1 - ma), k, mb, mb * (1 - mb))
    assert sequential(*args).verdict == "continue"
    with_margin = sequential(*args, margin=0.03)
    assert with_margin.verdict == "ship" and "margin" in with_margin.reason


# ---------------------------------------------------------------- calibration


def test_planted_offline_online_disagreement_in_one_category_is_named(tmp_path):
    db = tmp_path / "offline.db"
    truth = {"code": {"prod": 0, "next": 200}, "chat": {"prod": 0, "next": 120}, "math": {"prod": 0, "next": -150},
             "writing": {"prod": 0, "next": 80}, "support": {"prod": 0, "next": -60}}
    with Store.open(db) as store:
        planted_store(store, truth, 160, seed=5, rater="rater")
        offline = offline_pairs(store, "prod", "next")
    assert set(offline) == set(truth)
    assert offline["code"].candidate_wins > offline["code"].incumbent_wins
    # online: every category as offline says, but code, where the candidate is worse in production
    online = {"code": (0.75, 0.62), "chat": (0.6, 0.68), "math": (0.7, 0.6), "writing": (0.6, 0.66),
              "support": (0.7, 0.66)}
    rng = random.Random(2)
    rows = [Outcome(arm=arm, category=cat, error=False, latency_ms=500.0, ttft_ms=None, cost=None, tokens=None,
                    feedback=float(rng.random() < rates[0 if arm == "incumbent" else 1]), trace_id=None)
            for cat, rates in online.items() for arm in ("incumbent", "candidate") for _ in range(1500)]
    cal = calibrate(rows, offline, "feedback")
    assert cal.disagreements == ["code"]
    assert {c.category: c.agree for c in cal.categories}["chat"] == "agree"
    assert cal.spearman is not None and cal.spearman_low is not None and cal.spearman_high is not None
    assert cal.spearman_low <= cal.spearman <= cal.spearman_high
    # and through the command: the offline votes from the database, named beside the online
    rep = canary_report(rows, incumbent="prod", candidate="next", experiment=None, metric="feedback", offline=offline)
    assert rep.calibration is not None and rep.calibration.disagreements == ["code"]


def test_spearman_interval_needs_four_categories():
    assert spearman([1, 2], [1, 2]) is None
    rho, lo, hi = spearman([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5])
    assert rho == pytest.approx(0.8285714) and lo is not None and hi is not None and lo < rho < hi


def test_report_with_offline_votes_from_the_database(tmp_path, capsys):
    db = tmp_path / "lineup.db"
    with Store.open(db) as store:
        planted_store(store, {"code": {"prod": 0, "next": 300}, "chat": {"prod": 0, "next": 0}}, 60, seed=1)
    payloads = [litellm_payload([{"role": "user", "content": f"q{i}"}], "a", model="gpt-4o" if i % 2 else "o4",
                                requester={"category": "code" if i % 3 else "chat"}, at=i) for i in range(200)]
    traces = write_lines(tmp_path / "t.jsonl", payloads)
    assert main(["canary", "report", str(traces), "--db", str(db), "--incumbent", "gpt-4o", "--candidate", "o4",
                 "--offline-pair", "prod", "next", "--offline", "--category", "category", "--metric", "latency"]) == 0
    out = capsys.readouterr().out
    assert "offline against online" in out and "code" in out


def test_calls_of_other_models_are_counted_not_reported(tmp_path):
    payloads = [litellm_payload([{"role": "user", "content": "q"}], "a", model=m) for m in ("a", "b", "c")]
    calls, _ = read_calls([write_lines(tmp_path / "t.jsonl", payloads)])
    rows, other = outcomes(calls, incumbent="a", candidate="b", experiment=None, category=None)
    assert [r.arm for r in rows] == ["incumbent", "candidate"] and other == 1
    assert OfflinePair(1, 2, 3).n == 6


def test_at_80_columns_each_arms_figures_are_whole(tmp_path, capsys, monkeypatch):
    """The arms' table (nine columns of figures with intervals) cut them at 80
    columns: "0.000…", "[0.6…", "incum…". A terminal too narrow for an arm a
    row gets a figure a row and an arm a column, every interval whole; a wide
    one keeps an arm a row."""
    plan = _plan(tmp_path, share="30")
    payloads, fb = gateway_traffic(plan, requests=600, categories={"code": (0.6, 0.75), "chat": (0.7, 0.8)},
                                   seed=3, latency={"incumbent": 900, "candidate": 700})
    traces = write_lines(tmp_path / "litellm-log.jsonl", payloads)
    fb_file = write_lines(tmp_path / "feedback.jsonl", fb)
    argv = ["canary", "report", str(traces), "--incumbent", "prod", "--candidate", "next", "--experiment", "chat",
            "--category", "category", "--feedback", str(fb_file)]
    assert main([*argv, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    inc, cand = rep["arms"]
    whole = [f"{a['feedback']['value']:.3f} [{a['feedback']['low']:.3f}, {a['feedback']['high']:.3f}] "
             f"n={a['feedback_n']}" for a in (inc, cand)]
    for cols in (80, 200):
        monkeypatch.setenv("COLUMNS", str(cols))
        assert main(argv) == 0
        out = capsys.readouterr().out
        lines = out.split("\n")
        assert all(len(ln) <= cols for ln in lines), out
        assert "…" not in out, out
        cells = {c.strip() for ln in lines if ln.startswith("│") for c in ln.split("│")}
        assert set(whole) <= cells, (whole, out)
        if cols == 80:
            assert "incumbent (prod)" in lines[2] and "candidate (next)" in lines[2]     # an arm a column
        else:
            assert any(ln.startswith("│ incumbent (prod)") for ln in lines)               # an arm a row
