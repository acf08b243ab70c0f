"""Graded judgements: rubric levels, fact checking, a user rubric (LLMJudge) and a boolean prompt (BYOP).

Rubric levels cover factual accuracy, completeness, citation accuracy and source quality.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from evaltrace.evaluators._base import (
    DEFAULT_FIELD,
    PASS_RATE,
    MissingInputError,
    Verdict,
    answer_text,
    as_text,
    checked_threshold,
    context_chunks,
    expected_answer,
    passes,
    question_text,
)
from evaltrace.evaluators._judged import (
    NOT_GIVEN,
    JudgeEvaluator,
    flag,
    json_object,
    numbered,
    reported_confidence,
    unit_score,
)
from evaltrace.evaluators._prompts import Prompt, custom_prompt
from evaltrace.evaluators.judge import Judge
from evaltrace.schema import EvalCase, RubricLevel, Trace

_BOOLEAN = re.compile(r"\b(true|false)\b", re.IGNORECASE)


def _optional(getter: Any, *args: Any) -> str:
    try:
        return str(getter(*args))
    except MissingInputError:
        return NOT_GIVEN


def standard_variables(trace: Trace, case: EvalCase | None, field: str = DEFAULT_FIELD) -> dict[str, str]:
    """Q, EA, RC and AA (the text at ``field``) for prompts that take whatever is available (absent: ``(none)``)."""
    context = _optional(lambda t: numbered(context_chunks(t)), trace)
    return {
        "question": _optional(question_text, trace),
        "expected_answer": _optional(expected_answer, case),
        "context": context,
        "answer": answer_text(trace, field),
    }


def _ground_truth(case: EvalCase | None) -> str:
    parts = []
    if case is not None and case.expected.facts:
        parts.append("\n".join(f"- {k}: {as_text(v)}" for k, v in case.expected.facts.items()))
    expected = _optional(expected_answer, case)
    if expected != NOT_GIVEN and not parts:
        parts.append(expected)
    return "\n".join(parts) or NOT_GIVEN


def _importance(value: Any) -> float:
    """A claim's weight: a positive finite number, else 1 (weak judges write "high", null or -1 here)."""
    try:
        weight = float(value)
    except (TypeError, ValueError):
        return 1.0
    return weight if math.isfinite(weight) and weight > 0 else 1.0


def _verified(claim: Mapping[str, Any]) -> bool:
    """A claim's ``verified`` flag; ``"no"``/``"false"`` are false (``bool("no")`` is not), anything unclear too."""
    try:
        return flag(claim, "verified")
    except (KeyError, ValueError):
        return False


def _claims_confidence(claims: list[dict[str, Any]]) -> float | None:
    """The importance-weighted mean confidence of the claims that state one in [0, 1] (None: none does)."""
    rated = [
        (_importance(c.get("importance", 1.0)), confidence)
        for c in claims
        if isinstance(c, dict) and (confidence := reported_confidence(c.get("confidence"))) is not None
    ]
    total = sum(w for w, _ in rated)
    return sum(w * c for w, c in rated) / total if total else None


def _claims_score(claims: list[dict[str, Any]]) -> float | None:
    weights = [(_importance(c.get("importance", 1.0)), _verified(c)) for c in claims if isinstance(c, dict)]
    total = sum(w for w, _ in weights)
    return sum(w for w, ok in weights if ok) / total if total else None


