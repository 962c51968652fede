"""Sample-set loading and validation, image loading, and the shipped sets
(every set loads; handwritten good answers pass every check type they use)."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from core.answering.checks import CHECK_TYPES, GRADED_CHECK_TYPES, AnswerFacts, run_case_checks
from core.answering.sampleset import MAX_IMAGE_BYTES, Case, SampleSetError, load_image, load_sample_set
from store.records import AnswerTrace, TraceCall, TraceStep

REPO = Path(__file__).resolve().parent.parent
SETS = REPO / "sample_sets"
PNG_1PX = (b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0) + b"\x00" * 4)


def write_set(tmp_path: Path, *lines: object, name: str = "x.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(SampleSetError) as err:
        load_sample_set(path)
    return err.value.problems


def test_loads_a_full_case(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(PNG_1PX)
    path = write_set(
        tmp_path,
        {"id": "fmt-007", "category": "structured_output", "system": "Be terse.", "prompt": "Give JSON",
         "follow_ups": ["Shorter", "Now YAML"], "images": ["images/a.png"],
         "checks": [{"type": "json_schema", "schema": {"type": "object"}}, {"type": "regex", "pattern": "x", "turn": 0}],
         "reference": "note", "tags": ["t1"], "params": {"temperature": 0, "max_tokens": 64}},
        "",
        {"id": "b", "category": "c", "prompt": "hi"},
    )
    s = load_sample_set(path)
    assert s.name == "x" and s.path == str(path)
    assert s.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [c.id for c in s.cases] == ["fmt-007", "b"]
    case = s.cases[0]
    assert (case.prompt, case.follow_ups) == ("Give JSON", ("Shorter", "Now YAML"))
    assert case.answer_count == 3
    assert case.params.temperature == 0 and case.params.max_tokens == 64
    assert [c.type for c in case.checks] == ["json_schema", "regex"]
    assert s.categories == ["c", "structured_output"]
    [img] = s.images_for(case)
    assert img.mime == "image/png" and img.path == "images/a.png"
    assert base64.b64decode(img.data) == PNG_1PX
    msgs = case.opening_messages(s.images_for(case))
    assert len(msgs) == 1 and msgs[0].role == "user" and msgs[0].images == (img,)


def test_messages_case_and_leading_system_message(tmp_path):
    path = write_set(tmp_path, {"id": "m", "category": "c", "messages": [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}], "follow_ups": ["q3"]})
    case = load_sample_set(path).cases[0]
    assert case.system == "sys"
    assert case.prompt is None and case.follow_ups == ("q3",)
    msgs = case.opening_messages()
    assert [(m.role, m.content) for m in msgs] == [("user", "q1"), ("assistant", "a1"), ("user", "q2")]


def test_content_hash_changes_with_the_file(tmp_path):
    p1 = write_set(tmp_path, {"id": "a", "category": "c", "prompt": "x"}, name="one.jsonl")
    p2 = write_set(tmp_path, {"id": "a", "category": "c", "prompt": "y"}, name="two.jsonl")
    assert load_sample_set(p1).sha256 != load_sample_set(p2).sha256


def test_error_names_file_line_and_field(tmp_path):
    path = write_set(tmp_path, *[{"id": f"ok{i}", "category": "c", "prompt": "p"} for i in range(11)],
                     {"id": "bad", "category": "c", "prompt": "p", "checks": [{"type": "regex"}]})
    assert problems(path) == [f"{path}:12: checks.0.pattern: field required"]


def test_bad_json_and_wrong_types(tmp_path):
    path = write_set(tmp_path, '{"id": "a", "category": "c", "prompt": "p"', {"id": "b", "category": 3, "prompt": "p"},
                     "[1, 2]", {"id": "d", "category": "c", "prompt": "p", "follow_ups": "not a list"})
    got = problems(path)
    assert got[0].startswith(f"{path}:1: invalid JSON:")
    assert got[1] == f"{path}:2: category: input should be a valid string"
    assert got[2] == f"{path}:3: a case must be a JSON object, not list"
    assert got[3].startswith(f"{path}:4: follow_ups:")


def test_unknown_field_and_unknown_check_type(tmp_path):
    path = write_set(tmp_path, {"id": "a", "category": "c", "prompt": "p", "promt": "typo"},
                     {"id": "b", "category": "c", "prompt": "p", "checks": [{"type": "spelling"}]})
    got = problems(path)
    assert got[0] == f"{path}:1: promt: extra inputs are not permitted"
    assert got[1].startswith(f"{path}:2: checks.0: input tag 'spelling'")


def test_bad_check_specs_caught_at_load_time(tmp_path):
    path = write_set(tmp_path,
                     {"id": "a", "category": "c", "prompt": "p", "checks": [{"type": "regex", "pattern": "([a-z"}]},
                     {"id": "b", "category": "c", "prompt": "p", "checks": [{"type": "contains", "values": ["x"]},
                                                                             {"type": "json_schema", "schema": {"type": 12}}]},
                     {"id": "c", "category": "c", "prompt": "p", "checks": [{"type": "max_words", "limit": "ten"}]})
    got = problems(path)
    assert got[0].startswith(f"{path}:1: checks.0.pattern: invalid regex")
    assert got[1].startswith(f"{path}:2: checks.1.schema: invalid JSON schema")
    assert got[2].startswith(f"{path}:3: checks.0.limit:")


def test_duplicate_ids_name_both_lines(tmp_path):
    path = write_set(tmp_path, {"id": "a", "category": "c", "prompt": "p"}, {"id": "b", "category": "c", "prompt": "p"},
                     {"id": "a", "category": "c", "prompt": "q"})
    assert problems(path) == [f"{path}:3: id: duplicate id 'a' (first on line 1)"]


def test_prompt_xor_messages_and_message_shape(tmp_path):
    path = write_set(
        tmp_path,
        {"id": "a", "category": "c"},
        {"id": "b", "category": "c", "prompt": "p", "messages": [{"role": "user", "content": "x"}]},
        {"id": "c", "category": "c", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]},
        {"id": "d", "category": "c", "messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]},
        {"id": "e", "category": "c", "prompt": "p", "checks": [{"type": "regex", "pattern": "x", "turn": 1}]},
        {"id": "f g", "category": "c", "prompt": "p"},
    )
    got = problems(path)
    assert got[0] == f"{path}:1: give exactly one of 'prompt' or 'messages'"
    assert got[1] == f"{path}:2: give exactly one of 'prompt' or 'messages'"
    assert "must end with a user message" in got[2] and got[2].startswith(f"{path}:3:")
    assert "alternate" in got[3]
    assert got[4] == f"{path}:5: checks.0.turn: 1 is outside the case's 1 answer(s)"
    assert got[5].startswith(f"{path}:6: id:")


def test_image_problems(tmp_path):
    (tmp_path / "big.png").write_bytes(PNG_1PX + b"\x00" * (MAX_IMAGE_BYTES + 1))
    (tmp_path / "doc.bmp").write_bytes(b"BM" + b"\x00" * 50)
    path = write_set(tmp_path,
                     {"id": "a", "category": "c", "prompt": "p", "images": ["missing.png"]},
                     {"id": "b", "category": "c", "prompt": "p", "images": ["big.png"]},
                     {"id": "c", "category": "c", "prompt": "p", "images": ["doc.bmp"]},
                     {"id": "d", "category": "c", "prompt": "p", "images": ["/etc/passwd"]})
    got = problems(path)
    assert got[0].startswith(f"{path}:1: images.0: image file not found:")
    assert got[1].startswith(f"{path}:2: images.0: image too large:")
    assert got[2].startswith(f"{path}:3: images.0: unsupported image type:")
    assert got[3].startswith(f"{path}:4: images.0: image path '/etc/passwd' must be relative")


def test_missing_file_empty_file_and_non_utf8(tmp_path):
    assert problems(tmp_path / "nope.jsonl") == [f"{tmp_path / 'nope.jsonl'}: no such file"]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    assert problems(empty) == [f"{empty}: no cases"]
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": "a", "category": "caf\xe9", "prompt": "p"}\n')
    assert problems(latin)[0].startswith(f"{latin}:1: not UTF-8")


def test_error_message_is_capped(tmp_path):
    path = write_set(tmp_path, *["{bad"] * 30)
    with pytest.raises(SampleSetError) as err:
        load_sample_set(path)
    assert len(err.value.problems) == 30
    assert "and 10 more problem(s)" in str(err.value)


def test_load_image_detects_type_from_bytes(tmp_path):
    jpeg = tmp_path / "photo.png"  # wrong extension on purpose
    data = b"\xff\xd8\xff\xe0" + b"\x00" * 20
    jpeg.write_bytes(data)
    part = load_image(jpeg)
    assert part.mime == "image/jpeg"
    assert part.sha256 == hashlib.sha256(data).hexdigest()
    assert base64.b64decode(part.data) == data
    gif = tmp_path / "a.gif"
    gif.write_bytes(b"GIF89a" + b"\x00" * 10)
    assert load_image(gif).mime == "image/gif"
    webp = tmp_path / "a.webp"
    webp.write_bytes(b"RIFF\x10\x00\x00\x00WEBPVP8 ")
    assert load_image(webp).mime == "image/webp"
    with pytest.raises(SampleSetError):
        load_image(tmp_path / "none.png")


# ---------------------------------------------------------------- the shipped sets

SHIPPED = sorted(SETS.glob("*.jsonl"))


def test_shipped_sets_load_and_cover_the_dimensions():
    assert SHIPPED, "no sample sets shipped"
    cases = [c for p in SHIPPED for c in load_sample_set(p).cases]
    assert len(cases) >= 60
    assert {c.category for c in cases} >= {
        "instruction_following", "structured_output", "long_context", "multi_turn", "clarify_or_decline",
        "reasoning", "code", "messy_input", "vision"}
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "ids should be unique across the shipped sets"
    assert sum(1 for c in cases if c.checks) >= 0.9 * len(cases)
    assert any(c.follow_ups for c in cases) and any(c.messages for c in cases) and any(c.images for c in cases)


def test_shipped_images_load():
    for path in SHIPPED:
        s = load_sample_set(path)
        for case in s.cases:
            for part in s.images_for(case):
                assert part.mime == "image/png"
                assert len(base64.b64decode(part.data)) < 20_000


def _decode_png(data: bytes) -> tuple[int, int, bytes]:
    """A minimal PNG reader for the generator's output (RGB, filter 0): checks every CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    w, h = size
    raw = zlib.decompress(idat)
    assert len(raw) == h * (1 + 3 * w)
    return w, h, raw


