"""The records of the completion buffer: a trace being collected, its tombstone, and the buffer's counters.

Split from :mod:`evaltrace.evaluation.completion` (which re-exports the public names), whose module docstring
describes what these hold and when.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
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
        started_ref: A weak reference to the root as it started (in process; None in the worker); see ``started``.
        running: Local roots of the trace started and not ended yet (in process).
        awaited: ``on_wait(trace_id, +1)`` was called for this revision: whoever evaluates it ends the wait (the
            caller of :meth:`CompletionBuffer.collect`, or the root's job for a trace complete at its root's end).
        session: The first session id found on its spans (in arrival order), once looked for and found.
        session_seen: How many of ``spans`` were looked at for a session already (the next look starts there).
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
    started_ref: weakref.ref[ReadableSpan] | None = None
    running: int = 0
    awaited: bool = False
    session: str | None = None
    session_seen: int = 0

    @property
    def started(self) -> ReadableSpan | None:
        """The root as it started, live (None in the worker, or once the application dropped it unended).

        When the trace is given up before its root ended, its name and attributes then tell which evaluators the
        trace was lost to. A weak reference: a root that never ends is not kept alive by the buffer.
        """
        return self.started_ref() if self.started_ref is not None else None


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
class _Started:
    """Roots of a trace started (in process) before any span of it ended: the first one, and how many run."""

    root: weakref.ref[ReadableSpan] | None
    running: int = 1


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
