"""Reading request logs for `lineup sample`: the logs teams actually have,
each turned into the same records (a conversation to replay and a stratum).

Why a module of its own: the formats are many, each has its traps, and the
sampling (de-duplication, allocation, drawing: `core.exchange.sampling`) should know
none of them. What a record becomes, whatever its format (records, skip
reasons, conversations from chat messages), is `core.exchange.log_records`.
(Past 600 lines because each format's reader is here; split by format it
would scatter what the readers share.)

Kinds, detected from the content (then the file's suffix):

- JSON Lines, one record per line; a JSON array of records, as
  `llm logs -n 0 --json` writes (errors name `FILE:[index]`);
- CSV or TSV with a header row;
- an `llm` CLI logs.db in either layout: the `responses` table (llm up to
  0.35), or the message store of llm 0.36 (`turns`, each pointing into a
  content-addressed tree of `messages` and their `parts`, text borrowing
  `fragments`, images in `attachments`). A database upgraded from the old
  layout holds rows in both; both are read, legacy rows being those whose id
  is no turn's (as `llm logs` reads them).

A record's prompt is a text or a chat request: an OpenAI `messages` array
(system or developer, user, assistant, tool), or an Anthropic one with a
top-level `system`. A chat record becomes a conversation: the system prompt,
the earlier turns, and the last user message (the one answered); an answer
the log holds after it is dropped. Consecutive messages of one role are
joined. `llm` records of one conversation (its logs.db, its JSON export)
become conversations the same way.

Images: inline data (a `data:` URL, an Anthropic base64 source, bytes in a
logs.db, a file a logs.db names whose bytes still match the hash it logged)
are kept as images of the case; remote URLs are kept as notes (a tag), never
fetched.

What cannot become a case is skipped and counted by reason (`SKIP_*`): an
empty prompt, a last user message with no text, a conversation longer than
`max_chars`, tool calls, an attachment a sample set cannot carry, an image
in an earlier turn, a conversation that does not start with the user (or
has a system message after it began).
Malformed input (bad JSON, a prompt that is a number, a chat message with no
role) is an error naming `FILE:LINE: field` (or `FILE:[index]`, or the
logs.db row), raised as `LogError`.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from core.ground.inputs import InputError, decode, lines, loads, open_input, read_input, shown_name, text_lines
from core.ground.jsonl import json_objects
from core.answering.sampleset import MAX_IMAGE_BYTES
from core.ground.text import one_line
from core.exchange.traces import SKIP_NOT_LLM, TraceError, read_trace_file
from core.exchange.traces import sniff as sniff_trace
from core.exchange.log_records import (
    DERIVED_STRATA,
    chat_messages,
    Collector,
    DEFAULT_MAX_CHARS,
    dig,
    image_from_bytes,
    Img,
    LLM_EXPORT_KEYS,
    LoadedLogs,
    LogError,
    Msg,
    pick_field,
    pick_prompt_path,
    ROLES,
    SQLITE_MAGIC,
    value_messages,
)


# ---------------------------------------------------------------- reading logs


def read_logs(path: str | Path, by: str, prompt_field: str | None = None,
              max_chars: int = DEFAULT_MAX_CHARS) -> LoadedLogs:
    """Read a log file of any supported kind (detected from its content).
    Opened as `core.ground.inputs.open_input` opens any input: a regular file only,
    bounded in size (an `llm` logs.db, which SQLite reads itself, in kind only).
    `max_chars` (0: no limit) skips conversations longer than that."""
    path = Path(path)
    try:
        with open_input(path, limit=0) as f:
            head = f.read(4096)
    except InputError as exc:
        raise LogError(str(exc)) from None
    if head.startswith(SQLITE_MAGIC):
        return _read_sqlite(path, by, prompt_field, max_chars)
    trace_kind = sniff_trace(head) if prompt_field is None else None
    if trace_kind is not None:      # OpenTelemetry, LangSmith, Langfuse, LiteLLM: `core.exchange.traces`
        return _read_traces(path, trace_kind, by, max_chars)
    suffix = path.suffix.lower()
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if suffix not in (".csv", ".tsv") and first == b"[":
        return _read_json_array(path, by, prompt_field, max_chars)
    try:
        f = open_input(path)
    except InputError as exc:
        raise LogError(str(exc)) from None
    with f:
        if suffix in (".csv", ".tsv"):
            return _read_csv(f, path, by, prompt_field, max_chars, delimiter="\t" if suffix == ".tsv" else ",")
        if suffix in (".jsonl", ".ndjson", ".json") or first == b"{":
            shown = shown_name(path)
            records = ((lineno, where, obj, problem, f"line{lineno}")
                       for lineno, where, obj, problem in json_objects(lines(f, shown), shown, "a log record"))
            return _read_json_records(records, path, "jsonl", by, prompt_field, max_chars)
        return _read_csv(f, path, by, prompt_field, max_chars, delimiter=",")


def _read_traces(path: Path, kind: str, by: str, max_chars: int) -> LoadedLogs:
    """A trace export (`core.exchange.traces`): each LLM call a record with its logged
    answer, every other span or run skipped and counted."""
    shown = shown_name(path)
    try:
        traces = read_trace_file(path, kind)
        out = LoadedLogs(str(path), kind, "messages", by, [], detail=traces.detail())
        collect = Collector(out, max_chars)
        if traces.skipped:
            out.skipped[SKIP_NOT_LLM] = traces.skipped
            out.first_skipped[SKIP_NOT_LLM] = traces.first_skipped
        for call in traces.calls:
            msgs = chat_messages(call.messages, call.where, "messages") if isinstance(call.messages, list) \
                else call.messages
            before = len(out.records)
            collect.add(call.order, call.where, call.source, call.fields, msgs, call.system)
            if len(out.records) > before and call.logged() is not None:
                out.records[-1] = replace(out.records[-1], logged=call.logged())
    except TraceError as exc:
        raise LogError(str(exc)) from None
    if not out.records and not out.skipped:
        raise LogError(f"{shown}: no LLM calls")
    return collect.finish(shown, traces.calls[0].fields if traces.calls else ())


def _read_json_array(path: Path, by: str, prompt_field: str | None, max_chars: int) -> LoadedLogs:
    """A JSON array of records (`llm logs -n 0 --json`), bounded as every input is."""
    shown = shown_name(path)
    try:
        value = loads(decode(read_input(path), shown), shown)
    except InputError as exc:
        raise LogError(str(exc)) from None
    if not isinstance(value, list):
        raise LogError(f"{shown}: expected a JSON array of records (or one record per line), "
                       f"got a JSON {type(value).__name__}")

    def records() -> Iterator[tuple[int, str, Any, str | None, str]]:
        for i, obj in enumerate(value):
            where = f"{shown}:[{i}]"
            problem = None if isinstance(obj, dict) else \
                f"{where}: a log record must be a JSON object, not {type(obj).__name__}"
            yield i, where, obj, problem, f"[{i}]"

    return _read_json_records(records(), path, "json", by, prompt_field, max_chars)


def _read_json_records(records: Iterable[tuple[int, str, Any, str | None, str]], path: Path, kind: str,
                       by: str, prompt_field: str | None, max_chars: int) -> LoadedLogs:
    out = LoadedLogs(str(path), kind, prompt_field or "", by, [])
    collect = Collector(out, max_chars)
    keys_seen: list[str] = []
    shown = shown_name(path)
    export: list[tuple[int, str, str, dict[str, Any]]] | None = None
    found: list[str] = []       # the prompt field of each record, found per record: a log may mix chat and plain
    for order, where, obj, problem, source in records:
        if problem:
            raise LogError(problem)
        assert isinstance(obj, dict)
        if not keys_seen:
            keys_seen = list(obj.keys())
            if prompt_field is None and LLM_EXPORT_KEYS <= obj.keys():
                export = []          # `llm logs --json`: a conversation's turns are separate records
        if export is not None:
            export.append((order, where, source, obj))
            continue
        try:
            path_ = found[0] if prompt_field is not None and found else pick_prompt_path(obj, prompt_field, where)
        except LogError:
            if not found:
                raise
            path_ = found[0]        # no prompt here: read as empty, and skipped as such
        if path_ not in found:
            found.append(path_)
            out.prompt_field = " or ".join(found)
        holder_path, _, leaf = path_.rpartition(".")
        holder = dig(obj, holder_path)[1] if holder_path else obj
        msgs, system = value_messages(dig(obj, path_)[1], holder, where, leaf)
        collect.add(order, where, source, obj, msgs, system)
    if export is not None:
        out.prompt_field, out.detail = "prompt", "llm logs --json export"
        for order, where, source, obj, msgs, system in _llm_export_conversations(export, collect):
            collect.add(order, where, source, obj, msgs, system)
    if not out.records and not out.skipped:
        raise LogError(f"{shown}: no records")
    return collect.finish(shown, keys_seen)


def _attachment(type_: Any, size: int | None, content: Callable[[], bytes | None], path: Any, url: Any,
                att_id: Any) -> Img | str:
    """An `llm` attachment as an image, or what it is when it is not one.
    `size` is the length of the bytes the log holds (None: none); `content()`
    reads them, only for an image small enough to keep."""
    if isinstance(type_, str) and type_ and not type_.startswith("image/"):
        return f"an attachment of type {one_line(type_, 60)}"
    if size:
        if size > MAX_IMAGE_BYTES:
            return Img(problem=f"an image of {size / 1e6:.1f} MB (a set carries at most "
                                f"{MAX_IMAGE_BYTES / 1e6:.0f} MB)")
        data = content()
        if data:
            return image_from_bytes(data)
    if isinstance(path, str) and path:
        # The logs.db keeps no copy of a file's bytes: read the file if it
        # is still the one logged (llm's id for it is its bytes' sha256).
        try:
            with open_input(path, limit=MAX_IMAGE_BYTES) as f:
                data = f.read(MAX_IMAGE_BYTES + 1)
        except InputError as exc:
            if exc.problem == "no such file":
                return Img(problem="an image file that is gone")
            return Img(problem=f"an image file that is not read ({exc.problem})")
        if hashlib.sha256(data).hexdigest() != att_id:
            return Img(problem="an image file changed since it was logged")
        return image_from_bytes(data)
    if isinstance(url, str) and url:
        return Img(url=url)
    return Img(problem="an attachment whose bytes are not in the log")


def _blob(conn: sqlite3.Connection, att_id: Any) -> Callable[[], bytes | None]:
    """Reads one attachment's bytes when called (they are not all held at once)."""
    def read() -> bytes | None:
        row = conn.execute("SELECT content FROM attachments WHERE id = ?", (att_id,)).fetchone()
        return row[0] if row and isinstance(row[0], bytes) else None
    return read


