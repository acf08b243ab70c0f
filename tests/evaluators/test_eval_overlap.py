"""BLEU and ROUGE cross-checked against sacrebleu and rouge-score on several texts."""

from __future__ import annotations

import sys

import pytest

from evaltrace.evaluators import Bleu, MissingExtraError, Rouge

from .factories import build_case, build_trace

sacrebleu = pytest.importorskip("sacrebleu", reason="the metrics extra (sacrebleu) is not installed")
rouge_scorer = pytest.importorskip(
    "rouge_score.rouge_scorer", reason="the metrics extra (rouge-score) is not installed"
)

PAIRS = [
    ("The cat sat on the mat.", "The cat sat on the mat."),
    ("The cat is sitting on the mat today.", "The cat sat on the mat."),
    ("A quick brown fox jumped over a lazy dog.", "The quick brown fox jumps over the lazy dog."),
    ("Completely unrelated words here.", "The quick brown fox jumps over the lazy dog."),
    ("Paris is the capital of France, and it is famous for the Eiffel Tower.", "The capital of France is Paris."),
]


@pytest.mark.parametrize(("hypothesis", "reference"), PAIRS)
def test_bleu_matches_sacrebleu(hypothesis: str, reference: str) -> None:
    result = Bleu().evaluate(build_trace(hypothesis), build_case(facts={"expected_answer": reference}))
    expected = sacrebleu.sentence_bleu(hypothesis, [reference]).score / 100
    assert result.score == pytest.approx(expected)
    assert result.passed is (expected >= 0.5)


@pytest.mark.parametrize(("hypothesis", "reference"), PAIRS)
def test_rouge_matches_rouge_score(hypothesis: str, reference: str) -> None:
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    expected = scorer.score(reference, hypothesis)
    result = Rouge(references=[reference]).evaluate(build_trace(hypothesis))
    for key in ("rouge1", "rouge2", "rougeL"):
        assert result.detail["f1"][key] == pytest.approx(expected[key].fmeasure)
    assert result.score == pytest.approx(expected["rougeL"].fmeasure)
    rouge1 = Rouge(references=[reference], rouge_type="rouge1").evaluate(build_trace(hypothesis))
    assert rouge1.score == pytest.approx(expected["rouge1"].fmeasure)


def test_exact_copy_scores_one_and_multiple_references_take_the_best() -> None:
    assert Bleu(["The cat sat on the mat."]).evaluate(build_trace("The cat sat on the mat.")).score == pytest.approx(
        1.0
    )
    best = Rouge(references=["unrelated text", "the cat sat"]).evaluate(build_trace("the cat sat"))
    assert best.score == pytest.approx(1.0)


def test_missing_reference_is_skipped() -> None:
    assert Bleu().evaluate(build_trace("x"), None).status == "skipped"


def test_missing_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import sacrebleu` raise ImportError, as if it were not installed.
    monkeypatch.setitem(sys.modules, "sacrebleu", None)
    with pytest.raises(MissingExtraError, match=r"evaltrace\[metrics\]"):
        Bleu()
    monkeypatch.setitem(sys.modules, "rouge_score.rouge_scorer", None)
    with pytest.raises(MissingExtraError, match="rouge-score"):
        Rouge()
