"""An example provider plugin, installed for the tests through
`lineup_echo_plugin-0.1.dist-info` (its `entry_points.txt` declares
`echo = lineup_echo_plugin:EchoProvider` in the group `lineup.providers`).

It answers with the last user message, word by word, after a line of
reasoning, and reports usage and the model it "served". The model name
chooses a misbehaviour, so that tests can check what the core guarantees
around a plugin: "raise" fails mid-stream, "no-terminal" stops without a
terminal event, "junk" sends a value that is not an event, "leak" ends with
an error that echoes the key, "slow" never finishes, "call" makes a tool
call (and answers once the result comes back).

`EchoHttpProvider` (`echo-http`) is the other kind of plugin: an HTTP
protocol built on lineup's `HttpProvider`, so it gets the retries, limits
and error mapping of the built-in protocols. Its "protocol" is a chat
completions request to `{base_url}/chat/completions` with the prompt in a
`prompt` field, read with lineup's OpenAI-compatible stream parser."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio

from providers.base import Provider
from providers.http import HttpProvider, StreamParser
from providers.openai import OpenAIParser
from providers.events import (
    ChatRequest,
    ErrorKind,
    Finish,
    ReasoningDelta,
    RequestSent,
    ServedBy,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCall,
    UsageReport,
)

NOT_A_PROVIDER = object()


class EchoProvider(Provider):
    protocol = "echo (example plugin)"
    accepts_images = False

    def __init__(self, cfg: Any, **options: Any) -> None:
        self.cfg = cfg
        self.closed = False

    async def events(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        mode = self.cfg.model
        yield RequestSent(t=time.perf_counter(), wall=time.time())
        yield ServedBy(model=f"echo-{mode}")
        prompt = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        if mode == "call" and request.messages[-1].role != "tool":
            yield ToolCall(id="call_1", name=request.tools[0].name if request.tools else "f", arguments={"q": prompt})
            yield Finish(reason="tool_calls", t=time.perf_counter())
            return
        yield ReasoningDelta(text="Echoing. ", t=time.perf_counter())
        words = prompt.split(" ")
        for i, word in enumerate(words):
            if mode == "raise" and i == 1:
                raise RuntimeError("the echo plugin broke mid-stream")
            if mode == "junk" and i == 1:
                yield "not an event"  # type: ignore[misc]
            if mode == "slow" and i == 1:
                await anyio.sleep(60)
            yield TextDelta(text=word if i == 0 else " " + word, t=time.perf_counter())
        if mode == "no-terminal":
            return
        if mode == "leak":
            key = os.environ.get(self.cfg.api_key_env or "", "")
            yield StreamError(kind=ErrorKind.auth, message=f"key {key} refused", t=time.perf_counter())
            return
        yield UsageReport(input_tokens=len(prompt.split()), output_tokens=len(words))
        yield Finish(reason="stop", t=time.perf_counter())

    async def aclose(self) -> None:
        self.closed = True


class EchoHttpProvider(HttpProvider):
    name = "echo-http"
    protocol = "echo over HTTP (example plugin)"

    def build(self, request: ChatRequest, key: str | None) -> tuple[str, dict[str, str], dict[str, Any]]:
        prompt = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        body = {"model": self.cfg.model, "prompt": prompt, "stream": True,
                "messages": [{"role": "user", "content": prompt}]}
        return f"{self.base_url}/chat/completions", {"accept": "text/event-stream"}, body

    def parser(self) -> StreamParser:
        return OpenAIParser()
