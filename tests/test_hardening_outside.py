"""Bytes from outside, family 5 of issue 24: too many models for the labels,
a CSV byte that is not UTF-8, and answers that try to steer the judge."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.logs import LogError, read_logs
from lineup.cli import main

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------- labels

def _nine_models(path: Path) -> Path:
    path.write_text("".join(f'[models.m{i}]\nprovider = "openai"\nmodel = "x"\nbase_url = "http://127.0.0.1:9/v1"\n'
                            for i in range(1, 10)))
    return path


@pytest.mark.parametrize("command, named", [("run", True), ("run", False), ("load", False)])
def test_more_models_than_labels_is_a_usage_error_not_a_traceback(tmp_path, command, named):
    """Nine `-m` on `run` (or nine configured models and none named) raised
    IndexError from the labels A-H; now exit 2 saying the limit, nothing recorded."""
    config = _nine_models(tmp_path / "config.toml")
    set_path = tmp_path / "set.jsonl"
    set_path.write_text('{"id": "c0", "category": "k", "prompt": "p"}\n')
    env = {**os.environ, "LINEUP_DB": str(tmp_path / "run.db"), "LINEUP_CONFIG": str(config),
           "OPENAI_API_KEY": "sk-test", "PYTHONPATH": str(REPO)}
    models = [arg for i in range(1, 10) for arg in ("-m", f"m{i}")] if named else []
    done = subprocess.run([sys.executable, "-m", "lineup", command, str(set_path), *models, "--quiet"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "at most 8 models side by side (labels A to H), not 9" in done.stderr


def test_labels_come_from_one_owner_with_one_limit():
    """Every place that makes labels (sessions, runs, load profiles, synthetic
    records, the answer comparison) takes them from `core.votes.labels_for`."""
    from core.answer_diff import compare
    from core.synthetic import synthetic_session
    from core.votes import labels_for

    assert labels_for(3) == "ABC"
    with pytest.raises(ValueError, match="at most 8 models"):
        labels_for(9)
    with pytest.raises(ValueError, match="at most 8 models"):
        synthetic_session(turns=1, contestants=9, blind=True, votes=False)
    with pytest.raises(ValueError, match="at most 8 models"):
        compare([f"answer {i}" for i in range(9)])


# ---------------------------------------------------------------------- CSV

@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_a_csv_byte_that_is_not_utf8_is_named_by_file_and_line(tmp_path, ending):
    """It said "near byte 29 of a read block"; now FILE:LINE and the byte of that line."""
    path = tmp_path / "logs.csv"
    rows = ["prompt,channel", "first question,web", '"a prompt over', 'two lines",app', "caf\xe9 ordering,web"]
    path.write_bytes(ending.join(rows).encode("utf-8").replace("\xe9".encode(), b"\xe9") + ending.encode())
    with pytest.raises(LogError) as err:
        read_logs(path, "channel")
    assert str(err.value) == f"{path}:5: not UTF-8 text (byte 4 of the line)"


def test_a_csv_with_a_bom_and_good_bytes_still_reads(tmp_path):
    path = tmp_path / "logs.csv"
    path.write_bytes(b"\xef\xbb\xbfprompt,channel\r\n\"caf\xc3\xa9\r\nau lait\",web\r\nsecond,app\r\n")
    logs = read_logs(path, "channel")
    assert [r.stratum for r in logs.records] == ["web", "app"]
    assert logs.prompt_field == "prompt"


def test_lineup_sample_reports_the_line_of_a_bad_byte(tmp_path, capsys):
    path = tmp_path / "logs.csv"
    path.write_bytes(b"prompt\nfine\n" + b"x" * 28 + b"\xff\n")
    assert main(["sample", str(path), "--by", "length", "-n", "1", "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3: not UTF-8 text (byte 29 of the line)" in err
    assert "read block" not in err
