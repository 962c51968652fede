"""`lineup sample`: reading logs (JSONL, CSV, llm logs.db), de-duplication,
proportional allocation with one per stratum, determinism, and bad input."""

from __future__ import annotations

import argparse
import csv
import json
import random
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.ground.errors import UsageError
from core.exchange.logs import read_logs
from core.answering.sampleset import load_sample_set
from core.exchange.sampling import allocate, dedupe, sample_records
from lineup.commands import sample_cmd

TOPICS = ["invoice", "refund", "password", "shipping", "warranty", "discount", "address", "login", "export", "report"]
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def unique_prompt(rng: random.Random, i: int) -> str:
    """A prompt sharing few 3-word shingles with any other."""
    return f"question {i}: " + " ".join(rng.choice(WORDS) for _ in range(12)) + f" about my {rng.choice(TOPICS)}"


def make_records(sizes: dict[str, int], seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out, i = [], 0
    for team, n in sizes.items():
        for _ in range(n):
            out.append({"team": team, "prompt": unique_prompt(rng, i), "system": "be nice"})
            i += 1
    rng.shuffle(out)
    return out


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def run_sample(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    sample_cmd.configure(parser)
    return sample_cmd.run(parser.parse_args(list(argv)))


# ---------------------------------------------------------------- allocation


def test_allocate_proportional_largest_remainder():
    assert allocate({"a": 50, "b": 30, "c": 20}, 10) == {"a": 5, "b": 3, "c": 2}
    # quotas 4.6 / 3.3 / 2.1 -> floors 4/3/2, one left goes to the largest remainder (a)
    assert allocate({"a": 46, "b": 33, "c": 21}, 10) == {"a": 5, "b": 3, "c": 2}


def test_allocate_at_least_one_per_stratum():
    alloc = allocate({"big": 980, "small": 10, "tiny": 1}, 10)
    assert alloc == {"big": 8, "small": 1, "tiny": 1}


def test_allocate_too_few_for_strata_says_so():
    with pytest.raises(ValueError, match=r"smaller than the number of strata \(3\)"):
        allocate({"a": 5, "b": 5, "c": 5}, 2)


def test_allocate_more_than_available_takes_all():
    assert allocate({"a": 3, "b": 2}, 10) == {"a": 3, "b": 2}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=500), min_size=1, max_size=12), st.data())
def test_allocate_properties(sizes_list, data):
    sizes = {f"s{i}": n for i, n in enumerate(sizes_list)}
    total = sum(sizes_list)
    n = data.draw(st.integers(min_value=len(sizes), max_value=total + 5))
    alloc = allocate(sizes, n)
    assert sum(alloc.values()) == min(n, total)
    assert all(1 <= alloc[s] <= sizes[s] for s in sizes)
    quotas = {s: n * sizes[s] / total for s in sizes}
    if n < total and all(q >= 1 for q in quotas.values()):
        assert all(abs(alloc[s] - quotas[s]) < 1 for s in sizes)


# ---------------------------------------------------------------- de-duplication


def test_exact_duplicates_after_normalisation():
    prompts = ["How do I reset my password?", "how do i reset my password", "  HOW do I reset my   password?!", "Something else"]
    r = dedupe(prompts)
    assert r.kept == [0, 3]
    assert r.exact == 2 and r.near == 0


def test_near_duplicates_removed_distinct_kept():
    rng = random.Random(5)
    bases = [" ".join(rng.choice(WORDS) + str(rng.randint(0, 99)) for _ in range(40)) for _ in range(50)]
    prompts = []
    for b in bases:
        prompts.append(b)
        words = b.split()
        words[20] = "CHANGED"           # one word in 40: shingle Jaccard ~0.86
        prompts.append(" ".join(words))
    r = dedupe(prompts, threshold=0.8)
    assert r.kept == list(range(0, 100, 2))
    assert r.near == 50
    assert all(removed == kept + 1 for removed, kept in r.near_pairs)
    # exact-only mode keeps them
    assert len(dedupe(prompts, threshold=1.0).kept) == 100


def test_dedupe_keeps_short_distinct_prompts():
    prompts = ["hi", "hello", "translate cat", "translate dog", "a", "b"]
    assert dedupe(prompts).kept == list(range(6))


