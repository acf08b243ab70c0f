"""Test helpers: capture the spans a piece of code produces, build its Trace, and assert on evaluations.

With pytest the ``evaltrace`` plugin (installed with the package) provides the ``evaltrace_capture`` fixture
and the ``@pytest.mark.evaltrace(...)`` marker; without pytest, :func:`capture_traces` does the same job::

    from evaltrace.evaluators import NoPII, ToolCalled
    from evaltrace.testing import assert_evaluation


    def test_weather_agent(evaltrace_capture):
        answer("What is the weather in Paris?")  # code traced with @evaltrace.agent / @evaltrace.tool
        assert_evaluation(evaltrace_capture.trace, ToolCalled("get_weather"), NoPII())

An evaluation that errored or was not evaluated fails the assertion with its own message: only a pass passes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import semconv, tracing
from evaltrace.evaluation.convert import result_outcome
from evaltrace.evaluation.runner import run_evaluator
from evaltrace.schema import EvalCase, EvaluationResult, Trace

__all__ = ["EvaluationAssertionError", "TraceCapture", "assert_evaluation", "capture_traces", "evaluate"]

_OUTCOME_LABELS = {"fail": "FAIL", "error": "ERROR", "not_evaluated": "NOT EVALUATED", "pending": "PENDING"}


class TraceCapture:
    """The spans evaltrace recorded while a capture was active, and the Traces built from them.

    Spans go to a private TracerProvider (the real SDK, exporting synchronously to memory) that is evaltrace's
    provider only while the capture is active; a provider the application or ``configure()`` set up is put back
    afterwards and never sees the test's spans.
    """

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        """The finished spans, in the order they ended."""
        return self.exporter.get_finished_spans()

    @property
    def traces(self) -> list[Trace]:
        """One Trace per captured trace id, in the order the traces started.

        A judge call's own trace (an LLM judge evaluating inside the capture) is not one of them: it is the
        evaluation's, not the code under test's. Its spans are in :attr:`spans`.
        """
        from evaltrace.mapping import trace_from_spans

        by_trace: dict[int, list[ReadableSpan]] = {}
        for span in sorted(self.spans, key=lambda s: s.start_time or 0):
            if (span.attributes or {}).get(semconv.EVALTRACE_JUDGE) is True:
                continue
            trace_id = span.context.trace_id if span.context is not None else 0
            by_trace.setdefault(trace_id, []).append(span)
        return [trace_from_spans(spans) for spans in by_trace.values()]

    @property
    def trace(self) -> Trace:
        """The one Trace captured.

        Raises:
            AssertionError: No span, or spans of several traces, were captured (use :attr:`traces` then).
        """
        traces = self.traces
        if len(traces) != 1:
            found = "no span was captured" if not traces else f"{len(traces)} traces were captured"
            raise AssertionError(
                f"evaltrace: expected one trace, but {found}; use .traces for several, and check that the code "
                "under test is traced (@evaltrace.agent, instrument_openai(), ...)"
            )
        return traces[0]

    def clear(self) -> None:
        """Forget the spans captured so far."""
        self.exporter.clear()


@contextmanager
def capture_traces() -> Iterator[TraceCapture]:
    """Make a fresh :class:`TraceCapture` evaltrace's provider inside the block, then restore the previous one.

    Yields:
        The capture; read ``.trace``/``.traces``/``.spans`` inside or after the block.
    """
    capture = TraceCapture()
    previous = tracing.set_tracer_provider(capture.provider)
    try:
        yield capture
    finally:
        tracing.set_tracer_provider(previous)
        capture.provider.shutdown()


class EvaluationAssertionError(AssertionError):
    """Some evaluation did not pass; ``results`` holds every result, passing ones included."""

    def __init__(self, message: str, results: Sequence[EvaluationResult]) -> None:
        super().__init__(message)
        self.results = list(results)


def evaluate(
    trace: Trace, *evaluators: Any, case: EvalCase | None = None, timeout_s: float | None = None
) -> list[EvaluationResult]:
    """Run each evaluator on ``trace`` (sync or async); an evaluator's crash becomes an errored result.

    Args:
        trace: The trace to judge.
        *evaluators: Built-in evaluators, ``@evaltrace.evaluator`` functions or any object with ``evaluate``.
        case: The eval case (expected values) some evaluators read.
        timeout_s: Per-evaluator timeout.

    Returns:
        One result per evaluator, in order.
    """
    return [run_evaluator(item, trace, case, timeout_s=timeout_s) for item in evaluators]


def _describe(result: EvaluationResult) -> str:
    """One line naming a result that did not pass, its outcome, score and reason."""
    outcome = result_outcome(result)
    score = f" (score {result.score:.2f})" if outcome == "fail" and result.score is not None else ""
    return f"  {_OUTCOME_LABELS[outcome]} {result.evaluator}{score}: {result.reason or 'no reason given'}"


def failure_message(trace: Trace, results: Sequence[EvaluationResult]) -> str | None:
    """The assertion message for ``results`` on ``trace``, or None when every evaluation passed."""
    bad = [result for result in results if result_outcome(result) != "pass"]
    if not bad:
        return None
    trace_id = trace.extra.get("trace_id", trace.case_id)
    lines = [f"evaltrace: {len(bad)} of {len(results)} evaluations did not pass on trace {trace_id}:"]
    lines += [_describe(result) for result in bad]
    return "\n".join(lines)


def assert_evaluation(
    trace: Trace | TraceCapture,
    *evaluators: Any,
    case: EvalCase | None = None,
    timeout_s: float | None = None,
) -> list[EvaluationResult]:
    """Assert that every evaluator passes on ``trace``.

    Example:
        >>> assert_evaluation(evaltrace_capture.trace, ToolCalled("get_weather"), NoPII())  # doctest: +SKIP

    Args:
        trace: The Trace, or a :class:`TraceCapture` holding exactly one trace.
        *evaluators: The evaluators to run (at least one).
        case: The eval case (expected values) some evaluators read.
        timeout_s: Per-evaluator timeout.

    Returns:
        The results, all passing.

    Raises:
        EvaluationAssertionError: An evaluation failed, errored or was not evaluated; the message has one line
            per such evaluator with its reason.
        TypeError: No evaluator was given.
    """
    __tracebackhide__ = True
    if not evaluators:
        raise TypeError("assert_evaluation() needs at least one evaluator, e.g. assert_evaluation(trace, NoPII())")
    resolved = trace.trace if isinstance(trace, TraceCapture) else trace
    results = evaluate(resolved, *evaluators, case=case, timeout_s=timeout_s)
    message = failure_message(resolved, results)
    if message is not None:
        raise EvaluationAssertionError(message, results)
    return results
