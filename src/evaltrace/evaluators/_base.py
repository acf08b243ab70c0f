"""Shared plumbing of the built-in evaluators: result construction and reading inputs out of (trace, case).

Every evaluator is a pure function of ``(trace, case)``: the helpers here only read the two models, never the
environment. Inputs named in the catalogue (docs/evaluators.md) are found as follows:

* Q (question) and RC (retrieved context): see :mod:`evaltrace.evaluators._context` (re-exported here).
* EA (expected answer): ``case.expected.facts["expected_answer"]`` (or ``"answer"``), else
  ``case.metadata["expected_answer"]``, else ``case.input["expected_answer"]``.
* AA (actual answer): ``trace.output.final_answer``.

Each evaluator also accepts explicit values or dotted paths in its constructor, which win over these defaults.
"""

from __future__ import annotations

import abc
import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar, Literal

from evaltrace._internal import semconv
from evaltrace.exceptions import EvaltraceError
from evaltrace.schema import (
    Conversation,
    EvalCase,
    EvaluationResult,
    EvaluationStatus,
    Trace,
    TraceError,
)

Direction = Literal["higher", "lower"]
Subject = Trace | Conversation
"""What an evaluator judges: one trace (span or trace scope) or a session's conversation (session scope)."""

CODE_VERSION = "v1.0.0"
"""Version of the evaluator implementations; judge evaluators append their prompt version."""

DEFAULT_FIELD = "output.final_answer"
"""The field an evaluator reads as the answer unless given ``field``."""
NO_ANSWER_WHY = "trace has no output.final_answer"
_EXPECTED_KEYS = ("expected_answer", "answer", "reference")
_MISSING = object()


class MissingExtraError(EvaltraceError, ImportError):
    """An evaluator needs an optional dependency that is not installed; the message names the extra."""


def require_extra(module: str, package: str, extra: str = "metrics") -> ModuleType:
    """Import ``module`` or raise MissingExtraError saying which extra installs it.

    Args:
        module: Module to import.
        package: PyPI package that provides it.
        extra: evaltrace extra that depends on the package.

    Returns:
        The module.

    Raises:
        MissingExtraError: The package is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{module} is not installed; install it with `pip install 'evaltrace[{extra}]'` (or `pip install {package}`)"
        ) from exc


class MissingInputError(Exception):
    """An input the evaluator needs is absent; the result is ``skipped``, not ``failed``."""

    reason: str | None = None
    """The skip reason recorded as the result's ``reason`` (a ``SKIP_*`` token), when the absence has one."""


class NoAnswerError(MissingInputError):
    """The trace has no final answer: its model call answered with tool calls only (or recorded no text).

    Judging the answer of such a step would judge nothing, or, as before, an earlier turn's answer: the result
    is not evaluated with the skip reason ``no_answer``.
    """

    reason = semconv.SKIP_NO_ANSWER


@dataclass(frozen=True)
class Verdict:
    """What an evaluator decided, before it becomes an EvaluationResult."""

    passed: bool
    score: float | None
    reason: str
    detail: dict[str, Any]
    confidence: float | None = None
    """How sure the evaluator is of the verdict, in [0, 1], where it has a measure of it (None: it has none)."""


PASS_RATE = "pass_rate"
"""``detail["threshold_of"]`` of a pass/fail evaluator: its threshold is the share of cases that must pass."""


