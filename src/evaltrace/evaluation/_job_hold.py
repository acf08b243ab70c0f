"""The hold rule of ``_jobs.JobRunner``: a job's span forwarded once, enriched with its results or before them.

Each function is a method of :class:`~evaltrace.evaluation._jobs.JobRunner` (assigned in its class body under its
old name). The span goes out enriched when every result is in by its hold deadline; otherwise as it is at the
deadline, each result then following as its own ``evaluation {name}`` child span. A deferred (trace-level) job's
root went out already: its results are child spans carrying the revision.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from evaltrace.evaluation.runner import skipped_result
from evaltrace.evaluation.spans import enriched_copy, evaluation_span
from evaltrace.schema import EvaluationResult

if TYPE_CHECKING:
    from evaltrace.evaluation._jobs import Job, JobRunner


def skipped_results(job: Job) -> list[EvaluationResult]:
    """The "not evaluated" results of the evaluators ``job`` did not run; the reason is the skip reason code."""
    return [skipped_result(spec.evaluator, reason) for spec, reason in job.skipped]


def deliver(self: JobRunner, job: Job, results: list[EvaluationResult]) -> None:
    """Apply the hold rule to results that are all in: the enriched copy, else the span then child spans."""
    provenance = self.ctx.options.evaluation_provenance
    if time.monotonic() <= job.admitted_at + self.ctx.options.hold_timeout_s:
        every = results + skipped_results(job) if job.skipped else results
        if self._forward_once(job, enriched_copy(job.span, every, provenance=provenance)):
            self.ctx.stats.incr("enriched")  # not when shutdown took the job over (it emitted the span)
        return
    if self._forward_once(job, job.span, final=False):
        self.ctx.stats.incr("held_timeout")
    if not self._claim(job):  # shutdown stopped waiting for this job: it counted these spans as dropped
        return
    for index, result in enumerate(results):  # job.specs' results, then job.trace_specs'
        child = evaluation_span(job.span, result, provenance=provenance, trace_scope=index >= len(job.specs))
        if child is not None:
            self.ctx.forward(child)
            self.ctx.stats.incr("evaluation_spans")


async def hold_and_forward(self: JobRunner, job: Job, tasks: list[asyncio.Task[EvaluationResult]]) -> None:
    remaining = job.admitted_at + self.ctx.options.hold_timeout_s - time.monotonic()
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, remaining))
    if not pending:
        provenance = self.ctx.options.evaluation_provenance
        results = [task.result() for task in tasks] + skipped_results(job)
        if self._forward_once(job, enriched_copy(job.span, results, provenance=provenance)):
            self.ctx.stats.incr("enriched")  # not when shutdown took the job over (it emitted the span)
        return
    if self._forward_once(job, job.span, final=False):
        self.ctx.stats.incr("held_timeout")
    results = await asyncio.gather(*tasks)
    if not self._claim(job):  # shutdown stopped waiting for this job: it counted these spans as dropped
        return
    for index, result in enumerate(results):  # job.specs' results, then job.trace_specs'
        child = evaluation_span(
            job.span,
            result,
            provenance=self.ctx.options.evaluation_provenance,
            trace_scope=index >= len(job.specs),
        )
        if child is not None:
            self.ctx.forward(child)
            self.ctx.stats.incr("evaluation_spans")


async def emit_deferred(self: JobRunner, job: Job, tasks: list[asyncio.Task[EvaluationResult]]) -> None:
    """The root is downstream already: each result goes out as a child span carrying the revision."""
    results = await asyncio.gather(*tasks)
    if not self._claim(job):  # shutdown stopped waiting for this job: it counted these spans as dropped
        return
    for result in results:
        child = evaluation_span(
            job.span, result, provenance=self.ctx.options.evaluation_provenance, revision=job.revision
        )
        if child is not None:
            self.ctx.forward(child)
            self.ctx.stats.incr("evaluation_spans")
