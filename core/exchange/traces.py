"""Reading the traces teams keep (OpenTelemetry GenAI spans, LangSmith runs,
Langfuse observations, LiteLLM proxy logs) into the calls lineup samples from
(`lineup sample`) and the per-request outcomes a canary is judged on
(`lineup canary report`).

Why a module of its own: `core.exchange.logs` reads request logs (a prompt to replay);
a trace also holds what production answered, how long it took, what it cost,
which model and arm served it and how the user took it. Each format's reader
turns one exported record into `TraceCall`s, one per LLM call; the rest of a
trace (a chain, a retriever, a tool span) is skipped and counted. A call's
prompt is handed on as OpenAI-style chat messages, so `core.exchange.logs` builds the
conversation (and its skip reasons) exactly as for its own formats.

Formats, detected from the content (`sniff`):

- OTLP JSON, as the OpenTelemetry Collector's file exporter writes it (one
  `{"resourceSpans": [...]}` per line, or one document): GenAI spans in the
  current attribute form (`gen_ai.input.messages`, `gen_ai.output.messages`,
  `gen_ai.system_instructions`, JSON text or structured values) or the older
  event form (`gen_ai.system.message`, `gen_ai.user.message`,
  `gen_ai.assistant.message`, `gen_ai.choice` span events). Trace and span ids
  may be hex (the collector) or base64 (protobuf's JSON mapping);
- LangSmith run exports (JSON Lines of runs: `run_type`, `inputs`, `outputs`,
  `extra.metadata`, times, tokens, cost, `feedback_stats`): runs of type
  "llm" are calls, every other type is skipped;
- Langfuse exports (JSON array or JSON Lines of traces with their
  `observations`, or of observations): observations of type GENERATION are
  calls; a trace's metadata, tags and `scores` go with its generations;
- LiteLLM proxy logs: its `StandardLoggingPayload` (`call_type`, `messages`,
  `response`, `response_cost`, `model_id`, `metadata.requester_metadata`).

Every value is untrusted: metadata whose name or value looks like a secret is
dropped (`core.ground.credentials.looks_like_secret`), texts are bounded (`MAX_ANSWER_CHARS`,
`MAX_FIELD_CHARS`), numbers must be finite and in range, and the file is read
through `core.ground.inputs` (bounded, strict UTF-8, `FILE:LINE` errors).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from core.ground.credentials import looks_like_secret
from core.ground.inputs import InputError, decode, lines, loads, open_input, read_input, shown_name
from core.ground.jsonl import json_objects
from core.ground.text import one_line

class TraceError(ValueError):
    """An unusable trace export; the message names the file and line (and span)."""


@dataclass(frozen=True, slots=True)
class LoggedAnswer:
    """What production answered a call: kept in a case by `lineup sample
    --keep-answers`, run as a contestant by `lineup run --with-logged`. Its
    timing is the log's, never mixed with measured ones."""

    text: str
    model: str | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None


KINDS = ("otlp", "langsmith", "langfuse", "litellm")
SKIP_NOT_LLM = "not an LLM call (another span or run of the trace)"
MAX_ANSWER_CHARS = 200_000
MAX_FIELD_CHARS = 1_000
MAX_MS = 86_400_000.0           # a day: a longer time is not a request's
MAX_TOKENS = 10_000_000
MAX_COST = 10_000.0
_SECRET_NAME = re.compile(r"api[_-]?key|authorization|token|secret|password|cookie", re.IGNORECASE)

_SNIFF = (
    ("otlp", re.compile(rb'"resourceSpans"\s*:')),
    ("langsmith", re.compile(rb'"run_type"\s*:')),
    ("litellm", re.compile(rb'"call_type"\s*:')),
    ("langfuse", re.compile(rb'"(?:observations|completionStartTime|calculatedTotalCost)"\s*:|'
                            rb'"type"\s*:\s*"(?:GENERATION|SPAN|EVENT)"')),
)


def sniff(head: bytes) -> str | None:
    """The trace format a file's first bytes show (one of `KINDS`), or None."""
    for kind, pattern in _SNIFF:
        if pattern.search(head):
            return kind
    return None