def checked_threshold(value: Any, *, low: float = 0.0, high: float = 1.0, name: str = "threshold") -> float:
    """Return ``value`` as a float in ``[low, high]``, else raise ValueError naming the problem.

    A threshold outside its metric's range would silently pass or fail everything, so it is refused when the
    evaluator is built (``float("inf")`` is allowed only where ``high`` is infinite).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if number != number or not low <= number <= high:
        raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}")
    return number


def passes(score: float, threshold: float, direction: Direction) -> bool:
    """Return whether ``score`` meets ``threshold`` in ``direction`` (higher: >=, lower: <=)."""
    return score >= threshold if direction == "higher" else score <= threshold


def subject_ids(subject: Subject) -> tuple[str, str, str]:
    """Return the (run, case, variant) ids of a trace, or of a conversation's first turn ("" when it has none).

    The turns of one session share them: live turns carry the live defaults, a simulated-user case's turns its
    run, case and variant.
    """
    if isinstance(subject, Conversation):
        if not subject.turns:
            return "", "", ""
        subject = subject.turns[0].trace
    return subject.run_id, subject.case_id, subject.variant_name


def subject_noun(subject: Subject) -> str:
    """Name the judged thing in reasons: ``"trace"`` or ``"conversation"``."""
    return "conversation" if isinstance(subject, Conversation) else "trace"


def build_result(
    evaluator: Any,
    trace: Subject,
    verdict: Verdict,
    *,
    evaluator_type: str = "deterministic",
    status: EvaluationStatus = "completed",
    error: TraceError | None = None,
    cost_usd: float | None = None,
) -> EvaluationResult:
    """Turn a verdict into an EvaluationResult carrying the evaluator's threshold, direction and version.

    Args:
        evaluator: The evaluator (reads ``name``, ``version``, ``threshold``, ``direction``).
        trace: The evaluated trace or conversation (its run/case/variant ids are copied, see :func:`subject_ids`).
        verdict: The decision.
        evaluator_type: Free-form kind recorded on the result.
        status: ``completed`` unless the evaluation could not be made.
        error: What went wrong when ``status`` is ``failed``.
        cost_usd: Cost of the evaluation itself (judge calls).

    Returns:
        The result.
    """
    detail = {
        "threshold": getattr(evaluator, "threshold", None),
        "direction": getattr(evaluator, "direction", "higher"),
    }
    if getattr(evaluator, "threshold_of", None) == PASS_RATE:
        detail["threshold_of"] = PASS_RATE
    detail.update(verdict.detail)
    run_id, case_id, variant_name = subject_ids(trace)
    return EvaluationResult(
        run_id=run_id,
        case_id=case_id,
        variant_name=variant_name,
        evaluator=evaluator.name,
        evaluator_type=evaluator_type,
        evaluator_version=evaluator.version,
        passed=verdict.passed,
        score=verdict.score,
        reason=verdict.reason,
        detail=detail,
        status=status,
        error=error,
        cost_usd=cost_usd,
        confidence=verdict.confidence,
    )


def skipped_result(
    evaluator: Any, trace: Subject, why: str | MissingInputError, *, evaluator_type: str = "deterministic"
) -> EvaluationResult:
    """Return a ``skipped`` result: an input was missing, so nothing was judged (and nothing passed).

    ``why``: what was missing, or the MissingInputError saying it; one with a ``reason`` token (``no_answer``)
    gives that token as the result's reason, the skip reason shown on the span and in summaries.
    """
    token = why.reason if isinstance(why, MissingInputError) else None
    text = str(why)
    return build_result(
        evaluator,
        trace,
        Verdict(False, None, token or f"skipped: {text}", {"skipped": text}),
        evaluator_type=evaluator_type,
        status="skipped",
    )


def resolve_path(obj: Any, path: str) -> Any:
    """Follow a dotted ``path`` (attributes, mapping keys, list indices) from ``obj``.

    Args:
        obj: A pydantic model, mapping or sequence.
        path: For example ``"output.final_answer"``, ``"input.question"`` or ``"messages.0.content"``.

    Returns:
        The value found, or None when any step is missing.
    """
    current: Any = obj
    for part in path.split("."):
        if current is None:
            return None
        if isinstance(current, Mapping):
            current = current.get(part)
        elif isinstance(current, Sequence) and not isinstance(current, str):
            current = (
                current[int(part)] if part.lstrip("-").isdigit() and -len(current) <= int(part) < len(current) else None
            )
        else:
            current = getattr(current, part, None)
    return current


def as_text(value: Any) -> str | None:
    """Render a field value as text: strings as is, other JSON values as compact JSON, None as None."""
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def field_text(trace: Trace, path: str) -> str:
    """Return the text at dotted ``path`` of the trace; a missing field raises MissingInputError."""
    text = as_text(resolve_path(trace, path))
    if text is None:
        if path == DEFAULT_FIELD:
            raise NoAnswerError(NO_ANSWER_WHY)
        raise MissingInputError(f"trace has no {path}")
    return text


def answer_text(trace: Trace, field: str = DEFAULT_FIELD) -> str:
    """Return AA (the actual answer), or the text at ``field``."""
    return field_text(trace, field)


def check_field(field: str) -> str:
    """Return ``field`` if it can name a part of a Trace, else raise ValueError at construction time.

    The first step must be a Trace field (``output``, ``input``, ``messages``, ``extra``, ...) and, under
    ``output``, the second one of ``final_answer``, ``thinking``, ``structured`` (``output.structured.<path>``
    goes on into the object). A typo would otherwise skip every evaluation as a missing field.
    """
    parts = field.split(".") if isinstance(field, str) else []
    known = {*Trace.model_fields, "latency_ms"}
    if not parts or parts[0] not in known:
        raise ValueError(f"field {field!r} does not start with a Trace field ({', '.join(sorted(known))})")
    outputs = ("final_answer", "thinking", "structured")
    if parts[0] == "output" and (len(parts) < 2 or parts[1] not in outputs):
        raise ValueError(f"field {field!r}: expected output.final_answer, output.thinking or output.structured.<path>")
    return field


def expected_answer(case: EvalCase | None, explicit: str | None = None) -> str:
    """Return EA: the explicit value, else ``expected_answer``/``answer``/``reference`` of the case."""
    if explicit is not None:
        return explicit
    if case is not None:
        for source in (case.expected.facts, case.metadata, case.input):
            for key in _EXPECTED_KEYS:
                if source.get(key) is not None:
                    return as_text(source[key]) or ""
    raise MissingInputError("no expected answer (case.expected.facts['expected_answer'])")


def case_list(explicit: Sequence[str] | None, case: EvalCase | None, attribute: str) -> list[str]:
    """Return a list configured on the evaluator, else the case's ``expected.<attribute>`` list."""
    if explicit:
        return list(explicit)
    if case is not None:
        return list(getattr(case.expected, attribute))
    return []


