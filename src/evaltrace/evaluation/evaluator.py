"""The Evaluator protocol, the ``@evaluator`` decorator for plain functions, and how to attach evaluators.

An evaluator is a pure function of ``(trace, case)``: it sees the :class:`~evaltrace.schema.Trace` built from
the evaluated span's subtree (or the whole trace) and, offline, the :class:`~evaltrace.schema.EvalCase`; never
raw spans. ``evaluate`` may be a plain or an ``async`` method; the processor runs plain ones on a thread pool
and async ones on its event loop.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import inspect
import math
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload, runtime_checkable

from evaltrace._internal import trusted_models
from evaltrace._internal.ids import evaluation_id
from evaltrace.evaluation.limits import Limits
from evaltrace.schema import EvalCase, EvaluationResult, ScoreConfig, Trace

if TYPE_CHECKING:
    from evaltrace.schema.conversation import Conversation

Scope = Literal["span", "trace", "session"]
SCOPES: tuple[str, ...] = ("span", "trace", "session")

DEFAULT_THRESHOLD = 0.5
FAIL_LABELS = frozenset({"fail", "failed", "false", "no", "incorrect", "wrong"})
"""Labels that mean "failed" when a function evaluator returns a string and no ``pass_labels`` are given."""


class RetryableEvaluatorError(Exception):
    """Raise from an evaluator when trying again may succeed (a rate-limited or unreachable judge model).

    Any exception with a true ``retryable`` attribute is treated the same way. Other exceptions fail the
    evaluation at once.
    """

    retryable = True


class SkipEvaluation(Exception):
    """Raise from an evaluator that does not apply to this trace (e.g. the case has no expected answer).

    The result gets ``status="skipped"`` with the message as its reason: it is neither a pass nor a failure,
    produces no score, and is left out of pass rates.
    """


@runtime_checkable
class Evaluator(Protocol):
    """What the evaluation pipeline needs from an evaluator.

    Attributes:
        name: Metric name; becomes ``gen_ai.evaluation.name``, the score name and ``evaltrace.eval.<name>.*``.
        version: Optional version (e.g. ``"v1.2.0"``); part of the score id, so a new version is a new score.
    """

    # Read-only in the protocol, so classes declaring ``version: str`` (or properties) satisfy it.
    @property
    def name(self) -> str:
        """Metric name."""
        ...

    @property
    def version(self) -> str | None:
        """Evaluator version."""
        ...

    # ``trace`` is ``Any`` here, not ``Trace | Conversation``: parameters are contravariant, so a union would make
    # every ``evaluate(self, trace: Trace, ...)`` class fail the protocol under a type checker, and a session
    # evaluator's ``evaluate(self, conversation: Conversation, ...)`` would fail ``Trace``. ``Any`` accepts both.
    def evaluate(self, trace: Any, case: EvalCase | None) -> EvaluationResult | Awaitable[EvaluationResult]:
        """Judge ``trace`` (and ``case`` when known); return the result, or an awaitable of it.

        A session-scope evaluator (``EvaluatorSpec(scope="session")``) receives a
        :class:`~evaltrace.schema.conversation.Conversation` instead: the session's traces as turns in order.
        """
        ...


EvaluatorFunction = Callable[..., Any]


def _coerce_label(label: str, pass_labels: Collection[str] | None) -> bool:
    if pass_labels is not None:
        return label in pass_labels
    return label.strip().lower() not in FAIL_LABELS


def coerce_output(
    value: Any, *, name: str, threshold: float, pass_labels: Collection[str] | None = None
) -> EvaluationResult:
    """Turn a function evaluator's return value into an EvaluationResult.

    - ``EvaluationResult``: used as is.
    - ``bool``: ``passed`` only (no score: it becomes a BOOLEAN score and a ``pass``/``fail`` label).
    - ``int``/``float``: ``score``; ``passed`` is ``score >= threshold``.
    - ``str``: a label, stored as ``detail["label"]`` and ``reason``; ``passed`` is membership in
      ``pass_labels`` when given, else "not one of :data:`FAIL_LABELS`" (case-insensitive).

    Raises:
        TypeError: Any other type (the runner turns it into a failed result).
    """
    if isinstance(value, EvaluationResult):
        return value
    judgement = _judgement(value, threshold, pass_labels)
    if judgement is not None and isinstance(name, str):
        return _trusted_result(evaluator=name, **judgement)
    if isinstance(value, bool):
        return EvaluationResult(evaluator=name, passed=value)
    if isinstance(value, int | float):
        score = float(value)
        return EvaluationResult(evaluator=name, passed=score >= threshold, score=score)
    if isinstance(value, str):
        passed = _coerce_label(value, pass_labels)
        return EvaluationResult(evaluator=name, passed=passed, reason=value, detail={"label": value})
    raise TypeError(
        f"evaluator {name!r} returned {type(value).__name__}; expected bool, number, str or EvaluationResult"
    )


def _judgement(value: Any, threshold: float, pass_labels: Collection[str] | None) -> dict[str, Any] | None:
    """The fields :func:`coerce_output` sets for a bool, a finite number or a str; None for anything else."""
    if isinstance(value, bool):
        return {"passed": value}
    if isinstance(value, int | float):
        score = float(value)
        # A non-finite score is refused by the model's validation: left to the validated path to fail.
        return {"passed": score >= threshold, "score": score} if math.isfinite(score) else None
    if isinstance(value, str):
        return {"passed": _coerce_label(value, pass_labels), "reason": value, "detail": {"label": value}}
    return None


_PER_CALL = frozenset(("evaluator", "passed", "detail", "started_at", "finished_at", "evaluation_id"))
_RESULT_TEMPLATE = trusted_models.template(EvaluationResult, _PER_CALL)
"""EvaluationResult's fields and defaults in field order; a result built from it gives every ``_PER_CALL`` field."""
_STAMPED_FIELDS = frozenset(("evaluator", "run_id", "case_id", "variant_name", "started_at", "finished_at"))
"""The fields ``runner.stamp`` always sets (``runner._STAMPED``; defined here, as the runner imports this module)."""


