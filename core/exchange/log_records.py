"""What a log record becomes, whatever its format (`core.exchange.logs`
reads the formats): the records and skip reasons, chat messages in the
shapes teams log (OpenAI, Anthropic, `llm`) turned into a conversation a
case can replay, and the collector that keeps records, strata and skips.
Apart from the readers so that each format's reader shares these rules
without the readers' file handling."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from core.exchange.language import detect_language
from core.answering.sampleset import MAX_IMAGE_BYTES, image_mime
from core.ground.text import one_line
from core.exchange.traces import LoggedAnswer

PROMPT_FIELD_NAMES = ("prompt", "input", "question", "message", "messages", "text", "query", "instruction",
                      "user_input", "content")
# Objects a request body is often logged under: `request.messages` is found without --prompt-field.
_BODY_FIELD_NAMES = ("request", "body", "request_body", "payload", "params")
NONE_STRATUM = "(none)"
DEFAULT_MAX_CHARS = 100_000

SKIP_EMPTY = "empty prompt"
SKIP_NON_TEXT = "no text in the last user message (images or other parts only)"
SKIP_TOO_LONG = "too long"
SKIP_TOOLS = "tool calls or results in the conversation"
SKIP_ATTACHMENT = "an attachment a sample set cannot carry"
SKIP_EARLIER_IMAGE = "an image in an earlier turn (a case carries images on its last user message only)"
SKIP_SHAPE = "a conversation a case cannot script"

SQLITE_MAGIC = b"SQLite format 3\x00"
LLM_EXPORT_KEYS = frozenset({"id", "model", "prompt", "response", "conversation_id"})


class LogError(ValueError):
    """Unusable log input; the message names the file and line (or row)."""


@dataclass(frozen=True, slots=True)
class LogImage:
    """An image of a case's last user message, with its bytes."""

    mime: str
    data: bytes
    sha256: str


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One logged request, as a case to replay: `history` is the earlier
    turns, (role, text) alternating from "user"; `prompt` the last user message."""

    prompt: str
    stratum: str
    line: int                 # order in the log: line, array index, rowid
    system: str | None = None
    history: tuple[tuple[str, str], ...] = ()
    images: tuple[LogImage, ...] = ()
    image_urls: tuple[str, ...] = ()     # remote images of the last user message, not fetched
    source: str = ""                     # where, as a case's tag shows it: "line3", "[2]", "row5", "turn=ID"
    logged: LoggedAnswer | None = None   # the answer the log holds (trace formats)

    def conversation_text(self) -> str:
        """The user and assistant text, without the system prompt (what `--by length` measures)."""
        return "\n".join([t for _, t in self.history] + [self.prompt])

    def user_text(self) -> str:
        return "\n".join([t for role, t in self.history if role == "user"] + [self.prompt])


@dataclass
class LoadedLogs:
    path: str
    kind: str                 # "jsonl" | "json" | "csv" | "sqlite"
    prompt_field: str
    by: str
    records: list[LogRecord]
    skipped: Counter[str] = field(default_factory=Counter)     # reason -> records
    first_skipped: dict[str, str] = field(default_factory=dict)  # reason -> where (FILE:LINE, ...) and detail
    detail: str = ""          # e.g. "llm logs.db: 12 turns (llm 0.36 layout)"
    derived: bool = False     # the stratum is derived from the text (`--by length` / `language`)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


# ---------------------------------------------------------------- derived strata

_LENGTH_BUCKETS = ((100, "1 short (<100 chars)"), (500, "2 medium (100-499 chars)"),
                   (2000, "3 long (500-1999 chars)"), (10_000, "4 very long (2000-9999 chars)"))


def length_bucket(record: LogRecord) -> str:
    """The record's length class: characters of the conversation, system prompt left out."""
    n = len(record.conversation_text())
    for limit, label in _LENGTH_BUCKETS:
        if n < limit:
            return label
    return "5 huge (10000+ chars)"


DERIVED_STRATA: dict[str, Callable[[LogRecord], str]] = {
    "length": length_bucket,
    "language": lambda record: detect_language(record.user_text()),
}


# ---------------------------------------------------------------- messages

@dataclass
class Img:
    data: bytes | None = None
    url: str | None = None
    problem: str | None = None


