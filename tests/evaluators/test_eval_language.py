"""LanguageMismatch: the offline lingua detector on hand-checked texts, the judge path, and the missing extra."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from evaltrace.evaluators import Judge, LanguageMismatch, MissingExtraError

from .factories import build_trace
from .fake_openai import FakeOpenAI

needs_lingua = pytest.mark.skipif(
    importlib.util.find_spec("lingua") is None, reason="the languages extra (lingua-language-detector) is not installed"
)

# A handful of languages keeps model loading to a few seconds (all 75 take tens of seconds and ~1 GB).
LANGUAGES = ["en", "fr", "de", "es", "it", "nl"]

# Hand-checked: each text was written in the language named next to it.
TABLE = [
    ("What is the capital of France?", "The capital of France is Paris.", "en", "en"),
    ("Quelle est la capitale de la France ?", "La capitale de la France est Paris.", "fr", "fr"),
    ("Was ist die Hauptstadt von Frankreich?", "Die Hauptstadt von Frankreich ist Paris.", "de", "de"),
    ("¿Cuál es la capital de Francia?", "La capital de Francia es París.", "es", "es"),
    ("What is the capital of France?", "La capitale de la France est Paris.", "en", "fr"),
    ("Quelle est la capitale de la France ?", "Die Hauptstadt von Frankreich ist Paris.", "fr", "de"),
    (
        "Was ist die Hauptstadt von Frankreich?",
        "It is Paris, which is also the largest city in the country.",
        "de",
        "en",
    ),
    ("¿Cuál es la capital de Francia?", "La capitale della Francia è Parigi.", "es", "it"),
    ("Wat is de hoofdstad van Frankrijk?", "De hoofdstad van Frankrijk is Parijs.", "nl", "nl"),
    # Code and URLs are not prose: the French string inside the code block must not decide.
    (
        "How do I print a greeting in Python?",
        "Call the print function, as shown here:\n```python\nprint('bonjour tout le monde, comment allez-vous')\n```\n"
        "See https://docs.python.org/fr/3/library/functions.html for the details.",
        "en",
        "en",
    ),
]


@pytest.fixture(scope="module")
def lingua_evaluator() -> LanguageMismatch:
    return LanguageMismatch(languages=LANGUAGES)


@needs_lingua
@pytest.mark.parametrize(("question", "answer", "q_lang", "a_lang"), TABLE)
async def test_lingua_detects_both_languages(
    lingua_evaluator: LanguageMismatch, question: str, answer: str, q_lang: str, a_lang: str
) -> None:
    result = await lingua_evaluator.evaluate(build_trace(answer, question=question))
    assert result.status == "completed"
    assert (result.detail["question_language"], result.detail["answer_language"]) == (q_lang, a_lang)
    assert result.passed is (q_lang == a_lang) and result.score == (1.0 if q_lang == a_lang else 0.0)
    assert 0 < result.detail["question_confidence"] <= 1 and 0 < result.detail["answer_confidence"] <= 1
    assert result.detail["detector"] == "lingua" and result.evaluator_type == "deterministic"
    assert result.evaluator_version.startswith("v1.0.0+lingua.")


@needs_lingua
async def test_lingua_verdict_is_as_confident_as_its_less_sure_detection(lingua_evaluator: LanguageMismatch) -> None:
    question, answer = "Where is the nearest train station?", "La gare est à deux rues d'ici, sur la gauche."
    result = await lingua_evaluator.evaluate(build_trace(answer, question=question))
    detail = result.detail
    assert result.confidence == min(detail["question_confidence"], detail["answer_confidence"])
    assert 0 < result.confidence <= 1


@needs_lingua
@pytest.mark.parametrize(
    ("question", "answer", "why"),
    [
        ("What is 6 times 7?", "42", "no natural language detected in the answer"),
        ("1234 + 5678", "The sum is 6912.", "no natural language detected in the question"),
        ("What is the capital of France?", None, "trace has no output.final_answer"),
    ],
)
async def test_lingua_skips_without_language(
    lingua_evaluator: LanguageMismatch, question: str, answer: str | None, why: str
) -> None:
    result = await lingua_evaluator.evaluate(build_trace(answer, question=question))
    assert result.status == "skipped" and result.passed is False and result.score is None
    assert result.detail["skipped"] == why


@needs_lingua
def test_lingua_detector_is_shared_and_options_are_checked() -> None:
    from evaltrace.evaluators.language import lingua_detector

    first = LanguageMismatch(languages=["EN", "fr_FR", "de"])
    assert first.languages == ("en", "fr", "de") and first.detector == "lingua"
    assert lingua_detector(("en", "fr", "de"), False) is lingua_detector(("en", "fr", "de"), False)
    with pytest.raises(ValueError, match=r"unknown ISO 639-1 codes for lingua: \['xx'\]"):
        LanguageMismatch(languages=["en", "xx"])
    with pytest.raises(ValueError, match="at least two languages"):
        LanguageMismatch(languages=["en"])


def test_unknown_detector_is_rejected() -> None:
    with pytest.raises(ValueError, match="detector must be 'lingua' or 'judge'"):
        LanguageMismatch(detector="fasttext")  # type: ignore[arg-type]


def test_missing_lingua_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import lingua` raise ImportError, as if it were not installed.
    monkeypatch.setitem(sys.modules, "lingua", None)
    with pytest.raises(MissingExtraError, match=r"evaltrace\[languages\].*lingua-language-detector"):
        LanguageMismatch(detector="lingua")
    with pytest.raises(MissingExtraError, match=r"evaltrace\[languages\]"):
        LanguageMismatch(languages=["en", "fr"])  # a lingua option selects lingua


def test_without_detector_or_lingua_options_the_judge_is_used(judge: Judge) -> None:
    assert LanguageMismatch().detector == "judge"  # never loads lingua's models unasked
    assert LanguageMismatch(judge).detector == "judge"
    assert LanguageMismatch(languages=["en", "fr"]).detector == "lingua"


async def test_judge_detector_needs_no_lingua(
    monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI, judge: Judge
) -> None:
    monkeypatch.setitem(sys.modules, "lingua", None)
    fake_openai.script(json.dumps({"question_language": "en", "answer_language": "fr-FR", "reason": "..."}))
    evaluator = LanguageMismatch(judge)
    assert evaluator.detector == "judge" and evaluator.version == "v1.0.0+language-mismatch.v1"
    result = await evaluator.evaluate(build_trace("Bonjour", question="Hello?"))
    assert result.passed is False and result.evaluator_type == "llm_judge"
    assert (result.detail["question_language"], result.detail["answer_language"]) == ("en", "fr")
    assert result.detail["detector"] == "judge" and result.detail["judge"]["model"] == "judge-model"
    assert "Hello?" in fake_openai.prompts()[0]
