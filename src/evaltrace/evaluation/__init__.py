"""Live evaluation: the Evaluator protocol, the span processor that runs evaluators, and score sinks.

Typical use goes through ``evaltrace.configure(evaluators=[...], sinks=[...])``; the pieces are public so a
hand-built OTel pipeline can use them too::

    processor = EvaluationSpanProcessor(
        downstream=[BatchSpanProcessor(exporter)],
        evaluators=[EvaluatorSpec(no_pii, span_kinds={"llm"}), EvaluatorSpec(helpful, trace_level=True)],
        sinks=[JsonlScoreSink("scores.jsonl")],
        hold_timeout_s=2.0,
    )
    tracer_provider.add_span_processor(processor)
"""

from __future__ import annotations

from evaltrace.evaluation.convert import evaluation_event_attributes, result_to_score, span_result_attributes
from evaltrace.evaluation.evaluator import (
    Evaluator,
    EvaluatorSpec,
    FunctionEvaluator,
    RetryableEvaluatorError,
    SkipEvaluation,
    coerce_output,
    evaluator,
)
from evaltrace.evaluation.limits import Limits
from evaltrace.evaluation.monitor import EvaluatorHealth, HealthStatus, ProductionMonitor, health_status
from evaltrace.evaluation.options import ProcessorOptions
from evaltrace.evaluation.processor import EvaluationSpanProcessor
from evaltrace.evaluation.runner import RunOptions, arun_evaluator, run_evaluator
from evaltrace.evaluation.sampling import ExportSampling
from evaltrace.evaluation.sinks import (
    JsonlScoreSink,
    LangfuseScoreSink,
    LocalStoreSessionSink,
    PhoenixScoreSink,
    RetryPolicy,
    ScoreSink,
    SinkResult,
)

__all__ = [
    "EvaluationSpanProcessor",
    "Evaluator",
    "EvaluatorHealth",
    "EvaluatorSpec",
    "ExportSampling",
    "FunctionEvaluator",
    "HealthStatus",
    "JsonlScoreSink",
    "LangfuseScoreSink",
    "Limits",
    "LocalStoreSessionSink",
    "PhoenixScoreSink",
    "ProcessorOptions",
    "ProductionMonitor",
    "RetryPolicy",
    "RetryableEvaluatorError",
    "RunOptions",
    "ScoreSink",
    "SinkResult",
    "SkipEvaluation",
    "arun_evaluator",
    "coerce_output",
    "evaluation_event_attributes",
    "evaluator",
    "health_status",
    "result_to_score",
    "run_evaluator",
    "span_result_attributes",
]
