"""Compliance tags: which evaluation standard each catalogue evaluator gives evidence for.

The standards are those of the evaluator catalogue's compliance table: six characteristics of trustworthy AI
from the NIST AI Risk Management Framework, and three model-risk practices from the Federal Reserve's SR 11-7
guidance. The catalogue names the standards but not, evaluator by evaluator, which one each serves; the mapping
below is evaltrace's reading of what each evaluator measures:

- answer quality against expectations (correctness, similarity, matching, rubric grades): *Valid and Reliable*
  and *Outcomes Analysis* (outputs compared with actual outcomes);
- grounding and citations (faithfulness, hallucination, citation accuracy, retrieval): also *Accountable and
  Transparent* (an answer traceable to its sources);
- leaks of personal or sensitive data: *Privacy Enhanced* and *Secure and Resilient*;
- toxicity, sexism, stereotypes, bias: *Safe* and, for bias, *Fair*;
- guardrails on the output's form (encoding, schema): *Secure and Resilient* / *Valid and Reliable*;
- budgets, tool health, loops, session checks: *Ongoing Monitoring* and *Secure and Resilient*;
- model-level measures (perplexity, GPTScore): *Conceptual Soundness*.

``evaltrace evaluators list`` and the run report show these tags; :func:`compliance_tags` gives them for a name.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["COMPLIANCE_TAGS", "STANDARDS", "compliance_tags"]

SAFE = "Safe"
SECURE = "Secure and Resilient"
PRIVACY = "Privacy Enhanced"
FAIR = "Fair"
ACCOUNTABLE = "Accountable and Transparent"
VALID = "Valid and Reliable"
SOUNDNESS = "Conceptual Soundness"
MONITORING = "Ongoing Monitoring"
OUTCOMES = "Outcomes Analysis"

STANDARDS: Mapping[str, str] = MappingProxyType(
    {
        SAFE: "NIST",
        SECURE: "NIST",
        PRIVACY: "NIST",
        FAIR: "NIST",
        ACCOUNTABLE: "NIST",
        VALID: "NIST",
        SOUNDNESS: "SR 11-7",
        MONITORING: "SR 11-7",
        OUTCOMES: "SR 11-7",
    }
)
"""Standard -> the framework it comes from (the catalogue's compliance table), in the table's order."""

_QUALITY = (VALID, OUTCOMES)
_GROUNDED = (VALID, ACCOUNTABLE, OUTCOMES)
_RETRIEVAL = (VALID, ACCOUNTABLE)
_PRIVATE = (PRIVACY, SECURE)
_OPERATIONS = (MONITORING, SECURE)
_TOOLS = (VALID, ACCOUNTABLE)

COMPLIANCE_TAGS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "agent_rubric": (VALID, ACCOUNTABLE, OUTCOMES),
        "agent_sanity": (VALID, SECURE),
        "answer_correctness": _QUALITY,
        "answer_relevancy": _QUALITY,
        "answer_relevancy_sentences": _QUALITY,
        "bleu": (*_QUALITY, SOUNDNESS),
        "byop": _QUALITY,
        "citation_accuracy": _GROUNDED,
        "classification": _QUALITY,
        "completeness": _QUALITY,
        "contact_info": _PRIVATE,
        "contains_text": _QUALITY,
        "context_mrr": _RETRIEVAL,
        "context_precision": _RETRIEVAL,
        "context_recall": _RETRIEVAL,
        "context_relevancy": _RETRIEVAL,
        "context_relevancy_soft_precision": _RETRIEVAL,
        "context_relevancy_soft_recall": _RETRIEVAL,
        "conversation_completeness": _QUALITY,
        "conversation_relevancy": _QUALITY,
        "cost": _OPERATIONS,
        "encoding_guardrail": (SECURE, VALID),
        "exact_match": _QUALITY,
        "fact_check": _GROUNDED,
        "facts": _QUALITY,
        "factual_accuracy": _GROUNDED,
        "fairness_bias": (FAIR, SAFE),
        "faithfulness": _GROUNDED,
        "files_changed": (ACCOUNTABLE, SAFE),
        "gptscore": (SOUNDNESS, VALID),
        "gptscore_question_answering": (SOUNDNESS, VALID),
        "gptscore_summarization": (SOUNDNESS, VALID),
        "gptscore_summarization_with_reference": (SOUNDNESS, VALID, OUTCOMES),
        "gptscore_translation": (SOUNDNESS, VALID),
        "groundedness": _GROUNDED,
        "hallucination": (*_GROUNDED, SAFE),
        "json_schema": (VALID, SECURE),
        "knowledge_retention": (VALID,),
        "language_mismatch": (VALID,),
        "latency": _OPERATIONS,
        "length": (VALID,),
        "llm_judge": _QUALITY,
        "looping_detection": _OPERATIONS,
        "must_create_files": (VALID, OUTCOMES),
        "must_modify_files": (VALID, OUTCOMES),
        "must_not_modify_files": (SAFE, SECURE),
        "not_contains": (VALID, SAFE),
        "perplexity": (SOUNDNESS,),
        "pii_leakage": _PRIVATE,
        "ragas": _GROUNDED,
        "regex": (VALID,),
        "repeated_user_question": (MONITORING, VALID),
        "role_adherence": (SAFE, VALID),
        "rouge": (*_QUALITY, SOUNDNESS),
        "semantic_similarity": _QUALITY,
        "semantic_similarity_sentences": _QUALITY,
        "sensitive_data": _PRIVATE,
        "session_budget": _OPERATIONS,
        "sexism": (SAFE, FAIR),
        "source_quality": (ACCOUNTABLE, VALID),
        "step_alignment": _TOOLS,
        "step_budget": _OPERATIONS,
        "stereotypes": (SAFE, FAIR),
        "summarization": (VALID, OUTCOMES),
        "text_matching": _QUALITY,
        "token_budget": _OPERATIONS,
        "tool_called": _TOOLS,
        "tool_efficiency": (*_TOOLS, MONITORING),
        "tool_error_rate": (*_OPERATIONS, VALID),
        "tool_loop": _OPERATIONS,
        "tool_sequence": _TOOLS,
        "toxicity": (SAFE,),
        "turn_count": (MONITORING,),
    }
)
"""Catalogue name -> the standards it gives evidence for."""


def compliance_tags(name: str) -> tuple[str, ...]:
    """The standards the catalogue evaluator ``name`` serves; ``()`` for a user evaluator or an unknown name."""
    return COMPLIANCE_TAGS.get(name, ())
