"""Writing to the local store: a batch of spans in one transaction, trace summaries kept current, retention.

A span exported again (enriched by a late evaluation, or sent by both the app and the worker) replaces its
earlier copy. The summary of a trace first seen in a batch is computed in Python from the batch's rows (most
traces: a trace's spans usually leave in one batch); a trace that already had stored spans is summarized again
from all its stored spans in the same transaction, so summaries are right whatever order spans arrive in, however
often a span is re-exported and whichever process wrote them. Both go by ``store_summary.summarize`` for the
root, session and user: the rule a backfill uses too.

Span row ids are given by the writer (the next after the largest, read inside the write transaction, so two
processes never take the same): the search index rows share them without a look-up per row.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from evaltrace.exporters.store_bulk import (
    SPAN_PARAMETERS,
    bulk_statement,
    execute_bulk,
    execute_flat,
    padded_size,
    rows_per_statement,
)
from evaltrace.exporters.store_db import is_busy, is_full, write_transaction
from evaltrace.exporters.store_summary import SpanFacts, summarize
from evaltrace.exporters.store_values import Usage, trace_usage

if TYPE_CHECKING:
    from evaltrace.exporters.store_rows import StoredSpan

__all__ = [
    "ResourceIds",
    "RetentionResult",
    "apply_retention",
    "delete_oldest",
    "used_bytes",
    "write_batch",
    "write_spans",
]

logger = logging.getLogger("evaltrace.local_store")

_SPAN_COLUMNS = (
    "spans (id, trace_id, span_id, parent_span_id, name, kind, span_type, status, app_error, start_time, end_time, "
    "resource_id, service, session_id, user_id, input_tokens, output_tokens, cost, data)"
)
# Why ``OR FAIL`` for rows known to be new: a multi-row statement that may *abort* (an upsert, ``OR REPLACE``,
# the default ``ABORT``) copies every page it changes to a statement journal first, so that it can undo its own
# rows alone; with random trace ids that is most leaves of the id indexes, ~16 kB a span on a store of 1,000,000
# spans (benchmarks/README.md, "store size"). ``FAIL`` keeps the rows before a failing one and journals nothing;
# the write transaction rolls back as a whole on any error anyway.
_INSERT_SPAN = bulk_statement(f"INSERT OR FAIL INTO {_SPAN_COLUMNS}", 19, most_values=SPAN_PARAMETERS)
"""New spans: the look-up in the same transaction found no stored copy and gave them free row ids."""
_UPSERT_SPAN = bulk_statement(
    f"INSERT INTO {_SPAN_COLUMNS}",
    19,
    """ON CONFLICT (trace_id, span_id) DO UPDATE SET
    parent_span_id = excluded.parent_span_id, name = excluded.name, kind = excluded.kind,
    span_type = excluded.span_type, status = excluded.status, app_error = excluded.app_error,
    start_time = excluded.start_time, end_time = excluded.end_time, resource_id = excluded.resource_id,
    service = excluded.service, session_id = excluded.session_id, user_id = excluded.user_id,
    input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, cost = excluded.cost,
    data = excluded.data""",
    most_values=SPAN_PARAMETERS,
)

_TRACE_COLUMNS = (
    "trace_id, root_span_id, root_name, service, start_time, duration_ns, span_count, error, eval_pass, eval_fail, "
    "eval_error, eval_not_evaluated, eval_pending, session_id, user_id, input_tokens, output_tokens, cost, stored_at"
)
# A trace that had stored spans, summarized again: the root, session and user chosen in Python by
# ``store_summary.summarize`` from its spans (read back once, with their usage), so the one rule the first batch's
# summary and a backfill use holds here too (a SQL ``max()`` picked another session than the pipeline's), and no
# correlated subquery probes the parent of each span. Evaluation counts stay in SQL: one aggregate over ``evals``.
_REFRESH_TRACE = f"""
INSERT OR REPLACE INTO traces ({_TRACE_COLUMNS})
SELECT r.trace_id, r.span_id, r.name, r.service, r.start_time, r.end_time - r.start_time,
       :span_count, :error,
       v.pass, v.fail, v.error, v.not_evaluated, v.pending,
       :session_id, :user_id, :input_tokens, :output_tokens, :cost, :now
