"""The catalogue: every built-in evaluator under its docs/evaluators.md name, for configuration files."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from evaltrace.evaluators.answer import (
    AnswerCorrectness,
    AnswerRelevancy,
    AnswerRelevancySentences,
    SemanticSimilarity,
    SemanticSimilaritySentences,
)
from evaltrace.evaluators.budgets import Cost, Latency, StepBudget, TokenBudget
from evaltrace.evaluators.classification import Classification
from evaltrace.evaluators.composite import AgentRubric
from evaltrace.evaluators.conversation import (
    ConversationCompleteness,
    ConversationRelevancy,
    KnowledgeRetention,
    RoleAdherence,
)
from evaltrace.evaluators.encoding import EncodingGuardrail
from evaltrace.evaluators.files import FilesChanged, MustCreateFiles, MustModifyFiles, MustNotModifyFiles
from evaltrace.evaluators.gptscore import (
    GPTScore,
    GPTScoreQuestionAnswering,
    GPTScoreSummarization,
    GPTScoreSummarizationWithReference,
    GPTScoreTranslation,
    Perplexity,
)
from evaltrace.evaluators.grading import (
    BYOP,
    CitationAccuracy,
    Completeness,
    FactCheck,
    FactualAccuracy,
    LLMJudge,
    SourceQuality,
)
from evaltrace.evaluators.language import LanguageMismatch
from evaltrace.evaluators.looping import LoopingDetection
from evaltrace.evaluators.overlap import Bleu, Rouge
from evaltrace.evaluators.pii import ContactInfo, NoPII, SensitiveData
from evaltrace.evaluators.rag import (
    ContextMRR,
    ContextPrecision,
    ContextRecall,
    ContextRelevancy,
    ContextRelevancySoftPrecision,
    ContextRelevancySoftRecall,
    Faithfulness,
    Groundedness,
    Hallucination,
)
from evaltrace.evaluators.ragas import Ragas
from evaltrace.evaluators.safety import FairnessBias, Sexism, Stereotypes, Summarization, Toxicity
from evaltrace.evaluators.session_checks import RepeatedUserQuestion, SessionBudget, TurnCount
from evaltrace.evaluators.structure import AgentSanity, JsonSchema
from evaltrace.evaluators.text import ContainsText, ExactMatch, Facts, Length, NotContains, Regex, TextMatching
from evaltrace.evaluators.tool_health import ToolErrorRate, ToolLoop
from evaltrace.evaluators.tools import StepAlignment, ToolCalled, ToolEfficiency
from evaltrace.evaluators.trajectory import ToolSequence

CATALOGUE: Mapping[str, type[Any]] = MappingProxyType(
    {
        "agent_rubric": AgentRubric,
        "agent_sanity": AgentSanity,
        "answer_correctness": AnswerCorrectness,
        "answer_relevancy": AnswerRelevancy,
        "answer_relevancy_sentences": AnswerRelevancySentences,
        "bleu": Bleu,
        "byop": BYOP,
        "citation_accuracy": CitationAccuracy,
        "classification": Classification,
        "completeness": Completeness,
        "contact_info": ContactInfo,
        "contains_text": ContainsText,
        "context_mrr": ContextMRR,
        "context_precision": ContextPrecision,
        "context_recall": ContextRecall,
        "context_relevancy": ContextRelevancy,
        "context_relevancy_soft_precision": ContextRelevancySoftPrecision,
        "context_relevancy_soft_recall": ContextRelevancySoftRecall,
        "conversation_completeness": ConversationCompleteness,
        "conversation_relevancy": ConversationRelevancy,
        "cost": Cost,
        "encoding_guardrail": EncodingGuardrail,
        "exact_match": ExactMatch,
        "fact_check": FactCheck,
        "facts": Facts,
        "factual_accuracy": FactualAccuracy,
        "fairness_bias": FairnessBias,
        "faithfulness": Faithfulness,
        "files_changed": FilesChanged,
        "gptscore": GPTScore,
        "gptscore_question_answering": GPTScoreQuestionAnswering,
        "gptscore_summarization": GPTScoreSummarization,
        "gptscore_summarization_with_reference": GPTScoreSummarizationWithReference,
        "gptscore_translation": GPTScoreTranslation,
        "groundedness": Groundedness,
        "hallucination": Hallucination,
        "json_schema": JsonSchema,
        "knowledge_retention": KnowledgeRetention,
        "language_mismatch": LanguageMismatch,
        "latency": Latency,
        "length": Length,
        "llm_judge": LLMJudge,
        "looping_detection": LoopingDetection,
        "must_create_files": MustCreateFiles,
        "must_modify_files": MustModifyFiles,
        "must_not_modify_files": MustNotModifyFiles,
        "not_contains": NotContains,
        "perplexity": Perplexity,
        "pii_leakage": NoPII,
        "ragas": Ragas,
        "regex": Regex,
        "repeated_user_question": RepeatedUserQuestion,
        "role_adherence": RoleAdherence,
        "rouge": Rouge,
        "semantic_similarity": SemanticSimilarity,
        "semantic_similarity_sentences": SemanticSimilaritySentences,
        "sensitive_data": SensitiveData,
        "session_budget": SessionBudget,
        "sexism": Sexism,
        "source_quality": SourceQuality,
        "step_alignment": StepAlignment,
        "step_budget": StepBudget,
        "stereotypes": Stereotypes,
        "summarization": Summarization,
        "text_matching": TextMatching,
        "token_budget": TokenBudget,
        "tool_called": ToolCalled,
        "tool_efficiency": ToolEfficiency,
        "tool_error_rate": ToolErrorRate,
        "tool_loop": ToolLoop,
        "tool_sequence": ToolSequence,
        "toxicity": Toxicity,
        "turn_count": TurnCount,
    }
)
"""Catalogue name -> evaluator class."""


def create_evaluator(name: str, /, *args: Any, **options: Any) -> Any:
    """Instantiate the catalogue evaluator ``name`` with ``args``/``options`` (e.g. from an eval.yaml entry).

    Args:
        name: Catalogue name, e.g. ``"tool_called"`` or ``"faithfulness"``.
        *args: Positional arguments of the evaluator's constructor.
        **options: Keyword arguments of the evaluator's constructor.

    Returns:
        The evaluator.

    Raises:
        KeyError: Unknown name (the message lists the known ones).
    """
    try:
        cls = CATALOGUE[name]
    except KeyError:
        raise KeyError(f"unknown evaluator {name!r}; known: {', '.join(CATALOGUE)}") from None
    return cls(*args, **options)
