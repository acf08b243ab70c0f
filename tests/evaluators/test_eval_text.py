"""Deterministic text evaluators, table-driven with hand-checked values."""

from __future__ import annotations

import re
from typing import Any

import pytest

from evaltrace.evaluators import (
    ContainsText,
    ExactMatch,
    Facts,
    Length,
    NotContains,
    Regex,
    TextMatching,
)
from evaltrace.evaluators._text import parse_numbers, split_sentences
from evaltrace.schema import EvaluationResult

from .factories import build_case, build_trace


def run(evaluator: Any, answer: str, case: Any = None, **trace_kwargs: Any) -> EvaluationResult:
    result = evaluator.evaluate(build_trace(answer, **trace_kwargs), case)
    assert isinstance(result, EvaluationResult)
    return result


@pytest.mark.parametrize(
    ("evaluator", "answer", "passed", "score", "missing"),
    [
        (ContainsText("Paris", "France"), "Paris is in FRANCE.", True, 1.0, []),
        (ContainsText("Paris", "France"), "Paris is in Texas.", False, 0.5, ["France"]),
        (ContainsText("Paris", case_sensitive=True), "paris", False, 0.0, ["Paris"]),
        (ContainsText("new   york"), "I love New York", True, 1.0, []),
        (ContainsText("a", "b", "c", threshold=0.6), "a b", True, 2 / 3, ["c"]),
    ],
)
def test_contains_text(evaluator: ContainsText, answer: str, passed: bool, score: float, missing: list[str]) -> None:
    result = run(evaluator, answer)
    assert (result.passed, result.score, result.detail["missing"]) == (passed, pytest.approx(score), missing)
    assert result.detail["threshold"] == evaluator.threshold and result.detail["direction"] == "higher"


def test_contains_text_reads_case_and_other_fields(make_case: Any) -> None:
    case = build_case(answer_should_include=["42"])
    assert run(ContainsText(), "the answer is 42", case).passed
    thinking = ContainsText("step", field="output.thinking")
    assert thinking.evaluate(build_trace("x", thinking="step by step"), None).passed
    by_input = ContainsText("weather", field="input.question")
    assert by_input.evaluate(build_trace("x", question="What's the weather?"), None).passed


def test_contains_text_skips_without_texts_or_field() -> None:
    skipped = run(ContainsText(), "anything")
    assert skipped.status == "skipped" and not skipped.passed and skipped.score is None
    missing_field = ContainsText("x", field="output.structured.key").evaluate(build_trace("x"), None)
    assert missing_field.status == "skipped"


@pytest.mark.parametrize(
    ("texts", "answer", "passed", "score", "found"),
    [
        (("password", "secret"), "Nothing to see", True, 1.0, []),
        (("password", "secret"), "The PASSWORD is hunter2", False, 0.5, ["password"]),
        (("a", "b"), "a b", False, 0.0, ["a", "b"]),
    ],
)
def test_not_contains(texts: tuple[str, ...], answer: str, passed: bool, score: float, found: list[str]) -> None:
    result = run(NotContains(*texts), answer)
    assert (result.passed, result.score, result.detail["found"]) == (passed, score, found)


def test_not_contains_from_case() -> None:
    case = build_case(answer_should_not_include=["sorry"])
    assert not run(NotContains(), "Sorry, I can't", case).passed


@pytest.mark.parametrize(
    ("patterns", "mode", "answer", "passed", "score"),
    [
        ((r"\d{3}-\d{4}",), "all", "call 555-1234", True, 1.0),
        ((r"\d{3}-\d{4}", r"^Hello"), "all", "call 555-1234", False, 0.5),
        ((r"\d{3}-\d{4}", r"^Hello"), "any", "call 555-1234", True, 1.0),
        ((r"\d{3}-\d{4}", r"^Hello"), "none", "call 555-1234", False, 0.5),
        ((r"foo",), "none", "bar", True, 1.0),
    ],
)
def test_regex(patterns: tuple[str, ...], mode: Any, answer: str, passed: bool, score: float) -> None:
    result = run(Regex(*patterns, mode=mode), answer)
    assert (result.passed, result.score) == (passed, score)


def test_regex_flags_and_validation() -> None:
    assert run(Regex("hello", flags=re.IGNORECASE), "HELLO").passed
    with pytest.raises(ValueError):
        Regex()
    with pytest.raises(re.error):
        Regex("(")


