"""Looping detection: three repetition metrics over the answer (docs/evaluators.md, looping_detection).

* ``unique_sentence_ratio``: unique sentences / all sentences, sentences shorter than 10 characters omitted,
  sentences compared after case-folding and whitespace collapsing (higher is better; 1.0 with no sentence).
* ``repeated_substring_ratio``: length of the longest substring that occurs at least twice without overlapping,
  times its number of non-overlapping occurrences, divided by the text length (lower is better; 0.0 when
  nothing repeats). Counting non-overlapping occurrences keeps the metric in [0, 1].
* ``compression_ratio``: zlib level-9 compressed bytes / UTF-8 bytes (higher is better; repetitive text
  compresses well), capped at 1.0: zlib's header and checksum make a short text's compressed form longer than
  the text ("ok" compresses to 10 bytes), which only says the text is incompressible, so the ratio stays in
  [0, 1] as the catalogue's range says.

Each metric has its threshold, in its direction (the catalogue's 0.75 for the first two; see
:class:`LoopingDetection` for the compression ratio's).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from evaltrace.evaluators._base import (
    AnySubjectEvaluator,
    Direction,
    Subject,
    Verdict,
    checked_threshold,
    passes,
    subject_texts,
)
from evaltrace.evaluators._text import normalise, split_sentences
from evaltrace.schema import EvalCase

MIN_SENTENCE_CHARS = 10
MIN_COMPRESSED_CHARS = 200
"""Shorter texts are not judged on their compression ratio (zlib's overhead dominates it)."""
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
    """Return zlib level-9 compressed size / original size in bytes, capped at 1.0 (1.0 for empty text)."""
    raw = text.encode("utf-8")
    return min(1.0, len(zlib.compress(raw, 9)) / len(raw)) if raw else 1.0


def looping_metrics(text: str) -> LoopingMetrics:
    """Compute all three metrics for ``text``."""
    unique, counted = unique_sentence_ratio(text)
    ratio, length, count = repeated_substring_ratio(text)
    return LoopingMetrics(unique, counted, ratio, length, count, compression_ratio(text))


class LoopingDetection(AnySubjectEvaluator):
    """Detect an answer stuck in a loop: each metric against its own threshold.

    Passes when every metric is on the right side of its threshold: ``unique_sentence_ratio >= threshold`` and
    ``repeated_substring_ratio <= threshold`` (the catalogue's 0.75 for both), and, for texts of 200 characters
    or more, ``compression_ratio >= min_compression_ratio`` (0.2). The compression ratio keeps its own threshold
    because the catalogue's 0.75 would fail ordinary prose: zlib compresses English text of 200 characters to
    about 0.5 of its size and of 1,000 characters to about 0.3, a loop to well under 0.2. Score = the unique
    sentence ratio, the catalogue's primary metric (higher is better). ``detail["metrics"]`` gives each metric's
    value, threshold, direction and verdict; the reason names the metrics that failed.

    Over a session's Conversation the measured text is every turn's ``field``, in order, one paragraph each, so
    an assistant giving the same answer turn after turn is a loop too (``detail.turns_measured``).
    """

    name = "looping_detection"

    def __init__(
        self, threshold: float = 0.75, *, min_compression_ratio: float = 0.2, field: str = "output.final_answer"
    ) -> None:
        """Configure the limits.

        Args:
            threshold: Threshold of the unique sentence ratio (lowest passing) and of the repeated substring
                ratio (highest passing), in [0, 1].
            min_compression_ratio: Lowest passing compressed/original size, in [0, 1].
            field: Dotted path of the Trace to measure.

        Raises:
            ValueError: A threshold outside [0, 1].
        """
        self.threshold = checked_threshold(threshold)
        self.min_compression_ratio = checked_threshold(min_compression_ratio, name="min_compression_ratio")
        self.field = field

    def check(self, trace: Subject, case: EvalCase | None) -> Verdict:
        """Measure the three metrics and combine them."""
        texts = subject_texts(trace, self.field)
        text = "\n\n".join(texts)
        m = looping_metrics(text)
        metrics = {
            "unique_sentence_ratio": _metric(m.unique_sentence_ratio, self.threshold, "higher"),
            "repeated_substring_ratio": _metric(m.repeated_substring_ratio, self.threshold, "lower"),
            # Below 200 characters zlib's fixed overhead dominates: the ratio says nothing about repetition.
            "compression_ratio": _metric(
                m.compression_ratio, self.min_compression_ratio, "higher", judged=len(text) >= MIN_COMPRESSED_CHARS
            ),
        }
        failed = [name for name, metric in metrics.items() if metric["passed"] is False]
        passed = not failed
        detail = {
            "unique_sentence_ratio": m.unique_sentence_ratio,
            "sentences_counted": m.sentences_counted,
            "repeated_substring_ratio": m.repeated_substring_ratio,
            "longest_repeated_length": m.longest_repeated_length,
            "longest_repeated_count": m.longest_repeated_count,
            "compression_ratio": m.compression_ratio,
            "min_compression_ratio": self.min_compression_ratio,
            "turns_measured": len(texts),
            "metrics": metrics,
        }
        reason = (
            f"unique sentences {m.unique_sentence_ratio:.2f}, repeated substring {m.repeated_substring_ratio:.2f}, "
            f"compression {m.compression_ratio:.2f}"
        )
        if failed:
            reason = f"looping ({', '.join(failed)} past the threshold): {reason}"
        else:
            reason = f"no looping: {reason}"
        return Verdict(passed, m.unique_sentence_ratio, reason, detail)


def _metric(value: float, threshold: float, direction: Direction, *, judged: bool = True) -> dict[str, Any]:
    """One metric's value, threshold, direction and verdict (``passed`` None: not judged on this text)."""
    return {
        "value": value,
        "threshold": threshold,
        "direction": direction,
        "passed": passes(value, threshold, direction) if judged else None,
    }
