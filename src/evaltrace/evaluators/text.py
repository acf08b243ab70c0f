"""Text evaluators: inclusion, patterns, equality with the expected answer, facts and length."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from evaltrace.evaluators._base import (
    PASS_RATE,
    DeterministicEvaluator,
    MissingInputError,
    Verdict,
    answer_text,
    as_text,
    case_list,
    check_field,
    checked_threshold,
    expected_answer,
)
from evaltrace.evaluators._text import normalise, numbers_equal, parse_number, parse_numbers, split_sentences, words
from evaltrace.schema import EvalCase, Trace

MatchMode = Literal["exact", "normalised", "contains", "startswith", "endswith"]


def _present(needle: str, haystack: str, case_sensitive: bool) -> bool:
    return normalise(needle, case_sensitive=case_sensitive) in normalise(haystack, case_sensitive=case_sensitive)


class _TextPresence(DeterministicEvaluator):
    """Texts looked up in a field: ``ContainsText`` wants each present, ``NotContains`` each absent."""

    _case_key: str  # the case's expected list used when no texts are given
    _want_present: bool
    _labels: tuple[str, str]  # detail keys: (the texts, the offending ones)
    _reasons: tuple[str, str]  # (reason when none offends, prefix of the offending list)

    def __init__(
        self, *texts: str, field: str = "output.final_answer", case_sensitive: bool = False, threshold: float = 1.0
    ) -> None:
        """Configure the check.

        Args:
            *texts: Texts to look for; when empty, the case's expected list (see the class).
            field: Dotted path of the Trace to search: ``output.final_answer`` (default), ``output.thinking``,
                ``output.structured.<path>``, ``input.<key>``... A trace without it is skipped, not failed.
            case_sensitive: Compare case-sensitively.
            threshold: Share of texts that must behave as required (present, or absent).

        Raises:
            ValueError: ``field`` cannot name a part of a Trace.
        """
        self.texts = texts
        self.field = check_field(field)
        self.case_sensitive = case_sensitive
        self.threshold = threshold

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Search the field for each text."""
        texts = case_list(self.texts, case, self._case_key)
        if not texts:
            raise MissingInputError(f"no texts configured or in case.expected.{self._case_key}")
        haystack = answer_text(trace, self.field)
        offending = [t for t in texts if _present(t, haystack, self.case_sensitive) is not self._want_present]
        score = 1.0 - len(offending) / len(texts)
        expected_key, offending_key = self._labels
        detail = {"field": self.field, expected_key: texts, offending_key: offending}
        fine, prefix = self._reasons
        reason = fine if not offending else f"{prefix}: {', '.join(map(repr, offending))}"
        return Verdict(score >= self.threshold, score, reason, detail)


class ContainsText(_TextPresence):
    """Every expected text appears in a field (``expected.answer_should_include`` unless texts are given).

    Whitespace is collapsed before comparing; case-insensitive by default. Score: share present; passes when all
    are (threshold 1.0, higher is better). ``field`` is any dotted path of the Trace (``output.final_answer``
    default, ``output.thinking``, ``input.question``, ``messages.-1.content``...).
    """

    name = "contains_text"
    _case_key = "answer_should_include"
    _want_present = True
    _labels = ("expected", "missing")
    _reasons = ("all texts present", "missing")


class NotContains(_TextPresence):
    """No forbidden text appears in a field (``expected.answer_should_not_include`` unless texts are given).

    Score: share of forbidden texts absent; passes when none is present (threshold 1.0, higher is better).
    """

    name = "not_contains"
    _case_key = "answer_should_not_include"
    _want_present = False
    _labels = ("forbidden", "found")
    _reasons = ("no forbidden text present", "forbidden")


