"""Score sinks: where scores go besides the spans (Langfuse, Phoenix, a JSONL file), and their worker."""

from __future__ import annotations

from evaltrace.evaluation.sinks.base import ScoreSink, SinkResult
from evaltrace.evaluation.sinks.deadletter import read_dead_letters, write_dead_letters
from evaltrace.evaluation.sinks.jsonl import JsonlScoreSink
from evaltrace.evaluation.sinks.langfuse import LangfuseScoreSink, langfuse_score_body
from evaltrace.evaluation.sinks.local_store import LocalStoreSessionSink
from evaltrace.evaluation.sinks.phoenix import PhoenixScoreSink, phoenix_annotation
from evaltrace.evaluation.sinks.worker import RetryPolicy, SinkStats, SinkWorker

__all__ = [
    "JsonlScoreSink",
    "LangfuseScoreSink",
    "LocalStoreSessionSink",
    "PhoenixScoreSink",
    "RetryPolicy",
    "ScoreSink",
    "SinkResult",
    "SinkStats",
    "SinkWorker",
    "langfuse_score_body",
    "phoenix_annotation",
    "read_dead_letters",
    "write_dead_letters",
]
