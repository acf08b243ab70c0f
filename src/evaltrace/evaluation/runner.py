"""Run one evaluator safely: time it, stamp it, and turn every failure into a result value.

``arun_evaluator`` is what the processor's event loop awaits; ``run_evaluator`` is the synchronous front door
for scripts and the offline runner. Neither raises because of the evaluator: an exception, a timeout or an
output of the wrong type becomes an ``EvaluationResult`` with ``status="failed"``, ``passed=False`` and
``error`` set; :class:`~evaltrace.evaluation.evaluator.SkipEvaluation` gives ``status="skipped"`` (``detail["error_type"]`` holds the exception class name, used as OTel ``error.type``).
Exceptions marked retryable (:class:`~evaltrace.evaluation.evaluator.RetryableEvaluatorError`, or any exception
with ``retryable = True``) are retried with exponential backoff first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import inspect
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import FunctionType, MethodType
from typing import Any, Protocol, runtime_checkable

from evaltrace._internal import semconv
from evaltrace._internal.daemon_pool import DaemonExecutor, UserAbort, stuck_calls
from evaltrace._internal.errors import mapping_failure
from evaltrace._internal.tracing import suppress_instrumentation
from evaltrace.evaluation._calls import _NOT_CALLED, _call, _call_stamped, _fuses
from evaltrace.evaluation._calls import Overloaded as Overloaded
from evaltrace.evaluation._calls import call_evaluator as call_evaluator
from evaltrace.evaluation._calls import call_evaluator_stamped as call_evaluator_stamped
from evaltrace.evaluation._calls import call_in_thread as call_in_thread
from evaltrace.evaluation._results import ERROR_TYPE_KEY as ERROR_TYPE_KEY
from evaltrace.evaluation._results import INVALID_OUTPUT_ERROR_TYPE as INVALID_OUTPUT_ERROR_TYPE
from evaltrace.evaluation._results import TIMEOUT_ERROR_TYPE as TIMEOUT_ERROR_TYPE
from evaltrace.evaluation._results import evaluator_name as evaluator_name
from evaltrace.evaluation._results import failed_result as failed_result
from evaltrace.evaluation._results import skipped_result as skipped_result
from evaltrace.evaluation._results import stamp as stamp
from evaltrace.evaluation._results import timed_out_result as timed_out_result
from evaltrace.evaluation.evaluator import Evaluator, SkipEvaluation
from evaltrace.schema import EvalCase, EvaluationResult, Trace

AsyncRunner = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


@runtime_checkable
class TimedAsyncRunner(Protocol):
    """Runs async evaluators' coroutines and applies their timeout itself, from when each actually starts."""

    async def run_timed(self, evaluator: Any, make: Callable[[], Awaitable[Any]], timeout_s: float | None) -> Any:
        """Await ``make()``; raise :class:`TimedOut` once it has run ``timeout_s`` (its wait to start excluded)."""
        ...


@runtime_checkable
class TimedExecutor(Protocol):
    """Runs sync evaluators on threads and applies their timeout itself, from when each call actually starts."""

    async def call_timed(
        self, evaluator: Any, trace: Trace, case: EvalCase | None, timeout_s: float | None
    ) -> tuple[Any, float]:
        """Return the call's output and its ``time.monotonic()`` start; raise :class:`TimedOut` past ``timeout_s``."""
        ...


_STACK_LIMIT = 4000


@dataclass(frozen=True)
class RunOptions:
    """How one evaluation runs.

    Attributes:
        timeout_s: Seconds before the attempt is abandoned (None: no limit). A timed-out *sync* evaluator
            keeps its thread until it returns (Python cannot stop a thread); with a
            :class:`~evaltrace._internal.daemon_pool.DaemonExecutor` that thread is replaced and never
            delays the process's exit.
        max_retries: Extra attempts for retryable failures.
        initial_backoff_s: Wait before the first retry; doubled for each further retry.
    """

    timeout_s: float | None = None
    max_retries: int = 0
    initial_backoff_s: float = 0.1


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


now = _now
"""The current UTC time (a result's start and finish)."""


