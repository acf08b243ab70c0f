"""Bounded per-trace span buffer: the spans a subtree or trace-level evaluation needs, and nothing more.

A child span ends before its parent, so when an evaluated span ends its descendants have already passed
through ``on_end``; they are kept here, keyed by trace id, until the trace's local root ends. Memory is bounded
three ways: at most ``max_traces`` traces (the oldest is evicted first), at most ``max_spans_per_trace`` spans
each, and at most ``max_age_s`` seconds per trace (a trace whose root never ends locally, e.g. a request
cancelled mid-way, is evicted on a later insert). Evictions and refused spans are counted; the spans themselves
are always forwarded downstream by the processor, the buffer only holds extra references.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry.sdk.trace import ReadableSpan


class _Entry:
    """One buffered trace: when it was first tracked, and its spans so far."""

    # Made on every tracked trace's start, on the application thread: positional, no dataclass keyword __init__
    # and default factory (~2k instructions less per decorated span). ``track`` sets the two slots itself (as
    # ``__init__`` does): a slot added here must be set there too (tests/evaluation/test_app_thread_round3.py).
    __slots__ = ("created", "spans")

    def __init__(self, created: float) -> None:
        self.created = created
        self.spans: list[ReadableSpan] = []


_new_object = object.__new__


@dataclass
class BufferStats:
    """Counters of the trace buffer."""

    traces: int = 0
    evicted_traces: int = 0
    dropped_spans: int = 0


class TraceBuffer:
    """Spans per trace id, bounded in traces, spans per trace and age.

    Args:
        max_traces: Traces held at once.
        max_spans_per_trace: Spans held per trace; later spans of that trace are not buffered (counted).
        max_age_s: Seconds after which a trace is evicted even if its root has not ended.
    """

    def __init__(self, max_traces: int = 4096, max_spans_per_trace: int = 2048, max_age_s: float = 300.0) -> None:
        self._max_traces = max(1, max_traces)
        self._max_spans = max(1, max_spans_per_trace)
        self._max_age = max_age_s
        self._traces: OrderedDict[int, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.stats = BufferStats()
        # is_tracked() as the dict's own ``__contains__`` (a C call, no Python frame): what the processor asks at
        # every evaluated span's end, on the application thread. The same answer (``_traces`` is never rebound).
        self.tracking: Callable[[int], bool] = self._traces.__contains__

    def track(self, trace_id: int) -> None:
        """Start buffering ``trace_id`` (called when a span that will need its subtree starts)."""
        # On the application thread at every decorated span's start: _insert's steps inline (one frame fewer).
        # The lock is taken with ``with``, never ``acquire()`` then ``try``: a signal handler raising (Ctrl-C, a
        # SIGTERM handler, a soft time limit) between those two lines would leave the lock held and every later
        # span end blocked; ``with`` leaves no such window.
        traces = self._traces
        with self._lock:
            if trace_id in traces:
                return
            now = time.monotonic()
            while traces:
                oldest = next(iter(traces.values()))
                if len(traces) < self._max_traces and now - oldest.created < self._max_age:
                    break
                traces.popitem(last=False)
                self.stats.evicted_traces += 1
            # _Entry(now) without the class call and its __init__ frame (~0.5k instructions): the same two slots.
            entry = _new_object(_Entry)
            entry.created = now
            entry.spans = []
            traces[trace_id] = entry
            self.stats.traces = len(traces)

    def is_tracked(self, trace_id: int) -> bool:
        """True when spans of ``trace_id`` are being buffered."""
        return trace_id in self._traces

    def add(self, span: ReadableSpan, *, create: bool) -> None:
        """Buffer ``span`` if its trace is tracked (or ``create`` is set); O(1)."""
        trace_id = span.context.trace_id if span.context is not None else 0
        with self._lock:
            entry = self._traces.get(trace_id)
            if entry is None:
                if not create:
                    return
                entry = self._insert(trace_id)
            if len(entry.spans) >= self._max_spans:
                self.stats.dropped_spans += 1
                return
            entry.spans.append(span)

    def take(self, trace_id: int, span: ReadableSpan, *, create: bool) -> list[ReadableSpan]:
        """``add(span, create=create)`` then ``pop(trace_id)`` in one step: what a local root's end does.

        ``trace_id`` is ``span``'s. The same list, counters and state as the two calls; only the window between
        them is gone (a span of the trace ending on another thread in it was buffered into the root's list, and is
        now not buffered: the order it would have had ending just after the root, which it could always have had).
        """
        # At every tracked local root's end, on the application thread. ``with``, not ``acquire()`` then ``try``,
        # for the reason track() gives (a signal raising between the two would leave the lock held for good).
        traces = self._traces
        with self._lock:
            entry = traces.pop(trace_id, None)
            if entry is None:
                if not create:
                    self.stats.traces = len(traces)
                    return []
                entry = self._insert(trace_id)  # as add() makes it (evicting as it does), then popped as pop()
                del traces[trace_id]
            spans = entry.spans
            if len(spans) >= self._max_spans:
                self.stats.dropped_spans += 1
            else:
                spans.append(span)
            self.stats.traces = len(traces)
        return spans

    def view(self, trace_id: int) -> tuple[list[ReadableSpan], int]:
        """Return the trace's span list and its current length, without copying (O(1)).

        The list only grows by appends, so ``spans[:length]`` read later by a worker is the state at this
        call; spans ending afterwards are not descendants of a span that has already ended (save detached
        async work, which an evaluation cannot wait for anyway).
        """
        with self._lock:
            entry = self._traces.get(trace_id)
        if entry is None:
            return [], 0
        return entry.spans, len(entry.spans)

    def pop(self, trace_id: int) -> list[ReadableSpan]:
        """Stop buffering ``trace_id`` and return its spans."""
        with self._lock:
            entry = self._traces.pop(trace_id, None)
            self.stats.traces = len(self._traces)
        return entry.spans if entry is not None else []

    def __len__(self) -> int:
        return len(self._traces)

    def _insert(self, trace_id: int) -> _Entry:
        now = time.monotonic()
        while self._traces:
            oldest = next(iter(self._traces.values()))
            if len(self._traces) < self._max_traces and now - oldest.created < self._max_age:
                break
            self._traces.popitem(last=False)
            self.stats.evicted_traces += 1
        entry = _Entry(now)
        self._traces[trace_id] = entry
        self.stats.traces = len(self._traces)
        return entry


def subtree(root: ReadableSpan, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """Return ``root`` followed by every span of ``spans`` that descends from it (by parent span id)."""
    children: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.parent is not None:
            children.setdefault(span.parent.span_id, []).append(span)
    root_id = root.context.span_id if root.context is not None else 0
    found: list[ReadableSpan] = [root]
    frontier = [root_id]
    seen = {root_id}
    while frontier:
        parent_id = frontier.pop()
        for child in children.get(parent_id, ()):
            child_id = child.context.span_id if child.context is not None else 0
            if child_id not in seen:
                seen.add(child_id)
                found.append(child)
                frontier.append(child_id)
    return found
