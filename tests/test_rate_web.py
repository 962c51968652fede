"""`lineup rate`: the blind vote queue served over HTTP to team raters, each
with a link of their own. Tested against the real command on a free loopback
port (`tests/rate_support.py`): links are tokens kept hashed (no link, no
page), each case goes to `--overlap` raters and never twice to one,
nothing a rater's browser receives before the vote (or after it, with
`--reveal never`) names a contestant, 20 raters voting at once (each vote
sent twice) record one current vote per rater and case, a vote acknowledged
survives kill -9, a read-only database is refused, and a vote package is
voted in a browser and imported back.

The owner's database is `tests/test_share.py`'s: contestants under names no
list knows, reasoning in every answer, an error body naming its model."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path

import httpx
import pytest

from tests.rate_support import run_cli, scored, start  # noqa: F401  (scored: the fixture)
from tests.share_support import config_strings, owner  # noqa: F401  (the fixture: a database of two runs)

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

REASONING = "Let me think step by step."


def _votes(db: Path) -> list[tuple[str, str, str]]:
    """(rater, turn id, choice) of every current vote."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT rater, turn_id, choice FROM vote WHERE current = 1 AND retracted_at IS NULL "
                            "ORDER BY rater, turn_id").fetchall()


def _vote_all(link: str, seen: list[str] | None = None, choice: str = "A") -> int:
    """Vote `choice` on every case the link serves; the case ids seen, in order."""
    with httpx.Client(timeout=30) as c:
        view = c.get(link + "/state").json()
        n = 0
        while view["state"] != "done":
            assert view["state"] == "vote", view
            if seen is not None:
                seen.append(view["case"])
            view = c.post(link + "/vote", json={"handle": view["handle"], "choice": choice,
                                                "confirm": True}).json()
            assert view["state"] == "voted", view
            n += 1
            view = c.post(link + "/next", json={"handle": view["handle"]}).json()
        return n


def test_a_link_opens_only_its_own_page_and_is_kept_hashed(owner):
    db, sid, _ = owner
    r = start(db, sid, "--rater", "ann", "--rater", "bob")
    try:
        ann = r.links["ann"]
        token = ann.rsplit("/", 1)[1]
        page = httpx.get(ann)
        assert page.status_code == 200 and "<script src=\"/static/rate.js\"" in page.text
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe" not in csp
        assert page.headers["referrer-policy"] == "no-referrer"
        for bad in (r.base + "/r/" + token[:-1] + ("A" if token[-1] != "A" else "B"), r.base + "/r/x",
                    r.base + "/", r.base + "/r/" + token + "x", r.owner.replace("/o/", "/r/"),
                    ann.replace("/r/", "/o/"), r.base + "/static/../../pyproject.toml"):
            got = httpx.get(bad)
            assert got.status_code == 404 and "No such link" in got.text, bad
            assert httpx.get(bad + "/state").status_code == 404
        assert httpx.post(ann.replace(token, "z" * 43) + "/vote", json={}).status_code == 404
        # a form from another site cannot send JSON: refused without a JSON body
        assert httpx.post(ann + "/vote", data={"choice": "A"}).status_code == 415
    finally:
        r.stop()
    raw = db.read_bytes() + (db.with_name(db.name + "-wal").read_bytes() if db.with_name(db.name + "-wal").exists()
                             else b"")
    assert token.encode() not in raw
    with sqlite3.connect(db) as conn:
        hashes = {h for (h,) in conn.execute("SELECT token_hash FROM rater_link WHERE rater = 'ann'")}
    assert hashes == {hashlib.sha256(token.encode()).hexdigest()}
    # started again: the same link works (not printed again), --new-links replaces it
    r = start(db, sid, "--rater", "ann", "--rater", "bob")
    try:
        assert "(link issued earlier" in "\n".join(r.lines)
        assert httpx.get(ann.replace(ann.split("/r/")[0], r.base)).status_code == 200
    finally:
        r.stop()
    r = start(db, sid, "--rater", "ann", "--rater", "bob", "--new-links")
    try:
        assert httpx.get(ann.replace(ann.split("/r/")[0], r.base)).status_code == 404
        assert httpx.get(r.links["ann"]).status_code == 200
    finally:
        r.stop()


