"""Admission and planning of an ended span, on the application thread (``EvaluationSpanProcessor.on_end``).

Which evaluators apply to the span (global matches, decorator-attached ones), which run now (sampling, then
the rate limits and budgets), the span list the job reads, and the hand-off to the engine within
``max_queue_size``. Each function is a method of :class:`~evaltrace.evaluation.processor.EvaluationSpanProcessor`
(assigned in its class body); it runs on every ended span, so it stays O(1).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from time import monotonic
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan, Span

from evaltrace._internal import semconv
from evaltrace._internal.errors import ErrorEpisode, log_internal_error
from evaltrace._internal.evaluator_registry import resolve_evaluators
from evaltrace.evaluation._job_types import new_job
from evaltrace.evaluation._jobs import Job
from evaltrace.evaluation._trace_session import drawn_at_join, sampled_in
from evaltrace.evaluation.completion import OpenTrace
from evaltrace.evaluation.evaluator import EvaluatorSpec, as_spec
from evaltrace.evaluation.limits import LimitGate
from evaltrace.evaluation.trace_sampling import trace_fraction
from evaltrace.mapping.conventions import span_kind

if TYPE_CHECKING:
    from evaltrace.evaluation.processor import EvaluationSpanProcessor

logger = logging.getLogger("evaltrace.evaluation")


def is_root(span: ReadableSpan) -> bool:
    return span.parent is None or span.parent.is_remote


def _new_job(
    span: ReadableSpan,
    specs: list[EvaluatorSpec],
    trace_specs: list[EvaluatorSpec],
    spans: list[ReadableSpan],
    count: int,
    skipped: list[tuple[EvaluatorSpec, str]],
    complete: OpenTrace | None,
) -> Job:
    """The job admitted at ``span``'s end (``complete``: the trace it completed, whose revision it evaluates)."""
    # Job's first seven fields in order, positionally: as keywords they cost ~2k instructions more per span.
    job = new_job(span, specs, trace_specs, spans, count, monotonic(), skipped)
    if complete is not None:
        job.revision = complete.revision
        job.gate_held = complete.awaited  # the wait sampling was told of goes to this job
    return job


def may_evaluate(self: EvaluationSpanProcessor, span: Span, attributes: Any = None) -> bool:
    """At span start: could an evaluator need this span's subtree when it ends?

    ``attributes``: the span's attributes, read already (``plain_attrs``), else read here.
    """
    if attributes is None:
        attributes = span.attributes or {}
    if attributes.get(semconv.EVALTRACE_EVALUATORS_REF):
        return True
    if self._trace_specs and is_root(span):
        return True
    if self._rate_only and span.context is not None and not self._in_sample(span.context.trace_id):
        return False  # no global evaluator will run in this trace: its spans need no buffering
    kind = span_kind(attributes)
    return any(spec.may_match(span.name, kind) for spec in self._span_specs)


def in_sample(self: EvaluationSpanProcessor, trace_id: int) -> bool:
    """Whether any global span-level evaluator samples ``trace_id`` in (only with rate sampling).

    Deterministic by trace id, so on_start and on_end agree; the last answer is memoised, since a span's
    start and end (and its trace's other spans) ask about the same trace.
    """
    memo = self._sample_memo
    if memo[0] == trace_id:
        return memo[1]
    sampled = any(
        spec.sample_rate >= 1.0 or trace_fraction(trace_id, spec.sample_group) < spec.sample_rate
        for spec in self._span_specs
    )
    self._sample_memo = (trace_id, sampled)  # one tuple store: atomic under the GIL
    return sampled


def passes_by(self: EvaluationSpanProcessor, span: ReadableSpan, attributes: Any, trace_id: int) -> bool:
    """Decide without matching or a job when no evaluator can run on ``span`` (then True, handled).

    That is: only decorator-attached evaluators exist and none is on this span, or every global one sampled
    this trace out (by trace id, as on_start did).
    """
    if not self._saw_start or self._completion is not None or attributes.get(semconv.EVALTRACE_EVALUATORS_REF):
        return False
    if self._global and not (self._rate_only and not self._in_sample(trace_id)):
        return False
    self._pass_by(span, attributes, trace_id, sampled_out=self._global)
    return True