def _trusted_result(**fields: Any) -> EvaluationResult:
    """An EvaluationResult built without validation from values of their fields' types, timed "now".

    Equal to ``EvaluationResult(**fields)``, fields set included (validation adds both times): validating
    values built here was most of a cheap evaluator's own cost per evaluated span. ``fields`` holds
    ``evaluator`` and ``passed``, and any other field but the times and the id.
    """
    now = dt.datetime.now(dt.UTC)  # utcnow(), without its call
    fields_set = {*fields, "started_at", "finished_at"}
    data = {
        **_RESULT_TEMPLATE,
        "detail": {},
        "evaluation_id": evaluation_id(),
        **fields,
        "started_at": now,
        "finished_at": now,
    }
    return trusted_models.from_template(EvaluationResult, data, fields_set)


class FunctionEvaluator:
    """An :class:`Evaluator` made from a function; build it with :func:`evaluator`."""

    def __init__(
        self,
        func: EvaluatorFunction,
        *,
        name: str | None = None,
        version: str | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        pass_labels: Collection[str] | None = None,
        evaluator_type: str = "function",
    ) -> None:
        self.func = func
        self.name = name or func.__name__
        self.version = version
        self.threshold = threshold
        self.pass_labels = frozenset(pass_labels) if pass_labels is not None else None
        self.evaluator_type = evaluator_type
        self._takes_case = _accepts_two_args(func)
        self.is_async = inspect.iscoroutinefunction(func)
        """True for ``async def`` functions: the processor then runs them on its event loop."""

    def evaluate(
        self, trace: Trace | Conversation, case: EvalCase | None
    ) -> EvaluationResult | Awaitable[EvaluationResult]:
        """Call the function and coerce its output (see :func:`coerce_output`)."""
        args = (trace, case) if self._takes_case else (trace,)
        if self.is_async:
            return self._evaluate_async(args)
        return self._coerce(self.func(*args))

    async def _evaluate_async(self, args: tuple[Any, ...]) -> EvaluationResult:
        return self._coerce(await self.func(*args))

    def _coerce(self, value: Any) -> EvaluationResult:
        name = self.name
        if (value is True or value is False) and isinstance(name, str):
            # The commonest answer: _trusted_result(evaluator=..., evaluator_type=..., passed=...) in place, with
            # no keyword packing (it is most of what a cheap evaluator costs per span). The same fields set.
            now = dt.datetime.now(dt.UTC)
            # The template's copy, then each per-call field stored in it: the same dict as the literal
            # ``{**_RESULT_TEMPLATE, "evaluator": name, ...}`` (every key is the template's, so its order is the
            # template's), without the literal's second dict of these pairs built, merged and freed (~3k).
            data = _RESULT_TEMPLATE.copy()
            data["evaluator"] = name
            data["evaluator_type"] = self.evaluator_type
            data["passed"] = value
            data["detail"] = {}
            data["started_at"] = now
            data["finished_at"] = now
            data["evaluation_id"] = evaluation_id()
            fields_set = {"evaluator", "evaluator_type", "passed", "started_at", "finished_at"}
            if self.version is not None:
                data["evaluator_version"] = self.version
                fields_set.add("evaluator_version")
            return trusted_models.from_template(EvaluationResult, data, fields_set)
        judgement: dict[str, Any] | None
        if isinstance(value, EvaluationResult):
            judgement = None
        else:
            judgement = _judgement(value, self.threshold, self.pass_labels)
        if judgement is not None and isinstance(self.name, str):
            # In one step what coerce_output and the copy below give (the copy never validated these two).
            if self.version is not None:
                judgement["evaluator_version"] = self.version
            return _trusted_result(evaluator=self.name, evaluator_type=self.evaluator_type, **judgement)
        result = coerce_output(value, name=self.name, threshold=self.threshold, pass_labels=self.pass_labels)
        updates: dict[str, Any] = {}
        if not result.evaluator_type:
            updates["evaluator_type"] = self.evaluator_type
        if result.evaluator_version is None and self.version is not None:
            updates["evaluator_version"] = self.version
        return result.model_copy(update=updates) if updates else result

    def _stamped_verdict(self, value: bool, trace: Trace, started: dt.datetime) -> EvaluationResult:
        """``runner.stamp(self._coerce(value), self, trace, started)`` for a True/False answer, in one step.

        The same ``__dict__`` (field order, values, the stamp's times) and fields set as that pair builds: one
        result instead of a result and its stamped copy (the runner's fused call and stamp, once per evaluation).
        Only for a non-empty ``str`` name, a ``str`` or None version and a ``Trace``: the runner checks.
        """
        finished = dt.datetime.now(dt.UTC)  # stamp()'s max(started, now)
        if finished < started:
            finished = started
        # As in _coerce: the template's copy and the per-call fields stored in it, in the literal's order (the same
        # dict, values read in the same order), without a second dict built and merged once per evaluation.
        data = _RESULT_TEMPLATE.copy()
        data["evaluator"] = self.name
        data["evaluator_type"] = self.evaluator_type
        data["passed"] = value
        data["detail"] = {}
        data["started_at"] = started
        data["finished_at"] = finished
        data["evaluation_id"] = evaluation_id()
        data["run_id"] = trace.run_id
        data["case_id"] = trace.case_id
        data["variant_name"] = trace.variant_name
        fields_set = {"evaluator", "evaluator_type", "passed", "started_at", "finished_at"}
        fields_set |= _STAMPED_FIELDS
        if self.version is not None:
            data["evaluator_version"] = self.version
            fields_set.add("evaluator_version")
        return trusted_models.from_template(EvaluationResult, data, fields_set)

    def __repr__(self) -> str:
        return f"FunctionEvaluator({self.name!r})"


