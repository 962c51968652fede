"""The response cache of `lineup run --cache`.

A run on a set the team keeps re-runs the same requests again and again (a
new prompt beside old ones, a canary, a re-run after a crash on another
database). Every request of a run is keyed by what determines its answer:
the provider, the model, the server (`base_url`), the messages (images
included), the system prompt, the sampling parameters (seed included), what
the model's config adds to the body (`extra_body`), and the repeat index (the
second sample of a case is not the first). The key is the SHA-256 of that as
canonical JSON (`request_key`); it is recorded with every answer of a run.

With the cache on, an identical key with a complete answer already in the
database is answered from it (`cached_answer`): no request, the record
marked `origin = "cache"` with `cached_from` naming the answer reused, its
text, reasoning, finish reason, token counts and served model copied, and no
timings and a cost of 0, so latency, speed and cost figures count only the
requests that were made. `--refresh` turns the lookup off for one run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from providers.catalogue import PROVIDER_DEFAULT_BASE_URL
from providers.events import ChatRequest
from providers.model_config import ModelConfig
from store.records import OutputRecord

#: Bumped when what goes into a key changes, so old keys stop matching.
KEY_VERSION = 1
#: What of a model's config cannot change its answer (the alias is a name;
#: the rest bound how long and how much is waited for). Everything else is in
#: the key, so a field added to `ModelConfig` later (a header, a query
#: parameter) counts until it is listed here: a miss is cheap, a wrong hit is not.
_NOT_IN_KEY = {"alias", "api_key_env", "price", "params", "connect_timeout", "read_timeout", "max_retries",
               "concurrency", "answer_deadline", "max_answer_bytes"}


def request_key(cfg: ModelConfig, request: ChatRequest, repeat: int,
                tooling: Mapping[str, Any] | None = None) -> str:
    """The cache key of one request (hex SHA-256 of canonical JSON). `tooling`:
    a case's tools, scripted results and structured output, which shape the
    answer of a tool loop beyond its first request."""
    model = cfg.model_dump(mode="json", exclude=_NOT_IN_KEY)
    model["base_url"] = (cfg.base_url or PROVIDER_DEFAULT_BASE_URL.get(cfg.provider) or "").rstrip("/")
    blob: dict[str, Any] = {
        "v": KEY_VERSION,
        "model": model,
        "request": request.model_dump(mode="json", exclude={"model", "params"}),
        # what is sent: the request's parameters over the model's own (as the provider merges them)
        "params": cfg.params.merged(request.params).model_dump(mode="json", exclude_none=True),
        "repeat": repeat,
    }
    if tooling:
        blob["tooling"] = dict(tooling)
    text = json.dumps(blob, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def cached_answer(source: OutputRecord, base: OutputRecord) -> OutputRecord:
    """`base` (a new output of this run) answered by `source`'s complete
    answer: no request was made, so no timings, no chunks and no cost."""
    return base.model_copy(update=dict(
        status="complete", text=source.text, reasoning=source.reasoning, error_kind=None, error_message=None,
        finish_reason=source.finish_reason, sent_at=None, ttft_ms=None, duration_ms=None, chunk_ms=[],
        chunk_chars=[], input_tokens=source.input_tokens, output_tokens=source.output_tokens,
        tokens_estimated=source.tokens_estimated, reasoning_tokens=source.reasoning_tokens, cost=0.0,
        served_model=source.served_model, system_fingerprint=source.system_fingerprint, origin="cache",
        trace=source.trace, streamed=source.streamed,
        cached_from=source.cached_from or source.id,
    ))
