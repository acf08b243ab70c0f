"""Jobs that shutdown cut short: what finished is kept, every other evaluation is marked "not evaluated".

Each function is a method of :class:`~evaltrace.evaluation._jobs.JobRunner` (assigned in its class body under its
old name). The marks (reason ``shutdown``) go wherever the results would have gone: on the span (enriched, or as
child spans when it went out already), in ``stats()`` and in the score sinks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evaltrace._internal import semconv
from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation._job_hold import skipped_results as _skipped_results
from evaltrace.evaluation._job_resume import give_up as _give_up
from evaltrace.evaluation._session_jobs import SessionJob
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.runner import skipped_result
from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated
from evaltrace.evaluation.spans import enriched_copy, evaluation_span
from evaltrace.evaluation.stats import DROP_LOOP_STALLED
from evaltrace.schema import EvaluationResult

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from opentelemetry.sdk.trace import ReadableSpan

    from evaltrace.evaluation._jobs import Job, JobRunner, Progress
    from evaltrace.evaluation.sinks.worker import SinkWorker
    from evaltrace.evaluation.stats import PipelineStats


class Bulk:
    """What shutdown's take-over past its deadline shares across its jobs (see ``abandon_unfinished``).

    One ``shutdown`` mark per evaluator (an ``EvaluationResult`` is the costly part of a mark) serves every job
    left; the counts and the sink records are collected here and written once for all of them. What a span
    carries is the same as with a mark of its own: a mark's attributes and event read only its evaluator, status
    and reason (a child span's start and end are the shared mark's).
    """

    __slots__ = ("counted", "marks", "records")

    def __init__(self) -> None:
        self.marks: dict[int, EvaluationResult] = {}
        self.counted: dict[str, int] = {}  # evaluations marked, per evaluator
        self.records: list[NotEvaluated] = []

    def mark(self, spec: EvaluatorSpec) -> EvaluationResult:
        """The shared ``shutdown`` mark of ``spec``'s evaluator."""
        mark = self.marks.get(id(spec.evaluator))
        if mark is None:
            mark = self.marks[id(spec.evaluator)] = skipped_result(spec.evaluator, semconv.SKIP_SHUTDOWN)
        return mark


class Sent:
    """What :func:`emit_cut` sent: ``planned`` spans built (-1: not built), ``forwarded`` of them gone downstream.

    For a caller whose marking raised after the spans were built: it counts only what did not go out.
    """

    __slots__ = ("forwarded", "planned")

    def __init__(self) -> None:
        self.planned = -1
        self.forwarded = 0


def cancel_now(self: JobRunner, job: Job | SessionJob, progress: Progress | None) -> None:
    """Shutdown cut ``job`` short (fast lane, or before its task began): counted, forwarded with what finished."""
    if isinstance(job, SessionJob):
        self._judge.cancel_now(job)
        return
    self._session_settled(job)
    forwarded = job.forwarded  # what emit_cut reads: the span went already (held) or not
    sent = Sent()
    try:
        if not job.abandoned:  # taken over at shutdown: nothing more is counted for it
            self.ctx.stats.incr("cancelled")
        if progress is not None:  # a demoted call still running is walked away from
            _give_up(progress.inflight)
        done = progress.results if progress is not None else []
        if not job.abandoned:  # as mark_cut
            emit_cut(self, job, done, [*job.specs, *job.trace_specs][len(done) :], sent=sent)
    except Exception:
        log_internal_error("forwarding a span whose evaluation was cut short")
        if sent.planned > sent.forwarded and job.forwarded:  # claimed, and a forward raised: never lost uncounted
            if forwarded:  # the child evaluation spans not sent
                count_dropped(self.ctx.stats, sent.planned - sent.forwarded)
            elif not sent.forwarded:  # the application's span: as it is, as when a job fails
                forward_or_count(self.ctx.forward, self.ctx.stats, job.span)
    finally:
        try:
            self._forward_once(job, job.span)  # not claimed above (building failed): it goes as it is
        except Exception:
            count_dropped(self.ctx.stats, 1)
            log_internal_error("forwarding a span whose evaluation was cut short")
        finally:
            self._on_done(job)


