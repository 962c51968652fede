"""The incremental decoders (SSE, NDJSON, Gemini JSON array) against
arbitrary chunking, and each protocol parser fed corpus bodies one byte at a
time (no HTTP: every possible split point, cheaply)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.anthropic import AnthropicParser
from providers.events import StreamResult
from providers.gemini import GeminiParser
from providers.ollama import OllamaParser
from providers.openai import OpenAIParser
from providers.sse import DecodeError, JSONArrayDecoder, NDJSONDecoder, SSEDecoder


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    out, prev = [], 0
    for c in points + [len(data)]:
        out.append(data[prev:c])
        prev = c
    return out


def sse_all(chunks: list[bytes]) -> list[tuple[str, str]]:
    dec = SSEDecoder()
    out: list[tuple[str, str]] = []
    for c in chunks:
        out += dec.feed(c)
    return out


# --- SSE ------------------------------------------------------------------------

line_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=30)
events_st = st.lists(st.tuples(st.sampled_from(["", "message", "delta", "ping"]),
                               st.lists(line_text, min_size=1, max_size=3)), max_size=8)


@settings(max_examples=150, deadline=None)
@given(events=events_st, eol=st.sampled_from(["\n", "\r\n", "\r"]), comments=st.booleans(),
       cuts=st.lists(st.integers(1, 2000), max_size=30))
def test_sse_round_trip_any_chunking(events, eol, comments, cuts):
    body = ""
    for name, lines in events:
        if comments:
            body += ": OPENROUTER PROCESSING" + eol
        if name:
            body += f"event: {name}{eol}"
        for line in lines:
            body += f"data: {line}{eol}"
        body += eol
    raw = body.encode("utf-8")
    got = sse_all(split(raw, cuts))
    assert got == [(name or "message", "\n".join(lines)) for name, lines in events]


def test_sse_field_rules():
    body = (b"\xef\xbb\xbfdata:no-space\n\n"          # BOM, no space after colon
            b"data:  two spaces\n\n"                   # only one space is removed
            b" data: leading space is another field\n\n"
            b"data\n\n"                                # a bare field name: empty data
            b"event: custom\nid: 7\nretry: 100\nfoo: bar\ndata: a\ndata: b\n\n"
            b"event: lonely\n\n"                       # no data: nothing dispatched
            b"data: unfinished")                        # no blank line: dropped
    dec = SSEDecoder()
    got = dec.feed(body)
    assert got == [("message", "no-space"), ("message", " two spaces"), ("message", ""),
                   ("custom", "a\nb")]
    assert dec.pending


def test_sse_crlf_split_between_chunks():
    dec = SSEDecoder()
    assert dec.feed(b"data: x\r") == []
    assert dec.feed(b"\n\r") == [("message", "x")]   # CR|LF is one line end; then an empty line
    assert dec.feed(b"\ndata: y\r\n\r\n") == [("message", "y")]


def test_sse_utf8_split_inside_a_character():
    raw = "data: café 🦩\n\n".encode()
    for i in range(1, len(raw)):
        assert sse_all([raw[:i], raw[i:]]) == [("message", "café 🦩")]


def test_sse_invalid_utf8_is_a_decode_error():
    with pytest.raises(DecodeError, match="UTF-8"):
        SSEDecoder().feed(b"data: \xff\xfe\n\n")


# --- NDJSON ---------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.dictionaries(st.text(max_size=5), json_values, max_size=4), max_size=6),
       crlf=st.booleans(), cuts=st.lists(st.integers(1, 1000), max_size=20))
def test_ndjson_any_chunking(values, crlf, cuts):
    eol = "\r\n" if crlf else "\n"
    raw = "".join(json.dumps(v, ensure_ascii=False) + eol + eol * (i % 2) for i, v in enumerate(values)).encode()
    dec = NDJSONDecoder()
    got = []
    for c in split(raw, cuts):
        got += dec.feed(c)
    got += dec.close()
    assert got == values


def test_ndjson_malformed_line():
    with pytest.raises(DecodeError, match="malformed JSON"):
        NDJSONDecoder().feed(b'{"a": 1}\n{"a": \n')


# --- JSON array -------------------------------------------------------------------

objects = st.lists(st.dictionaries(st.text(max_size=6), json_values | st.text(alphabet='{}[]"\\,é🦩 ', max_size=8),
                                   max_size=4), max_size=5)


@settings(max_examples=150, deadline=None)
@given(values=objects, pretty=st.booleans(), cuts=st.lists(st.integers(1, 3000), max_size=40))
def test_json_array_any_chunking(values, pretty, cuts):
    sep = "\n,\r\n" if pretty else ","
    raw = ("[" + sep.join(json.dumps(v, indent=2 if pretty else None, ensure_ascii=False) for v in values)
           + "]").encode()
    dec = JSONArrayDecoder()
    got = []
    for c in split(raw, cuts):
        got += dec.feed(c)
    assert got == values
    assert dec.closed


def test_json_array_truncated_and_garbage():
    dec = JSONArrayDecoder()
    assert dec.feed(b'[{"a": "}"}\n,\r\n{"b": ') == [{"a": "}"}]
    assert not dec.closed and dec.pending
    with pytest.raises(DecodeError):
        JSONArrayDecoder().feed(b"<html>")
    with pytest.raises(DecodeError):
        JSONArrayDecoder().feed(b'[{"a": 1}] trailing')
    with pytest.raises(DecodeError, match="UTF-8"):
        JSONArrayDecoder().feed(b'[{"a": "\xff"}]')


# --- protocol parsers, corpus bodies byte by byte ----------------------------------

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "conformance" / "wire"
CASES = sorted(CORPUS.glob("*.json")) if CORPUS.is_dir() else []
_PARSERS = {"anthropic": AnthropicParser, "openai-compatible": OpenAIParser, "ollama": OllamaParser,
            "gemini": GeminiParser}


def parse(case: dict, step: int) -> StreamResult:
    parser = _PARSERS[case["provider"]]()
    parser.begin(case["response"]["status"], case["response"]["headers"].get("content-type", ""))
    body = case["response"]["body"].encode()
    result = StreamResult()
    for i in range(0, len(body), step):
        for ev in parser.take(body[i:i + step], float(i)):
            result.add(ev)
        if parser.done:
            break
    if not parser.done:
        for ev in parser.close(float(len(body))):
            result.add(ev)
    return result


@pytest.mark.skipif(not CASES, reason=f"conformance corpus not found at {CORPUS}")
@pytest.mark.parametrize("path", [p for p in CASES if json.loads(p.read_text())["response"]["status"] == 200],
                         ids=lambda p: p.stem)
def test_parser_byte_by_byte_equals_whole(path):
    case = json.loads(path.read_text(encoding="utf-8"))
    whole, bytewise = parse(case, 1 << 30), parse(case, 1)
    exp = case["expected"]
    for r in (whole, bytewise):
        assert (r.text, r.reasoning, r.finish_reason) == (exp["text"], exp["reasoning"], exp["finish_reason"])
        assert (r.input_tokens, r.output_tokens, r.reasoning_tokens) == (
            exp["input_tokens"], exp["output_tokens"], exp["reasoning_tokens"])
        assert [{"id": t.id, "name": t.name, "arguments": t.arguments} for t in r.tool_calls] == exp["tool_calls"]
        assert (r.error.kind.value if r.error else None) == (exp["error"] or {}).get("kind")