def test_image_generator_is_reproducible_and_valid(tmp_path):
    out = tmp_path / "img"
    subprocess.run([sys.executable, str(SETS / "make_images.py"), str(out)], check=True, capture_output=True)
    generated = sorted(p.name for p in out.iterdir())
    assert generated == sorted(p.name for p in (SETS / "images").glob("*.png"))
    for name in generated:
        assert (out / name).read_bytes() == (SETS / "images" / name).read_bytes(), f"{name} differs: rerun make_images.py"
        w, h, raw = _decode_png((out / name).read_bytes())
        assert 100 < w < 600 and 100 < h < 600
        assert raw.count(b"\xff") < 0.98 * len(raw)  # something was drawn on the white page


def test_long_context_generator_is_reproducible(tmp_path):
    out = tmp_path / "lc.jsonl"
    subprocess.run([sys.executable, str(SETS / "make_long_context.py"), str(out)], check=True, capture_output=True)
    assert out.read_bytes() == (SETS / "long_context.jsonl").read_bytes()
    s = load_sample_set(out)
    diary = s.case("lc-001").prompt
    assert len(diary.split()) > 5000
    # the planted fact sits deep in the document, and the question after it
    assert 0.03 < diary.index("4719") / len(diary) < 0.2
    assert diary.rstrip().endswith("east storage room?")