class RubricJudge(JudgeEvaluator):
    """One rubric dimension graded by the judge on the rubric levels, with a reason.

    Levels: excellent 1.0, good 0.8, acceptable 0.6, poor 0.3, failed 0.0. Threshold 0.6, higher is better.
    """

    name = "rubric"
    prompt_name = "rubric_level"
    threshold = 0.6
    dimension = "factual_accuracy"
    with_claims = False

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """Dimension, criteria, question, ground truth, sources and answer."""
        claims = self.prompt.table("claims")
        return {
            "dimension": self.dimension,
            "criteria": self.prompt.table("criteria")[self.dimension],
            "question": _optional(question_text, trace),
            "ground_truth": _ground_truth(case),
            "context": _optional(lambda t: numbered(context_chunks(t)), trace),
            "answer": self.answer(trace),
            "claims_instruction": claims["instruction"] if self.with_claims else "",
            "claims_shape": claims["shape"] if self.with_claims else "",
        }

    def parse(self, text: str) -> dict[str, Any]:
        """Require a known level."""
        data = json_object(text)
        data["level"] = RubricLevel(str(data["level"]).strip().lower()).value
        if self.with_claims and not isinstance(data.get("claims", []), list):
            raise TypeError("'claims' must be a list")
        return data

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Score the level; factual accuracy scores the importance-weighted mean of its verified claims.

        The metrics reference computes factual accuracy from the claims (each verified against the ground truth,
        weighted by importance); the level is the judge's overall reading, kept in ``detail["level_score"]`` and
        used as the score only when the judge listed no claim.
        """
        level = RubricLevel(parsed["level"])
        detail: dict[str, Any] = {"dimension": self.dimension, "level": level.value}
        confidence = None
        score = level.score
        if self.with_claims:
            claims = [c for c in parsed.get("claims", []) if isinstance(c, dict)]
            detail["factual_claims"] = claims
            detail["claims_score"] = _claims_score(claims)
            confidence = _claims_confidence(claims)
            detail["level_score"] = level.score
            if detail["claims_score"] is not None:
                score = detail["claims_score"]
        reason = f"{level.value}: {parsed.get('reason', '')}".strip()
        passed = passes(score, self.threshold, self.direction)
        return Verdict(passed, score, reason, detail, confidence=confidence)


class FactualAccuracy(RubricJudge):
    """Claims match the ground truth (rubric level, claim-level detail: claim, verified, confidence, sources)."""

    name = "factual_accuracy"
    dimension = "factual_accuracy"
    with_claims = True


class Completeness(RubricJudge):
    """Every requested aspect is covered (rubric level)."""

    name = "completeness"
    dimension = "completeness"


class CitationAccuracy(RubricJudge):
    """Citations match their sources (rubric level)."""

    name = "citation_accuracy"
    dimension = "citation_accuracy"


class SourceQuality(RubricJudge):
    """Primary, authoritative sources are used (rubric level)."""

    name = "source_quality"
    dimension = "source_quality"


class FactCheck(JudgeEvaluator):
    """The judge answers the question itself, then scores the share of the answer free of false information.

    Reply: ``{answer, evaluation_score, evaluation_summary}``. Threshold 0.75, higher is better.
    """

    name = "fact_check"
    prompt_name = "fact_check"

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """Question and answer."""
        return {"question": question_text(trace), "answer": self.answer(trace)}

    def parse(self, text: str) -> dict[str, Any]:
        """Require the three fields."""
        data = json_object(text)
        data["evaluation_score"] = unit_score(data["evaluation_score"], "evaluation_score")
        data["evaluation_summary"] = str(data.get("evaluation_summary", ""))
        data["answer"] = str(data.get("answer", ""))
        return data

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """The judge's score."""
        score = parsed["evaluation_score"]
        detail = {"judge_answer": parsed["answer"], "evaluation_summary": parsed["evaluation_summary"]}
        return Verdict(passes(score, self.threshold, self.direction), score, parsed["evaluation_summary"], detail)


