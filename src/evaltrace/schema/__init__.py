"""Pydantic models of the data model (data-model.md parts A-D); no OpenTelemetry imports.

Every model ignores unknown fields so files written by newer 1.x releases load; persisted models carry
``schema_version`` and reject other major versions.
"""

from __future__ import annotations

from evaltrace.schema._base import SCHEMA_VERSION, UtcDatetime, utcnow
from evaltrace.schema.artifacts import FileDiff, FileEntry, FileManifest, FilesystemArtifact, WorkspaceKind
from evaltrace.schema.conversation import Conversation, Turn, turn_user_input
from evaltrace.schema.evaluation import (
    BatchMetadata,
    BatchStatus,
    Evaluation,
    EvaluationBatch,
    EvaluationConfig,
    EvaluationErrorInfo,
    EvaluationStatus,
    MultiEvaluationResult,
    RetryConfig,
    SummaryMethod,
    new_evaluation_id,
)
from evaltrace.schema.results import EvaluationResult
from evaltrace.schema.rubric import (
    DEFAULT_AGENT_RUBRIC,
    PASS_THRESHOLD,
    Rubric,
    RubricDimension,
    RubricLevel,
    RubricResult,
)
from evaltrace.schema.runs import (
    ComparisonReport,
    EvaluatorRollup,
    EvaluatorVariantRollup,
    RunSummary,
    VariantDelta,
    VariantSummary,
)
from evaltrace.schema.scores import Score, ScoreCategory, ScoreConfig, ScoreDataType, ScoreSource, score_id
from evaltrace.schema.trace import (
    TRACE_ERROR_TYPES,
    EvalCase,
    ExpectedBehavior,
    LlmStep,
    Role,
    RunVariant,
    SimulatedUser,
    StopWhen,
    ToolCall,
    ToolResult,
    Trace,
    TraceError,
    TraceErrorType,
    TraceMessage,
    TraceMetrics,
    TraceOutput,
    WorkspaceSpec,
    derive_tool_views,
)

__all__ = [
    "BatchMetadata",
    "BatchStatus",
    "ComparisonReport",
    "Conversation",
    "DEFAULT_AGENT_RUBRIC",
    "EvalCase",
    "Evaluation",
    "EvaluationBatch",
    "EvaluationConfig",
    "EvaluationErrorInfo",
    "EvaluationResult",
    "EvaluationStatus",
    "EvaluatorRollup",
    "EvaluatorVariantRollup",
    "ExpectedBehavior",
    "FileDiff",
    "FileEntry",
    "FileManifest",
    "FilesystemArtifact",
    "LlmStep",
    "MultiEvaluationResult",
    "PASS_THRESHOLD",
    "RetryConfig",
    "Role",
    "Rubric",
    "RubricDimension",
    "RubricLevel",
    "RubricResult",
    "RunSummary",
    "RunVariant",
    "SCHEMA_VERSION",
    "Score",
    "ScoreCategory",
    "ScoreConfig",
    "ScoreDataType",
    "ScoreSource",
    "SimulatedUser",
    "StopWhen",
    "SummaryMethod",
    "TRACE_ERROR_TYPES",
    "ToolCall",
    "ToolResult",
    "Trace",
    "TraceError",
    "TraceErrorType",
    "TraceMessage",
    "TraceMetrics",
    "TraceOutput",
    "Turn",
    "UtcDatetime",
    "VariantDelta",
    "VariantSummary",
    "WorkspaceKind",
    "WorkspaceSpec",
    "derive_tool_views",
    "new_evaluation_id",
    "score_id",
    "turn_user_input",
    "utcnow",
]