# Captured here, as the class body defined them, before anything else can run: a post-import hook (wrapt, an APM
# agent) may patch the class as soon as this module has loaded, before the runner imports it. The runner fuses a
# call with its stamp only while both are these (a patched one is then called as usual).
_ORIGINAL_EVALUATE = FunctionEvaluator.__dict__["evaluate"]
_ORIGINAL_COERCE = FunctionEvaluator.__dict__["_coerce"]


def _accepts_two_args(func: EvaluatorFunction) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


@overload
def evaluator(func: EvaluatorFunction, /) -> FunctionEvaluator: ...
@overload
def evaluator(
    *,
    name: str | None = None,
    version: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    pass_labels: Collection[str] | None = None,
    evaluator_type: str = "function",
) -> Callable[[EvaluatorFunction], FunctionEvaluator]: ...
def evaluator(
    func: EvaluatorFunction | None = None,
    /,
    *,
    name: str | None = None,
    version: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    pass_labels: Collection[str] | None = None,
    evaluator_type: str = "function",
) -> FunctionEvaluator | Callable[[EvaluatorFunction], FunctionEvaluator]:
    """Turn a function of ``(trace)`` or ``(trace, case)``, plain or async, into an :class:`Evaluator`.

    The return value is coerced by :func:`coerce_output`: ``bool`` → ``passed``; a number → ``score``, passed
    when ``score >= threshold``; a ``str`` → a label (``detail["label"]`` and ``reason``), passed when it is
    in ``pass_labels`` (or, without them, not a fail label such as ``"fail"``/``"incorrect"``); an
    ``EvaluationResult`` is used as is.

    Example:
        >>> @evaluator(threshold=0.8)
        ... def answer_length(trace):
        ...     return min(1.0, len(trace.output.final_answer or "") / 200)

    Args:
        func: The function (when used without arguments: ``@evaluator``).
        name: Evaluator name; defaults to the function name.
        version: Evaluator version.
        threshold: Pass threshold for numeric returns.
        pass_labels: Labels that count as passing for string returns.
        evaluator_type: Free-form kind recorded on results (``"llm_judge"`` makes Phoenix show LLM).

    Returns:
        A :class:`FunctionEvaluator`, or a decorator producing one.
    """

    def wrap(f: EvaluatorFunction) -> FunctionEvaluator:
        return FunctionEvaluator(
            f, name=name, version=version, threshold=threshold, pass_labels=pass_labels, evaluator_type=evaluator_type
        )

    return wrap(func) if func is not None else wrap


