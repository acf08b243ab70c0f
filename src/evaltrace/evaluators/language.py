"""Language mismatch: is the answer in the question's language? Offline with lingua, or asked of the judge.

The offline detector is lingua (``pip install 'evaltrace[languages]'``). Its language models load lazily on the
first detection and stay loaded for the process, shared by every evaluator built with the same settings: all 75
languages take about 1 GB of memory and tens of seconds to load, a handful of languages about 200 MB and a few
seconds. Naming the languages you expect is therefore both faster and more accurate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import re
import threading
from collections.abc import Sequence
from typing import Any, Literal

from evaltrace.evaluators._base import (
    CODE_VERSION,
    PASS_RATE,
    Direction,
    MissingInputError,
    Verdict,
    answer_text,
    build_result,
    checked_threshold,
    question_text,
    require_extra,
    skipped_result,
)
from evaltrace.evaluators._judged import JudgeEvaluator, json_object
from evaltrace.evaluators.judge import Judge
from evaltrace.schema import EvalCase, EvaluationResult, Trace

Detector = Literal["lingua", "judge"]

# Code and URLs say nothing about the natural language of a text, and lingua would read them as some language.
_NOT_PROSE = re.compile(r"```.*?```|`[^`\n]*`|https?://\S+", re.DOTALL)
_detectors: dict[tuple[tuple[str, ...] | None, bool], Any] = {}
_detectors_lock = threading.Lock()


def _code(value: Any) -> str:
    code = str(value).strip().lower().replace("_", "-").split("-", 1)[0]
    if not code.isalpha():
        raise ValueError(f"not a language code: {value!r}")
    return code


def lingua_detector(languages: tuple[str, ...] | None, low_accuracy: bool) -> Any:
    """Return the process-wide lingua detector for these settings, building it on first use.

    Args:
        languages: ISO 639-1 codes to choose among (at least two); None for every language lingua knows.
        low_accuracy: lingua's low-accuracy mode (smaller models, unreliable below ~120 characters).

    Returns:
        A ``lingua.LanguageDetector``.

    Raises:
        MissingExtraError: lingua is not installed.
        ValueError: An unknown code, or fewer than two languages.
    """
    lingua = require_extra("lingua", "lingua-language-detector", extra="languages")
    key = (languages, low_accuracy)
    with _detectors_lock:
        detector = _detectors.get(key)
        if detector is not None:
            return detector
        if languages is None:
            builder = lingua.LanguageDetectorBuilder.from_all_languages()
        else:
            if len(set(languages)) < 2:
                raise ValueError(f"languages must name at least two languages, got {list(languages)}")
            unknown = [code for code in languages if not hasattr(lingua.IsoCode639_1, code.upper())]
            if unknown:
                raise ValueError(f"unknown ISO 639-1 codes for lingua: {unknown}")
            codes = [getattr(lingua.IsoCode639_1, code.upper()) for code in languages]
            builder = lingua.LanguageDetectorBuilder.from_iso_codes_639_1(*codes)
        if low_accuracy:
            builder = builder.with_low_accuracy_mode()
        # Loaded now, at construction: lazy loading would happen inside the first evaluation, holding the GIL
        # for seconds (tens of seconds with every language) while the application runs.
        detector = _detectors[key] = builder.with_preloaded_language_models().build()
        return detector


def detect(detector: Any, text: str) -> tuple[str, float] | None:
    """Return the ISO 639-1 code and confidence of the most likely language, or None when nothing is detectable."""
    prose = _NOT_PROSE.sub(" ", text)
    values = detector.compute_language_confidence_values(prose)
    if not values or values[0].value <= 0:
        return None
    return values[0].language.iso_code_639_1.name.lower(), float(values[0].value)


class _JudgedLanguage(JudgeEvaluator):
    """The judge names the ISO 639-1 language of question and answer."""

    name = "language_mismatch"
    prompt_name = "language_mismatch"
    threshold = 0.5
    threshold_of = PASS_RATE

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """Question and answer."""
        return {"question": question_text(trace), "answer": self.answer(trace)}

    def parse(self, text: str) -> dict[str, str]:
        """Require both language codes."""
        data = json_object(text)
        return {
            "question_language": _code(data["question_language"]),
            "answer_language": _code(data["answer_language"]),
        }

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Same code passes."""
        return _verdict(parsed["question_language"], parsed["answer_language"], {**parsed, "detector": "judge"})


def _verdict(question: str, answer: str, detail: dict[str, Any]) -> Verdict:
    same = question == answer
    return Verdict(same, 1.0 if same else 0.0, f"question in {question}, answer in {answer}", detail)