@pytest.mark.parametrize(
    ("mode", "answer", "expected", "passed"),
    [
        ("exact", "  Paris ", "Paris", True),
        ("exact", "paris", "Paris", False),
        ("normalised", "PARIS!", "paris", True),
        ("normalised", "The   city of  Paris.", "the city of paris", True),
        ("contains", "It is Paris, France.", "paris france", True),
        ("startswith", "Yes, it is.", "yes", True),
        ("endswith", "Yes, it is.", "yes", False),
    ],
)
def test_text_matching(mode: Any, answer: str, expected: str, passed: bool) -> None:
    result = run(TextMatching(expected, mode=mode), answer)
    assert result.passed is passed and result.score == (1.0 if passed else 0.0)


def test_exact_match_uses_case_expected_answer() -> None:
    case = build_case(facts={"expected_answer": "42"})
    result = run(ExactMatch(), "42", case)
    assert result.passed and result.evaluator == "exact_match"
    assert run(ExactMatch(), "42", None).status == "skipped"


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("1200000", [1_200_000.0]),
        ("1,200,000 and 1.2M and 1.2 million", [1_200_000.0] * 3),
        ("2.5k users, 3 bn, -4", [2500.0, 3e9, -4.0]),
        ("version 1.2.3", [1.2]),
        ("15% of 7", [15.0, 7.0]),
    ],
)
def test_parse_numbers(text: str, numbers: list[float]) -> None:
    assert parse_numbers(text) == numbers


@pytest.mark.parametrize(
    ("facts", "answer", "score", "missing"),
    [
        ({"population": 1200000}, "About 1.2M people live there.", 1.0, []),
        ({"population": "1,200,000"}, "Population: 1200000", 1.0, []),
        ({"population": "1.2 million"}, "Population: 1,200,000.", 1.0, []),
        ({"population": 1200000}, "About 1.3M people", 0.0, ["population"]),
        ({"capital": "Paris", "year": 1889}, "The tower in PARIS opened in 1889.", 1.0, []),
        ({"capital": "Paris", "year": 1889}, "The tower in Paris opened in 1890.", 0.5, ["year"]),
        ({"colours": ["red", "blue"]}, "red and blue", 1.0, []),
        ({"colours": ["red", "blue"]}, "red only", 0.0, ["colours"]),
    ],
)
def test_facts(facts: dict[str, Any], answer: str, score: float, missing: list[str]) -> None:
    result = run(Facts(facts), answer)
    assert (result.score, result.detail["missing"], result.passed) == (score, missing, score == 1.0)


def test_facts_from_case_ignore_expected_answer_key() -> None:
    case = build_case(facts={"expected_answer": "Paris is the capital", "revenue": 3_000_000})
    result = run(Facts(), "Revenue was $3M.", case)
    assert result.passed and result.detail["facts"] == ["revenue"]


def test_split_sentences() -> None:
    assert split_sentences("One. Two!  Three?\nFour") == ["One.", "Two!", "Three?", "Four"]


@pytest.mark.parametrize(
    ("bounds", "answer", "verdict", "score"),
    [
        ({"min_words": 3, "max_words": 5}, "one two three four", "appropriate", 1.0),
        ({"min_words": 4}, "one two", "too_short", 0.5),
        ({"max_words": 2}, "one two three four", "too_long", 0.5),
        ({}, "", "appropriate", 1.0),
    ],
)
def test_length(bounds: dict[str, int], answer: str, verdict: str, score: float) -> None:
    result = run(Length(**bounds), answer)
    assert result.detail["length_appropriateness"] == verdict
    assert result.score == score and result.passed is (verdict == "appropriate")


def test_length_counts() -> None:
    result = run(Length(optimal_words=5), "Hello there. How are you doing today?")
    assert result.detail["character_count"] == 37
    assert result.detail["word_count"] == 7
    assert result.detail["sentence_count"] == 2
    assert result.detail["distance_from_optimal"] == 2


def test_inputs_are_found_where_documented() -> None:
    from evaltrace.evaluators._base import MissingInputError, context_chunks, question_text
    from evaltrace.schema import ToolResult, TraceMessage

    assert question_text(build_trace("", question="Q?")) == "Q?"
    only_context = build_trace("", contexts=["c"])
    with pytest.raises(MissingInputError):
        question_text(only_context)
    single = build_trace("").model_copy(update={"input": {"city": "Paris", "contexts": ["c"]}})
    assert question_text(single) == "Paris"
    chat = build_trace("").model_copy(update={"messages": [TraceMessage(role="user", content="Hi there")]})
    assert question_text(chat) == "Hi there"
    assert context_chunks(only_context) == ["c"]
    tools = build_trace("").model_copy(
        update={"tool_results": [ToolResult(name="search", content={"hits": [1]}), ToolResult(name="x", content="doc")]}
    )
    assert context_chunks(tools) == ['{"hits": [1]}', "doc"]
    with pytest.raises(MissingInputError):
        context_chunks(build_trace(""))
