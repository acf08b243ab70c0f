"""The parts ``configure()`` builds its pipeline from (split from :mod:`evaltrace.config`).

Settings read from the arguments and the environment, the exporters and their export queues, the score sinks the
backends bring, and the evaluation processor.

:mod:`evaltrace.config` re-exports the names imported from elsewhere. What is imported here is
what ``configure()`` imported already, and the evaluation engine, the local store and redaction are still imported
only inside the functions that need them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from evaltrace._internal import backends, semconv, settings
from evaltrace._internal.export_queue import DEFAULT_MAX_QUEUE_BYTES, ExportQueue
from evaltrace._internal.jsonutil import DEFAULT_MAX_LENGTH
from evaltrace._internal.otlp_settings import resolve_otlp
from evaltrace.exceptions import ConfigError
from evaltrace.exporters.console import ConsoleSpanExporter
from evaltrace.exporters.store_options import DEFAULT_DIRECTORY, parse_size, resolve_store_options

if TYPE_CHECKING:
    # Imported where used: a configuration without the local store or redaction loads neither (the store's
    # client, reader and importer, sqlite3, orjson; the PII patterns), about 150M instructions of start-up.
    from evaltrace.exporters.redaction import RedactFunction

MAX_LENGTH_ENV = "EVALTRACE_MAX_ATTRIBUTE_LENGTH"
QUEUE_BYTES_ENV = "EVALTRACE_EXPORT_QUEUE_MAX_BYTES"
LOCAL_STORE_MAX_QUEUE = 65_536
# Per-batch costs (a commit's pages, one statement per table) are shared by more spans: ~10% less per span.
LOCAL_STORE_MAX_BATCH = 8192


class _UserExporter(SpanExporter):
    """A user's exporter in one pipeline; when the next ``configure()`` reuses it, that pipeline's shutdown spares it.

    Shutting down a replaced pipeline shuts down its exporters, and a shut exporter drops every later span: without
    this, ``configure(exporters=[x])`` twice would silently lose everything after the second call.
    """

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter
        self.reused = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.exporter.export(spans)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        # The batch processor has already exported what it held; the new pipeline owns the exporter now.
        if self.reused:
            self.exporter.force_flush()
        else:
            self.exporter.shutdown()


def _resource(service_name: str | None, environment: str | None, phoenix_project: str | None) -> Resource:
    attributes: dict[str, str] = {}
    if service_name:
        attributes[semconv.SERVICE_NAME] = service_name
    project = phoenix_project or os.environ.get("PHOENIX_PROJECT_NAME")
    if project:
        attributes[semconv.OPENINFERENCE_PROJECT_NAME] = project
    env = environment or os.environ.get("EVALTRACE_ENVIRONMENT")
    if env:
        attributes[semconv.DEPLOYMENT_ENVIRONMENT_NAME] = env
    return Resource.create(attributes)


def _capture_settings(
    capture_content: bool | None, max_attribute_length: int | None, trace_judges: bool | None = None
) -> settings.CaptureSettings:
    if max_attribute_length is None and os.environ.get(MAX_LENGTH_ENV):
        try:
            max_attribute_length = int(os.environ[MAX_LENGTH_ENV])
        except ValueError as exc:
            raise ConfigError(MAX_LENGTH_ENV, f"expected an integer, got {os.environ[MAX_LENGTH_ENV]!r}") from exc
        if max_attribute_length < 0:
            raise ConfigError(MAX_LENGTH_ENV, f"must be >= 0 (0 = no cap), got {max_attribute_length}")
    return settings.CaptureSettings(
        capture_content=settings.capture_content_from_env() if capture_content is None else capture_content,
        max_attribute_length=DEFAULT_MAX_LENGTH if max_attribute_length is None else max_attribute_length,
        trace_judges=settings.trace_judges_from_env() if trace_judges is None else trace_judges,
    )


def _queue_bytes(value: int | str | None) -> int:
    """``export_queue_max_bytes``, else ``EVALTRACE_EXPORT_QUEUE_MAX_BYTES``, else the default (0 = no byte bound)."""
    if isinstance(value, str):
        return parse_size(value.strip(), "export_queue_max_bytes")
    if value is not None:
        return value
    raw = os.environ.get(QUEUE_BYTES_ENV, "").strip()
    return parse_size(raw, QUEUE_BYTES_ENV) if raw else DEFAULT_MAX_QUEUE_BYTES


def _redactor(redact: bool | RedactFunction | Sequence[str | re.Pattern[str]] | None) -> RedactFunction | None:
    if redact is None or redact is False:
        return None
    if callable(redact):
        return redact
    from evaltrace.exporters.redaction import Redactor, mask_pii

    if redact is True:
        return mask_pii
    if isinstance(redact, list | tuple):
        try:
            return Redactor(patterns=redact)
        except (TypeError, re.error) as exc:
            raise ConfigError("redact", f"invalid pattern: {exc}") from exc
    raise ConfigError(
        "redact",
        f"expected True, False, a list of regex patterns or a str -> str callable, got {type(redact).__name__}",
    )


@dataclass
class _Exporters:
    named: list[tuple[str, SpanExporter]] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)

    def add_target(self, target: backends.ExporterTarget) -> None:
        if target.key() not in self.seen:  # e.g. Langfuse given both by env and as the OTLP endpoint
            self.seen.add(target.key())
            self.named.append((target.name, target.build()))


def _collect_exporters(
    options: dict[str, Any],
) -> _Exporters:
    exporters = _Exporters()
    # Named backends first: if the generic OTLP endpoint points at the same URL, the named target (with its
    # auth headers) must be the one kept by the de-duplication.
    langfuse = backends.resolve_langfuse(options["langfuse"])
    if langfuse is not None:
        exporters.add_target(backends.langfuse_target(langfuse))
    phoenix = backends.resolve_phoenix(options["phoenix"])
    if phoenix is not None:
        exporters.add_target(backends.phoenix_target(phoenix))
    otlp = resolve_otlp(options["otlp_endpoint"], options["protocol"], options["headers"])
    if otlp is not None:
        exporters.add_target(backends.otlp_target(otlp))
    for index, exporter in enumerate(options["exporters"]):
        exporters.named.append((f"custom[{index}]", _UserExporter(exporter)))
    local = options["local_store"]
    if local is None and not exporters.named:
        local = True  # the default when nothing else receives the spans
    if local is not None and local is not False:  # True, a directory, a mapping or LocalStoreOptions
        from evaltrace.exporters.local_store import LocalStoreExporter

        store = LocalStoreExporter(DEFAULT_DIRECTORY if local is True else resolve_store_options(local))
        exporters.named.append(("local_store", store))
    if options["console"]:
        exporters.named.append(("console", ConsoleSpanExporter()))
    return exporters


def _score_sinks(options: dict[str, Any], sinks: Sequence[Any] | None) -> list[Any]:
    """The sinks the backends bring, then the user's; a user sink named like a backend's replaces it."""
    given = list(sinks or ())
    return [*_backend_sinks(options, skip={getattr(sink, "name", None) for sink in given}), *given]


def _session_store_sink(sinks: list[Any], named: Sequence[tuple[str, Any]], evaluators: Sequence[Any]) -> list[Any]:
    """``sinks`` plus the local store's session-score sink (session scores belong to no span the store reads)."""
    store = next((exporter for name, exporter in named if name == "local_store"), None)
    if store is None or not any(getattr(item, "scope", None) == "session" for item in evaluators):
        return sinks  # the common case: the evaluation engine's sink module is not even imported
    from evaltrace.evaluation.sinks.local_store import with_session_store

    return with_session_store(sinks, store.directory, evaluators)


