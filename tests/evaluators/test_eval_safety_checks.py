"""Looping metrics on constructed texts; PII/secret and encoding detectors; JSON schema."""

from __future__ import annotations

import zlib

import pytest

from evaltrace.evaluators import ContactInfo, EncodingGuardrail, JsonSchema, LoopingDetection, NoPII, SensitiveData
from evaltrace.evaluators._detectors import detect, iban_valid, luhn_valid
from evaltrace.evaluators.encoding import encoding_findings
from evaltrace.evaluators.looping import (
    compression_ratio,
    longest_repeated_substring,
    repeated_substring_ratio,
    unique_sentence_ratio,
)

from .factories import build_case, build_trace

# --- looping ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ratio", "counted"),
    [
        ("This is sentence one. This is sentence two. This is sentence one.", 2 / 3, 3),
        ("Short. Tiny. Ok. This one is long enough.", 1.0, 1),  # < 10 characters omitted
        ("Same sentence here. same   SENTENCE here. Other sentence now.", 2 / 3, 3),
        ("", 1.0, 0),
    ],
)
def test_unique_sentence_ratio(text: str, ratio: float, counted: int) -> None:
    assert unique_sentence_ratio(text) == (pytest.approx(ratio), counted)


@pytest.mark.parametrize(
    ("text", "repeat"),
    [
        ("abcabcabc", "abc"),  # "abcabc" overlaps itself; the longest non-overlapping repeat is "abc"
        ("abcd", ""),
        ("banana", "an"),  # "ana" occurs twice but overlapping
        ("xyzxyz", "xyz"),
        ("aaaa", "aa"),
    ],
)
def test_longest_repeated_substring(text: str, repeat: str) -> None:
    assert longest_repeated_substring(text) == repeat


@pytest.mark.parametrize(
    ("text", "ratio", "length", "count"),
    [
        ("abcabcabc", 1.0, 3, 3),  # 3 * 3 / 9
        ("banana", 4 / 6, 2, 2),  # "an" * 2 / 6
        ("abcd", 0.0, 0, 0),
        ("hello world, hello moon", 12 / 23, 6, 2),  # "hello " x 2
    ],
)
def test_repeated_substring_ratio(text: str, ratio: float, length: int, count: int) -> None:
    assert repeated_substring_ratio(text) == (pytest.approx(ratio), length, count)


def test_compression_ratio_matches_zlib_level_9() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 20
    assert compression_ratio(text) == len(zlib.compress(text.encode(), 9)) / len(text.encode())
    assert compression_ratio("") == 1.0


LOOP = "I cannot help with that request. " * 12
PROSE = (
    "Paris is the capital of France and its largest city. It lies on the Seine in the north of the country. "
    "The city is known for its museums, including the Louvre, and for landmarks such as the Eiffel Tower. "
    "About two million people live in the city proper, and more than twelve million in the metropolitan area."
)


def test_looping_detection_on_loop_and_prose() -> None:
    loop = LoopingDetection().evaluate(build_trace(LOOP))
    assert not loop.passed
    assert loop.detail["unique_sentence_ratio"] == pytest.approx(1 / 12)
    assert loop.detail["repeated_substring_ratio"] == pytest.approx(1.0)
    assert loop.detail["compression_ratio"] < 0.2
    prose = LoopingDetection().evaluate(build_trace(PROSE))
    assert prose.passed and prose.detail["unique_sentence_ratio"] == 1.0
    # The score is the catalogue's primary metric, the unique sentence ratio.
    assert prose.score == pytest.approx(prose.detail["unique_sentence_ratio"])


# --- PII and secrets -------------------------------------------------------------------------------------

SECRET_TEXT = (
    "Mail john.doe@example.com or call +1 415-555-0132. Card 4111 1111 1111 1111, SSN 123-45-6789, "
    "IBAN GB82 WEST 1234 5698 7654 32, host 192.168.1.10, key sk-proj-abcdefghijklmnopqrstuvwxyz123456, "
    "-----BEGIN RSA PRIVATE KEY-----"
)


def test_luhn_and_iban_checks() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("GB82 WEST 1234 5698 7654 32") and not iban_valid("GB82 WEST 1234 5698 7654 33")


