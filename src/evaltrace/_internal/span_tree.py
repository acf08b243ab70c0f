"""The spans of one trace as a tree, depth first: what every waterfall (terminal, run report) is drawn from."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["tree_order"]


def tree_order(spans: Sequence[ReadableSpan]) -> list[tuple[int, ReadableSpan]]:
    """Depth-first order of the spans with their depth, children by start time; orphans (parent not among them) are roots."""
    ids = {s.context.span_id for s in spans if s.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    ordered: list[tuple[int, ReadableSpan]] = []
    stack = [(0, s) for s in sorted(children.get(None, []), key=lambda s: s.start_time or 0, reverse=True)]
    while stack:
        depth, span = stack.pop()
        ordered.append((depth, span))
        kids = children.get(span.context.span_id if span.context else None, [])
        stack.extend((depth + 1, k) for k in sorted(kids, key=lambda s: s.start_time or 0, reverse=True))
    return ordered