class LLMJudge(JudgeEvaluator):
    """A user rubric scored on a scale; the result's score is on that scale, the normalised score beside it.

    ``rubric`` is free text, or a preset name (helpfulness, relevance, coherence, clarity, conciseness,
    correctness). The judge sees Q, EA, RC (when available) and AA and returns ``{score, reason}`` (and, if it
    says, ``confidence`` in [0, 1]) on ``scale`` (default 0-1; e.g. (0, 5)). The result's ``score`` is the judge's
    score on the scale (4 on 0-5, as a ScoreConfig with that range expects); ``detail["normalized_score"]`` is
    (score − min) / (max − min). ``threshold`` is given as a share of the scale (0.7 by default) and applied to
    the normalised score; ``detail["threshold"]`` is the same threshold on the scale (3.5 on 0-5), so run
    averages of ``score`` are compared with it in the same unit.

    Example:
        ``LLMJudge(rubric="helpfulness")``, ``LLMJudge(rubric="Cites the policy number", scale=(1, 5))``.
    """

    prompt_name = "llm_judge"
    threshold = 0.7

    def __init__(
        self,
        rubric: str,
        *,
        judge: Judge | None = None,
        scale: tuple[float, float] = (0.0, 1.0),
        name: str | None = None,
        threshold: float | None = None,
        field: str = DEFAULT_FIELD,
    ) -> None:
        """Configure the rubric.

        Args:
            rubric: Criterion text or preset name.
            judge: The judge.
            scale: (worst, best) scores the judge uses.
            name: Evaluator name; default ``llm_judge`` (``llm_judge_<preset>`` for presets).
            threshold: Share of the scale needed to pass, in [0, 1] (0.7 on 0-5 passes from 3.5).
            field: Dotted path of the Trace judged as the answer (default ``output.final_answer``).

        Raises:
            ValueError: A scale that is not (worst, best) with worst < best, or a threshold outside [0, 1] (the
                message gives the share for a threshold written on the scale).
        """
        super().__init__(judge, field=field)
        presets = self.prompt.table("rubrics")
        self.criteria = presets.get(rubric, rubric)
        self.name = name or (f"llm_judge_{rubric}" if rubric in presets else "llm_judge")
        if scale[1] <= scale[0]:
            raise ValueError(f"scale must be (worst, best) with worst < best, got {scale}")
        self.scale = scale
        share = type(self).threshold if threshold is None else threshold
        low, high = scale
        if isinstance(share, int | float) and not isinstance(share, bool) and 1.0 < share <= high:
            raise ValueError(
                f"threshold is a share of the scale in [0, 1], got {share!r}; "
                f"for {share:g} on ({low:g}, {high:g}) give {(share - low) / (high - low):g}"
            )
        self.normalized_threshold = checked_threshold(share)
        self.threshold = low + self.normalized_threshold * (high - low)
        """The pass threshold on the scale (what ``score`` is compared with)."""

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """The rubric, the scale and every available input."""
        return {
            **standard_variables(trace, case, self.field),
            "criteria": self.criteria,
            "scale_min": f"{self.scale[0]:g}",
            "scale_max": f"{self.scale[1]:g}",
        }

    def parse(self, text: str) -> dict[str, Any]:
        """Require a score on the scale."""
        data = json_object(text)
        raw = data["score"]
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise TypeError(f"score must be a number, got {raw!r}")
        value = float(raw)
        if not self.scale[0] <= value <= self.scale[1]:
            raise ValueError(f"score must be between {self.scale[0]:g} and {self.scale[1]:g}, got {value:g}")
        return {"score": value, "reason": str(data.get("reason", "")), "confidence": data.get("confidence")}

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Keep the score on the scale and the normalised score beside it."""
        low, high = self.scale
        normalized = (parsed["score"] - low) / (high - low)
        detail = {
            "raw_score": parsed["score"],
            "normalized_score": normalized,
            "normalized_threshold": self.normalized_threshold,
            "scale": list(self.scale),
            "criteria": self.criteria,
        }
        passed = passes(normalized, self.normalized_threshold, self.direction)
        return Verdict(passed, parsed["score"], parsed["reason"], detail)


class BYOP(JudgeEvaluator):
    """Bring your own prompt, answered ``true`` or ``false``.

    The prompt may use ``{question}`` ``{expected_answer}`` ``{context}`` ``{actual_answer}`` placeholders; the
    first ``true``/``false`` word of the reply counts. Pass/fail per case; ``threshold`` is the catalogue's: the
    share of cases the judge must answer true over a run (0.5).
    """

    name = "byop"
    threshold = 0.5
    threshold_of = PASS_RATE

    def __init__(
        self,
        prompt: str,
        *,
        judge: Judge | None = None,
        name: str = "byop",
        system: str = "",
        field: str = DEFAULT_FIELD,
        threshold: float = 0.5,
    ) -> None:
        """Configure the prompt.

        Args:
            prompt: The user prompt; its hash is its version.
            judge: The judge.
            name: Evaluator name.
            system: Optional system prompt.
            field: Dotted path of the Trace given as ``actual_answer`` (default ``output.final_answer``).
            threshold: Share of cases that must pass (the run's pass rate), in [0, 1].

        Raises:
            ValueError: A threshold outside [0, 1].
        """
        super().__init__(judge, threshold=checked_threshold(threshold), field=field)
        self._prompt = custom_prompt(name, prompt, system=system, json_mode=False)
        self.name = name

    @property
    def prompt(self) -> Prompt:
        """The user's prompt."""
        return self._prompt

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """Every available input, the answer as ``actual_answer`` (and ``answer``)."""
        values = standard_variables(trace, case, self.field)
        return {**values, "actual_answer": values["answer"]}

    def parse(self, text: str) -> bool:
        """Find ``true`` or ``false`` (a JSON object with a boolean ``result`` also works)."""
        match = _BOOLEAN.search(text)
        if match is None:
            raise ValueError("reply contains neither true nor false")
        return match.group(1).lower() == "true"

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """True passes."""
        return Verdict(bool(parsed), 1.0 if parsed else 0.0, f"judge answered {str(parsed).lower()}", {})
