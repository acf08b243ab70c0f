"""Trace completion and sessions for ``EvaluationSpanProcessor``: trace-level and session-scope evaluation.

A trace root's end hands the trace to the completion buffer; the timer (``tick``) submits the traces that
completed, counts those that cannot be, and judges the sessions that are due (``end_session`` requests
included). Each function is a method of :class:`~evaltrace.evaluation.processor.EvaluationSpanProcessor`
(assigned in its class body).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv
from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation._jobs import Job
from evaltrace.evaluation._session_jobs import SessionJob
from evaltrace.evaluation._trace_session import drawn_at_join, sampled_in, session_of, trace_session
from evaltrace.evaluation.completion import CompletionBuffer, OpenTrace
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.sessions import DueSession, SessionBuffer
from evaltrace.mapping.conventions import span_kind

if TYPE_CHECKING:
    from evaltrace.evaluation.processor import EvaluationSpanProcessor


def _first_attribute(spans: Sequence[ReadableSpan], root: ReadableSpan, keys: Sequence[str]) -> str | None:
    """The first of ``keys`` set on the root, else on any span of the trace (a foreign convention may put it lower)."""
    for span in (root, *spans):
        attributes = span.attributes or {}
        for key in keys:
            value = attributes.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def end_session(self: EvaluationSpanProcessor, session_id: str) -> None:
    """Judge ``session_id`` once its traces are in (see :func:`evaltrace.end_session`).

    Only recorded here: the timer applies it once no trace of the session still runs (called inside the last
    turn, that turn's root has not ended yet) and the traces that ended are in, so the session is judged once,
    with every turn. A turn that never ends is waited for at most ``trace_max_wait_s``.
    """
    if self._sessions is None or self._shutdown:
        return
    with self._cond:
        self._ending.setdefault(session_id, time.monotonic() + self.options.trace_max_wait_s)
    self._watch()


def session_superseded(self: EvaluationSpanProcessor, session_id: str, revision: int) -> bool:
    sessions = self._sessions
    return sessions is not None and not sessions.is_latest(session_id, revision)


def superseded(self: EvaluationSpanProcessor, root: ReadableSpan, revision: int) -> bool:
    """Whether a newer evaluation revision of ``root``'s trace was handed out (the loop thread asks)."""
    completion = self._completion
    if completion is None or root.context is None:
        return False
    return not completion.is_latest(root.context.trace_id, revision)


def split_sessions(self: EvaluationSpanProcessor, sessions: SessionBuffer, job: Job) -> None:
    """Move a completed trace's session-scope evaluators to the job's session part, announced to the buffer.

    Sampling by session is decided here, by the session the trace joins: the one draw that counts, so a session
    is taken or left whole (a draw at the root's end, by the session found then, is the same one; an evaluator
    whose trace's session was not known then was admitted for this draw, see ``drawn_at_join``). A re-evaluation
    finds the same session (spans are only added) and draws the same. A trace carrying no session id has no
    session to join: drawn by trace id, as at the root's end, and counted (``sessions.without_session``).
    """
    session_specs = [spec for spec in job.trace_specs if spec.scope == "session"]
    if not session_specs:
        return
    job.trace_specs = [spec for spec in job.trace_specs if spec.scope != "session"]
    spans = job.spans[: job.span_count]
    session_id = _first_attribute(spans, job.span, semconv.SESSION_ID_KEYS)
    session_specs = self._drawn_by_session(session_specs, job, session_id)
    if not session_specs:
        return
    if session_id is None:
        sessions.stats.without_session += 1
        return
    job.session_specs, job.session_id = session_specs, session_id
    job.user_id = _first_attribute(spans, job.span, semconv.USER_ID_KEYS)
    sessions.expect(session_id)


def drawn_by_session(
    self: EvaluationSpanProcessor, specs: list[EvaluatorSpec], job: Job, session_id: str | None
) -> list[EvaluatorSpec]:
    """The session-scope ``specs`` that ``session_id`` (None: the trace id) samples in; the others are counted.

    A custom ``sampler`` decided at the root's end already: it is not asked twice.
    """
    trace_id = job.span.context.trace_id if job.span.context is not None else 0
    attributes = job.span.attributes or {}
    chosen = []
    for spec in specs:
        if spec.sampler is not None or sampled_in(spec, attributes, trace_id, session_id):
            chosen.append(spec)
        else:
            self._stats.incr("sampled_out")
            self._stats.not_evaluated(semconv.SKIP_SAMPLED_OUT, spec.evaluator.name)
    return chosen


def submit_session(self: EvaluationSpanProcessor, due: DueSession) -> None:
    """Hand a due session to the engine (rate limits and budgets taken now, per judgement).

    A session whose conversation could not be built (a turn's field failed to map) is not evaluated by any of
    its evaluators (``mapping_failed``): counted as when a turn's whole mapping fails, never judged from a part.
    """
    if due.conversation is None:
        for spec in due.specs:
            self._stats.not_evaluated(semconv.SKIP_MAPPING_FAILED, spec.evaluator.name)
        return
    limits = self._limits if self._limits.active else None
    specs: list[EvaluatorSpec] = []
    skipped: list[tuple[EvaluatorSpec, str]] = []
    for spec in due.specs:
        reason = self._admit(limits, spec.evaluator.name) if limits is not None else None
        if reason is None:
            specs.append(spec)
        else:
            self._stats.not_evaluated(reason, spec.evaluator.name)
            skipped.append((spec, reason))
    if due.revision > 1:
        self._stats.incr("reevaluations")
    job = SessionJob(due.conversation, specs, due.revision, skipped)
    with self._cond:
        admitted = self._pending < self.options.max_queue_size
        if admitted:
            self._pending += 1
    if not admitted:
        for spec in specs:
            self._stats.not_evaluated(semconv.SKIP_QUEUE_FULL, spec.evaluator.name)
        self._session_loss.loss(1, f"{self.options.max_queue_size} evaluations already queued")
        return
    self._session_loss.ok()
    try:
        self._engine.submit(job)
    except Exception:
        # Never queued (e.g. its threads cannot start): the slot goes back, or every later flush would wait
        # for it, and its evaluators are counted, as a full evaluation process counts them. Re-raised: logged
        # once as an internal error by _judge_sessions, which goes on with the rest of the batch.
        self._release_slot()
        for spec in specs:
            self._stats.not_evaluated(semconv.SKIP_ENGINE_UNAVAILABLE, spec.evaluator.name)
        raise
    self._stats.incr("enqueued")


def offer_completion(
    self: EvaluationSpanProcessor, completion: CompletionBuffer, span: ReadableSpan, attributes: Any, buffer_all: bool
) -> None:
    marker = attributes.get(semconv.EVALTRACE_TRACE_END) is True
    if completion.add(span, create=buffer_all, marker=marker):
        self._watch()


def at_trace_root(
    self: EvaluationSpanProcessor,
    span: ReadableSpan,
    attributes: Any,
    kind: Any,
    skipped: list[tuple[EvaluatorSpec, str]],
) -> tuple[list[EvaluatorSpec], OpenTrace | None]:
    """The trace's root ended: the trace-level evaluators to run on the root's job now, and the trace.

    Both empty when the trace is not complete yet (its evaluation is deferred to the completion timer).
    """
    assert self._completion is not None  # only called with trace-level evaluators
    closed = self._completion.closed(span)
    if closed is not None:
        # Given up (counted trace_incomplete then), evaluated already, or a re-sent root: judging it now would
        # judge a part of the trace as the whole, or count it twice.
        if closed == "done":  # another root of the trace (a service called again) past the late window
            for spec in self._trace_specs:
                if spec.matches(span.name, attributes, kind):
                    self._stats.not_evaluated(semconv.SKIP_LATE_AFTER_WINDOW, spec.evaluator.name)
        return [], None
    session = None
    if self._session_sampling and session_of(attributes) is None and span.context is not None:
        # Sampled by session, the root carrying none: the trace's session may be on the spans under it.
        entry = self._completion.open_trace(span.context.trace_id)
        session = trace_session(entry, span) if entry is not None else None
    trace_specs = self._matching(self._trace_specs, span, attributes, kind, skipped, session)
    marker = attributes.get(semconv.EVALTRACE_TRACE_END) is True
    complete = self._root_ended(self._completion, span, trace_specs, marker)
    return (trace_specs, complete) if complete is not None else ([], None)


def root_ended(
    self: EvaluationSpanProcessor,
    completion: CompletionBuffer,
    root: ReadableSpan,
    specs: list[EvaluatorSpec],
    marker: bool,
) -> OpenTrace | None:
    """Hand the trace's root to the completion buffer; the trace when it is complete now, else None."""
    if not specs:
        # Forgets the trace, or (another root's evaluation pending) adds this root to it like any span.
        if completion.discard(root, marker=marker):
            self._watch()
        return None
    outcome, complete = completion.root_ended(root, specs, marker=marker)
    if outcome == "waiting":  # export sampling was told by the buffer, before the root is forwarded
        self._watch()
    return complete


def watch(self: EvaluationSpanProcessor) -> None:
    if self._timer is not None:
        self._timer.poke()


def tick(self: EvaluationSpanProcessor) -> bool:
    """Timer thread: submit the traces that completed, count those that cannot; True while any is open."""
    completion = self._completion
    if completion is None:
        return False
    sessions = self._sessions
    try:
        ending = self._end_sessions(completion)
        self._settle(*completion.collect())
        if ending and sessions is not None:
            self._apply_ending(completion, sessions, ending)
    except Exception:
        self._stats.incr("internal_errors")
        log_internal_error("evaluating completed traces")
    if sessions is not None:
        self._judge_sessions(sessions)
    gate = self._gate
    if gate is not None:
        gate.expire()  # a trace parked past max_age_s goes out in full even when nothing else happens
    return (
        len(completion) > 0
        or completion.tombstone_count() > 0
        or (gate is not None and len(gate) > 0)
        or (sessions is not None and sessions.waiting())
        or bool(self._ending)
    )


def end_sessions(self: EvaluationSpanProcessor, completion: CompletionBuffer) -> dict[str, float]:
    """end_session() waits: the session's traces whose root ended complete now, without their quiet period."""
    if not self._ending:
        return {}
    with self._cond:
        ending = dict(self._ending)
    completion.ready_where(lambda entry: trace_session(entry) in ending)
    return ending


def apply_ending(
    self: EvaluationSpanProcessor, completion: CompletionBuffer, sessions: SessionBuffer, ending: dict[str, float]
) -> None:
    """Hand each end_session() request to the session buffer once no trace of its session still runs.

    Called after the traces made due above were submitted (announced to their sessions): the session is then
    judged as soon as they are mapped. A turn still running keeps the request waiting (until its give-up time).
    """
    now = time.monotonic()
    with self._cond:
        if self._roots_ending > 0 and now < min(ending.values()):  # a root on its way to its session: next tick
            return
    running = {
        session_of(root.attributes or {}) if entry is None else trace_session(entry, root)
        for root, entry in completion.running()
    }
    for session_id, give_up in ending.items():
        if session_id in running and now < give_up:
            continue
        sessions.end(session_id)
        with self._cond:
            if self._ending.get(session_id) == give_up:
                del self._ending[session_id]


def judge_sessions(self: EvaluationSpanProcessor, sessions: SessionBuffer, *, drain: bool = False) -> None:
    try:
        batch = sessions.collect(drain=drain)
    except Exception:
        self._stats.incr("internal_errors")
        log_internal_error("judging sessions")
        return
    for due in batch:  # one session's failure never takes the rest of the batch (already handed out) with it
        try:
            self._submit_session(due)
        except Exception:
            self._stats.incr("internal_errors")
            log_internal_error("judging sessions")


def settle(self: EvaluationSpanProcessor, complete: list[OpenTrace], incomplete: list[OpenTrace]) -> None:
    for entry in incomplete:
        self._settle_one(entry, complete=False)
    for entry in complete:
        self._settle_one(entry, complete=True)


def settle_one(self: EvaluationSpanProcessor, entry: OpenTrace, *, complete: bool) -> None:
    """Submit or count one trace; an error is counted and ends this trace's sampling wait, no other trace's."""
    try:
        if complete:
            self._submit_trace(entry)
        else:
            self._count_incomplete(entry)
            self._gate_done(entry)
    except Exception:
        self._stats.incr("internal_errors")
        log_internal_error("evaluating a completed trace")
        self._gate_done(entry)


def count_incomplete(self: EvaluationSpanProcessor, entry: OpenTrace) -> None:
    """Count ``trace_incomplete`` for the trace-level evaluators that would have run on the given-up trace.

    Its root ended: those admitted then (a session-scope one left to the draw at the join is drawn now, by the
    session its spans give: ``sampled_out`` when drawn out). Else they are decided as at the root's end on what is
    known now: the live root in process (name and attributes as they are now) for the filters, the trace id for
    rate sampling (``sampled_out``, ``filtered`` as usual); in the worker, without the root, a filter cannot be
    decided and its evaluator is counted as possibly applying.
    """
    if entry.specs:
        ended: Any = (entry.root.attributes or {}) if entry.root is not None else {}
        for spec in entry.specs:
            reason = semconv.SKIP_TRACE_INCOMPLETE
            # Admitted at the root's end for the draw by the session the trace joins (drawn_at_join): never joining
            # one now, that draw is made here, by the session its spans give, as split_sessions would have made it.
            if drawn_at_join(spec, ended, None) and not sampled_in(spec, ended, entry.trace_id, trace_session(entry)):
                self._stats.incr("sampled_out")
                reason = semconv.SKIP_SAMPLED_OUT
            self._stats.not_evaluated(reason, spec.evaluator.name)
        return
    root = entry.started
    attributes = dict(root.attributes or {}) if root is not None else {}  # a snapshot: the root still runs
    kind = span_kind(attributes) if root is not None else None
    for spec in self._trace_specs:
        reason = semconv.SKIP_TRACE_INCOMPLETE
        if root is not None and not spec.matches(root.name, attributes, kind):
            if spec.predicate is None or not spec.may_match(root.name, kind):
                continue  # its name or kind filter rules the root out: not an evaluation that could have run
            reason = semconv.SKIP_FILTERED
        elif (root is not None or spec.sampler is None) and not sampled_in(
            spec, attributes, entry.trace_id, trace_session(entry)
        ):
            self._stats.incr("sampled_out")
            reason = semconv.SKIP_SAMPLED_OUT
        self._stats.not_evaluated(reason, spec.evaluator.name)


def gate_done(self: EvaluationSpanProcessor, entry: OpenTrace) -> None:
    """A deferred evaluation export sampling waits for will not run: it may decide without it (once)."""
    if self._gate is not None and entry.awaited:
        entry.awaited = False
        self._gate.job_finished(entry.trace_id)


def submit_trace(self: EvaluationSpanProcessor, entry: OpenTrace) -> None:
    root = entry.root
    if root is None:
        return
    skipped: list[tuple[EvaluatorSpec, str]] = []
    if entry.revision == 1:
        specs = list(entry.specs)
    else:  # a re-evaluation is another judge call: it takes its rate-limit token and budget again
        self._stats.incr("reevaluations")
        # By the session when known: a turn drawn out makes no job. split_sessions draws again, the same way (the
        # session a trace's spans give only goes from none to one), and draws the turns whose session is unknown.
        specs = self._admitted(entry.specs, root.attributes or {}, entry.trace_id, skipped, trace_session(entry))
    if not specs:
        self._gate_done(entry)
        return
    job = Job(
        root,
        [],
        specs,
        entry.spans,
        len(entry.spans),
        admitted_at=time.monotonic(),
        deferred=True,
        revision=entry.revision,
        gate=entry.awaited,
        forwarded=True,  # the root went downstream when it ended
    )
    if self._shutdown and self._timer is not None and self._timer.is_current():
        # The timer's tick raced shutdown's drain: the engine may be stopping; never queued to it. Each
        # evaluation is counted and marked "not evaluated" (shutdown) like one the deadline cut short. A
        # session-scope evaluator judges no trace: counted only, never a mark on this trace's root.
        with self._slot_lock:  # never admitted, so not live yet: its child spans' emission is claimed from here
            self._live[id(job)] = job
        try:
            for spec in specs:
                if spec.scope == "session":
                    self._stats.not_evaluated(semconv.SKIP_SHUTDOWN, spec.evaluator.name)
            self._runner.mark_cut(job, [], [spec for spec in specs if spec.scope != "session"])
        except Exception:
            log_internal_error("marking the evaluations of a trace not evaluated at shutdown")
        self._gate_done(entry)
        return
    try:
        submitted = self._submit(job)
    except BaseException:  # the user's Ctrl-C, passed on: the trace's wait is released as when refused
        self._gate_done(entry)
        raise
    if not submitted:
        self._gate_done(entry)