def pass_by(
    self: EvaluationSpanProcessor, span: ReadableSpan, attributes: Any, trace_id: int, sampled_out: bool
) -> None:
    """Plan nothing for ``span`` (no evaluator runs on it); buffer it for a tracked ancestor, count skips."""
    if self._buffer.is_tracked(trace_id):
        self._buffer.add(span, create=False)
        if is_root(span):
            self._buffer.pop(trace_id)
    if not sampled_out:
        return
    kind = span_kind(attributes)
    for spec, tick in zip(self._span_specs, self._sampled_out_ticks, strict=True):
        if spec.matches(span.name, attributes, kind):
            tick()  # stats()["sampled_out"] and not_evaluated_by_reason, without a lock
        elif spec.predicate is not None and spec.may_match(span.name, kind):
            self._stats.not_evaluated(semconv.SKIP_FILTERED, spec.evaluator.name)


def is_trace_root(self: EvaluationSpanProcessor, span: ReadableSpan) -> bool:
    """The span trace-level evaluation waits for: the local root in process, the true root in the worker."""
    # Spans fed without on_start come from OTLP (evaltrace worker): a span with a remote parent is a
    # service's entry span there, and the trace is whole only with its parentless root.
    return is_root(span) if self._saw_start else span.parent is None


def submit(self: EvaluationSpanProcessor, job: Job) -> bool:
    """Admit ``job`` within ``max_queue_size`` and hand it to the engine.

    False when it is not queued: the queue is full (counted ``dropped``), the engine refused it, or nothing is
    left to run in it (below); the caller then forwards its span, as for any span no evaluator runs on.
    """
    if self._sessions is not None and job.trace_specs:
        try:  # may run on the application's thread (a root's end): our failure never reaches it
            self._split_sessions(self._sessions, job)
        except Exception:
            self._stats.incr("internal_errors")
            log_internal_error("finding the session of a completed trace")
            job.trace_specs = [spec for spec in job.trace_specs if spec.scope != "session"]
            job.session_specs, job.session_id = [], None
        if not (job.specs or job.trace_specs or job.session_specs):
            # Its only evaluators were session-scope ones drawn out (counted sampled_out there), or a trace with no
            # session to join: a turn never to be judged takes no queue slot and is never counted dropped. A wait
            # export sampling holds for a root's own job (gate_held) ends here, before the caller forwards the
            # span; a deferred job's is ended by submit_trace on this False.
            self._never_runs(job, semconv.SKIP_SAMPLED_OUT)  # no evaluator left to count: the wait only
            return False
    with self._slot_lock:
        admitted = self._pending < self.options.max_queue_size
        if admitted:
            self._pending += 1
            self._live[id(job)] = job  # until its last span goes downstream (or shutdown counts it, see _jobs)
    if not admitted:
        self._stats.incr("dropped")
        self._metrics.record_dropped()
        self._overflow.loss(1, f"{self.options.max_queue_size} spans already queued; spans go out unevaluated")
        self._never_runs(job, semconv.SKIP_QUEUE_FULL)
        return False
    held = job.deferred or job.gate_held  # noted already: at its root's end, or by the completion buffer
    gate = self._gate if job.gate and not held else None
    # Read only for the gate (two property reads of the span: every admitted span without sampling skips them).
    trace_id = (job.span.context.trace_id if job.span.context is not None else None) if gate is not None else None
    noted = False
    # Everything between the admission above and the engine taking the job is in here: a failure must give the
    # slot back and count the job (else every later flush waits for it), and never reach the application.
    try:
        if gate is not None and trace_id is not None:
            gate.job_started(trace_id)
            noted = True
        self._engine.submit(job)
    except BaseException as exc:  # e.g. its threads cannot start: the job was never queued, no _job_done comes
        if noted and gate is not None and trace_id is not None:
            gate.job_finished(trace_id)  # the wait it just noted: the job will never finish it
        self._live.pop(id(job), None)  # its span is forwarded by the caller, unevaluated
        self._release_slot()
        self._never_runs(job, semconv.SKIP_ENGINE_UNAVAILABLE)
        if not isinstance(exc, Exception):  # the user's Ctrl-C (in a thread's start): theirs, passed on unchanged
            raise
        self._stats.incr("internal_errors")
        self._handoff_failing.failed()
        self._handoff_failed = True
        return False
    if self._handoff_failed:  # a plain flag: the usual span pays one attribute test, not a call
        self._handoff_failed = False
        self._handoff_failing.ok()
    self._stats.enqueued()
    return True


