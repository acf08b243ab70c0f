"""What a finished evaluation becomes besides the span: stats, metrics, the monitor, the log event, scores.

Each function is a method of :class:`~evaltrace.evaluation._jobs.JobRunner` (assigned in its class body under its
old name). A result that never ran (``overloaded``) or whose Trace field failed to map is only counted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv
from evaltrace._internal.errors import FieldMappingFailed, log_internal_error
from evaltrace.evaluation._preview import PendingQuery, deferred_query, query_of
from evaltrace.evaluation.convert import NO_VERDICT, result_outcome, result_to_score
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.spend import charge_judge
from evaltrace.exporters.redaction import redact_score
from evaltrace.schema import EvaluationResult, Score, Trace

logger = logging.getLogger("evaltrace.evaluation")
# Skip reasons recorded only as a count: the evaluator never ran, or a Trace field it read failed to map.
NOT_PUBLISHED = frozenset((semconv.SKIP_OVERLOADED, semconv.SKIP_MAPPING_FAILED))

if TYPE_CHECKING:
    from evaltrace.evaluation._jobs import Job, JobRunner


def claim(job: Job, spec: EvaluatorSpec, result: EvaluationResult, lock: Any) -> bool:
    """Claim ``result``'s publication: True, publish it; False, shutdown took ``job`` over and marks it instead.

    ONE atomic claim per evaluation decides between the job and shutdown (``abandon_unfinished``, which sets
    ``abandoned`` under the same ``lock``, the context's ``live_lock``): the job lists the result in
    ``job.published`` only while ``abandoned`` is unset, both under the lock. So when shutdown reads
    ``job.published`` (``_job_cuts.split_taken``), every result in it was claimed by the job (kept on the span,
    never marked) and every other evaluation will never be published (marked ``shutdown``): never both, never
    neither, whatever order the threads run in.
    """
    # lock.acquire() and a finally, not ``with``: the with statement builds two bound methods (~1k instructions).
    lock.acquire()
    try:
        if job.abandoned:
            return False
        done = job.published
        if isinstance(done, list):
            done.append((spec, result))
        else:
            job.published = [(spec, result)]
    finally:
        lock.release()
    return True


def record(
    self: JobRunner,
    span: ReadableSpan,
    trace: Trace,
    spec: EvaluatorSpec,
    result: EvaluationResult,
    revision: int = 1,
    job: Job | None = None,
) -> None:
    """Charge and publish one in-process result (a call the stuck-thread cap refused: counted, not published).

    With ``job``: nothing when shutdown took it over (it marks the evaluation ``shutdown``, see :func:`claim`).
    """
    if job is not None and not claim(job, spec, result, self.ctx.live_lock):
        return
    if result.status == "skipped" and result.reason in NOT_PUBLISHED:
        # Never run (overloaded, as with queue_full), or a Trace field it read failed to map (as when the
        # whole mapping fails): counted by reason, neither evaluated nor scored (sinks, monitor, log).
        self.ctx.stats.not_evaluated(str(result.reason), spec.evaluator.name)
        return
    if result.detail:  # else no judge record (a deterministic check): nothing to charge, no call
        self._charge(spec, result)
    query: str | PendingQuery | None
    try:
        # The monitor's query preview: rendered when its samples are read, when the input is a short text no
        # one mapped yet (see _preview); else made now from trace.input, as before.
        query = deferred_query(span, trace)
        if query is None:
            query = query_of(trace.input)
        final_answer = trace.output.final_answer
    except FieldMappingFailed:  # logged where it failed; the verdict stands, published without them
        query, final_answer = "", None
    self._publish(span, query, final_answer, spec, result, revision)


def charge(self: JobRunner, spec: EvaluatorSpec, result: EvaluationResult) -> None:
    """Charge the judge's spend to the budgets and record it as ``gen_ai.evaluation.client.*`` metrics."""
    if not result.detail:  # no judge record (a deterministic check): nothing to charge
        return
    charge_judge(self.ctx.limits, self.ctx.spend, self.ctx.stats, spec.evaluator.name, result)


def publish(
    self: JobRunner,
    span: ReadableSpan,
    query: str | PendingQuery,
    output: str | None,
    spec: EvaluatorSpec,
    result: EvaluationResult,
    revision: int = 1,
) -> None:
    """Record one result everywhere except on spans: stats, metrics, monitor, log event, score sinks.

    A trace-level result of a revision that a newer one superseded while it ran is not published (counted
    ``superseded``): its score has the same id as the newer one's and would overwrite it if it came later.
    """
    ctx = self.ctx
    if spec.trace_level and ctx.superseded is not None and ctx.superseded(span, revision):
        ctx.stats.incr("superseded")
        return
    # result_outcome(result), once for the three of them, without its call for a judgement (every result)
    outcome = result_outcome(result) if result.status in NO_VERDICT else "pass" if result.passed else "fail"
    ctx.stats.record(result, outcome)
    ctx.metrics.record_result(result, outcome)
    ctx.monitor.record(result, query, output, outcome)
    if ctx.log_events is not None:
        try:
            ctx.log_events.emit(span, result)
            ctx.stats.incr("log_events")
        except Exception:
            log_internal_error("emitting the gen_ai.evaluation.result log event")
    if not ctx.sinks and spec.config is None and result.evaluator not in ctx.options.score_configs:
        return  # no sink to deliver to and no ScoreConfig to check: building the Score would be wasted
    score = self._score(span, spec, result)
    if score is not None:
        if ctx.options.redactor is not None:  # the one copy every sink, and its dead-letter file, gets
            try:
                score = redact_score(score, ctx.options.redactor)
            except Exception:  # fail closed: a score that could not be redacted must not leave unredacted
                log_internal_error("redacting a score (it was not delivered)")
                return
        for worker in ctx.sinks:
            worker.submit([score])


def score(self: JobRunner, span: ReadableSpan, spec: EvaluatorSpec, result: EvaluationResult) -> Score | None:
    if span.context is None:
        return None
    trace_hex = format(span.context.trace_id, "032x")
    span_hex = format(span.context.span_id, "016x")
    config = spec.config if spec.config is not None else self.ctx.options.score_configs.get(result.evaluator)
    # Trace-level verdicts are trace scores (Langfuse's usual target); the root span id rides in metadata.
    observation = None if spec.trace_level else span_hex
    try:
        score = result_to_score(result, trace_hex, observation, config, span_id=span_hex)
    except ValueError as exc:  # ScoreValidationError, or a value the Score model refuses
        self.ctx.stats.incr("score_rejects")
        self.ctx.metrics.record_reject(result.evaluator)
        logger.warning("evaltrace: score rejected, not stored: %s", exc)
        return None
    return score