class WrongSubjectError(TypeError):
    """An evaluator was given a subject it does not judge (a Conversation to a one-trace evaluator, or back)."""


def one_trace_only(name: str) -> WrongSubjectError:
    """The error for a one-trace evaluator given a session's conversation, naming the fix."""
    return WrongSubjectError(
        f"evaluator {name!r} judges one trace, not a session's conversation: "
        "use it at span or trace scope, or pick a session evaluator (docs/evaluators.md, Session evaluators)"
    )


def conversation_only(name: str) -> WrongSubjectError:
    """The error for a session evaluator given a single trace, naming the fix."""
    return WrongSubjectError(
        f"evaluator {name!r} judges a session's conversation, not one trace: "
        "use it with EvaluatorSpec(..., scope='session')"
    )


def require_trace(evaluator: Any, subject: Subject) -> Trace:
    """Return ``subject`` when it is a Trace; raise WrongSubjectError for a one-trace evaluator's conversation."""
    if isinstance(subject, Conversation):
        raise one_trace_only(evaluator.name)
    return subject


class DeterministicEvaluator(abc.ABC):
    """Base of the model-free evaluators: subclasses implement :meth:`check` and set name/threshold/direction.

    A missing input becomes a ``skipped`` result; any other exception propagates to the caller (the evaluation
    processor turns it into a ``failed`` result), because it is a bug, not a verdict. ``subjects`` says what the
    evaluator judges: subclasses that also judge a session's Conversation derive from :class:`AnySubjectEvaluator`,
    session-only ones from :class:`ConversationEvaluator`.
    """

    name: str = "deterministic"
    version: str = CODE_VERSION
    threshold: float = 1.0
    direction: Direction = "higher"
    subjects: ClassVar[frozenset[str]] = frozenset({"trace"})
    """``"trace"`` and/or ``"conversation"``: what :meth:`evaluate` accepts (span/trace vs session scope)."""

    def evaluate(self, trace: Subject, case: EvalCase | None = None) -> EvaluationResult:
        """Evaluate ``trace`` (against ``case`` when given).

        Args:
            trace: What the system did: one Trace, or a session's Conversation for evaluators that judge one.
            case: The dataset case, with its expected behaviour (None for live traces).

        Returns:
            The result, with threshold and direction in ``detail``.

        Raises:
            WrongSubjectError: The evaluator does not judge this kind of subject (a configuration mistake).
        """
        try:
            if isinstance(trace, Conversation):
                verdict = self.check_conversation(trace, case)
            else:
                verdict = self.check(trace, case)
        except MissingInputError as exc:
            return skipped_result(self, trace, exc)
        return build_result(self, trace, verdict)

    @abc.abstractmethod
    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Return the verdict on ``trace``; raise MissingInputError when an input is absent."""

    def check_conversation(self, conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Return the verdict on a session's conversation; by default this evaluator judges single traces only."""
        raise one_trace_only(self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, threshold={self.threshold!r})"


