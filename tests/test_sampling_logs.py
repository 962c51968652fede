"""`lineup sample` on the logs teams have: a logs.db and a JSON export written
by the real `llm` CLI (0.36, run against the loopback server), chat request
logs (OpenAI, Anthropic) with system prompts, earlier turns and images,
CSV/TSV and JSON arrays (checked-in samples in tests/data/logs/),
template-aware de-duplication, the skipped-records summary and derived strata."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from core.ground.errors import UsageError
from core.exchange.language import detect_language
from core.exchange.log_records import (
    SKIP_ATTACHMENT,
    SKIP_EARLIER_IMAGE,
    SKIP_EMPTY,
    SKIP_NON_TEXT,
    SKIP_SHAPE,
    SKIP_TOO_LONG,
    SKIP_TOOLS,
)
from core.exchange.logs import read_logs
from core.answering.runner import case_turn_texts
from core.answering.sampleset import load_sample_set
from core.exchange.sampling import dedupe, sample_records, template_text, to_cases, write_set
from lineup.commands import sample_cmd
from tests.llm_logs import CHART_PNG, NOTES, PIXEL_PNG, png

DATA = Path(__file__).parent / "data" / "logs"


def run_sample(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    sample_cmd.configure(parser)
    return sample_cmd.run(parser.parse_args(list(argv)))


def usage_error(*argv: str) -> str:
    with pytest.raises(UsageError) as err:
        run_sample(*argv)
    return str(err.value)


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")    # the summary's lines unwrapped, so they can be read whole


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# ---------------------------------------------------------------- the real llm CLI


@pytest.fixture(scope="module")
def llm_logs(tmp_path_factory):
    pytest.importorskip("llm", reason="the llm CLI is not installed (pip install -e '.[test]' installs it)")
    from tests.llm_logs import write_llm_logs

    return write_llm_logs(tmp_path_factory.mktemp("llm"))


def copy_db(llm_logs, tmp_path: Path) -> Path:
    db = tmp_path / "logs.db"
    shutil.copy(llm_logs.db, db)
    return db


@pytest.mark.slow
def test_llm_036_logs_db_is_read_from_its_turns(llm_logs):
    con = sqlite3.connect(llm_logs.db)
    assert con.execute("SELECT count(*) FROM responses").fetchone() == (0,)   # the old table stays empty
    assert con.execute("SELECT count(*) FROM turns").fetchone() == (11,)
    con.close()
    logs = read_logs(llm_logs.db, "model")
    assert logs.kind == "sqlite" and "11 turn(s) (llm 0.36 layout)" in logs.detail
    assert logs.skipped_total == 0 and len(logs.records) == 11
    assert Counter(r.stratum for r in logs.records) == {"loop-a": 6, "loop-b": 5}
    by_prompt = {r.prompt: r for r in logs.records}
    assert by_prompt["Plan my week of site visits"].system == "You are terse."
    follow = by_prompt["Now move Tuesday to Friday"]
    assert follow.system == "You are terse."
    assert follow.history == (("user", "Plan my week of site visits"), ("assistant", "An answer from the loopback server."))
    # a fragment (`llm -f notes.txt`) is part of the prompt as the model saw it
    assert by_prompt[f"{NOTES}\nWhen does the north gate open?"].history == ()


@pytest.mark.slow
def test_llm_images_inline_kept_remote_noted(llm_logs, tmp_path):
    logs = read_logs(llm_logs.db, "model")
    by_prompt = {r.prompt: r for r in logs.records}
    chart = by_prompt["Describe this chart in one sentence"]          # -a FILE: only its path is logged
    assert [img.data for img in chart.images] == [CHART_PNG]
    pixel = by_prompt["What colour is this pixel?"]                    # -a -: the bytes are in the db
    assert [img.data for img in pixel.images] == [PIXEL_PNG]
    remote = by_prompt["Summarise the remote chart"]
    assert remote.images == () and remote.image_urls == ("https://images.example.com/q3-sales.png",)

    out = tmp_path / "set.jsonl"
    assert run_sample(str(llm_logs.db), "--by", "model", "-n", "50", "-o", str(out)) == 0
    s = load_sample_set(out)
    cases = {case_turn_texts(c)[-1]: c for c in s.cases}
    chart_case = cases["Describe this chart in one sentence"]
    assert chart_case.images == (f"set.images/{hashlib.sha256(CHART_PNG).hexdigest()[:20]}.png",)
    assert (tmp_path / chart_case.images[0]).read_bytes() == CHART_PNG
    assert s.images_for(chart_case)[0].data == base64.b64encode(CHART_PNG).decode()
    assert "image-url:https://images.example.com/q3-sales.png" in cases["Summarise the remote chart"].tags
    multi = cases["Now move Tuesday to Friday"]
    assert multi.system == "You are terse." and [m.role for m in multi.messages or ()] == ["user", "assistant", "user"]
    assert multi.opening_messages()[0].content == "Plan my week of site visits"
    assert not list(tmp_path.glob("**/*.tmp"))


def test_llm_image_file_changed_or_gone_is_skipped_with_reason(llm_logs, tmp_path):
    original = llm_logs.image.read_bytes()
    try:
        llm_logs.image.write_bytes(png((1, 2, 3)))
        logs = read_logs(llm_logs.db, "model")
        assert logs.skipped == {SKIP_ATTACHMENT: 1}
        assert logs.first_skipped[SKIP_ATTACHMENT].endswith("(an image file changed since it was logged)")
        llm_logs.image.unlink()
        logs = read_logs(llm_logs.db, "model")
        assert logs.first_skipped[SKIP_ATTACHMENT].endswith("(an image file that is gone)")
    finally:
        llm_logs.image.write_bytes(original)


def test_llm_json_export_array_is_read_like_the_db(llm_logs):
    text = llm_logs.export.read_text()
    assert text.lstrip().startswith("[")                 # `llm logs -n 0 --json` writes one JSON array
    logs = read_logs(llm_logs.export, "model")
    assert logs.kind == "json" and logs.prompt_field == "prompt"
    db = read_logs(llm_logs.db, "model")
    # the export has the conversation history too, rebuilt from conversation_id
    assert {(r.prompt, r.history, r.system, r.stratum) for r in logs.records} <= \
        {(r.prompt, r.history, r.system, r.stratum) for r in db.records}
    # the export says the piped image had bytes but leaves them out: skipped, saying so
    assert logs.skipped == {SKIP_ATTACHMENT: 1}
    first = logs.first_skipped[SKIP_ATTACHMENT]
    index = next(i for i, r in enumerate(json.loads(text)) if r["prompt"] == "What colour is this pixel?")
    assert first.startswith(f"{llm_logs.export}:[{index}]") and "sample the logs.db" in first
    assert {r.source for r in logs.records} >= {"[0]", "[1]"}


def test_llm_db_through_the_command_line(llm_logs, tmp_path, capsys):
    from lineup.cli import main

    out = tmp_path / "set.jsonl"
    assert main(["sample", str(llm_logs.db), "--by", "model", "-n", "4", "--template", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "llm logs.db: 11 turn(s) (llm 0.36 layout)" in printed
    # "plan number 3/4/5" are one template: two of them merged
    assert "merged 2 prompt(s) more than plain de-duplication" in printed
    assert "the commonest template covers 3 logged prompt(s)" in printed
    s = load_sample_set(out)
    assert Counter(c.category for c in s.cases) == {"loop-a": 2, "loop-b": 2}
    assert all(any(t.startswith("source:logs.db:turn=") for t in c.tags) for c in s.cases)


def test_upgraded_db_reads_legacy_rows_and_turns(llm_logs, tmp_path):
    """A logs.db upgraded from an older llm keeps its old rows in `responses`
    (in the real schema llm's migrations made) beside the new turns."""
    db = copy_db(llm_logs, tmp_path)
    con = sqlite3.connect(db)
    con.executemany("INSERT INTO conversations (id, name, model) VALUES (?, ?, ?)", [("c1", "old", "gpt-3.5")])
    con.executemany(
        "INSERT INTO responses (id, model, prompt, system, response, conversation_id, datetime_utc) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [("01h000000000000000000000a1", "gpt-3.5", "An old question about invoices", None, "old answer", "c1", "2024-01-01"),
         ("01h000000000000000000000a2", "gpt-3.5", "and a follow-up on it", "Be brief.", "second", "c1", "2024-01-02")])
    con.commit()
    con.close()
    logs = read_logs(db, "model")
    assert "11 turn(s) (llm 0.36 layout)" in logs.detail and "2 response(s) (legacy layout)" in logs.detail
    assert Counter(r.stratum for r in logs.records)["gpt-3.5"] == 2
    follow = next(r for r in logs.records if r.prompt == "and a follow-up on it")
    assert follow.history == (("user", "An old question about invoices"), ("assistant", "old answer"))
    assert follow.system == "Be brief." and follow.source.startswith("row")