def test_each_case_goes_to_overlap_raters_and_never_twice_to_one(owner):
    db, sid, _ = owner
    raters = ["ann", "bob", "cy"]
    r = start(db, sid, *[a for n in raters for a in ("--rater", n)], "--overlap", "2")
    seen: dict[str, list[str]] = {}
    try:
        for name in raters:
            seen[name] = []
            _vote_all(r.links[name], seen[name])
        progress = httpx.get(r.owner + "/progress.json").json()
    finally:
        out = r.stop()
    with sqlite3.connect(db) as conn:
        cases = [c for (c,) in conn.execute("SELECT DISTINCT case_id FROM turn WHERE session_id = ?", [sid])]
        units = conn.execute("SELECT unit, count(*) FROM rater_assignment GROUP BY unit").fetchall()
    assert len(cases) == 4 and len(units) == 4 and all(n == 2 for _, n in units)
    for name in raters:
        assert len(seen[name]) == len(set(seen[name])), seen      # never the same case twice
    assert sorted(c for s in seen.values() for c in s) == sorted(cases * 2)
    by_turn: dict[str, list[str]] = {}
    for rater, turn, _ in _votes(db):
        by_turn.setdefault(turn, []).append(rater)
    assert len(by_turn) == 4 and all(len(v) == 2 and len(set(v)) == 2 for v in by_turn.values())
    assert sorted(p["done"] for p in progress["raters"]) == sorted(len(s) for s in seen.values())
    assert all(p["left"] == 0 for p in progress["raters"])
    assert progress["agreement"]["units"] == 4          # every case judged by two
    assert "progress: " in out
    # the report: a rating per rater, and the same agreement the owner saw
    done = run_cli(db, "report", "--session", sid, "--json", "--bootstrap", "20")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert sorted(report["by_rater"]) == raters
    assert report["agreement"]["units"] == 4 and report["agreement"]["alpha"] == progress["agreement"]["alpha"]


def _headers(resp: httpx.Response) -> str:
    """The headers a page could read (the length left out: a number, not a name)."""
    return json.dumps({k: v for k, v in resp.headers.items() if k != "content-length"})


def _strings_in(texts: list[str], needles: list[str]) -> list[tuple[str, str]]:
    return [(n, t[:200]) for t in texts for n in needles if n in t]


@pytest.mark.parametrize("reveal", ["never", "after-vote"])
def test_nothing_a_browser_gets_before_the_vote_names_a_contestant(owner, reveal):
    db, sid, other = owner
    needles = [s for s in config_strings(db, [sid, other]) if len(s) >= 4 or not s.isdigit()]
    with sqlite3.connect(db) as conn:
        aliases = [a for (a,) in conn.execute("SELECT DISTINCT alias FROM contestant WHERE session_id = ?", [sid])]
    r = start(db, sid, "--rater", "ann", "--reveal", reveal, "--gold-rate", "0.5")
    before: list[str] = []
    after: list[str] = []
    try:
        with httpx.Client(timeout=30) as c:
            for url in (r.links["ann"], r.base + "/static/rate.js", r.base + "/static/rate.css"):
                got = c.get(url)
                before.append(got.text + _headers(got))
            view_resp = c.get(r.links["ann"] + "/state")
            for _ in range(30):
                view = view_resp.json()
                before.append(view_resp.text + _headers(view_resp))
                if view["state"] == "done":
                    break
                # a tag before the vote: its answer also names no one
                tagged = c.post(r.links["ann"] + "/tag", json={"handle": view["handle"], "label": "A",
                                                               "tags": ["too_verbose"]})
                assert tagged.status_code == 200, tagged.text
                before.append(tagged.text)
                voted = c.post(r.links["ann"] + "/vote", json={"handle": view["handle"], "choice": "B"})
                if voted.json().get("confirm"):
                    before.append(voted.text)
                    voted = c.post(r.links["ann"] + "/vote", json={"handle": view["handle"], "choice": "B",
                                                                   "confirm": True})
                after.append(voted.text)
                view_resp = c.post(r.links["ann"] + "/next", json={"handle": voted.json()["handle"]})
            assert view["state"] == "done"
    finally:
        r.stop()
    assert len(before) > 8
    assert _strings_in(before, needles) == []
    assert not any(REASONING in t for t in before)      # reasoning tells reasoning models apart
    assert not any("vexillo" in t or "flumph" in t for t in before + after)   # the error body stays hidden
    named = [a for a in aliases if any(a in t for t in after)]
    if reveal == "never":
        assert _strings_in(after, needles) == []
        assert not any(REASONING in t for t in after)
    else:
        assert sorted(named) == sorted(aliases)        # names shown after the vote, as the owner chose
        assert any(REASONING in t for t in after)      # and the reasoning with them (`shown_reasoning`)
    with sqlite3.connect(db) as conn:
        tags = conn.execute("SELECT DISTINCT rater, tag FROM tag WHERE auto = 0").fetchall()
    assert tags == [("ann", "too_verbose")]