def forward_or_count(
    forward: Callable[[ReadableSpan], None],
    stats: PipelineStats,
    span: ReadableSpan,
    what: str = "forwarding a span whose evaluation was cut short",
) -> None:
    """Shutdown's own forward of ``span`` (a job cut short or taken over); never raises.

    When ``forward`` raises (a bug of ours), the span is counted as an internal error and in
    ``dropped_at_shutdown`` (``evaluation_loop_stalled``), and logged as ``what``: nothing reaches the
    application, and shutdown goes on to the sinks and exporters.
    """
    try:
        forward(span)
    except Exception:
        count_dropped(stats, 1)
        log_internal_error(what)


def count_dropped(stats: PipelineStats, spans: int) -> None:
    """``spans`` a raising forward lost at shutdown: an internal error, counted in ``dropped_at_shutdown``."""
    stats.incr("internal_errors")
    stats.dropped_at_shutdown(DROP_LOOP_STALLED, spans)


def cut_unfinished(self: JobRunner, job: Job) -> None:
    """Shutdown cancelled ``job``'s task: what finished is kept, every other evaluator is marked cut short."""
    try:
        done: list[EvaluationResult] = []
        cut: list[EvaluatorSpec] = []
        if job.running:
            for spec, task in job.running:
                if task.done() and not task.cancelled() and task.exception() is None:
                    done.append(task.result())
                else:
                    cut.append(spec)
        else:  # cancelled before its evaluators had tasks (in place: at a retry's back-off)
            done = list(job.finished)
            cut = [*job.specs, *job.trace_specs][len(done) :]
        self.mark_cut(job, done, cut)
    except Exception:
        log_internal_error("forwarding a span whose evaluation was cut short")


def mark_cut(self: JobRunner, job: Job, done: list[EvaluationResult], cut: list[EvaluatorSpec]) -> None:
    """Mark each evaluation in ``cut`` "not evaluated" (reason ``shutdown``) wherever its result would have gone.

    That is on the span, in ``stats()``, and in the score sinks (see ``SinkWorker.not_evaluated``). The span goes downstream enriched with ``done`` and the marks; one that went already (held past its
    deadline, or the root of a trace-level job) gets them as child ``evaluation {name}`` spans instead.
    """
    if job.abandoned:  # shutdown took it over (take_over): it emitted and marked everything
        return
    emit_cut(self, job, done, cut)


def emit_cut(
    self: JobRunner,
    job: Job,
    done: list[EvaluationResult],
    cut: list[EvaluatorSpec],
    owned: bool | None = None,
    sent: Sent | None = None,
    bulk: Bulk | None = None,
) -> None:
    """:func:`mark_cut`'s marks and emission.

    ``owned`` (shutdown's take-over): the caller popped ``job`` from the live set already, and this is whether
    its span had gone downstream, read before that pop. It is never re-read from ``job.forwarded`` here: the loop
    resuming meanwhile must not change what shutdown emits (else the application's span could be neither
    forwarded nor counted). ``sent`` records what was built and forwarded here, so a caller whose marking raised
    knows what went out. Not owned, the job's last emission is claimed (popped from the live set) before anything
    is marked: when shutdown took the job over meanwhile, it marks and emits everything and this marks nothing
    (never twice). What goes out is built before that claim: when building fails, nothing is claimed and
    ``JobRunner.run``'s ``finally`` still forwards the span as is. With ``bulk`` (shutdown's take-over past its
    deadline), the marks are the shared ones and the counts and sink records are left to the caller, in ``bulk``.
    """
    if bulk is None:
        marks = [skipped_result(spec.evaluator, semconv.SKIP_SHUTDOWN) for spec in cut]
    else:
        marks = [bulk.mark(spec) for spec in cut]
    provenance = self.ctx.options.evaluation_provenance
    forwarded = job.forwarded if owned is None else owned
    if not forwarded:
        out = [enriched_copy(job.span, done + marks + _skipped_results(job), provenance=provenance)]
    else:  # none of them went out yet: results follow the held span (or the trace's root) all at once
        revision = job.revision if job.deferred else None
        built = [evaluation_span(job.span, result, provenance=provenance, revision=revision) for result in done + marks]
        out = [child for child in built if child is not None]
    if sent is not None:
        sent.planned = len(out)
    if owned is None and not self._claim(job):  # as _forward_once(): the claim first
        return  # shutdown took this job over: it marked and emitted everything (``forwarded`` left alone)
    job.forwarded = True
    try:
        _record_cut(self, job, cut, bulk)
    finally:  # claimed: it goes out whatever happened above
        for span in out:
            self.ctx.forward(span)
            if sent is not None:
                sent.forwarded += 1
            if forwarded:
                self.ctx.stats.incr("evaluation_spans")