def test_llm_db_with_no_prompts_says_both_tables_are_empty(tmp_path):
    pytest.importorskip("llm", reason="the llm CLI is not installed (pip install -e '.[test]' installs it)")
    import sqlite_utils
    from llm.migrations import migrate

    db = tmp_path / "logs.db"
    migrate(sqlite_utils.Database(db))       # the schema llm 0.36 makes, no rows
    msg = usage_error(str(db), "--by", "model", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert msg == f"{db}: no logged prompts: the turns table (llm 0.36) and the responses table are empty"


def test_llm_db_unknown_by_field_names_the_turn_fields(llm_logs, tmp_path):
    msg = usage_error(str(llm_logs.db), "--by", "team", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert "no record has the field 'team'" in msg and "model" in msg and "conversation_name" in msg
    assert "length, language" in msg


# ---------------------------------------------------------------- chat request logs


def test_openai_chat_requests_become_conversations():
    logs = read_logs(DATA / "openai_chat.jsonl", "team")
    assert logs.prompt_field == "request.messages"       # found inside the logged request body
    by_line = {r.source: r for r in logs.records}
    first = by_line["line1"]
    assert first.system == "You are the support assistant for Acme."
    assert first.history == (("user", "My invoice 1042 is wrong."), ("assistant", "Sorry to hear that. What looks wrong?"))
    assert first.prompt == "It charges me twice for March."
    image = by_line["line2"]                               # developer role = system; data: URL kept
    assert image.system == "Answer in one sentence." and image.prompt == "What does this error screen say?"
    assert [img.mime for img in image.images] == ["image/png"]
    assert by_line["line3"].image_urls == ("https://cdn.example.com/logo.png",)
    merged = by_line["line6"]                              # two user messages joined; the logged answer dropped
    assert merged.history == () and merged.prompt == "Here is my stack trace:\n\nKeyError: 'user_id' in handlers.py line 88"
    assert logs.skipped == {SKIP_TOOLS: 1, SKIP_NON_TEXT: 1, SKIP_ATTACHMENT: 1}
    assert logs.first_skipped[SKIP_TOOLS] == f"{DATA / 'openai_chat.jsonl'}:4"
    assert logs.first_skipped[SKIP_ATTACHMENT] == f"{DATA / 'openai_chat.jsonl'}:7 (audio)"


def test_anthropic_requests_with_top_level_system():
    logs = read_logs(DATA / "anthropic_messages.jsonl", "product")
    by_id = {r.source: r for r in logs.records}
    assert by_id["line1"].system == "You write release notes."       # a list of text blocks
    vision = by_id["line2"]
    assert vision.system == "Be precise." and vision.prompt == "Which colour fills this image?"
    assert len(vision.images) == 1 and vision.images[0].data.startswith(b"\x89PNG")
    german = by_id["line5"]
    assert german.history[1] == ("assistant", "Das Treffen wurde auf Freitag verschoben.")
    assert logs.skipped == {SKIP_ATTACHMENT: 1, SKIP_TOOLS: 1}
    assert logs.first_skipped[SKIP_ATTACHMENT].endswith(":3 (a file)")


def test_chat_logs_write_a_valid_multi_turn_set_with_images(tmp_path, capsys):
    out = tmp_path / "chat.jsonl"
    assert run_sample(str(DATA / "anthropic_messages.jsonl"), "--by", "product", "-n", "10", "-o", str(out)) == 0
    s = load_sample_set(out)
    vision = next(c for c in s.cases if c.category == "vision")
    assert vision.prompt == "Which colour fills this image?" and vision.system == "Be precise."
    assert len(vision.images) == 1 and (tmp_path / vision.images[0]).read_bytes().startswith(b"\x89PNG")
    german = next(c for c in s.cases if c.system == "Reply in German.")
    assert [m.content for m in german.messages or ()] == [
        "Translate: the meeting moved to Friday.", "Das Treffen wurde auf Freitag verschoben.",
        "And: the meeting is cancelled."]
    printed = capsys.readouterr().out
    assert "1 case(s) carry earlier turns (written as messages)" in printed
    assert f"1 image(s) to {tmp_path / 'chat.images'}" in printed
    assert "skipped 2 record(s):" in printed
    assert f"1 {SKIP_TOOLS} (first at {DATA / 'anthropic_messages.jsonl'}:4)" in printed


@pytest.mark.parametrize("messages, reason", [
    ([{"role": "assistant", "content": "Hi! How can I help?"}, {"role": "user", "content": "Reset my password"}],
     SKIP_SHAPE),
    ([{"role": "user", "content": "a"}, {"role": "system", "content": "late"}, {"role": "user", "content": "b"}],
     SKIP_SHAPE),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                    + base64.b64encode(png((9, 9, 9))).decode()}}, {"type": "text", "text": "this"}]},
      {"role": "assistant", "content": "a grey square"}, {"role": "user", "content": "brighter?"}], SKIP_EARLIER_IMAGE),
    ([{"role": "user", "content": [{"type": "text", "text": "what is it"},
                                   {"type": "image_url", "image_url": {"url": "data:image/png;base64,bm90IGFuIGltYWdl"}}]}],
     SKIP_ATTACHMENT),
    ([{"role": "system", "content": "only a system prompt"}], SKIP_EMPTY),
    ([{"role": "user", "content": ""}], SKIP_EMPTY),
])
def test_conversations_a_case_cannot_carry_are_skipped(tmp_path, messages, reason):
    path = write_jsonl(tmp_path / "logs.jsonl", [{"cat": "x", "messages": [{"role": "user", "content": "fine"}]},
                                                 {"cat": "x", "messages": messages}])
    logs = read_logs(path, "cat")
    assert [r.prompt for r in logs.records] == ["fine"]
    assert logs.skipped == {reason: 1} and logs.first_skipped[reason].startswith(f"{path}:2")