def test_labels_are_shuffled_per_case_and_rater(owner):
    """Over many fresh showings the answer under A changes (a shuffle per
    showing, not one order per rater or per server)."""
    db, sid, _ = owner
    r = start(db, sid, "--rater", "ann", "--rater", "bob", "--overlap", "2")
    firsts: set[tuple[str, str]] = set()
    try:
        with httpx.Client(timeout=30) as c:
            for name in ("ann", "bob"):
                view = c.get(r.links[name] + "/state").json()
                for _ in range(12):                       # skip round the queue: each showing shuffles again
                    firsts.add((name, view["panes"][0]["entries"][1]["text"].split(":")[0]))
                    view = c.post(r.links[name] + "/skip", json={"handle": view["handle"]}).json()
    finally:
        r.stop()
    assert len({f for n, f in firsts if n == "ann"}) >= 2 and len({f for n, f in firsts if n == "bob"}) >= 2


def test_every_gesture_of_the_queue_is_recorded_as_the_rater(owner):
    db, sid, _ = owner
    r = start(db, sid, "--rater", "ann")
    link = r.links["ann"]
    try:
        with httpx.Client(timeout=30) as c:
            v = c.get(link + "/state").json()
            assert v["rank"] and v["bad"] == "all_bad"
            bad = c.post(link + "/vote", json={"handle": v["handle"], "choice": "Q"})
            assert bad.status_code == 400 and "not saved" in bad.json()["error"].lower()
            v = c.post(link + "/vote", json={"handle": v["handle"], "choice": "B", "ranking": ["B", "C", "A"],
                                             "note": "B reads best"}).json()
            v = c.post(link + "/next", json={"handle": v["handle"]}).json()
            v = c.post(link + "/vote", json={"handle": v["handle"], "choice": "tie"}).json()
            v = c.post(link + "/undo", json={}).json()          # the tie withdrawn, its case back first
            assert v["state"] == "vote" and "Undone" in v["message"]
            v = c.post(link + "/vote", json={"handle": v["handle"], "choice": "all_bad"}).json()
            stale = v["handle"]
            v = c.post(link + "/next", json={"handle": v["handle"]}).json()
            again = c.post(link + "/vote", json={"handle": stale, "choice": "A"})   # a second tab's old case
            assert again.status_code == 409
            v = c.post(link + "/skip", json={"handle": v["handle"]}).json()
            assert "Skipped" in v["message"]
    finally:
        r.stop()
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT rater, choice, ranking, note, retracted_at IS NOT NULL, revealed_at IS NULL "
                            "FROM vote ORDER BY created").fetchall()
    assert [(rt, ch, json.loads(rk) if rk else None, nt, ret) for rt, ch, rk, nt, ret, _ in rows] == [
        ("ann", "B", ["B", "C", "A"], "B reads best", 0), ("ann", "tie", None, None, 1),
        ("ann", "all_bad", None, None, 0)]
    assert all(hidden for *_, hidden in rows)       # --reveal never: no vote recorded as shown


