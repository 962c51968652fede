"""Exports are streamed (issue 32, item 2): `lineup export` reads a session
page by page (`store.session_pages`) and writes as it reads, so its peak
memory does not grow with the number of answers (a 100k-answer JSONL export
used to peak at 2 GB), and the bytes are those of the whole-session export.
Memory is bounded by counts (the peak resident size of an export process at
two sizes), never timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import store.session_pages as pages
from core.exchange.export import FORMATS, export_session, stored_export
from store import RevealRecord, Store, TagRecord, VoteRecord
from store.records import CheckResultRecord
from tests.synthetic import synthetic_session, write_synthetic

ROOT = Path(__file__).resolve().parents[1]


def _rich(db: Path, *, blind: bool, revealed: bool = False) -> str:
    """A session of 40 turns over many small pages: judged units of two turns
    (follow-ups of a case) that straddle page boundaries, some revealed by a
    vote and one by the rater, superseded and withdrawn votes, removed tags,
    checks, a second attempt and text with control characters."""
    s, turns, outs, votes = synthetic_session(turns=40, contestants=3, blind=blind, seed=11)
    turns = [t.model_copy(update={"case_id": f"case-{t.position // 2}"}) if t.position % 7 else t for t in turns]
    votes = [v.model_copy(update={"revealed_at": v.created + 1}) if i % 9 == 4 else v for i, v in enumerate(votes)]
    outs[3] = outs[3].model_copy(update={"text": "\x1b[31mred\x1b[0m =cmd|' /C calc'!A0 \u2028 \x9b2J"})
    outs[4] = outs[4].model_copy(update={"status": "error", "error_kind": "rate_limited", "text": "",
                                         "error_message": "model-1 said 429"})
    with Store.open(db) as st:
        write_synthetic(st, s, turns, outs, votes)
        retry = outs[5].model_copy(update={"id": outs[5].id[:-1] + "Z", "attempt": 2, "text": "again"})
        st.finish_output(retry)
        for i in (0, 13, 29):
            st.add_vote(VoteRecord(session_id=s.id, turn_id=turns[i].id, choice="tie", mapping=votes[i].mapping,
                                   positions=votes[i].positions, supersedes=votes[i].id, note=f"changed {i}",
                                   created=votes[i].created + 100))
        st.retract_vote(votes[21].id)
        st.add_reveal(RevealRecord(session_id=s.id, turn_id=turns[16].id, rater="tester"))
        for o in outs[::6]:
            st.add_tag(TagRecord(output_id=o.id, tag="too_verbose", note="long"))
        gone = TagRecord(output_id=outs[2].id, tag="hallucination")
        st.add_tag(gone)
        st.remove_tag(gone.id)
        for o in outs[1::8]:
            st.add_check_result(CheckResultRecord(output_id=o.id, check="regex", spec={"pattern": "x"},
                                                  passed=len(o.text) % 2 == 0, detail=None))
        if revealed:
            st.reveal_session(s.id)
    return s.id


@pytest.mark.parametrize("state", ["blind", "blind_revealed", "open"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_streamed_export_is_the_whole_session_export_byte_for_byte(tmp_path, monkeypatch, fmt, state):
    db = tmp_path / "lineup.db"
    sid = _rich(db, blind=state != "open", revealed=state == "blind_revealed")
    monkeypatch.setattr(pages, "PAGE_TURNS", 3)     # 14 pages: units and reveals cross their edges
    monkeypatch.setattr(pages, "PAGE_VOTES", 4)
    with Store.open(db, readonly=True) as st:
        whole = export_session(st.load_session(sid), fmt)
        with stored_export(st, sid, fmt) as (session, pieces):
            streamed = list(pieces)
    assert session.id == sid
    assert len(streamed) > 2 or fmt == "csv"         # it did come in pieces (the CSV's are 64k characters)
    assert "".join(streamed) == whole
    if fmt == "md" and state == "blind":
        assert "judged cases or turns revealed" in whole     # some units shown, the others hidden


def test_the_export_command_writes_the_streamed_export(tmp_path):
    db = tmp_path / "lineup.db"
    sid = _rich(db, blind=True)
    with Store.open(db, readonly=True) as st:
        loaded = st.load_session(sid)
    for fmt in FORMATS:
        out = tmp_path / f"x.{fmt}"
        done = subprocess.run([sys.executable, "-m", "lineup", "export", sid, "-f", fmt, "-o", str(out),
                               "--db", str(db)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert out.read_text(encoding="utf-8") == export_session(loaded, fmt)
        shown = subprocess.run([sys.executable, "-m", "lineup", "export", sid, "-f", fmt, "--db", str(db)],
                               cwd=ROOT, capture_output=True, timeout=120)
        assert shown.stdout == out.read_bytes()


#: Runs `lineup export` in this fresh process, then prints its peak resident
#: size in KiB: VmHWM (this program's own; `ru_maxrss` also counts what the
#: parent held when it forked), else `ru_maxrss` where there is no /proc.
_PEAK = ("import resource, sys\n"
         "from lineup.cli import main\n"
         "rc = main(sys.argv[1:])\n"
         "try:\n"
         "    peak = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
         "except OSError:\n"
         "    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
         "print(peak, file=sys.stderr)\n"
         "sys.exit(rc)\n")


def _export_peak_kb(db: Path, fmt: str, out: Path) -> int:
    done = subprocess.run([sys.executable, "-c", _PEAK, "export", "-f", fmt, "-o", str(out), "--db", str(db)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return int(done.stderr.strip().splitlines()[-1])


def _session_of(db: Path, answers: int) -> None:
    """`answers` answers of two models, a judge's vote on each turn (judges'
    votes are saved as cast: the store checks nothing per vote, which keeps the
    building quick)."""
    s, turns, outs, votes = synthetic_session(turns=answers // 2, blind=True, seed=3)
    votes = [v.model_copy(update={"rater_kind": "judge", "rater": "judge:j", "judge": "j"}) for v in votes]
    with Store.open(db) as st:
        write_synthetic(st, s, turns, outs, votes)


def test_export_peak_memory_does_not_grow_with_the_answers(tmp_path):
    """5,000 against 20,000 answers: the old export held every answer (and
    vote) at once and peaked 2.5-3x higher at 20k; streamed, the peak is the
    interpreter's and one page's, the same at both sizes."""
    small, big = tmp_path / "5k.db", tmp_path / "20k.db"
    _session_of(small, 5_000)
    _session_of(big, 20_000)
    for fmt in FORMATS:
        out = tmp_path / f"x.{fmt}"
        low = _export_peak_kb(small, fmt, out)
        small_size = out.stat().st_size
        high = _export_peak_kb(big, fmt, out)
        assert out.stat().st_size > 3.5 * small_size            # four times the answers did go out
        assert high < 1.5 * low, (fmt, low, high)
    first = json.loads(out.with_suffix(".jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["format"] == "lineup.output"
