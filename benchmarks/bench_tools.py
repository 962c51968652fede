"""The tool loop's cost on the client: CPU per streamed answer through
`core.answering.tools.AnswerLoop` against the same requests streamed straight from the
provider (the baseline, measured in the same run), over real HTTP on loopback
(the server runs in another process, so its CPU is not counted).

- one structured answer of 2,000 text deltas (one request through the loop);
- a three-step tool loop (two calls and their results, then 500 deltas) against
  the same three requests sent one after another.

Medians of repeated runs; the ratio is loop / baseline.

    .venv/bin/python benchmarks/bench_tools.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.answering.tools import AnswerLoop, StructuredOutput, ToolScript  # noqa: E402
from providers import make_provider  # noqa: E402
from providers.events import ChatRequest, Message, ResponseFormat, ToolCall, ToolResultPart  # noqa: E402
from providers.model_config import ModelConfig  # noqa: E402

TOOLS = ToolScript(tools=[{"name": "lookup", "description": "Look something up.",
                           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}],
                   tool_results=[{"name": "lookup", "result": {"value": 42}}], max_steps=5)
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}

SERVER = r"""
import json, sys, threading
sys.path.insert(0, sys.argv[1])
from tests.server import Reply, TestServer
with TestServer() as srv:
    def respond(rec):
        body = json.dumps(rec.json)
        if "BIG" in body:
            return Reply(text="x" * 2000, chunk_chars=1)
        steps = body.count('"role": "tool"')
        if steps < 2:
            return Reply(text="", tool_calls=[{"id": f"c{steps}", "name": "lookup", "arguments": {"q": "a" * 40}}],
                         chunk_chars=4)
        return Reply(text="y" * 500, chunk_chars=1)
    srv.respond(respond)
    print(srv.url, flush=True)
    threading.Event().wait()
"""


async def _drain(stream) -> int:
    n = 0
    async for _ in stream:
        n += 1
    return n


def _cfg(url: str) -> ModelConfig:
    return ModelConfig(alias="b", provider="openai", model="m", base_url=url + "/v1", max_retries=0)


def _request(text: str) -> ChatRequest:
    return ChatRequest(model="m", messages=(Message(role="user", content=text),))


async def structured(url: str, loop: bool) -> float:
    provider = make_provider(_cfg(url))
    try:
        request = _request("BIG")
        start = time.process_time()
        if loop:
            fmt = StructuredOutput(schema=SCHEMA)
            await _drain(AnswerLoop(provider, "openai", request, structured=fmt).events())
        else:
            fmt_request = request.model_copy(update={"response_format": ResponseFormat(schema=SCHEMA)})
            await _drain(provider.stream(fmt_request))
        return time.process_time() - start
    finally:
        await provider.aclose()


async def tools(url: str, loop: bool) -> float:
    provider = make_provider(_cfg(url))
    try:
        request = _request("small").model_copy(update={"tools": TOOLS.tools})
        start = time.process_time()
        if loop:
            await _drain(AnswerLoop(provider, "openai", request, script=TOOLS).events())
        else:   # the same three requests, one after another
            messages = list(request.messages)
            for step in range(3):
                await _drain(provider.stream(request.model_copy(update={"messages": tuple(messages)})))
                call = ToolCall(id=f"c{step}", name="lookup", arguments={"q": "a" * 40})
                messages += [Message(role="assistant", content="", tool_calls=(call,)),
                             Message(role="tool", content="", tool_results=(
                                 ToolResultPart(id=call.id, name="lookup", content={"value": 42}),))]
        return time.process_time() - start
    finally:
        await provider.aclose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat: that it still runs (tests/test_benchmarks.py)")
    args = ap.parse_args()
    if args.smoke:
        args.repeat = 1
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(ROOT)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        for name, fn in (("structured answer, 2,000 deltas", structured), ("3-step tool loop", tools)):
            runs: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(2):                       # warm-up
                for loop in (False, True):
                    anyio.run(fn, url, loop)
            for _ in range(args.repeat):
                for loop in (False, True):           # interleaved: a busy machine weighs on both
                    runs[loop].append(anyio.run(fn, url, loop))
            base, mine = statistics.median(runs[False]), statistics.median(runs[True])
            print(f"{name}: direct {base * 1000:.2f} ms CPU, through the loop {mine * 1000:.2f} ms CPU "
                  f"(median of {args.repeat}); ratio {mine / base:.2f}")
    finally:
        proc.terminate()
        proc.wait(5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
