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
its root known (``on_wait(trace_id, +1)``), and when such a wait ends without being handed out
(``on_wait(trace_id, -1)``: evaluated on its root's own job, or dropped); a wait handed out by :meth:`collect` is
ended by the caller once its evaluation ran (or will not run). So sampling never decides a trace between its
root's end and its trace-level verdict, even when the timer hands the trace out before the root's caller returns.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry.sdk.trace import ReadableSpan


@dataclass
class OpenTrace:
    """A trace being collected (or re-opened by a late span).

    Attributes:
        trace_id: The trace id.
        created: ``time.monotonic()`` of its first span (or of the re-opening span).
        spans: Its spans in arrival order (append-only: a running job reads ``spans[:count]``).
        last: Arrival time of its latest span.
        root: The root span once it has ended.
        specs: The trace-level evaluators admitted when the root ended (opaque here).
        revision: 1 for the first evaluation, +1 for each re-evaluation after late spans.
        forced: A span carrying the end marker has ended: no quiet period once the root has ended.
        truncated: A span was refused by the spans-per-trace bound: the trace is incomplete.
        started: The root as it started (in process; None in the worker), live: when the trace is given up
            before its root ended, its name and attributes then tell which evaluators it was lost to.
        awaited: ``on_wait(trace_id, +1)`` was called for this revision: whoever ends its wait calls -1 (the
            processor, for a trace handed out by :meth:`CompletionBuffer.collect`).
    """

    trace_id: int
    created: float
    spans: list[ReadableSpan] = field(default_factory=list)
    last: float = 0.0
    root: ReadableSpan | None = None
    specs: Sequence[Any] = ()
    revision: int = 1
    forced: bool = False
    truncated: bool = False
    span_ids: set[int] = field(default_factory=set)
    started: ReadableSpan | None = None
    awaited: bool = False


@dataclass
class CompletionStats:
    """Counters of the completion buffer (``stats()["completion"]``)."""

    open_traces: int = 0
    tombstones: int = 0
    completed: int = 0
    reopened: int = 0
    incomplete: int = 0
    evicted_tombstones: int = 0
    late_after_window: int = 0
    after_incomplete: int = 0
    duplicate_spans: int = 0


@dataclass
class _Tombstone:
    expires: float
    trace: OpenTrace


# What became of a root span handed to :meth:`CompletionBuffer.root_ended`.
RootOutcome = Literal["complete", "waiting", "closed"]
# Why a span may not join its trace: seen already, trace evaluated and past its late window, or given up.
ClosedReason = Literal["duplicate", "done", "given_up"]
_GIVEN_UP = -1  # in the closed-trace map; an evaluated trace maps to its root's span id


def _span_id(span: ReadableSpan) -> int:
    return span.context.span_id if span.context is not None else 0


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
            waiting for its evaluation and ``(trace_id, -1)`` when that wait ends here (see the module docstring);
            it must not block nor call back into the buffer.
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
        # Roots started (the live span, None in the worker), no span of their trace ended yet.
        self._tracked: OrderedDict[int, ReadableSpan | None] = OrderedDict()
        self._spill: list[OpenTrace] = []  # evicted by add(): handed to the next collect (counted there)
        # Evaluated or given-up traces, kept longer than their tombstones (ids only): never judged again from a part.
        self._closed: OrderedDict[int, int] = OrderedDict()
        self._latest: OrderedDict[int, int] = OrderedDict()  # revision handed out last, per trace
        self._lock = threading.Lock()
        self.stats = CompletionStats()

    def track(self, trace_id: int, root: ReadableSpan | None = None) -> None:
        """Buffer ``trace_id`` from now on (its root may be evaluated; called at the root's start with the root)."""
        with self._lock:
            self._tracked[trace_id] = root
            # Bounded apart from the open traces (ints only): roots that never end must not stop tracking new ones.
            if len(self._tracked) > 4 * self._max_traces:
                self._tracked.popitem(last=False)

    def add(self, span: ReadableSpan, *, create: bool, marker: bool) -> bool:
        """Add a non-root span (O(1)); True when it opened or re-opened a trace (the timer must watch it).

        Args:
            span: The ended span.
            create: Buffer its trace even when it was never tracked (spans fed without ``on_start``).
            marker: The span carries the end marker.
        """
        trace_id = span.context.trace_id if span.context is not None else 0
        now = self._clock()
        with self._lock:
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
                entry.started = started
            self._append(entry, span, now)
            if marker:
                entry.forced = True
            if entry.root is not None:
                self._ready.move_to_end(trace_id)
                if marker:
                    self._forced.append(entry)
            return opened

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
            self._tracked.pop(trace_id, None)
            if self._settled(trace_id, root, now) is not None:
                return "closed", None
            # A tombstone still in its late window: another local root of the trace (a service called twice)
            # re-opens it like any late span.
            entry = self._open.get(trace_id) or self._reopen(trace_id, root, now) or self._insert(trace_id, now)
            self._append(entry, root, now)
            entry.root, entry.specs = root, specs
            entry.forced = entry.forced or marker
            if (self.quiet_s <= 0 or entry.forced) and not entry.truncated:
                del self._open[trace_id]
                self._ready.pop(trace_id, None)
                self._unwait(entry)  # evaluated on the root's own job from here, which sampling waits for
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
                if self._open.pop(entry.trace_id, None) is entry:
                    self._ready.pop(entry.trace_id, None)
                    complete.append(entry)
            while self._ready:
                entry = next(iter(self._ready.values()))
                if not drain and entry.last + self.quiet_s > now:
                    break
                self._ready.popitem(last=False)
                del self._open[entry.trace_id]
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

    def discard(self, trace_id: int) -> None:
        """Forget ``trace_id`` (its root ended and no trace-level evaluator applies to it)."""
        with self._lock:
            self._tracked.pop(trace_id, None)
            entry = self._open.pop(trace_id, None)
            if entry is not None:
                self._ready.pop(trace_id, None)
                self._unwait(entry)
                self._count()

    def ready_now(self) -> None:
        """Make every trace whose root has ended due at the next :meth:`collect` (``force_flush``)."""
        with self._lock:
            self._forced.extend(self._ready.values())

    def __len__(self) -> int:
        return len(self._open)

    def tombstone_count(self) -> int:
        """Return how many evaluated traces are kept for late spans."""
        return len(self._tombstones)

    # --- under the lock -----------------------------------------------------------------------------------

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

    def _unwait(self, entry: OpenTrace) -> None:
        if entry.awaited and self._on_wait is not None:
            entry.awaited = False
            self._on_wait(entry.trace_id, -1)

    def _count(self) -> None:
        self.stats.open_traces = len(self._open)
        self.stats.tombstones = len(self._tombstones)


class CompletionTimer:
    """One daemon thread calling ``tick`` every ``interval_s`` while there is anything to watch.

    Started on first use; in a forked child the owner creates a new one (the parent's thread is gone).
    """

    def __init__(self, tick: Callable[[], bool], interval_s: float = 0.1) -> None:
        self._tick = tick
        self._interval = interval_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poke(self) -> None:
        """Something to watch arrived: start the thread if needed and wake it from its idle wait."""
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._stop.is_set():
                    self._thread = threading.Thread(target=self._run, name="evaltrace-trace-completion", daemon=True)
                    self._thread.start()
        if not self._wake.is_set():
            self._wake.set()

    def is_current(self) -> bool:
        """Whether the caller is this timer's thread."""
        return self._thread is threading.current_thread()

    def stop(self, timeout_s: float) -> None:
        """Stop the thread (waits at most ``timeout_s``)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                return
            # Tick until nothing is left to watch, then sleep until poke(): an idle process never wakes up.
            self._wake.clear()
            busy = self._tick()
            if busy:
                self._wake.set()
                self._stop.wait(self._interval)
