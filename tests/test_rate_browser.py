"""`lineup rate` in a real browser: Chromium (Debian's, /usr/bin/chromium,
or CHROMIUM) driven by Playwright opens two raters' links, one at desktop
width voting with the keyboard (a pick, a tie, a tag), one at phone width
(390 px) voting with clicks and a ranking; each vote is checked in the
database, and nothing any response gave either browser before its vote
names a contestant. Skipped, with the reason, where no browser starts.

Run it alone: `.venv/bin/python -m pytest tests/test_rate_browser.py`.
With LINEUP_SCREENSHOTS=DIR it also saves the page at both widths there
(docs/img/ holds the ones the docs show)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.rate_support import run_cli, start
from tests.rate_support import scored  # noqa: F401  (the fixture: a run scored on two dimensions)
from tests.share_support import config_strings, owner  # noqa: F401  (the fixture: a database of two runs)

pytest.importorskip("starlette")
sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture
def browser(owner):
    """Started after the owner's database is made (Playwright's sync API holds
    an event loop on this thread while it runs)."""
    yield from _chromium()


@pytest.fixture
def scored_browser(scored):
    """The same, after the scored run's database is made."""
    yield from _chromium()


def _chromium():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM)")
    try:
        pw = sync_api.sync_playwright().start()
    except Exception as exc:       # pragma: no cover - depends on the machine
        pytest.skip(f"Playwright cannot start: {exc}")
    try:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], timeout=30_000)
    except Exception as exc:
        pw.stop()
        pytest.skip(f"Chromium cannot start here: {str(exc)[:300]}")
    yield b
    b.close()
    pw.stop()


def _votes(db: Path, rater: str) -> list[tuple[str, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT choice, ranking FROM vote WHERE rater = ? AND current = 1 ORDER BY created",
                            [rater]).fetchall()


def _tags(db: Path, rater: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [t for (t,) in conn.execute("SELECT tag FROM tag WHERE rater = ? AND removed_at IS NULL", [rater])]


class Seen:
    """Every response body a page received, split at its first vote."""

    def __init__(self, page) -> None:
        self.before: list[str] = []
        self.voted = False
        page.on("response", self.record)

    def record(self, resp) -> None:
        try:
            body = resp.text()
        except Exception:
            return
        if "/vote" in resp.url:
            self.voted = True
        if not self.voted:
            self.before.append(resp.url + "\n" + body)


def _wait_saved(db: Path, rater: str, n: int, page) -> None:
    for _ in range(100):
        if len(_votes(db, rater)) >= n:
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"{rater}: {len(_votes(db, rater))} votes, wanted {n}")


def test_two_raters_vote_in_browsers_by_keyboard_and_by_touch(owner, browser, tmp_path):
    db, sid, other = owner
    needles = config_strings(db, [sid, other])
    with sqlite3.connect(db) as conn:
        aliases = [a for (a,) in conn.execute("SELECT DISTINCT alias FROM contestant WHERE session_id = ?", [sid])]
    shots = os.environ.get("LINEUP_SCREENSHOTS")
    with sqlite3.connect(db) as conn:       # answer text that would be markup, were it ever treated as such
        conn.execute("UPDATE output SET text = text || ? WHERE session_id = ? AND text LIKE 'Ripe mango%' AND "
                     "turn_id IN (SELECT id FROM turn WHERE case_id = 'case-1')",     # the second case shown
                     [' <img src=x onerror="document.title=1">', sid])
    r = start(db, sid, "--rater", "ann", "--rater", "bob", "--overlap", "2")
    try:
        # ann, at desktop width, with the keyboard
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        page = ctx.new_page()
        seen = Seen(page)
        page.goto(r.links["ann"])
        page.wait_for_selector("article.pane")
        assert page.title() == "lineup: blind vote"
        assert page.locator("article.pane").count() == 3
        if shots:
            page.screenshot(path=str(Path(shots) / "rate-desktop.png"), full_page=False)
        before_text = page.content()
        page.keyboard.press("a")
        page.wait_for_selector("#after:not([hidden])")
        _wait_saved(db, "ann", 1, page)
        assert _votes(db, "ann") == [("A", None)]
        page.keyboard.press("Enter")                      # next case
        page.wait_for_selector("#after", state="hidden")
        assert page.locator("img").count() == 0 and page.get_by_text('<img src=x onerror="document.title=1">').count()
        page.keyboard.press("m")                          # tag B: m, then its label
        page.keyboard.press("b")
        page.wait_for_selector("dialog[open]")
        page.get_by_label("too verbose").check()
        page.click("#tag-save")
        page.wait_for_selector("div.mine")
        assert _tags(db, "ann") == ["too_verbose"]
        page.keyboard.press("o")                          # a note for the next vote
        page.keyboard.type("reads like a draft")
        page.keyboard.press("Enter")
        page.keyboard.press("t")
        _wait_saved(db, "ann", 2, page)
        assert [c for c, _ in _votes(db, "ann")] == ["A", "tie"]
        page.wait_for_selector("#after:not([hidden])")
        page.keyboard.press("u")                          # undo: the tie withdrawn, its case back
        page.wait_for_selector("#after", state="hidden")
        page.wait_for_selector("text=Undone")
        page.keyboard.press("x")
        page.wait_for_selector("#after:not([hidden])")
        assert [c for c, _ in _votes(db, "ann")] == ["A", "all_bad"]
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT choice, note FROM vote WHERE rater = 'ann' AND retracted_at IS NOT NULL"
                                ).fetchall() == [("tie", "reads like a draft")]
        assert page.title() == "lineup: blind vote"
        ctx.close()

        # bob, at phone width, with clicks (taps) and a ranking
        ctx = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
        page = ctx.new_page()
        seen_bob = Seen(page)
        page.goto(r.links["bob"])
        page.wait_for_selector("article.pane")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways at 390 px ({width})"
        if shots:
            page.screenshot(path=str(Path(shots) / "rate-phone.png"), full_page=False)
        page.tap("#choices button:text-is('B')")
        _wait_saved(db, "bob", 1, page)
        page.tap("#next")
        page.wait_for_selector("#after", state="hidden")
        page.tap("#choices button:text-is('rank…')")
        page.keyboard.press("c")
        page.keyboard.press("a")
        page.keyboard.press("Enter")
        _wait_saved(db, "bob", 2, page)
        got = _votes(db, "bob")
        assert got[0] == ("B", None)
        assert got[1][0] == "C" and json.loads(got[1][1])[:2] == ["C", "A"]    # the last one placed by itself
        ctx.close()
    finally:
        r.stop()
    # the report rates per rater and measures their agreement on the cases both judged
    done = run_cli(db, "report", "--session", sid, "--json", "--bootstrap", "20")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert sorted(report["by_rater"]) == ["ann", "bob"] and report["agreement"]["raters"] == ["ann", "bob"]
    for what in (seen.before, seen_bob.before, [before_text]):
        assert what
        found = [(n, t[:120]) for t in what for n in needles if n in t]
        assert found == []
        assert not any(a in t for t in what for a in aliases)