def test_twenty_raters_voting_at_once_record_one_current_vote_each(owner):
    db, sid, _ = owner
    raters = [f"rater-{i:02d}" for i in range(20)]
    r = start(db, sid, *[a for n in raters for a in ("--rater", n)], "--overlap", "10")

    async def one(c: httpx.AsyncClient, link: str) -> int:
        view = (await c.get(link + "/state")).json()
        acked = 0
        while view["state"] != "done":
            body = {"handle": view["handle"], "choice": "A", "confirm": True}
            # the same vote sent twice at once (a double click, a second tab): one is recorded
            got = await asyncio.gather(c.post(link + "/vote", json=body), c.post(link + "/vote", json=body))
            codes = sorted(g.status_code for g in got)
            assert codes == [200, 409], [g.text for g in got]
            acked += 1
            view = (await c.post(link + "/next", json={"handle": view["handle"]})).json()
        return acked

    async def all_of_them() -> list[int]:
        async with httpx.AsyncClient(timeout=60) as c:
            return await asyncio.wait_for(asyncio.gather(*(one(c, r.links[n]) for n in raters)), 120)

    try:
        acked = asyncio.run(all_of_them())
    finally:
        r.stop()
    votes = _votes(db)
    assert sum(acked) == len(votes) == 4 * 10
    assert len({(rater, turn) for rater, turn, _ in votes}) == len(votes)


def test_a_vote_acknowledged_survives_kill_9(owner):
    db, sid, _ = owner
    r = start(db, sid, "--rater", "ann")
    with httpx.Client(timeout=30) as c:
        view = c.get(r.links["ann"] + "/state").json()
        voted = c.post(r.links["ann"] + "/vote", json={"handle": view["handle"], "choice": "C", "confirm": True})
        assert voted.status_code == 200 and voted.json()["state"] == "voted"
    r.kill9()
    assert [(rater, choice) for rater, _, choice in _votes(db)] == [("ann", "C")]


def test_votes_acknowledged_while_five_raters_vote_survive_kill_9_mid_stream(owner):
    """kill -9 while votes are in flight: every vote the server acknowledged
    is in the database (the ones cut off may or may not be)."""
    import threading

    db, sid, _ = owner
    raters = [f"r{i}" for i in range(5)]
    r = start(db, sid, *[a for n in raters for a in ("--rater", n)], "--overlap", "5")
    acked: dict[str, int] = dict.fromkeys(raters, 0)
    killed = threading.Event()

    def vote(name: str) -> None:
        try:
            with httpx.Client(timeout=10) as c:
                view = c.get(r.links[name] + "/state").json()
                while view["state"] == "vote" and not killed.is_set():
                    got = c.post(r.links[name] + "/vote", json={"handle": view["handle"], "choice": "B",
                                                                "confirm": True})
                    if got.status_code == 200 and got.json().get("saved"):
                        acked[name] += 1
                    view = c.post(r.links[name] + "/next", json={"handle": view["handle"]}).json()
        except (httpx.TransportError, ValueError):
            pass                                    # the server was killed under this request

    threads = [threading.Thread(target=vote, args=(n,)) for n in raters]
    for t in threads:
        t.start()
    for _ in range(400):                            # kill once about half the votes are acknowledged
        if sum(acked.values()) >= 10:
            break
        threading.Event().wait(0.01)
    r.kill9()
    killed.set()
    for t in threads:
        t.join(30)
    assert sum(acked.values()) >= 10
    stored = {name: sum(1 for rater, _, _ in _votes(db) if rater == name) for name in raters}
    assert all(stored[n] >= acked[n] for n in raters), (stored, acked)