FROM spans AS r
JOIN (
    SELECT coalesce(sum(outcome = 'pass'), 0) AS pass, coalesce(sum(outcome = 'fail'), 0) AS fail,
           coalesce(sum(outcome = 'error'), 0) AS error, coalesce(sum(outcome = 'not_evaluated'), 0) AS not_evaluated,
           coalesce(sum(outcome = 'pending'), 0) AS pending
    FROM evals WHERE trace_id = :trace_id
) AS v
WHERE r.trace_id = :trace_id AND r.span_id = :root_span_id
"""


class ResourceIds:
    """Each distinct resource is stored once; its id is cached per connection.

    An id learnt inside a transaction is only trusted once that transaction commits: after a rollback the
    row it names does not exist, and spans written with it would vanish from ``show`` and ``export``.
    """

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._pending: dict[str, int] = {}

    def get(self, conn: sqlite3.Connection, resource_json: str) -> int:
        """The id of ``resource_json``, inserting it when new."""
        known = self._ids.get(resource_json)
        if known is None:
            known = self._pending.get(resource_json)
        if known is not None:
            return known
        conn.execute("INSERT OR IGNORE INTO resources (json) VALUES (?)", (resource_json,))
        row = conn.execute("SELECT id FROM resources WHERE json = ?", (resource_json,)).fetchone()
        self._pending[resource_json] = int(row[0])
        return int(row[0])

    def committed(self) -> None:
        """The transaction that learnt the pending ids committed: keep them."""
        if len(self._ids) > 1024:  # a process has a handful of resources; bound the cache anyway
            self._ids.clear()
        self._ids.update(self._pending)
        self._pending.clear()

    def rolled_back(self) -> None:
        """The transaction rolled back: the ids it learnt name no row."""
        self._pending.clear()


_T = TypeVar("_T")


def in_transaction(conn: sqlite3.Connection, resources: ResourceIds, work: Callable[[sqlite3.Connection], _T]) -> _T:
    """:func:`write_transaction` that keeps the resource ids ``work`` learnt only if it commits."""
    try:
        result = write_transaction(conn, work)
    except BaseException:
        resources.rolled_back()
        raise
    resources.committed()
    return result


def _writer(spans: Sequence[StoredSpan], resources: ResourceIds) -> Callable[[sqlite3.Connection], None]:
    return lambda conn: write_spans(conn, spans, resources)


def write_batch(conn: sqlite3.Connection, spans: Sequence[StoredSpan], resources: ResourceIds) -> int:
    """Write ``spans`` in one transaction; if that fails, span by span, so one bad span loses only itself.

    Returns:
        How many spans could not be written (logged; the caller counts them).

    Raises:
        sqlite3.OperationalError: The database stayed busy, or the disk is full (nothing is retried span by span
            then).
        Exception: Not one span could be written (the store itself is failing, not a span).
    """
    try:
        in_transaction(conn, resources, _writer(spans, resources))
        return 0
    except sqlite3.OperationalError as exc:
        if is_busy(exc) or is_full(exc) or len(spans) < 2:  # a full disk refuses every span: the caller makes room
            raise
        first: Exception = exc
    except (sqlite3.Error, ValueError, OverflowError) as exc:  # a value SQLite refused
        if len(spans) < 2:
            raise
        first = exc
    lost = 0
    for span in spans:
        try:
            in_transaction(conn, resources, _writer([span], resources))
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                raise
            lost += 1
        except (sqlite3.Error, ValueError, OverflowError):
            lost += 1
    if lost == len(spans):
        raise first
    logger.warning("local store: %d span(s) of a batch of %d could not be written (%s)", lost, len(spans), first)
    return lost


def _stored_ids(conn: sqlite3.Connection, trace_ids: list[str]) -> tuple[dict[tuple[str, str], int], int]:
    """The row id of each (trace id, span id) already stored for these traces, and the next free span id.

    One statement for a whole batch (as many trace ids as the connection binds) and one result row (the keys
    joined in one string): each statement and each row fetched is a ``sqlite3_step`` that gives up the GIL (see
    ``store_bulk``). Ids are fixed-width hex (32 and 16 digits).
    """
    ids: dict[tuple[str, str], int] = {}
    next_id = 0
    most = rows_per_statement(conn, 1)
    for start in range(0, len(trace_ids), most):
        chunk = trace_ids[start : start + most]
        size = padded_size(len(chunk), most)  # a few prepared sizes: repeating an id changes nothing
        chunk += chunk[:1] * (size - len(chunk))
        marks = ",".join("?" * size)
        largest, found = conn.execute(
            # The next id is past search rows too: their plain INSERT takes the span's id, and a search row left
            # above every span (a store repaired or restored by hand) would otherwise refuse every new span.
            f"SELECT max((SELECT ifnull(max(id), 0) FROM spans), (SELECT ifnull(max(rowid), 0) FROM span_text)), "
            f"group_concat(trace_id || span_id || id, ',') FROM spans "
            f"WHERE trace_id IN ({marks})",
            chunk,
        ).fetchone()
        next_id = (largest or 0) + 1
        for key in found.split(",") if found else ():
            ids[key[:32], key[32:48]] = int(key[48:])
    return ids, next_id


_NEW_TRACE = bulk_statement(f"INSERT OR FAIL INTO traces ({_TRACE_COLUMNS})", 19)
_NEW_TRACE_AGAIN = bulk_statement(f"INSERT OR REPLACE INTO traces ({_TRACE_COLUMNS})", 19)
_INSERT_EVALS = bulk_statement("INSERT OR REPLACE INTO evals", 5)
# A plain INSERT: a text row is only written under a span id given in this transaction or freed by its delete
# (FTS5 runs ``OR REPLACE`` as a look-up and a delete per row, ~1 us).
_INSERT_TEXT = bulk_statement("INSERT INTO span_text (rowid, trace_id, text)", 3)
# The summary of a trace of one new span without evaluation results (every call of a decorated function outside
# any other span): read back from the span rows just written (ids ?2 to ?3), in one statement for the batch,
# rather than built and bound in Python (19 values per trace). The same values ``_new_trace_row`` gives.
_SINGLE_SPAN_TRACES = f"""
INSERT OR FAIL INTO traces ({_TRACE_COLUMNS})
SELECT trace_id, span_id, name, service, start_time, end_time - start_time, 1, app_error, 0, 0, 0, 0, 0,
       session_id, user_id, coalesce(input_tokens, 0), coalesce(output_tokens, 0), coalesce(cost, 0.0), ?1