SpanPredicate = Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class EvaluatorSpec:
    """An evaluator attached globally, with the filter that picks the spans it evaluates.

    A span is evaluated when every filter given matches. The filters run on the application thread in
    ``on_end``, so keep ``predicate`` cheap (an attribute lookup, not I/O).

    Attributes:
        evaluator: The evaluator.
        span_kinds: Span kinds to match (``"llm"``, ``"tool"``, ``"agent"``, ...); None matches any. The kind is
            ``evaltrace.span.kind``, else derived from another instrumentation's attributes
            (``openinference.span.kind``, ``traceloop.span.kind``, ``gen_ai.operation.name``; see
            :func:`evaltrace.mapping.conventions.span_kind`).
        name_glob: ``fnmatch`` pattern on the span name (e.g. ``"chat *"``); None matches any.
        predicate: Callable on the span's attributes; None matches any. An exception counts as no match.
        sample_rate: Fraction of traces evaluated, in [0, 1]. The draw is deterministic: a trace is in when a
            hash of (``sample_group``, trace id) is below the rate, so every process and worker replica, and every
            evaluator of the group, evaluates the same traces (all matching spans of a sampled trace).
        sample_group: Evaluators sharing a group sample the same traces (default: one group for all); another
            group draws an independent sample.
        sampler: Optional callable on the attributes deciding sampling instead of ``sample_rate``.
        trace_level: Evaluate the whole trace once it is complete: its (local) root span has ended and no span
            of it arrived for ``trace_quiet_period_s`` (or ``evaltrace.end_trace()`` marked it); the filters then
            apply to the root span. See docs/evaluation.md, "Trace completion". An alias of ``scope="trace"``.
        scope: What the evaluator judges: ``"span"`` (the default: each matching span's subtree), ``"trace"``
            (the whole trace once complete, as ``trace_level=True``) or ``"session"`` (every trace sharing
            ``session.id``, as a :class:`~evaltrace.schema.conversation.Conversation`, once the session is idle
            for ``session_quiet_period_s`` or ``evaltrace.end_session()`` was called; the filters apply to each
            trace's root and sampling draws by session id: the root's, else the first span of the trace to end
            carrying one). See docs/evaluation.md, "Judging a conversation".
        timeout_s: Per-evaluation timeout; None uses the processor's ``evaluator_timeout_s``.
        config: Optional :class:`~evaltrace.schema.ScoreConfig` the scores must satisfy.
        inline: Where a *sync* evaluator runs when its span does not take the fast lane (trace-level
            evaluation, or ``limits`` set): on the evaluation loop instead of the thread pool, which saves a
            thread hop but cannot be interrupted by the timeout and delays every other evaluation while it runs
            (never for I/O or model calls). Span-level sync evaluations take the fast lane either way (see
            docs/evaluation.md, "Where evaluators run").
        limits: This evaluator's rate limit, judge token / USD budgets and concurrency (a
            :class:`~evaltrace.evaluation.limits.Limits` or a mapping of its fields); the processor's
            ``limits`` apply too. An evaluation over a limit is not run: its result is "not evaluated" with the
            skip reason ``rate_limited`` or ``over_budget``, never a fail.
    """

    evaluator: Evaluator
    span_kinds: Collection[str] | None = None
    name_glob: str | None = None
    predicate: SpanPredicate | None = None
    sample_rate: float = 1.0
    sample_group: str = ""
    sampler: SpanPredicate | None = None
    trace_level: bool = False
    timeout_s: float | None = None
    config: ScoreConfig | None = None
    inline: bool = False
    limits: Limits | None = None
    scope: Scope | None = None
    _kinds: frozenset[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._settle_scope()
        object.__setattr__(
            self, "limits", Limits.coerce(self.limits, f"{getattr(self.evaluator, 'name', 'evaluator')}.limits")
        )
        if not 0.0 <= self.sample_rate <= 1.0:
            raise ValueError(f"sample_rate must be in [0, 1], got {self.sample_rate}")
        if len(self.sample_group.encode()) > 16:  # blake2b's personalisation holds 16 bytes
            raise ValueError(f"sample_group must be at most 16 bytes, got {self.sample_group!r}")
        if self.span_kinds is not None:
            object.__setattr__(self, "_kinds", frozenset(self.span_kinds))

    def _settle_scope(self) -> None:
        """Derive ``scope`` and ``trace_level`` from each other (``trace_level=True`` is ``scope="trace"``)."""
        scope = self.scope
        if scope is None:
            object.__setattr__(self, "scope", "trace" if self.trace_level else "span")
            return
        if scope not in SCOPES:
            raise ValueError(f'scope must be one of "span", "trace", "session"; got {scope!r}')
        if self.trace_level and scope != "trace":
            raise ValueError(
                f'trace_level=True means scope="trace", but scope={scope!r} was given; pass only one of them'
            )
        object.__setattr__(self, "trace_level", scope == "trace")

    @property
    def session_level(self) -> bool:
        """Whether this evaluator judges whole sessions (``scope="session"``)."""
        return self.scope == "session"

    def may_match(self, name: str, kind: Any) -> bool:
        """Return True when the kind and name filters pass (the predicate is left for ``on_end``).

        Used at span start to decide whether the span's descendants must be buffered.
        """
        if self._kinds is not None and kind not in self._kinds:
            return False
        return self.name_glob is None or fnmatch.fnmatchcase(name, self.name_glob)

    def matches(self, name: str, attributes: Mapping[str, Any], kind: Any) -> bool:
        """Return True when the span (name, attributes, ``evaltrace.span.kind`` value) passes every filter."""
        if self._kinds is not None and kind not in self._kinds:
            return False
        if self.name_glob is not None and not fnmatch.fnmatchcase(name, self.name_glob):
            return False
        if self.predicate is not None:
            try:
                return bool(self.predicate(attributes))
            except Exception:
                return False
        return True


def as_spec(item: Evaluator | EvaluatorSpec) -> EvaluatorSpec:
    """Wrap a bare evaluator in a match-everything :class:`EvaluatorSpec` (span level)."""
    return item if isinstance(item, EvaluatorSpec) else EvaluatorSpec(evaluator=item)


def as_specs(items: Sequence[Evaluator | EvaluatorSpec]) -> tuple[EvaluatorSpec, ...]:
    """Normalise the processor's ``evaluators`` argument."""
    return tuple(as_spec(item) for item in items)
