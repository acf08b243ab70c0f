"""Reading the local store: trace summaries with filters (from ``traces`` and indexes only), a trace's spans.

Listing the newest 50 traces of a million-span store reads 50 summary rows through the ``start_time`` index;
showing a trace reads its spans through the ``(trace_id, span_id)`` index. Nothing scans every span.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evaltrace._internal import semconv
from evaltrace.exceptions import ConfigError
from evaltrace.exporters.store_db import has_fts

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = [
    "AmbiguousTraceIdError",
    "TraceFilter",
    "TraceSummary",
    "Unreadable",
    "find_traces",
    "resolve_trace_id",
    "trace_spans",
]


class AmbiguousTraceIdError(LookupError):
    """A trace id prefix that matches several stored traces; ``candidates`` lists some of them."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        self.prefix = prefix
        self.candidates = candidates
        shown = ", ".join(candidates[:10]) + (", ..." if len(candidates) > 10 else "")
        super().__init__(f"trace id prefix {prefix!r} is ambiguous; it matches {shown}")


@dataclass(frozen=True)
class TraceSummary:
    """One line of ``evaltrace traces list``: a trace as its summary row holds it."""

    trace_id: str
    root_name: str
    start_time: int
    duration_ms: float
    span_count: int
    error: bool
    service_name: str
    evaluations: dict[str, int] = field(default_factory=dict)
    """Evaluation results by outcome: ``pass``, ``fail``, ``error``, ``not_evaluated``, ``pending``."""
    session_id: str | None = None
    user_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The stable object ``evaltrace traces list --json`` prints for this trace."""
        started = dt.datetime.fromtimestamp(self.start_time / 1e9, dt.UTC)
        return {
            "trace_id": self.trace_id,
            "root_name": self.root_name,
            "service": self.service_name,
            "start_time": started.isoformat().replace("+00:00", "Z"),
            "start_time_unix_nano": self.start_time,
            "duration_ms": round(self.duration_ms, 3),
            "span_count": self.span_count,
            "status": "error" if self.error else "ok",
            "evaluations": {outcome: self.evaluations.get(outcome, 0) for outcome in _OUTCOMES},
            "session_id": self.session_id,
            "user_id": self.user_id,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd if math.isfinite(self.cost_usd) else None,  # strict JSON: no Infinity
        }


_OUTCOMES = ("pass", "fail", "error", "not_evaluated", "pending")


@dataclass(frozen=True)
class TraceFilter:
    """Which traces to list or export; unset fields do not filter. Every given condition must hold.

    Attributes:
        service: ``service.name`` of the root span.
        since_ns: Traces that started at or after this Unix time (nanoseconds).
        status: ``"error"`` (a span of the application failed) or ``"ok"``.
        failed_evals: At least one evaluation (of ``evaluator``, when given) failed.
        eval_errors: At least one evaluation (of ``evaluator``, when given) errored instead of judging (a judge
            down or refusing its key, an evaluator that raised or timed out).
        evaluator: An evaluator with a result on the trace, whatever its outcome.
        session_id: ``session.id``.
        user_id: ``user.id``.
        search: Words in inputs and outputs (each matched as a word prefix with FTS5, as a substring without).
        limit: Most traces returned, newest first (``None``: all).
        attributes: ``(key, value)`` pairs: a span of the trace has attribute ``key`` equal to ``value`` (the text,
            or the number or boolean it spells), for each pair. Read from the spans themselves (no index).
        judges: Include the traces of judge calls (root span ``judge {evaluator}``, kind ``judge``). Left out
            by default: there is one per judged evaluation, and they are reached from their scores.
    """

    service: str | None = None
    since_ns: int | None = None
    status: str | None = None
    failed_evals: bool = False
    eval_errors: bool = False
    evaluator: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    search: str | None = None
    limit: int | None = None
    attributes: tuple[tuple[str, str], ...] = ()
    judges: bool = False


# Runs of letters and digits: what FTS5's unicode61 tokenizer keeps as one token. A word that tokenizes into
# several (gpt-4o, don't, a:b) would be a phrase query, which a ``detail = none`` index refuses.
_WORD = re.compile(r"[^\W_]+")


def _fts_words(text: str) -> list[str]:
    return _WORD.findall(text)


def _fts_query(words: list[str]) -> str:
    """Every word as a prefix, all required: ``gpt-4o`` finds text holding ``gpt`` and a word starting ``4o``."""
    return " AND ".join(f'"{word}"*' for word in words)


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


# A judge call's trace: its root span is of kind judge. The span row is looked up only for traces whose root is
# named like a judge's, so listing reads no span row of the application's traces (cheaper, and a damaged span
# page cannot make the whole list unreadable for `traces export` on a partly corrupt store).
_NOT_A_JUDGE = (
    f"NOT (substr(t.root_name, 1, {len(semconv.JUDGE_SPAN_NAME_PREFIX)}) = '{semconv.JUDGE_SPAN_NAME_PREFIX}'"
    " AND EXISTS (SELECT 1 FROM spans AS r WHERE r.trace_id = t.trace_id AND r.span_id = t.root_span_id"
    f" AND r.span_type = '{semconv.KIND_JUDGE}'))"
)


def _where(conn: sqlite3.Connection, f: TraceFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = [] if f.judges else [_NOT_A_JUDGE]
    params: list[Any] = []
    if f.service is not None:
        clauses.append("t.service = ?")
        params.append(f.service)
    if f.since_ns is not None:
        clauses.append("t.start_time >= ?")
        params.append(f.since_ns)
    if f.status is not None:
        clauses.append("t.error = ?")
        params.append(1 if f.status == "error" else 0)
    if f.evaluator is None:
        if f.failed_evals:
            clauses.append("t.eval_fail > 0")
        if f.eval_errors:
            clauses.append("t.eval_error > 0")
    else:
        outcomes: list[str | None] = [o for o, wanted in (("fail", f.failed_evals), ("error", f.eval_errors)) if wanted]
        for outcome in outcomes or [None]:  # each wanted outcome of this evaluator must be on the trace
            condition = " AND e.outcome = ?" if outcome else ""
            clauses.append(f"t.trace_id IN (SELECT e.trace_id FROM evals AS e WHERE e.evaluator = ?{condition})")
            params.extend([f.evaluator, outcome] if outcome else [f.evaluator])
    if f.session_id is not None:
        clauses.append("t.session_id = ?")
        params.append(f.session_id)
    if f.user_id is not None:
        clauses.append("t.user_id = ?")
        params.append(f.user_id)
    if f.search is not None and f.search.strip():
        words = _fts_words(f.search)
        if has_fts(conn) and words:
            clauses.append("t.trace_id IN (SELECT trace_id FROM span_text WHERE span_text MATCH ?)")
            params.append(_fts_query(words))
        else:
            clauses.append("t.trace_id IN (SELECT trace_id FROM span_text WHERE text LIKE ? ESCAPE '\\')")
            params.append(_like(f.search))
    _attribute_clauses(f.attributes, clauses, params)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _attribute_clauses(attributes: tuple[tuple[str, str], ...], clauses: list[str], params: list[Any]) -> None:
    """A span of the trace has each attribute value: read from the span blobs (a scan, no index)."""
    for key, value in attributes:
        clauses.append("t.trace_id IN (SELECT s.trace_id FROM spans AS s WHERE json_extract(s.data, ?) IN (?, ?))")
        params.extend([_attribute_path(key), value, _scalar(value)])


def _attribute_path(key: str) -> str:
    """The JSON path of attribute ``key`` in a span's blob (a dotted name is one key, quoted).

    Raises:
        ConfigError: ``key`` holds a double quote (a JSON path label cannot); named ``where``, the argument of
            :func:`evaltrace.evaluate_traces` and the ``--where`` flag it comes from.
    """
    if '"' in key:
        raise ConfigError("where", f"attribute name {key!r} holds a double quote")
    return '$.attributes."' + key + '"'


def _scalar(text: str) -> Any:
    """What ``text`` spells when it is a number or a boolean (as SQLite's JSON functions give them), else itself."""
    if text in ("true", "false"):
        return int(text == "true")
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


_COLUMNS = (
    "t.trace_id, t.root_name, t.start_time, t.duration_ns, t.span_count, t.error, t.service, t.eval_pass, "
    "t.eval_fail, t.eval_error, t.eval_not_evaluated, t.eval_pending, t.session_id, t.user_id, t.input_tokens, "
    "t.output_tokens, t.cost"
)


def _summary(row: tuple[Any, ...]) -> TraceSummary:
    counts = dict(zip(_OUTCOMES, row[7:12], strict=True))
    return TraceSummary(
        trace_id=row[0],
        root_name=row[1],
        start_time=row[2],
        duration_ms=row[3] / 1e6,
        span_count=row[4],
        error=bool(row[5]),
        service_name=row[6],
        evaluations={k: v for k, v in counts.items() if v},
        session_id=row[12],
        user_id=row[13],
        input_tokens=row[14],
        output_tokens=row[15],
        cost_usd=row[16],
    )


def find_traces(conn: sqlite3.Connection, f: TraceFilter) -> list[TraceSummary]:
    """Summaries of the traces ``f`` selects, newest first."""
    where, params = _where(conn, f)
    sql = f"SELECT {_COLUMNS} FROM traces AS t{where} ORDER BY t.start_time DESC"
    if f.limit is not None:
        sql += " LIMIT ?"
        params.append(f.limit)
    return [_summary(row) for row in conn.execute(sql, params)]


def resolve_trace_id(conn: sqlite3.Connection, prefix: str) -> str | None:
    """The one stored trace id starting with ``prefix`` (lower-case hex), or None.

    Raises:
        AmbiguousTraceIdError: Several traces start with it.
    """
    if len(prefix) == 32:
        row = conn.execute("SELECT trace_id FROM traces WHERE trace_id = ?", (prefix,)).fetchone()
        return row[0] if row else None
    # 'g' sorts after every hex digit: the range is exactly the ids with this prefix, read from the primary key.
    rows = conn.execute(
        "SELECT trace_id FROM traces WHERE trace_id >= ? AND trace_id < ? ORDER BY trace_id LIMIT 11",
        (prefix, prefix + "g"),
    ).fetchall()
    if len(rows) > 1:
        raise AmbiguousTraceIdError(prefix, [r[0] for r in rows])
    return rows[0][0] if rows else None


@dataclass
class Unreadable:
    """What a reader skipped in a partly corrupt store: span rows it could not decode, and the traces they were in.

    ``traces`` counts every trace missing at least one span; a trace whose rows could not be read at all (a
    damaged page) counts all the spans its summary says it has.
    """

    spans: int = 0
    traces: int = 0


_UNDECODABLE = (ValueError, TypeError, KeyError, AttributeError)
"""What decoding a damaged row raises: JSON that does not parse, a value of the wrong type where a dict is read."""


def trace_spans(conn: sqlite3.Connection, trace_id: str, unreadable: Unreadable | None = None) -> list[ReadableSpan]:
    """The spans of the trace ``trace_id`` (a full id), by start time.

    With ``unreadable``, a row that cannot be decoded (garbage in its JSON) is skipped and counted there;
    without it, the error is raised.
    """
    from evaltrace.exporters.span_json import span_from_dict  # the SDK: only `show` and `export` need spans

    rows = conn.execute(
        "SELECT s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.status, s.start_time, s.end_time, "
        "s.data, coalesce(r.json, '{}') FROM spans AS s LEFT JOIN resources AS r ON r.id = s.resource_id "
        "WHERE s.trace_id = ? ORDER BY s.start_time, s.id",
        (trace_id,),
    ).fetchall()
    spans: list[ReadableSpan] = []
    skipped = 0
    for row in rows:
        try:
            spans.append(_span(span_from_dict, row))
        except _UNDECODABLE:
            if unreadable is None:
                raise
            skipped += 1
    if skipped and unreadable is not None:
        unreadable.spans += skipped
        unreadable.traces += 1
    return spans


def _span(span_from_dict: Callable[[dict[str, Any]], ReadableSpan], row: tuple[Any, ...]) -> ReadableSpan:
    """The span one ``trace_spans`` row holds (``span_from_dict`` passed in: imported once per trace)."""
    trace, span, parent, name, kind, status, start, end, data, resource = row
    body = json.loads(data)
    return span_from_dict(
        {
            "trace_id": trace, "span_id": span, "parent_span_id": parent, "name": name, "kind": kind,
            "start_time": start, "end_time": end,
            "status": {"code": status, "description": body.get("status_description")},
            "attributes": body.get("attributes"), "events": body.get("events"), "links": body.get("links"),
            "resource": json.loads(resource), "scope": body.get("scope"),
            "trace_state": body.get("trace_state"), "parent_remote": body.get("parent_remote"),
        }
    )  # fmt: skip