def test_a_vote_for_an_answer_that_failed_waits_for_its_confirmation(owner):
    db, sid, _ = owner
    r = start(db, sid, "--rater", "ann")
    try:
        with httpx.Client(timeout=30) as c:
            link = r.links["ann"]
            view = c.get(link + "/state").json()
            while not any(p["status"] == "error" for p in view["panes"]):
                view = c.post(link + "/skip", json={"handle": view["handle"]}).json()
            failed = next(p for p in view["panes"] if p["status"] == "error")
            assert failed["entries"][-1]["text"].startswith("error (")       # kind and status only
            first = c.post(link + "/vote", json={"handle": view["handle"], "choice": failed["label"]}).json()
            assert first["confirm"] and first["state"] == "vote" and "failed" in first["message"]
            assert _votes(db) == []
            second = c.post(link + "/vote", json={"handle": view["handle"], "choice": failed["label"],
                                                  "confirm": True}).json()
            assert second["state"] == "voted"
    finally:
        r.stop()
    assert [choice for _, _, choice in _votes(db)] == [failed["label"]]


def test_hostile_answer_text_arrives_as_inert_text(owner):
    """Markup stays text in the JSON (the page sets it with textContent, under
    a CSP without inline script); bidi and escape characters arrive as
    visible escapes (`core.ground.text.escape_controls`), never raw."""
    db, sid, _ = owner
    hostile = "<img src=x onerror=alert(1)><script>alert(2)</script>" + chr(0x202E) + "evil" + chr(0x1B) + "[31m"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE output SET text = ? WHERE session_id = ?", [hostile, sid])
    r = start(db, sid, "--rater", "ann")
    try:
        got = httpx.get(r.links["ann"] + "/state")
    finally:
        r.stop()
    texts = [e["text"] for p in got.json()["panes"] for e in p["entries"] if e["role"] == "answer"]
    assert texts and all(t == "<img src=x onerror=alert(1)><script>alert(2)</script>\\u202eevil\\x1b[31m"
                         for t in texts)
    assert chr(0x202E) not in got.text and chr(0x1B) not in got.text
    assert "\\u202e" not in got.text.replace("\\\\u202e", "")     # nor as a JSON escape a parser would turn back


def test_a_database_it_cannot_write_is_refused(owner, tmp_path):
    """File 0444 in a 0555 folder; root ignores modes, so then as an ordinary user."""
    import os
    import shutil
    import subprocess
    import sys

    db, sid, _ = owner
    folder = tmp_path / "ro"
    folder.mkdir()
    ro = folder / "x.db"
    shutil.copy(db, ro)
    ro.chmod(0o444)
    folder.chmod(0o555)
    kwargs: dict = {}
    if os.geteuid() == 0:
        kwargs = {"user": 65534, "group": 65534}
        tmp_path.chmod(0o755)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "nowhere"), "HOME": str(tmp_path)}
    env.pop("LINEUP_CONFIG", None)
    try:
        try:
            done = subprocess.run([sys.executable, "-m", "lineup", "rate", "--db", str(ro), sid, "--rater", "ann",
                                   "--port", "0"], capture_output=True, text=True, timeout=60, env=env,
                                  cwd=Path(__file__).resolve().parents[1], **kwargs)
        except PermissionError as exc:
            pytest.skip(f"an ordinary user cannot run this Python here: {exc}")
    finally:
        folder.chmod(0o755)
    if done.returncode != 0 and ("ModuleNotFoundError" in done.stderr or "Permission denied" in done.stderr
                                 and "x.db" not in done.stderr):
        pytest.skip(f"an ordinary user cannot run lineup here: {done.stderr[-300:]}")
    assert done.returncode == 2 and "read-only" in done.stderr, done.stderr


def test_bad_teams_are_refused_with_the_reason(owner, tmp_path):
    db, sid, _ = owner
    assert "--overlap" in run_cli(db, "rate", sid, "--rater", "ann", "--overlap", "2").stderr
    assert "at least one rater" in run_cli(db, "rate", sid).stderr
    names = tmp_path / "names.txt"
    names.write_text("ann\n# a comment\n\nb\x1bob\n")
    done = run_cli(db, "rate", sid, "--raters", str(names))
    assert done.returncode == 2 and "names.txt:4" in done.stderr