def _scores(db: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT dimension, value FROM score WHERE rater = 'cy' ORDER BY created, rowid").fetchall()


def test_a_rater_scores_answers_by_tapping_at_phone_width(scored, scored_browser):
    """Each answer has a row of 1-5 per dimension; a tap saves the score, the
    pressed button shows it, a reload keeps it; the page still fits 390 px,
    and nothing it received names a model."""
    db, sid = scored
    r = start(db, sid, "--rater", "cy")
    try:
        ctx = scored_browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
        page = ctx.new_page()
        seen = Seen(page)
        page.goto(r.links["cy"])
        page.wait_for_selector("article.pane")
        assert page.locator("article.pane").count() == 2
        assert page.locator("div.score-row").count() == 4 and page.locator("button.score").count() == 20
        assert page.locator("button.score[aria-pressed=true]").count() == 0
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways at 390 px ({width})"
        clarity_a = page.get_by_role("group", name="clarity of A")
        clarity_a.get_by_role("button", name="clarity 4 of 5").tap()
        page.wait_for_selector("text=A: clarity 4 saved.")
        assert _scores(db) == [("clarity", 4)]
        page.get_by_role("group", name="accuracy of B").get_by_role("button", name="accuracy 2 of 5").tap()
        page.wait_for_selector("text=B: accuracy 2 saved.")
        page.reload()
        page.wait_for_selector("article.pane")
        pressed = page.locator("button.score[aria-pressed=true]")
        assert pressed.count() == 2
        assert sorted(pressed.evaluate_all("bs => bs.map(b => b.title)")) == ["accuracy 2 of 5", "clarity 4 of 5"]
        assert _scores(db) == [("clarity", 4), ("accuracy", 2)]
        # no vote was cast: nothing the page received names a model (the scores' answers included)
        assert len(seen.before) > 4 and not [b for b in seen.before if "demo/" in b or "concise" in b
                                             or "thorough" in b]
        if os.environ.get("LINEUP_SCREENSHOTS"):
            page.locator("div.scores").first.scroll_into_view_if_needed()
            page.screenshot(path=str(Path(os.environ["LINEUP_SCREENSHOTS"]) / "rate-scores-phone.png"))
        ctx.close()
    finally:
        r.stop()