def never_runs(self: EvaluationSpanProcessor, job: Job, reason: str) -> None:
    """Count each of ``job``'s evaluators not evaluated (``reason``) and release the waits it held."""
    for spec in (*job.specs, *job.trace_specs, *job.session_specs):
        self._stats.not_evaluated(reason, spec.evaluator.name)
    if self._gate is not None and job.gate_held and job.span.context is not None:
        self._gate.job_finished(job.span.context.trace_id)  # the trace-level wait it held: will not run
    if self._sessions is not None and job.session_specs and job.session_id is not None:
        self._sessions.settle(job.session_id)


def release_slot(self: EvaluationSpanProcessor) -> None:
    """Give back a job's queue slot: it finished, or the engine never took it."""
    with self._slot_lock:  # the condition's lock: notify_all below is called holding it
        self._pending -= 1
        if self._pending == 0:
            # An overflow episode ends when the queue has emptied, not at each freed slot; its line is logged
            # before flush() waiters wake, so a flush returns with the episode's end already logged.
            self._overflow.ok()
            self._cond.notify_all()


# The SDK ReadableSpan fields plan() reads directly (what its context, parent and attributes properties return).
_READ_FIELDS = frozenset(("_context", "_parent", "_attributes"))
_NO_STATE: dict[str, Any] = {}


def plan(self: EvaluationSpanProcessor, span: ReadableSpan) -> Job | None:  # noqa: C901  (one frame per span, on purpose)
    # An exact SDK ReadableSpan (what on_end is given) is read from its fields: the same values as its
    # properties give (the attributes as the same read-only view), without their frames. This runs in every
    # span's end on the application thread, as do the inline steps below (each the call it replaces, in the usual
    # case: one Python frame fewer each).
    state = span.__dict__ if type(span) is ReadableSpan else _NO_STATE  # a stand-in may have no __dict__
    if _READ_FIELDS <= state.keys():
        context, parent, raw = state["_context"], state["_parent"], state["_attributes"]
        # plan's own reads below go to the plain dict the SDK's BoundedAttributes wraps (``copy()`` returns a copy of
        # it, ``__getitem__`` reads it): through the view each read ran two Python frames (Mapping.get and
        # __getitem__) and a missing key raised and caught a KeyError. What other code is handed (``attributes``)
        # is the same view as before. An older SDK's OrderedDict, or anything else, is read through the view.
        fields = raw.__dict__ if type(raw) is BoundedAttributes else _NO_STATE
        plain = fields.get("_dict", raw)
        if type(plain) is dict:
            attributes: Any = MappingProxyType(raw) if plain else {}  # ``span.attributes or {}``
            read: Any = plain
        else:
            attributes = read = MappingProxyType(raw) if raw else {}
    else:
        context, parent, attributes = span.context, span.parent, span.attributes or {}
        read = attributes
    if context is None or self._shutdown:
        return None
    if self._suppressed and context.span_id in self._suppressed:
        self._suppressed.discard(context.span_id)
        return None
    trace_id = context.trace_id
    ref = read.get(semconv.EVALTRACE_EVALUATORS_REF)
    if not ref and self._passes_by(span, attributes, trace_id):  # a span with a ref never passes by
        return None
    kind = read.get(semconv.EVALTRACE_SPAN_KIND)
    if not isinstance(kind, str):  # span_kind()'s first step, inline
        kind = span_kind(attributes)  # derived from a foreign convention
    # Our own evaluation spans, and a judge call's trace (fed without on_start, in the worker): never evaluated.
    if kind == semconv.KIND_EVALUATION or read.get(semconv.EVALTRACE_JUDGE):
        return None
    # Spans that reach us without on_start (an OTLP receiver feeding on_end) were never tracked: buffer
    # every trace then, since which ancestor will need them is unknown until it ends.
    buffer_all = self.options.buffer_all_traces or not self._saw_start
    tracked = buffer_all or self._buffer.tracking(trace_id)  # is_tracked(), without its frame
    root = parent is None or parent.is_remote  # is_root(span)
    taken: list[ReadableSpan] | None = None  # a local root's trace, released already (no trace-level evaluator)
    if tracked:
        if root and self._completion is None:
            # The span itself too (a root's job reads it from the list), and the trace released at once: what
            # add() here and _job_spans' pop() below did, in one locked step (every path from here pops it).
            taken = self._buffer.take(trace_id, span, create=buffer_all)
        else:
            self._buffer.add(span, create=buffer_all)  # the span itself too: a root's job reads it from the list
    # Only with trace-level evaluators: the root waits below, every other span joins its trace (O(1)).
    trace_root = self._completion is not None and self._is_trace_root(span)
    if self._completion is not None and not trace_root:
        self._offer_completion(self._completion, span, attributes, buffer_all)
    if not ref and not (root and tracked) and not trace_root and self._only_kinds is not None:
        if kind not in self._only_kinds:
            return None  # fast path: no global evaluator can match this kind and nothing else applies
    skipped: list[tuple[EvaluatorSpec, str]] = []
    specs = self._matching(self._span_specs, span, attributes, kind, skipped) if self._span_specs else []
    if isinstance(ref, str) and ref:
        unconditional = self._unconditional.get(ref)
        if unconditional is not None and not specs and not self._limits.active:
            specs.extend(unconditional)  # _admitted_attached's first answer, inline
        else:
            specs.extend(self._admitted_attached(ref, specs, attributes, trace_id, skipped))
    trace_specs: list[EvaluatorSpec] = []
    complete: OpenTrace | None = None
    if trace_root:
        trace_specs, complete = self._at_trace_root(span, attributes, kind, skipped)
    if taken is not None:
        spans, count = taken, len(taken)
    else:
        spans, count = self._job_spans(trace_id, root and tracked, tracked and bool(specs), complete)
    if not specs and not trace_specs:
        return None
    if complete is None:  # _new_job's job, inline
        return new_job(span, specs, trace_specs, spans, count, monotonic(), skipped)
    return _new_job(span, specs, trace_specs, spans, count, skipped, complete)


