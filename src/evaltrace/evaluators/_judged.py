"""Bases of the judge- and embedding-based evaluators, and the reply-shape checks their parsers share."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from evaltrace._internal import semconv
from evaltrace.evaluators._base import (
    CODE_VERSION,
    DEFAULT_FIELD,
    Direction,
    MissingInputError,
    Subject,
    Verdict,
    answer_text,
    build_result,
    check_field,
    require_trace,
    skipped_result,
)
from evaltrace.evaluators._outages import judge_answered, judge_failed
from evaltrace.evaluators._prompts import Prompt, load_prompt
from evaltrace.evaluators.embeddings import Embedder, default_embedder, embed
from evaltrace.evaluators.judge import Judge, JudgeCall, JudgeError, JudgeReply, default_judge, extract_json
from evaltrace.schema import EvalCase, EvaluationResult, Trace, TraceError

NOT_GIVEN = "(none)"


def json_object(text: str) -> dict[str, Any]:
    """Parse a reply that must be a JSON object."""
    value = extract_json(text)
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def object_list(data: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    """Return ``data[key]`` as a list of objects (a missing key is an error, an empty list is fine)."""
    items = data[key]
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise TypeError(f"{key!r} must be a list of objects")
    return items


def flag(item: Mapping[str, Any], key: str) -> bool:
    """Return a boolean verdict field, accepting ``true``/``false``/``"yes"``/``"no"``/0/1."""
    value = item[key]
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
        return value.strip().lower() in ("true", "yes", "1")
    raise ValueError(f"{key!r} must be true or false, got {value!r}")


def unit_score(value: Any, what: str = "score") -> float:
    """Return ``value`` as a float in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{what} must be between 0 and 1, got {number}")
    return number