FROM spans WHERE id >= ?2 AND id < ?3
"""
_SINGLE_SPAN_TRACES_AGAIN = _SINGLE_SPAN_TRACES.replace("OR FAIL", "OR REPLACE", 1)
_OUTCOMES = ("pass", "fail", "error", "not_evaluated", "pending")


def _outcome_counts(spans: list[StoredSpan]) -> list[int]:
    counts = [0] * len(_OUTCOMES)
    results = [e for s in spans for e in s.evals]
    if not results:
        return counts
    outcomes = {(e.span_id, e.evaluator): e.outcome for e in results}  # a later row replaces
    for outcome in outcomes.values():
        if outcome in _OUTCOMES:
            counts[_OUTCOMES.index(outcome)] += 1
    return counts


def _new_trace_row(trace_id: str, spans: list[StoredSpan], now: int) -> tuple[object, ...]:
    """The ``traces`` row of a trace none of whose spans was stored before: what ``_REFRESH_TRACE`` computes.

    Costs ~1 us per span against ~4 us for the refresh, which reads every span of the trace back; a
    trace of one span (every call of a decorated function outside any other span) takes a shorter path.
    """
    if len(spans) == 1:
        (root,) = spans
        session_id, user_id = root.session_id, root.user_id
        usage = Usage(root.input_tokens, root.output_tokens, root.cost)
    else:
        summary = summarize(spans)  # the root, session and user: one rule (store_summary)
        root = next(s for s in spans if s.span_id == summary.root_span_id)
        session_id, user_id = summary.session_id, summary.user_id
        usage = trace_usage(
            [
                (s.span_id, Usage(s.input_tokens, s.output_tokens, s.cost))
                for s in spans
                if s.input_tokens is not None or s.output_tokens is not None or s.cost is not None
            ],
            ((s.span_id, s.parent_span_id) for s in spans),
        )
    return (
        trace_id, root.span_id, root.name, root.service, root.start_time, root.end_time - root.start_time,
        len(spans), int(any(s.app_error for s in spans)), *_outcome_counts(spans), session_id, user_id,
        usage.input_tokens or 0, usage.output_tokens or 0, usage.cost or 0.0, now,
    )  # fmt: skip


def _refresh_values(conn: sqlite3.Connection, trace_id: str, now: int) -> dict[str, object]:
    """The values ``_REFRESH_TRACE`` binds for a trace that had stored spans: every span read back once.

    Every span: a parent link may matter to the root and to the usage, and any span may carry the session.
    """
    rows = conn.execute(
        "SELECT span_id, parent_span_id, start_time, end_time, session_id, user_id, app_error, input_tokens, "
        "output_tokens, cost FROM spans WHERE trace_id = ?",
        (trace_id,),
    ).fetchall()
    summary = summarize([SpanFacts(*row[:6]) for row in rows])
    usage = trace_usage(
        [(r[0], Usage(r[7], r[8], r[9])) for r in rows if r[7] is not None or r[8] is not None or r[9] is not None],
        ((r[0], r[1]) for r in rows),
    )
    return {
        "trace_id": trace_id,
        "root_span_id": summary.root_span_id,
        "span_count": len(rows),
        "error": int(any(r[6] for r in rows)),
        "session_id": summary.session_id,
        "user_id": summary.user_id,
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
        "cost": usage.cost or 0.0,
        "now": now,
    }


def _row_ids(unique: Sequence[StoredSpan], stored: dict[tuple[str, str], int], next_id: int) -> list[int]:
    """The row id of each span: its earlier copy's, else the next free one, in order.

    Row ids are given here, not by SQLite: the search text rows share them (no look-up per row), and a span
    written before keeps its id. Inside the write transaction, no other writer can take the same ids.
    """
    if not stored:
        return list(range(next_id, next_id + len(unique)))
    ids: list[int] = []
    for s in unique:
        known = stored.get((s.trace_id, s.span_id))
        if known is None:
            known, next_id = next_id, next_id + 1
        ids.append(known)
    return ids


def _insert_spans(
    conn: sqlite3.Connection,
    unique: Sequence[StoredSpan],
    ids: Sequence[int],
    resources: ResourceIds,
    stored: dict[tuple[str, str], int],
) -> None:
    """Write the ``spans`` rows: a StoredSpan holds the columns in order (store_rows), the two ids aside.

    New spans are inserted, spans in ``stored`` (written before) upserted. The rows go into flat lists, no
    tuple per row kept alive (see ``store_bulk.execute_flat``).
    """
    resource_ids = {text: resources.get(conn, text) for text in {s.resource_json for s in unique}}
    values: list[object] = []
    again: list[object] = []
    extend = values.extend
    for i, s in zip(ids, unique, strict=True):
        if stored and (s.trace_id, s.span_id) in stored:
            again.extend((i, *s[:10], resource_ids[s.resource_json], *s[11:18]))
        else:
            extend((i, *s[:10], resource_ids[s.resource_json], *s[11:18]))
    execute_flat(conn, _INSERT_SPAN, values)
    execute_flat(conn, _UPSERT_SPAN, again)


def _insert_traces(conn: sqlite3.Connection, values: list[object], first_single: int, singles: int, now: int) -> None:
    """Write the summaries of traces none of whose spans was stored before this batch.

    Such a trace has no summary row, so they are inserted (``OR FAIL``: no statement journal, see
    ``_INSERT_SPAN``); a summary left without its spans (a store edited by hand) is replaced instead.
    """
    try:
        if singles:
            conn.execute(_SINGLE_SPAN_TRACES, (now, first_single, first_single + singles))
        execute_flat(conn, _NEW_TRACE, values.copy())  # execute_flat may pad the list it is given
    except sqlite3.IntegrityError:
        # FAIL kept the rows before the conflict: writing every row again replaces them too.
        if singles:
            conn.execute(_SINGLE_SPAN_TRACES_AGAIN, (now, first_single, first_single + singles))
        execute_flat(conn, _NEW_TRACE_AGAIN, values)


def write_spans(conn: sqlite3.Connection, spans: Sequence[StoredSpan], resources: ResourceIds) -> None:
    """Upsert ``spans`` and refresh the summaries of their traces; call inside a write transaction.

    Each step is a few multi-row statements over the whole batch (``store_bulk``): the loops run in SQLite,
    without the GIL, and the exporter thread waits to take the GIL back once per statement, so there are few:
    for a batch of new spans, the look-up, the spans, their text, and the trace summaries.
    """
    unique = list({(s.trace_id, s.span_id): s for s in spans}.values())  # a later copy in the same batch wins
    if not unique:
        return
    sizes = Counter(s.trace_id for s in unique)
    stored, next_id = _stored_ids(conn, list(sizes))
    seen = {trace_id for trace_id, _ in stored}
    # Traces of one new span with no evaluation result take the first ids, so one statement over that id range
    # writes their summaries (_SINGLE_SPAN_TRACES); the other spans follow in batch order, grouped by trace
    # (only those: a list per trace kept alive is work for the garbage collector).
    single = [s for s in unique if sizes[s.trace_id] == 1 and not s.evals and s.trace_id not in seen]
    first_single = next_id
    by_trace: defaultdict[str, list[StoredSpan]] = defaultdict(list)
    if len(single) < len(unique):
        single_ids = set(map(id, single))
        rest = [s for s in unique if id(s) not in single_ids]
        for s in rest:
            by_trace[s.trace_id].append(s)
        unique = single + rest
    ids = _row_ids(unique, stored, next_id)
    _insert_spans(conn, unique, ids, resources, stored)
    # A span written before (an enriched copy) gives up its earlier evaluation rows and searchable text; most
    # spans are new, and skipping their deletes saves two index probes each.
    again = [(s.trace_id, s.span_id) for s in unique if (s.trace_id, s.span_id) in stored]
    if again:
        conn.executemany("DELETE FROM evals WHERE trace_id = ? AND source_span_id = ?", again)
        # FTS5 has no upsert: the earlier copy's text goes first (the plain fallback table has none either way).
        conn.executemany("DELETE FROM span_text WHERE rowid = ?", [(stored[key],) for key in again])
    execute_bulk(
        conn,
        _INSERT_EVALS,
        [(s.trace_id, e.span_id, e.evaluator, e.outcome, e.source) for s in unique for e in s.evals],
    )
    text: list[object] = []
    extend = text.extend
    for row_id, s in zip(ids, unique, strict=True):
        if s.text:
            extend((row_id, s.trace_id, s.text))
    execute_flat(conn, _INSERT_TEXT, text)  # after the deletes: FTS5 has no upsert
    now = time.time_ns()
    new: list[object] = []
    for t, rows in by_trace.items():
        if t not in seen:
            new.extend(_new_trace_row(t, rows, now))
    _insert_traces(conn, new, first_single, len(single), now)
    conn.executemany(_REFRESH_TRACE, [_refresh_values(conn, t, now) for t in by_trace if t in seen])


@dataclass(frozen=True)
class RetentionResult:
    """What one retention pass deleted."""

    traces: int = 0
    spans: int = 0


def _delete_traces(conn: sqlite3.Connection, trace_ids: Sequence[str]) -> int:
    spans = 0
    for trace_id in trace_ids:
        conn.execute("DELETE FROM span_text WHERE rowid IN (SELECT id FROM spans WHERE trace_id = ?)", (trace_id,))
        spans += conn.execute("DELETE FROM spans WHERE trace_id = ?", (trace_id,)).rowcount
        conn.execute("DELETE FROM evals WHERE trace_id = ?", (trace_id,))
        conn.execute("DELETE FROM traces WHERE trace_id = ?", (trace_id,))
    return spans


def used_bytes(conn: sqlite3.Connection) -> int:
    """The bytes of the database's pages in use (its free pages left out)."""
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
    return int(page_size * pages)