def test_without_the_web_extra_it_says_which_to_install(owner, monkeypatch, capsys):
    import importlib.util

    from lineup.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "starlette" else real(name, *a))
    db, sid, _ = owner
    assert main(["rate", "--db", str(db), sid, "--rater", "ann"]) == 2
    assert "lineup[web]" in capsys.readouterr().err


def test_beyond_loopback_it_warns_that_links_are_bearer_tokens(owner):
    db, sid, _ = owner
    r = start(db, sid, "--rater", "ann", "--host", "0.0.0.0")
    try:
        assert any("bearer token" in line for line in r.lines)
    finally:
        r.stop()


def test_a_vote_package_is_voted_in_a_browser_and_imported_back(owner, tmp_path):
    db, sid, _ = owner
    pkg = tmp_path / "pkg.db"
    assert run_cli(db, "share", sid, "-o", str(pkg)).returncode == 0
    r = start(pkg, str(pkg), "--rater", "dee")
    try:
        assert list(r.links) == ["dee"]
        assert _vote_all(r.links["dee"], choice="tie") == 4
    finally:
        r.stop()
    done = run_cli(db, "import", str(pkg))
    assert done.returncode == 0, done.stderr
    assert sorted({(rater, choice) for rater, _, choice in _votes(db)}) == [("dee", "tie")]
    assert len(_votes(db)) == 4


def test_adaptive_pairs_and_gold_come_only_from_the_raters_cases(owner):
    db, sid, _ = owner
    r = start(db, sid, "--rater", "ann", "--rater", "bob", "--adaptive", "--gold-rate", "0.3")
    try:
        with httpx.Client(timeout=30) as c:
            link = r.links["ann"]
            view = c.get(link + "/state").json()
            cases = set()
            while view["state"] != "done":
                assert view["labels"] == ["A", "B"]            # a pair at a time
                cases.add(view["case"])
                view = c.post(link + "/vote", json={"handle": view["handle"], "choice": "A",
                                                    "confirm": True}).json()
                view = c.post(link + "/next", json={"handle": view["handle"]}).json()
    finally:
        r.stop()
    with sqlite3.connect(db) as conn:
        mine = {u.split(":")[1] for (u,) in conn.execute("SELECT unit FROM rater_assignment WHERE rater = 'ann'")}
        reasons = [x for (x,) in conn.execute("SELECT choice_reason FROM vote WHERE rater = 'ann'")]
    assert cases == mine and len(mine) == 2            # four cases, one rater each: two are ann's
    assert reasons and all(reasons)                    # the adaptive choice's reason recorded with each vote


def test_the_owner_page_shows_progress_with_names_escaped(owner):
    db, sid, _ = owner
    r = start(db, sid, "--rater", "<b>ann</b>", "--rater", "bob")
    try:
        _vote_all(r.links["<b>ann</b>"])
        page = httpx.get(r.owner)
        assert page.status_code == 200
        assert "&lt;b&gt;ann&lt;/b&gt;" in page.text and "<b>ann" not in page.text
        assert "Krippendorff" in page.text
        assert httpx.get(r.owner + "x").status_code == 404
    finally:
        r.stop()


def test_units_go_to_the_least_loaded_raters_and_late_units_are_added():
    from core.answering.raters import assign

    first = assign([f"u{i}" for i in range(6)], ["ann", "bob", "cy"], 2)
    load = {n: sum(r == n for _, r in first) for n in ("ann", "bob", "cy")}
    assert sorted(load.values()) == [4, 4, 4]
    assert all(len({r for u2, r in first if u2 == u}) == 2 for u in {u for u, _ in first})
    # a unit that appears later goes to the raters with least; those already made stay
    later = assign([f"u{i}" for i in range(7)], ["ann", "bob", "cy", "dee"], 2, first)
    assert [u for u, _ in later] == ["u6", "u6"]
    assert "dee" in {r for _, r in later} and len({r for _, r in later}) == 2
    assert assign(["u0"], ["ann"], 1, [("u0", "ann")]) == []