def test_dedupe_is_deterministic():
    rng = random.Random(1)
    prompts = [unique_prompt(rng, i) for i in range(3000)] * 2
    r1, r2 = dedupe(prompts), dedupe(prompts)
    assert r1.kept == r2.kept == list(range(3000))
    assert r1.exact == 3000


# ---------------------------------------------------------------- sampling


def test_sample_proportions_and_one_per_stratum(tmp_path):
    logs = write_jsonl(tmp_path / "logs.jsonl", make_records({"sales": 600, "support": 300, "eng": 97, "legal": 3}))
    result = sample_records(read_logs(logs, "team"), 50, seed=1)
    got = Counter(r.stratum for r in result.chosen)
    assert got == {"sales": 30, "support": 15, "eng": 4, "legal": 1}
    rows = {r.stratum: (r.logged, r.unique, r.sampled) for r in result.rows}
    assert rows["legal"] == (3, 3, 1)


def test_same_seed_same_file_different_seed_different_sample(tmp_path, capsys):
    logs = write_jsonl(tmp_path / "logs.jsonl", make_records({"a": 300, "b": 200}))
    out1, out2, out3 = tmp_path / "1.jsonl", tmp_path / "2.jsonl", tmp_path / "3.jsonl"
    assert run_sample(str(logs), "--by", "team", "-n", "20", "--seed", "7", "-o", str(out1)) == 0
    assert run_sample(str(logs), "--by", "team", "-n", "20", "--seed", "7", "-o", str(out2)) == 0
    assert run_sample(str(logs), "--by", "team", "-n", "20", "--seed", "8", "-o", str(out3)) == 0
    assert out1.read_bytes() == out2.read_bytes()
    assert out1.read_bytes() != out3.read_bytes()


def test_output_is_a_valid_sample_set(tmp_path, capsys):
    logs = write_jsonl(tmp_path / "logs.jsonl", make_records({"sales team": 40, "support/EU": 20}))
    out = tmp_path / "set.jsonl"
    assert run_sample(str(logs), "--by", "team", "-n", "6", "-o", str(out)) == 0
    s = load_sample_set(out)
    assert len(s.cases) == 6
    assert Counter(c.category for c in s.cases) == {"sales team": 4, "support/EU": 2}
    prompts = {r["prompt"] for r in map(json.loads, logs.read_text().splitlines())}
    for c in s.cases:
        assert c.prompt in prompts
        assert c.system == "be nice"
        assert "sampled" in c.tags and f"team={c.category}" in c.tags
    assert {c.id for c in s.cases} >= {"sales-team-001", "support-eu-001"}
    printed = capsys.readouterr().out
    for col in ("stratum", "logged", "unique", "sampled"):
        assert col in printed
    assert "sales team" in printed and "wrote 6 case(s)" in printed


def test_summary_shows_sizes_before_and_after_dedup(tmp_path, capsys):
    recs = make_records({"a": 10, "b": 10})
    dup = dict(recs[0])
    dup["prompt"] = dup["prompt"].upper() + "!!"
    logs = write_jsonl(tmp_path / "logs.jsonl", recs + [dup, dup])
    out = tmp_path / "set.jsonl"
    run_sample(str(logs), "--by", "team", "-n", "4", "-o", str(out))
    printed = capsys.readouterr().out
    line = next(ln for ln in printed.splitlines() if f" {dup['team']} " in ln)
    assert [x for x in line.replace("│", " ").split()][:4] == [dup["team"], "12", "10", "2"]
    assert "removed 2 exact and 0 near duplicate(s)" in printed


def test_fewer_unique_prompts_than_n_takes_all(tmp_path, capsys):
    logs = write_jsonl(tmp_path / "logs.jsonl", make_records({"a": 3, "b": 2}))
    out = tmp_path / "set.jsonl"
    run_sample(str(logs), "--by", "team", "-n", "50", "-o", str(out))
    assert len(load_sample_set(out).cases) == 5
    assert "took them all" in capsys.readouterr().out


# ---------------------------------------------------------------- input formats


