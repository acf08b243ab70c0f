"""Where stored traces are read from for re-judging: the local store, OTLP/JSON files, a Phoenix server.

Each source yields traces as ``(trace id, spans)``, the spans rebuilt as SDK ``ReadableSpan`` objects by the code
that already reads each format (the store's reader, the worker's OTLP decoder), so the mapping to a Trace is the
one live evaluation uses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from evaltrace.exceptions import ConfigError
from evaltrace.exporters.store_query import TraceFilter
from evaltrace.exporters.store_reader import LocalTraceStore
from evaltrace.exporters.store_summary import summarize_spans

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["OtlpJsonSource", "StoreSource", "TraceSource", "session_of"]


class TraceSource(Protocol):
    """Stored traces to re-judge."""

    in_store: bool
    """The traces are already in the local store the results go to (else their spans are written there too)."""

    def trace_ids(self) -> list[str]:
        """Every selected trace id, newest first where the source knows the order."""
        ...

    def spans(self, trace_id: str) -> list[ReadableSpan]:
        """The spans of one selected trace."""
        ...

    def session_trace_ids(self, session_id: str) -> list[str]:
        """Every trace of a session the source holds (a session is judged whole, not just its selected traces)."""
        ...

    def describe(self) -> str:
        """What was selected, stable across runs of the same command (part of the checkpoint's key)."""
        ...


def session_of(spans: Sequence[ReadableSpan]) -> str | None:
    """The session a trace belongs to: the root's ``session.id`` (or ``langfuse.session.id``), else the first span's.

    "First" by end order, ties by start time then span id: the rule the store's writer files a trace under
    (``store_summary.summarize``), so a session judged here is the one ``sessions list`` shows the trace in.
    """
    return summarize_spans(spans).session_id


@dataclass
class StoreSource:
    """Traces of the local store that a :class:`TraceFilter` (and optionally a list of trace ids) selects.

    Args:
        store: The store.
        where: The filters ``evaltrace traces list`` takes.
        trace_ids_given: Only these traces (full ids or unique prefixes); empty: every trace ``where`` selects.
        key: What the selection was written as (``--since 1d`` rather than the instant it meant), for the
            checkpoint's key; defaults to ``where`` itself.
    """

    store: LocalTraceStore
    where: TraceFilter = field(default_factory=TraceFilter)
    trace_ids_given: Sequence[str] = ()
    key: str | None = None
    in_store: bool = True

    def trace_ids(self) -> list[str]:
        """The selected trace ids, newest first.

        Raises:
            ConfigError: A given trace id is not hexadecimal, ambiguous, or not in the store.
        """
        selected = [summary.trace_id for summary in self.store.list_traces(where=self.where)]
        if not self.trace_ids_given:
            return selected
        wanted: list[str] = []
        for reference in self.trace_ids_given:
            try:
                full = self.store.resolve(reference)
            except LookupError as exc:  # TraceIdError, AmbiguousTraceIdError
                raise ConfigError("--trace", str(exc)) from None
            if full is None:
                raise ConfigError("--trace", f"no trace {reference!r} in {self.store.directory}")
            wanted.append(full)
        chosen = set(selected)
        return [t for t in dict.fromkeys(wanted) if t in chosen]

    def spans(self, trace_id: str) -> list[ReadableSpan]:
        """The trace's spans, by start time."""
        return self.store.spans(trace_id)

    def session_trace_ids(self, session_id: str) -> list[str]:
        """Every stored trace of the session, whatever the other filters."""
        return [s.trace_id for s in self.store.list_traces(where=TraceFilter(session_id=session_id))]

    def describe(self) -> str:
        """The store, the filters as written, and the trace ids."""
        where = self.key if self.key is not None else repr(self.where)
        return f"store:{self.store.directory.resolve()}|{where}|{','.join(self.trace_ids_given)}"


class OtlpJsonSource:
    """Traces in OTLP/JSON files: one ``ExportTraceServiceRequest`` per line, as ``traces export`` writes them.

    A file that holds a single request spread over several lines (pretty-printed) is read whole. Spans of one
    trace may be spread over lines and files; they are gathered by trace id.

    Raises:
        ConfigError: A file cannot be read or a line is not an OTLP/JSON trace request (named by file and line).
    """

    in_store = False

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.paths = [Path(p) for p in paths]
        self._traces: dict[str, list[ReadableSpan]] = {}
        self._sessions: dict[str, list[str]] | None = None  # session -> its traces, newest first (built once)
        for path in self.paths:
            self._read(path)

    def _read(self, path: Path) -> None:
        from evaltrace.worker.decode import PayloadError, parse_request, spans_from_request

        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError("--otlp-json", f"cannot read {path}: {exc}") from None
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if lines and not _is_json_object(lines[0][1]):
            lines = [(1, text)]  # one pretty-printed request
        for number, line in lines:
            try:
                spans = spans_from_request(parse_request(line.encode(), "application/json"))
            except PayloadError as exc:
                raise ConfigError("--otlp-json", f"{path}:{number}: {exc.reason}") from None
            for span in spans:
                assert span.context is not None  # the decoder refuses spans without ids
                self._traces.setdefault(f"{span.context.trace_id:032x}", []).append(span)

    def trace_ids(self) -> list[str]:
        """Every trace id in the files, newest first."""
        return sorted(self._traces, key=lambda t: -min(s.start_time or 0 for s in self._traces[t]))

    def spans(self, trace_id: str) -> list[ReadableSpan]:
        """The trace's spans, by start time."""
        return sorted(self._traces.get(trace_id, []), key=lambda s: s.start_time or 0)

    def session_trace_ids(self, session_id: str) -> list[str]:
        """The traces of the files that belong to the session.

        From an index of every trace's session, built on the first call: a scan of all the traces per session
        made session scope quadratic in the files' traces.
        """
        if self._sessions is None:
            self._sessions = {}
            for trace_id in self.trace_ids():
                session = session_of(self._traces[trace_id])
                if session is not None:
                    self._sessions.setdefault(session, []).append(trace_id)
        return list(self._sessions.get(session_id, ()))

    def describe(self) -> str:
        """The files, by absolute path."""
        return "otlp-json:" + ",".join(str(p.resolve()) for p in self.paths)


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False
