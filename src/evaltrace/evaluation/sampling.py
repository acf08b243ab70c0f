"""Eval-aware export sampling: downstream gets the traces worth looking at, and a fraction of the rest.

A trace is *kept* when any evaluation on it failed or errored (``evaltrace.eval.failed`` or
``evaltrace.eval.errors`` on a span or an ``evaluation`` child span), when it exceeds a budget (root latency,
summed cost, summed tokens: each counted once, as the local store sums them), or by a random draw with
probability ``keep_rate``. To decide, every span of a trace is parked until the trace's local root has been forwarded and every evaluation of that trace has finished,
including a trace-level one still waiting for the trace to complete (its quiet period: the completion buffer
announces it with :meth:`ExportGate.expect` as the root ends); then the whole trace is released or discarded at
once. Spans of a trace arriving after its decision follow it (a bounded memory of decisions), with one exception:

*Late evaluations of a discarded trace.* When an evaluation starts on a trace already discarded (a re-run of
its trace-level evaluators after late spans, or a span-level evaluation of a span that ended after the
decision), what arrives from then on is parked again until it finishes: if it failed or errored, that late part
(the late spans and the evaluation spans) is forwarded and counted ``late_kept``; otherwise it is discarded
like the rest. The spans discarded before cannot be recalled: downstream then has the late part and the
failing evaluation, whose parent span is missing.

The trace's root is the span the owner's predicate names (``is_root``): the local root in process; in
``evaltrace worker`` the span without a parent, since a service's entry span (remote parent) may arrive first.

Memory bound: at most ``max_traces`` traces × ``max_spans_per_trace`` spans are parked. When a bound is hit,
or a trace is older than ``max_age_s`` (its root never ended here, or a verdict it waits for never came), that
trace is released *unsampled* (fail-open: forwarded in full) and counted, so the bound never costs data that may
show a failure. The age is checked when a trace is parked and by :meth:`ExportGate.expire` (the owner's timer
and ``force_flush``), so an idle process releases it too. Shutdown releases every parked trace.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv
from evaltrace.exporters.store_values import NO_USAGE, Usage, span_usage, trace_usage

_DECISIONS_KEPT = 8192


@dataclass(frozen=True)
class ExportSampling:
    """Settings of eval-aware export sampling.

    Attributes:
        keep_rate: Probability of keeping a trace that passed every evaluation and every budget.
        max_latency_ms: Keep traces whose root span lasted longer (None: no latency budget).
        max_cost_usd: Keep traces whose summed ``evaltrace.cost_usd`` / ``gen_ai.usage.cost`` is higher.
        max_tokens: Keep traces whose summed input + output tokens are higher.
        max_traces: Traces parked at once.
        max_spans_per_trace: Spans parked per trace.
        max_age_s: Age after which a parked trace is released in full.
    """

    keep_rate: float = 0.1
    max_latency_ms: float | None = None
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_traces: int = 1024
    max_spans_per_trace: int = 1024
    max_age_s: float = 120.0


@dataclass
class _Parked:
    created: float
    spans: list[ReadableSpan] = field(default_factory=list)
    failed: bool = False
    latency_ms: float = 0.0
    root_done: bool = False
    jobs: int = 0
    late: bool = False  # the late part of a discarded trace: kept only for a failure


@dataclass
class SamplingStats:
    """Counters of the export gate."""

    kept_traces: int = 0
    discarded_traces: int = 0
    discarded_spans: int = 0
    released_unsampled: int = 0
    late_parked: int = 0  # discarded traces parked again for a late evaluation
    late_kept: int = 0  # ... whose late evaluation failed: their late part was forwarded


def _local_root(span: ReadableSpan) -> bool:
    return span.parent is None or span.parent.is_remote


class ExportGate:
    """Park spans per trace, then release or discard each trace as a whole (see the module docstring).

    Args:
        settings: The sampling settings.
        deliver: Sends one span downstream (called without the gate's lock).
        is_root: Whether a span is its trace's root, whose end the decision waits for (default: the local root).
        clock: Monotonic seconds (injectable for tests).
        discard: Hears each span discarded (called without the gate's lock), so an owner that counts spans
            until they are exported (``evaltrace worker``) knows they never will be.
    """

    def __init__(
        self,
        settings: ExportSampling,
        deliver: Callable[[ReadableSpan], None],
        is_root: Callable[[ReadableSpan], bool] = _local_root,
        clock: Callable[[], float] = time.monotonic,
        discard: Callable[[ReadableSpan], None] | None = None,
    ) -> None:
        self.settings = settings
        self._is_root = is_root
        self._clock = clock
        self.stats = SamplingStats()
        self._deliver = deliver
        self._discard = discard
        self._parked: OrderedDict[int, _Parked] = OrderedDict()
        self._decided: OrderedDict[int, bool] = OrderedDict()
        self._spill: list[ReadableSpan] = []  # traces released by a bound, delivered once the lock is free
        self._dropped: list[ReadableSpan] = []  # discarded spans, told to ``discard`` once the lock is free
        self._lock = threading.Lock()

    def job_started(self, trace_id: int) -> None:
        """Note an evaluation job for ``trace_id``: its decision waits for the job (see the module docstring)."""
        with self._lock:
            self._note_job(trace_id)
            spill, dropped = self._take_spill(), self._take_dropped()
        self._flush(spill, dropped)

    def expect(self, trace_id: int, delta: int) -> None:
        """Note an evaluation of ``trace_id`` to come (``delta`` 1: a trace waiting for completion) or not to come.

        The completion buffer calls it under its own lock, before its timer can hand the evaluation out, so the
        decision is never taken between the root's end and the verdict. It delivers nothing (a trace it
        releases goes out with the next span offered or job finished); a wait handed out for evaluation is
        ended by :meth:`job_finished`.
        """
        with self._lock:
            if delta > 0:
                self._note_job(trace_id)
                return
            entry = self._parked.get(trace_id)
            if entry is not None:
                self._spill.extend(self._job_done(trace_id, entry))

    def job_finished(self, trace_id: int) -> None:
        """Note that a job ended (after it forwarded its spans); may release the trace."""
        with self._lock:
            entry = self._parked.get(trace_id)
            ready = [] if entry is None else self._job_done(trace_id, entry)
            ready = self._take_spill() + ready
            dropped = self._take_dropped()
        self._flush(ready, dropped)

    def offer(self, span: ReadableSpan) -> None:
        """Park ``span`` (or deliver/discard it at once when its trace is decided)."""
        trace_id = span.context.trace_id if span.context is not None else 0
        release: list[ReadableSpan] = []
        with self._lock:
            decision = self._decided.get(trace_id)
            if decision is None:
                entry = self._entry(trace_id)
                self._account(entry, span)
                entry.spans.append(span)
                if len(entry.spans) > self.settings.max_spans_per_trace:
                    release = self._release_unsampled(trace_id)
                else:
                    release = self._ready(trace_id, entry)
            release = self._take_spill() + release
            dropped = self._take_dropped()
        if decision is False:
            self.stats.discarded_spans += 1
            dropped.append(span)
        elif decision is True:
            release.append(span)
        self._flush(release, dropped)

    def expire(self) -> None:
        """Release (unsampled, counted) every trace parked longer than ``max_age_s``, and deliver what waits."""
        with self._lock:
            self._expire(self._clock())
            spans, dropped = self._take_spill(), self._take_dropped()
        self._flush(spans, dropped)

    def release_all(self) -> None:
        """Deliver every parked trace in full (shutdown: nothing is lost)."""
        with self._lock:
            spans = [span for trace_id in list(self._parked) for span in self._release_unsampled(trace_id)]
            spans = self._take_spill() + spans
            dropped = self._take_dropped()
        self._flush(spans, dropped)

    def __len__(self) -> int:
        """Return how many traces are parked now."""
        return len(self._parked)

    def parked_spans(self) -> int:
        """Return how many spans are parked now."""
        with self._lock:
            return sum(len(entry.spans) for entry in self._parked.values())

    # --- under the lock -----------------------------------------------------------------------------------

    def _note_job(self, trace_id: int) -> None:
        decision = self._decided.get(trace_id)
        if decision is True:
            return  # kept: whatever the job forwards goes downstream
        if decision is False:
            # Discarded, yet an evaluation starts: park what comes until it finishes, so a failure is not lost.
            del self._decided[trace_id]
            entry = self._entry(trace_id)
            entry.late = entry.root_done = True
            self.stats.late_parked += 1
        else:
            entry = self._entry(trace_id)
        entry.jobs += 1

    def _job_done(self, trace_id: int, entry: _Parked) -> list[ReadableSpan]:
        # Never below 0: an end heard for a job this entry never counted (its decision forgotten, then re-parked)
        # must not make the next job's start look like none.
        entry.jobs = max(0, entry.jobs - 1)
        return self._ready(trace_id, entry)

    def _entry(self, trace_id: int) -> _Parked:
        entry = self._parked.get(trace_id)
        if entry is not None:
            return entry
        now = self._clock()
        while len(self._parked) >= self.settings.max_traces:
            self._spill.extend(self._release_unsampled(next(iter(self._parked))))
        self._expire(now)
        entry = _Parked(created=now)
        self._parked[trace_id] = entry
        return entry

    def _expire(self, now: float) -> None:
        # Oldest first (insertion order): the scan stops at the first trace younger than max_age_s.
        while self._parked:
            oldest_id, oldest = next(iter(self._parked.items()))
            if now - oldest.created < self.settings.max_age_s:
                return
            self._spill.extend(self._release_unsampled(oldest_id))

    def _account(self, entry: _Parked, span: ReadableSpan) -> None:
        attrs = span.attributes or {}
        # An evaluation that errored is no fail, but its trace is kept as before: it may need re-evaluating.
        if attrs.get(semconv.EVALTRACE_EVAL_FAILED) is True or attrs.get(semconv.EVALTRACE_EVAL_ERRORS):
            entry.failed = True
        if self._is_root(span) and attrs.get(semconv.EVALTRACE_SPAN_KIND) != semconv.KIND_EVALUATION:
            entry.root_done = True
            entry.latency_ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6

    def _keep(self, entry: _Parked) -> bool:
        s = self.settings
        return (
            entry.failed
            or (s.max_latency_ms is not None and entry.latency_ms > s.max_latency_ms)
            or self._over_budget(entry)
            or random.random() < s.keep_rate
        )

    def _over_budget(self, entry: _Parked) -> bool:
        """Whether the trace's tokens or cost exceed a budget, summed as the local store sums them.

        An agent span repeating the counts of the model calls under it (or an ``@llm`` function around an
        instrumented call) is left out when a descendant carries them (:func:`trace_usage`), so each token is
        counted once; a span with counts and no counting descendant (a decorated function's manual usage)
        counts. Computed once per decision, from the whole parked trace: the order spans end in is no matter.
        """
        s = self.settings
        if s.max_tokens is None and s.max_cost_usd is None:
            return False
        carriers: list[tuple[int, Usage]] = []
        links: list[tuple[int, int | None]] = []
        for span in entry.spans:
            span_id = span.context.span_id if span.context is not None else 0
            links.append((span_id, span.parent.span_id if span.parent is not None else None))
            usage = span_usage(span.attributes or {})
            if usage != NO_USAGE:
                carriers.append((span_id, usage))
        total = trace_usage(carriers, links)
        tokens = (total.input_tokens or 0) + (total.output_tokens or 0)
        return (s.max_tokens is not None and tokens > s.max_tokens) or (
            s.max_cost_usd is not None and (total.cost or 0.0) > s.max_cost_usd
        )

    def _ready(self, trace_id: int, entry: _Parked) -> list[ReadableSpan]:
        if not entry.root_done or entry.jobs > 0:
            return []
        del self._parked[trace_id]
        keep = entry.failed if entry.late else self._keep(entry)  # a late part was drawn once already
        self._remember(trace_id, keep)
        if keep:
            if entry.late:
                self.stats.late_kept += 1
            else:
                self.stats.kept_traces += 1
            return entry.spans
        if not entry.late:
            self.stats.discarded_traces += 1
        self.stats.discarded_spans += len(entry.spans)
        if self._discard is not None:
            self._dropped.extend(entry.spans)
        return []

    def _release_unsampled(self, trace_id: int) -> list[ReadableSpan]:
        entry = self._parked.pop(trace_id)
        self.stats.released_unsampled += 1
        self._remember(trace_id, True)
        return entry.spans

    def _take_spill(self) -> list[ReadableSpan]:
        spill, self._spill = self._spill, []
        return spill

    def _take_dropped(self) -> list[ReadableSpan]:
        dropped, self._dropped = self._dropped, []
        return dropped

    def _remember(self, trace_id: int, keep: bool) -> None:
        self._decided[trace_id] = keep
        if len(self._decided) > _DECISIONS_KEPT:
            self._decided.popitem(last=False)

    def _flush(self, spans: list[ReadableSpan], dropped: list[ReadableSpan]) -> None:
        for span in spans:
            self._deliver(span)
        if self._discard is not None:
            for span in dropped:
                self._discard(span)
