"""A function evaluator's call fused with its stamp (issue 28) gives exactly the result call-then-stamp gives.

The fast lane (``call_evaluator_stamped``) and the loop's in-place path (``arun_evaluator`` with no executor) build
a True/False answer's result once, stamped, instead of a result and then its stamped copy. Each test compares the
fused path with the general pair it replaces (``stamp(evaluator.evaluate(trace, None), ...)``): the same values
(but the fresh evaluation id and the finish time), the same ``__dict__`` order and the same fields set; and the
cases it must not take (other answers, user subclasses, a replaced ``evaluate``, async functions, a version that is
not a string) still go through ``evaluate`` and ``stamp``, errors and retries included. A patch of ``evaluate`` or
``_coerce`` on the class (a monkeypatch, or an APM agent's post-import hook applied before the runner is imported)
turns the fusion off, so that the patch is called as before. Counting hooks on ``stamp`` and
``_stamped_verdict`` check that both paths really take the fused call (a tree where they do not still gives the
same results, so the comparisons alone cannot tell).

What changes, by design: an evaluator's error is recorded with the same type, message, user frame and outcome,
but its ``error.stack`` shows the fused frames (``arun_evaluator`` or ``call_evaluator_stamped`` >
``_call_stamped`` > the user's function) instead of ``_run_with_retries`` > ``_attempt`` > ``_call`` >
``evaluate`` > the user's function (see ``test_an_error_keeps_its_type_message_and_user_frame``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal.tracing import SUPPRESS_EVALTRACE_KEY
from evaltrace.evaluation import _jobs, evaluator, runner
from evaltrace.evaluation.evaluator import FunctionEvaluator
from evaltrace.evaluation.runner import RunOptions, arun_evaluator, call_evaluator_stamped, stamp
from evaltrace.evaluation.sinks import SinkResult
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import EvaluationResult, Trace

from .conftest import MakePipeline, wait_until
from .helpers import make_trace

T0 = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
_VARYING = ("evaluation_id", "finished_at")  # drawn and read anew by each build


def _same_result(built: EvaluationResult, reference: EvaluationResult, *, fresh_id: bool = True) -> None:
    """Equal values (but the id and the finish time), the same field order and fields set, nothing extra.

    ``fresh_id``: each build draws its own id (else both carry the evaluator's own result's id).
    """
    assert type(built) is EvaluationResult
    assert list(built.__dict__) == list(reference.__dict__)
    assert {k: v for k, v in built.__dict__.items() if k not in _VARYING} == {
        k: v for k, v in reference.__dict__.items() if k not in _VARYING
    }
    assert built.model_fields_set == reference.model_fields_set
    assert built.__pydantic_extra__ is None and built.__pydantic_private__ is None
    assert built.evaluation_id.startswith("eval_")
    assert (built.evaluation_id != reference.evaluation_id) is fresh_id


def _lazy_trace() -> Trace:
    """The lazily mapped Trace the live pipeline hands to evaluators."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    attributes = {"evaltrace.span.kind": "agent", "input.value": '{"q":"Weather?"}', "output.value": '"Sunny."'}
    with provider.get_tracer("test").start_as_current_span("agent", attributes=attributes):
        pass
    (span,) = exporter.get_finished_spans()
    trace = trace_from_spans([span], span, lazy=True)
    assert type(trace) is not Trace
    return trace


ANSWERS: list[Any] = [True, False, 0.7, 0, "relevant", "Fail", EvaluationResult(evaluator="own", passed=True)]


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("version", [None, "v3"])
@pytest.mark.parametrize("takes_case", [False, True])
@pytest.mark.parametrize("lazy", [False, True])
def test_the_fused_call_gives_the_stamped_result_of_the_same_answer(
    answer: Any, version: str | None, takes_case: bool, lazy: bool
) -> None:
    if takes_case:

        def judge(trace: Trace, case: Any) -> Any:
            assert case is None
            return answer

    else:

        def judge(trace: Trace) -> Any:  # type: ignore[misc]
            return answer

    ev = evaluator(name="judge", version=version, evaluator_type="deterministic")(judge)
    trace = _lazy_trace() if lazy else make_trace()
    produced, exc, stamped = call_evaluator_stamped(ev, trace, T0)
    assert exc is None
    assert stamped is (answer is True or answer is False)  # only a True/False answer is built stamped
    built = produced if stamped else stamp(produced, ev, trace, T0)
    reference = stamp(ev.evaluate(trace, None), ev, trace, T0)
    fresh = not isinstance(answer, EvaluationResult)
    _same_result(built, reference, fresh_id=fresh)
    assert T0 <= built.finished_at <= dt.datetime.now(dt.UTC)
    late = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    ahead, _, _ = call_evaluator_stamped(ev, trace, late)
    if stamped:  # a clock behind the start never makes a negative latency (stamp's max(started, now))
        assert ahead.started_at == ahead.finished_at == late
    # On the loop's in-place path (no executor) too, fused there as well: no stamp() call for a True/False answer.
    with _counting() as counts:
        looped = asyncio.run(arun_evaluator(ev, trace, None, options=RunOptions()))
    assert counts == {"stamp": 0 if stamped else 1, "_stamped_verdict": 1 if stamped else 0}
    _same_result(looped, stamp(ev.evaluate(trace, None), ev, trace, looped.started_at), fresh_id=fresh)