def test_csv_input_with_auto_detected_prompt_column(tmp_path, capsys):
    path = tmp_path / "logs.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["when", "Question", "product"])
        rng = random.Random(2)
        for i in range(30):
            w.writerow([f"2024-01-{i % 28 + 1:02d}", unique_prompt(rng, i) + ', with "quotes"\nand a newline', ["app", "web"][i % 2]])
    logs = read_logs(path, "product")
    assert logs.kind == "csv" and logs.prompt_field == "Question"
    assert len(logs.records) == 30 and all("\n" in r.prompt for r in logs.records)
    out = tmp_path / "set.jsonl"
    assert run_sample(str(path), "--by", "product", "-n", "4", "-o", str(out)) == 0
    assert Counter(c.category for c in load_sample_set(out).cases) == {"app": 2, "web": 2}


def test_tsv_and_prompt_field_option(tmp_path):
    path = tmp_path / "logs.tsv"
    path.write_text("kind\tbody\tprompt\nx\tfirst body text here\tignored\ny\tsecond body text here\tignored\n")
    logs = read_logs(path, "kind", prompt_field="body")
    assert [r.prompt for r in logs.records] == ["first body text here", "second body text here"]


def test_jsonl_nested_by_field_and_chat_messages_prompt(tmp_path):
    path = write_jsonl(tmp_path / "logs.jsonl", [
        {"meta": {"region": "eu"}, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "first"},
                                                {"role": "assistant", "content": "a"}, {"role": "user", "content": "last question"}]},
        {"meta": {"region": "us"}, "messages": [{"role": "user", "content": [{"type": "text", "text": "parts prompt"}]}]},
        {"meta": {}, "messages": [{"role": "user", "content": "no region"}]},
    ])
    logs = read_logs(path, "meta.region")
    assert [(r.prompt, r.stratum) for r in logs.records] == [
        ("last question", "eu"), ("parts prompt", "us"), ("no region", "(none)")]


