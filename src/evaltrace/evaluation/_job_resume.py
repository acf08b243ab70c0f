"""A fast-lane job the lane demoted, continued on the loop: what finished, the call in flight, then the rest.

Each function is a method of :class:`~evaltrace.evaluation._jobs.JobRunner` (assigned in its class body under its
old name). The call in flight finishes under what is left of its timeout; retries and the hold rule are then the
general path's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import time
from typing import TYPE_CHECKING, Any

from evaltrace._internal.tracing import suppress_instrumentation
from evaltrace.evaluation._fast_lane import DemotedCall
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.runner import RunOptions, arun_evaluator, contained, settle, timed_out_result
from evaltrace.schema import EvaluationResult

if TYPE_CHECKING:
    from evaltrace.evaluation._jobs import Job, JobRunner, Progress


def give_up(inflight: Any) -> None:
    """The loop stops waiting for a call the fast lane demoted: it counts against the stuck-thread cap."""
    if isinstance(inflight, DemotedCall):
        inflight.give_up()


async def resume(self: JobRunner, job: Job, progress: Progress) -> None:
    """A fast-lane job on the loop: what finished, the call in flight, then the rest as on the general path."""
    done = len(progress.results)
    tasks: list[asyncio.Future[EvaluationResult]] = []
    for result in progress.results:
        finished: asyncio.Future[EvaluationResult] = asyncio.get_running_loop().create_future()
        finished.set_result(result)
        tasks.append(finished)
    rest = job.specs[done:]
    if progress.inflight is not None and rest:
        tasks.append(asyncio.ensure_future(self._finish_inflight(job, rest[0], progress)))
        rest = rest[1:]
    tasks += [asyncio.ensure_future(self._evaluate(job.span, progress.trace, spec, job.revision, job)) for spec in rest]
    job.running = list(zip(job.specs, tasks, strict=True))
    try:
        await self._hold_and_forward(job, tasks)  # type: ignore[arg-type]
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()


async def finish_inflight(self: JobRunner, job: Job, spec: EvaluatorSpec, progress: Progress) -> EvaluationResult:
    """The outcome of the call the fast lane began, under the evaluator's timeout; retries as usual."""
    evaluator, trace = spec.evaluator, progress.trace
    options = self._run_options(spec)
    inflight = progress.inflight
    left = None if options.timeout_s is None else max(0.0, progress.started + options.timeout_s - time.monotonic())
    produced: Any = None
    exc: Exception | None = None
    deadline = asyncio.timeout(left)
    try:
        async with deadline:
            if isinstance(inflight, concurrent.futures.Future):
                produced = await asyncio.wrap_future(inflight)
            else:
                produced = inflight
            if inspect.isawaitable(produced):  # a sync evaluate's awaitable: the same deadline holds
                with suppress_instrumentation():
                    produced = await contained(produced)
    except TimeoutError as error:
        if not deadline.expired():
            exc = error
        else:
            give_up(inflight)  # its timeout passed: a lane thread still in the call is stuck from now
            if self.ctx.offenders is not None and isinstance(inflight, DemotedCall):  # it hangs: run it apart
                self.ctx.offenders.isolate(id(evaluator), spec.evaluator.name, "hung", options.timeout_s or 0.0)
            return self._recorded(job, spec, trace, timed_out_result(evaluator, options.timeout_s), progress)
    except asyncio.CancelledError:  # shutdown cut the job short: nobody awaits the call any more
        give_up(inflight)
        raise
    except Exception as error:
        exc = error
    result = settle(evaluator, produced, exc, may_retry=options.max_retries > 0)
    if result is None:  # retryable: the remaining attempts as on the general path
        self._count_retry()
        await asyncio.sleep(options.initial_backoff_s)
        again = RunOptions(options.timeout_s, options.max_retries - 1, options.initial_backoff_s * 2)
        result = await arun_evaluator(
            evaluator, trace, None, options=again, executor=self.ctx.pool, on_retry=self._count_retry
        )
        self._record(job.span, trace, spec, result, job.revision, job)
        return result
    return self._recorded(job, spec, trace, result, progress)