def apply_retention(conn: sqlite3.Connection, max_age_s: float, max_bytes: int) -> RetentionResult:
    """Delete traces last written more than ``max_age_s`` ago, then the least recently written until the data fits.

    Age counts from when a trace was stored, not from its spans' timestamps: spans replayed or received from a
    host with a skewed clock are kept as long as any other. Runs inside a write transaction; ``0`` disables a
    limit. Deleting by trace keeps every listed trace whole.
    """
    deleted_traces = deleted_spans = 0
    if max_age_s > 0:
        cutoff = time.time_ns() - int(max_age_s * 1e9)
        old = [r[0] for r in conn.execute("SELECT trace_id FROM traces WHERE stored_at < ?", (cutoff,))]
        deleted_spans += _delete_traces(conn, old)
        deleted_traces += len(old)
    if max_bytes > 0:
        while used_bytes(conn) > max_bytes:
            total = conn.execute("SELECT count(*) FROM traces").fetchone()[0]
            if not total:
                break
            # Drop a tenth of what is over, at least 1% of the traces, so a pass ends in a few rounds.
            share = max(0.01, (1 - max_bytes / used_bytes(conn)) * 1.1)
            batch = [
                r[0]
                for r in conn.execute(
                    "SELECT trace_id FROM traces ORDER BY stored_at LIMIT ?", (max(1, int(total * share)),)
                )
            ]
            deleted_spans += _delete_traces(conn, batch)
            deleted_traces += len(batch)
    return RetentionResult(deleted_traces, deleted_spans)


def delete_oldest(conn: sqlite3.Connection, share: float) -> RetentionResult:
    """Delete the least recently written ``share`` of the traces (at least one); call inside a write transaction."""
    total = conn.execute("SELECT count(*) FROM traces").fetchone()[0]
    if not total:
        return RetentionResult()
    batch = [
        r[0]
        for r in conn.execute("SELECT trace_id FROM traces ORDER BY stored_at LIMIT ?", (max(1, int(total * share)),))
    ]
    return RetentionResult(len(batch), _delete_traces(conn, batch))
