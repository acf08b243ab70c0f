"""A case's spans as a compact timeline kept in its Trace (``Trace.extra["spans"]``), for waterfalls of a run.

A run keeps Traces, not spans; without this the run report and ``traces show --run`` could not show where a
case's time went. Each entry is a span's name, kind, depth in the tree, start (milliseconds after the case
started), duration and whether it failed: no attribute, prompt or output, so traces.jsonl grows by a few
hundred bytes a case and nothing recorded is copied twice. At most :data:`MAX_SPANS` entries are kept (the
first in tree order) and ``Trace.extra["spans_dropped"]`` counts the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from evaltrace._internal import semconv
from evaltrace._internal.span_tree import tree_order

__all__ = ["DROPPED_KEY", "MAX_SPANS", "TIMELINE_KEY", "TimelineSpan", "read_timeline", "span_timeline"]

TIMELINE_KEY = "spans"
DROPPED_KEY = "spans_dropped"
MAX_SPANS = 200


@dataclass(frozen=True)
class TimelineSpan:
    """One row of a case's waterfall."""

    name: str
    kind: str
    depth: int
    start_ms: float
    duration_ms: float
    error: bool


def span_timeline(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The ``Trace.extra`` keys holding the timeline of ``spans`` (one case's), empty when there are none."""
    ordered = tree_order([s for s in spans if s.start_time is not None])
    if not ordered:
        return {}
    start = min(span.start_time or 0 for _, span in ordered)
    rows = [
        {
            "name": span.name,
            "kind": str((span.attributes or {}).get(semconv.EVALTRACE_SPAN_KIND) or span.kind.name.lower()),
            "depth": depth,
            "start_ms": round(((span.start_time or start) - start) / 1e6, 3),
            "duration_ms": round(((span.end_time or span.start_time or start) - (span.start_time or start)) / 1e6, 3),
            "error": span.status.status_code is StatusCode.ERROR,
        }
        for depth, span in ordered[:MAX_SPANS]
    ]
    dropped = len(ordered) - len(rows)
    return {TIMELINE_KEY: rows, **({DROPPED_KEY: dropped} if dropped else {})}


def read_timeline(extra: Mapping[str, Any]) -> list[TimelineSpan]:
    """The timeline a Trace carries; ``[]`` for a run made before it was recorded, or a malformed entry list."""
    rows = extra.get(TIMELINE_KEY)
    if not isinstance(rows, list):
        return []
    timeline: list[TimelineSpan] = []
    for row in rows:
        try:
            timeline.append(
                TimelineSpan(
                    name=str(row["name"]),
                    kind=str(row["kind"]),
                    depth=int(row["depth"]),
                    start_ms=float(row["start_ms"]),
                    duration_ms=float(row["duration_ms"]),
                    error=bool(row["error"]),
                )
            )
        except (KeyError, TypeError, ValueError):
            return []  # a hand-edited or foreign line: no waterfall rather than a wrong one
    return timeline