def _add_attachment(msg: Msg, got: Img | str) -> None:
    if isinstance(got, str):
        msg.other.append(got)
    else:
        msg.images.append(got)


def _earlier(convo: list[dict[str, Any]], k: int, size: Callable[[dict[str, Any]], int],
             max_chars: int) -> list[dict[str, Any]] | None:
    """The records before `convo[k]` (oldest first), walked back from the
    newest, or None once they are longer than `max_chars` (0: no limit); so a
    record of a long conversation costs at most max_chars, not the whole of it."""
    total = size(convo[k])
    start = k
    while start > 0:
        total += size(convo[start - 1])
        if max_chars and total > max_chars:
            return None
        start -= 1
    return convo[start:k]


def _llm_export_conversations(export: list[tuple[int, str, str, dict[str, Any]]], collect: Collector
                              ) -> Iterator[tuple[int, str, str, dict[str, Any], list[Msg], str | None]]:
    """Records of `llm logs --json`: each with the earlier turns of its conversation before it."""
    by_convo: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for _, where, _, obj in export:
        for key in ("prompt", "response", "system"):
            if obj.get(key) is not None and not isinstance(obj.get(key), str):
                raise LogError(f"{where}: {key}: expected text, got {type(obj[key]).__name__}")
        if obj.get("conversation_id") is not None:
            by_convo[obj["conversation_id"]].append(obj)
    for turns in by_convo.values():
        turns.sort(key=lambda o: (str(o.get("datetime_utc") or ""), str(o.get("id") or "")))

    def user_msg(obj: dict[str, Any], where: str) -> Msg:
        msg = Msg("user", [obj.get("prompt") or ""])
        for i, att in enumerate(obj.get("attachments") or []):
            if not isinstance(att, dict):
                raise LogError(f"{where}: attachments[{i}]: expected an object")
            if att.get("content"):     # the export says there were bytes, without them
                msg.other.append("an attachment whose bytes the JSON export leaves out (sample the logs.db)")
                continue
            _add_attachment(msg, _attachment(att.get("type"), None, lambda: None, att.get("path"), att.get("url"),
                                             att.get("id")))
        if obj.get("tool_calls") or obj.get("tool_results"):
            msg.tools = True
        return msg

    position = {id(obj): k for turns in by_convo.values() for k, obj in enumerate(turns)}

    def size(obj: dict[str, Any]) -> int:
        return len(obj.get("prompt") or "") + len(obj.get("response") or "") + len(obj.get("system") or "")

    for order, where, source, obj in export:
        msgs: list[Msg] = []
        if id(obj) in position:
            got = _earlier(by_convo[obj["conversation_id"]], position[id(obj)], size, collect.max_chars)
        else:
            got = []
        if got is None:
            collect.too_long(where, obj)
            continue
        for earlier in got:
            msgs.append(user_msg(earlier, where))
            msgs.append(Msg("assistant", [earlier.get("response") or ""], tools=bool(earlier.get("tool_calls"))))
        msgs.append(user_msg(obj, where))
        yield order, where, source, obj, msgs, obj.get("system")