@dataclass
class Msg:
    """A chat message in the one shape every format is read into."""

    role: str                                # system | user | assistant | tool
    texts: list[str] = field(default_factory=list)
    images: list[Img] = field(default_factory=list)
    tools: bool = False                      # tool calls or results
    other: list[str] = field(default_factory=list)   # parts a set cannot carry: "audio", "file", ...
    _text: str | None = None

    def text(self) -> str:
        """The text parts joined (computed once: a logs.db message is shared by every later turn)."""
        if self._text is None:
            self._text = "\n\n".join(t for t in self.texts if t)
        return self._text


@dataclass
class _Convo:
    system: str | None
    turns: list[tuple[str, str]]             # ends with the user message answered
    images: list[LogImage]
    urls: list[str]


ROLES = {"system": "system", "developer": "system", "user": "user", "human": "user", "assistant": "assistant",
          "model": "assistant", "ai": "assistant", "tool": "tool", "function": "tool", "ipython": "tool"}


def image_from_bytes(data: bytes) -> Img:
    if len(data) > MAX_IMAGE_BYTES:
        return Img(problem=f"an image of {len(data) / 1e6:.1f} MB (a set carries at most "
                            f"{MAX_IMAGE_BYTES / 1e6:.0f} MB)")
    if image_mime(data) is None:
        return Img(problem="an image that is not PNG, JPEG, GIF or WebP")
    return Img(data=data)


def _image_from_base64(text: str) -> Img:
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return Img(problem="an image whose base64 data is invalid")
    return image_from_bytes(data)


def _image_from_url(url: str) -> Img:
    if url.startswith("data:"):
        head, sep, payload = url.partition(",")
        if not sep or not head.endswith(";base64"):
            return Img(problem="a data: URL that is not base64")
        return _image_from_base64(payload)
    return Img(url=url)


def _text_of_system(value: Any, where: str) -> str | None:
    """A system prompt: a string, or Anthropic's list of text blocks."""
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, list):
        texts = []
        for i, block in enumerate(value):
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                raise LogError(f"{where}: system[{i}]: expected a text block")
        return "\n\n".join(texts) or None
    raise LogError(f"{where}: system: expected text, got {type(value).__name__}")