async def _call_timed(
    executor: TimedExecutor, evaluator: Evaluator, trace: Trace, case: EvalCase | None, timeout_s: float | None
) -> tuple[Any, float | None]:
    """The call's output, and what is left of its own timeout for an awaitable it returned."""
    produced, started = await executor.call_timed(evaluator, trace, case, timeout_s)
    if timeout_s is None:
        return produced, None
    return produced, max(0.0, started + timeout_s - time.monotonic())


async def _attempt(
    evaluator: Evaluator,
    trace: Trace,
    case: EvalCase | None,
    executor: concurrent.futures.Executor | None,
    timeout_s: float | None,
    async_runner: AsyncRunner | TimedAsyncRunner | None = None,
) -> Any:
    produced: Any = _NOT_CALLED
    # The None checks first: a protocol isinstance costs microseconds, and the in-place path passes neither.
    if async_runner is not None and isinstance(async_runner, TimedAsyncRunner) and is_async_evaluator(evaluator):
        # The runner's clock starts when the coroutine does: never time spent waiting behind another evaluator.
        return await async_runner.run_timed(evaluator, lambda: _call_async(evaluator, trace, case), timeout_s)
    if executor is not None and isinstance(executor, TimedExecutor) and not is_async_evaluator(evaluator):
        produced, timeout_s = await _call_timed(executor, evaluator, trace, case, timeout_s)
        if not inspect.isawaitable(produced):
            return produced
    elif executor is None and not is_async_evaluator(evaluator):
        # Inline and sync: a deadline only fires at an await, so none is armed for the call itself (it costs a
        # timer per evaluation); only an awaitable it returns runs under one. Our own result class is never one.
        produced = _call(evaluator, trace, case)
        if type(produced) is EvaluationResult or not inspect.isawaitable(produced):
            return produced
    # asyncio.timeout (not wait_for): no extra task per call, which matters at thousands of evaluations/s.
    await _in_task()
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            if produced is not _NOT_CALLED:
                pass
            elif async_runner is not None and is_async_evaluator(evaluator):
                assert not isinstance(async_runner, TimedAsyncRunner)  # taken above
                return await async_runner(lambda: _call_async(evaluator, trace, case))
            elif executor is None or is_async_evaluator(evaluator):
                produced = _call(evaluator, trace, case)
            else:
                produced = await _in_executor(executor, evaluator, trace, case)
            if inspect.isawaitable(produced):
                with suppress_instrumentation():
                    produced = await contained(produced)
    except TimeoutError:
        if deadline.expired():
            raise TimedOut from None
        raise  # the evaluator's own TimeoutError (e.g. its HTTP client's): an error like any other
    return produced


async def _in_task() -> None:
    """Suspend once when no task runs this coroutine, so that one does from here on (``asyncio.timeout`` needs one).

    The engine runs an in-place job's first step outside any task (``_engine.Engine._begin``) and hands the job to a
    task when it suspends: this is that suspension, one loop iteration, before a deadline is armed.
    """
    if asyncio.current_task() is None:
        await asyncio.sleep(0)


async def _awaited(produced: Any, timeout_s: float | None) -> Any:
    """An inline sync call's awaitable output awaited as ``_attempt`` awaits it (suppressed, under the timeout)."""
    if type(produced) is EvaluationResult or not inspect.isawaitable(produced):
        return produced
    await _in_task()
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            with suppress_instrumentation():
                return await contained(produced)
    except TimeoutError:
        if deadline.expired():
            raise TimedOut from None
        raise  # the evaluator's own TimeoutError: an error like any other


class TimedOut(Exception):
    """Our deadline for the evaluation passed (not a ``TimeoutError`` the evaluator raised itself)."""


_TimedOut = TimedOut


async def _call_async(evaluator: Evaluator, trace: Trace, case: EvalCase | None) -> Any:
    # Runs as a task on the async runner's loop: the suppression must be set inside that task's context.
    with suppress_instrumentation():
        produced = evaluator.evaluate(trace, case)
        if inspect.isawaitable(produced):
            produced = await produced
    return produced