def _read_csv(binary: BinaryIO, path: Path, by: str, prompt_field: str | None, max_chars: int,
              delimiter: str) -> LoadedLogs:
    csv.field_size_limit(2**31 - 1)   # a field is bounded by the file, which `open_input` bounded
    out = LoadedLogs(str(path), "tsv" if delimiter == "\t" else "csv", "", by, [])
    collect = Collector(out, max_chars)
    shown = shown_name(path)
    try:
        reader = csv.reader(text_lines(binary, shown), delimiter=delimiter)
        try:
            header = next(reader)
        except StopIteration:
            raise LogError(f"{shown}: empty file (expected a header row)") from None
        header = [h.strip() for h in header]
        where = f"{shown}:1"
        out.prompt_field = pick_field(header, prompt_field, "prompt", where)
        if by not in DERIVED_STRATA or by.lower() in (h.lower() for h in header):
            by = pick_field(header, by, "--by", where)
            out.by = by
        p_idx = header.index(out.prompt_field)
        s_idx = next((i for i, h in enumerate(header) if h.lower() == "system"), None)
        try:
            end = reader.line_num
            for row in reader:
                line, end = end + 1, reader.line_num       # the line the record starts on
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                here = f"{shown}:{line}"
                if len(row) > len(header):
                    raise LogError(f"{here}: {len(row)} fields but the header has {len(header)}")
                fields = dict(zip(header, row, strict=True))
                prompt = row[p_idx] if p_idx < len(row) else None
                system = row[s_idx] if s_idx is not None and s_idx < len(row) else None
                msgs: list[Msg] | str | None = prompt
                if prompt and prompt.lstrip().startswith("[{"):   # a JSON messages array in a cell
                    try:
                        value = loads(prompt, shown, line)
                    except InputError:
                        value = None
                    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
                        msgs = chat_messages(value, here, out.prompt_field)
                collect.add(line, here, f"line{line}", fields, msgs, system or None)
        except csv.Error as exc:
            raise LogError(f"{shown}:{reader.line_num}: bad CSV: {exc}") from None
    except InputError as exc:   # a byte that is not UTF-8, named by its line
        raise LogError(str(exc)) from None
    if not out.records and not out.skipped:
        raise LogError(f"{shown}: no data rows")
    return collect.finish(shown, header)


