"""``configure()``: wire a TracerProvider, processors and exporters from keyword arguments and the environment.

The pipeline, in order of flow: ``StampingPipeline`` (session/user stamps) -> optional
``EvaluationSpanProcessor`` -> one batch processor per exporter (local store, OTLP, Langfuse, Phoenix, console,
user exporters), each exporter wrapped for redaction when asked. The pipeline hangs off one switchable
processor per provider, so calling ``configure()`` again swaps the whole pipeline (no duplicate exporters)
even on a provider the user set up themselves.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from evaltrace._internal import evals_env, exit_hooks, forks, settings, tracing
from evaltrace._internal.configure_args import check_configure_arguments
from evaltrace._internal.configure_pipeline import (
    LOCAL_STORE_MAX_BATCH,
    LOCAL_STORE_MAX_QUEUE,
    MAX_LENGTH_ENV,
    QUEUE_BYTES_ENV,
    _build_evaluation,
    _capture_settings,
    _collect_exporters,
    _export_processor,
    _queue_bytes,
    _redactor,
    _resource,
    _score_sinks,
    _session_store_sink,
    _UserExporter,
)
from evaltrace._internal.deferred_evaluation import DeferredEvaluation
from evaltrace._internal.export_queue import ExportQueue
from evaltrace.context import StampingPipeline
from evaltrace.exporters.store_options import LocalStoreOptions

# The constants: imported from here by the worker and the benchmarks (LOCAL_STORE_MAX_BATCH).
__all__ = [
    "LOCAL_STORE_MAX_BATCH",
    "LOCAL_STORE_MAX_QUEUE",
    "MAX_LENGTH_ENV",
    "QUEUE_BYTES_ENV",
    "EvaltraceHandle",
    "configure",
]

DEFAULT_SHUTDOWN_TIMEOUT_S = 6.0
"""The whole exit (evaluations, score deliveries, exports) ends by then: well inside the 10 s grace period that
``docker stop`` and Kubernetes give between SIGTERM and SIGKILL, leaving time for the interpreter's own teardown."""
EXIT_SHUTDOWN_SHARE = 0.3
"""Share of the exit deadline kept from the drain for the shutdown that follows it (at most EXIT_SHUTDOWN_RESERVE_S):
a sink whose backend hangs cannot spend it, so undelivered scores reach the dead-letter file in time."""
EXIT_SHUTDOWN_RESERVE_S = 2.0


class _SwitchableProcessor(SpanProcessor):
    """A processor whose delegate pipeline can be swapped atomically (a reconfigure replaces it).

    The delegate's own bound ``on_start`` / ``on_end`` are this instance's attributes, which the SDK's multi-processor
    finds before the class's methods: a span's start and end go straight into the pipeline, with no frame of this
    processor in between (one Python call fewer each). Each is one attribute read, so a concurrent swap still sees
    either pipeline, never half of one, as the single read of ``delegate`` guaranteed before.
    """

    def __init__(self) -> None:
        self._delegate: SpanProcessor | None = None
        vars(self).update(on_start=_no_start, on_end=_no_end)

    @property
    def delegate(self) -> SpanProcessor | None:
        """The pipeline spans go to now (None: nowhere)."""
        return self._delegate

    @delegate.setter
    def delegate(self, pipeline: SpanProcessor | None) -> None:
        self._delegate = pipeline
        if pipeline is None:
            vars(self).update(on_start=_no_start, on_end=_no_end)
        else:
            vars(self).update(on_start=pipeline.on_start, on_end=pipeline.on_end)

    def on_start(self, span: Span, parent_context: Any = None) -> None:  # shadowed per instance (see the class)
        delegate = self._delegate
        if delegate is not None:
            delegate.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:  # shadowed per instance (see the class)
        delegate = self._delegate
        if delegate is not None:
            delegate.on_end(span)

    def shutdown(self) -> None:
        delegate, self.delegate = self._delegate, None
        if delegate is not None:
            delegate.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        delegate = self._delegate
        return delegate.force_flush(timeout_millis) if delegate is not None else True