async def _in_executor(
    executor: concurrent.futures.Executor, evaluator: Evaluator, trace: Trace, case: EvalCase | None
) -> Any:
    if stuck_calls.refuses(id(evaluator)):  # its stuck threads are at the cap: no new one
        raise Overloaded(evaluator)
    future = executor.submit(_call, evaluator, trace, case)
    try:
        return await asyncio.wrap_future(future)
    except BaseException:
        # Timed out or cancelled while the evaluator still runs: a daemon pool lets its thread go (and starts a
        # replacement), so a stuck evaluator costs a thread, never the pool's capacity or the process's exit.
        if not future.done():
            abandon = getattr(executor, "abandon", None)
            if abandon is not None:
                abandon(future)
                if not future.cancelled():  # it runs on: counted against the cap until it returns
                    key = id(evaluator)
                    stuck_calls.stuck(key)
                    future.add_done_callback(lambda _: stuck_calls.returned(key))
            else:
                future.cancel()
        raise


async def contained(awaitable: Any) -> Any:
    """Await user code, turning its ``SystemExit``/``KeyboardInterrupt`` into an ordinary exception.

    Left alone, either would propagate out of the event loop's ``run_forever`` and stop every evaluation.
    """
    try:
        return await awaitable
    except (SystemExit, KeyboardInterrupt) as exc:
        raise UserAbort(exc) from exc


def is_async_evaluator(evaluator: Any) -> bool:
    """True when ``evaluate`` is a coroutine function (or the evaluator says it is async)."""
    if getattr(evaluator, "is_async", False):
        return True
    evaluate = evaluator.evaluate
    if type(evaluate) is MethodType:
        func = evaluate.__func__
        # The usual bound method of a plain function with no coroutine mark (Python >= 3.12's
        # inspect.markcoroutinefunction): what inspect.iscoroutinefunction decides for it (unwrap the method, test
        # the code's flag), without its five Python calls; this runs for every evaluation.
        if type(func) is FunctionType and not hasattr(func, "_is_coroutine_marker"):
            return bool(func.__code__.co_flags & inspect.CO_COROUTINE)
    return inspect.iscoroutinefunction(evaluate)


def _is_retryable(exc: BaseException) -> bool:
    return bool(getattr(exc, "retryable", False))


def settle(evaluator: Any, produced: Any, exc: Exception | None, *, may_retry: bool) -> EvaluationResult | None:
    """The result of one attempt that returned ``produced`` or raised ``exc``; None when it should be retried.

    A ``SkipEvaluation`` is "not evaluated", and so are ``Overloaded`` (reason ``overloaded``) and a Trace field
    whose mapping failed (``FieldMappingFailed``, even wrapped: reason ``mapping_failed``); any other exception
    (retries used up, or not retryable) and an output that is not an ``EvaluationResult`` are errors, never
    verdicts.
    """
    if exc is None:
        if not isinstance(produced, EvaluationResult):
            got = type(produced).__name__
            return failed_result(evaluator, INVALID_OUTPUT_ERROR_TYPE, f"returned {got}, not an EvaluationResult")
        return produced
    if isinstance(exc, SkipEvaluation):
        return skipped_result(evaluator, str(exc) or semconv.SKIP_NOT_APPLICABLE)
    if isinstance(exc, Overloaded):  # our decision, not the evaluator's failure: not evaluated, never retried
        return skipped_result(evaluator, semconv.SKIP_OVERLOADED)
    if mapping_failure(exc) is not None:  # a field of the lazy Trace failed to map: ours, as an eager failure
        return skipped_result(evaluator, semconv.SKIP_MAPPING_FAILED)
    if _is_retryable(exc) and may_retry:
        return None
    stack = "".join(traceback.format_exception(exc))[-_STACK_LIMIT:]
    if isinstance(exc, UserAbort):  # the evaluator raised a BaseException (SystemExit, ...): name that
        cause = exc.cause
        message = f"{type(cause).__name__}: {cause} (raised by the evaluator; contained)"
        return failed_result(evaluator, type(cause).__qualname__, message, stack=stack)
    return failed_result(evaluator, type(exc).__qualname__, f"{type(exc).__name__}: {exc}", stack=stack)