@pytest.mark.parametrize(
    ("text", "types"),
    [
        (SECRET_TEXT, ["email", "phone", "credit_card", "ssn", "iban", "ip_address", "api_key", "private_key"]),
        ("Card 4111 1111 1111 1112 is not valid", []),  # fails Luhn
        ("Released 2024-05-01, build 12345678, version 1.2.3.4", ["ip_address"]),  # 1.2.3.4 is an IPv4 address
        ("Released 2024-05-01, build 12345678", []),
        ("Paris had 2,148,271 inhabitants; Everest is 8,849 m; it costs $12,500 (11 500 EUR); RFC 7231", []),
        ("ISBN 978-3-16-148410-0, section 4.3.2, at 10:30; call 911", []),
        ("token ghp_" + "a" * 36 + " and AKIAABCDEFGHIJKLMNOP", ["api_key", "api_key"]),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", ["api_key"]),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", ["jwt"]),
        ("IPv6 2001:db8::8a2e:370:7334 here", ["ip_address"]),
    ],
)
def test_detect_types(text: str, types: list[str]) -> None:
    assert [f.type for f in detect(text)] == types


def test_no_pii_reports_type_and_span_never_the_value() -> None:
    result = NoPII().evaluate(build_trace(SECRET_TEXT))
    assert not result.passed and result.score == 0.0
    email = result.detail["findings"][0]
    assert email == {"field": "output.final_answer", "type": "email", "start": 5, "end": 25}
    assert SECRET_TEXT[email["start"] : email["end"]] == "john.doe@example.com"
    dumped = result.model_dump_json()
    for secret in ("john.doe@example.com", "4111 1111", "123-45-6789", "sk-proj-abc", "192.168.1.10"):
        assert secret not in dumped


def test_contact_and_sensitive_subsets_and_fields() -> None:
    assert ContactInfo().evaluate(build_trace("key sk-proj-abcdefghijklmnopqrstuvwxyz123456")).passed
    assert not ContactInfo().evaluate(build_trace("write to a@b.io")).passed
    assert SensitiveData().evaluate(build_trace("write to a@b.io")).passed
    clean = NoPII().evaluate(build_trace("Nothing personal here."))
    assert clean.passed and clean.score == 1.0 and clean.reason == "no finding"
    scan_context = NoPII(fields=("output.final_answer", "input.contexts"))
    leaked = scan_context.evaluate(build_trace("ok", contexts=["ssn 123-45-6789"]))
    assert leaked.detail["findings"][0]["field"] == "input.contexts"
    assert NoPII(allow=["email"]).evaluate(build_trace("a@b.io")).passed
    with pytest.raises(ValueError):
        NoPII(types=["passport"])


# --- encoding --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "types"),
    [
        ("Plain text, café, naïve, 東京, Привет.", []),
        ("broken \ufffd char", ["replacement_character"]),
        ("bell\x07 here\ttab\nnewline", ["control_character"]),
        ("p\u0430ypal login", ["mixed_script"]),  # Cyrillic "а" inside a Latin word
        ("Caf\u00c3\u00a9 and it\u00e2\u20ac\u2122s", ["mojibake", "mojibake"]),
        ("private \ue000 use", ["invalid_character"]),
    ],
)
def test_encoding_findings(text: str, types: list[str]) -> None:
    assert [f["type"] for f in encoding_findings(text)] == types


def test_encoding_guardrail_result() -> None:
    result = EncodingGuardrail().evaluate(build_trace("bad \ufffd"))
    assert not result.passed and result.detail["findings"] == [{"type": "replacement_character", "start": 4, "end": 5}]
    assert EncodingGuardrail(allow=("replacement_character",)).evaluate(build_trace("bad \ufffd")).passed


# --- JSON schema -----------------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}


@pytest.mark.parametrize(
    ("answer", "schema", "passed", "errors"),
    [
        ('{"name": "Ann", "age": 3}', SCHEMA, True, []),
        ('```json\n{"name": "Ann", "age": 3}\n```', SCHEMA, True, []),
        ('{"name": "Ann", "age": -1}', SCHEMA, False, ["/age"]),
        ('{"age": "x"}', SCHEMA, False, ["/", "/age"]),
        ("not json", SCHEMA, False, []),
        ("[1, 2]", {}, True, []),
        ("{oops", {}, False, []),
    ],
)
def test_json_schema(answer: str, schema: dict[str, object], passed: bool, errors: list[str]) -> None:
    result = JsonSchema(schema).evaluate(build_trace(answer))
    assert result.passed is passed
    assert [e["path"] for e in result.detail["errors"]] == errors


def test_json_schema_from_case_and_bad_schema() -> None:
    case = build_case(metadata={"json_schema": {"type": "array"}})
    assert JsonSchema().evaluate(build_trace("[]"), case).passed
    assert JsonSchema().evaluate(build_trace("[]"), None).status == "skipped"
    import jsonschema

    with pytest.raises(jsonschema.SchemaError):
        JsonSchema({"type": "nope"})
