"""Classification: per-case label equality, and run-level accuracy, per-class precision/recall/F1, confusion."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from evaltrace.evaluators._base import DeterministicEvaluator, MissingInputError, Verdict, answer_text, as_text
from evaltrace.evaluators._text import normalise
from evaltrace.schema import EvalCase, EvaluationResult, Trace


def _label_key(label: str) -> str:
    return normalise(label, punctuation=False)


@dataclass(frozen=True)
class ClassMetrics:
    """Precision, recall and F1 of one class (0.0 when undefined), with its support (true count)."""

    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True)
class ClassificationReport:
    """Run-level classification metrics."""

    accuracy: float
    per_class: dict[str, ClassMetrics]
    confusion_matrix: dict[str, dict[str, int]]
    """``confusion_matrix[expected][predicted]`` = count."""
    macro_f1: float
    total: int
    passed: bool
    threshold: float = 0.75
    labels: list[str] = field(default_factory=list)


def classification_report(pairs: Iterable[tuple[str, str]], *, threshold: float = 0.75) -> ClassificationReport:
    """Compute accuracy, per-class precision/recall/F1 and the confusion matrix of (expected, predicted) pairs.

    Args:
        pairs: ``(expected, predicted)`` labels, compared as given (normalise them first if needed).
        threshold: Accuracy needed for ``passed``.

    Returns:
        The report; with no pair, accuracy is 0.0 and ``passed`` False.
    """
    items = list(pairs)
    labels = sorted({label for pair in items for label in pair})
    matrix = {e: {p: 0 for p in labels} for e in labels}
    for expected, predicted in items:
        matrix[expected][predicted] += 1
    per_class: dict[str, ClassMetrics] = {}
    for label in labels:
        tp = matrix[label][label]
        predicted_total = sum(matrix[e][label] for e in labels)
        support = sum(matrix[label].values())
        precision = tp / predicted_total if predicted_total else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[label] = ClassMetrics(precision, recall, f1, support)
    correct = sum(matrix[label][label] for label in labels)
    accuracy = correct / len(items) if items else 0.0
    supported = [m.f1 for m in per_class.values() if m.support]
    macro = sum(supported) / len(supported) if supported else 0.0
    return ClassificationReport(
        accuracy, per_class, matrix, macro, len(items), bool(items) and accuracy >= threshold, threshold, labels
    )


def report_from_results(results: Iterable[EvaluationResult], *, threshold: float = 0.75) -> ClassificationReport:
    """Build the run-level report from :class:`Classification` results (their ``detail`` labels)."""
    pairs = [
        (str(r.detail["expected"]), str(r.detail["predicted"]))
        for r in results
        if r.status == "completed" and "expected" in r.detail and "predicted" in r.detail
    ]
    return classification_report(pairs, threshold=threshold)


class Classification(DeterministicEvaluator):
    """The predicted label equals the expected label (case-insensitive, whitespace collapsed).

    Predicted: the answer; with ``labels`` given, the one label the answer names (a whole-word match, exact
    answer first). Expected: the constructor value, else ``case.expected.facts["label"]``, else the expected
    answer. Per case the score is 1/0; the 0.75 threshold applies to run-level accuracy (see
    :func:`report_from_results`).
    """

    name = "classification"

    def __init__(
        self,
        expected: str | None = None,
        *,
        labels: Sequence[str] | None = None,
        field: str = "output.final_answer",
        threshold: float = 0.75,
    ) -> None:
        """Configure the labels.

        Args:
            expected: Expected label.
            labels: Allowed labels, used to extract the prediction from a longer answer.
            field: Dotted path of the Trace holding the prediction.
            threshold: Run-level accuracy needed (the per-case verdict is exact equality).
        """
        self.expected = expected
        self.labels = list(labels) if labels else None
        self.field = field
        self.threshold = threshold

    def _predicted(self, answer: str) -> str:
        if not self.labels:
            return _label_key(answer)
        key = _label_key(answer)
        named = [label for label in self.labels if _label_key(label) == key]
        if not named:
            named = [lab for lab in self.labels if re.search(rf"(?<!\w){re.escape(_label_key(lab))}(?!\w)", key)]
        return _label_key(named[0]) if len(named) == 1 else key

    def _expected(self, case: EvalCase | None) -> str:
        if self.expected is not None:
            return _label_key(self.expected)
        if case is not None and case.expected.facts.get("label") is not None:
            return _label_key(as_text(case.expected.facts["label"]) or "")
        if case is not None:
            for source in (case.expected.facts, case.metadata):
                if source.get("expected_answer") is not None:
                    return _label_key(as_text(source["expected_answer"]) or "")
        raise MissingInputError("no expected label (case.expected.facts['label'])")

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Compare the labels."""
        expected = self._expected(case)
        predicted = self._predicted(answer_text(trace, self.field))
        ok = predicted == expected
        reason = f"predicted {predicted!r}, expected {expected!r}"
        return Verdict(ok, 1.0 if ok else 0.0, reason, {"expected": expected, "predicted": predicted})


def label_counts(results: Iterable[EvaluationResult]) -> Counter[str]:
    """Count the predicted labels of Classification results (a quick distribution check)."""
    return Counter(str(r.detail.get("predicted")) for r in results if "predicted" in r.detail)
