"""The out-of-process evaluation worker (``evaltrace worker``).

It receives OTLP trace exports (HTTP protobuf or JSON on ``/v1/traces``, optionally gRPC), rebuilds the SDK
spans, runs them through an :class:`~evaltrace.evaluation.EvaluationSpanProcessor`, forwards the enriched spans
to its exporters and the scores to its sinks. Behind a collector's ``loadbalancing`` exporter (routing by trace
id) several workers share the load; see ``collector/README.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaltrace.worker.decode import PayloadError, parse_request, spans_from_request
    from evaltrace.worker.loading import build_exporters, build_sinks, load_evaluators
    from evaltrace.worker.pipeline import WorkerPipeline
    from evaltrace.worker.service import EvaluationWorker

# Loaded on first use: ``evaltrace worker``'s argument parser reads the light ``limits`` and ``security``
# modules on every CLI start, and must not pull in protobuf, the SDK and the evaluation pipeline with them.
_EXPORTS = {
    "EvaluationWorker": "evaltrace.worker.service",
    "PayloadError": "evaltrace.worker.decode",
    "WorkerPipeline": "evaltrace.worker.pipeline",
    "build_exporters": "evaltrace.worker.loading",
    "build_sinks": "evaltrace.worker.loading",
    "load_evaluators": "evaltrace.worker.loading",
    "parse_request": "evaltrace.worker.decode",
    "spans_from_request": "evaltrace.worker.decode",
}

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


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'evaltrace.worker' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