@contextlib.contextmanager
def _counting() -> Iterator[dict[str, int]]:
    """Count the calls of ``stamp`` (the runner's and the job runner's) and of ``_stamped_verdict`` meanwhile.

    Wrappers on the module globals and on the class attribute the fused path calls: neither is something
    ``_fuses`` checks, so counting does not change which path is taken.
    """
    counts = {"stamp": 0, "_stamped_verdict": 0}
    verdict = FunctionEvaluator.__dict__["_stamped_verdict"]

    def counted_stamp(*args: Any) -> Any:
        counts["stamp"] += 1
        return stamp(*args)

    def counted_verdict(*args: Any) -> Any:
        counts["_stamped_verdict"] += 1
        return verdict(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "stamp", counted_stamp)
        mp.setattr(_jobs, "stamp", counted_stamp)
        mp.setattr(FunctionEvaluator, "_stamped_verdict", counted_verdict)
        yield counts


def test_the_fast_lane_and_the_loop_really_take_the_fused_call() -> None:
    """A True/False answer is built stamped (one ``_stamped_verdict``, no ``stamp``); other answers are stamped."""
    ev = evaluator(name="judge")(lambda trace: True)
    with _counting() as counts:
        produced, exc, stamped = call_evaluator_stamped(ev, make_trace(), T0)
        assert exc is None and stamped and produced.run_id == "live"
        result = asyncio.run(arun_evaluator(ev, make_trace()))
        assert result.run_id == "live"
    assert counts == {"stamp": 0, "_stamped_verdict": 2}
    scored = evaluator(name="score")(lambda trace: 0.9)
    with _counting() as counts:
        asyncio.run(arun_evaluator(scored, make_trace()))
    assert counts == {"stamp": 1, "_stamped_verdict": 0}


def test_two_fused_results_share_nothing_mutable() -> None:
    ev = evaluator(name="judge")(lambda trace: True)
    first, _, _ = call_evaluator_stamped(ev, make_trace(), T0)
    second, _, _ = call_evaluator_stamped(ev, make_trace(), T0)
    assert first.detail is not second.detail and first.model_fields_set is not second.model_fields_set
    first.detail["mine"] = 1
    first.model_fields_set.add("score")
    assert second.detail == {} and "score" not in second.model_fields_set


def test_the_fused_call_runs_suppressed_in_the_callers_context_and_restores_it() -> None:
    seen: dict[str, Any] = {}

    @evaluator(name="probe")
    def probe(trace: Trace) -> bool:
        seen["suppressed"] = otel_context.get_value(SUPPRESS_EVALTRACE_KEY)
        seen["caller's"] = otel_context.get_value("caller-key")
        return True

    token = otel_context.attach(otel_context.set_value("caller-key", 42))
    try:
        before = otel_context.get_current()
        produced, exc, stamped = call_evaluator_stamped(probe, make_trace(), T0)
        assert exc is None and stamped and isinstance(produced, EvaluationResult)
        assert otel_context.get_current() is before
    finally:
        otel_context.detach(token)
    assert seen == {"suppressed": True, "caller's": 42}


class _Retryable(Exception):
    retryable = True


def test_the_fused_calls_errors_are_returned_and_retried_as_before() -> None:
    calls: list[int] = []

    @evaluator(name="flaky")
    def flaky(trace: Trace) -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise _Retryable("try again")
        return False

    produced, exc, stamped = call_evaluator_stamped(flaky, make_trace(), T0)
    assert produced is None and isinstance(exc, _Retryable) and not stamped  # the lane: returned, never raised
    calls.clear()
    retries: list[int] = []
    options = RunOptions(max_retries=1, initial_backoff_s=0.0)
    result = asyncio.run(arun_evaluator(flaky, make_trace(), options=options, on_retry=lambda: retries.append(1)))
    assert (len(calls), len(retries)) == (2, 1)  # called once per attempt: the fused first call is not repeated
    assert (result.status, result.passed, result.run_id) == ("completed", False, "live")

    @evaluator(name="broken")
    def broken(trace: Trace) -> bool:
        raise ValueError("bad span")

    result = asyncio.run(arun_evaluator(broken, make_trace()))
    assert (result.status, result.passed, result.detail["error_type"]) == ("failed", False, "ValueError")
    assert result.reason == "evaluator failed: ValueError: bad span" and result.evaluator == "broken"

    @evaluator(name="quits")
    def quits(trace: Trace) -> bool:
        raise SystemExit(3)

    result = asyncio.run(arun_evaluator(quits, make_trace()))  # contained: the loop would stop
    assert (result.status, result.detail["error_type"]) == ("failed", "SystemExit")
    produced, exc, stamped = call_evaluator_stamped(quits, make_trace(), T0)
    assert produced is None and type(exc).__name__ == "UserAbort" and not stamped

    @evaluator(name="odd")
    def odd(trace: Trace) -> Any:
        return [1]

    result = asyncio.run(arun_evaluator(odd, make_trace()))  # an answer of the wrong type: an error, as before
    assert (result.status, result.detail["error_type"]) == ("failed", "TypeError")