def job_spans(
    self: EvaluationSpanProcessor, trace_id: int, release: bool, need: bool, complete: OpenTrace | None
) -> tuple[list[ReadableSpan], int]:
    """The span list a job reads (and its length now); ``release`` ends the trace's subtree buffering."""
    if complete is not None:  # complete as the root ends: evaluated on the root's job, results on the root
        if release:
            self._buffer.pop(trace_id)
        return complete.spans, len(complete.spans)
    if release:
        spans = self._buffer.pop(trace_id)
        return spans, len(spans)
    if need:
        return self._buffer.view(trace_id)
    return [], 0


def matching(
    self: EvaluationSpanProcessor,
    specs: Sequence[EvaluatorSpec],
    span: ReadableSpan,
    attributes: Any,
    kind: Any,
    skipped: list[tuple[EvaluatorSpec, str]],
    session: str | None = None,
) -> list[EvaluatorSpec]:
    """The ``specs`` matching ``span`` that run now (``session``: the trace's, for session sampling)."""
    if not specs:
        return []
    matching = []
    for spec in specs:
        if spec.matches(span.name, attributes, kind):
            matching.append(spec)
        elif spec.predicate is not None and spec.may_match(span.name, kind):
            # Name and kind said yes, the attribute predicate no: counted, so a predicate that rejects
            # everything shows up instead of looking like an idle evaluator.
            self._stats.not_evaluated(semconv.SKIP_FILTERED, spec.evaluator.name)
    trace_id = span.context.trace_id if span.context is not None else 0
    return self._admitted(matching, attributes, trace_id, skipped, session) if matching else matching


def admitted(
    self: EvaluationSpanProcessor,
    specs: Sequence[EvaluatorSpec],
    attributes: Any,
    trace_id: int,
    skipped: list[tuple[EvaluatorSpec, str]],
    session: str | None = None,
) -> list[EvaluatorSpec]:
    """Return the ``specs`` that run now; the others are counted and appended to ``skipped`` with the reason.

    Sampling first (free and deterministic), then the rate limits and budgets (which take a token). ``session``:
    the trace's session when the caller found it (a session-scope evaluator draws by it; without one, the draw is
    left to the trace's completion, see :func:`drawn_at_join`).
    """
    chosen = []
    limits = self._limits if self._limits.active else None
    for spec in specs:
        if not sampled_in(spec, attributes, trace_id, session) and not drawn_at_join(spec, attributes, session):
            self._stats.incr("sampled_out")
            reason: str | None = semconv.SKIP_SAMPLED_OUT
        elif spec.scope == "session":  # limits are taken per session judgement (_submit_session), not per turn
            reason = None
        else:
            reason = self._admit(limits, spec.evaluator.name) if limits is not None else None
        if reason is None:
            chosen.append(spec)
        else:
            self._stats.not_evaluated(reason, spec.evaluator.name)
            skipped.append((spec, reason))
    return chosen