# Handwritten good answers: together they exercise every check type used in the sets.
GOOD: dict[str, list[str]] = {
    "if-004": ["Meet the Fjellvann bottle: double-walled stainless steel that keeps drinks cold for 24 hours, "
               "whether you are on a ferry or a fell. Light, leak-proof and built to last, Fjellvann is the last "
               "bottle you will need."],
    "if-008": ["Project meeting moved to Thursday"],
    "if-009": ["Lanterns swung above the night market, and every stall breathed steam into the cold air. "
               "Mira held her brother's hand and counted coins in her pocket: four, then five, then four again, "
               "because she kept losing track. The noodle seller shouted prices that rose as the crowd grew, "
               "and a man with a cart of oranges sang the same line of a song over and over. Somewhere behind "
               "the fish stalls a radio played an old ballad. Mira had promised their mother they would be home "
               "before the temple bell, but the bell had not rung, and the smell of grilled corn was a kind of "
               "argument she could not answer. Her brother pointed at a stall of paper kites shaped like birds, "
               "each one painted with a different eye. The old woman selling them looked up, smiled without teeth, "
               "and said, very quietly, that one of the kites could fly without wind."],
    "so-001": ['```json\n{"name": "Marta Oyelaran-Reyes", "email": "marta.oyelaran@bluefinch-logistics.nl", '
               '"phone": "+31 6 1234 5678", "company": "Blue Finch Logistics B.V."}\n```'],
    "so-002": ['[{"name": "Jupiter", "diameter_km": 142984}, {"name": "Saturn", "diameter_km": 120536}, '
               '{"name": "Uranus", "diameter_km": 51118}]'],
    "so-006": ['{"title": "Simple pancakes", "servings": 4, "ingredients": [{"item": "flour", "amount": 200, "unit": "g"}, '
               '{"item": "milk", "amount": 300, "unit": "ml"}, {"item": "eggs", "amount": 2, "unit": null}, '
               '{"item": "salt", "amount": 1, "unit": "pinch"}], "steps": ["Whisk everything.", "Rest 10 minutes.", '
               '"Fry thin pancakes in a hot pan."]}'],
    "mt-002": ["5 miles is about 8.05 km.", "5 nautical miles is 9.26 km."],
    "mt-004": ["A calm colour scheme helps visitors find their way around the centre's website. Pick two main colours "
               "and use them consistently.",
               "Organise the navigation menu around what visitors come for: events, room hire and volunteering. "
               "Keep it to six items at most."],
    "re-009": ["Day 0 is Monday 1 January; 90 = 12 x 7 + 6, and 2024 is a leap year.\nAnswer: Sunday, 31 March 2024"],
    "co-008": ["```python\ndef is_leap(year: int) -> bool:\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n\n"
               "assert is_leap(2000)\nassert not is_leap(1900)\nassert is_leap(2024)\nassert not is_leap(2023)\n```"],
    "cd-002": ["I don't have access to real-time market data, so I can't tell you yesterday's closing price. "
               "Check your broker or a financial news site."],
    "vi-003": ['{"merchant": "Corner Cafe", "items": [{"name": "Latte", "quantity": 2, "line_total": 9.00}, '
               '{"name": "Bagel", "quantity": 1, "line_total": 3.25}, {"name": "Cookie", "quantity": 3, "line_total": 5.40}], '
               '"subtotal": 17.65, "tax": 1.41, "total": 19.06}'],
    "lc-001": ["The east storage room's door code is 4719 (the keypad was replaced on day 9)."],
    "lc-003": ["Pieter Jansen runs the site at the end of the diary.", "He took over on day 81 from Ruth Okafor."],
    "tool-weather-single": ["It is 21 °C and sunny in Lisbon right now."],
    "tool-no-call-arithmetic": ["144"],
    "struct-invoice": ['{"invoice_number": "INV-2041", "invoice_date": "2025-01-28", "vendor": {"name": "Acme Tooling '
                       'GmbH", "vat_id": "DE813377541"}, "line_items": [{"description": "torque wrench", "quantity": 3, '
                       '"unit_price": 42.5}, {"description": "calibration service", "quantity": 1, "unit_price": 95.0}], '
                       '"total": 222.5, "currency": "EUR"}'],
}
# ... and how they came about, where the checks read the tool trace (one per answer).
GOOD_TRACES: dict[str, list[AnswerTrace]] = {
    "tool-weather-single": [AnswerTrace(stopped="answered", steps=[
        TraceStep(calls=[TraceCall(id="c1", name="get_weather", arguments={"city": "Lisbon"},
                                   result={"city": "Lisbon", "temp_c": 21, "conditions": "sunny"}, rule="tool_results.0")]),
        TraceStep(text="It is 21 °C and sunny in Lisbon right now.")])],
    "tool-no-call-arithmetic": [AnswerTrace(stopped="answered", steps=[TraceStep(text="144")])],
    "struct-invoice": [AnswerTrace(stopped="answered", structured="native", steps=[TraceStep(text="{}")])],
}


