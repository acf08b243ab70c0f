"""A job evaluated in the process engine's child: the evaluators shipped, their results published as in process.

Each function is a method of :class:`~evaltrace.evaluation._jobs.JobRunner` (assigned in its class body under its
old name). A job the child cannot take or finish is "not evaluated" (skip reason ``engine_unavailable``), never a
verdict.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv
from evaltrace.evaluation._job_publish import NOT_PUBLISHED, claim
from evaltrace.evaluation._process import EngineUnavailable, EvaluatorRef, ProcessEngine, RemoteOutcome
from evaltrace.evaluation._shipping import shipping_reference
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.runner import skipped_result
from evaltrace.exceptions import ConfigError
from evaltrace.schema import EvaluationResult

logger = logging.getLogger("evaltrace.evaluation")
# A job evaluated in the child: per evaluator a result or a skip reason, then the query and answer the monitor shows.
_Answers = tuple[list[EvaluationResult | str], str, str | None]

if TYPE_CHECKING:
    from evaltrace.evaluation._jobs import Job, JobRunner


def reference(self: JobRunner, spec: EvaluatorSpec) -> EvaluatorRef | None:
    """What the child needs to run ``spec``; None (warned once per evaluator) when it cannot be shipped."""
    key = id(spec.evaluator)
    if key not in self._refs:
        try:
            self._refs[key] = shipping_reference(spec.evaluator)
        except ConfigError as exc:
            self._refs[key] = None
            logger.warning("evaltrace: %s; it is not evaluated (skip reason not_shippable)", exc.problem)
    reference = self._refs[key]
    if reference is None:
        return None
    timeout = spec.timeout_s if spec.timeout_s is not None else self.ctx.options.evaluator_timeout_s
    opts = self.ctx.options
    return (reference, timeout, opts.max_retries, opts.retry_backoff_s, spec.inline)


async def remote(
    self: JobRunner, engine: ProcessEngine, members: list[ReadableSpan], span: ReadableSpan, specs: list[EvaluatorSpec]
) -> _Answers | str:
    """Evaluate ``specs`` in the child: a result (or a skip reason) per spec, or one skip reason for all."""
    refs = [self._reference(spec) for spec in specs]
    shipped = [ref for ref in refs if ref is not None]
    outcome: RemoteOutcome | None = None
    if shipped:
        try:
            outcome = await engine.evaluate(members, span, shipped)
        except EngineUnavailable:
            return semconv.SKIP_ENGINE_UNAVAILABLE
        if outcome.retries:
            self.ctx.stats.incr("retries", outcome.retries)
    answers = iter(outcome.results if outcome is not None else ())
    per_spec = [next(answers) if ref is not None else semconv.SKIP_NOT_SHIPPABLE for ref in refs]
    if outcome is None:
        return per_spec, "", None
    return per_spec, outcome.query, outcome.final_answer


async def evaluate_remote(
    self: JobRunner,
    span: ReadableSpan,
    spec: EvaluatorSpec,
    shared: asyncio.Future[_Answers | str],
    index: int,
    revision: int = 1,
    job: Job | None = None,
) -> EvaluationResult:
    """One evaluator's share of a job evaluated in the child: recorded and published as in process.

    With ``job``: nothing is counted or published when shutdown took it over (see ``_job_publish.claim``).
    """
    outcome = await asyncio.shield(shared)  # the job's other evaluators wait on it too
    answer = outcome if isinstance(outcome, str) else outcome[0][index]
    result = skipped_result(spec.evaluator, answer) if isinstance(answer, str) else answer
    if job is not None and not claim(job, spec, result, self.ctx.live_lock):
        return result
    if isinstance(answer, str):  # never started or lost with the child: not evaluated, never a verdict
        self.ctx.stats.not_evaluated(answer, spec.evaluator.name)
        return result
    assert not isinstance(outcome, str)
    if answer.status == "skipped" and answer.reason in NOT_PUBLISHED:  # as in process (_record)
        self.ctx.stats.not_evaluated(str(answer.reason), spec.evaluator.name)
        return answer
    _, query, final_answer = outcome
    self._charge(spec, answer)
    self._publish(span, query, final_answer, spec, answer, revision)
    return answer