def _record_cut(self: JobRunner, job: Job, cut: list[EvaluatorSpec], bulk: Bulk | None) -> None:
    """Count the marks in ``stats()`` and record them in every sink: now, or (``bulk``) collected for the caller."""
    if bulk is None:
        for spec in cut:
            self.ctx.stats.not_evaluated(semconv.SKIP_SHUTDOWN, spec.evaluator.name)
        if cut:
            self._sink_not_evaluated(job, cut)
        return
    for spec in cut:
        bulk.counted[spec.evaluator.name] = bulk.counted.get(spec.evaluator.name, 0) + 1
    if self.ctx.sinks:
        bulk.records += not_evaluated_records(job, cut)


def take_over(self: JobRunner, job: Job, forwarded: bool, sent: Sent | None = None, bulk: Bulk | None = None) -> int:
    """Shutdown took ``job`` over from a stalled loop: its last spans go from here, as for a job cut short.

    ``abandon_unfinished`` popped the job from the live set (so the job forwards nothing itself) and set
    ``abandoned`` (so it publishes and marks nothing more); ``forwarded`` is whether its span went downstream
    already (read before that pop). The results the job claimed (see ``_job_publish.claim``: it publishes
    them) are kept; every other evaluation is marked "not evaluated" (reason ``shutdown``) on
    the span, in ``stats()`` and in the sinks, exactly as :func:`mark_cut` does. The application's span goes
    downstream enriched with them (or, when it went already, they follow as child ``evaluation {name}`` spans);
    ``sent`` records what went out (see :func:`emit_cut`); with ``bulk``, the marks are shared and the counts and
    sink records collected there (see :class:`Bulk`).

    Returns:
        The number of evaluations marked ``shutdown``.
    """
    done, cut = split_taken(job)
    emit_cut(self, job, done, cut, owned=forwarded, sent=sent, bulk=bulk)
    return len(cut)


def split_taken(job: Job) -> tuple[list[EvaluationResult], list[EvaluatorSpec]]:
    """A taken-over job's results to keep (claimed by the job) and the evaluations it never finished.

    Read after ``abandoned`` was set under the claim's lock: ``job.published`` no longer changes (see
    ``_job_publish.claim``).
    """
    results = {id(spec): result for spec, result in job.published}
    specs = [*job.specs, *job.trace_specs]
    done = [results[id(spec)] for spec in specs if id(spec) in results]
    return done, [spec for spec in specs if id(spec) not in results]


def sink_not_evaluated(self: JobRunner, job: Job, cut: list[EvaluatorSpec]) -> None:
    """Record each cut-short evaluation in every score sink (its file, or its dead-letter file)."""
    if not self.ctx.sinks:
        return
    records = not_evaluated_records(job, cut)
    if records:
        write_not_evaluated(self.ctx.sinks, self.ctx.stats, records)


def write_not_evaluated(sinks: Sequence[SinkWorker], stats: PipelineStats, records: list[NotEvaluated]) -> None:
    """Write ``records`` to every score sink, each sink on its own; never raises.

    A sink whose write raises (a bug of ours: ``SinkWorker.not_evaluated`` catches its file's failures) is
    counted in ``stats()["internal_errors"]`` and logged; the sinks after it still get every record. Its records
    are not counted elsewhere (the sink's ``not_evaluated`` counter stays short of them; the marks themselves are
    counted in ``not_evaluated_by_reason``), as when that sink's file cannot be written.
    """
    for worker in sinks:
        try:
            worker.not_evaluated(records)
        except Exception:
            stats.incr("internal_errors")
            log_internal_error(f"recording evaluations not run for score sink {worker.sink.name}")


def not_evaluated_records(job: Job, cut: list[EvaluatorSpec]) -> list[NotEvaluated]:
    """The sink records of ``job``'s cut-short evaluations (none for a span without a context)."""
    context = job.span.context
    if context is None:
        return []
    trace_hex = format(context.trace_id, "032x")
    span_hex = format(context.span_id, "016x")
    return [
        NotEvaluated(
            trace_id=trace_hex,
            observation_id=None if spec.trace_level else span_hex,
            span_id=span_hex,
            evaluator=spec.evaluator.name,
            evaluator_version=getattr(spec.evaluator, "version", None),
            reason=semconv.SKIP_SHUTDOWN,
        )
        for spec in cut
    ]
