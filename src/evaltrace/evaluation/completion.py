"""Completion buffer of trace-level evaluation: hold a trace's spans until the trace is complete, then hand it over.

A trace is *complete* when its root span has ended AND no span of it arrived for ``quiet_s`` seconds, or at
once when its root has ended and a span carrying the end marker (``evaltrace.end_trace()``) has ended. After
it was evaluated a trace leaves a *tombstone* (its spans, evaluators and revision) for ``late_window_s``: a span
of that trace arriving in the window re-opens it (revision + 1), the quiet period restarts, and it is evaluated
again on the whole trace.

Cost on the application thread: :meth:`CompletionBuffer.add` is a lock, two dict operations and an append
(O(1)). Finding due traces is the timer's job (:meth:`collect`, called every ~100 ms from one daemon thread):
root-ended traces sit in an ordered dict by last arrival, so the scan stops at the first one still quiet-waiting.

Bounds: ``max_traces`` open traces (the oldest is evicted first) and as many tombstones, ``max_spans`` spans
per trace, ``max_wait_s`` from a trace's first span to its root's end. A trace that hits a bound before it is
complete is never evaluated (a partial trace judged as whole would give false fails): it is returned as
*incomplete* so the processor counts it under the skip reason ``trace_incomplete``.

A trace is judged at most once per revision and never after it was given up: every trace that was evaluated or
given up stays *closed* (its id only, ``4 * max_traces`` ids, oldest forgotten first) after its tombstone is gone.
A span of a closed trace is forwarded without being buffered (counted ``late_after_window`` or
``after_incomplete``), and its root, when it ends after the trace was given up or is re-sent, is never judged
from its own spans. A span whose id is already in its trace (an OTLP request re-sent after a lost response) is
ignored (``duplicate_spans``). The revision handed out last per trace is kept (:meth:`is_latest`), so a job of an
older revision that finishes late does not publish its verdict over the newer one.

Export sampling is told, under this buffer's lock, whenever a trace (or a new revision of it) starts waiting with
its root known (``on_wait(trace_id, +1)``). The wait goes with the trace (``OpenTrace.awaited``) to whoever
evaluates it, who ends it once the evaluation ran or will not run: the caller of :meth:`collect`, or, for a trace
:meth:`root_ended` returns complete, the root's own job. The buffer never ends a wait itself, so sampling never
decides a trace between its root's end and its trace-level verdict, even when the timer hands the trace out
before the root's caller returns, or another root of the trace completes it.

A trace may have several local roots (a service called twice in one trace): the roots started and not ended yet
are counted per trace, so a root no trace-level evaluator is for (:meth:`discard`) forgets its trace only when no
other root of it ended waiting or still runs; otherwise it joins the trace like any span.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace.evaluation._completion_records import (
    _GIVEN_UP,
    ClosedReason,
    CompletionStats,
    OpenTrace,
    RootOutcome,
    _span_id,
    _Started,
    _Tombstone,
)
from evaltrace.evaluation._completion_timer import CompletionTimer

__all__ = ["ClosedReason", "CompletionBuffer", "CompletionStats", "CompletionTimer", "OpenTrace", "RootOutcome"]


class CompletionBuffer:
    """Spans per trace until the trace is complete; see the module docstring.

    Args:
        quiet_s: Seconds without a new span, after the root has ended, before the trace is complete.
        late_window_s: Seconds a tombstone is kept after an evaluation (0: late spans are not re-evaluated).
        max_wait_s: Longest time from a trace's first span to its completion.
        max_traces: Open traces (and, separately, tombstones) kept at once.
        max_spans: Spans kept per trace.
        clock: Monotonic seconds (injectable for tests).
        on_wait: Called under the buffer's lock with ``(trace_id, +1)`` when a trace with a known root starts
            waiting for its evaluation (see the module docstring); it must not block nor call back into the buffer.
    """

    def __init__(
        self,
        quiet_s: float,
        late_window_s: float,
        max_wait_s: float,
        max_traces: int,
        max_spans: int,
        clock: Callable[[], float] = time.monotonic,
        on_wait: Callable[[int, int], None] | None = None,
    ) -> None:
        self.quiet_s = quiet_s
        self._on_wait = on_wait
        self._late_window = late_window_s
        self._max_wait = max_wait_s
        self._max_traces = max_traces
        self._max_spans = max_spans
        self._clock = clock
        self._open: OrderedDict[int, OpenTrace] = OrderedDict()  # by first arrival: max_wait and eviction order
        self._ready: OrderedDict[int, OpenTrace] = OrderedDict()  # root ended, by last arrival: quiet-period order
        self._forced: list[OpenTrace] = []  # root ended and end marker seen: due at the next collect
        self._tombstones: OrderedDict[int, _Tombstone] = OrderedDict()
        # Roots started, no span of their trace ended yet: small records with a weak reference (bounded below).
        self._tracked: OrderedDict[int, _Started] = OrderedDict()
        self._spill: list[OpenTrace] = []  # evicted by add(): handed to the next collect (counted there)
        # Evaluated or given-up traces, kept longer than their tombstones (ids only): never judged again from a part.
        self._closed: OrderedDict[int, int] = OrderedDict()
        self._latest: OrderedDict[int, int] = OrderedDict()  # revision handed out last, per trace
        self._lock = threading.Lock()
        self.stats = CompletionStats()

    def track(self, trace_id: int, root: ReadableSpan | None = None) -> None:
        """Buffer ``trace_id`` from now on (its root may be evaluated; called at the root's start with the root)."""
        with self._lock:
            entry = self._open.get(trace_id)
            if entry is not None:
                entry.running += 1  # another root of an open trace (a service called again)
                return
            started = self._tracked.get(trace_id)
            if started is not None:
                started.running += 1
                return
            self._tracked[trace_id] = _Started(weakref.ref(root) if root is not None else None)
            # Bounded apart from the open traces (small records, the root held weakly): roots that never end must
            # not stop tracking new ones.
            if len(self._tracked) > 4 * self._max_traces:
                self._tracked.popitem(last=False)

    def add(self, span: ReadableSpan, *, create: bool, marker: bool) -> bool:
        """Add a non-root span (O(1)); True when it opened or re-opened a trace (the timer must watch it).

        Args:
            span: The ended span.
            create: Buffer its trace even when it was never tracked (spans fed without ``on_start``).
            marker: The span carries the end marker.
        """
        now = self._clock()
        with self._lock:
            return self._add(span, now, create=create, marker=marker)

    def closed(self, root: ReadableSpan) -> ClosedReason | None:
        """Why ``root`` must not be judged (None: it may be): a re-sent root, or its trace was given up or evaluated.

        A cheap early answer (before sampling and rate limits take anything); :meth:`root_ended` decides again.
        """
        trace_id = root.context.trace_id if root.context is not None else 0
        with self._lock:
            return self._settled(trace_id, root, self._clock())

    def root_ended(
        self, root: ReadableSpan, specs: Sequence[Any], *, marker: bool
    ) -> tuple[RootOutcome, OpenTrace | None]:
        """Record the root's end with the admitted trace-level evaluators.

        Returns:
            ``("complete", trace)`` when it is complete right now (quiet period 0, or the end marker seen): the
            caller evaluates it with the root's own job and the buffer keeps a tombstone. ``("waiting", None)``:
            the trace becomes due later through :meth:`collect`. ``("closed", None)``: nothing to evaluate (the
            trace was given up or evaluated already, or this root was seen before); counted here.
        """
        trace_id = root.context.trace_id if root.context is not None else 0
        now = self._clock()
        with self._lock:
            running = self._root_done(trace_id)
            if self._settled(trace_id, root, now) is not None:
                return "closed", None
            # A tombstone still in its late window: another local root of the trace (a service called twice)
            # re-opens it like any late span.
            entry = self._open.get(trace_id) or self._reopen(trace_id, root, now) or self._insert(trace_id, now)
            if running is not None:
                entry.running = running
            self._append(entry, root, now)
            entry.root, entry.specs = root, specs
            entry.forced = entry.forced or marker
            if (self.quiet_s <= 0 or entry.forced) and not entry.truncated:
                # Evaluated on the root's own job from here: a wait sampling was told of (``awaited``) goes with
                # the trace to that job, which ends it once it ran; ending it here would let sampling decide first.
                del self._open[trace_id]
                self._ready.pop(trace_id, None)
                self._bury(entry, now)
                self.stats.completed += 1
                self._count()
                return "complete", entry
            self._ready[trace_id] = entry
            self._ready.move_to_end(trace_id)
            self._wait(entry)
            return "waiting", None

    def is_latest(self, trace_id: int, revision: int) -> bool:
        """Whether no revision newer than ``revision`` of ``trace_id`` was handed out for evaluation."""
        with self._lock:
            return self._latest.get(trace_id, revision) <= revision

    def collect(self, *, drain: bool = False) -> tuple[list[OpenTrace], list[OpenTrace]]:
        """Take the traces that are due now: ``(complete, incomplete)``.

        Complete traces get a tombstone (for late spans). Incomplete ones (truncated, evicted, or whose root did
        not end within ``max_wait_s``) are forgotten. ``drain`` (shutdown) takes every open trace: those whose
        root has ended count as complete without their quiet period, the others as incomplete.
        """
        now = self._clock()
        complete: list[OpenTrace] = []
        with self._lock:
            incomplete, self._spill = self._spill, []
            forced, self._forced = self._forced, []
            for entry in forced:
                # Only the entry itself: it may have left already (completed by another root of its trace) and a
                # newer revision of the trace be open under the same id.
                if self._open.get(entry.trace_id) is entry:
                    del self._open[entry.trace_id]
                    self._ready.pop(entry.trace_id, None)
                    complete.append(entry)
            while self._ready:
                entry = next(iter(self._ready.values()))
                if not drain and entry.last + self.quiet_s > now:
                    break
                self._ready.popitem(last=False)
                self._open.pop(entry.trace_id, None)
                complete.append(entry)
            while self._open:
                entry = next(iter(self._open.values()))
                if not drain and entry.created + self._max_wait > now:
                    break
                self._open.popitem(last=False)
                if self._ready.pop(entry.trace_id, None) is not None:
                    complete.append(entry)  # root ended but spans kept coming for max_wait_s: evaluate it now
                else:
                    incomplete.append(entry)
            truncated = [entry for entry in complete if entry.truncated]
            complete = [entry for entry in complete if not entry.truncated]
            incomplete.extend(truncated)
            for entry in complete:
                self._bury(entry, now)
            for entry in incomplete:
                self._close(entry.trace_id, _GIVEN_UP)
            while self._tombstones and next(iter(self._tombstones.values())).expires <= now:
                self._tombstones.popitem(last=False)
            self.stats.completed += len(complete)
            self.stats.incomplete += len(incomplete)
            self._count()
        return complete, incomplete

    def discard(self, root: ReadableSpan, *, marker: bool = False) -> bool:
        """A root no trace-level evaluator is for ended: forget its trace, unless another evaluation stands.

        When another root of the trace ended and waits for its evaluation (or a re-opened revision waits, or an
        evaluated trace is in its late window), or another root of it still runs, ``root`` is a span of that
        trace like any other: it joins it (re-opening it from its tombstone). Otherwise the trace is forgotten.

        Returns:
            True when it opened or re-opened a trace (the timer must watch it), as :meth:`add`.
        """
        trace_id = root.context.trace_id if root.context is not None else 0
        now = self._clock()
        with self._lock:
            running = self._root_done(trace_id)
            entry = self._open.get(trace_id)
            if entry is not None:
                if running is not None:
                    entry.running = running
                if entry.root is None and entry.running <= 0:  # nothing waits for the trace: never awaited
                    del self._open[trace_id]
                    self._ready.pop(trace_id, None)
                    self._count()
                    return False
            elif running:  # another root still runs: it may be evaluated on the whole trace, this root included
                self._tracked[trace_id] = _Started(None, running)
            return self._add(root, now, create=False, marker=marker)

    def ready_now(self) -> None:
        """Make every trace whose root has ended due at the next :meth:`collect` (``force_flush``)."""
        with self._lock:
            self._forced.extend(self._ready.values())

    def ready_where(self, predicate: Callable[[OpenTrace], bool]) -> None:
        """Make every trace whose root has ended and satisfies ``predicate`` due at the next :meth:`collect`.

        ``evaltrace.end_session()``: the session's finished turns need not wait for their quiet period. Called from
        the timer thread; ``predicate`` must not call back into the buffer.
        """
        with self._lock:
            self._forced.extend(entry for entry in self._ready.values() if entry.root and predicate(entry))

    def running(self) -> list[tuple[ReadableSpan, OpenTrace | None]]:
        """The live local roots started and not ended yet (in process; none in the worker), each with its trace.

        The trace is None while no span of it has ended. ``evaltrace.end_session()`` called inside a turn: that
        turn's trace is still running, and the session is judged once it completed, not before without it. A root
        the application dropped unended (its weak reference gone) is not waited for. Called from the timer thread,
        only while such a call waits.
        """
        with self._lock:
            refs: list[tuple[weakref.ref[ReadableSpan] | None, OpenTrace | None]] = [
                (started.root, None) for started in self._tracked.values() if started.running > 0
            ]
            refs += [(entry.started_ref, entry) for entry in self._open.values() if entry.running > 0]
        live = [(ref(), entry) for ref, entry in refs if ref is not None]
        return [(root, entry) for root, entry in live if root is not None and root.end_time is None]

    def open_trace(self, trace_id: int) -> OpenTrace | None:
        """The open trace ``trace_id`` (its spans ended so far), or None."""
        with self._lock:
            return self._open.get(trace_id)

    def __len__(self) -> int:
        return len(self._open)

    def tombstone_count(self) -> int:
        """Return how many evaluated traces are kept for late spans."""
        return len(self._tombstones)

    # --- under the lock -----------------------------------------------------------------------------------

    def _add(self, span: ReadableSpan, now: float, *, create: bool, marker: bool) -> bool:
        trace_id = span.context.trace_id if span.context is not None else 0
        if self._settled(trace_id, span, now) is not None:
            return False
        entry = self._open.get(trace_id)
        opened = entry is None
        if entry is None:
            entry = self._reopen(trace_id, span, now)
        if entry is None:
            if not create and trace_id not in self._tracked:
                return False
            started = self._tracked.pop(trace_id, None)
            entry = self._insert(trace_id, now)
            if started is not None:
                entry.started_ref, entry.running = started.root, started.running
        self._append(entry, span, now)
        if marker:
            entry.forced = True
        if entry.root is not None:
            self._ready.move_to_end(trace_id)
            if marker:
                self._forced.append(entry)
        return opened

    def _root_done(self, trace_id: int) -> int | None:
        """A local root of ``trace_id`` ended: how many others still run (None: not known here, the worker).

        Counted on the open trace, or on the started record (then taken: the caller opens or joins the trace).
        """
        entry = self._open.get(trace_id)
        started = self._tracked.pop(trace_id, None)
        if entry is not None:
            return max(0, entry.running - 1)
        return max(0, started.running - 1) if started is not None else None

    def _append(self, entry: OpenTrace, span: ReadableSpan, now: float) -> None:
        entry.last = now
        if len(entry.spans) >= self._max_spans:
            entry.truncated = True  # the trace can no longer be evaluated whole
            return
        entry.spans.append(span)
        entry.span_ids.add(_span_id(span))

    def _duplicate(self, entry: OpenTrace, span: ReadableSpan) -> bool:
        """A span already in ``entry`` (re-sent): counted, never appended twice."""
        if _span_id(span) in entry.span_ids:
            self.stats.duplicate_spans += 1
            return True
        return False

    def _settled(self, trace_id: int, span: ReadableSpan, now: float) -> ClosedReason | None:
        """Why ``span`` must not join its trace (counted), or None: seen already, or its trace is closed."""
        entry = self._open.get(trace_id)
        if entry is not None:
            return "duplicate" if self._duplicate(entry, span) else None
        tomb = self._tombstones.get(trace_id)
        if tomb is not None and tomb.expires > now:  # a new span re-opens the trace
            return "duplicate" if self._duplicate(tomb.trace, span) else None
        state = self._closed.get(trace_id)
        if state is None:
            return None
        if state == _GIVEN_UP:
            self.stats.after_incomplete += 1
            return "given_up"
        self.stats.late_after_window += 1  # evaluated, its late window over
        return "duplicate" if state == _span_id(span) else "done"  # its root re-sent, or another root

    def _close(self, trace_id: int, state: int) -> None:
        self._closed[trace_id] = state
        self._closed.move_to_end(trace_id)
        while len(self._closed) > 4 * self._max_traces:
            self._closed.popitem(last=False)

    def _insert(self, trace_id: int, now: float) -> OpenTrace:
        while len(self._open) >= self._max_traces:
            _, oldest = self._open.popitem(last=False)
            self._ready.pop(oldest.trace_id, None)
            self._close(oldest.trace_id, _GIVEN_UP)  # from now on, not from the next collect: no gap to re-open
            self._spill.append(oldest)
        entry = OpenTrace(trace_id, created=now, last=now)
        self._open[trace_id] = entry
        self.stats.open_traces = len(self._open)
        return entry

    def _reopen(self, trace_id: int, span: ReadableSpan, now: float) -> OpenTrace | None:
        """A late span of an evaluated trace: re-open it from its tombstone (None when there is none).

        A span the evaluated trace holds already (re-sent) re-opens nothing; the caller sees the tombstone.
        """
        if not self._tombstones:
            return None
        tomb = self._tombstones.get(trace_id)
        if tomb is None or tomb.expires <= now or _span_id(span) in tomb.trace.span_ids:
            return None
        del self._tombstones[trace_id]
        old = tomb.trace
        entry = self._insert(trace_id, now)
        # A new list: a job of the previous revision may still be reading the old one up to its own length.
        entry.spans, entry.span_ids = list(old.spans), set(old.span_ids)
        entry.root, entry.specs, entry.revision = old.root, old.specs, old.revision + 1
        entry.truncated = old.truncated
        self._ready[trace_id] = entry
        self._wait(entry)  # a new revision to evaluate: sampling waits for it too
        self.stats.reopened += 1
        return entry

    def _bury(self, entry: OpenTrace, now: float) -> None:
        """``entry`` is handed out for evaluation: its revision is the latest, its trace closed but for late spans."""
        self._latest[entry.trace_id] = entry.revision
        self._latest.move_to_end(entry.trace_id)
        while len(self._latest) > 4 * self._max_traces:
            self._latest.popitem(last=False)
        root = _span_id(entry.root) if entry.root is not None else 0
        self._close(entry.trace_id, root)  # consulted once its tombstone is gone (or with no late window)
        if self._late_window <= 0:
            return
        self._tombstones[entry.trace_id] = _Tombstone(now + self._late_window, entry)
        self._tombstones.move_to_end(entry.trace_id)
        while len(self._tombstones) > self._max_traces:
            self._tombstones.popitem(last=False)
            self.stats.evicted_tombstones += 1

    def _wait(self, entry: OpenTrace) -> None:
        if not entry.awaited and self._on_wait is not None:
            entry.awaited = True
            self._on_wait(entry.trace_id, 1)

    def _count(self) -> None:
        self.stats.open_traces = len(self._open)
        self.stats.tombstones = len(self._tombstones)
