"""The record of one span as the local store writes it, without the OpenTelemetry SDK.

``store_rows`` builds these records from SDK spans; the writer process (``store_process``) receives them as plain
tuples over a pipe and rebuilds them here, so it never imports the SDK.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["EvalRow", "PlainSpan", "StoredSpan", "from_plain"]


class EvalRow(NamedTuple):
    """One evaluator's outcome on one span (``span_id`` is the evaluated span, ``source`` the span that said so)."""

    span_id: str
    evaluator: str
    outcome: str | None
    source: str


class StoredSpan(NamedTuple):
    """Everything written for one span (a tuple: a million of them are built per million spans written).

    The fields up to ``data`` are the ``spans`` columns in order, ``resource_json`` standing for the resource
    id: the writer binds slices of this tuple, not one attribute at a time.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    span_type: str | None
    status: str
    app_error: int
    """1 when the span is an application error (not an evaluation that failed to run), else 0."""
    start_time: int
    end_time: int
    resource_json: str
    service: str
    session_id: str | None
    user_id: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None
    data: str
    text: str
    evals: tuple[EvalRow, ...]


PlainSpan = tuple[object, ...]
"""A :class:`StoredSpan`'s fields as a plain tuple, its evaluation rows plain tuples too: what ``marshal`` encodes."""

_new = tuple.__new__


def from_plain(row: PlainSpan) -> StoredSpan:
    """The :class:`StoredSpan` of a plain tuple (its evaluation rows become :class:`EvalRow` again)."""
    evals = row[19]
    if evals:
        row = (*row[:19], tuple(_new(EvalRow, e) for e in evals))  # type: ignore[attr-defined]
    return _new(StoredSpan, row)