class AnySubjectEvaluator(DeterministicEvaluator):
    """An evaluator that judges a Trace and a Conversation alike: over a conversation it reads all turns in order.

    Subclasses implement :meth:`check` over :data:`Subject`, reading what both models offer (``tool_calls``,
    ``tool_results``) or going through :func:`subject_traces` / :func:`subject_texts`.
    """

    subjects: ClassVar[frozenset[str]] = frozenset({"trace", "conversation"})

    @abc.abstractmethod
    def check(self, trace: Subject, case: EvalCase | None) -> Verdict:
        """Return the verdict on a trace or conversation; raise MissingInputError when an input is absent."""

    def check_conversation(self, conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Judge the conversation as :meth:`check` judges a trace."""
        return self.check(conversation, case)


class ConversationEvaluator(DeterministicEvaluator):
    """A session evaluator: it judges a Conversation (session scope) and rejects a single trace."""

    subjects: ClassVar[frozenset[str]] = frozenset({"conversation"})

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """A single trace is not a conversation: raise WrongSubjectError naming the fix."""
        raise conversation_only(self.name)

    @abc.abstractmethod
    def check_conversation(self, conversation: Conversation, case: EvalCase | None) -> Verdict:
        """Return the verdict on the conversation; raise MissingInputError when an input is absent."""


def subject_traces(subject: Subject) -> list[Trace]:
    """Return the traces behind a subject: the trace itself, or a conversation's turns in order."""
    return subject.traces if isinstance(subject, Conversation) else [subject]


def subject_texts(subject: Subject, path: str) -> list[str]:
    """Return the text at dotted ``path`` of the trace, or of every turn that has it, in order.

    Raises:
        MissingInputError: No trace of the subject has the field.
    """
    if isinstance(subject, Trace):
        return [field_text(subject, path)]  # one trace: the same reasons (no_answer) as every other evaluator
    if not subject.turns:
        raise MissingInputError("the conversation has no turns")
    texts = [text for trace in subject.traces if (text := as_text(resolve_path(trace, path))) is not None]
    if not texts:
        if path == DEFAULT_FIELD:
            raise NoAnswerError("no turn of the conversation ended with an answer")
        raise MissingInputError(f"{subject_noun(subject)} has no {path}")
    return texts


# Question and context extraction live in ``_context`` (they grew past what one module holds); re-exported here so
# that ``from evaltrace.evaluators._base import question_text, context_chunks`` keeps working. Imported last: the
# module reads this one's helpers, all defined by now (the package imports ``_base`` before anything else).
from evaltrace.evaluators._context import context_chunks as context_chunks  # noqa: E402
from evaltrace.evaluators._context import question_text as question_text  # noqa: E402