@dataclass
class TraceCall:
    """One LLM call of a trace, in every format's terms."""

    where: str                      # FILE:LINE (and the span / observation)
    source: str                     # a case's tag: "line3.span2"
    order: int
    fields: dict[str, Any]          # what --by / --category paths look into (scrubbed)
    messages: list[Any] | str | None = None   # OpenAI-style chat messages, or a text prompt
    system: str | None = None
    answer: str | None = None
    model: str | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    error: str | None = None
    trace_id: str | None = None
    feedback: float | None = None    # what the trace itself says the user thought (0..1)

    def logged(self) -> LoggedAnswer | None:
        """The answer production gave, as a case keeps it (None: none logged)."""
        if self.answer is None or self.error is not None:
            return None
        return LoggedAnswer(text=self.answer[:MAX_ANSWER_CHARS], model=self.model, latency_ms=self.latency_ms, ttft_ms=self.ttft_ms,
                            input_tokens=self.input_tokens, output_tokens=self.output_tokens, cost=self.cost)


@dataclass
class TraceFile:
    kind: str
    calls: list[TraceCall] = field(default_factory=list)
    skipped: int = 0                 # spans / runs that are no LLM call
    first_skipped: str = ""

    def detail(self) -> str:
        return f"{_KIND_NAMES[self.kind]}: {len(self.calls)} LLM call(s)" + \
            (f", {self.skipped} other span(s) or run(s)" if self.skipped else "")


_KIND_NAMES = {"otlp": "OpenTelemetry GenAI spans (OTLP JSON)", "langsmith": "LangSmith runs",
               "langfuse": "Langfuse generations", "litellm": "LiteLLM logging payloads"}


# ---------------------------------------------------------------- untrusted values


def _obj(holder: Any, key: str) -> dict[str, Any]:
    """`holder[key]` when both are objects, else an empty one."""
    value = holder.get(key) if isinstance(holder, dict) else None
    return value if isinstance(value, dict) else {}


def _text(value: Any, limit: int = MAX_FIELD_CHARS) -> str | None:
    if value is None:
        return None
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False) \
        if isinstance(value, (dict, list)) else str(value)
    return s[:limit]


def _number(value: Any, upper: float) -> float | None:
    """A finite number in [0, upper] (numbers given as text too), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, (int, float)):
        return None
    x = float(value)
    return x if math.isfinite(x) and 0 <= x <= upper else None


def _count(value: Any) -> int | None:
    x = _number(value, MAX_TOKENS)
    return int(x) if x is not None else None


def _scrubbed(obj: Any, depth: int = 0) -> Any:
    """Metadata without what looks like a secret (by its name or its value),
    strings bounded; a copy."""
    if depth > 20:
        return None
    if isinstance(obj, dict):
        return {str(k)[:200]: _scrubbed(v, depth + 1) for k, v in obj.items()
                if not _SECRET_NAME.search(str(k)) and not (isinstance(v, str) and looks_like_secret(v))}
    if isinstance(obj, list):
        return [_scrubbed(v, depth + 1) for v in obj[:1000]]
    if isinstance(obj, str):
        return obj[:MAX_FIELD_CHARS]
    return obj


def _when(value: Any) -> float | None:
    """Seconds since the epoch from an ISO 8601 time or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        x = float(value)
        return x if math.isfinite(x) else None
    if isinstance(value, str) and value:
        text = value.strip().replace("Z", "+00:00")
        try:
            stamp = datetime.fromisoformat(text)
        except ValueError:
            return None
        if stamp.tzinfo is None:
            from datetime import timezone
            stamp = stamp.replace(tzinfo=timezone.utc)
        return stamp.timestamp()
    return None


def _span_ms(start: Any, end: Any) -> float | None:
    a, b = _when(start), _when(end)
    if a is None or b is None:
        return None
    return _number((b - a) * 1000.0, MAX_MS)