def _plain(trace: Trace) -> bool:
    return True


class _Subclass(FunctionEvaluator):
    def evaluate(self, trace: Any, case: Any) -> Any:
        return EvaluationResult(evaluator=self.name, passed=False, reason="the subclass's own")


def _replaced() -> FunctionEvaluator:
    ev = FunctionEvaluator(_plain, name="replaced")
    ev.evaluate = lambda trace, case: EvaluationResult(  # type: ignore[method-assign]
        evaluator="replaced", passed=False, reason="the instance's own"
    )
    return ev


async def _async_judge(trace: Trace) -> bool:
    return True


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: _Subclass(_plain, name="sub"), "the subclass's own"),
        (_replaced, "the instance's own"),
    ],
)
def test_an_evaluator_whose_evaluate_is_its_own_is_called_through_it(make: Any, reason: str) -> None:
    ev = make()
    produced, exc, stamped = call_evaluator_stamped(ev, make_trace(), T0)
    assert exc is None and not stamped and produced.reason == reason
    result = asyncio.run(arun_evaluator(ev, make_trace()))
    assert (result.passed, result.reason, result.run_id) == (False, reason, "live")


def test_a_class_level_replacement_of_evaluate_is_called_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        FunctionEvaluator, "evaluate", lambda self, trace, case: EvaluationResult(evaluator="x", passed=False)
    )
    ev = FunctionEvaluator(_plain, name="patched")
    produced, exc, stamped = call_evaluator_stamped(ev, make_trace(), T0)
    assert exc is None and not stamped and produced.passed is False


def test_a_class_level_patch_of_coerce_applies_to_true_false_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_coerce`` patched on the class (e.g. to tag every result) is called for a True/False answer too."""
    original = FunctionEvaluator._coerce

    def tagged(self: FunctionEvaluator, value: Any) -> EvaluationResult:
        return original(self, value).model_copy(update={"reason": "tagged"})

    monkeypatch.setattr(FunctionEvaluator, "_coerce", tagged)
    ev = FunctionEvaluator(_plain, name="patched")
    trace = make_trace()
    produced, exc, stamped = call_evaluator_stamped(ev, trace, T0)
    assert exc is None and not stamped and produced.reason == "tagged"
    _same_result(stamp(produced, ev, trace, T0), stamp(ev.evaluate(trace, None), ev, trace, T0))
    result = asyncio.run(arun_evaluator(ev, trace))
    assert (result.passed, result.reason, result.run_id) == (True, "tagged", "live")
    monkeypatch.undo()
    assert call_evaluator_stamped(ev, trace, T0)[2]  # the original back: fused again


_POST_IMPORT_HOOK = """
import asyncio, datetime as dt, importlib.abc, importlib.machinery, sys
sys.path.insert(0, sys.argv[1])
calls = []

class Hook(importlib.abc.MetaPathFinder):  # what wrapt.register_post_import_hook / an APM agent does
    def find_spec(self, name, path, target=None):
        if name != "evaltrace.evaluation.evaluator":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        exec_module = spec.loader.exec_module

        def patched_exec(module):
            exec_module(module)
            cls = module.FunctionEvaluator
            evaluate, coerce = cls.evaluate, cls._coerce

            def traced_evaluate(self, trace, case):
                calls.append("evaluate")
                return evaluate(self, trace, case)

            def traced_coerce(self, value):
                calls.append("_coerce")
                return coerce(self, value)

            cls.evaluate, cls._coerce = traced_evaluate, traced_coerce

        spec.loader.exec_module = patched_exec
        return spec

sys.meta_path.insert(0, Hook())
from evaltrace.evaluation import evaluator
from evaltrace.evaluation.runner import arun_evaluator, call_evaluator_stamped
from evaluation.helpers import make_trace