def _no_start(span: Span, parent_context: Any = None) -> None:
    """A switch with no pipeline: the span's start goes nowhere."""


def _no_end(span: ReadableSpan) -> None:
    """A switch with no pipeline: the span goes nowhere."""


@dataclass
class EvaltraceHandle:
    """What ``configure()`` returns: the provider in use and the means to flush and shut down the pipeline."""

    provider: TracerProvider
    pipeline: SpanProcessor
    exporter_names: list[str] = field(default_factory=list)
    _evaluation: Any = None  # the EvaluationSpanProcessor, or a DeferredEvaluation that builds it on first use
    shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S
    _shut: bool = False
    _user_exporters: list[_UserExporter] = field(default_factory=list)
    _export_queues: list[ExportQueue] = field(default_factory=list)
    _lost_reported: int = 0
    _flush_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def evaluation_processor(self) -> Any:
        """The evaluation processor (None with ``evaluation=False``); built now if ``configure()`` deferred it."""
        evaluation = self._evaluation
        return evaluation.processor() if isinstance(evaluation, DeferredEvaluation) else evaluation

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export (and evaluate) everything pending.

        Only this flush reports lost spans: the provider's ``force_flush`` (which instrumentations call too)
        says False only at its timeout, and reading losses there would hide them from this one.

        Returns:
            True when it all completed within the deadline and no span was lost (dropped, or its export failed)
            since this handle's previous ``force_flush``; the losses are counted in ``stats()["exporters"]``.
        """
        flushed = self.pipeline.force_flush(timeout_millis)
        lost = sum(queue.lost for queue in self._export_queues)
        with self._flush_lock:
            # (fewer than reported: a forked child, whose queues count from zero)
            clean, self._lost_reported = lost <= self._lost_reported, lost
        return flushed and clean

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Flush and release the pipeline; later spans go nowhere until ``configure()`` is called again.

        Args:
            timeout_s: Deadline for evaluations, score deliveries and exports (default ``shutdown_timeout_s``).
                Evaluations not finished by then are not evaluated (never a verdict); scores not delivered go
                to the dead-letter file; spans not exported are counted as lost in ``stats()``.
        """
        if self._shut:
            return
        self._shut = True
        for switch in _state.switches:
            if switch.delegate is self.pipeline:
                switch.delegate = None
        timeout = self.shutdown_timeout_s if timeout_s is None else timeout_s
        if self._evaluation is not None:  # first, with the deadline; the pipeline's call is then a no-op
            self._evaluation.shutdown(int(timeout * 1000))
        self.pipeline.shutdown()


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.handle: EvaltraceHandle | None = None
        self.switches: list[_SwitchableProcessor] = []
        self.own_provider: TracerProvider | None = None
        self.created: list[TracerProvider] = []  # every provider configure() made (the first may be global)
        self.atexit_registered = False
        self.exit_deadline: float | None = None
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a forked child: a new lock; the exit hooks registered in the parent stay and drain the child's pipeline.

        Each component of the pipeline re-initialises itself (``_internal/forks.py``).
        """
        self.lock = threading.Lock()
        self.exit_deadline = None


_state = _State()


def _switch_for(provider: TracerProvider) -> _SwitchableProcessor:
    switch: _SwitchableProcessor | None = getattr(provider, "_evaltrace_switch", None)
    if switch is None:
        switch = _SwitchableProcessor()
        provider.add_span_processor(switch)
        provider._evaltrace_switch = switch  # type: ignore[attr-defined]
        _state.switches.append(switch)
    return switch


def _choose_provider(resource: Resource, explicit: TracerProvider | None) -> TracerProvider:
    """Attach to the user's SDK provider if there is one; else create ours (global if none is set yet)."""
    if explicit is not None:
        return explicit
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider) and not any(current is p for p in _state.created):
        return current  # the application configured OTel itself: attach, don't fight it
    own = _state.own_provider
    if own is not None and own.resource.attributes == resource.attributes:
        return own
    provider = TracerProvider(resource=resource)
    if not isinstance(current, TracerProvider):
        trace.set_tracer_provider(provider)
    _state.own_provider = provider
    _state.created.append(provider)
    return provider