def _scores(db: Path) -> list[tuple[str, str, int, str, str]]:
    """(contestant, dimension, value, rater, rater kind) of every score row, oldest first."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT o.contestant, s.dimension, s.value, s.rater, s.rater_kind FROM score s "
                            "JOIN output o ON o.id = s.output_id ORDER BY s.created, s.rowid").fetchall()


def test_a_rater_scores_answers_on_the_sessions_dimensions_blind(scored):
    """The page gets the session's dimensions and this rater's own scores per
    label; a score, before or after the vote, is saved on the answer under
    that label as the rater's (a later one replaces it in the view); a score
    off the scale, of no dimension or label on screen, is refused with the
    reason; nothing sent before the vote names a model."""
    db, sid = scored
    r = start(db, sid, "--rater", "ann", "--reveal", "after-vote")
    before: list[str] = []
    try:
        with httpx.Client(timeout=30) as c:
            link = r.links["ann"]
            got = c.get(link + "/state")
            before.append(got.text)
            v = got.json()
            assert v["dimensions"] == [{"name": "clarity", "description": "easy to follow"},
                                       {"name": "accuracy", "description": None}]
            assert v["scores"] == {"A": {}, "B": {}}
            for bad, says in ((dict(label="A", dimension="clarity", value=6), "1 to 5"),
                              (dict(label="A", dimension="clarity", value="4"), "whole number"),
                              (dict(label="A", dimension="clarity", value=True), "whole number"),
                              (dict(label="A", dimension="tone", value=3), "not a dimension"),
                              (dict(label="Z", dimension="clarity", value=3), "no answer 'Z'"),
                              # what the browser sent is quoted bounded, on one line, inert
                              (dict(label="Z" * 20_000, dimension="clarity", value=3), "no answer 'ZZZ"),
                              (dict(label="A", dimension="\x1b[2J\n" + "t" * 20_000, value=3), "not a dimension")):
                refused = c.post(link + "/score", json={"handle": v["handle"], **bad})
                assert refused.status_code == 400 and says in refused.json()["error"], refused.text
                assert len(refused.json()["error"]) < 200 and "\x1b" not in refused.json()["error"]
                before.append(refused.text)
            for label, dim, value in (("A", "clarity", 4), ("A", "clarity", 2), ("B", "accuracy", 5)):
                got = c.post(link + "/score", json={"handle": v["handle"], "label": label, "dimension": dim,
                                                    "value": value})
                assert got.status_code == 200, got.text
                before.append(got.text)
            v = got.json()
            assert v["state"] == "vote" and v["scores"] == {"A": {"clarity": 2}, "B": {"accuracy": 5}}
            voted = c.post(link + "/vote", json={"handle": v["handle"], "choice": "A", "confirm": True}).json()
            v = c.post(link + "/score", json={"handle": voted["handle"], "label": "B", "dimension": "clarity",
                                              "value": 3}).json()
            assert v["state"] == "voted" and v["scores"]["B"] == {"accuracy": 5, "clarity": 3}
            names = v["names"]
            # the owner sees the scores that count (A's clarity once: 2 replaced 4), per rater
            progress = c.get(r.owner + "/progress.json").json()
            assert progress["scored"] is True
            assert [(p["rater"], p["scores"]) for p in progress["raters"]] == [("ann", 3)]
            page = c.get(r.owner).text
            assert "<th>scores</th>" in page and "<td>ann</td>" in page and "<td>3</td></tr>" in page
    finally:
        r.stop()
    assert not any("demo/" in t for t in before)
    assert _scores(db) == [(names["A"], "clarity", 4, "ann", "human"), (names["A"], "clarity", 2, "ann", "human"),
                           (names["B"], "accuracy", 5, "ann", "human"), (names["B"], "clarity", 3, "ann", "human")]
