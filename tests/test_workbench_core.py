"""The chat workbench below the TUI, over real HTTP on loopback
and real SQLite files: parameters typed as text (-p, the settings panel) and
sent per protocol, settings changed before the first turn, images attached
to a prompt (sent, refused, stored, resent after the file moved), a prompt
edited and re-sent as new attempts, linked sessions, prompt history, deleted
sessions and their tombstones through merges and imports, the answer
comparison, copies and their outcome, and the model picker's notes."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tui.answer_diff import Gap, compare, tokens
from core.answering.attachments import (
    AttachError,
    common_completion,
    complete_path,
    load_attachment,
    pasted_paths,
    placeholder,
)
from tui.clipboard import Route, copy_report, osc52, terminal_route, write_copy
from core.answering.config import Config
from core.answering.typed_params import ParamsError, params_from_assignments, params_from_text
from core.ground.errors import UsageError
from tui.model_status import model_notes, probe_servers
from tui.prompt_history import PromptHistory
from core.answering.sessions import ChatSession
from providers.events import SamplingParams
from providers.model_config import ModelConfig
from store import AsyncStore, Store
from store.imports import merge_database
from tests.server import Reply, TestServer, model_config

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


def _run(fn):
    return anyio.run(fn)


def _open(path):
    return AsyncStore(Store.open(path))


# --------------------------------------------------------------------------- parameters as text


def test_params_from_assignments_read_values_as_toml_simple_values_and_check_them():
    p = params_from_assignments(["temperature=0.3", "max_tokens=64", "seed=7", "reasoning_effort=high",
                                 "stop=###", "extra_body.top_k=40", 'extra_body={"min_p": 0.05}'])
    assert p == SamplingParams(temperature=0.3, max_tokens=64, seed=7, reasoning_effort="high", stop=("###",),
                               extra_body={"top_k": 40, "min_p": 0.05})


@pytest.mark.parametrize("item, says", [
    ("temperature=hot", "-p temperature: input should be a valid number"),
    ("temperature=3", "-p temperature: must be between 0 and 2"),
    ("temprature=1", "-p temprature: unknown parameter"),
    ("seed=true", "-p seed: must be a number, not true or false"),
    ("reasoning_effort=max", "-p reasoning_effort: input should be 'minimal', 'low', 'medium' or 'high'"),
    ("extra_body=3", "-p extra_body: must be a JSON object"),
    ("top_p", "-p: expected KEY=VALUE"),
    ("max_tokens=", "-p max_tokens: no value after ="),
])
def test_a_bad_parameter_names_its_key_and_never_repeats_the_value(item, says):
    with pytest.raises(ParamsError) as info:
        params_from_assignments([item])
    assert says in str(info.value)
    assert isinstance(info.value, UsageError)          # exit 2


def test_a_value_typed_in_the_wrong_place_is_never_repeated():
    for item in ("temperature=sk-proj-abcdef1234567890", "sk-proj-abcdef1234567890=1",
                 "reasoning_effort=sk-proj-abcdef1234567890"):
        with pytest.raises(ParamsError) as info:
            params_from_assignments([item])
        assert "abcdef1234567890" not in str(info.value)


def test_extra_body_never_carries_nan():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="must hold no NaN"):
        SamplingParams(extra_body={"x": [1, float("nan")]})
    # NaN typed as a value is text, not a number: the body stays valid JSON
    assert params_from_assignments(["extra_body.x=NaN"]).extra_body == {"x": "NaN"}
    assert params_from_text({"temperature": " ", "seed": "3"}) == SamplingParams(seed=3)


def test_chat_command_takes_p_and_system_and_opens_the_picker_for_many_models(tmp_path):
    from lineup.commands import chat_cmd

    config = tmp_path / "config.toml"
    config.write_text("".join(f'[models.m{i}]\nprovider = "demo"\nmodel = "concise"\n' for i in range(6)))

    def args(*extra):
        p = argparse.ArgumentParser()
        p.add_argument("--db")
        p.add_argument("--config")
        chat_cmd.configure(p)
        return p.parse_args(["--config", str(config), "--db", str(tmp_path / "x.db"), *extra])

    _, _, opts = chat_cmd.prepare(args("--system", "Be brief.", "-p", "temperature=0.1", "-p", "top_p=0.9",
                                       "--max-tokens", "50"))
    assert opts.system == "Be brief." and opts.pick
    assert opts.params == SamplingParams(temperature=0.1, top_p=0.9, max_tokens=50)
    _, _, opts = chat_cmd.prepare(args("-m", "m1", "-m", "m2"))
    assert not opts.pick and [m.alias for m in opts.models] == ["m1", "m2"]
    with pytest.raises(UsageError, match="-p top_p: must be greater than 0"):
        chat_cmd.prepare(args("-p", "top_p=0"))
    with pytest.raises(UsageError, match="--seed: must be a 64-bit integer"):
        chat_cmd.prepare(args("--seed", str(2**70)))


# --------------------------------------------------------------------------- parameters on the wire


def test_reasoning_effort_and_extra_body_go_where_each_protocol_takes_them(tmp_path):
    with TestServer() as srv:
        models = [model_config(srv, proto, alias=f"m-{proto}", max_retries=0, read_timeout=5,
                               extra_body={"from_config": 1})
                  for proto in ("openai", "ollama", "anthropic", "gemini")]
        params = SamplingParams(reasoning_effort="low", extra_body={"top_k": 5})

        async def go():
            store = _open(tmp_path / "s.db")
            session = await ChatSession.create(store, models, params=params)
            await session.send("hi")
            await session.aclose()
            await store.aclose()

        _run(go)
        bodies = {r.path: r.json for r in srv.requests}
    openai = next(b for p, b in bodies.items() if p.endswith("/chat/completions"))
    ollama = next(b for p, b in bodies.items() if p.endswith("/api/chat"))
    anthropic = next(b for p, b in bodies.items() if p.endswith("/v1/messages"))
    gemini = next(b for p, b in bodies.items() if "streamGenerateContent" in p)
    assert openai["reasoning_effort"] == "low" and ollama["think"] == "low"
    assert "reasoning_effort" not in anthropic and "think" not in anthropic
    assert "reasoning_effort" not in json.dumps(gemini)
    for body in (openai, ollama, anthropic, gemini):
        assert body["top_k"] == 5 and body["from_config"] == 1


def test_settings_change_before_the_first_turn_and_are_recorded_then_fixed(tmp_path):
    with TestServer() as a, TestServer() as b:
        models = [model_config(a, "openai", alias="alpha", max_retries=0, params=SamplingParams(temperature=0.9)),
                  model_config(b, "openai", alias="beta", max_retries=0)]

        async def go():
            store = _open(tmp_path / "s.db")
            session = await ChatSession.create(store, models, defaults=SamplingParams(max_tokens=100))
            await session.update_settings("Answer in French.", SamplingParams(temperature=0.2, seed=4),
                                          {1: SamplingParams(top_p=0.5)})
            assert not (await store.list_sessions())          # recorded with its first prompt, as set then
            await session.send("bonjour")
            record = await store.get_session(session.id)
            with pytest.raises(ValueError, match="fixed once a prompt was sent"):
                await session.update_settings(None, SamplingParams())
            await session.aclose()
            await store.aclose()
            return record

        record = _run(go)
        first, second = a.requests[0].json, b.requests[0].json
    assert record.system == "Answer in French." and record.params == {"temperature": 0.2, "seed": 4}
    assert record.seed == 4
    by_alias = {c.alias: c.params for c in record.contestants}
    assert by_alias == {"alpha": {"temperature": 0.2, "max_tokens": 100, "seed": 4},
                        "beta": {"temperature": 0.2, "max_tokens": 100, "seed": 4, "top_p": 0.5}}
    assert first["messages"][0] == {"role": "system", "content": "Answer in French."}
    assert first["temperature"] == 0.2 and "top_p" not in first and second["top_p"] == 0.5


# --------------------------------------------------------------------------- images


def test_an_image_goes_to_models_that_take_images_and_is_kept_for_a_resume(tmp_path):
    image = tmp_path / "chart.png"
    image.write_bytes(PNG)
    with TestServer() as a, TestServer() as b:
        models = [model_config(a, "openai", alias="seeing", max_retries=0),
                  model_config(b, "openai", alias="text-only", max_retries=0, images=False)]
        config = Config(models={m.alias: m for m in models})

        async def go():
            store = _open(tmp_path / "s.db")
            session = await ChatSession.create(store, models)
            assert session.refuses_images() == [1]
            await session.send("what is in it?", [load_attachment(image)])
            sid = session.id
            await session.aclose()
            image.unlink()                        # the file is gone: the store still has it
            again = await ChatSession.resume(store, sid, config)
            await again.send("and the colour?")
            loaded = await store.load_session(sid)
            await again.aclose()
            await store.aclose()
            return loaded

        loaded = _run(go)
        seeing, text_only = a.requests, b.requests
    (img,) = loaded.turns[0].images
    assert img["name"] == "chart.png" and img["size"] == len(PNG) and img["not_sent_to"] == ["text-only"]
    assert placeholder(img) == f"[image: chart.png · {len(PNG)} B]"
    parts = seeing[0].json["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "what is in it?"} and parts[1]["type"] == "image_url"
    assert text_only[0].json["messages"][0] == {"role": "user", "content": "what is in it?"}
    # resumed after the file was deleted: the bytes come from the store, to the same models only
    assert seeing[1].json["messages"][0]["content"][1] == parts[1]
    assert text_only[1].json["messages"][0] == {"role": "user", "content": "what is in it?"}
    with Store.open(tmp_path / "s.db") as s:
        assert s.images([img["sha256"]]) == {img["sha256"]: ("image/png", PNG)}


def test_attachments_are_read_like_sample_set_images_and_errors_name_the_file(tmp_path):
    (tmp_path / "notes.txt").write_text("not an image")
    big = tmp_path / "huge.png"
    big.write_bytes(PNG + bytes(6 * 1024 * 1024))
    with pytest.raises(AttachError, match="image file not found: .*missing.png"):
        load_attachment(tmp_path / "missing.png")
    with pytest.raises(AttachError, match="unsupported image type: .*notes.txt"):
        load_attachment(tmp_path / "notes.txt")
    with pytest.raises(AttachError, match="image too large: .*huge.png"):
        load_attachment(big)


def test_a_pasted_path_is_an_attachment_only_when_it_names_image_files(tmp_path):
    spaced = tmp_path / "my chart.png"
    spaced.write_bytes(PNG)
    other = tmp_path / "b.webp"
    other.write_bytes(b"RIFF\0\0\0\0WEBPVP8 ")
    assert pasted_paths(str(spaced)) == [str(spaced)]
    assert pasted_paths(f"'{spaced}'") == [str(spaced)]
    assert pasted_paths(str(spaced).replace(" ", "\\ ") + " " + str(other)) == [str(spaced), str(other)]
    assert pasted_paths("file://" + str(spaced).replace(" ", "%20")) == [str(spaced)]
    assert pasted_paths(f"look at {spaced}") is None
    assert pasted_paths("just some text\nover two lines") is None
    assert pasted_paths(str(tmp_path)) is None


def test_path_completion_offers_folders_and_images(tmp_path):
    (tmp_path / "shots").mkdir()
    (tmp_path / "shot-1.png").write_bytes(PNG)
    (tmp_path / "shot-2.jpg").write_bytes(b"\xff\xd8\xff")
    (tmp_path / "shopping.txt").write_text("x")
    (tmp_path / ".shadow.png").write_bytes(PNG)
    base = str(tmp_path) + "/sho"
    assert complete_path(base) == [base + "t-1.png", base + "t-2.jpg", base + "ts/"]
    assert common_completion(base) == base + "t"
    assert complete_path(str(tmp_path) + "/.sh") == [str(tmp_path) + "/.shadow.png"]


# --------------------------------------------------------------------------- edit and resend, linked sessions


def test_an_edited_prompt_makes_new_attempts_and_keeps_the_old_ones(tmp_path):
    with TestServer() as a, TestServer() as b:
        a.script(Reply(text="first a"), Reply(text="second a"))
        b.script(Reply(text="first b"), Reply(text="second b"))
        models = [model_config(a, "openai", alias="alpha", max_retries=0),
                  model_config(b, "openai", alias="beta", max_retries=0)]

        async def go():
            store = _open(tmp_path / "s.db")
            session = await ChatSession.create(store, models)
            await session.send("What is 2+2?")
            await session.resend_edited("What is 3+3?")
            messages = session.user_messages()
            sid = session.id
            await session.aclose()
            again = await ChatSession.resume(store, sid, Config(models={m.alias: m for m in models}))
            loaded = await store.load_session(sid)
            await store.aclose()
            return messages, loaded, again

        messages, loaded, again = _run(go)
        second = a.requests[1].json["messages"]
    assert [m.content for m in messages] == ["What is 3+3?"]
    assert second == [{"role": "user", "content": "What is 3+3?"}]      # the old answer is not in the thread
    (turn,) = loaded.turns
    assert turn.user_message == "What is 2+2?"
    got = sorted((o.contestant, o.attempt, o.prompt, o.text) for o in loaded.outputs)
    assert got == [("alpha", 1, None, "first a"), ("alpha", 2, "What is 3+3?", "second a"),
                   ("beta", 1, None, "first b"), ("beta", 2, "What is 3+3?", "second b")]
    # resumed: each thread carries the edited prompt and its answer
    assert [m.content for m in again.contestants[0].history] == ["What is 3+3?", "second a"]
    assert again.prompt_of(turn) == "What is 3+3?"


def test_a_linked_session_records_where_it_came_from(tmp_path, monkeypatch):
    from providers.demo import DEMO_MODELS

    monkeypatch.setenv("LINEUP_DEMO_SPEED", "0")

    async def go():
        store = _open(tmp_path / "s.db")
        old = await ChatSession.create(store, DEMO_MODELS[:2])
        await old.send("first")
        new = await ChatSession.create(store, DEMO_MODELS[1:3], blind=True, linked_from=old.id,
                                       changed="contestants")
        await new.send("first")                 # a session is recorded with its first prompt
        record = await store.get_session(new.id)
        await store.aclose()
        return old, new, record

    old, new, record = _run(go)
    assert new.linked_from == old.id and record.rerun_of == old.id and record.kind == "chat"
    assert record.meta["linked_from"] == {"session": old.id, "changed": "contestants"}


# --------------------------------------------------------------------------- prompt history


def test_prompt_history_walks_this_session_then_every_chat_and_gives_the_draft_back(tmp_path):
    from providers.demo import DEMO_MODELS

    os.environ["LINEUP_DEMO_SPEED"] = "0"

    async def go():
        store = _open(tmp_path / "s.db")
        one = await ChatSession.create(store, DEMO_MODELS[:2])
        for text in ("old one", "shared", "old two"):
            await one.send(text)
        two = await ChatSession.create(store, DEMO_MODELS[:2])
        for text in ("new one", "shared"):
            await two.send(text)
        everything = await store.prompt_history()
        mine = await store.prompt_history(session_id=two.id)
        await one.aclose()
        await two.aclose()
        await store.aclose()
        return everything, mine

    everything, mine = _run(go)
    assert everything == ["shared", "new one", "old two", "old one"]
    assert mine == ["shared", "new one"]
    h = PromptHistory(["new one", "shared"], everything)
    assert h.entries == ["shared", "new one", "old two", "old one"]
    assert h.older("half typed") == "shared"
    assert h.older("shared") == "new one"
    assert [h.older(""), h.older(""), h.older("")] == ["old two", "old one", None]
    assert [h.newer(), h.newer(), h.newer(), h.newer()] == ["old two", "new one", "shared", "half typed"]
    assert h.newer() is None and not h.walking
    h.sent("old one")
    assert h.entries[0] == "old one" and h.entries.count("old one") == 1


# --------------------------------------------------------------------------- deleting sessions


def _session_with_everything(path: Path, image: Path) -> str:
    from providers.demo import DEMO_MODELS

    os.environ["LINEUP_DEMO_SPEED"] = "0"

    async def go():
        store = _open(path)
        session = await ChatSession.create(store, DEMO_MODELS[:2], title="doomed")
        await session.send("look", [load_attachment(image)])
        await session.vote("tie", rater="r")
        await session.tag(0, "too_verbose", rater="r")
        await session.aclose()
        await store.aclose()
        return session.id

    return _run(go)


def test_deleting_a_session_removes_everything_and_leaves_a_tombstone(tmp_path):
    image = tmp_path / "i.png"
    image.write_bytes(PNG)
    sid = _session_with_everything(tmp_path / "s.db", image)
    keep = _session_with_everything(tmp_path / "s.db", image)
    with Store.open(tmp_path / "s.db") as s:
        gone = s.delete_session(sid[:12])
        assert gone.id == sid and gone.title == "doomed"
        for table in ("turn", "output", "vote", "vote_contestant", "tag", "contestant"):
            rows = s.query(f"SELECT count(*) AS n FROM {table}")[0]["n"]
            assert rows > 0, table     # the other session's rows stay
        assert s.query("SELECT count(*) AS n FROM output WHERE session_id = ?", [sid])[0]["n"] == 0
        assert s.query("SELECT count(*) AS n FROM image")[0]["n"] == 1        # still named by the other session
        assert s.search("look") and all(h.session_id == keep for h in s.search("look"))
        assert sid in s.deleted_sessions()
        with pytest.raises(Exception, match="was deleted"):
            s.load_session(sid)
        s.delete_session(keep)
        assert s.query("SELECT count(*) AS n FROM image")[0]["n"] == 0        # no turn names it any more
        assert s.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_merge_or_an_import_never_brings_a_deleted_session_back(tmp_path):
    from core.exchange.export import export_session
    from core.exchange.importing import import_file

    image = tmp_path / "i.png"
    image.write_bytes(PNG)
    sid = _session_with_everything(tmp_path / "mine.db", image)
    theirs = tmp_path / "theirs.db"
    import shutil

    shutil.copy(tmp_path / "mine.db", theirs)        # a teammate's copy, taken before the delete
    with Store.open(theirs) as t:
        jsonl = tmp_path / "export.jsonl"
        jsonl.write_text(export_session(t.load_session(sid), "jsonl"))
    _session_with_everything(theirs, image)
    their_deleted = _session_with_everything(theirs, image)
    with Store.open(theirs) as t:
        t.delete_session(their_deleted)
    with Store.open(tmp_path / "mine.db") as s:
        s.delete_session(sid)
        summary = merge_database(s, theirs)
        assert summary.deleted_here == [sid]
        assert sid not in {x.id for x in s.list_sessions()}
        assert s.query("SELECT count(*) AS n FROM turn WHERE session_id = ?", [sid])[0]["n"] == 0
        assert len(s.list_sessions()) == 1                 # their live session came in; neither deleted one
        assert set(s.deleted_sessions()) == {sid, their_deleted}
        again = import_file(s, jsonl)
        assert again.deleted_here == [sid] and not any(again.added.values())
        assert sid not in {x.id for x in s.list_sessions()}
    cli = subprocess.run([sys.executable, "-m", "lineup", "import", str(theirs), "--db", str(tmp_path / "mine.db")],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    assert cli.returncode == 0 and f"left out 1 session deleted here ({sid})" in cli.stdout


def test_lineup_sessions_delete_needs_a_terminal_or_yes(tmp_path):
    image = tmp_path / "i.png"
    image.write_bytes(PNG)
    sid = _session_with_everything(tmp_path / "s.db", image)
    env = {**os.environ, "PYTHONPATH": str(Path.cwd()), "LINEUP_DB": str(tmp_path / "s.db")}

    def lineup(*args):
        return subprocess.run([sys.executable, "-m", "lineup", "sessions", *args], capture_output=True,
                              text=True, env=env, stdin=subprocess.DEVNULL)

    refused = lineup("--delete", sid)
    assert refused.returncode == 2 and "without a terminal to confirm: add --yes" in refused.stderr
    unknown = lineup("--delete", "01NOPE", "--yes")
    assert unknown.returncode == 2 and "no session '01NOPE'" in unknown.stderr
    done = lineup("--delete", sid[:10], "--yes")
    assert done.returncode == 0 and f"Deleted session {sid} (chat, 1 turn, 1 vote, doomed)" in done.stdout
    again = lineup("--delete", sid, "--yes")
    assert again.returncode == 2 and "was deleted" in again.stderr
    assert "No sessions yet." in lineup().stdout


# --------------------------------------------------------------------------- comparing answers


def test_compare_aligns_code_answers_and_marks_what_differs():
    a = "Use this:\n\n```python\ndef area(r):\n    return 3.14 * r * r\n```\n\nFor r=2 that is 12.56."
    b = ("Use this:\n\n```python\nimport math\n\ndef area(r):\n    return math.pi * r ** 2\n```\n\n"
         "For r=2 that is 12.57.")
    c = compare([a, b], ["A", "B"])
    assert c.summary() == "4 of 10 lines differ, numbers in 2, code in 3"
    view = c.view(differences_only=True)
    assert [type(v).__name__ for v in view] == ["Gap", "Row", "Row", "Gap", "Row", "Gap", "Row"]
    inserted = view[1]
    assert [x.text for x in inserted.cells] == [None, "import math"] and inserted.code
    changed = view[4]
    left, right = changed.cells
    assert [left.text[s:e] for s, e in left.changed] == ["3.14", "r"]
    assert [right.text[s:e] for s, e in right.changed] == ["math.pi", "* 2"]
    last = view[-1]
    assert [x.text[s:e] for x in last.cells for s, e in x.changed] == ["12.56", "12.57"] and last.numbers
    assert sum(v.rows for v in view if isinstance(v, Gap)) == 6


def test_compare_three_answers_and_identical_ones():
    c = compare(["one\ntwo\nthree", "one\n2\nthree", "one\ntwo\nthree\nfour"])
    assert [[x.text for x in r.cells] for r in c.rows if not r.same] == [["two", "2", "two"],
                                                                       [None, None, "four"]]
    same = compare(["x\ny ", "x\ny"])
    assert same.identical and same.view(True) == [Gap(2)]
    assert "".join(tokens("x = -1.5e3%, y")) == "x = -1.5e3%, y" and "-1.5e3%" in tokens("x = -1.5e3%, y")
    with pytest.raises(ValueError):
        compare(["only one"])


# --------------------------------------------------------------------------- copying


def _tool(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_a_copy_through_a_system_tool_is_confirmed_by_its_exit_status(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "xclip", f'cat > "{tmp_path}/got"\n')
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "DISPLAY": ":9", "TERM": "xterm-256color"}
    report = copy_report("héllo", env)
    assert report.tool == "xclip" and report.confirmed and (tmp_path / "got").read_text() == "héllo"
    assert report.message("the answer of A (5 characters)") == (
        "Copied the answer of A (5 characters) to the system clipboard (xclip) and the terminal clipboard "
        "(OSC 52; the terminal does not confirm it).")
    _tool(bin_dir, "xclip", 'echo "Error: Can\'t open display" >&2; exit 1\n')
    failed = copy_report("x", env)
    assert not failed.confirmed and not failed.doubtful        # OSC 52 went to a terminal: maybe
    assert "xclip failed: exit 1: Error: Can't open display" in failed.message("it")
    no_display = copy_report("x", {"PATH": f"{bin_dir}:/usr/bin:/bin", "TERM": "xterm"})
    assert no_display.tool is None and "no clipboard tool" in no_display.message("it")


def test_inside_tmux_a_copy_is_confirmed_only_when_tmux_takes_it(tmp_path):
    tmux = __import__("shutil").which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed")
    sock = tmp_path / "tmux.sock"
    subprocess.run([tmux, "-S", str(sock), "-f", "/dev/null", "new-session", "-d", "-s", "t", "sleep 30"],
                   check=True)
    try:
        pid = subprocess.run([tmux, "-S", str(sock), "display", "-p", "#{pid}"], capture_output=True,
                             text=True).stdout.strip()
        env = {"PATH": os.environ["PATH"], "TMUX": f"{sock},{pid},0", "TERM": "tmux-256color"}
        route = terminal_route(env)
        assert route.kind == "tmux" and route.set_clipboard == "external" and route.dropped
        report = copy_report("nothing took this", env, route=route, wait=lambda s: None)
        assert report.doubtful and "set-clipboard is external" in report.message("the answer")
        subprocess.run([tmux, "-S", str(sock), "set", "-g", "set-clipboard", "on"], check=True)
        # what tmux does with an application's OSC 52 when set-clipboard is on: a paste buffer
        subprocess.run([tmux, "-S", str(sock), "set-buffer", "copied text"], check=True)
        on = copy_report("copied text", env, wait=lambda s: None)
        assert on.route.set_clipboard == "on" and on.in_tmux_buffer and on.confirmed
        assert "tmux's clipboard" in on.message("it")
    finally:
        subprocess.run([tmux, "-S", str(sock), "kill-server"], check=False)


def test_osc52_and_the_file_offer(tmp_path):
    assert osc52("hi") == "\x1b]52;c;aGk=\a"
    assert osc52("hi", tmux_passthrough=True) == "\x1bPtmux;\x1b\x1b]52;c;aGk=\a\x1b\\"
    assert Route("screen").dropped and Route("console").dropped and not Route("terminal").dropped
    assert not Route("tmux", "external", passthrough=True).dropped
    path = write_copy("the text", tmp_path / "out.txt")
    assert path.read_text() == "the text\n"
    with pytest.raises(IsADirectoryError):
        write_copy("x", tmp_path)


# --------------------------------------------------------------------------- the picker's notes


def test_model_notes_mark_demo_missing_keys_and_unreachable_servers():
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    with TestServer() as srv:
        models = [
            ModelConfig(alias="demo/concise", provider="demo", model="concise"),
            model_config(srv, "openai", alias="up"),
            ModelConfig(alias="down", provider="openai", model="x", base_url=f"http://127.0.0.1:{closed_port}/v1"),
            ModelConfig(alias="keyless", provider="anthropic", model="x", base_url=srv.base_url("anthropic"),
                        api_key_env="LINEUP_TEST_MISSING_KEY"),
        ]
        unreachable = anyio.run(probe_servers, models)
    notes = model_notes(models, unreachable, env={})
    assert notes["demo/concise"] == "demo" and "up" not in notes
    assert notes["down"].startswith(f"unreachable (127.0.0.1:{closed_port}: ")
    assert notes["keyless"] == "no key (LINEUP_TEST_MISSING_KEY unset)"