def reported_confidence(value: Any) -> float | None:
    """Return a confidence the judge reported, when it is a number in [0, 1]; anything else is no confidence.

    A confidence is optional in every reply, so a malformed one is dropped rather than failing (or retrying) the
    evaluation: the verdict stands without it.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if 0.0 <= number <= 1.0 else None


def numbered(chunks: Sequence[str]) -> str:
    """Render context chunks as ``[1] ...`` lines, the numbering the prompts refer to."""
    return "\n\n".join(f"[{i}] {chunk}" for i, chunk in enumerate(chunks, 1))


class EmbeddingFailure(Exception):
    """The embedder failed while a judge evaluator needed it; the result is ``failed``."""


async def embed_or_fail(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """Embed ``texts``; any failure of the embedder (user code or a remote API) becomes EmbeddingFailure."""
    try:
        return await embed(embedder, texts)
    except Exception as exc:
        raise EmbeddingFailure(f"embedding failed: {type(exc).__name__}: {exc}") from exc


def embedder_name(embedder: Embedder) -> str:
    """Name an embedder in ``detail``: its ``model`` attribute, else its type."""
    return str(getattr(embedder, "model", None) or type(embedder).__name__)


def failed_result(
    evaluator: Any, trace: Subject, message: str, detail: dict[str, Any], **kwargs: Any
) -> EvaluationResult:
    """Return a ``failed`` result carrying ``message`` as its error."""
    return build_result(
        evaluator,
        trace,
        Verdict(False, None, message, detail),
        evaluator_type=evaluator.evaluator_type,
        status="failed",
        error=TraceError(type=kwargs.pop("error_type", "exception"), message=message),
        **kwargs,
    )


def with_judge_trace(result: EvaluationResult, call: JudgeCall) -> EvaluationResult:
    """Name the judge trace behind ``result`` in its metadata (``judge_trace_id``, ``judge_span_id``), if traced.

    The metadata reaches the score's metadata; the evaluation event and late evaluation span carry the trace id
    as ``evaltrace.judge.trace_id``, an enriched span a link to the judge trace's root.
    """
    if call.trace_id is None:
        return result
    metadata = dict(result.metadata or {})
    metadata[semconv.JUDGE_TRACE_ID_KEY] = call.trace_id
    if call.span_id is not None:
        metadata[semconv.JUDGE_SPAN_ID_KEY] = call.span_id
    return result.model_copy(update={"metadata": metadata})


async def ask_judge(
    evaluator: Any, subject: Subject, prompt: Prompt, variables: Mapping[str, str], parse: Any
) -> JudgeReply[Any] | EvaluationResult:
    """Ask ``evaluator.judge`` once; a judge problem comes back as a ``failed`` result, never raised.

    An endpoint failure or a reply still unparseable after the judge's retry is an error of the evaluation (status
    ``failed``, raw replies in ``detail``), not a verdict on the subject. Outages are reported for the banner.

    Args:
        evaluator: The judge evaluator (reads ``name``, ``judge``, ``evaluator_type``).
        subject: The trace or conversation judged (for the failed result's ids).
        prompt: The template.
        variables: Its values.
        parse: Checks and parses the reply.

    Returns:
        The reply, or the failed result to return as is.
    """
    judge: Judge = evaluator.judge
    try:
        reply = await judge.ask(prompt, variables, parse, evaluator=evaluator.name, subject=subject.extra)
    except JudgeError as exc:
        if exc.cause is not None:
            judge_failed(evaluator.name, judge.url, exc.cause)
        else:  # the endpoint answered; the reply was the problem
            judge_answered(evaluator.name, judge.url)
        detail = {"judge": exc.call.as_detail(), "raw_replies": exc.call.raw, "error": str(exc)}
        failed = failed_result(
            evaluator, subject, f"judge failed: {exc}", detail, error_type=exc.error_type, cost_usd=exc.call.cost_usd
        )
        return with_judge_trace(failed, exc.call)
    if not reply.call.cached:
        judge_answered(evaluator.name, judge.url)
    return reply


class JudgeEvaluator(abc.ABC):
    """Base of the LLM-judge evaluators.

    Subclasses set ``name``, ``prompt_name``, ``threshold``/``direction`` and implement :meth:`variables`,
    :meth:`parse` and :meth:`verdict`. ``evaluate`` is async; it never raises for judge problems: an endpoint error
    or a reply still unparseable after one retry ends as ``status="failed"`` with the raw replies in ``detail``.
    The judged answer is the Trace's ``field`` (:meth:`answer`); a trace without it is skipped, not failed.
    """

    name = "llm_judge"
    prompt_name = "llm_judge"
    threshold = 0.75
    direction: Direction = "higher"
    evaluator_type = "llm_judge"
    subjects: ClassVar[frozenset[str]] = frozenset({"trace"})

    def __init__(
        self, judge: Judge | None = None, *, threshold: float | None = None, field: str = DEFAULT_FIELD
    ) -> None:
        """Configure the judge.

        Args:
            judge: The judge; default :func:`~evaltrace.evaluators.judge.default_judge` (from the environment).
            threshold: Override of the default threshold.
            field: Dotted path of the Trace judged as the answer: ``output.final_answer`` (default),
                ``output.thinking``, ``output.structured.<path>``.

        Raises:
            ValueError: ``field`` cannot name a part of a Trace.
        """
        self.field = check_field(field)
        self.judge = judge or default_judge()
        if threshold is not None:
            self.threshold = threshold

    def answer(self, trace: Trace) -> str:
        """Return the text judged as the answer (the ``field``); raise MissingInputError when it is absent."""
        return answer_text(trace, self.field)

    @property
    def prompt(self) -> Prompt:
        """The prompt template used."""
        return load_prompt(self.prompt_name)

    @property
    def version(self) -> str:
        """Code version with the prompt as semver build metadata, e.g. ``v1.0.0+faithfulness.v1``."""
        return f"{CODE_VERSION}+{self.prompt.name.replace('_', '-')}.v{self.prompt.version}"

    @abc.abstractmethod
    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """Return the prompt variables; raise MissingInputError when an input is absent."""

    def parse(self, text: str) -> Any:
        """Parse and check a reply; raise ValueError/KeyError/TypeError to trigger the retry."""
        return json_object(text)

    @abc.abstractmethod
    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Turn the parsed reply into a verdict."""

    async def evaluate(self, trace: Subject, case: EvalCase | None = None) -> EvaluationResult:
        """Judge ``trace`` (against ``case`` when given).

        Args:
            trace: What the system did.
            case: The dataset case (expected answer, facts).

        Returns:
            The result; ``detail["judge"]`` records model, prompt, prompt hash, tokens, cost and cache use.

        Raises:
            WrongSubjectError: Given a session's Conversation (these judges read one trace).
        """
        trace = require_trace(self, trace)
        try:
            variables = self.variables(trace, case)
        except MissingInputError as exc:
            return skipped_result(self, trace, exc, evaluator_type=self.evaluator_type)
        reply = await ask_judge(self, trace, self.prompt, variables, self.parse)
        if isinstance(reply, EvaluationResult):
            return reply
        try:
            verdict = await self.verdict(reply.value, trace, case)
        except EmbeddingFailure as exc:
            failed = failed_result(
                self, trace, str(exc), {"judge": reply.call.as_detail()}, cost_usd=reply.call.cost_usd
            )
            return with_judge_trace(failed, reply.call)
        verdict.detail["judge"] = reply.call.as_detail()
        if verdict.confidence is None and isinstance(reply.value, Mapping):  # a judge that says how sure it is
            verdict = dataclasses.replace(verdict, confidence=reported_confidence(reply.value.get("confidence")))
        result = build_result(self, trace, verdict, evaluator_type=self.evaluator_type, cost_usd=reply.call.cost_usd)
        return with_judge_trace(result, reply.call)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(judge={self.judge!r}, threshold={self.threshold!r})"


class EmbeddingEvaluator(abc.ABC):
    """Base of the embedding-only evaluators: subclasses implement :meth:`measure`."""

    name = "semantic_similarity"
    threshold = 0.75
    direction: Direction = "higher"
    version = CODE_VERSION
    evaluator_type = "embedding"
    subjects: ClassVar[frozenset[str]] = frozenset({"trace"})

    def __init__(
        self, embedder: Embedder | None = None, *, threshold: float | None = None, field: str = DEFAULT_FIELD
    ) -> None:
        """Configure the embedder.

        Args:
            embedder: Any callable returning vectors; default the shared OpenAI embedder (from the environment).
            threshold: Override of the default threshold.
            field: Dotted path of the Trace compared as the answer (default ``output.final_answer``).

        Raises:
            ValueError: ``field`` cannot name a part of a Trace.
        """
        self.field = check_field(field)
        self.embedder: Embedder = embedder if embedder is not None else default_embedder()
        if threshold is not None:
            self.threshold = threshold

    def answer(self, trace: Trace) -> str:
        """Return the text compared as the answer (the ``field``); raise MissingInputError when it is absent."""
        return answer_text(trace, self.field)

    @abc.abstractmethod
    async def measure(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Return the verdict (embed through :func:`embed_or_fail`); raise MissingInputError without inputs."""

    async def evaluate(self, trace: Subject, case: EvalCase | None = None) -> EvaluationResult:
        """Embed and compare; an embedding failure ends as ``status="failed"``, never an exception.

        Args:
            trace: What the system did.
            case: The dataset case.

        Returns:
            The result.

        Raises:
            WrongSubjectError: Given a session's Conversation (these evaluators read one trace).
        """
        trace = require_trace(self, trace)
        try:
            verdict = await self.measure(trace, case)
        except MissingInputError as exc:
            return skipped_result(self, trace, exc, evaluator_type=self.evaluator_type)
        except EmbeddingFailure as exc:
            return failed_result(self, trace, str(exc), {"error": str(exc)})
        verdict.detail["embedding_model"] = embedder_name(self.embedder)
        return build_result(self, trace, verdict, evaluator_type=self.evaluator_type)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threshold={self.threshold!r})"
