"""Trace exports made the way their producers make them, for the trace
readers' and the canary's tests.

- OpenTelemetry: real spans from the SDK (`opentelemetry-sdk`) with GenAI
  attributes or events, encoded by the SDK's own OTLP encoder and written as
  the Collector's file exporter writes them (OTLP JSON, one export request per
  line, trace and span ids in hex);
- LangSmith: runs in the `langsmith.schemas.Run` shape (validated by that
  model and serialised by it when the `langsmith` package is installed);
- Langfuse: traces and GENERATION observations in the shape of its public API
  (`/api/public/traces`, `/api/public/observations`);
- LiteLLM: its `StandardLoggingPayload` (keys checked against litellm's own
  TypedDict when litellm is installed).
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc)


# ---------------------------------------------------------------- OpenTelemetry

class OtelRecorder:
    """A tracer provider whose finished spans are kept in memory, written out
    as OTLP JSON by `write`."""

    def __init__(self, service: str = "chat-api") -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests.trace_producers")

    def chat(self, messages: list[dict[str, Any]], answer: str | None, *, model: str = "gpt-4o",
             system: str | None = None, attrs: dict[str, Any] | None = None, form: str = "attributes",
             start_ns: int = 1_700_000_000_000_000_000, latency_ms: float = 800.0, ttft_ms: float | None = None,
             tokens: tuple[int, int] = (12, 30), error: str | None = None, parent: bool = False) -> str:
        """One chat call as a GenAI span (inside an app span when `parent`); its trace id (hex)."""
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        def body() -> str:
            span = self.tracer.start_span(f"chat {model}", kind=trace.SpanKind.CLIENT, start_time=start_ns)
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.provider.name", "openai")
            span.set_attribute("gen_ai.request.model", model)
            span.set_attribute("gen_ai.response.model", model)
            span.set_attribute("gen_ai.usage.input_tokens", tokens[0])
            span.set_attribute("gen_ai.usage.output_tokens", tokens[1])
            if form == "attributes":
                span.set_attribute("gen_ai.input.messages", json.dumps([
                    {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages]))
                if system:
                    span.set_attribute("gen_ai.system_instructions",
                                       json.dumps([{"type": "text", "content": system}]))
                if answer is not None:
                    span.set_attribute("gen_ai.output.messages", json.dumps([
                        {"role": "assistant", "parts": [{"type": "text", "content": answer}],
                         "finish_reason": "stop"}]))
            else:      # the older event form
                if system:
                    span.add_event("gen_ai.system.message", {"content": system}, timestamp=start_ns)
                for m in messages:
                    span.add_event(f"gen_ai.{m['role']}.message", {"content": m["content"]}, timestamp=start_ns)
                if answer is not None:
                    span.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                                     "message": json.dumps({"role": "assistant",
                                                                            "content": answer})},
                                   timestamp=start_ns + int(latency_ms * 1e6))
            if ttft_ms is not None:
                span.add_event("gen_ai.content.first_chunk", timestamp=start_ns + int(ttft_ms * 1e6))
            for k, v in (attrs or {}).items():
                span.set_attribute(k, v)
            if error:
                span.set_attribute("error.type", error)
                span.set_status(Status(StatusCode.ERROR, error))
            trace_id = format(span.get_span_context().trace_id, "032x")
            span.end(end_time=start_ns + int(latency_ms * 1e6))
            return trace_id

        if not parent:
            return body()
        with self.tracer.start_as_current_span("POST /chat", start_time=start_ns - 1000) as app:
            with self.tracer.start_as_current_span("retrieve documents", start_time=start_ns - 500):
                pass
            got = body()
            app.set_attribute("http.route", "/chat")
        return got

    def write(self, path: Path) -> Path:
        """The finished spans as the Collector's file exporter writes them."""
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        doc = MessageToDict(encode_spans(self.exporter.get_finished_spans()))

        def hexed(obj: Any) -> Any:      # OTLP/JSON ids are hex, protobuf's JSON mapping base64
            if isinstance(obj, dict):
                return {k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else hexed(v)
                        for k, v in obj.items()}
            if isinstance(obj, list):
                return [hexed(v) for v in obj]
            return obj

        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(hexed(doc)) + "\n")
        self.exporter.clear()
        return path


# ---------------------------------------------------------------- LangSmith

def _lc(role: str, content: str) -> dict[str, Any]:
    cls = {"user": "HumanMessage", "assistant": "AIMessage", "system": "SystemMessage"}[role]
    kind = {"user": "human", "assistant": "ai", "system": "system"}[role]
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", cls],
            "kwargs": {"content": content, "type": kind}}