def _facts(case: Case, traces: list[AnswerTrace | None]) -> list[AnswerFacts]:
    return case.answer_facts(traces, SETS)


def _all_cases() -> dict[str, Case]:
    return {c.id: c for p in SHIPPED for c in load_sample_set(p).cases}


@pytest.mark.parametrize("case_id", sorted(GOOD))
def test_good_answers_pass_every_check(case_id):
    case = _all_cases()[case_id]
    answers = GOOD[case_id]
    assert len(answers) == case.answer_count
    traces = GOOD_TRACES.get(case_id, [None] * case.answer_count)
    outcomes = run_case_checks(case.all_checks, answers, _facts(case, traces))
    failed = [(o.name, o.detail) for o in outcomes if not o.passed]
    assert not failed
    # and a non-answer fails at least one of them
    empty = [AnswerTrace(stopped="answered", steps=[TraceStep()]) for _ in answers]
    assert not all(o.passed for o in run_case_checks(case.all_checks, [""] * case.answer_count, _facts(case, empty)))


def test_good_answers_cover_every_check_type_used():
    """Every check a function runs; those a model grades (rubric) ask a
    grader, so the shipped sets hold none and tests/test_rubric.py tests them."""
    cases = _all_cases()
    used = {c.type for case in cases.values() for c in case.all_checks}
    covered = {c.type for cid in GOOD for c in cases[cid].all_checks}
    assert covered == used == set(CHECK_TYPES) - GRADED_CHECK_TYPES
