"""Secrets: a planted API key appears nowhere.

The key lives in an environment variable named by a config file. Models point
at loopback servers that (a) accept, (b) answer 401 echoing the key back in
their error message, (c) fail mid-stream with the key in the error event,
(d) the same 401 echo over the Anthropic protocol, and (e) a key variable
holding a character HTTP headers cannot carry, which makes the client raise
instead of reporting (the exception path). Everything the app produces is
captured: a chat session's events and record, `lineup run`, `models --check`,
`export` in every format, `report --json/--md/--html`, `sessions`; then every
file under the test's folder (the database and its -wal/-shm included) and
every captured stdout/stderr is searched for the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from core.answering.config import load_config
from core.answering.sessions import ChatSession
from store import AsyncStore, Store
from tests.server import Reply, TestServer

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-test-PLANTED0123456789abcdef"
# every run of 8 characters of the key (a cut, wrapped or partly echoed key too)
NEEDLES = [KEY[i:i + 8].encode() for i in range(len(KEY) - 7)]
KEY_VAR = "LINEUP_HARDENING_KEY"
ODD_VAR = "LINEUP_HARDENING_ODD_KEY"
ODD_KEY = KEY + "\u00e9"                                 # not encodable in a header: the client raises


def _echo(what: str) -> str:
    return f"Incorrect API key provided: {what}. Authorization: Bearer {what} (x-api-key: {what})"


@pytest.fixture
def servers():
    with TestServer() as ok, TestServer() as denied, TestServer() as cut, TestServer() as anth, \
            TestServer() as cut300, TestServer() as wrapped, TestServer() as echo:
        ok.script(Reply(text="A fine answer from the healthy model."))
        denied.script(Reply(status=401, message=_echo(KEY)))
        cut.script(Reply(text="This answer starts well and then", fault="error_event", fault_after=3,
                         message=f"upstream failure for key {KEY}"))
        anth.script(Reply(status=401, message=_echo(KEY)))
        # the key where error text is cut to 300 characters; a key wrapped over two lines
        cut300.script(Reply(status=401, message="x" * 280 + " " + KEY + " is not valid"))
        wrapped.script(Reply(status=401, message=f"The key\n{KEY[:12]}\n{KEY[12:]}\nis not valid"))
        # a server that echoes the key in the answer and its reasoning, in small deltas
        echo.script(Reply(text=f"You sent {KEY}; wrapped: {KEY[:10]}\n{KEY[10:]}. Done.",
                          reasoning=f"The header was Bearer {KEY[:20]}", chunk_chars=3))
        yield {"ok": ok, "denied": denied, "cut": cut, "anth": anth, "cut300": cut300, "wrapped": wrapped,
               "echo": echo}


def _write_config(path: Path, servers: dict) -> None:
    lines = []
    for alias, provider, srv, var in (("ok", "openai", servers["ok"], KEY_VAR),
                                      ("denied", "openai", servers["denied"], KEY_VAR),
                                      ("cut", "openai", servers["cut"], KEY_VAR),
                                      ("anth", "anthropic", servers["anth"], KEY_VAR),
                                      ("odd", "openai", servers["ok"], ODD_VAR),
                                      ("cut300", "openai", servers["cut300"], KEY_VAR),
                                      ("wrapped", "gemini", servers["wrapped"], KEY_VAR),
                                      ("echo", "openai", servers["echo"], KEY_VAR)):
        lines += [f"[models.{alias}]", f'provider = "{provider}"', f'model = "{alias}-model"',
                  f'base_url = "{srv.base_url(provider)}"', f'api_key_env = "{var}"', "max_retries = 0",
                  "read_timeout = 5", ""]
    path.write_text("\n".join(lines))


def _grep(blob: bytes, where: str) -> None:
    for needle in NEEDLES:
        assert needle not in blob, f"the planted key leaked into {where}"


def test_a_planted_key_appears_in_no_artefact(tmp_path, monkeypatch, servers):
    db = tmp_path / "data" / "lineup.db"
    config = tmp_path / "config.toml"
    _write_config(config, servers)
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv(ODD_VAR, ODD_KEY)
    monkeypatch.setenv("LINEUP_CONFIG", str(config))
    monkeypatch.setenv("LINEUP_DB", str(db))
    captured: list[tuple[str, bytes]] = []

    # --- a chat session (in process): not blind, then blind
    cfg = load_config(config)
    events: list[str] = []

    async def chat():
        store = AsyncStore(Store.open(db))
        try:
            for blind in (False, True):
                with anyio.fail_after(60):
                    session = await ChatSession.create(store, list(cfg.models.values()), blind=blind)
                    await session.send("hello there", on_update=lambda u: events.append(repr(u.event)))
                    await session.send("and again", on_update=lambda u: events.append(repr(u.event)))
                    if blind:
                        await session.vote("tie")
                    await session.aclose()
        finally:
            await store.aclose()

    anyio.run(chat)
    captured.append(("chat session events", "\n".join(events).encode()))

    # the key really was sent, so there was something to leak
    assert servers["ok"].requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert servers["anth"].requests[0].headers["x-api-key"] == KEY
    with Store.open(db, readonly=True) as store:
        outputs = store.query("SELECT contestant, status, error_kind, error_message FROM output")
    by = {}
    for row in outputs:
        by.setdefault(row["contestant"], []).append(row)
    assert all(r["status"] == "complete" for r in by["ok"])
    for alias in ("denied", "anth"):
        assert all(r["status"] == "error" and r["error_kind"] == "auth" and r["error_message"] for r in by[alias])
    assert all(r["status"] == "error" and r["error_message"] for r in by["cut"])
    assert all(r["status"] == "error" and r["error_message"] for r in by["odd"]), by["odd"]
    for alias in ("cut300", "wrapped"):
        assert all(r["status"] == "error" and r["error_kind"] == "auth" and "[redacted]" in r["error_message"]
                   for r in by[alias]), by[alias]
    assert all(r["status"] == "complete" for r in by["echo"])
    with Store.open(db, readonly=True) as store:
        echoed = store.query("SELECT text, reasoning FROM output WHERE contestant = 'echo'")
    assert all(r["text"] == "You sent [redacted]; wrapped: [redacted]. Done." for r in echoed), echoed
    assert all(r["reasoning"] == "The header was Bearer [redacted]" for r in echoed), echoed

    # --- the CLI, each command as a user runs it
    set_path = tmp_path / "set.jsonl"
    set_path.write_text("".join(json.dumps({"id": f"c{i}", "category": "x", "prompt": f"question {i}"}) + "\n"
                                for i in range(3)))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out_dir = tmp_path / "out"
    out_dir.mkdir()

    def cli(*argv: str, ok_codes=(0,)) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "lineup", *argv], capture_output=True, cwd=tmp_path,
                              env=env, timeout=120)
        captured.append((f"lineup {' '.join(argv)} (stdout)", proc.stdout))
        captured.append((f"lineup {' '.join(argv)} (stderr)", proc.stderr))
        assert b"Traceback" not in proc.stderr, proc.stderr.decode()[-3000:]
        assert proc.returncode in ok_codes, (argv, proc.returncode, proc.stderr.decode()[-2000:])
        return proc

    models = ["-m", "ok", "-m", "denied", "-m", "cut", "-m", "anth", "-m", "odd", "-m", "cut300", "-m", "wrapped",
              "-m", "echo"]
    cli("run", str(set_path), *models, "--quiet", ok_codes=(1,))   # some models fail by design: exit 1
    cli("run", str(set_path), *models, "--quiet", ok_codes=(1,))   # the resume path retries the failures
    cli("models")
    cli("models", "--check", ok_codes=(1,))
    cli("models", "--check", "--json", ok_codes=(1,))
    sessions = json.loads(cli("sessions", "--json").stdout)
    cli("sessions")
    assert len(sessions) == 3
    for s in sessions:
        for fmt in ("jsonl", "csv", "md"):
            cli("export", s["id"], "--format", fmt, "-o", str(out_dir / f"{s['id']}.{fmt}"))
            cli("export", s["id"], "--format", fmt)
    cli("report", "--json", "--bootstrap", "20")
    cli("report", "--bootstrap", "20", "--md", str(out_dir / "report.md"), "--html", str(out_dir / "report.html"))
    cli("report", "--bootstrap", "0")
    # the messages users read do say what went wrong (the check is not vacuous)
    check = json.loads(cli("models", "--check", "--json", ok_codes=(1,)).stdout)
    status = {m["alias"]: m["check"] for m in check["models"]}
    assert status["ok"]["ok"] and not status["denied"]["ok"] and status["denied"]["error_kind"] == "auth"
    assert "redacted" in status["denied"]["error"] or "***" in status["denied"]["error"]

    # --- every file under the test folder, and everything captured
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != config]
    assert db in files
    assert len(list(out_dir.iterdir())) == 3 * 3 + 2
    for p in files:
        _grep(p.read_bytes(), str(p.relative_to(tmp_path)))
    for where, blob in captured:
        _grep(blob, where)
    # and the database, as SQL sees it (text columns of every table)
    with Store.open(db, readonly=True) as store:
        for table in ("session", "contestant", "turn", "output", "vote", "tag", "check_result"):
            for row in store.query(f"SELECT * FROM {table}"):
                _grep(json.dumps(row, default=str).encode(), f"table {table}")


# --- a key cut, wrapped or echoed in an answer ------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from providers.http import scrub, short  # noqa: E402
from providers.secrets import MIN_FRAGMENT, REDACTED, GrowingText, HeldBack, KeyScrubber, scrubber_for  # noqa: E402


def _fragments(key: str) -> list[str]:
    return [key[i:i + MIN_FRAGMENT] for i in range(len(key) - MIN_FRAGMENT + 1)]


def _assert_no_fragment(text: str, key: str, where: str = "text") -> None:
    # outside the markers: a key may itself hold a run of "[redacted]" (Hypothesis drew the key
    # "redacted"), and the marker in place of it is not the key leaking
    text = text.replace(REDACTED, "\x00")
    flat = "".join(text.split())
    for frag in _fragments(key):
        assert frag not in text, f"{frag!r} of the key in {where}: {text!r}"
        assert frag not in flat, f"{frag!r} of the key (across whitespace) in {where}: {text!r}"


def test_a_key_at_the_300_character_cut_is_scrubbed():
    for lead in range(280, 300):
        message = short("x" * lead + " " + KEY + " and more")   # cut inside the key, then scrubbed
        _assert_no_fragment(scrub(message, KEY), KEY, f"a message cut {300 - lead} characters into the key")


def test_a_key_wrapped_over_lines_or_spaced_is_scrubbed():
    for at in range(1, len(KEY)):
        for gap in ("\n", "\r\n", " ", "\n  ", "\t"):
            text = f"Invalid key: {KEY[:at]}{gap}{KEY[at:]} (401)"
            out = scrub(text, KEY)
            _assert_no_fragment(out, KEY)
            _assert_no_fragment(short(out), KEY)
            assert out.startswith("Invalid key: ") and out.endswith(" (401)")


def test_text_that_is_not_the_key_is_left_alone():
    text = "sk-test is a prefix; PLANTED01 is not the key; ordinary prose stays as it is.\n  Indented."
    assert KeyScrubber(KEY).scrub("A plain answer.\n\n  - a list\n") == "A plain answer.\n\n  - a list\n"
    assert "ordinary prose" in KeyScrubber(KEY).scrub(text)


def _one_mark(text: str) -> str:
    import re

    # whitespace between two marks may be taken into one match or left between two
    return re.sub(r"\[redacted\](?:\s*\[redacted\])*", "[redacted]", text)


def test_a_key_that_is_a_run_of_the_marker_leaves_only_the_marker():
    """Found by Hypothesis in a full run: the key "redacted" scrubs to
    "[redacted]", which holds the key; what is outside the markers does not."""
    for key in ("redacted", "xxredactedyy"):
        scrubbed = scrubber_for((key,)).scrub(f"a {key} b {key[:5]}\n{key[5:]} c")
        assert scrubbed.count(REDACTED) == 2 and scrubbed.startswith("a ") and scrubbed.endswith(" c")
        _assert_no_fragment(scrubbed, key)


_key_chars = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=8,
                     max_size=60)


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(_key_chars, min_size=1, max_size=2, unique=True), data=st.data())
def test_no_run_of_the_key_survives_scrubbing_or_streaming(keys, data):
    """Random text with pieces of the keys planted (whole, cut, wrapped), fed in
    random deltas: neither the scrubbed whole text nor what `HeldBack` lets out
    (joined) holds 8 consecutive characters of a key, with or without the
    whitespace between them."""
    parts = []
    for _ in range(data.draw(st.integers(1, 4))):
        parts.append(data.draw(st.text(alphabet="ab xyz\n-_09", max_size=20)))
        key = data.draw(st.sampled_from(keys))
        start = data.draw(st.integers(0, len(key) - 1))
        end = data.draw(st.integers(start + 1, len(key)))
        frag = key[start:end]
        if len(frag) > 2 and data.draw(st.booleans()):
            cut = data.draw(st.integers(1, len(frag) - 1))
            frag = frag[:cut] + data.draw(st.sampled_from(["\n", " ", "\r\n  "])) + frag[cut:]
        parts.append(frag)
    text = "".join(parts)
    scrubber = scrubber_for(tuple(keys))
    for key in keys:
        _assert_no_fragment(scrubber.scrub(text), key, "the scrubbed text")
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=12))))
    held = HeldBack(scrubber)
    shown, prev = [], 0
    for c in [*cuts, len(text)]:
        shown.append(held.feed("text", text[prev:c]))
        prev = c
    shown.append(held.flush("text"))
    for key in keys:
        _assert_no_fragment("".join(shown), key, "the streamed text")
    # nothing but the key was changed: the screen shows what the store keeps (a run
    # of a repetitive key may be redacted as two pieces on screen)
    assert _one_mark("".join(shown)) == _one_mark(scrubber.scrub(text))
    if not scrubber.spans(text):
        assert "".join(shown) == text
    saved = GrowingText(scrubber)               # the store's view, saved as the text grows
    for c in cuts:
        for key in keys:
            _assert_no_fragment(saved.of(text[:c]), key, "a checkpoint")
    assert _one_mark(saved.of(text)) == _one_mark(scrubber.scrub(text))