@pytest.mark.parametrize("record, error", [
    ({"messages": [{"content": "no role"}]}, "messages[0]: no \"role\""),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role: unknown role 'robot'"),
    ({"messages": [{"role": "user", "content": 7}]}, "messages[0].content: expected text or a list of parts, got int"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]}, "messages[0].content[0].text: expected text"),
    ({"messages": [{"role": "user", "content": "x"}], "system": 5}, "system: expected text, got int"),
    ({"messages": ["just a string", {"role": "user", "content": "x"}]}, "messages: expected text or a list of chat messages"),
])
def test_malformed_chat_records_name_file_line_and_field(tmp_path, record, error):
    path = write_jsonl(tmp_path / "logs.jsonl", [{"cat": "a", "messages": [{"role": "user", "content": "ok"}]},
                                                 dict(record, cat="a")])
    msg = usage_error(str(path), "--by", "cat", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert msg == f"{path}:2: {error}" or msg.startswith(f"{path}:2: {error}")
    assert not (tmp_path / "o.jsonl").exists() and not list(tmp_path.glob("*.tmp"))


# ---------------------------------------------------------------- JSON arrays, CSV, TSV


def test_json_array_of_records_and_its_errors(tmp_path):
    logs = read_logs(DATA / "records.json", "topic")
    assert logs.kind == "json" and [r.source for r in logs.records] == ["[0]", "[1]", "[2]"]
    bad = tmp_path / "logs.json"
    bad.write_text('[{"topic": "a", "prompt": "ok"},\n "a string"]\n')
    assert usage_error(str(bad), "--by", "topic", "-n", "1", "-o", str(tmp_path / "o.jsonl")) == \
        f"{bad}:[1]: a log record must be a JSON object, not str"
    bad.write_text('[{"topic": "a", "prompt": "ok"},\n {"topic": "b", "prompt": 3}]\n')
    assert usage_error(str(bad), "--by", "topic", "-n", "1", "-o", str(tmp_path / "o.jsonl")) == \
        f"{bad}:[1]: prompt: expected text, got int"
    bad.write_text('[{"topic": "a", "prompt": "ok"},\n {"topic": "b", "prompt": }]\n')
    assert usage_error(str(bad), "--by", "topic", "-n", "1", "-o", str(tmp_path / "o.jsonl")).startswith(
        f"{bad}:2: invalid JSON")
    bad.write_text('{"topic": "a",\n "prompt": "a pretty-printed object is not JSON Lines"}\n')
    assert usage_error(str(bad), "--by", "topic", "-n", "1", "-o", str(tmp_path / "o.jsonl")).startswith(
        f"{bad}:1: invalid JSON")


def test_json_array_nested_too_deeply_is_refused(tmp_path):
    path = tmp_path / "logs.json"
    path.write_text('[{"cat": "a", "prompt": "ok", "x": ' + "[" * 120 + "]" * 120 + "}]")
    assert "nested deeper than 100 levels" in usage_error(str(path), "--by", "cat", "-n", "1", "-o",
                                                          str(tmp_path / "o.jsonl"))


def test_csv_tsv_samples(tmp_path):
    logs = read_logs(DATA / "prompts.csv", "channel")
    assert logs.kind == "csv" and logs.prompt_field == "question"
    assert [r.source for r in logs.records] == ["line2", "line3", "line4", "line7"]   # a record's first line
    assert logs.records[1].system == "You are a helpful support agent."
    assert logs.records[3].history == (("user", "Refund order 7781 please"), ("assistant", "Which item?"))
    assert logs.skipped == {SKIP_EMPTY: 1} and logs.first_skipped[SKIP_EMPTY] == f"{DATA / 'prompts.csv'}:6"
    tsv = read_logs(DATA / "prompts.tsv", "kind")
    assert tsv.kind == "tsv" and Counter(r.stratum for r in tsv.records) == {"bug": 2, "idea": 1}
    out = tmp_path / "set.jsonl"
    assert run_sample(str(DATA / "prompts.csv"), "--by", "channel", "-n", "4", "-o", str(out)) == 0
    assert len(load_sample_set(out).cases) == 4


# ---------------------------------------------------------------- template-aware de-duplication


def test_template_text_placeholders():
    assert template_text("What is plan number 3?") == template_text("What is plan number 14?")
    assert template_text("mail ann@example.com on 2024-03-05 at 10:30 about ORD-99812") == \
        template_text("mail bob.smith@corp.example.org on 2025-11-20 at 9:05 about ORD-12")
    assert template_text("due March 5, 2024, see https://x.example/a?b=1") == \
        template_text("due 7 June 2023, see https://y.example/q")
    assert template_text("ticket 3f2a9c1e-8b7d-4c6e-9f0a-1b2c3d4e5f60") == template_text("ticket a1b2c3")
    assert template_text("Tell Alice the report is late") != template_text("Tell Bob the report is late")
    assert template_text("Tell Alice the report is late", names=True) == \
        template_text("Tell Bob the report is late", names=True)
    # a sentence's first word is not a name
    assert template_text("Reset the router. Then call me", names=True) != \
        template_text("Reset the router. Later call me", names=True)


def test_template_mode_merges_what_plain_dedup_keeps():
    prompts = [f"What is included in support plan number {n} for the Basic tier?" for n in range(1, 21)]
    prompts += [f"Send the invoice for order {n} to {u}@example.com" for n, u in ((17, "ann"), (4096, "bob"))]
    prompts += ["How do I rotate my API key?", "How do I export a report as PDF?"]
    plain = dedupe(prompts)
    assert len(plain.kept) == 24 and plain.template is None
    templated = dedupe(prompts, template="values")
    assert templated.kept == [0, 20, 22, 23]
    assert templated.template_merged == 20 and templated.largest_template == 20
    assert templated.exact == 20


def test_template_mode_keeps_conversations_with_different_images_apart():
    prompts = ["describe this image 1", "describe this image 2", "describe this image 3"]
    suffixes = ["image" + "ab" * 32, "image" + "cd" * 32, "image" + "ab" * 32]
    r = dedupe(prompts, template="values", suffixes=suffixes)
    assert r.kept == [0, 1]


def test_template_flag_on_the_command_line(tmp_path, capsys):
    records = [{"team": "t", "prompt": f"Reset the password for user {n} please"} for n in range(30)]
    records += [{"team": "t", "prompt": "What is our refund policy?"}]
    path = write_jsonl(tmp_path / "logs.jsonl", records)
    out = tmp_path / "set.jsonl"
    assert run_sample(str(path), "--by", "team", "-n", "10", "--template", "-o", str(out)) == 0
    printed = capsys.readouterr().out
    assert "merged 29 prompt(s) more than plain de-duplication" in printed
    assert len(load_sample_set(out).cases) == 2
    assert run_sample(str(path), "--by", "team", "-n", "10", "-o", str(out)) == 0
    assert len(load_sample_set(out).cases) == 10 and "template-aware" not in capsys.readouterr().out


# ---------------------------------------------------------------- skipped records, derived strata


def test_summary_lists_skips_by_reason(tmp_path, capsys):
    path = write_jsonl(tmp_path / "logs.jsonl", [
        {"cat": "a", "prompt": "short and fine"},
        {"cat": "a", "prompt": ""},
        {"cat": "a", "prompt": "x" * 80},
        {"cat": "a", "prompt": None},
        {"cat": "a", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://e.x/i.png"}}]}]},
    ])
    out = tmp_path / "set.jsonl"
    assert run_sample(str(path), "--by", "cat", "-n", "5", "--prompt-field", "prompt", "--max-chars", "50",
                      "-o", str(out)) == 0
    printed = capsys.readouterr().out
    assert "skipped 4 record(s):" in printed
    assert f"  3 {SKIP_EMPTY} (first at {path}:2)" in printed
    assert f"  1 {SKIP_TOO_LONG} (first at {path}:3 (80 characters, over --max-chars 50))" in printed
    assert len(read_logs(path, "cat", max_chars=0).records) == 2     # 0: no limit
    images_only = write_jsonl(tmp_path / "chat.jsonl", [
        {"cat": "a", "messages": [{"role": "user", "content": "fine"}]},
        {"cat": "a", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://e.x/i.png"}}]}]}])
    logs = read_logs(images_only, "cat")
    assert logs.skipped == {SKIP_NON_TEXT: 1} and logs.first_skipped[SKIP_NON_TEXT] == f"{images_only}:2"


def test_nothing_left_to_sample_says_why(tmp_path):
    path = write_jsonl(tmp_path / "logs.jsonl", [{"cat": "a", "prompt": " "}, {"cat": "a", "prompt": ""}])
    msg = usage_error(str(path), "--by", "cat", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert msg == f"{path}: no prompts to sample (skipped: 2 {SKIP_EMPTY} (first at {path}:1))"


def test_by_length_buckets_when_the_logs_have_no_such_field(tmp_path, capsys):
    records = [{"prompt": "hi there " + str(i)} for i in range(6)] + \
              [{"prompt": "a medium prompt " * 10 + str(i)} for i in range(3)] + [{"prompt": "long " * 500}]
    path = write_jsonl(tmp_path / "logs.jsonl", records)
    logs = read_logs(path, "length")
    assert logs.derived
    assert Counter(r.stratum for r in logs.records) == {
        "1 short (<100 chars)": 6, "2 medium (100-499 chars)": 3, "4 very long (2000-9999 chars)": 1}
    out = tmp_path / "set.jsonl"
    assert run_sample(str(path), "--by", "length", "-n", "5", "-o", str(out)) == 0
    assert "strata by length (derived from the text)" in capsys.readouterr().out
    assert "length=1 short (<100 chars)" in load_sample_set(out).cases[0].tags
    # a field of that name wins over the derived stratum
    path2 = write_jsonl(tmp_path / "logs2.jsonl", [{"prompt": "p1", "length": "long"}, {"prompt": "p2"}])
    logs = read_logs(path2, "length")
    assert not logs.derived and [r.stratum for r in logs.records] == ["long", "(none)"]


def test_by_language(tmp_path):
    path = write_jsonl(tmp_path / "logs.jsonl", [
        {"prompt": "How do I change the password of my account?"},
        {"prompt": "¿Cómo puedo cambiar la contraseña de mi cuenta?"},
        {"prompt": "Wie kann ich das Passwort für mein Konto ändern?"},
        {"prompt": "アカウントのパスワードを変更するにはどうすればいいですか"},
        {"prompt": "ok"},
    ])
    logs = read_logs(path, "language")
    assert [r.stratum for r in logs.records] == ["en", "es", "de", "ja", "und"]
    csv_path = tmp_path / "logs.csv"
    csv_path.write_text("prompt\nWhat does this error mean for my order?\nQu'est-ce que cette erreur veut dire pour ma commande?\n")
    assert [r.stratum for r in read_logs(csv_path, "language").records] == ["en", "fr"]


@pytest.mark.parametrize("text, lang", [
    ("Come posso cambiare la password del mio account?", "it"),
    ("Como posso mudar a senha da minha conta? Você sabe?", "pt"),
    ("Hoe kan ik mijn wachtwoord wijzigen voor de app?", "nl"),
    ("如何更改我的密码", "zh"), ("비밀번호를 어떻게 변경하나요", "ko"), ("Как изменить пароль?", "ru"),
    ("Як змінити пароль і логін?", "uk"), ("كيف يمكنني تغيير كلمة المرور", "ar"),
    ("Explain what the word λόγος means in this sentence", "en"),
    ("SELECT * FROM t WHERE x = 1", "und"), ("", "und"),
])
def test_language_guesses(text, lang):
    assert detect_language(text) == lang


def test_unknown_by_field_offers_the_derived_strata(tmp_path):
    path = write_jsonl(tmp_path / "logs.jsonl", [{"prompt": "p", "team": "a"}])
    msg = usage_error(str(path), "--by", "teem", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert "no record has the field 'teem'" in msg and "team" in msg and "derived stratum: length, language" in msg


# ---------------------------------------------------------------- writing


def test_a_failed_write_leaves_no_images_and_no_tmp(tmp_path):
    logs = read_logs(DATA / "anthropic_messages.jsonl", "product")
    result = sample_records(logs, 10)
    out = tmp_path / "set.jsonl"
    output = to_cases(result, "set.images")
    assert len(output.images) == 1

    def refuse(_path: Path) -> None:
        raise RuntimeError("check failed")

    with pytest.raises(RuntimeError):
        write_set(output, out, check=refuse)
    assert list(tmp_path.iterdir()) == []
    write_set(output, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set.images", "set.jsonl"]


def test_errors_on_the_command_line_exit_2_without_traceback(tmp_path, capsys):
    from lineup.cli import main

    path = tmp_path / "logs.json"
    path.write_text('[{"cat": "a", "messages": [{"role": "user"}, {"content": "x"}]}]')
    assert main(["sample", str(path), "--by", "cat", "-n", "1", "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{path}:[0]: messages[1]: no \"role\"" in err and "Traceback" not in err
    assert not (tmp_path / "o.jsonl").exists()



def test_long_conversations_are_cut_without_reading_all_of_them(llm_logs, tmp_path):
    logs = read_logs(llm_logs.db, "model", max_chars=60)
    assert "Now move Tuesday to Friday" not in {r.prompt for r in logs.records}
    assert "Plan my week of site visits" in {r.prompt for r in logs.records}
    assert logs.skipped[SKIP_TOO_LONG] >= 1
    # the same in llm's JSON export shape: a conversation of 40 turns of ~100 characters
    turns = [{"id": f"t{i:03d}", "model": "m", "conversation_id": "c1", "datetime_utc": f"2025-01-01T00:{i:02d}",
              "prompt": f"question {i} " + "q" * 40, "response": "answer " + "a" * 40, "system": None}
             for i in range(40)]
    path = write_jsonl(tmp_path / "export.jsonl", turns[::-1])          # llm lists the newest first
    logs = read_logs(path, "model", max_chars=1000)
    kept = sorted(r.prompt.split()[1] for r in logs.records)
    assert sorted(kept, key=int) == [str(i) for i in range(10)]       # 10 turns of ~100 chars fit in 1000
    assert logs.skipped == {SKIP_TOO_LONG: 30}
    tenth = next(r for r in logs.records if r.prompt.startswith("question 9 "))
    assert len(tenth.history) == 18 and tenth.history[0][1].startswith("question 0 ")


def test_an_image_file_the_log_names_is_read_only_if_small_and_regular(llm_logs, tmp_path):
    original = llm_logs.image.read_bytes()
    try:
        llm_logs.image.unlink()
        llm_logs.image.mkdir()                       # not a file any more
        logs = read_logs(llm_logs.db, "model")
        assert logs.first_skipped[SKIP_ATTACHMENT].endswith("(an image file that is not read (is a directory, not a file))")
    finally:
        if llm_logs.image.is_dir():
            llm_logs.image.rmdir()
        llm_logs.image.write_bytes(original)


def test_an_image_in_the_db_over_5_mb_is_skipped_by_its_size(llm_logs, tmp_path):
    db = copy_db(llm_logs, tmp_path)
    con = sqlite3.connect(db)
    pixel_id = hashlib.sha256(PIXEL_PNG).hexdigest()
    assert con.execute("UPDATE attachments SET content = ? WHERE id = ?",
                       (PIXEL_PNG + bytes(6_000_000), pixel_id)).rowcount == 1
    con.commit()
    con.close()
    logs = read_logs(db, "model")
    assert logs.skipped == {SKIP_ATTACHMENT: 1}
    assert logs.first_skipped[SKIP_ATTACHMENT].endswith("(an image of 6.0 MB (a set carries at most 5 MB))")


def test_a_log_mixing_chat_and_plain_records_reads_each_by_its_own_prompt(tmp_path, capsys):
    """The prompt field was chosen from the first record for the whole file:
    on a log mixing chat requests (`messages`) and plain records (`prompt`),
    every record of the other kind was skipped as an empty prompt."""
    path = write_jsonl(tmp_path / "mixed.jsonl", [
        {"cat": "a", "messages": [{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "chat one"}]},
        {"cat": "a", "prompt": "plain one"},
        {"cat": "b", "messages": [{"role": "user", "content": "chat two"}]},
        {"cat": "b", "prompt": "plain two"},
        {"cat": "b", "prompt": ""},
    ])
    logs = read_logs(path, "cat")
    assert [r.prompt for r in logs.records] == ["chat one", "plain one", "chat two", "plain two"]
    assert logs.records[0].system == "Be brief." and logs.skipped == {SKIP_EMPTY: 1}
    assert logs.prompt_field == "messages or prompt"
    out = tmp_path / "set.jsonl"
    assert run_sample(str(path), "--by", "cat", "-n", "4", "-o", str(out)) == 0
    assert "prompt field messages or prompt" in capsys.readouterr().out
    assert len(load_sample_set(out).cases) == 4
