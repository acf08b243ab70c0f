"""The export queue's size estimate of a span: fixed costs plus the length of its string values.

Split from :mod:`evaltrace._internal.export_queue` (which re-exports these names): :func:`estimated_bytes` runs once
per span queued, on the thread that ends it (the application's, or the evaluation lane's for an enriched copy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal.span_fields import DIRECT_EVENT_TYPE as _DIRECT_EVENT
from evaltrace._internal.span_fields import DIRECT_PARTS_TYPES as _DIRECT_PARTS

SPAN_BYTES = 2048
"""The estimate's fixed cost of a span (the objects the SDK makes for it, measured at ~3 kB with a few attributes)."""
EVENT_BYTES = 256
ATTRIBUTE_BYTES = 64
SAMPLED_ITEMS = 16
"""Items of a sequence attribute the estimate reads; a longer one counts as that many times their average."""


def estimated_bytes(span: ReadableSpan) -> int:
    """A cheap estimate of the memory ``span`` holds: fixed costs plus the length of its string values.

    Reads only what is built already (no encoding): O(attributes + events), whatever the size of the values (a
    sequence value by its first ``SAMPLED_ITEMS`` items).
    Lengths are in characters (one byte each for ASCII text, as CPython stores it).
    """
    size = SPAN_BYTES
    if type(span) in _DIRECT_PARTS:
        # The fields the SDK's properties wrap (``MappingProxyType(_attributes or {})``, ``tuple(_events)``): the same
        # values, without two frames and two containers per span (span_fields checks the properties once).
        attributes = span._attributes
        events = span._events
    else:
        attributes = span.attributes
        events = span.events or ()
    if attributes:
        size += _mapping_bytes(attributes)
    for event in events:  # (no emptiness test first: ``_events`` None raises here as ``tuple(None)`` did)
        size += EVENT_BYTES
        held = event._attributes if type(event) is _DIRECT_EVENT else event.attributes
        if held:
            size += _mapping_bytes(held)
    return size


def _mapping_bytes(
    attributes: Mapping[str, Any],
    str: type = str,
    tuple: type = tuple,
    list: type = list,
    type: type = type,
    len: Callable[[Any], int] = len,
) -> int:
    # The builtins bound as defaults: read as locals in the loop, which runs once per attribute of every span queued
    # (a builtin's global read is a dict probe in the module's then the builtins' namespace: ~0.8k instructions for
    # a 13-attribute span). Never passed by callers.
    # The fixed part is added last: a running sum over 256 is a new int object per ``+=`` (allocated, the old one
    # freed), one starting from 0 stays among the cached small ints while the strings are short. The same figure.
    fixed = ATTRIBUTE_BYTES * len(attributes)
    size = 0
    for value in attributes.values():
        kind = type(value)
        if kind is str:
            size += len(value)
        elif kind is tuple or kind is list:  # a sequence attribute: its strings count, other items 8 bytes each
            # Its first SAMPLED_ITEMS items stand for the rest: span end stays O(1) however long the list.
            count = len(value)
            sampled = 0
            for item in value[:SAMPLED_ITEMS]:
                sampled += len(item) if type(item) is str else 8
            size += sampled if count <= SAMPLED_ITEMS else sampled * count // SAMPLED_ITEMS
    return fixed + size
