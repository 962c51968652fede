"""A logs.db written by the real `llm` CLI (0.36), for the `lineup sample`
tests: `llm` is run as a subprocess against the loopback server
(tests/server.py speaks the OpenAI protocol), configured with two extra
OpenAI-compatible models through its own `extra-openai-models.yaml` in a
temporary LLM_USER_PATH, so nothing of a user's real `llm` set-up is read
or written. Then `llm logs -n 0 --json` exports the same log."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

from tests.server import Reply, TestServer


def png(rgb: tuple[int, int, int], size: int = 2) -> bytes:
    """A real PNG of one colour (image_mime and every provider accept it)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


CHART_PNG = png((200, 30, 30))     # the file `llm -a FILE` names (the logs.db keeps only its path)
PIXEL_PNG = png((30, 30, 200))     # piped to `llm -a -` (the logs.db keeps its bytes)
NOTES = "Site notes: the north gate opens at 07:00 and the crane is booked on Tuesdays."


@dataclass
class LlmLogs:
    home: Path          # LLM_USER_PATH
    db: Path            # the logs.db llm wrote
    export: Path        # `llm logs -n 0 --json` of it
    image: Path         # the image file `-a` named
    env: dict[str, str]


def llm(env: dict[str, str], *args: str, stdin: bytes | None = None) -> str:
    proc = subprocess.run([sys.executable, "-m", "llm", *args], env=env, input=stdin,
                          capture_output=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"llm {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return proc.stdout.decode()


def write_llm_logs(folder: Path) -> LlmLogs:
    home = folder / "llm-home"
    home.mkdir()
    image = folder / "chart.png"
    image.write_bytes(CHART_PNG)
    (folder / "notes.txt").write_text(NOTES, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "LLM_"))}
    env.update(LLM_USER_PATH=str(home), OPENAI_API_KEY="sk-loopback-test-key", NO_COLOR="1")
    with TestServer() as srv:
        srv.script(Reply(text="An answer from the loopback server."))
        (home / "extra-openai-models.yaml").write_text(
            f"- model_id: loop-a\n  model_name: a-model\n  api_base: {srv.url}/v1\n  vision: true\n"
            f"- model_id: loop-b\n  model_name: b-model\n  api_base: {srv.url}/v1\n  vision: true\n",
            encoding="utf-8")
        for n in (3, 4, 5):
            llm(env, "-m", "loop-a", f"What is included in support plan number {n} for the Basic tier?")
        llm(env, "-m", "loop-b", "-s", "You are terse.", "Plan my week of site visits")
        llm(env, "-c", "Now move Tuesday to Friday")
        llm(env, "-m", "loop-a", "-a", str(image), "Describe this chart in one sentence")
        llm(env, "-m", "loop-b", "--at", "-", "image/png", "What colour is this pixel?", stdin=PIXEL_PNG)
        llm(env, "-m", "loop-a", "--at", "https://images.example.com/q3-sales.png", "image/png",
            "Summarise the remote chart")
        llm(env, "-m", "loop-b", "-f", str(folder / "notes.txt"), "When does the north gate open?")
        llm(env, "-m", "loop-a", "¿Cómo puedo cambiar la contraseña de mi cuenta?")
        llm(env, "-m", "loop-b", "Wie kann ich mein Passwort ändern, bitte?")
        sent = [r.json for r in srv.requests]
    assert len(sent) == 11, sent
    export = folder / "export.json"
    export.write_text(llm(env, "logs", "-n", "0", "--json"), encoding="utf-8")
    return LlmLogs(home, home / "logs.db", export, image, env)
