"""`lineup sessions` draws only what is read: on a terminal the rows that fit
its height, piped the newest PIPED_ROWS, then a line saying how many are not
shown; `--limit` chooses the length and `--json` lists every session.

The terminal case runs the command on a real pseudo-terminal of a given size."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lineup.commands.sessions_cmd import PIPED_ROWS, SPARE_LINES
from store import Store
from tests.cli_support import ROOT, on_terminal, piped
from tests.synthetic import synthetic_session, write_synthetic

ID = re.compile(r"^[0-9A-Z]{8,26}\b")


@pytest.fixture(scope="module")
def many_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("sessions") / "many.db"
    with Store.open(db) as store:
        for i in range(PIPED_ROWS + 20):
            write_synthetic(store, *synthetic_session(turns=1, seed=i, blind=i % 3 == 0, created=1.7e9 + i * 60))
    return db


def all_ids(db: Path) -> list[str]:
    return [row["id"] for row in json.loads(piped(["sessions", "--json", "--db", str(db)]))]


def test_json_lists_every_session(many_db):
    assert len(all_ids(many_db)) == PIPED_ROWS + 20


@pytest.mark.parametrize("rows,cols", [(24, 80), (40, 160)])
def test_on_a_terminal_the_table_lists_what_fits_and_says_how_many_more(many_db, rows, cols):
    text = on_terminal(["sessions", "--db", str(many_db)], rows, cols)
    lines = text.rstrip("\n").split("\n")
    listed = [ID.match(ln).group(0) for ln in lines if ID.match(ln)]
    fit = rows - SPARE_LINES
    every = all_ids(many_db)
    if cols < 120:   # narrow: each id as the shortest prefix naming it alone, so the other columns can be read
        assert [len(i) for i in listed] != [26] * fit
        assert all(sum(other.startswith(short) for other in every) == 1 for short in listed)
        assert "chat…" not in text and "hidden" in text
        listed = [next(i for i in every if i.startswith(short)) for short in listed]
    assert listed == every[:fit]                                  # the newest, in order, as many as fit
    assert len(lines) <= rows - 1                                 # the prompt still fits below
    assert all(len(ln) <= cols for ln in lines)                   # one line a row: nothing wrapped
    assert lines[-1].startswith(f"... {PIPED_ROWS + 20 - fit} more sessions not shown")


def test_piped_the_table_lists_the_newest_hundred_and_says_how_many_more(many_db):
    lines = piped(["sessions", "--db", str(many_db)]).rstrip("\n").split("\n")
    assert [ln[:26] for ln in lines if ID.match(ln)] == all_ids(many_db)[:PIPED_ROWS]
    assert lines[-1].startswith("... 20 more sessions not shown")


def test_limit_chooses_the_length_and_zero_means_all(many_db):
    ids = all_ids(many_db)
    five = piped(["sessions", "--limit", "5", "--db", str(many_db)])
    assert [ln[:26] for ln in five.split("\n") if ID.match(ln)] == ids[:5] and "not shown" not in five
    every = piped(["sessions", "--limit", "0", "--db", str(many_db)])
    assert [ln[:26] for ln in every.split("\n") if ID.match(ln)] == ids and "not shown" not in every
    on_tty = on_terminal(["sessions", "--limit", "0", "--db", str(many_db)], 24, 80)
    assert sum(1 for ln in on_tty.split("\n") if ID.match(ln)) == len(ids)


def test_a_negative_limit_is_refused(many_db):
    proc = subprocess.run([sys.executable, "-m", "lineup", "sessions", "--limit", "-1", "--db", str(many_db)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2 and "--limit" in proc.stderr


def test_short_ids_name_one_session_each_even_made_in_one_millisecond(tmp_path):
    """`Store.short_ids`: ids made in the same millisecond share all but their
    last characters, so each is cut just past what it shares with either
    neighbour; what a prefix cannot name (lower case, punctuation) stays
    whole, and is found as written; an id that is the start of another is
    named whole."""
    from store.records import SessionRecord

    ids = ["01M9000000AAAAAAAAAAAAAAA1", "01M9000000AAAAAAAAAAAAAAA2", "01M9000000AAAAAAAAAAAAAAA3",
           "01M95ZZZZZ0000000000000000", "01M95ZZZZZ", "imported-session-7"]
    with Store.open(tmp_path / "ids.db") as store:
        for i, sid in enumerate(ids):
            store.create_session(SessionRecord(id=sid, created=1.7e9 + i, kind="chat", title="t"))
        short = store.short_ids(ids)
        assert short == {ids[0]: ids[0], ids[1]: ids[1], ids[2]: ids[2], ids[3]: ids[3][:11],
                         ids[4]: ids[4], ids[5]: ids[5]}
        assert store.short_ids(["01M9000000AAAAAAAAAAAAAAA2"], minimum=30) == {ids[1]: ids[1]}
        for sid, prefix in short.items():      # each names its session (a whole id as written, too)
            assert store.resolve_session(prefix) == sid