def _part(msg: Msg, part: Any, where: str) -> None:
    """One content part of an OpenAI (chat or responses API) or Anthropic message."""
    if isinstance(part, str):
        msg.texts.append(part)
        return
    if not isinstance(part, dict):
        raise LogError(f"{where}: expected a content part (an object), got {type(part).__name__}")
    kind = part.get("type")
    if kind in ("text", "input_text", "output_text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise LogError(f"{where}.text: expected text, got {type(text).__name__}")
        msg.texts.append(text)
    elif kind == "refusal" and isinstance(part.get("refusal"), str):
        msg.texts.append(part["refusal"])
    elif kind in ("image_url", "input_image"):
        ref = part.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        if not isinstance(url, str):
            raise LogError(f"{where}.image_url: expected a URL")
        msg.images.append(_image_from_url(url))
    elif kind == "image":
        source = part.get("source")
        if not isinstance(source, dict):
            raise LogError(f"{where}.source: expected an object")
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            msg.images.append(_image_from_base64(source["data"]))
        elif source.get("type") == "url" and isinstance(source.get("url"), str):
            msg.images.append(_image_from_url(source["url"]))
        else:
            msg.images.append(Img(problem=f"an image given as {one_line(source.get('type'), 40)}"))
    elif kind in ("tool_use", "tool_result", "function_call", "function_call_output", "server_tool_use"):
        msg.tools = True
    elif kind in ("thinking", "redacted_thinking", "reasoning"):
        pass                          # an assistant's reasoning: not part of what is replayed
    elif kind in ("input_audio", "audio"):
        msg.other.append("audio")
    elif kind in ("file", "input_file", "document"):
        msg.other.append("a file")
    else:
        msg.other.append(f"a {one_line(kind, 40)!r} part" if kind is not None else "a part without a type")


def chat_messages(value: list[Any], where: str, field_name: str) -> list[Msg]:
    """An OpenAI or Anthropic `messages` array, read into `Msg`s."""
    out = []
    for i, m in enumerate(value):
        here = f"{where}: {field_name}[{i}]"
        if not isinstance(m, dict):
            raise LogError(f"{here}: expected a chat message (an object), got {type(m).__name__}")
        raw_role = m.get("role")
        if not isinstance(raw_role, str):
            raise LogError(f"{here}: no \"role\"" if raw_role is None else f"{here}.role: expected text")
        role = ROLES.get(raw_role.lower())
        if role is None:
            raise LogError(f"{here}.role: unknown role {one_line(raw_role, 40)!r} "
                           f"(expected system, developer, user, assistant or tool)")
        msg = Msg(role)
        content = m.get("content")
        if isinstance(content, str):
            msg.texts.append(content)
        elif isinstance(content, list):
            for j, part in enumerate(content):
                _part(msg, part, f"{here}.content[{j}]")
        elif content is not None:
            raise LogError(f"{here}.content: expected text or a list of parts, got {type(content).__name__}")
        if m.get("tool_calls") or m.get("function_call") or role == "tool":
            msg.tools = True
        out.append(msg)
    return out


@dataclass(frozen=True)
class _Skip:
    reason: str                 # one of SKIP_*
    detail: str | None = None   # what exactly, for the first one of a reason


def _conversation(msgs: list[Msg], system: str | None, max_chars: int) -> _Convo | _Skip:
    """The case a chat makes, or why (`SKIP_*`) it makes none. Linear in the
    messages and copying none of them (a logs.db turn's history is long)."""
    systems = [system] if system else []
    i, n = 0, len(msgs)
    while i < n and msgs[i].role == "system":
        systems.extend(msgs[i].texts)
        i += 1
    last_user = -1
    for k in range(i, n):
        m = msgs[k]
        if m.tools:
            return _Skip(SKIP_TOOLS)
        if m.role == "system":
            return _Skip(SKIP_SHAPE, "a system message after the conversation began")
        if m.role == "user":
            last_user = k
    if last_user < 0:
        return _Skip(SKIP_EMPTY)
    if msgs[i].role != "user":
        return _Skip(SKIP_SHAPE, "it starts with an assistant message")
    # An answer logged after the last user message is not part of the case;
    # the last run of user messages is the prompt, the rest the history.
    first_of_last = last_user
    while first_of_last > i and msgs[first_of_last - 1].role == "user":
        first_of_last -= 1
    for k in range(i, last_user + 1):
        if msgs[k].other:
            return _Skip(SKIP_ATTACHMENT, msgs[k].other[0])
    for k in range(i, first_of_last):
        if msgs[k].images:
            return _Skip(SKIP_EARLIER_IMAGE)
    last = msgs[first_of_last:last_user + 1]
    images_in = [img for m in last for img in m.images]
    prompt = "\n\n".join(t for t in (m.text() for m in last) if t)
    if not prompt.strip():
        return _Skip(SKIP_NON_TEXT if images_in else SKIP_EMPTY)
    problems = [img.problem for img in images_in if img.problem]
    if problems:
        return _Skip(SKIP_ATTACHMENT, problems[0])
    turns: list[tuple[str, str]] = []
    group: list[str] = []
    role = msgs[i].role
    for k in range(i, first_of_last):            # consecutive messages of one role are joined
        m = msgs[k]
        if m.role != role:
            turns.append((role, "\n\n".join(group)))
            role, group = m.role, []
        text = m.text()
        if text:
            group.append(text)
    if first_of_last > i:
        turns.append((role, "\n\n".join(group)))
    turns.append(("user", prompt))
    system_text = "\n\n".join(s for s in systems if s) or None
    length = len(system_text or "") + sum(len(t) for _, t in turns)
    if max_chars and length > max_chars:
        return _Skip(SKIP_TOO_LONG, f"{length} characters, over --max-chars {max_chars}")
    images = [LogImage(image_mime(img.data) or "", img.data, hashlib.sha256(img.data).hexdigest())
              for img in images_in if img.data is not None]
    urls = [img.url for img in images_in if img.url is not None]
    return _Convo(system_text, turns, images, urls)


# ---------------------------------------------------------------- collecting records

class Collector:
    """Turns each reader's raw records into `LogRecord`s or counted skips."""

    def __init__(self, out: LoadedLogs, max_chars: int) -> None:
        self.out = out
        self.max_chars = max_chars
        self.by_seen = False

    def add(self, order: int, where: str, source: str, fields: Any, msgs: list[Msg] | str | None,
            system: str | None = None) -> None:
        found, raw = dig(fields, self.out.by)
        self.by_seen = self.by_seen or found
        if msgs is None or isinstance(msgs, str):
            msgs = [Msg("user", [msgs] if msgs else [])]
        convo = _conversation(msgs, system, self.max_chars)
        if isinstance(convo, _Skip):
            self.out.skipped[convo.reason] += 1
            self.out.first_skipped.setdefault(convo.reason, f"{where} ({convo.detail})" if convo.detail else where)
            return
        self.out.records.append(LogRecord(
            prompt=convo.turns[-1][1], stratum=_stratum(raw), line=order, system=convo.system,
            history=tuple(convo.turns[:-1]), images=tuple(convo.images), image_urls=tuple(convo.urls),
            source=source))

    def too_long(self, where: str, fields: Any) -> None:
        """A record found too long before its whole conversation was read."""
        self.by_seen = self.by_seen or dig(fields, self.out.by)[0]
        self.out.skipped[SKIP_TOO_LONG] += 1
        self.out.first_skipped.setdefault(SKIP_TOO_LONG, f"{where} (over --max-chars {self.max_chars})")

    def finish(self, shown: str, fields_hint: Iterable[str] = ()) -> LoadedLogs:
        out = self.out
        if not self.by_seen:
            derive = DERIVED_STRATA.get(out.by)
            if derive is None:
                raise LogError(f"{shown}: no record has the field {out.by!r} given to --by; fields: "
                               f"{', '.join(fields_hint) or '(none)'} (or a derived stratum: "
                               f"{', '.join(DERIVED_STRATA)})")
            out.records = [replace(r, stratum=derive(r)) for r in out.records]
            out.derived = True
        return out


def _stratum(value: Any) -> str:
    if value is None or value == "":
        return NONE_STRATUM
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def dig(obj: Any, dotted: str) -> tuple[bool, Any]:
    """(found, value) for a dotted path into nested objects."""
    if isinstance(obj, dict) and dotted in obj:
        return True, obj[dotted]
    cur = obj
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return False, None
    return True, cur


def pick_field(available: Iterable[str], wanted: str | None, what: str, where: str) -> str:
    """The field named `wanted` (case-insensitively), or the first common prompt name."""
    names = list(available)
    lower = {n.lower(): n for n in reversed(names)}
    if wanted is not None:
        if wanted in names:
            return wanted
        if wanted.lower() in lower:
            return lower[wanted.lower()]
        raise LogError(f"{where}: no {what} field {wanted!r}; fields: {', '.join(names) or '(none)'}")
    for candidate in PROMPT_FIELD_NAMES:
        if candidate in lower:
            return lower[candidate]
    raise LogError(
        f"{where}: no prompt field found (looked for {', '.join(PROMPT_FIELD_NAMES)}); "
        f"fields: {', '.join(names) or '(none)'}; name one with --prompt-field"
    )


def pick_prompt_path(obj: dict[str, Any], wanted: str | None, where: str) -> str:
    """The (dotted) path of the prompt in a JSON record: `--prompt-field`, a
    common prompt name, or `messages` inside a logged request body."""
    if wanted is not None and "." in wanted and wanted not in obj:
        if not dig(obj, wanted)[0]:
            raise LogError(f"{where}: no prompt field {wanted!r}; fields: {', '.join(obj) or '(none)'}")
        return wanted
    try:
        return pick_field(obj.keys(), wanted, "prompt", where)
    except LogError:
        if wanted is not None:
            raise
        for body in _BODY_FIELD_NAMES:
            inner = obj.get(body)
            if isinstance(inner, dict) and isinstance(inner.get("messages"), list):
                return f"{body}.messages"
        raise


def value_messages(value: Any, holder: Any, where: str, field_name: str
                    ) -> tuple[list[Msg] | str | None, str | None]:
    """(messages or text, system) from a prompt value and the object holding it."""
    system_raw = holder.get("system") if isinstance(holder, dict) else None
    if isinstance(value, dict) and isinstance(value.get("messages"), list):   # a request body as the prompt
        return (chat_messages(value["messages"], where, f"{field_name}.messages"),
                _text_of_system(value.get("system"), where))
    if value is None or isinstance(value, str):
        return value, system_raw if isinstance(system_raw, str) else None
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return chat_messages(value, where, field_name), _text_of_system(system_raw, where)
    if isinstance(value, list):
        raise LogError(f"{where}: {field_name}: expected text or a list of chat messages")
    raise LogError(f"{where}: {field_name}: expected text, got {type(value).__name__}")