async def _run_with_retries(
    evaluator: Evaluator,
    trace: Trace,
    case: EvalCase | None,
    options: RunOptions,
    executor: concurrent.futures.Executor | None,
    on_retry: Callable[[], None] | None,
    async_runner: AsyncRunner | TimedAsyncRunner | None,
    first: tuple[Any, Exception | None] | None = None,
) -> EvaluationResult:
    """The result of the attempts (retries included).

    ``first``: the first attempt's inline call, made already (``arun_evaluator``'s fused call), as ``(output,
    None)`` or ``(None, exception)``; its output is handled as ``_attempt`` handles that of its own call.
    """
    attempt = 0
    while True:
        exc: Exception | None = None
        produced: Any = None
        try:
            if first is None:
                produced = await _attempt(evaluator, trace, case, executor, options.timeout_s, async_runner)
            else:
                called, exc = first
                first = None
                if exc is None:
                    produced = await _awaited(called, options.timeout_s)
        except _TimedOut:
            return timed_out_result(evaluator, options.timeout_s)
        except Exception as error:
            exc = error
        if exc is None and type(produced) is EvaluationResult:  # the usual answer: settle()'s, without its call
            return produced
        result = settle(evaluator, produced, exc, may_retry=attempt < options.max_retries)
        if result is not None:
            return result
        attempt += 1
        if on_retry is not None:
            on_retry()
        await asyncio.sleep(options.initial_backoff_s * (2 ** (attempt - 1)))


async def arun_evaluator(
    evaluator: Evaluator,
    trace: Trace,
    case: EvalCase | None = None,
    *,
    options: RunOptions | None = None,
    executor: concurrent.futures.Executor | None = None,
    on_retry: Callable[[], None] | None = None,
    async_runner: AsyncRunner | TimedAsyncRunner | None = None,
) -> EvaluationResult:
    """Run ``evaluator`` on ``trace``; never raises for the evaluator's sake.

    Args:
        evaluator: The evaluator (sync or async ``evaluate``).
        trace: The trace to judge.
        case: The case, offline; None for live traces.
        options: Timeout and retries.
        executor: Where sync evaluators run (None: inline on the loop, which the timeout cannot interrupt).
        on_retry: Called before each retry (the processor counts them).
        async_runner: Where async evaluators' coroutines run (the processor's user loop, so that one that blocks
            its loop cannot stall the pipeline); None runs them on the calling loop.

    Returns:
        The result stamped with the trace's run, case and variant, the evaluator's name and version, and the
        start/finish times of the whole call (retries included).
    """
    options = options or RunOptions()
    started = dt.datetime.now(dt.UTC)  # _now(), without its call
    first: tuple[Any, Exception | None] | None = None
    if executor is None and _fuses(evaluator, trace):  # inline: the call and its stamp fused (_call_stamped)
        try:
            produced, stamped = _call_stamped(evaluator, trace, case, started)
        except Exception as exc:  # as _attempt's call would raise it: _run_with_retries settles it
            first = (None, exc)
        else:
            if stamped:
                return produced  # type: ignore[no-any-return]  # an EvaluationResult, stamped
            first = (produced, None)
    result = await _run_with_retries(evaluator, trace, case, options, executor, on_retry, async_runner, first)
    return stamp(result, evaluator, trace, started)


def run_evaluator(
    evaluator: Evaluator,
    trace: Trace,
    case: EvalCase | None = None,
    *,
    timeout_s: float | None = None,
    max_retries: int = 0,
) -> EvaluationResult:
    """Synchronous :func:`arun_evaluator`: run one evaluator to completion on a private event loop.

    Safe to call from code that already runs an event loop (the work then happens on a helper thread).

    Args:
        evaluator: The evaluator.
        trace: The trace.
        case: The case, if any.
        timeout_s: Timeout for the evaluation.
        max_retries: Extra attempts for retryable failures.

    Returns:
        The stamped result (failed, never raised, when the evaluator misbehaves).
    """
    options = RunOptions(timeout_s=timeout_s, max_retries=max_retries)

    def run() -> EvaluationResult:
        # Daemon threads: a timed-out sync evaluator finishes (or not) on its own and never holds up exit.
        pool = DaemonExecutor(1, thread_name_prefix="evaltrace-eval")
        try:
            return asyncio.run(arun_evaluator(evaluator, trace, case, options=options, executor=pool))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    helper = DaemonExecutor(1, thread_name_prefix="evaltrace-eval-helper")
    try:
        return helper.submit(run).result()
    finally:
        helper.shutdown(wait=False)