def admit(self: EvaluationSpanProcessor, limits: LimitGate, name: str) -> str | None:
    """``limits.admit(name)``; when the limiter itself fails, the skip reason ``limits_unavailable``.

    A limiter that raises (a ``limits_clock`` that fails, a bug of ours) refuses only the evaluation it was
    asked about, counted like any refusal: the span's or session's other evaluators are still admitted (and
    keep the tokens they took), and this one is neither run unchecked (a budget could be overspent) nor lost
    uncounted. Logged as an internal error.
    """
    try:
        reason = limits.admit(name)
    except Exception:
        self._stats.incr("internal_errors")
        episode = self._limits_failing.get(name)
        if episode is None:
            what = f"checking the rate limits and budgets of evaluator {name!r}"
            episode = self._limits_failing.setdefault(name, ErrorEpisode(what))
        episode.failed()
        return semconv.SKIP_LIMITS_UNAVAILABLE
    if self._limits_failing:  # only after a failure: the usual admission pays one truth test
        episode = self._limits_failing.get(name)
        if episode is not None:
            episode.ok()
    return reason


def admitted_attached(
    self: EvaluationSpanProcessor,
    ref: str,
    specs: list[EvaluatorSpec],
    attributes: Any,
    trace_id: int,
    skipped: list[tuple[EvaluatorSpec, str]],
) -> Sequence[EvaluatorSpec]:
    """The decorator-attached specs of ``ref`` that run now (not among the global ``specs`` chosen)."""
    unconditional = self._unconditional.get(ref)
    if unconditional is not None and not specs and not self._limits.active:
        return unconditional  # what _admitted would choose, without its calls: each is sampled in, no limit
    return self._admitted(self._attached(ref, specs), attributes, trace_id, skipped)


def attached(self: EvaluationSpanProcessor, ref: str, specs: list[EvaluatorSpec]) -> Sequence[EvaluatorSpec]:
    """The decorator-attached specs of ``ref`` not already among the global ``specs`` chosen."""
    attached = self._resolve(ref)
    if not specs:  # the usual case: no global evaluator matched, nothing to leave out
        return attached
    chosen = {id(spec.evaluator) for spec in specs}  # one evaluator attached twice runs once
    return [s for s in attached if id(s.evaluator) not in chosen]


def resolve(self: EvaluationSpanProcessor, ref: str) -> tuple[EvaluatorSpec, ...]:
    specs = self._ref_specs.get(ref)
    if specs is None:
        resolved = [as_spec(item) for item in resolve_evaluators(ref)]
        for spec in resolved:
            if spec.scope == "session":  # a decorated span is one turn: judging it as the session would be false
                logger.warning(
                    "evaltrace: evaluator %r is attached by a decorator with scope='session'; session-scope "
                    "evaluators are given to configure(evaluators=...), it is not run here",
                    spec.evaluator.name,
                )
        specs = tuple(spec for spec in resolved if spec.scope != "session")
        limited = [spec for spec in specs if spec.limits is not None]
        if limited:  # before the specs are cached: no admission of them runs without their limits
            self._limit_attached(limited)
        self._ref_specs[ref] = specs
        # _sampled always True and no limit of their own: admitted as they are while the gate is idle.
        if all(spec.sampler is None and spec.sample_rate >= 1.0 and spec.limits is None for spec in specs):
            self._unconditional[ref] = specs
    return specs


def limit_attached(self: EvaluationSpanProcessor, specs: Sequence[EvaluatorSpec]) -> None:
    """Register decorator-attached ``specs``' own limits with the gate, as ``configure()`` does a global spec's.

    Same scope key (the evaluator's name; the first registration of a name wins), so their refusals are counted
    ``rate_limited`` / ``over_budget`` and their spend charged exactly as a global evaluator's. The gate may turn
    active only now: the jobs' context is told (judge spend charged, ``max_concurrent`` slots held) and, with a
    Redis URL, the gate shares its state from here on.
    """
    gate = self._limits
    was_active = gate.active
    for spec in specs:
        gate.register(spec.evaluator.name, spec.limits)
    if was_active:
        return
    if self.options.redis_url is not None and gate.shared is None:
        try:  # imports redis, once: a failure leaves this process's own limits deciding, never the app failing
            from evaltrace.evaluation.shared_limits import SharedLimits

            gate.shared = SharedLimits(self.options.redis_url)
        except Exception:
            self._stats.incr("internal_errors")
            log_internal_error("sharing a decorator-attached evaluator's limits through Redis")
    self._runner.ctx.limits = gate
