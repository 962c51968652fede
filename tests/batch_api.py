"""The batch APIs of the loopback test server (`tests/server.py`), in their
documented request and response formats.

OpenAI: `POST /v1/files` (multipart, `purpose=batch`, a JSONL `file`) ->
file object; `POST /v1/batches` (`input_file_id`, `endpoint`,
`completion_window`, `metadata`) -> batch object (`validating`);
`GET /v1/batches/{id}` moves it on, one step per poll, through
`in_progress` to `completed` (or `expired`, or `failed` with `errors.data`)
with `request_counts`, `output_file_id` and `error_file_id`;
`GET /v1/batches?limit=N` lists them (newest first, with their metadata);
`GET /v1/files/{id}/content` is the JSONL (results: `id`, `custom_id`,
`response` {`status_code`, `request_id`, `body`}, `error`).

Anthropic: `POST /v1/messages/batches` (`requests`: `custom_id`, `params`)
-> message batch (`in_progress`, `request_counts`); `GET
/v1/messages/batches/{id}` moves it on to `ended` with `results_url`;
`GET .../results` is the JSONL (`custom_id`, `result` of type succeeded with
a `message`, errored with an error, canceled or expired).

What a request answers is `answer(custom_id, body)` (default: "batch
answer to: <last user message>"): a string, `("error", status, message)`, or
"expired". `polls` is how many polls a batch stays running after it was
created; `hold` keeps every batch running until cleared; `poll_error`
answers OpenAI polls with that HTTP status while set; `expire` ends the
next batches as expired after `expire_after` results; `fail` makes the
next OpenAI batch fail validation (its `errors.data[].message` is
`fail_message`). Every request is in `srv.requests`, so a test counts
submissions (`submissions()`).

Hostile servers: every field a result or a poll carries besides the answer
can be set, as a server that echoes secrets or escape sequences would set it:
`served_model` (`model`), `system_fingerprint` (OpenAI), `finish_reason`
(OpenAI `finish_reason`, Anthropic `stop_reason`; the protocol's own when
None), `tool_calls` (`{"id", "name", "arguments"}` in each answer: OpenAI
`message.tool_calls`, Anthropic `tool_use` blocks) and `extra_counts`
(merged into `request_counts`). `bad_lines` (results line indexes, from 0)
writes only the second half of those lines (not JSON, no request named);
with `bad_lines_named` the first half (still not JSON, its `custom_id`
readable).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

Answer = str | tuple[str, int, str]


def _default_answer(custom_id: str, body: dict[str, Any]) -> Answer:
    messages = body.get("messages") or []
    last = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
    if isinstance(last, list):
        last = " ".join(p.get("text", "") for p in last if isinstance(p, dict))
    return f"batch answer to: {last}"


class BatchService:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.inputs: dict[str, list[dict[str, Any]]] = {}     # batch id -> its requests
        self.answer: Callable[[str, dict[str, Any]], Answer] = _default_answer
        self.polls = 1
        self.hold = False
        self.expire_after: int | None = None
        self.fail = False
        self.poll_error: int | None = None       # answer every poll with this HTTP status while set
        self.served_model = "batch-model-2025"
        self.system_fingerprint = "fp_batch"
        self.finish_reason: str | None = None
        self.tool_calls: list[dict[str, Any]] = []
        self.extra_counts: dict[str, Any] = {}
        self.fail_message = "the input file is invalid (scripted)"
        self.bad_lines: set[int] = set()
        self.bad_lines_named = False
        self._n = 0

    # -- inspection
    def submissions(self, kind: str = "openai") -> int:
        path = "/v1/batches" if kind == "openai" else "/v1/messages/batches"
        return sum(1 for r in self.server.requests if r.method == "POST" and r.path == path)

    @staticmethod
    def handles(path: str) -> bool:
        return path.startswith(("/v1/files", "/v1/batches", "/v1/messages/batches"))

    def _id(self, prefix: str) -> str:
        with self.lock:
            self._n += 1
            return f"{prefix}{self._n:06d}"

    # -- HTTP
    async def respond(self, responder: Any, rec: Any) -> None:
        try:
            status, body, ctype = self._route(rec)
        except _Refuse as exc:
            status, body, ctype = exc.status, json.dumps({"error": {"message": exc.message,
                                                                    "type": "invalid_request_error"}}).encode(), \
                "application/json"
        await responder.head(status, {"content-type": ctype})
        await responder.piece(body)
        await responder.finish()

    def _route(self, rec: Any) -> tuple[int, bytes, str]:
        path, method = rec.path, rec.method
        if path == "/v1/files" and method == "POST":
            return self._upload(rec)
        if path.startswith("/v1/files/") and path.endswith("/content") and method == "GET":
            file_id = path[len("/v1/files/"):-len("/content")]
            if file_id not in self.files:
                raise _Refuse(404, f"No such File object: {file_id}")
            return 200, self.files[file_id], "application/octet-stream"
        if path == "/v1/batches" and method == "POST":
            return self._openai_create(rec.json)
        if path == "/v1/batches" and method == "GET":
            data = sorted((b for b in self.batches.values() if b.get("object") == "batch"),
                          key=lambda b: -b["created_at"])
            return 200, json.dumps({"object": "list", "data": data, "has_more": False}).encode(), "application/json"
        if path.startswith("/v1/batches/") and method == "GET":
            if self.poll_error is not None:
                raise _Refuse(self.poll_error, "scripted poll failure")
            return self._json(self._openai_poll(path[len("/v1/batches/"):]))
        if path == "/v1/messages/batches" and method == "POST":
            return self._anthropic_create(rec.json)
        if path.startswith("/v1/messages/batches/") and path.endswith("/results") and method == "GET":
            batch_id = path[len("/v1/messages/batches/"):-len("/results")]
            if batch_id not in self.files:
                raise _Refuse(404, f"results of {batch_id} are not available")
            return 200, self.files[batch_id], "application/binary"
        if path.startswith("/v1/messages/batches/") and method == "GET":
            return self._json(self._anthropic_poll(path[len("/v1/messages/batches/"):]))
        raise _Refuse(404, f"no such endpoint {method} {path}")

    @staticmethod
    def _json(obj: Any) -> tuple[int, bytes, str]:
        return 200, json.dumps(obj).encode(), "application/json"

    # -- OpenAI
    def _upload(self, rec: Any) -> tuple[int, bytes, str]:
        ctype = rec.headers.get("content-type", "")
        if "multipart/form-data" not in ctype:
            raise _Refuse(400, "files must be uploaded as multipart/form-data")
        msg = BytesParser(policy=HTTP).parsebytes(b"content-type: " + ctype.encode() + b"\r\n\r\n" + rec.body)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if fields.get("purpose", (None, b""))[1] != b"batch" or "file" not in fields:
            raise _Refuse(400, "purpose must be 'batch' and a file given")
        data = fields["file"][1]
        for n, line in enumerate(data.splitlines(), 1):
            try:
                obj = json.loads(line)
            except ValueError:
                raise _Refuse(400, f"line {n} of the input file is not JSON") from None
            if not {"custom_id", "method", "url", "body"} <= set(obj) or obj["url"] != "/v1/chat/completions":
                raise _Refuse(400, f"line {n}: custom_id, method, url /v1/chat/completions and body are required")
            if obj["body"].get("stream"):
                raise _Refuse(400, f"line {n}: streaming is not supported in a batch")
        file_id = self._id("file-")
        self.files[file_id] = data
        return self._json({"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                           "filename": fields["file"][0] or "input.jsonl", "purpose": "batch"})

    def _openai_create(self, body: Any) -> tuple[int, bytes, str]:
        if not isinstance(body, dict) or body.get("input_file_id") not in self.files:
            raise _Refuse(400, "input_file_id must name an uploaded file")
        if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            raise _Refuse(400, "endpoint /v1/chat/completions and completion_window 24h are required")
        batch_id = self._id("batch_")
        lines = [json.loads(x) for x in self.files[body["input_file_id"]].splitlines() if x.strip()]
        self.inputs[batch_id] = lines
        self.batches[batch_id] = {
            "id": batch_id, "object": "batch", "endpoint": body["endpoint"], "errors": None,
            "input_file_id": body["input_file_id"], "completion_window": "24h", "status": "validating",
            "output_file_id": None, "error_file_id": None, "created_at": int(time.time() * 1000),
            "in_progress_at": None, "expires_at": None, "completed_at": None, "failed_at": None, "expired_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata") or {}, "_polls": 0, "_fail": self.fail}
        self.fail = False
        return self._json(self._public(self.batches[batch_id]))

    @staticmethod
    def _public(b: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in b.items() if not k.startswith("_")}

    def _openai_poll(self, batch_id: str) -> dict[str, Any]:
        b = self.batches.get(batch_id)
        if b is None or b.get("object") != "batch":
            raise _Refuse(404, f"No batch found with id '{batch_id}'")
        if b["status"] in ("completed", "failed", "expired"):
            return self._public(b)
        if b["_fail"]:
            b.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": [
                {"code": "invalid_request", "message": self.fail_message, "line": 1}]},
                request_counts={**b["request_counts"], **self.extra_counts})
            return self._public(b)
        b["_polls"] += 1
        if self.hold or b["_polls"] <= self.polls:
            b["status"] = "in_progress"
            b["request_counts"] = {**b["request_counts"], **self.extra_counts}
            return self._public(b)
        out, err, ok, bad = [], [], 0, 0
        for k, line in enumerate(self.inputs[batch_id]):
            cid = line["custom_id"]
            if self.expire_after is not None and k >= self.expire_after:
                err.append({"id": f"batch_req_{k}", "custom_id": cid, "response": None, "error": {
                    "code": "batch_expired",
                    "message": "This request could not be executed before the completion window expired."}})
                bad += 1
                continue
            answer = self.answer(cid, line["body"])
            if isinstance(answer, tuple):
                _, status, message = answer
                err.append({"id": f"batch_req_{k}", "custom_id": cid, "error": None, "response": {
                    "status_code": status, "request_id": f"req_{k}",
                    "body": {"error": {"message": message, "type": "invalid_request_error"}}}})
                bad += 1
                continue
            message: dict[str, Any] = {"role": "assistant", "content": answer}
            if self.tool_calls:
                message["tool_calls"] = [{"id": t["id"], "type": "function", "function": {
                    "name": t["name"], "arguments": json.dumps(t.get("arguments", {}))}} for t in self.tool_calls]
            out.append({"id": f"batch_req_{k}", "custom_id": cid, "error": None, "response": {
                "status_code": 200, "request_id": f"req_{k}", "body": {
                    "id": f"chatcmpl-{k}", "object": "chat.completion", "created": int(time.time()),
                    "model": self.served_model, "system_fingerprint": self.system_fingerprint,
                    "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason or "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}}})
            ok += 1
        expired = self.expire_after is not None
        for name, lines in (("output_file_id", out), ("error_file_id", err)):
            if lines:
                fid = self._id("file-")
                self.files[fid] = self._results_file(lines)
                b[name] = fid
        b.update(status="expired" if expired else "completed", request_counts={
            "total": ok + bad, "completed": ok, "failed": bad, **self.extra_counts})
        return self._public(b)

    def _results_file(self, lines: list[dict[str, Any]]) -> bytes:
        """The JSONL of `lines`, those in `bad_lines` cut in half (see the module doc)."""
        out = []
        for k, x in enumerate(lines):
            text = json.dumps(x).encode()
            if k in self.bad_lines:   # the first half keeps the custom_id readable, the second loses it
                text = text[:len(text) // 2] if self.bad_lines_named else text[len(text) // 2:]
            out.append(text + b"\n")
        return b"".join(out)

    # -- Anthropic
    def _anthropic_create(self, body: Any) -> tuple[int, bytes, str]:
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            raise _Refuse(400, "requests: a non-empty list is required")
        for r in requests:
            cid = r.get("custom_id") if isinstance(r, dict) else None
            if not isinstance(cid, str) or not 1 <= len(cid) <= 64 or not all(c.isalnum() or c in "_-" for c in cid):
                raise _Refuse(400, "custom_id must be 1-64 letters, digits, _ or -")
            if "params" not in r or r["params"].get("stream"):
                raise _Refuse(400, "params (not streamed) are required")
        batch_id = self._id("msgbatch_")
        self.inputs[batch_id] = requests
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.batches[batch_id] = {
            "id": batch_id, "type": "message_batch", "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0,
                               "expired": 0},
            "ended_at": None, "created_at": now, "expires_at": now, "archived_at": None, "cancel_initiated_at": None,
            "results_url": None, "_polls": 0}
        return self._json(self._public(self.batches[batch_id]))

    def _anthropic_poll(self, batch_id: str) -> dict[str, Any]:
        b = self.batches.get(batch_id)
        if b is None or b.get("type") != "message_batch":
            raise _Refuse(404, f"message batch {batch_id} not found")
        if b["processing_status"] == "ended":
            return self._public(b)
        b["_polls"] += 1
        if self.hold or b["_polls"] <= self.polls:
            return self._public(b)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        lines = []
        for k, r in enumerate(self.inputs[batch_id]):
            cid = r["custom_id"]
            if self.expire_after is not None and k >= self.expire_after:
                lines.append({"custom_id": cid, "result": {"type": "expired"}})
                counts["expired"] += 1
                continue
            answer = self.answer(cid, r["params"])
            if isinstance(answer, tuple):
                _, status, message = answer
                lines.append({"custom_id": cid, "result": {"type": "errored", "error": {
                    "type": "error", "error": {"type": "invalid_request_error", "message": message}}}})
                counts["errored"] += 1
                continue
            content: list[dict[str, Any]] = [{"type": "text", "text": answer}]
            content += [{"type": "tool_use", "id": t["id"], "name": t["name"], "input": t.get("arguments", {})}
                        for t in self.tool_calls]
            lines.append({"custom_id": cid, "result": {"type": "succeeded", "message": {
                "id": f"msg_{k}", "type": "message", "role": "assistant", "model": self.served_model,
                "content": content, "stop_reason": self.finish_reason or "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5}}}})
            counts["succeeded"] += 1
        self.files[batch_id] = self._results_file(lines)
        b.update(processing_status="ended", request_counts={**counts, **self.extra_counts},
                 ended_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 results_url=f"{self.server.url}/v1/messages/batches/{batch_id}/results")
        return self._public(b)


class _Refuse(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message
