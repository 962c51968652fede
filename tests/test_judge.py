"""`lineup judge`: an LLM judge over real HTTP on the loopback server and
offline with demo/judge. Its verdicts are votes of rater kind "judge": blind
material, both orders, resumable (never the same pair in the same order
twice), the server's limit, cost recorded, its own family left out, and
never counted in a figure made of people's votes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core.answering.judge import DEFAULT_INSTRUCTIONS, JudgePrompt, parse_verdict
from lineup.cli import main
from store import Store
from tests.server import PairwiseJudge, Reply, TestServer, request_texts

CASES = [
    {"id": "c1", "category": "code", "prompt": "Write a python function that reverses a list"},
    {"id": "c2", "category": "json", "prompt": "Give JSON for a user record with name and email"},
    {"id": "c3", "category": "code", "prompt": "Explain recursion with an example", "follow_ups": ["shorter"]},
]
DEMO = ["demo/concise", "demo/thorough", "demo/quirky"]


@pytest.fixture(autouse=True)
def _fast_demo(monkeypatch):
    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")


def _run_set(tmp_path: Path, models=DEMO, *extra: str) -> str:
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    assert main(["run", str(path), *(x for m in models for x in ("-m", m)), "--quiet", "--seed", "2", *extra]) == 0
    with Store.open(tmp_path / "lineup.db") as store:
        return store.list_sessions(kind="run")[0].id


def _judge_votes(tmp_path: Path, session_id: str):
    with Store.open(tmp_path / "lineup.db") as store:
        return [v for v in store.load_session(session_id).votes if v.rater_kind == "judge"]


def _config(tmp_path: Path, srv: TestServer, **judge: object) -> Path:
    fields = {"provider": "openai", "model": "judge-model", "base_url": srv.base_url("openai"), **judge}
    lines = ["[models.judge]"] + [f"{k} = {json.dumps(v) if not isinstance(v, dict) else _inline(v)}"
                                  for k, v in fields.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _inline(table: dict) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items()) + " }"


def test_parse_verdict_follows_the_convention():
    assert parse_verdict("A is more complete. [[A]]") == "A"
    assert parse_verdict("[[B]]") == "B"
    assert parse_verdict("Equally good. [[C]]") == "tie"
    assert parse_verdict("I first thought [[A]] but on reflection [[B]]") == "B"   # the final verdict
    assert parse_verdict("A is better") is None
    assert parse_verdict("[[D]]") is None


def test_prompt_hash_changes_with_the_rubric_and_the_verdict_format_stays():
    default, rubric = JudgePrompt(), JudgePrompt(rubric="Prefer the shorter correct answer.")
    assert default.hash != rubric.hash and len(default.hash) == 64
    assert rubric.instructions.startswith("Prefer the shorter correct answer.")
    assert "[[A]]" in rubric.instructions and "[[C]]" in rubric.instructions
    assert DEFAULT_INSTRUCTIONS in default.instructions


def test_demo_judge_records_both_orders_and_resumes_without_asking_twice(tmp_path, capsys):
    sid = _run_set(tmp_path)
    assert main(["judge", "-m", "demo/judge"]) == 0
    votes = _judge_votes(tmp_path, sid)
    # 3 cases x 3 pairs x 2 orders, each on the case's last turn, as "judge:demo/judge"
    assert len(votes) == 18
    assert {v.rater for v in votes} == {"judge:demo/judge"} and {v.judge for v in votes} == {"demo/judge"}
    assert all(len(v.mapping) == 2 and v.positions == ["A", "B"] and v.revealed_at is None for v in votes)
    orders = {(v.turn_id, v.mapping["A"], v.mapping["B"]) for v in votes}
    assert len(orders) == 18
    assert {v.judge_prompt_hash for v in votes} == {JudgePrompt().hash}
    assert all("[[" in (v.judge_reason or "") for v in votes)
    # the demo judge reads the text only: the same verdict in both orders
    by_pair: dict = {}
    for v in votes:
        winner = v.mapping.get(v.choice, "tie")
        by_pair.setdefault((v.turn_id, frozenset(v.mapping.values())), set()).add(winner)
    assert all(len(w) == 1 for w in by_pair.values())
    capsys.readouterr()
    assert main(["judge", "-m", "demo/judge"]) == 0      # resumed: nothing left to ask
    assert "0 verdicts recorded" in capsys.readouterr().out
    assert len(_judge_votes(tmp_path, sid)) == 18
    # --no-swap with another rubric is another prompt: one order per pair
    rubric = tmp_path / "rubric.txt"
    rubric.write_text("Prefer the answer a busy engineer can use at once.\n")
    assert main(["judge", sid, "-m", "demo/judge", "--rubric", str(rubric), "--no-swap", "--limit", "2"]) == 0
    new = [v for v in _judge_votes(tmp_path, sid) if v.judge_rubric]
    assert len(new) == 2 and new[0].judge_rubric.startswith("Prefer the answer")
    assert new[0].judge_prompt_hash != JudgePrompt().hash


def test_judge_votes_are_in_no_human_figure(tmp_path):
    from core.report import ReportFilters, build_report
    from core.answering.vote_queue import build_items

    sid = _run_set(tmp_path)
    with Store.open(tmp_path / "lineup.db") as store:
        before = build_report(store, ReportFilters(include_demo=True), rounds=50)
        queue_before = len(build_items(store.load_session(sid), rater="tester"))
    assert main(["judge", "-m", "demo/judge"]) == 0
    with Store.open(tmp_path / "lineup.db") as store:
        after = build_report(store, ReportFilters(include_demo=True), rounds=50)
        loaded = store.load_session(sid)
        (summary,) = store.list_sessions()
        per_model = store.votes_per_model()
        judge_counts = store.votes_per_model(rater_kind="judge")
        assert len(build_items(loaded, rater="tester")) == queue_before == 3   # the person's queue is whole
        with_judge = build_report(store, ReportFilters(include_demo=True), rounds=50, judge="demo/judge")
    # the ratings, position bias, consistency and their messages: exactly as without the judge
    keep = ("models", "groups", "gaps", "votes_used", "position_bias", "consistency", "by_rater", "message")
    assert {k: getattr(after, k) for k in keep} == {k: getattr(before, k) for k in keep}
    assert after.votes_used == 0 and after.judge_votes_excluded == 18
    assert summary.votes == 0 and summary.judge_votes == 18
    assert per_model == [] and sum(c.votes for c in judge_counts) == 36
    assert with_judge.judge is not None and with_judge.judge.verdicts == 18
    assert with_judge.judge.position.rate == 1.0
    from core.exchange.export import export_csv

    rows = export_csv(loaded).splitlines()
    assert rows[0].endswith("rater_kind,judge,judge_reason")
    assert sum(",judge,demo/judge," in r for r in rows) == 18
    assert not any("[[" in r for r in rows[1:])      # the reply is hidden while the case is: it may guess a model


@pytest.mark.slow
def test_always_a_judge_over_http_is_fully_position_inconsistent_and_blind(tmp_path, capsys):
    from core.report import ReportFilters, build_report
    from core.report.markdown import render_markdown

    sid = _run_set(tmp_path)
    with TestServer() as srv:
        judge = PairwiseJudge(lambda q, a, b: "A", usage=(1000, 50, None), delay=0.01)
        srv.respond(judge)
        config = _config(tmp_path, srv, price={"input_per_mtok": 2.0, "output_per_mtok": 10.0})
        assert main(["judge", "-m", "judge", "--config", str(config), "--concurrency", "8"]) == 0
        requests = list(srv.requests)
    out = capsys.readouterr().out
    assert "18 verdicts recorded (A 18)" in out and "cost $0.0450" in out
    assert len(requests) == 18
    # blind: the material is the answers' text under labels; no model name, alias or provider goes out
    for rec in requests:
        system, user = request_texts(rec)
        assert "[[A]]" in system and "impartial judge" in system
        for name in ("demo/", "concise", "thorough", "quirky"):
            assert name not in system + user
    # a local server takes one request at a time (the server's limit beats --concurrency 8)
    # (each reply streams for ~0.1 s; the next request may be read a moment before the server notes its end)
    spans = sorted((r.t, r.done_at) for r in requests)
    assert all(spans[k + 1][0] >= spans[k][1] - 0.01 for k in range(len(spans) - 1))
    votes = _judge_votes(tmp_path, sid)
    assert all(v.judge_cost == pytest.approx(0.0025) for v in votes)
    assert {(v.judge_input_tokens, v.judge_output_tokens) for v in votes} == {(1000, 50)}
    with Store.open(tmp_path / "lineup.db") as store:
        report = build_report(store, ReportFilters(include_demo=True), rounds=50, judge="judge")
    pos = report.judge.position
    assert (pos.pairs_both_orders, pos.consistent, pos.rate, pos.first_shown_rate) == (9, 0, 0.0, 1.0)
    assert pos.summary.startswith("fully position-inconsistent")
    assert "fully position-inconsistent" in render_markdown(report)


def test_judge_failures_are_retried_and_nothing_half_recorded(tmp_path, capsys):
    sid = _run_set(tmp_path, DEMO[:2])
    with TestServer() as srv:
        srv.script(Reply(text="Both are fine, I think."), Reply(status=500), Reply(text="B wins. [[B]]"))
        config = _config(tmp_path, srv, max_retries=0)
        assert main(["judge", "-m", "judge", "--config", str(config)]) == 1
        err = capsys.readouterr().err
        assert "no verdict" in err and "judge error (server)" in err
        assert len(_judge_votes(tmp_path, sid)) == 4          # 3 pairs x 2 orders, 2 failed
        assert main(["judge", "-m", "judge", "--config", str(config)]) == 0
        assert len(srv.requests) == 8                          # only the two failed ones again
    assert len(_judge_votes(tmp_path, sid)) == 6


def test_the_judge_does_not_judge_its_own_family_unless_asked(tmp_path, capsys):
    with TestServer() as srv:
        srv.script(Reply(text="An answer from the loopback server."))
        path = tmp_path / "config.toml"
        models = {"gpt-small": "gpt-4o-mini", "claude": "claude-sonnet-4-5", "qwen": "qwen2.5:7b"}
        path.write_text("".join(f'[models.{a}]\nprovider = "openai"\nmodel = "{m}"\nbase_url = "{srv.base_url("openai")}"\n'
                                for a, m in {**models, "judge": "gpt-4o"}.items()))
        sample = tmp_path / "set.jsonl"
        sample.write_text(json.dumps(CASES[0]) + "\n")
        assert main(["run", str(sample), "-m", "gpt-small", "-m", "claude", "-m", "qwen", "--quiet",
                     "--config", str(path)]) == 0
        srv.respond(PairwiseJudge(lambda q, a, b: "C"))
        capsys.readouterr()
        assert main(["judge", "-m", "judge", "--config", str(path)]) == 0
        err = capsys.readouterr().err
        assert "left out: pairs with gpt-small, of the judge's own family" in err
        with Store.open(tmp_path / "lineup.db") as store:
            (s,) = store.list_sessions()
            votes = store.load_session(s.id).votes
        assert {frozenset(v.mapping.values()) for v in votes} == {frozenset({"claude", "qwen"})}
        assert main(["judge", "-m", "judge", "--config", str(path), "--same-family"]) == 0
        assert "same family (openai) as gpt-small" in capsys.readouterr().err


def test_bad_input_is_refused_naming_it(tmp_path, capsys):
    _run_set(tmp_path, DEMO[:2])
    assert main(["judge", "-m", "demo/judge", "--rubric", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err
    assert main(["judge", "-m", "nobody"]) == 2
    assert "unknown model alias 'nobody'" in capsys.readouterr().err
    assert main(["judge", "ZZZZ", "-m", "demo/judge"]) == 2
    assert main(["judge", "-m", "demo/judge", "--limit", "0"]) == 2
    with pytest.raises(SystemExit):
        main(["judge", "-m", "demo/judge", "--only-voted", "--only-unvoted"])


def _run_with_references(tmp_path: Path, models=DEMO[:2], *extra: str) -> str:
    refs = {"c1": "def reverse(xs): return xs[::-1]  # slicing", "c2": '{"name": "Ada", "email": "ada@example.org"}'}
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps({**c, **({"reference": refs[c["id"]]} if c["id"] in refs else {})}) + "\n"
                            for c in CASES))
    assert main(["run", str(path), *(x for m in models for x in ("-m", m)), "--quiet", "--seed", "2", *extra]) == 0
    with Store.open(tmp_path / "lineup.db") as store:
        return store.list_sessions(kind="run")[0].id


def test_reference_guided_judging_puts_each_cases_reference_in_the_prompt(tmp_path, capsys):
    sid = _run_with_references(tmp_path)
    with TestServer() as srv:
        judge = PairwiseJudge(lambda q, a, b: "B")
        srv.respond(judge)
        config = _config(tmp_path, srv)
        assert main(["judge", "-m", "judge", "--config", str(config), "--reference"]) == 0
        requests = list(srv.requests)
    err = capsys.readouterr().err
    assert "left out: 1 (case, pair)s whose case has no reference answer" in err     # c3 has none
    assert len(requests) == 4                                                          # c1, c2 x both orders
    questions = {q for q, _, _ in judge.seen}
    assert questions == {CASES[0]["prompt"], CASES[1]["prompt"]}                       # read as MT-Bench reads it
    for rec in requests:
        system, user = request_texts(rec)
        assert "reference answer" in system
        ref = "xs[::-1]" if "reverses a list" in user else '"email": "ada@example.org"'
        assert "[The Start of Reference Answer]\n" in user and ref in user
        assert user.index("[The Start of Reference Answer]") < user.index("[The Start of Assistant A's Answer]")
        for name in ("demo/", "concise", "thorough"):
            assert name not in system + user
    votes = _judge_votes(tmp_path, sid)
    assert len(votes) == 4 and {v.judge_prompt_hash for v in votes} == {JudgePrompt(reference=True).hash}
    assert JudgePrompt(reference=True).hash != JudgePrompt().hash


def test_demo_judge_judges_against_the_reference_offline(tmp_path, capsys):
    sid = _run_with_references(tmp_path)
    assert main(["judge", "-m", "demo/judge", "--reference", "--no-swap"]) == 0
    votes = _judge_votes(tmp_path, sid)
    assert len(votes) == 2
    assert all("of the reference answer's" in (v.judge_reason or "") for v in votes)
    assert main(["judge", "-m", "demo/judge", "--no-swap"]) == 0                 # without it: another prompt
    plain = [v for v in _judge_votes(tmp_path, sid) if v.judge_prompt_hash == JudgePrompt().hash]
    assert len(plain) == 3 and not any("reference" in (v.judge_reason or "") for v in plain)


def test_a_judge_that_sends_keepalives_forever_times_out(tmp_path, monkeypatch, capsys):
    from core.answering import judge as judge_module

    monkeypatch.setattr(judge_module, "DEFAULT_TIMEOUT_S", 1.0)
    sid = _run_set(tmp_path, DEMO[:2])
    with TestServer() as srv:
        srv.script(Reply(text="thinking", fault="keepalive_stall", fault_after=1, delay=0.1))
        config = _config(tmp_path, srv, read_timeout=30)
        assert main(["judge", "-m", "judge", "--config", str(config), "--limit", "1", "--no-swap"]) == 1
    assert "judge timed out after 1 s" in capsys.readouterr().err
    assert _judge_votes(tmp_path, sid) == []


def test_in_a_terminal_the_progress_counter_rewrites_its_line(tmp_path, capsys, monkeypatch):
    """The counter was printed through Rich with a leading "\\r", which Rich
    strips as a control character: a terminal showed "1/162/163/16...". Each
    count now starts at the line's beginning, and a newline ends them."""
    _run_set(tmp_path)
    capsys.readouterr()
    monkeypatch.setenv("TTY_COMPATIBLE", "1")       # stderr counts as a terminal
    assert main(["judge", "-m", "demo/judge"]) == 0
    err = capsys.readouterr().err
    counts = re.findall(r"\r(?:\x1b\[[0-9;]*[A-Za-z])*(\d+)/18", err)
    assert counts and counts[-1] == "18" and [int(c) for c in counts] == sorted(int(c) for c in counts), repr(err)
    assert not re.search(r"\d+/18\d+/18", err), repr(err)
    assert "18/18\n" in err.replace("\x1b[K", "")