# ---------------------------------------------------------------- llm logs.db

def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _read_sqlite(path: Path, by: str, prompt_field: str | None, max_chars: int) -> LoadedLogs:
    """An `llm` CLI logs.db: the turns of the message store (llm 0.36) and the
    rows of the `responses` table that are no turn (older llm)."""
    shown = shown_name(path)
    try:
        conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise LogError(f"{shown}: cannot open the SQLite database: {exc}") from None
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        except sqlite3.DatabaseError as exc:
            raise LogError(f"{shown}: not a readable SQLite database: {exc}") from None
        has_turns = {"turns", "messages", "parts"} <= tables
        if "responses" not in tables and not has_turns:
            raise LogError(f"{shown}: no 'responses' table and no 'turns' table (expected an `llm` logs.db)")
        out = LoadedLogs(str(path), "sqlite", prompt_field or "prompt", by, [])
        collect = Collector(out, max_chars)
        try:
            n_turns = conn.execute("SELECT count(*) FROM turns").fetchone()[0] if has_turns else 0
            legacy_where = " WHERE id NOT IN (SELECT id FROM turns)" if "turns" in tables else ""
            n_legacy = conn.execute(f"SELECT count(*) FROM responses{legacy_where}").fetchone()[0] \
                if "responses" in tables else 0
            if not n_turns and not n_legacy:
                tables_named = [t for t, there in (("the turns table (llm 0.36)", has_turns),
                                                   ("the responses table", "responses" in tables)) if there]
                if len(tables_named) == 2:
                    raise LogError(f"{shown}: no logged prompts: {' and '.join(tables_named)} are empty")
                raise LogError(f"{shown}: {tables_named[0]} is empty")
            fields_hint: list[str] = []
            if n_legacy:
                fields_hint = _read_legacy(conn, shown, collect, by, prompt_field, legacy_where,
                                           check_by=not n_turns)
            if n_turns:
                if prompt_field not in (None, "prompt"):
                    raise LogError(f"{shown}: --prompt-field: the turns of an llm 0.36 logs.db have their "
                                   f"prompt in the message store; leave --prompt-field out")
                fields_hint += [name for name in _TURN_FIELDS if name not in fields_hint]
                _read_turns(conn, shown, collect)
        except sqlite3.DatabaseError as exc:
            raise LogError(f"{shown}: reading the log failed: {exc}") from None
    finally:
        conn.close()
    layouts = [f"{n_turns} turn(s) (llm 0.36 layout)"] * bool(n_turns) \
        + [f"{n_legacy} response(s) (legacy layout)"] * bool(n_legacy)
    out.detail = "llm logs.db: " + ", ".join(layouts)
    return collect.finish(shown, fields_hint)


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")]


