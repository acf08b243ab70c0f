"""The state of one evaluation job (:class:`Job`, :class:`Progress`) and what every job shares (:class:`JobContext`).

Moved out of ``_jobs`` (which re-exports the three names): the data the admission side builds and the runner reads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace.evaluation._isolation import Offenders
from evaltrace.evaluation._process import ProcessEngine
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.limits import LimitGate
from evaltrace.evaluation.monitor import ProductionMonitor
from evaltrace.evaluation.options import ProcessorOptions
from evaltrace.evaluation.runner import AsyncRunner, TimedAsyncRunner
from evaltrace.evaluation.sessions import SessionBuffer
from evaltrace.evaluation.sinks.worker import SinkWorker
from evaltrace.evaluation.spend import SpendMetrics
from evaltrace.evaluation.stats import PipelineStats
from evaltrace.evaluation.telemetry import LogEventEmitter, PipelineMetrics
from evaltrace.schema import EvaluationResult, Trace


@dataclass(slots=True)  # one per evaluated span, made on the application's thread: no instance dict
class Job:
    """A span admitted for evaluation, with what to run on it.

    Attributes:
        span: The ended span.
        specs: Span-level evaluators (global matches and decorator-attached), run on the span's subtree.
        trace_specs: Trace-level evaluators (root spans only), run on the whole buffered trace.
        spans: The trace's buffered span list (shared, append-only) and its length at ``on_end``.
        admitted_at: ``time.monotonic()`` at ``on_end``; the hold deadline counts from here.
        skipped: Evaluators that applied to the span and were not run, with the skip reason (``sampled_out``,
            ``rate_limited``, ``over_budget``); they ride on the enriched copy as "not evaluated" results.
        deferred: A trace-level evaluation of a completed trace whose root was forwarded already.
        revision: The trace's evaluation revision (deferred jobs: 1, then +1 per re-evaluation).
        gate: The job counts for eval-aware export sampling's decision on its trace.
        gate_held: Sampling counts the job already: the trace-level wait the completion buffer announced goes to
            this root's job, which evaluates the trace (not noted again at submit; ended when the job is done).
        session_specs: Session-scope evaluators of a completed trace: the job maps the trace and hands it to the
            session buffer under ``session_id`` (the session is judged later, see ``sessions``).
        session_end: The trace carries the session end marker (``evaltrace.end_session()``).
        user_id: The trace's ``user.id``, when it has one.
    """

    span: ReadableSpan
    specs: list[EvaluatorSpec]
    trace_specs: list[EvaluatorSpec]
    # Empty defaults are shared immutable tuples, never appended to (each is replaced when set): four fewer lists
    # built per evaluated span.
    spans: list[ReadableSpan] = field(default_factory=list)  # always given (the buffer's list)
    span_count: int = 0
    admitted_at: float = 0.0
    skipped: Sequence[tuple[EvaluatorSpec, str]] = ()
    deferred: bool = False
    revision: int = 1
    gate: bool = True
    gate_held: bool = False
    forwarded: bool = False
    abandoned: bool = False  # shutdown took the job over (see ``abandon_unfinished``): it counted its spans
    session_specs: Sequence[EvaluatorSpec] = ()
    session_id: str | None = None
    session_end: bool = False
    user_id: str | None = None
    running: Sequence[tuple[EvaluatorSpec, asyncio.Future[EvaluationResult]]] = ()
    finished: Sequence[EvaluationResult] = ()  # results of evaluators run in place (a list once one ran)
    # The evaluations whose results the job claimed (it publishes them: stats, sinks): what shutdown keeps on the
    # span when it takes the job over (see ``_job_publish.claim`` and ``_job_cuts.take_over``).
    published: Sequence[tuple[EvaluatorSpec, EvaluationResult]] = ()


_new_object = object.__new__


def new_job(
    span: ReadableSpan,
    specs: list[EvaluatorSpec],
    trace_specs: list[EvaluatorSpec],
    spans: list[ReadableSpan],
    span_count: int,
    admitted_at: float,
    skipped: Sequence[tuple[EvaluatorSpec, str]],
) -> Job:
    """``Job(span, specs, trace_specs, spans, span_count, admitted_at, skipped)``: the same job, built cheaper.

    Made on the application thread at every evaluated span's end. The class call runs ``type.__call__``, then
    ``__init__`` through a bound call with its arguments packed in a tuple (~0.8k instructions more). Every field
    is set here, to the value the dataclass ``__init__`` gives it: a field added to :class:`Job` must be added here
    (``tests/evaluation/test_app_thread_round2.py`` compares the two over every field).
    """
    job: Job = _new_object(Job)
    job.span = span
    job.specs = specs
    job.trace_specs = trace_specs
    job.spans = spans
    job.span_count = span_count
    job.admitted_at = admitted_at
    job.skipped = skipped
    job.deferred = False
    job.revision = 1
    job.gate = True
    job.gate_held = False
    job.forwarded = False
    job.abandoned = False
    job.session_specs = ()
    job.session_id = None
    job.session_end = False
    job.user_id = None
    job.running = ()
    job.finished = ()
    job.published = ()
    return job


@dataclass
class Progress:
    """A fast-lane job handed to the loop part-way (see ``_fast_lane``).

    Attributes:
        trace: The job's Trace (mapped once, on the lane).
        results: Results of the job's first specs, published already.
        inflight: The outcome of the next spec's call, still running (a future of its output) or needing the
            loop (a future holding a retryable exception, or an awaitable the sync call returned); None: none.
        started: ``time.monotonic()`` when that call began (its timeout counts from there).
        started_at: The same as a result's start time.
    """

    trace: Trace
    results: list[EvaluationResult] = field(default_factory=list)
    inflight: Any = None
    started: float = 0.0
    started_at: dt.datetime | None = None


def new_progress(trace: Trace) -> Progress:
    """``Progress(trace)``: the same object, built without ``type.__call__`` and the dataclass ``__init__``'s frame.

    Made once per job on the fast lane. Every field is set here, in the class's field order, to the value
    ``__init__`` gives it (a new list for ``results``): a field added to :class:`Progress` must be added here
    (``tests/evaluation/test_new_progress_same.py`` compares the two over every field).
    """
    progress: Progress = _new_object(Progress)
    progress.trace = trace
    progress.results = []
    progress.inflight = None
    progress.started = 0.0
    progress.started_at = None
    return progress


@dataclass
class JobContext:
    """What jobs share: settings, outputs and bookkeeping (owned by the processor)."""

    options: ProcessorOptions
    stats: PipelineStats
    monitor: ProductionMonitor
    sinks: list[SinkWorker]
    log_events: LogEventEmitter | None
    metrics: PipelineMetrics
    forward: Callable[[ReadableSpan], None]
    pool: concurrent.futures.Executor
    async_slots: asyncio.Semaphore
    async_runner: AsyncRunner | TimedAsyncRunner | None = None
    offenders: Offenders | None = None
    limits: LimitGate | None = None
    spend: SpendMetrics | None = None
    remote: ProcessEngine | None = None
    # (root span, revision) -> a newer revision of that trace was handed out: this verdict is not published.
    superseded: Callable[[ReadableSpan, int], bool] | None = None
    sessions: SessionBuffer | None = None
    # A trace reached the session buffer: the timer must watch the session.
    on_session: Callable[[], None] | None = None
    # (session id, revision) -> a newer judgement of that session was handed out: this verdict is not published.
    session_superseded: Callable[[str, int], bool] | None = None
    # id(job) -> job, for every admitted Job whose last span (its own, or its child evaluation spans) has not gone
    # downstream yet. Whoever pops a job owns that last emission: the job itself (it forwards), or shutdown once it
    # stopped waiting for the loop (it counts the spans as dropped instead). ``dict.pop`` is atomic: exactly one wins.
    live: dict[int, Job] = field(default_factory=dict)
    # Taken (with ``live``) around a held span's early forward, so shutdown reads ``job.forwarded`` consistently.
    live_lock: Any = None