def test_records_without_prompt_are_skipped_and_reported(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    recs = make_records({"a": 5})
    recs.insert(2, {"team": "a", "prompt": "   "})
    logs = write_jsonl(tmp_path / "logs.jsonl", recs)
    out = tmp_path / "set.jsonl"
    run_sample(str(logs), "--by", "team", "-n", "3", "-o", str(out))
    printed = capsys.readouterr().out
    assert "skipped 1 record(s):" in printed
    assert f"  1 empty prompt (first at {logs}:3)" in printed


def make_llm_db(path: Path, rows: list[tuple[str, str, str | None]]) -> Path:
    """The shape of an `llm` CLI logs.db (responses table, a subset of its columns)."""
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);
        CREATE TABLE responses (id TEXT PRIMARY KEY, model TEXT, prompt TEXT, system TEXT, prompt_json TEXT,
            options_json TEXT, response TEXT, response_json TEXT, conversation_id TEXT REFERENCES conversations(id),
            duration_ms INTEGER, datetime_utc TEXT, input_tokens INTEGER, output_tokens INTEGER);
    """)
    conn.executemany("INSERT INTO responses (id, model, prompt, system, response) VALUES (?, ?, ?, ?, 'r')",
                     [(f"01J{i:05d}", m, p, s) for i, (m, p, s) in enumerate(rows)])
    conn.commit()
    conn.close()
    return path


def test_llm_logs_db_grouped_by_model(tmp_path, capsys):
    rng = random.Random(3)
    rows = [("gpt-4o-mini", unique_prompt(rng, i), None) for i in range(40)]
    rows += [("claude-3-haiku", unique_prompt(rng, 100 + i), "sys prompt") for i in range(20)]
    rows += [("claude-3-haiku", rows[0][1], None)]  # the same prompt sent to another model
    db = make_llm_db(tmp_path / "logs.db", rows)
    logs = read_logs(db, "model")
    assert logs.kind == "sqlite" and logs.prompt_field == "prompt" and len(logs.records) == 61
    out = tmp_path / "set.jsonl"
    assert run_sample(str(db), "--by", "model", "-n", "6", "--seed", "1", "-o", str(out)) == 0
    s = load_sample_set(out)
    assert Counter(c.category for c in s.cases) == {"gpt-4o-mini": 4, "claude-3-haiku": 2}
    assert all(c.system == "sys prompt" for c in s.cases if c.category == "claude-3-haiku")
    assert "removed 1 exact" in capsys.readouterr().out


# ---------------------------------------------------------------- bad input


def usage_error(*argv: str) -> str:
    with pytest.raises(UsageError) as err:
        run_sample(*argv)
    return str(err.value)


def test_invalid_json_line_names_file_and_line(tmp_path):
    path = tmp_path / "logs.jsonl"
    path.write_text('{"team": "a", "prompt": "ok"}\n{"team": "b", "prompt": \n')
    msg = usage_error(str(path), "--by", "team", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert msg.startswith(f"{path}:2: invalid JSON")


def test_non_text_prompt_names_line(tmp_path):
    path = write_jsonl(tmp_path / "logs.jsonl", [{"team": "a", "prompt": "ok"}, {"team": "a", "prompt": 42}])
    msg = usage_error(str(path), "--by", "team", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert msg == f"{path}:2: prompt: expected text, got int"


def test_unknown_by_field(tmp_path):
    path = write_jsonl(tmp_path / "logs.jsonl", make_records({"a": 3}))
    msg = usage_error(str(path), "--by", "teem", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert "'teem'" in msg and "team" in msg
    csv_path = tmp_path / "logs.csv"
    csv_path.write_text("prompt,team\nhello,a\n")
    msg = usage_error(str(csv_path), "--by", "teem", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert msg.startswith(f"{csv_path}:1: no --by field 'teem'") and "prompt, team" in msg


def test_no_prompt_column_found(tmp_path):
    path = tmp_path / "logs.csv"
    path.write_text("body,team\nhello,a\n")
    msg = usage_error(str(path), "--by", "team", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert "no prompt field found" in msg and "--prompt-field" in msg


def test_csv_row_with_too_many_fields(tmp_path):
    path = tmp_path / "logs.csv"
    path.write_text("prompt,team\nhello,a\nbad,b,extra\n")
    msg = usage_error(str(path), "--by", "team", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert msg.startswith(f"{path}:3: 3 fields")


def test_n_smaller_than_strata(tmp_path):
    path = write_jsonl(tmp_path / "logs.jsonl", make_records({"a": 5, "b": 5, "c": 5}))
    msg = usage_error(str(path), "--by", "team", "-n", "2", "-o", str(tmp_path / "o.jsonl"))
    assert "smaller than the number of strata (3)" in msg
    assert not (tmp_path / "o.jsonl").exists()


def test_sqlite_without_responses_table(tmp_path):
    db = tmp_path / "other.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    msg = usage_error(str(db), "--by", "model", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert "no 'responses' table" in msg
    llm_db = make_llm_db(tmp_path / "logs.db", [("m", "p", None)])
    msg = usage_error(str(llm_db), "--by", "provider", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert "no --by field 'provider'" in msg and "model" in msg


def test_missing_file_and_bad_threshold(tmp_path):
    msg = usage_error(str(tmp_path / "nope.jsonl"), "--by", "x", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    assert msg == f"{tmp_path / 'nope.jsonl'}: no such file"
    path = write_jsonl(tmp_path / "logs.jsonl", make_records({"a": 3}))
    assert "--threshold" in usage_error(str(path), "--by", "team", "-n", "1", "--threshold", "0", "-o", str(tmp_path / "o.jsonl"))


def test_cli_exit_code_2_and_message_on_stderr(tmp_path, capsys):
    from lineup.cli import main

    path = tmp_path / "logs.jsonl"
    path.write_text("not json\n")
    assert main(["sample", str(path), "--by", "team", "-n", "1", "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: invalid JSON" in err


def test_control_characters_in_strata_do_not_reach_the_terminal(tmp_path, capsys):
    recs = make_records({"a": 3})
    for r in recs:
        r["team"] = "evil\x1b[2Jteam"
    path = write_jsonl(tmp_path / "logs.jsonl", recs)
    run_sample(str(path), "--by", "team", "-n", "1", "-o", str(tmp_path / "o.jsonl"))
    out = capsys.readouterr().out
    assert "\x1b" not in out and "evil" in out