def _backend_sinks(options: dict[str, Any], skip: set[str | None]) -> list[Any]:
    """Score sinks implied by the backends (Langfuse's scores API, Phoenix span annotations), but not ``skip``."""
    sinks: list[Any] = []
    langfuse = backends.resolve_langfuse(options["langfuse"])
    phoenix = backends.resolve_phoenix(options["phoenix"])
    if langfuse is None and phoenix is None:  # the common case: no need to load the evaluation engine for it
        return sinks
    from evaltrace.evaluation import LangfuseScoreSink, PhoenixScoreSink

    if langfuse is not None and LangfuseScoreSink.name not in skip:
        sinks.append(LangfuseScoreSink(langfuse.host, langfuse.public_key, langfuse.secret_key))
    if phoenix is not None and PhoenixScoreSink.name not in skip:
        sinks.append(PhoenixScoreSink(phoenix))
    return sinks


def _export_processor(name: str, exporter: SpanExporter, max_bytes: int) -> SpanProcessor:
    """An :class:`ExportQueue` per exporter: bounded by spans and bytes, every lost span counted."""
    if name == "local_store":
        # A local file takes a burst at disk speed: size the queue so a burst it absorbs on average loses nothing.
        # Its batches are written every 0.5 s, which bounds what a SIGKILL loses to about the last second.
        return ExportQueue(
            exporter,
            name,
            max_queue_size=LOCAL_STORE_MAX_QUEUE,
            max_batch_size=LOCAL_STORE_MAX_BATCH,
            schedule_delay_s=0.5,
            max_queue_bytes=max_bytes,
        )
    return ExportQueue(exporter, name, max_queue_bytes=max_bytes)


def _build_evaluation(
    downstream: list[SpanProcessor],
    evaluators: Sequence[Any],
    sinks: Sequence[Any],
    opts: Any,
    redactor: RedactFunction | None = None,
) -> Any:
    from evaltrace.evaluation import EvaluationSpanProcessor

    # Scores and log records leave the process too: the processor redacts them where it hands them out.
    options = {"redactor": redactor, **(opts or {})} if redactor is not None else (opts or {})
    return EvaluationSpanProcessor(downstream=downstream, evaluators=list(evaluators), sinks=list(sinks), **options)