class Regex(DeterministicEvaluator):
    """Regular expression(s) searched in a field.

    ``mode="all"``: every pattern must match; ``"any"``: at least one; ``"none"``: none may match. Score: share of
    patterns that behave as required (``any``: 1.0 or 0.0); passes when it reaches ``threshold`` (1.0 by default:
    all behave as required).
    """

    name = "regex"

    def __init__(
        self,
        *patterns: str,
        mode: Literal["all", "any", "none"] = "all",
        field: str = "output.final_answer",
        flags: int = 0,
        threshold: float = 1.0,
    ) -> None:
        """Configure the patterns.

        Args:
            *patterns: Regular expressions (``re.search`` semantics).
            mode: ``all``, ``any`` or ``none`` must match.
            field: Dotted path of the Trace to search.
            flags: ``re`` flags, e.g. ``re.IGNORECASE``.
            threshold: Share of patterns that must behave as required, in [0, 1].

        Raises:
            ValueError: No pattern, an invalid one (raised here, not at evaluation time), or a threshold outside
                [0, 1].
        """
        if not patterns:
            raise ValueError("Regex needs at least one pattern")
        self.patterns = [re.compile(p, flags) for p in patterns]
        self.mode = mode
        self.field = check_field(field)
        self.threshold = checked_threshold(threshold)

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Search every pattern."""
        text = answer_text(trace, self.field)
        matched = [p.pattern for p in self.patterns if p.search(text)]
        total = len(self.patterns)
        if self.mode == "all":
            score = len(matched) / total
        elif self.mode == "any":
            score = 1.0 if matched else 0.0
        else:
            score = 1.0 - len(matched) / total
        passed = score >= self.threshold
        reason = f"{len(matched)}/{total} patterns matched (mode {self.mode})"
        return Verdict(passed, score, reason, {"field": self.field, "mode": self.mode, "matched": matched})


class TextMatching(DeterministicEvaluator):
    """The field compared with the expected answer (EA).

    Modes: ``exact`` (identical after stripping), ``normalised`` (NFKC, case-folded, whitespace collapsed,
    punctuation removed), ``contains`` / ``startswith`` / ``endswith`` (on normalised text). Pass/fail per case;
    ``threshold`` is the share of cases that must match over a run (default 1.0).
    """

    name = "text_matching"
    threshold_of = PASS_RATE

    def __init__(
        self,
        expected: str | None = None,
        *,
        mode: MatchMode = "normalised",
        field: str = "output.final_answer",
        threshold: float = 1.0,
    ) -> None:
        """Configure the comparison.

        Args:
            expected: The expected answer; when None, the case's expected answer.
            mode: How to compare.
            field: Dotted path of the Trace to compare.
            threshold: Share of cases that must match (the run's pass rate), in [0, 1].

        Raises:
            ValueError: A threshold outside [0, 1].
        """
        self.expected = expected
        self.mode: MatchMode = mode
        self.field = check_field(field)
        self.threshold = checked_threshold(threshold)

    def _matches(self, actual: str, expected: str) -> bool:
        if self.mode == "exact":
            return actual.strip() == expected.strip()
        a, e = normalise(actual, punctuation=False), normalise(expected, punctuation=False)
        if self.mode == "normalised":
            return a == e
        if self.mode == "contains":
            return e in a
        return a.startswith(e) if self.mode == "startswith" else a.endswith(e)

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Compare the field with EA."""
        expected = expected_answer(case, self.expected)
        ok = self._matches(answer_text(trace, self.field), expected)
        reason = f"{self.mode} match" if ok else f"no {self.mode} match with the expected answer"
        return Verdict(ok, 1.0 if ok else 0.0, reason, {"field": self.field, "mode": self.mode})


class ExactMatch(TextMatching):
    """The field equals the expected answer exactly (surrounding whitespace ignored); pass/fail per case."""

    name = "exact_match"

    def __init__(
        self, expected: str | None = None, *, field: str = "output.final_answer", threshold: float = 1.0
    ) -> None:
        """Configure the comparison.

        Args:
            expected: The expected answer; when None, the case's expected answer.
            field: Dotted path of the Trace to compare.
            threshold: Share of cases that must match (the run's pass rate), in [0, 1].
        """
        super().__init__(expected, mode="exact", field=field, threshold=threshold)


def _fact_found(value: Any, text: str, numbers: list[float]) -> bool:
    if isinstance(value, list | tuple):
        return all(_fact_found(item, text, numbers) for item in value)
    number = parse_number(value)
    if number is not None:
        return any(numbers_equal(number, found) for found in numbers)
    needle = as_text(value) or ""
    return normalise(needle) in normalise(text)


class Facts(DeterministicEvaluator):
    """Each expected fact value appears in the answer, numbers normalised (1200000 = 1.2M = 1,200,000).

    Facts come from the constructor or ``case.expected.facts`` (``expected_answer``/``answer`` keys excluded).
    A numeric value matches any number in the answer with the same value; a list needs every item; other values
    match case-insensitively as text. Score: share found; threshold 1.0, higher is better.
    """

    name = "facts"

    def __init__(
        self, facts: Mapping[str, Any] | None = None, *, field: str = "output.final_answer", threshold: float = 1.0
    ) -> None:
        """Configure the facts.

        Args:
            facts: Fact name to expected value; when None, the case's ``expected.facts``.
            field: Dotted path of the Trace to search.
            threshold: Share of facts that must be found.
        """
        self.facts = dict(facts) if facts else None
        self.field = check_field(field)
        self.threshold = threshold

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Look for every fact value."""
        facts = self.facts or {
            k: v for k, v in (case.expected.facts if case else {}).items() if k not in ("expected_answer", "answer")
        }
        if not facts:
            raise MissingInputError("no facts configured or in case.expected.facts")
        text = answer_text(trace, self.field)
        numbers = parse_numbers(text)
        missing = [name for name, value in facts.items() if not _fact_found(value, text, numbers)]
        score = 1.0 - len(missing) / len(facts)
        reason = "all facts found" if not missing else f"facts not found: {', '.join(missing)}"
        return Verdict(score >= self.threshold, score, reason, {"facts": list(facts), "missing": missing})


class Length(DeterministicEvaluator):
    """Character, word and sentence counts, judged too_short / appropriate / too_long against word bounds.

    Score 1.0 when appropriate, else ``words/min_words`` (too short) or ``max_words/words`` (too long); passes
    when the score reaches ``threshold`` (1.0 by default: appropriate; 0.8 tolerates 20% off the bounds).
    ``optimal_words`` is reported with the distance to it.
    """

    name = "length"

    def __init__(
        self,
        min_words: int | None = None,
        max_words: int | None = None,
        optimal_words: int | None = None,
        *,
        field: str = "output.final_answer",
        threshold: float = 1.0,
    ) -> None:
        """Configure the bounds.

        Args:
            min_words: Fewer words is too short.
            max_words: More words is too long.
            optimal_words: The ideal length, reported only.
            field: Dotted path of the Trace to measure.
            threshold: Lowest passing score, in [0, 1].

        Raises:
            ValueError: A threshold outside [0, 1].
        """
        self.min_words = min_words
        self.max_words = max_words
        self.optimal_words = optimal_words
        self.field = check_field(field)
        self.threshold = checked_threshold(threshold)

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Count and classify."""
        text = answer_text(trace, self.field)
        count = len(words(text))
        if self.min_words is not None and count < self.min_words:
            verdict, score = "too_short", count / self.min_words
        elif self.max_words is not None and count > self.max_words:
            verdict, score = "too_long", self.max_words / count
        else:
            verdict, score = "appropriate", 1.0
        detail: dict[str, Any] = {
            "character_count": len(text),
            "word_count": count,
            "sentence_count": len(split_sentences(text)),
            "expected_length_range": {
                "min_words": self.min_words,
                "max_words": self.max_words,
                "optimal_words": self.optimal_words,
            },
            "length_appropriateness": verdict,
        }
        if self.optimal_words is not None:
            detail["distance_from_optimal"] = count - self.optimal_words
        return Verdict(score >= self.threshold, score, f"{count} words: {verdict}", detail)
