"""Default evaluators of ``evaltrace worker`` when ``--evaluators`` is not given: cheap, deterministic checks.

``evaltrace worker --evaluators evaltrace.worker.defaults:EVALUATORS`` names this list explicitly.
"""

from __future__ import annotations

from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec
from evaltrace.evaluators import AgentSanity, EncodingGuardrail, LoopingDetection, NoPII

EVALUATORS = [
    EvaluatorSpec(NoPII(), span_kinds={semconv.KIND_LLM, semconv.KIND_AGENT}),
    EvaluatorSpec(EncodingGuardrail(), span_kinds={semconv.KIND_LLM}),
    EvaluatorSpec(AgentSanity(), trace_level=True),
    EvaluatorSpec(LoopingDetection(), trace_level=True),
]
"""Per-span PII and encoding checks on LLM/agent spans; agent sanity and looping over each whole trace."""
