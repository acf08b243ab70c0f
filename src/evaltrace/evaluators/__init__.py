"""Built-in evaluators (docs/evaluators.md): deterministic checks, LLM-judge and embedding metrics, rubrics.

Every evaluator is a plain object with ``name``, ``version``, ``threshold``, ``direction`` and
``evaluate(trace, case=None)``, returning an :class:`~evaltrace.schema.EvaluationResult` (judge-based ones
return an awaitable). They are pure functions of ``(trace, case)``: the same object runs online and offline.
"""

from __future__ import annotations

from evaltrace.evaluators.budgets import Cost, Latency, TokenBudget
from evaltrace.evaluators.classification import (
    Classification,
    ClassificationReport,
    ClassMetrics,
    classification_report,
    report_from_results,
)
from evaltrace.evaluators.encoding import EncodingGuardrail
from evaltrace.evaluators.looping import LoopingDetection, LoopingMetrics, looping_metrics
from evaltrace.evaluators.overlap import Bleu, MissingExtraError, Rouge
from evaltrace.evaluators.pii import ContactInfo, NoPII, PIILeakage, SensitiveData
from evaltrace.evaluators.structure import AgentSanity, JsonSchema
from evaltrace.evaluators.text import ContainsText, ExactMatch, Facts, Length, NotContains, Regex, TextMatching
from evaltrace.evaluators.tools import StepAlignment, ToolCalled, ToolEfficiency

__all__ = [
    "AgentSanity",
    "Bleu",
    "ClassMetrics",
    "Classification",
    "ClassificationReport",
    "ContactInfo",
    "ContainsText",
    "Cost",
    "EncodingGuardrail",
    "ExactMatch",
    "Facts",
    "JsonSchema",
    "Latency",
    "Length",
    "LoopingDetection",
    "LoopingMetrics",
    "MissingExtraError",
    "NoPII",
    "NotContains",
    "PIILeakage",
    "Regex",
    "Rouge",
    "SensitiveData",
    "StepAlignment",
    "TextMatching",
    "TokenBudget",
    "ToolCalled",
    "ToolEfficiency",
    "classification_report",
    "looping_metrics",
    "report_from_results",
]
