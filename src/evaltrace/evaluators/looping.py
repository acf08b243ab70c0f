"""Looping detection: three repetition metrics over the answer (docs/evaluators.md, looping_detection).

* ``unique_sentence_ratio``: unique sentences / all sentences, sentences shorter than 10 characters omitted,
  sentences compared after case-folding and whitespace collapsing (higher is better; 1.0 with no sentence).
* ``repeated_substring_ratio``: length of the longest substring that occurs at least twice without overlapping,
  times its number of non-overlapping occurrences, divided by the text length (lower is better; 0.0 when
  nothing repeats). Counting non-overlapping occurrences keeps the metric in [0, 1].
* ``compression_ratio``: zlib level-9 compressed bytes / UTF-8 bytes (higher is better; repetitive text
  compresses well). Short texts can exceed 1.0 because of zlib's header; the raw value is reported.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from evaltrace.evaluators._base import AnySubjectEvaluator, Subject, Verdict, subject_texts
from evaltrace.evaluators._text import normalise, split_sentences
from evaltrace.schema import EvalCase

MIN_SENTENCE_CHARS = 10
MAX_SUBSTRING_CHARS = 20_000
"""Longer texts are measured on their first 20,000 characters (the search is O(n log n) slices)."""


@dataclass(frozen=True)
class LoopingMetrics:
    """The three looping metrics of one text."""

    unique_sentence_ratio: float
    sentences_counted: int
    repeated_substring_ratio: float
    longest_repeated_length: int
    longest_repeated_count: int
    compression_ratio: float


def unique_sentence_ratio(text: str) -> tuple[float, int]:
    """Return (unique / all sentences of at least 10 characters, number of such sentences)."""
    sentences = [normalise(s) for s in split_sentences(text) if len(s) >= MIN_SENTENCE_CHARS]
    if not sentences:
        return 1.0, 0
    return len(set(sentences)) / len(sentences), len(sentences)


def _repeats_without_overlap(text: str, length: int) -> str | None:
    first: dict[str, int] = {}
    for start in range(len(text) - length + 1):
        piece = text[start : start + length]
        seen = first.setdefault(piece, start)
        if start - seen >= length:
            return piece
    return None


def longest_repeated_substring(text: str) -> str:
    """Return the longest substring occurring twice without overlap ("" when none).

    Binary search on the length is valid because a repeat of length L contains a repeat of every length < L.
    """
    low, high, best = 1, len(text) // 2, ""
    while low <= high:
        middle = (low + high) // 2
        found = _repeats_without_overlap(text, middle)
        if found is None:
            high = middle - 1
        else:
            best, low = found, middle + 1
    return best


def repeated_substring_ratio(text: str) -> tuple[float, int, int]:
    """Return (longest repeated substring length × its non-overlapping count / text length, length, count)."""
    sample = text[:MAX_SUBSTRING_CHARS]
    if not sample:
        return 0.0, 0, 0
    repeat = longest_repeated_substring(sample)
    if not repeat:
        return 0.0, 0, 0
    count = sample.count(repeat)
    return len(repeat) * count / len(sample), len(repeat), count


def compression_ratio(text: str) -> float:
    """Return zlib level-9 compressed size / original size in bytes (1.0 for empty text)."""
    raw = text.encode("utf-8")
    return len(zlib.compress(raw, 9)) / len(raw) if raw else 1.0


def looping_metrics(text: str) -> LoopingMetrics:
    """Compute all three metrics for ``text``."""
    unique, counted = unique_sentence_ratio(text)
    ratio, length, count = repeated_substring_ratio(text)
    return LoopingMetrics(unique, counted, ratio, length, count, compression_ratio(text))


class LoopingDetection(AnySubjectEvaluator):
    """Detect an answer stuck in a loop.

    Score = min(unique_sentence_ratio, 1 − repeated_substring_ratio), higher is better; passes when the score
    reaches ``threshold`` (0.75) and the compression ratio reaches ``min_compression_ratio`` (0.2; ordinary
    prose compresses to about 0.35-0.6, a loop to well under 0.2). All three raw metrics are in ``detail``.

    Over a session's Conversation the measured text is every turn's ``field``, in order, one paragraph each, so
    an assistant giving the same answer turn after turn is a loop too (``detail.turns_measured``).
    """

    name = "looping_detection"

    def __init__(
        self, threshold: float = 0.75, *, min_compression_ratio: float = 0.2, field: str = "output.final_answer"
    ) -> None:
        """Configure the limits.

        Args:
            threshold: Minimum score.
            min_compression_ratio: Minimum compressed/original size.
            field: Dotted path of the Trace to measure.
        """
        self.threshold = threshold
        self.min_compression_ratio = min_compression_ratio
        self.field = field

    def check(self, trace: Subject, case: EvalCase | None) -> Verdict:
        """Measure the three metrics and combine them."""
        texts = subject_texts(trace, self.field)
        text = "\n\n".join(texts)
        m = looping_metrics(text)
        score = min(m.unique_sentence_ratio, 1.0 - m.repeated_substring_ratio)
        compressible = len(text) >= 200 and m.compression_ratio < self.min_compression_ratio
        passed = score >= self.threshold and not compressible
        detail = {
            "unique_sentence_ratio": m.unique_sentence_ratio,
            "sentences_counted": m.sentences_counted,
            "repeated_substring_ratio": m.repeated_substring_ratio,
            "longest_repeated_length": m.longest_repeated_length,
            "longest_repeated_count": m.longest_repeated_count,
            "compression_ratio": m.compression_ratio,
            "min_compression_ratio": self.min_compression_ratio,
            "turns_measured": len(texts),
        }
        reason = (
            f"unique sentences {m.unique_sentence_ratio:.2f}, repeated substring {m.repeated_substring_ratio:.2f}, "
            f"compression {m.compression_ratio:.2f}"
        )
        return Verdict(passed, score, ("no looping: " if passed else "looping: ") + reason, detail)