def feedback_value(value: Any) -> float | None:
    """A user's judgement as a score in [0, 1]: thumbs (up/down, true/false,
    1/0/-1), or a score already in [0, 1]; None for anything else."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("up", "thumbs_up", "thumbsup", "+1", "👍", "good", "positive", "yes", "like", "true"):
            return 1.0
        if word in ("down", "thumbs_down", "thumbsdown", "-1", "👎", "bad", "negative", "no", "dislike", "false"):
            return 0.0
        try:
            value = float(word)
        except ValueError:
            return None
    if isinstance(value, (int, float)):
        x = float(value)
        if x == -1:
            return 0.0
        return x if math.isfinite(x) and 0.0 <= x <= 1.0 else None
    return None


def _content_text(content: Any) -> str | None:
    """An answer's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                for key in ("text", "content"):
                    if isinstance(part.get(key), str) and part.get("type") in (None, "text", "output_text"):
                        texts.append(part[key])
                        break
        return "\n\n".join(texts) if texts else None
    return None


def _answer_of(output: Any) -> str | None:
    """The answer's text from an output in the shapes the formats log: text,
    a message, OpenAI choices, LangChain generations, `{"output": ...}`."""
    if output is None or isinstance(output, str):
        return output
    if isinstance(output, list):
        got = _content_text(output)
        if got is not None:
            return got
        return _answer_of(output[0]) if output else None
    if not isinstance(output, dict):
        return None
    choices = output.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        msg = choices[0].get("message")
        if isinstance(msg, dict):
            return _content_text(msg.get("content"))
        return _content_text(choices[0].get("text"))
    gens = output.get("generations")
    if isinstance(gens, list) and gens:
        first = gens[0][0] if isinstance(gens[0], list) and gens[0] else gens[0]
        if isinstance(first, dict):
            if isinstance(first.get("text"), str) and first["text"]:
                return first["text"]
            return _answer_of(first.get("message"))
    if isinstance(output.get("kwargs"), dict):          # a serialised LangChain message
        return _content_text(output["kwargs"].get("content"))
    for key in ("content", "output", "text", "completion"):
        if key in output:
            return _answer_of(output[key]) if not isinstance(output[key], str) else output[key]
    return None


# LangChain message types and class names -> chat roles.
_LC_ROLES = {"human": "user", "humanmessage": "user", "ai": "assistant", "aimessage": "assistant",
             "aimessagechunk": "assistant", "system": "system", "systemmessage": "system", "tool": "tool",
             "toolmessage": "tool", "function": "tool", "functionmessage": "tool", "chat": "user",
             "chatmessage": "user"}


def _lc_message(m: Any) -> Any:
    """A LangChain message (serialised `{"lc": 1, "id": [...], "kwargs": ...}`,
    or `{"type": "human", "content": ...}`) as an OpenAI-style message."""
    if not isinstance(m, dict) or "role" in m:
        return m
    kwargs = _obj(m, "kwargs") or _obj(m, "data") or m
    kind = None
    if isinstance(m.get("id"), list) and m["id"]:
        kind = str(m["id"][-1]).lower()
    elif isinstance(m.get("type"), str):
        kind = m["type"].lower()
    role = _LC_ROLES.get(kind or "", kind)
    out: dict[str, Any] = {"role": role, "content": kwargs.get("content")}
    if kwargs.get("tool_calls") or (isinstance(kwargs.get("additional_kwargs"), dict)
                                    and kwargs["additional_kwargs"].get("tool_calls")):
        out["tool_calls"] = True
    return out


# ---------------------------------------------------------------- OpenTelemetry (OTLP JSON)