def _read_legacy(conn: sqlite3.Connection, shown: str, collect: Collector, by: str,
                 prompt_field: str | None, legacy_where: str, check_by: bool) -> list[str]:
    """Rows of the `responses` table: the prompt with its fragments (llm 0.24+
    sends them before the prompt), attachments, and the earlier responses
    of the conversation as history."""
    cols = _columns(conn, "responses")
    where = f"{shown}: table responses"
    pcol = pick_field(cols, prompt_field or "prompt", "prompt", where)
    if check_by and (by not in DERIVED_STRATA or by in cols):
        pick_field(cols, by, "--by", where)   # named now, with the table's columns
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def fragments(table: str) -> dict[str, list[str]]:
        got: dict[str, list[str]] = defaultdict(list)
        if {table, "fragments"} <= tables:
            for rid, content in conn.execute(
                    f"SELECT x.response_id, f.content FROM {table} x JOIN fragments f ON f.id = x.fragment_id "
                    f'ORDER BY x.response_id, x."order"'):
                got[rid].append(content or "")
        return got

    prompt_frags, system_frags = fragments("prompt_fragments"), fragments("system_fragments")
    atts: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    if {"prompt_attachments", "attachments"} <= tables:
        for row in conn.execute('SELECT pa.response_id, a.type, length(a.content), a.path, a.url, a.id '
                                'FROM prompt_attachments pa JOIN attachments a ON a.id = pa.attachment_id '
                                'ORDER BY pa.response_id, pa."order"'):
            atts[row[0]].append(row[1:])
    tool_ids: set[Any] = set()
    for table in ("tool_calls", "tool_results"):
        if table in tables:
            tool_ids.update(r[0] for r in conn.execute(f"SELECT DISTINCT response_id FROM {table}"))
    rows = []
    cur = conn.execute(f"SELECT rowid AS _rowid, * FROM responses{legacy_where} ORDER BY rowid")
    names = [d[0] for d in cur.description]
    for values in cur:
        rows.append(dict(zip(names, values, strict=True)))
    convos: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("conversation_id") is not None:
            convos[row["conversation_id"]].append(row)

    def text(row: dict[str, Any], col: str, frags: dict[str, list[str]], here: str) -> str | None:
        value = row.get(col)
        if value is not None and not isinstance(value, str):
            raise LogError(f"{here}: {col}: expected text, got {type(value).__name__}")
        pieces = frags.get(str(row.get("id")), []) + ([value] if value else [])
        return "\n".join(pieces) if pieces else value

    def user(row: dict[str, Any], here: str) -> Msg:
        msg = Msg("user", [text(row, pcol, prompt_frags, here) or ""], tools=row.get("id") in tool_ids)
        for type_, size, path, url, att_id in atts.get(str(row.get("id")), []):
            _add_attachment(msg, _attachment(type_, size, _blob(conn, att_id), path, url, att_id))
        return msg

    position = {id(row): k for turns in convos.values() for k, row in enumerate(turns)}

    def size(row: dict[str, Any]) -> int:
        return sum(len(row.get(c) or "") if isinstance(row.get(c), str) else 0 for c in (pcol, "response", "system"))

    for row in rows:
        here = f"{shown}: responses rowid {row['_rowid']}"
        fields = {k: v for k, v in row.items() if k != "_rowid"}
        msgs: list[Msg] = []
        got = _earlier(convos[row["conversation_id"]], position[id(row)], size, collect.max_chars) \
            if id(row) in position else []
        if got is None:
            collect.too_long(here, fields)
            continue
        for earlier in got:
            msgs.append(user(earlier, here))
            msgs.append(Msg("assistant", [earlier.get("response") or ""]))
        msgs.append(user(row, here))
        system = text(row, "system", system_frags, here) if "system" in row else None
        collect.add(row["_rowid"], here, f"row{row['_rowid']}", fields, msgs, system)
    return cols