assert "evaltrace.evaluation.runner" in sys.modules
ev = evaluator(name="check")(lambda trace: True)
result = asyncio.run(arun_evaluator(ev, make_trace()))
produced, exc, stamped = call_evaluator_stamped(ev, make_trace(), dt.datetime.now(dt.UTC))
print(calls, result.passed, result.run_id, stamped, exc)
"""


def test_a_post_import_hook_patch_of_evaluate_is_called() -> None:
    """Patched right after ``evaluator.py`` loads, before ``runner.py`` is imported: the patches are still called.

    In a fresh interpreter (the hook must run at first import). The runner compares with the methods
    ``evaluator.py`` captured right after the class body, not with what the class holds when the runner loads.
    """
    tests_dir = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-c", _POST_IMPORT_HOOK, tests_dir], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['evaluate', '_coerce', 'evaluate', '_coerce'] True live False None"


def test_an_error_keeps_its_type_message_and_user_frame() -> None:
    """The recorded error is the same but for the runner's frames in ``error.stack`` (the fused ones now)."""

    @evaluator(name="broken")
    def broken(trace: Trace) -> bool:
        raise ValueError("bad span")

    result = asyncio.run(arun_evaluator(broken, make_trace()))
    assert (result.status, result.passed, result.detail["error_type"]) == ("failed", False, "ValueError")
    assert result.error is not None and result.error.type == "exception"
    assert result.error.message == "ValueError: bad span"
    stack = result.error.stack or ""
    assert 'raise ValueError("bad span")' in stack and "in broken" in stack
    assert stack.rstrip().endswith("ValueError: bad span")
    assert "in _call_stamped" in stack and "in _attempt" not in stack  # the fused frames, by design


def test_the_unfused_cases_take_evaluate_and_stamp() -> None:
    async_ev = evaluator(name="later")(_async_judge)
    produced, exc, stamped = call_evaluator_stamped(async_ev, make_trace(), T0)
    assert exc is None and not stamped and asyncio.iscoroutine(produced)
    produced.close()
    numbered = FunctionEvaluator(_plain, name="numbered", version=3)  # type: ignore[arg-type]
    produced, exc, stamped = call_evaluator_stamped(numbered, make_trace(), T0)
    assert exc is None and not stamped  # left to stamp()'s validated path, as before
    assert produced.evaluator_version == 3 and produced.run_id == ""  # evaluate()'s result, not stamped


def test_verdicts_fused_on_the_fast_lane_reach_the_span_the_stats_and_the_sinks(make_pipeline: MakePipeline) -> None:
    """Through the real pipeline: the lane's fused verdicts are the results every consumer reads, stamped."""
    threads: list[str] = []

    @evaluator(name="even", version="v2")
    def even(trace: Trace) -> bool:
        threads.append(threading.current_thread().name)
        return trace.output.final_answer == "yes"

    scores: list[Any] = []

    class Sink:
        name = "memory"

        def export(self, batch: Any) -> SinkResult:
            scores.extend(batch)
            return SinkResult.success()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

        def shutdown(self) -> None:
            pass

    p = make_pipeline([even], sinks=[Sink()], hold_timeout_s=60.0)  # enriched however loaded the machine is
    lane = p.processor._engine.lane
    assert lane is not None
    lane.slow_call_s = float("inf")  # a loaded machine must not make the cheap check look slow: it stays on the lane
    with _counting() as counts:
        for answer in ("yes", "no", "yes"):
            with p.tracer.start_as_current_span(answer, attributes={"output.value": json.dumps(answer)}):
                pass
        p.flush()
    assert counts == {"stamp": 0, "_stamped_verdict": 3}  # built stamped on the lane, never stamped after
    assert len(threads) == 3 and all(name.startswith("evaltrace-eval-lane-") for name in threads)
    for answer in ("yes", "no"):
        for span in p.by_name(answer):
            attributes = span.attributes or {}
            verdict = answer == "yes"
            assert attributes["evaltrace.eval.even.outcome"] == ("pass" if verdict else "fail")
            assert attributes["evaltrace.eval.even.passed"] is verdict
            assert attributes["evaltrace.eval.failed"] is not verdict
            (event,) = [e for e in span.events if e.name == "gen_ai.evaluation.result"]
            assert dict(event.attributes or {}) == {
                "gen_ai.evaluation.name": "even",
                "gen_ai.evaluation.score.label": "pass" if verdict else "fail",
            }
    stats = p.processor.stats()
    assert (stats["passed"], stats["failed"], stats["enriched"], stats["internal_errors"]) == (2, 1, 3, 0)
    assert wait_until(lambda: len(scores) == 3)
    for score in scores:
        assert score.name == "even" and score.metadata["evaluator_version"] == "v2"
        assert score.metadata["evaluation_id"].startswith("eval_")
    assert len({score.metadata["evaluation_id"] for score in scores}) == 3
