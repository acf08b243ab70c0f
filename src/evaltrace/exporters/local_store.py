"""The embedded default backend: spans as JSON Lines under ``.evaltrace/traces/``, and a reader for them.

One file per day (``YYYY-MM-DD.jsonl``) or per run (``file_name=``). Each span is one line written with a
single ``write`` call under a lock, so concurrent exports from one process never interleave lines.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from evaltrace._internal import forks, semconv
from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.private_files import make_private_dirs, private_opener
from evaltrace.exceptions import EvaltraceError
from evaltrace.exporters.span_json import span_from_dict, span_to_dict

DEFAULT_DIRECTORY = Path(".evaltrace")
_TRACE_ID = re.compile(r"[0-9a-f]{1,32}")


class TraceIdError(EvaltraceError, LookupError):
    """A trace reference that is not a trace id or a prefix of one (32 hexadecimal digits at most)."""


def check_trace_id(reference: str, argument: str = "trace id") -> str:
    """Return ``reference`` lower-cased when it is a trace id or a prefix of one.

    Trace ids are only ever compared with what the store holds, never used to build a path; checking them still
    turns ``../x`` or ``/etc/passwd`` into a clear error instead of a silent "not found".

    Raises:
        TraceIdError: It holds anything but hexadecimal digits, or more than 32 of them.
    """
    lowered = reference.lower()
    if not _TRACE_ID.fullmatch(lowered):
        raise TraceIdError(f"{argument}: {reference!r} is not a trace id (up to 32 hexadecimal digits)")
    return lowered


class LocalStoreExporter(SpanExporter):
    """Appends every exported span as one JSON line to ``<directory>/traces/<day or run>.jsonl``.

    Files are created ``0600`` and the folders evaltrace creates ``0700``: spans hold prompts and outputs.
    """

    def __init__(self, directory: str | Path = DEFAULT_DIRECTORY, file_name: str | None = None) -> None:
        """Create the exporter.

        Args:
            directory: Store root (created on first export).
            file_name: Fixed file name (e.g. a run id); default is one file per UTC day.
        """
        self.traces_dir = Path(directory) / "traces"
        self._file_name = file_name
        self._lock = threading.Lock()
        self._closed = False
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a forked child: a new lock (the parent's export thread may have held this one at the fork)."""
        self._lock = threading.Lock()

    def _path(self) -> Path:
        name = self._file_name or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
        return self.traces_dir / (name if name.endswith(".jsonl") else f"{name}.jsonl")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Append ``spans``; a failure is logged and reported, never raised."""
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            payload = "".join(json.dumps(span_to_dict(s), ensure_ascii=False, default=str) + "\n" for s in spans)
            with self._lock:
                make_private_dirs(self.traces_dir)
                with open(self._path(), "a", encoding="utf-8", opener=private_opener) as f:
                    f.write(payload)
        except Exception:
            log_internal_error("writing spans to the local store")
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Stop accepting spans."""
        self._closed = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Every export is written through; nothing to flush."""
        return True


@dataclass(frozen=True)
class TraceSummary:
    """One line of ``evaltrace traces list``."""

    trace_id: str
    root_name: str
    start_time: int
    duration_ms: float
    span_count: int
    error: bool
    service_name: str


class LocalTraceStore:
    """Reads traces back from a local store directory."""

    def __init__(self, directory: str | Path = DEFAULT_DIRECTORY) -> None:
        """Open the store rooted at ``directory`` (which may not exist yet)."""
        self.traces_dir = Path(directory) / "traces"

    def _records(self) -> Iterator[dict[str, object]]:
        if not self.traces_dir.is_dir():
            return
        for path in sorted(self.traces_dir.glob("*.jsonl")):
            with path.open(encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a torn last line of a crashed writer: skip it, keep the rest

    def spans(self, trace_id: str) -> list[ReadableSpan]:
        """All spans of the trace whose id is ``trace_id`` or starts with it (the latest copy of each span).

        Raises:
            TraceIdError: ``trace_id`` is not hexadecimal (:func:`check_trace_id`).
            LookupError: The prefix matches several traces.
        """
        trace_id = check_trace_id(trace_id)
        matches = {str(r["trace_id"]) for r in self._records() if str(r["trace_id"]).startswith(trace_id)}
        if len(matches) > 1:
            raise LookupError(f"trace id prefix {trace_id!r} is ambiguous ({len(matches)} traces)")
        by_span: dict[str, dict[str, object]] = {}
        for record in self._records():
            if record["trace_id"] in matches:
                by_span[str(record["span_id"])] = record  # a later copy (enriched) replaces an earlier one
        return sorted((span_from_dict(r) for r in by_span.values()), key=lambda s: s.start_time or 0)

    def list_traces(self, limit: int | None = None) -> list[TraceSummary]:
        """Summaries of the stored traces, newest first."""
        spans_by_trace: dict[str, dict[str, dict[str, object]]] = {}
        for record in self._records():
            spans_by_trace.setdefault(str(record["trace_id"]), {})[str(record["span_id"])] = record
        summaries = [_summarise(tid, list(spans.values())) for tid, spans in spans_by_trace.items()]
        summaries.sort(key=lambda s: s.start_time, reverse=True)
        return summaries[:limit] if limit else summaries


def _is_error(record: dict[str, object]) -> bool:
    status = record.get("status")
    return isinstance(status, dict) and status.get("code") == "ERROR"


def _is_evaluation(record: dict[str, object]) -> bool:
    """A late ``evaluation`` span: its ERROR is an evaluation that errored, not the application's failure."""
    attributes = record.get("attributes")
    return isinstance(attributes, dict) and attributes.get(semconv.EVALTRACE_SPAN_KIND) == semconv.KIND_EVALUATION


def _summarise(trace_id: str, records: list[dict[str, object]]) -> TraceSummary:
    ids = {r["span_id"] for r in records}
    roots = [r for r in records if r.get("parent_span_id") not in ids] or records
    root = min(roots, key=lambda r: int(str(r["start_time"] or 0)))
    start = int(str(root["start_time"] or 0))
    end = int(str(root["end_time"] or start))
    resource = root.get("resource")
    service = str(resource.get("service.name", "")) if isinstance(resource, dict) else ""
    return TraceSummary(
        trace_id=trace_id,
        root_name=str(root["name"]),
        start_time=start,
        duration_ms=(end - start) / 1e6,
        span_count=len(records),
        error=any(_is_error(r) and not _is_evaluation(r) for r in records),
        service_name=service,
    )
