"""The out-of-process evaluation worker (``evaltrace worker``).

It receives OTLP trace exports (HTTP protobuf or JSON on ``/v1/traces``, optionally gRPC), rebuilds the SDK
spans, runs them through an :class:`~evaltrace.evaluation.EvaluationSpanProcessor`, forwards the enriched spans
to its exporters and the scores to its sinks. Behind a collector's ``loadbalancing`` exporter (routing by trace
id) several workers share the load; see ``collector/README.md``.
"""

from __future__ import annotations

from evaltrace.worker.decode import PayloadError, parse_request, spans_from_request
from evaltrace.worker.loading import build_exporters, build_sinks, load_evaluators
from evaltrace.worker.pipeline import WorkerPipeline
from evaltrace.worker.service import EvaluationWorker

__all__ = [
    "EvaluationWorker",
    "PayloadError",
    "WorkerPipeline",
    "build_exporters",
    "build_sinks",
    "load_evaluators",
    "parse_request",
    "spans_from_request",
]