class LanguageMismatch:
    """The answer is in the question's language (ISO 639-1 codes compared, regions ignored). Pass/fail per case.

    ``threshold`` is the catalogue's: the share of cases whose answer must be in the question's language over a
    run (0.5).

    ``detector="lingua"`` identifies both languages offline (extra ``languages``); ``detector="judge"`` asks the
    LLM judge. Without ``detector``, giving ``languages`` (or ``low_accuracy``) selects lingua, otherwise the judge
    (``judge``, or the default one). With lingua, a text with no detectable language (only digits, code or URLs)
    makes the result ``skipped``. lingua's models load when the evaluator is built, not during an evaluation:
    loading holds the GIL, so it would pause every thread of the application.

    Example:
        ``LanguageMismatch(languages=["en", "fr", "de"])``, ``LanguageMismatch(judge)``.
    """

    name = "language_mismatch"
    threshold = 0.5
    threshold_of = PASS_RATE
    direction: Direction = "higher"

    def __init__(
        self,
        judge: Judge | None = None,
        *,
        detector: Detector | None = None,
        languages: Sequence[str] | None = None,
        low_accuracy: bool = False,
        threshold: float | None = None,
    ) -> None:
        """Choose the detector.

        Args:
            judge: The judge (selects ``detector="judge"`` unless ``detector`` says otherwise).
            detector: ``"lingua"`` (offline) or ``"judge"``; default: lingua when ``languages`` or ``low_accuracy``
                is given without a judge, else the judge.
            languages: lingua only: ISO 639-1 codes to choose among; default every language lingua knows.
            low_accuracy: lingua only: its low-accuracy mode (less memory, unreliable on short texts).
            threshold: Share of cases that must pass (the run's pass rate), in [0, 1]; default 0.5.

        Raises:
            MissingExtraError: lingua is selected but not installed.
            ValueError: An unknown detector or language code, or a threshold outside [0, 1].
        """
        if threshold is not None:
            threshold = checked_threshold(threshold)
        # Without ``detector``: lingua when a lingua option says so, else the judge (as before lingua existed), so a
        # bare ``language_mismatch`` never loads lingua's ~1 GB of models unasked.
        chosen = detector or ("lingua" if judge is None and (languages is not None or low_accuracy) else "judge")
        if chosen not in ("lingua", "judge"):
            raise ValueError(f"detector must be 'lingua' or 'judge', got {detector!r}")
        self.detector: Detector = chosen
        if threshold is not None:
            self.threshold = threshold
        self.languages = tuple(_code(code) for code in languages) if languages is not None else None
        self.low_accuracy = low_accuracy
        self._judged = _JudgedLanguage(judge, threshold=threshold) if chosen == "judge" else None
        self._lingua = lingua_detector(self.languages, low_accuracy) if chosen == "lingua" else None

    @property
    def evaluator_type(self) -> str:
        """``llm_judge`` or ``deterministic``."""
        return "llm_judge" if self._judged is not None else "deterministic"

    @property
    def version(self) -> str:
        """The judge prompt's version (``v1.0.0+language-mismatch.v1``) or lingua's (``v1.0.0+lingua.2.1.1``)."""
        if self._judged is not None:
            return self._judged.version
        try:
            lingua_version = importlib.metadata.version("lingua-language-detector")
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover - imported, so installed
            lingua_version = "unknown"
        return f"{CODE_VERSION}+lingua.{lingua_version}"

    async def evaluate(self, trace: Trace, case: EvalCase | None = None) -> EvaluationResult:
        """Compare the languages of question and answer.

        Args:
            trace: What the system did.
            case: Unused (the question and answer come from the trace).

        Returns:
            The result; ``detail`` has both codes, the detector and, with lingua, its confidences.
        """
        if self._judged is not None:
            return await self._judged.evaluate(trace, case)
        try:
            question, answer = question_text(trace), answer_text(trace)
        except MissingInputError as exc:
            return skipped_result(self, trace, exc, evaluator_type=self.evaluator_type)
        # Detection itself takes milliseconds per text; still off the event loop the judge evaluators share.
        q_found, a_found = await asyncio.to_thread(
            lambda: (detect(self._lingua, question), detect(self._lingua, answer))
        )
        if q_found is None or a_found is None:
            why = f"no natural language detected in the {'question' if q_found is None else 'answer'}"
            return skipped_result(self, trace, why, evaluator_type=self.evaluator_type)
        (q_code, q_conf), (a_code, a_conf) = q_found, a_found
        detail = {
            "question_language": q_code,
            "answer_language": a_code,
            "question_confidence": q_conf,
            "answer_confidence": a_conf,
            "detector": "lingua",
        }
        # The verdict is as sure as the less sure of the two detections.
        verdict = dataclasses.replace(_verdict(q_code, a_code, detail), confidence=min(q_conf, a_conf))
        return build_result(self, trace, verdict, evaluator_type=self.evaluator_type)

    def __repr__(self) -> str:
        return f"LanguageMismatch(detector={self.detector!r}, languages={self.languages!r})"
