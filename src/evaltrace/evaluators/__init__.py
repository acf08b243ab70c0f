"""Built-in evaluators (docs/evaluators.md): deterministic checks, LLM-judge and embedding metrics, rubrics.

Every evaluator is a plain object with ``name``, ``version``, ``threshold``, ``direction`` and
``evaluate(trace, case=None)``, returning an :class:`~evaltrace.schema.EvaluationResult` (judge-based ones
return an awaitable). They are pure functions of ``(trace, case)``: the same object runs online and offline.
"""

from __future__ import annotations

from evaltrace.evaluators._base import (
    AnySubjectEvaluator,
    ConversationEvaluator,
    MissingExtraError,
    Subject,
    WrongSubjectError,
)
from evaltrace.evaluators.answer import (
    AnswerCorrectness,
    AnswerRelevancy,
    AnswerRelevancySentences,
    SemanticSimilarity,
    SemanticSimilaritySentences,
    statement_f1,
)
from evaltrace.evaluators.budgets import Cost, Latency, StepBudget, TokenBudget, count_model_calls
from evaltrace.evaluators.catalogue import CATALOGUE, create_evaluator
from evaltrace.evaluators.classification import (
    Classification,
    ClassificationReport,
    ClassMetrics,
    classification_report,
    report_from_results,
)
from evaltrace.evaluators.composite import AgentRubric
from evaltrace.evaluators.conversation import (
    ConversationCompleteness,
    ConversationJudge,
    ConversationRelevancy,
    KnowledgeRetention,
    RoleAdherence,
)
from evaltrace.evaluators.embeddings import Embedder, OpenAIEmbedder, cosine
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
    RubricJudge,
    SourceQuality,
)
from evaltrace.evaluators.insights import EvaluatorInsight, RunInsights, run_insights
from evaltrace.evaluators.judge import Judge, JudgeCall, JudgeError
from evaltrace.evaluators.language import LanguageMismatch
from evaltrace.evaluators.likelihood import Likelihood, LogprobsError
from evaltrace.evaluators.local_embeddings import LocalEmbedder
from evaltrace.evaluators.looping import LoopingDetection, LoopingMetrics, looping_metrics
from evaltrace.evaluators.overlap import Bleu, Rouge
from evaltrace.evaluators.pii import ContactInfo, NoPII, PIILeakage, SensitiveData
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
from evaltrace.evaluators.tool_health import ToolErrorRate, ToolLoop, find_cycles, is_error_result
from evaltrace.evaluators.tools import StepAlignment, ToolCalled, ToolEfficiency
from evaltrace.evaluators.trajectory import ToolSequence

__all__ = [
    "AgentRubric",
    "AgentSanity",
    "AnswerCorrectness",
    "AnswerRelevancy",
    "AnswerRelevancySentences",
    "AnySubjectEvaluator",
    "BYOP",
    "Bleu",
    "CATALOGUE",
    "CitationAccuracy",
    "ClassMetrics",
    "Classification",
    "ClassificationReport",
    "Completeness",
    "ContactInfo",
    "ContainsText",
    "ContextMRR",
    "ContextPrecision",
    "ContextRecall",
    "ContextRelevancy",
    "ContextRelevancySoftPrecision",
    "ContextRelevancySoftRecall",
    "ConversationCompleteness",
    "ConversationEvaluator",
    "ConversationJudge",
    "ConversationRelevancy",
    "Cost",
    "Embedder",
    "EncodingGuardrail",
    "EvaluatorInsight",
    "ExactMatch",
    "FactCheck",
    "Facts",
    "FactualAccuracy",
    "FairnessBias",
    "Faithfulness",
    "FilesChanged",
    "GPTScore",
    "GPTScoreQuestionAnswering",
    "GPTScoreSummarization",
    "GPTScoreSummarizationWithReference",
    "GPTScoreTranslation",
    "Groundedness",
    "Hallucination",
    "JsonSchema",
    "Judge",
    "JudgeCall",
    "JudgeError",
    "KnowledgeRetention",
    "LLMJudge",
    "LanguageMismatch",
    "Latency",
    "Length",
    "Likelihood",
    "LocalEmbedder",
    "LogprobsError",
    "LoopingDetection",
    "LoopingMetrics",
    "MissingExtraError",
    "MustCreateFiles",
    "MustModifyFiles",
    "MustNotModifyFiles",
    "NoPII",
    "NotContains",
    "OpenAIEmbedder",
    "PIILeakage",
    "Perplexity",
    "Ragas",
    "Regex",
    "RepeatedUserQuestion",
    "RoleAdherence",
    "Rouge",
    "RubricJudge",
    "RunInsights",
    "SemanticSimilarity",
    "SemanticSimilaritySentences",
    "SensitiveData",
    "SessionBudget",
    "Sexism",
    "SourceQuality",
    "StepAlignment",
    "StepBudget",
    "Stereotypes",
    "Subject",
    "Summarization",
    "TextMatching",
    "TokenBudget",
    "ToolCalled",
    "ToolEfficiency",
    "ToolErrorRate",
    "ToolLoop",
    "ToolSequence",
    "Toxicity",
    "TurnCount",
    "WrongSubjectError",
    "classification_report",
    "cosine",
    "count_model_calls",
    "create_evaluator",
    "find_cycles",
    "is_error_result",
    "looping_metrics",
    "report_from_results",
    "run_insights",
    "statement_f1",
]