_TURN_FIELDS = ("id", "model", "resolved_model", "conversation_id", "conversation_name", "datetime_utc",
                "duration_ms", "input_tokens", "output_tokens", "options_json")


def _text_piece(piece: Any, fragments: dict[int, str]) -> str:
    """One piece of a `text_ref` payload: a literal, or a fragment's content."""
    if not isinstance(piece, dict):
        return ""
    if isinstance(piece.get("literal"), str):
        return piece["literal"]
    fragment = piece.get("fragment")
    return fragments.get(fragment, "") if isinstance(fragment, int) else ""


def _read_turns(conn: sqlite3.Connection, shown: str, collect: Collector) -> None:
    """The turns of llm 0.36's message store. A turn's input is the chain of
    messages from its `parent_message_hash` up to a root (parent first); its
    output (from there to `tip_message_hash`) is the answer and is not read.
    A part's text is in `parts.text`, or in a `text_ref` payload of literals
    and fragment ids; an attachment part names an `attachments` row."""
    parent: dict[str, str | None] = {}
    role: dict[str, str] = {}
    for h, p, r in conn.execute("SELECT hash, parent_hash, role FROM messages"):
        parent[h], role[h] = p, r
    fragments: dict[int, str] = {}
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'fragments'").fetchone():
        fragments = {i: c or "" for i, c in conn.execute("SELECT id, content FROM fragments")}
    attachments: dict[str, tuple[Any, ...]] = {}
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'attachments'").fetchone():
        attachments = {row[0]: row[1:] for row in conn.execute(
            "SELECT id, type, length(content), path, url FROM attachments")}
    parts: dict[str, list[tuple[str, str | None, str | None]]] = defaultdict(list)
    for mh, kind, text, payload in conn.execute(
            "SELECT message_hash, type, text, payload FROM parts ORDER BY message_hash, position"):
        parts[mh].append((kind, text, payload))
    messages: dict[str, Msg] = {}

    def message(h: str, here: str) -> Msg:
        got = messages.get(h)
        if got is not None:
            return got
        msg = Msg(ROLES.get(role[h], "tool"))
        for kind, text, payload_text in parts.get(h, []):
            payload: dict[str, Any] = {}
            if payload_text:
                try:
                    value = json.loads(payload_text)
                except ValueError:
                    raise LogError(f"{here}: a part of message {one_line(h, 60)} has a payload that is not JSON") \
                        from None
                payload = value if isinstance(value, dict) else {}
            if kind == "text":
                if text is None and isinstance(payload.get("text_ref"), list):
                    text = "".join(_text_piece(p, fragments) for p in payload["text_ref"])
                msg.texts.append(text or "")
            elif kind == "reasoning":
                continue
            elif kind in ("tool_call", "tool_result"):
                msg.tools = True
            elif kind == "attachment":
                ref = payload.get("attachment")
                att_id = ref.get("id") if isinstance(ref, dict) else None
                row = attachments.get(att_id) if isinstance(att_id, str) else None
                if row is None:
                    msg.other.append("an attachment missing from the attachments table")
                    continue
                type_, size, path, url = row
                _add_attachment(msg, _attachment(type_, size, _blob(conn, att_id), path, url, att_id))
            else:
                msg.other.append(f"a {one_line(kind, 40)!r} part")
        messages[h] = msg
        return msg

    sql = ("SELECT t.rowid, t.id, t.parent_message_hash, t.model, t.resolved_model, t.thread_id, th.name, "
           "t.datetime_utc, t.duration_ms, t.input_tokens, t.output_tokens, t.options_json "
           "FROM turns t LEFT JOIN threads th ON th.id = t.thread_id ORDER BY t.rowid")
    for rowid, *values in conn.execute(sql):
        fields = dict(zip(_TURN_FIELDS, values[:1] + values[2:], strict=True))
        here = f"{shown}: turn {one_line(values[0], 60)}"
        chain: list[Msg] = []
        h = values[1]
        seen: set[str] = set()
        length = 0
        while h is not None:
            if h not in role:
                raise LogError(f"{here}: message {one_line(h, 60)} is missing from the messages table")
            if h in seen:
                raise LogError(f"{here}: the message chain loops at {one_line(h, 60)}")
            seen.add(h)
            chain.append(message(h, here))
            length += len(chain[-1].text())
            if collect.max_chars and length > collect.max_chars:
                break      # the walk up a long conversation stops here: each turn costs at most max_chars
            h = parent[h]
        if collect.max_chars and length > collect.max_chars:
            collect.too_long(here, fields)
            continue
        chain.reverse()
        collect.add(rowid, here, f"turn={values[0]}", fields, chain if chain else None)