def configure(
    service_name: str | None = None,
    *,
    environment: str | None = None,
    otlp_endpoint: str | None = None,
    protocol: str | None = None,
    headers: dict[str, str] | str | None = None,
    langfuse: bool | None = None,
    phoenix: str | bool | None = None,
    phoenix_project: str | None = None,
    local_store: bool | str | Path | LocalStoreOptions | Mapping[str, Any] | None = None,
    console: bool = False,
    exporters: Sequence[SpanExporter] = (),
    capture_content: bool | None = None,
    max_attribute_length: int | None = None,
    redact: bool | Callable[[str], str] | Sequence[str | re.Pattern[str]] | None = None,
    evaluators: Sequence[Any] = (),
    sinks: Sequence[Any] | None = None,
    evaluation_options: dict[str, Any] | None = None,
    evaluation: bool | Literal["process"] = True,
    evaluation_provenance: bool | None = None,
    trace_judges: bool | None = None,
    tracer_provider: TracerProvider | None = None,
    batch: bool = True,
    shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
    handle_sigterm: bool = True,
    export_queue_max_bytes: int | str | None = None,
) -> EvaltraceHandle:
    """Set up tracing (and live evaluation) for this process; call again to replace the setup.

    With nothing configured, spans go to the local store (``.evaltrace/traces.sqlite3``), readable with
    ``evaltrace traces list``. Standard OTel environment variables (``OTEL_SERVICE_NAME``,
    ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT/PROTOCOL/HEADERS``) and ``LANGFUSE_*`` keys are honoured.

    Args:
        service_name: ``service.name`` (default: ``OTEL_SERVICE_NAME`` or OTel's default).
        environment: ``deployment.environment.name``.
        otlp_endpoint: OTLP endpoint (Jaeger, a collector...); HTTP gets ``/v1/traces`` appended.
        protocol: ``http/protobuf`` (default) or ``grpc``.
        headers: OTLP headers, a mapping or ``k=v,k2=v2``.
        langfuse: Export to Langfuse (default: when LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY are set).
        phoenix: Export to Phoenix: True (PHOENIX_COLLECTOR_ENDPOINT or localhost:6006) or its base URL.
        phoenix_project: Phoenix project (resource ``openinference.project.name``; default PHOENIX_PROJECT_NAME).
        local_store: True, False, a directory, or retention options (``LocalStoreOptions`` or a mapping with
            ``directory``, ``max_age`` such as ``"7d"``, ``max_bytes`` such as ``"1GB"``); default on when no
            other exporter is configured. Limits default to ``EVALTRACE_LOCAL_STORE_MAX_AGE`` /
            ``EVALTRACE_LOCAL_STORE_MAX_BYTES``, else 7 days and 1 GB. ``writer``: ``"process"`` (default: a
            writer process owns the database) or ``"thread"`` (``EVALTRACE_LOCAL_STORE_WRITER``).
        console: Also print one line per span to stderr.
        exporters: Further span exporters. Calling ``configure()`` again shuts down the ones it no longer lists;
            one passed again stays open (the old pipeline flushes into it, then the new one exports to it).
        capture_content: Record messages, arguments and results (default: on, unless
            OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT turns it off).
        max_attribute_length: Cap for each captured JSON value (0 = no cap).
        redact: True for built-in PII/secret masking; a list of regexes (str or compiled) masked as well as
            the built-ins; or a ``str -> str`` function such as ``evaltrace.exporters.Redactor(patterns, builtins=
            False)``. Applied to what leaves the process only (exported spans and their status, score sinks and
            dead-letter files, evaluation log events); evaluators see the real text.
        evaluators: Evaluators (or EvaluatorSpecs) run on spans as they end. When none are given, those named
            in ``OTEL_INSTRUMENTATION_GENAI_EVALS_EVALUATORS`` (catalogue names) run; with neither, nothing is
            evaluated (decorator-attached evaluators aside). The ``OTEL_INSTRUMENTATION_GENAI_EVALS_*`` /
            ``..._EVALUATION_*`` variables are validated on every call: see docs/evaluation.md "Environment".
        sinks: Score sinks receiving evaluation scores, in addition to those the configured backends bring (the
            Langfuse scores API, Phoenix span annotations). A sink with the same ``name`` as a backend's (e.g.
            your own ``LangfuseScoreSink``) replaces it; ``None`` and ``[]`` add nothing.
        evaluation_options: Extra keyword arguments for the EvaluationSpanProcessor (they win over the
            environment's queue size and workers).
        evaluation: Include the evaluation processor (default). It is nearly free while no evaluator applies,
            and it is what runs evaluators attached with ``@agent(evaluators=...)``; with no evaluator, sink or
            evaluation option it is built (importing the evaluation engine) only once a decorator attaches an
            evaluator or ``handle.evaluation_processor`` is used. ``"process"`` runs the
            evaluators in a child process instead of this process's threads (see docs/evaluation.md,
            "Evaluation in a separate process"); every evaluator must then be importable by reference.
        evaluation_provenance: Add the evaluator's version and type to every ``gen_ai.evaluation.result`` event
            (default: ``EVALTRACE_EVALUATION_PROVENANCE``, else off; the spec has no attribute for them yet).
        trace_judges: Trace each LLM-judge call as a trace of its own (root ``judge {evaluator}``, a
            ``chat {model}`` span with the judge's prompt and reply), named by the result's ``judge_trace_id``
            and never evaluated (default: ``EVALTRACE_TRACE_JUDGES``, else on). See docs/evaluation.md,
            "Following a judge's call".
        tracer_provider: Attach to this provider instead of the global/own one.
        batch: Batch exports (default); False exports each span as it ends, on its thread (tests, short scripts),
            counted in ``stats()`` as batched exports are.
        shutdown_timeout_s: Longest ``shutdown()`` (and the exit drain, at interpreter exit) waits for
            evaluations, score deliveries and exports (default 6 s: inside the 10 s ``docker stop`` and
            Kubernetes give between SIGTERM and SIGKILL; the exit drain leaves the last 30 %, at most 2 s, to the
            shutdown, which dead-letters the scores a hung backend did not take). What misses it is reported,
            never lost silently: see docs/reliability.md.
        handle_sigterm: Make SIGTERM exit cleanly (``SystemExit(143)``), so it flushes like a normal exit. Only
            when SIGTERM still has Python's default disposition (a server's own handler is left alone).
        export_queue_max_bytes: Bound of each exporter's queue by the estimated size of the spans it holds (in
            flight included), as bytes or a size such as ``"64MB"``; 0 = spans bound only. Default:
            ``EVALTRACE_EXPORT_QUEUE_MAX_BYTES``, else 256 MB. A span that would pass it is dropped and counted
            (``dropped_queue_bytes``), as one past the span bound (65,536 for the local store, 8,192 others).

    Returns:
        A handle with ``force_flush()`` and ``shutdown()`` (also called at interpreter exit).

    Raises:
        ConfigError: A setting is invalid; the message names it.
    """
    check_configure_arguments(locals())  # first: a wrong type is named before anything is built or replaced
    options = {
        "otlp_endpoint": otlp_endpoint, "protocol": protocol, "headers": headers, "langfuse": langfuse,
        "phoenix": phoenix, "local_store": local_store, "console": console, "exporters": exporters,
    }  # fmt: skip
    capture = _capture_settings(capture_content, max_attribute_length, trace_judges)
    queue_bytes = _queue_bytes(export_queue_max_bytes)
    evals = evals_env.read_evaluation_environment()  # validated on every call, used or not
    if not evaluators:
        evaluators = evals_env.build_evaluators(evals)
    evaluation_options = evals_env.apply_to_options(evals, evaluation_options, evaluation_provenance)
    if evaluation == "process":
        evaluation_options = {"engine": "process", **(evaluation_options or {})}
    redactor = _redactor(redact)
    collected = _collect_exporters(options)  # validates every setting before anything is replaced
    resource = _resource(service_name, environment, phoenix_project)

    downstream: list[SpanProcessor] = []
    if redactor:
        from evaltrace.exporters.redaction import RedactingSpanExporter
    for name, exporter in collected.named:
        wrapped = RedactingSpanExporter(exporter, redactor) if redactor else exporter
        downstream.append(
            _export_processor(name, wrapped, queue_bytes) if batch else ExportQueue(wrapped, name, synchronous=True)
        )
    score_sinks = _session_store_sink(_score_sinks(options, sinks), collected.named, evaluators)
    evaluator_processor: SpanProcessor | None = None
    if evaluation is True and not evaluators and not score_sinks and not evaluation_options:
        # Nothing to evaluate yet: the engine and the schema load when a decorator attaches an evaluator.
        evaluator_processor = DeferredEvaluation(
            lambda: _build_evaluation(downstream, (), (), None, redactor), downstream
        )
    elif evaluation or evaluators or score_sinks:
        evaluator_processor = _build_evaluation(downstream, evaluators, score_sinks, evaluation_options, redactor)
    # Context stamps, then evaluation (which forwards to the exporters) or the exporters: one processor, one call.
    pipeline = StampingPipeline([evaluator_processor] if evaluator_processor is not None else downstream)

    with _state.lock:
        previous = _state.handle
        provider = _choose_provider(resource, tracer_provider)
        _switch_for(provider)
        for switch in _state.switches:  # every provider we ever attached to now feeds the new pipeline
            switch.delegate = pipeline
        tracing.set_tracer_provider(provider)
        settings.replace(capture)
        handle = EvaltraceHandle(provider, pipeline, [name for name, _ in collected.named], evaluator_processor)
        handle.shutdown_timeout_s = shutdown_timeout_s
        handle._user_exporters = [e for _, e in collected.named if isinstance(e, _UserExporter)]
        handle._export_queues = [p for p in downstream if isinstance(p, ExportQueue)]
        _state.handle = handle
        if not _state.atexit_registered:
            exit_hooks.shutdown_at_exit(_shutdown_at_exit)
            exit_hooks.drain_before_executors_stop(_drain_at_exit)
            _state.atexit_registered = True
        if handle_sigterm:
            exit_hooks.exit_on_sigterm()
    if previous is not None:
        reused = {id(e.exporter) for e in handle._user_exporters}
        for old in previous._user_exporters:
            old.reused = id(old.exporter) in reused
        previous._shut = True
        previous.pipeline.shutdown()  # flushes the old exporters; new spans already go to the new pipeline
    return handle


def current_handle() -> EvaltraceHandle | None:
    """The handle of the setup in force, if ``configure()`` was called."""
    return _state.handle


def _drain_at_exit() -> None:
    """Finish evaluations and deliveries while thread pools still work; the rest waits for ``atexit``."""
    handle = _state.handle
    if handle is not None and not handle._shut:
        total = handle.shutdown_timeout_s
        _state.exit_deadline = time.monotonic() + total
        # The drain stops short of the deadline: the shutdown after it dead-letters what a hung backend holds and
        # stops the exporters, within the same deadline.
        reserve = min(EXIT_SHUTDOWN_RESERVE_S, total * EXIT_SHUTDOWN_SHARE)
        handle.force_flush(int((total - reserve) * 1000))


def _shutdown_at_exit() -> None:
    handle = _state.handle
    if handle is not None:
        # One deadline for the whole exit: what the drain used is not given again.
        deadline = _state.exit_deadline or time.monotonic() + handle.shutdown_timeout_s
        handle.shutdown(timeout_s=max(0.5, deadline - time.monotonic()))