def _any_value(v: Any, depth: int = 0) -> Any:
    """An OTLP `AnyValue` as a Python value."""
    if not isinstance(v, dict) or depth > 30:
        return None
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return None
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        values = v["arrayValue"].get("values") if isinstance(v["arrayValue"], dict) else None
        return [_any_value(x, depth + 1) for x in values or []]
    if "kvlistValue" in v:
        values = v["kvlistValue"].get("values") if isinstance(v["kvlistValue"], dict) else None
        return _attributes(values, depth + 1)
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attributes(items: Any, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in items if isinstance(items, list) else []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = _any_value(kv.get("value"), depth)
    return out


def _hex_id(value: Any) -> str | None:
    """A trace id as lowercase hex: the collector writes hex, protobuf's JSON base64."""
    if not isinstance(value, str) or not value:
        return None
    if re.fullmatch(r"[0-9a-fA-F]{16,32}", value):
        return value.lower()
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        return one_line(value, 64)


def _json_value(value: Any, where: str, name: str) -> Any:
    """An attribute that holds JSON: as text (what the SDK allows), or structured."""
    if isinstance(value, str):
        try:
            return loads(value, where)
        except InputError:
            raise TraceError(f"{where}: {name}: not valid JSON") from None
    return value


def _otel_parts(parts: Any) -> Any:
    """GenAI semantic-convention message parts as OpenAI-style content parts."""
    if isinstance(parts, str):
        return parts
    out: list[Any] = []
    for p in parts if isinstance(parts, list) else []:
        if not isinstance(p, dict):
            out.append(p)
            continue
        kind = p.get("type")
        if kind == "text":
            out.append({"type": "text", "text": p.get("content") if isinstance(p.get("content"), str) else ""})
        elif kind in ("tool_call", "tool_call_response"):
            out.append({"type": "tool_use"})
        elif kind == "reasoning":
            out.append({"type": "reasoning"})
        elif kind == "blob" and p.get("modality") == "image" and isinstance(p.get("content"), str):
            mime = p.get("mime_type") if isinstance(p.get("mime_type"), str) else "image/png"
            out.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{p['content']}"}})
        elif kind == "uri" and p.get("modality") == "image" and isinstance(p.get("uri"), str):
            out.append({"type": "image_url", "image_url": {"url": p["uri"]}})
        else:
            out.append({"type": "file" if kind in ("blob", "uri", "file") else kind})
    return out


def _otel_messages(value: Any, where: str, name: str) -> list[Any]:
    got = _json_value(value, where, name)
    if not isinstance(got, list):
        raise TraceError(f"{where}: {name}: expected a list of messages")
    msgs = []
    for i, m in enumerate(got):
        if not isinstance(m, dict):
            raise TraceError(f"{where}: {name}[{i}]: expected a message (an object)")
        msgs.append({"role": m.get("role"), "content": _otel_parts(m.get("parts", m.get("content")))})
    return msgs


_EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


def _event_content(value: Any) -> Any:
    """An event's `content`: text, or JSON text of content parts."""
    if isinstance(value, str) and value.lstrip().startswith("[{"):
        try:
            parts = json.loads(value)
        except ValueError:
            return value
        return parts if isinstance(parts, list) else value
    return value


def _otel_span(span: dict[str, Any], resource: dict[str, Any], where: str, source: str, order: int
               ) -> TraceCall | None:
    attrs = _attributes(span.get("attributes"))
    events = [(e.get("name"), _attributes(e.get("attributes")), e.get("timeUnixNano"))
              for e in span.get("events") or [] if isinstance(e, dict)]
    is_llm = any(k in attrs for k in ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.system",
                                      "gen_ai.provider.name", "gen_ai.input.messages")) \
        or any(isinstance(n, str) and n.startswith("gen_ai.") for n, _, _ in events)
    if not is_llm or attrs.get("gen_ai.operation.name") in ("embeddings", "execute_tool", "create_agent",
                                                            "invoke_agent"):
        return None
    fields = _scrubbed({**resource, **attrs})
    call = TraceCall(where=where, source=source, order=order, fields=fields)
    if "gen_ai.input.messages" in attrs:
        call.messages = _otel_messages(attrs["gen_ai.input.messages"], where, "gen_ai.input.messages")
        if "gen_ai.system_instructions" in attrs:
            instr = _json_value(attrs["gen_ai.system_instructions"], where, "gen_ai.system_instructions")
            call.system = _content_text(_otel_parts(instr)) if not isinstance(instr, str) else instr
        if "gen_ai.output.messages" in attrs:
            out = _otel_messages(attrs["gen_ai.output.messages"], where, "gen_ai.output.messages")
            call.answer = _content_text(out[0]["content"]) if out else None
    else:
        msgs: list[Any] = []
        for name, ev, _ in events:
            if name in _EVENT_ROLES:
                m: dict[str, Any] = {"role": _EVENT_ROLES[name], "content": _event_content(ev.get("content"))}
                if ev.get("tool_calls"):
                    m["tool_calls"] = True
                msgs.append(m)
            elif name == "gen_ai.choice" and call.answer is None:
                message = ev.get("message")
                if isinstance(message, str):
                    try:
                        message = json.loads(message)
                    except ValueError:
                        message = {"content": message}
                content = message.get("content") if isinstance(message, dict) else ev.get("content")
                call.answer = _content_text(_event_content(content))
        call.messages = msgs or None
    call.model = _text(attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model"), 200)
    start, end = span.get("startTimeUnixNano"), span.get("endTimeUnixNano")
    try:
        call.latency_ms = _number((int(end) - int(start)) / 1e6, MAX_MS) if start and end else None
    except (TypeError, ValueError):
        call.latency_ms = None
    first = attrs.get("gen_ai.response.time_to_first_chunk", attrs.get("gen_ai.server.time_to_first_token"))
    call.ttft_ms = _number(first * 1000.0, MAX_MS) if isinstance(first, (int, float)) else None
    for name, _, t in events:
        if call.ttft_ms is None and name in ("gen_ai.content.first_chunk", "first_token") and t and start:
            try:
                call.ttft_ms = _number((int(t) - int(start)) / 1e6, MAX_MS)
            except (TypeError, ValueError):
                pass
    call.input_tokens = _count(attrs.get("gen_ai.usage.input_tokens", attrs.get("gen_ai.usage.prompt_tokens")))
    call.output_tokens = _count(attrs.get("gen_ai.usage.output_tokens",
                                          attrs.get("gen_ai.usage.completion_tokens")))
    call.cost = _number(attrs.get("gen_ai.usage.cost", attrs.get("gen_ai.cost")), MAX_COST)
    status = _obj(span, "status")
    if status.get("code") in (2, "STATUS_CODE_ERROR") or attrs.get("error.type"):
        call.error = _text(attrs.get("error.type") or status.get("message") or "error", 200)
    call.trace_id = _hex_id(span.get("traceId"))
    return call


def _otlp(doc: dict[str, Any], where: str, source: str, order: int, out: TraceFile) -> Iterator[TraceCall]:
    rs = doc.get("resourceSpans")
    if not isinstance(rs, list):
        raise TraceError(f"{where}: resourceSpans: expected a list")
    k = 0
    for r in rs:
        if not isinstance(r, dict):
            raise TraceError(f"{where}: resourceSpans: expected objects")
        res = r.get("resource")
        resource = _attributes(res.get("attributes")) if isinstance(res, dict) else {}
        for scope in r.get("scopeSpans") or r.get("instrumentationLibrarySpans") or []:
            for span in scope.get("spans") or [] if isinstance(scope, dict) else []:
                k += 1
                if not isinstance(span, dict):
                    raise TraceError(f"{where}: span {k}: expected an object")
                here = f"{where} (span {k})"
                call = _otel_span(span, resource, here, f"{source}.span{k}", order * 10_000 + k)
                if call is None:
                    out.skipped += 1
                    out.first_skipped = out.first_skipped or \
                        f"{here}: {one_line(span.get('name'), 60)}"
                    continue
                yield call


# ---------------------------------------------------------------- LangSmith


def _langsmith(run: dict[str, Any], where: str, source: str, order: int, out: TraceFile) -> Iterator[TraceCall]:
    if run.get("run_type") != "llm":
        out.skipped += 1
        out.first_skipped = out.first_skipped or f"{where}: run_type {one_line(run.get('run_type'), 40)}"
        return
    extra = _obj(run, "extra")
    metadata = _obj(extra, "metadata")
    fields = _scrubbed({**metadata, **{k: v for k, v in run.items() if k not in ("inputs", "outputs")}})
    call = TraceCall(where=where, source=source, order=order, fields=fields)
    inputs = _obj(run, "inputs")
    msgs = inputs.get("messages")
    if isinstance(msgs, list):
        if msgs and isinstance(msgs[0], list):    # one list per prompt of a batch: the first
            msgs = msgs[0]
        call.messages = [_lc_message(m) for m in msgs]
    elif isinstance(inputs.get("prompts"), list) and inputs["prompts"]:
        call.messages = inputs["prompts"][0] if isinstance(inputs["prompts"][0], str) else None
    elif isinstance(inputs.get("prompt"), str):
        call.messages = inputs["prompt"]
    elif isinstance(inputs.get("input"), str):
        call.messages = inputs["input"]
    call.answer = _answer_of(run.get("outputs"))
    invocation = _obj(extra, "invocation_params")
    call.model = _text(metadata.get("ls_model_name") or invocation.get("model") or invocation.get("model_name"), 200)
    call.latency_ms = _span_ms(run.get("start_time"), run.get("end_time"))
    call.ttft_ms = _span_ms(run.get("start_time"), run.get("first_token_time"))
    call.input_tokens = _count(run.get("prompt_tokens"))
    call.output_tokens = _count(run.get("completion_tokens"))
    call.cost = _number(run.get("total_cost"), MAX_COST)
    call.error = _text(run.get("error"), 200) if run.get("error") else None
    call.trace_id = _text(run.get("trace_id") or run.get("id"), 100)
    stats = run.get("feedback_stats")
    if isinstance(stats, dict):
        for value in stats.values():
            if isinstance(value, dict) and "avg" in value:
                call.feedback = feedback_value(value["avg"])
                break
    yield call


# ---------------------------------------------------------------- Langfuse


def _langfuse_generation(obs: dict[str, Any], trace: dict[str, Any], where: str, source: str,
                         order: int) -> TraceCall:
    meta = _obj(obs, "metadata")
    tmeta = _obj(trace, "metadata")
    tfields = {k: v for k, v in trace.items() if k not in ("input", "output", "observations", "scores")}
    fields = _scrubbed({**tmeta, **meta, "trace": tfields, **{k: v for k, v in obs.items()
                                                               if k not in ("input", "output")}})
    call = TraceCall(where=where, source=source, order=order, fields=fields)
    value = obs.get("input")
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    call.messages = value if isinstance(value, (list, str)) else None
    call.answer = _answer_of(obs.get("output"))
    call.model = _text(obs.get("model"), 200)
    call.latency_ms = _span_ms(obs.get("startTime"), obs.get("endTime"))
    call.ttft_ms = _span_ms(obs.get("startTime"), obs.get("completionStartTime"))
    usage = _obj(obs, "usageDetails") or _obj(obs, "usage")
    call.input_tokens = _count(usage.get("input", usage.get("promptTokens")))
    call.output_tokens = _count(usage.get("output", usage.get("completionTokens")))
    costs = _obj(obs, "costDetails")
    call.cost = _number(costs.get("total", obs.get("calculatedTotalCost", obs.get("totalCost"))), MAX_COST)
    if obs.get("level") == "ERROR":
        call.error = _text(obs.get("statusMessage") or "error", 200)
    call.trace_id = _text(obs.get("traceId") or trace.get("id"), 100)
    for score in trace.get("scores") or [] if isinstance(trace.get("scores"), list) else []:
        if isinstance(score, dict) and call.feedback is None:
            call.feedback = feedback_value(score.get("value", score.get("stringValue")))
    return call


def _langfuse(obj: dict[str, Any], where: str, source: str, order: int, out: TraceFile) -> Iterator[TraceCall]:
    if isinstance(obj.get("observations"), list):     # a trace with its observations
        observations = [(o, f"{where} (observation {k})", f"{source}.obs{k}")
                        for k, o in enumerate(obj["observations"], 1)]
        trace = obj
    else:
        observations, trace = [(obj, where, source)], {}
    for k, (o, here, src) in enumerate(observations):
        if not isinstance(o, dict):      # an id only: the observation is not in this export
            out.skipped += 1
            out.first_skipped = out.first_skipped or f"{here}: an observation given by id only"
            continue
        if o.get("type") != "GENERATION":
            out.skipped += 1
            out.first_skipped = out.first_skipped or f"{here}: type {one_line(o.get('type'), 40)}"
            continue
        yield _langfuse_generation(o, trace, here, src, order * 10_000 + k)


# ---------------------------------------------------------------- LiteLLM


def _litellm(p: dict[str, Any], where: str, source: str, order: int, out: TraceFile) -> Iterator[TraceCall]:
    if p.get("call_type") not in ("completion", "acompletion", "text_completion", "atext_completion",
                                  "responses", "aresponses", "anthropic_messages"):
        out.skipped += 1
        out.first_skipped = out.first_skipped or f"{where}: call_type {one_line(p.get('call_type'), 40)}"
        return
    meta = _obj(p, "metadata")
    requester = _obj(meta, "requester_metadata")
    fields = _scrubbed({**meta, **requester, **{k: v for k, v in p.items()
                                                if k not in ("messages", "response", "metadata")},
                        "metadata": meta})
    call = TraceCall(where=where, source=source, order=order, fields=fields)
    msgs = p.get("messages")
    call.messages = msgs if isinstance(msgs, (list, str)) else None
    call.answer = _answer_of(p.get("response"))
    call.model = _text(p.get("model"), 200)
    call.latency_ms = _span_ms(p.get("startTime"), p.get("endTime"))
    if p.get("completionStartTime") != p.get("endTime"):    # LiteLLM sets it to the end when not streamed
        call.ttft_ms = _span_ms(p.get("startTime"), p.get("completionStartTime"))
    call.input_tokens = _count(p.get("prompt_tokens"))
    call.output_tokens = _count(p.get("completion_tokens"))
    call.cost = _number(p.get("response_cost"), MAX_COST)
    if p.get("status") == "failure":
        info = _obj(p, "error_information")
        call.error = _text(info.get("error_class") or p.get("error_str") or "error", 200)
    call.trace_id = _text(p.get("trace_id") or p.get("id"), 100)
    yield call


_READERS = {"otlp": _otlp, "langsmith": _langsmith, "langfuse": _langfuse, "litellm": _litellm}


# ---------------------------------------------------------------- files


def _documents(path: Path) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
    """(order, where, source, object) for each record of a JSON Lines file or
    a JSON document (an array of records, or one record; Langfuse's
    `{"data": [...]}` page too)."""
    shown = shown_name(path)
    try:
        with open_input(path, limit=0) as f:
            head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except InputError as exc:
        raise TraceError(str(exc)) from None
    whole = None
    if head[:1] == b"[":
        whole = True
    elif head[:1] == b"{":
        whole = False
        try:   # one document spread over lines (pretty-printed) is read whole
            first = head.split(b"\n", 1)[0].strip()
            json.loads(first)
        except ValueError:
            whole = b"\n" in head
    if whole:
        try:
            value = loads(decode(read_input(path), shown), shown)
        except InputError as exc:
            raise TraceError(str(exc)) from None
        if isinstance(value, dict) and isinstance(value.get("data"), list):
            value = value["data"]
        items = value if isinstance(value, list) else [value]
        for i, obj in enumerate(items):
            if not isinstance(obj, dict):
                raise TraceError(f"{shown}:[{i}]: a record must be a JSON object, not {type(obj).__name__}")
            yield i, f"{shown}:[{i}]", f"[{i}]", obj
        return
    try:
        f = open_input(path)
    except InputError as exc:
        raise TraceError(str(exc)) from None
    with f:
        for lineno, where, obj, problem in json_objects(lines(f, shown), shown, "a trace record"):
            if problem:
                raise TraceError(problem)
            assert obj is not None
            if isinstance(obj.get("data"), list):        # a page of an API's export on one line
                for i, item in enumerate(obj["data"]):
                    if not isinstance(item, dict):
                        raise TraceError(f"{where}: data[{i}]: a record must be a JSON object")
                    yield lineno * 100_000 + i, f"{where}: data[{i}]", f"line{lineno}.{i}", item
                continue
            yield lineno, where, f"line{lineno}", obj


def read_trace_file(path: str | Path, kind: str | None = None) -> TraceFile:
    """Every LLM call of a trace export, in file order; `kind` None: sniffed."""
    path = Path(path)
    if kind is None:
        try:
            with open_input(path, limit=0) as f:
                kind = sniff(f.read(65536))
        except InputError as exc:
            raise TraceError(str(exc)) from None
        if kind is None:
            raise TraceError(f"{shown_name(path)}: not a trace export lineup reads (OTLP JSON, LangSmith runs, "
                           f"Langfuse traces or observations, LiteLLM logging payloads)")
    out = TraceFile(kind)
    reader = _READERS[kind]
    for order, where, source, obj in _documents(path):
        out.calls.extend(reader(obj, where, source, order, out))
    return out


def read_calls(paths: Iterable[str | Path]) -> tuple[list[TraceCall], list[TraceFile]]:
    """Every LLM call of several trace exports (a canary's), and each file's tally."""
    calls: list[TraceCall] = []
    files = []
    for p in paths:
        got = read_trace_file(p)
        files.append(got)
        calls.extend(got.calls)
    return calls, files
