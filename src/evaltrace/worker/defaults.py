"""Default evaluators of ``evaltrace worker`` when ``--evaluators`` is not given: cheap, deterministic checks.

``evaltrace worker --evaluators evaltrace.worker.defaults:EVALUATORS`` names this list explicitly.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec
from evaltrace.evaluators import AgentSanity, EncodingGuardrail, LoopingDetection, NoPII

# The built-in evaluators declare ``version: str``; the Evaluator protocol has a mutable ``str | None``
# attribute, which mypy treats as invariant, hence the Any.
_no_pii: Any = NoPII()
_encoding: Any = EncodingGuardrail()
_sanity: Any = AgentSanity()
_looping: Any = LoopingDetection()

EVALUATORS = [
    EvaluatorSpec(_no_pii, span_kinds={semconv.KIND_LLM, semconv.KIND_AGENT}),
    EvaluatorSpec(_encoding, span_kinds={semconv.KIND_LLM}),
    EvaluatorSpec(_sanity, trace_level=True),
    EvaluatorSpec(_looping, trace_level=True),
]
"""Per-span PII and encoding checks on LLM/agent spans; agent sanity and looping over each whole trace."""