def langsmith_run(messages: list[dict[str, Any]], answer: str | None, *, run_type: str = "llm",
                  model: str = "gpt-4o", metadata: dict[str, Any] | None = None, latency_ms: float = 900.0,
                  ttft_ms: float | None = 200.0, tokens: tuple[int, int] = (10, 20), cost: float | None = 0.0004,
                  error: str | None = None, feedback: float | None = None, at: int = 0,
                  trace_id: str | None = None) -> dict[str, Any]:
    start = T0 + timedelta(seconds=at)
    run_id = uuid.uuid4()
    run: dict[str, Any] = {
        "id": str(run_id), "name": "ChatOpenAI", "run_type": run_type, "start_time": start.isoformat(),
        "end_time": (start + timedelta(milliseconds=latency_ms)).isoformat(),
        "extra": {"metadata": {"ls_model_name": model, "ls_provider": "openai", **(metadata or {})},
                  "invocation_params": {"model": model}},
        "error": error, "inputs": {"messages": [[_lc(m["role"], m["content"]) for m in messages]]},
        "outputs": None if answer is None else {"generations": [[{
            "text": answer, "type": "ChatGeneration", "message": _lc("assistant", answer)}]]},
        "trace_id": trace_id or str(run_id), "dotted_order": f"{start:%Y%m%dT%H%M%S%fZ}{run_id}",
        "prompt_tokens": tokens[0], "completion_tokens": tokens[1], "total_tokens": sum(tokens),
        "total_cost": None if cost is None else str(cost),
        "first_token_time": None if ttft_ms is None else (start + timedelta(milliseconds=ttft_ms)).isoformat(),
        "feedback_stats": None if feedback is None else {"user_score": {"n": 1, "avg": feedback}},
        "tags": [],
    }
    try:
        from langsmith.schemas import Run
    except ImportError:
        return run
    return json.loads(Run(**run).model_dump_json())      # the documented shape, as the SDK serialises it


# ---------------------------------------------------------------- Langfuse

def langfuse_trace(messages: list[dict[str, Any]], answer: str | None, *, model: str = "gpt-4o",
                   metadata: dict[str, Any] | None = None, latency_ms: float = 900.0, ttft_ms: float | None = 250.0,
                   tokens: tuple[int, int] = (10, 20), cost: float | None = 0.0004, error: str | None = None,
                   score: Any = None, at: int = 0, with_span: bool = True) -> dict[str, Any]:
    """A trace as `GET /api/public/traces/{id}` gives it: its observations
    (a SPAN and the GENERATION) and scores inline."""
    start = T0 + timedelta(seconds=at)
    trace_id = uuid.uuid4().hex
    end = start + timedelta(milliseconds=latency_ms)
    generation = {
        "id": uuid.uuid4().hex, "traceId": trace_id, "type": "GENERATION", "name": "chat",
        "startTime": start.isoformat().replace("+00:00", "Z"), "endTime": end.isoformat().replace("+00:00", "Z"),
        "completionStartTime": None if ttft_ms is None else
        (start + timedelta(milliseconds=ttft_ms)).isoformat().replace("+00:00", "Z"),
        "model": model, "modelParameters": {"temperature": 0.2}, "input": messages,
        "output": None if answer is None else {"role": "assistant", "content": answer},
        "usageDetails": {"input": tokens[0], "output": tokens[1], "total": sum(tokens)},
        "costDetails": {} if cost is None else {"total": cost}, "metadata": metadata or {},
        "level": "ERROR" if error else "DEFAULT", "statusMessage": error, "parentObservationId": None,
    }
    observations = [generation]
    if with_span:
        observations.insert(0, {"id": uuid.uuid4().hex, "traceId": trace_id, "type": "SPAN", "name": "retrieve",
                                "startTime": start.isoformat(), "endTime": start.isoformat(), "metadata": {}})
    return {
        "id": trace_id, "timestamp": start.isoformat().replace("+00:00", "Z"), "name": "chat-request",
        "input": messages[-1]["content"], "output": answer, "metadata": metadata or {}, "tags": [],
        "userId": "u1", "sessionId": None, "observations": observations,
        "scores": [] if score is None else [{"id": uuid.uuid4().hex, "traceId": trace_id, "name": "user-feedback",
                                             "value": score, "dataType": "NUMERIC", "source": "API"}],
    }


# ---------------------------------------------------------------- LiteLLM

def litellm_payload(messages: list[dict[str, Any]], answer: str | None, *, model: str = "gpt-4o",
                    model_id: str | None = None, model_group: str = "chat", requester: dict[str, Any] | None = None,
                    latency_ms: float = 900.0, ttft_ms: float | None = 250.0, tokens: tuple[int, int] = (10, 20),
                    cost: float = 0.0004, error: str | None = None, at: int = 0,
                    call_type: str = "acompletion") -> dict[str, Any]:
    """A `StandardLoggingPayload` as LiteLLM's custom / file loggers write it."""
    start = T0.timestamp() + at
    payload: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "trace_id": str(uuid.uuid4()), "call_type": call_type,
        "stream": ttft_ms is not None, "response_cost": cost, "status": "failure" if error else "success",
        "custom_llm_provider": "openai", "total_tokens": sum(tokens), "prompt_tokens": tokens[0],
        "completion_tokens": tokens[1], "startTime": start, "endTime": start + latency_ms / 1000,
        "completionStartTime": start + (ttft_ms if ttft_ms is not None else latency_ms) / 1000,
        "response_time": latency_ms / 1000, "model": model, "model_id": model_id, "model_group": model_group,
        "api_base": "https://api.openai.com/v1",
        "metadata": {"user_api_key_hash": "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",
                     "user_api_key_alias": None, "requester_metadata": requester or {},
                     "spend_logs_metadata": None},
        "cache_hit": False, "request_tags": [], "end_user": "u1", "messages": messages,
        "response": None if answer is None else {
            "id": "chatcmpl-1", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": answer}}]},
        "error_str": error, "error_information": {"error_class": error, "error_message": error} if error else None,
        "model_parameters": {"temperature": 0.2}, "hidden_params": {"model_id": model_id},
    }
    try:
        from litellm.types.utils import StandardLoggingPayload
    except ImportError:
        return payload
    unknown = set(payload) - set(StandardLoggingPayload.__annotations__)
    assert not unknown, f"not StandardLoggingPayload keys: {unknown}"
    return payload


def write_lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
