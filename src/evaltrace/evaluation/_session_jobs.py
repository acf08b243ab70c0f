"""One session judgement: run the session-scope evaluators on a Conversation and publish their results.

A session is no span: nothing is held back or enriched. Each result is recorded in ``stats()``, the metrics and
the monitor like any other, goes out as a ``gen_ai.evaluation.result`` log record carrying ``session.id`` (with no
span parent), and as a :class:`~evaltrace.schema.Score` whose target is the session (``session_id`` set, no trace
or observation) to every sink. The score id depends on the session, the evaluator and its version only, so each
revision upserts the previous one; a revision that a newer one superseded while it ran publishes nothing.

Session evaluators run in this process (on the evaluation threads and loop) even with ``engine="process"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from evaltrace._internal import semconv
from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation.convert import capped, result_outcome, score_metadata
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.runner import RunOptions, arun_evaluator, failed_result, is_async_evaluator
from evaltrace.evaluation.spend import charge_judge
from evaltrace.exporters.redaction import redact_score
from evaltrace.schema import EvaluationResult, Score
from evaltrace.schema.conversation import Conversation
from evaltrace.schema.scores import session_score_id

if TYPE_CHECKING:
    from evaltrace.evaluation._jobs import JobContext

logger = logging.getLogger("evaltrace.evaluation")


@dataclass
class SessionJob:
    """A session due for judgement.

    Attributes:
        conversation: The session's turns (``extra["revision"]``, ``extra["trace_ids"]``).
        specs: The session-scope evaluators admitted (rate limits and budgets taken).
        revision: 1 for the first judgement, +1 per re-judgement after a later trace.
        skipped: Evaluators not run (rate limited, over budget), with the reason (counted in ``stats()`` when
            admitted, as for spans and traces; no score).
    """

    conversation: Conversation
    specs: list[EvaluatorSpec]
    revision: int
    skipped: list[tuple[EvaluatorSpec, str]] = field(default_factory=list)
    finished: int = 0
    recorded: set[int] = field(default_factory=set)  # id(spec) whose result reached stats()


def session_result_to_score(
    result: EvaluationResult, session_id: str, revision: int, config: Any = None
) -> Score | None:
    """Convert a session-scope result to a Score on the session (None for results that are not judgements).

    As for spans and traces, failed and skipped evaluations give no score. The metadata carries the revision.

    Raises:
        ScoreValidationError: The result violates ``config``.
        ValueError: A value the Score model refuses.
    """
    if result.status != "completed":
        return None
    metadata = score_metadata(result)
    metadata["revision"] = revision
    on_trace = result.to_score(trace_id="0" * 32, config=config, metadata=metadata)
    fields = on_trace.model_dump()
    fields.update(
        id=session_score_id(session_id, result.evaluator, result.evaluator_version),
        trace_id=None,
        observation_id=None,
        session_id=session_id,
        comment=capped(on_trace.comment) if on_trace.comment else None,
        string_value=capped(on_trace.string_value) if on_trace.string_value else on_trace.string_value,
    )
    return Score(**fields)


class SessionJudge:
    """Run :class:`SessionJob` objects on the evaluation loop (the :class:`JobRunner` hands them over)."""

    def __init__(self, ctx: Callable[[], JobContext], on_done: Callable[[Any], None]) -> None:
        self._ctx = ctx
        self._on_done = on_done

    async def run(self, job: SessionJob) -> None:
        """Judge the session with each evaluator (concurrently) and publish the results; never raises."""
        ctx = self._ctx()
        tasks: list[asyncio.Task[EvaluationResult]] = []
        try:
            tasks = [asyncio.ensure_future(self._evaluate(job, spec)) for spec in job.specs]
            if tasks:
                # Each evaluator apart: one failing (our bug) must not cancel the others' judgements.
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
                for spec, outcome in zip(job.specs, outcomes, strict=True):
                    if isinstance(outcome, Exception):
                        self._failed(job, spec, outcome)
        except asyncio.CancelledError:
            ctx.stats.incr("cancelled")
            self.cut(job, [spec for spec, task in zip(job.specs, tasks, strict=False) if not task.done()])
        except Exception:
            ctx.stats.incr("internal_errors")
            log_internal_error("judging a session")
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            self._on_done(job)

    def _failed(self, job: SessionJob, spec: EvaluatorSpec, exc: Exception) -> None:
        """An evaluator's judgement failed on our side: an internal error, counted as an error result (no verdict)."""
        ctx = self._ctx()
        ctx.stats.incr("internal_errors")
        logging.getLogger("evaltrace").error(
            "evaltrace internal error while judging a session with %s", spec.evaluator.name, exc_info=exc
        )
        if id(spec) in job.recorded:  # its result was counted before the failure (publishing it failed)
            return
        result = failed_result(spec.evaluator, type(exc).__name__, f"evaltrace failed judging the session: {exc}")
        outcome = result_outcome(result)
        ctx.stats.record(result, outcome)
        ctx.metrics.record_result(result, outcome)

    def cancel_now(self, job: SessionJob) -> None:
        """Shutdown came before the job started: each evaluator counted as not evaluated (``shutdown``)."""
        try:
            self._ctx().stats.incr("cancelled")
            self.cut(job, job.specs)
        finally:
            self._on_done(job)

    def cut(self, job: SessionJob, specs: list[EvaluatorSpec]) -> None:
        """Count ``specs`` not evaluated for shutdown (their verdicts would have been partial)."""
        stats = self._ctx().stats
        for spec in specs:
            stats.not_evaluated(semconv.SKIP_SHUTDOWN, spec.evaluator.name)

    async def _evaluate(self, job: SessionJob, spec: EvaluatorSpec) -> EvaluationResult:
        ctx = self._ctx()
        opts = ctx.options
        timeout = spec.timeout_s if spec.timeout_s is not None else opts.evaluator_timeout_s
        run = arun_evaluator(
            spec.evaluator,
            cast(Any, job.conversation),  # the runner is typed for Traces; it only passes it to evaluate()
            None,
            options=RunOptions(timeout, opts.max_retries, opts.retry_backoff_s),
            executor=None if spec.inline else ctx.pool,
            on_retry=lambda: ctx.stats.incr("retries"),
            async_runner=None if spec.inline else ctx.async_runner,
        )
        async with contextlib.AsyncExitStack() as stack:
            if ctx.limits is not None:
                await stack.enter_async_context(ctx.limits.slot(spec.evaluator.name))
            if is_async_evaluator(spec.evaluator):
                await stack.enter_async_context(ctx.async_slots)
            result = await run
        self._publish(job, spec, result)
        return result

    def _publish(self, job: SessionJob, spec: EvaluatorSpec, result: EvaluationResult) -> None:
        """Record one result: stats, metrics, monitor, log record, scores (unless a newer revision went out)."""
        ctx = self._ctx()
        conversation = job.conversation
        session_id = conversation.session_id
        # The check and the hand-over to the sinks below run on the evaluation loop's one thread with no await in
        # between, so no other revision publishes in the middle; each sink worker delivers in order (a failed batch
        # is retried before later ones go): a newer verdict is never followed by an older one.
        if ctx.session_superseded is not None and ctx.session_superseded(session_id, job.revision):
            ctx.stats.incr("superseded")
            return
        if result.status == "skipped" and result.reason == semconv.SKIP_OVERLOADED:
            ctx.stats.not_evaluated(semconv.SKIP_OVERLOADED, spec.evaluator.name)
            return
        if result.detail:  # a judge's record: its spend is charged as for traces
            charge_judge(ctx.limits, ctx.spend, ctx.stats, spec.evaluator.name, result)
        outcome = result_outcome(result)
        ctx.stats.record(result, outcome)
        job.recorded.add(id(spec))
        ctx.stats.incr("session_results")
        ctx.metrics.record_result(result, outcome)
        last = conversation.turns[-1] if conversation.turns else None
        query = (last.user_input or "") if last is not None else ""
        ctx.monitor.record(result, query=query, output=last.final_answer if last else None, outcome=outcome)
        if ctx.log_events is not None:
            try:
                ctx.log_events.emit_session(session_id, result, job.revision)
                ctx.stats.incr("log_events")
            except Exception:
                log_internal_error("emitting the gen_ai.evaluation.result log event of a session")
        if ctx.sinks:
            self._to_sinks(ctx, job, spec, result)

    @staticmethod
    def _to_sinks(ctx: JobContext, job: SessionJob, spec: EvaluatorSpec, result: EvaluationResult) -> None:
        session_id = job.conversation.session_id
        config = spec.config if spec.config is not None else ctx.options.score_configs.get(result.evaluator)
        try:
            score = session_result_to_score(result, session_id, job.revision, config)
        except ValueError as exc:
            ctx.stats.incr("score_rejects")
            ctx.metrics.record_reject(result.evaluator)
            logger.warning("evaltrace: session score rejected, not stored: %s", exc)
            return
        if score is None:
            return
        if ctx.options.redactor is not None:
            try:
                score = redact_score(score, ctx.options.redactor)
            except Exception:
                log_internal_error("redacting a session score (it was not delivered)")
                return
        for worker in ctx.sinks:
            worker.submit([score])
