"""Every span attribute, event and metric name evaltrace reads or writes, and nothing else.

Names follow OTel GenAI semantic conventions v1.41 (the last full snapshot in the core repo), with the few
names from the genai repository's main branch that the official Python util already emits marked ``[main]``.
We keep our own constants instead of importing ``opentelemetry.semconv._incubating`` because that module is
unstable API and flags every gen_ai constant as deprecated ("moved to the GenAI repository").
Sources: ../shared/docs/conventions.md sections 1, 3, 4.4, 6 and 7.
"""

from __future__ import annotations

from typing import Final

# --- gen_ai core / request -------------------------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_TOP_K: Final = "gen_ai.request.top_k"
GEN_AI_REQUEST_FREQUENCY_PENALTY: Final = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY: Final = "gen_ai.request.presence_penalty"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_CHOICE_COUNT: Final = "gen_ai.request.choice.count"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_REQUEST_ENCODING_FORMATS: Final = "gen_ai.request.encoding_formats"
GEN_AI_REQUEST_REASONING_LEVEL: Final = "gen_ai.request.reasoning.level"  # [main]
GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID: Final = "gen_ai.request.previous_response.id"  # [main]
GEN_AI_OUTPUT_TYPE: Final = "gen_ai.output.type"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_EMBEDDINGS_DIMENSION_COUNT: Final = "gen_ai.embeddings.dimension.count"

# --- gen_ai response / usage -----------------------------------------------------------------------------
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_COST: Final = "gen_ai.usage.cost"

# --- gen_ai content (JSON strings on spans) --------------------------------------------------------------
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GEN_AI_RETRIEVAL_DOCUMENTS: Final = "gen_ai.retrieval.documents"  # [{"id", "score", "content", "metadata"}]
GEN_AI_RETRIEVAL_QUERY_TEXT: Final = "gen_ai.retrieval.query.text"

# --- tools / agents / workflows --------------------------------------------------------------------------
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_AGENT_DESCRIPTION: Final = "gen_ai.agent.description"
GEN_AI_AGENT_VERSION: Final = "gen_ai.agent.version"
GEN_AI_WORKFLOW_NAME: Final = "gen_ai.workflow.name"

# --- evaluation ------------------------------------------------------------------------------------------
GEN_AI_EVALUATION_RESULT_EVENT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"

# --- operation names -------------------------------------------------------------------------------------
OP_CHAT: Final = "chat"
OP_EMBEDDINGS: Final = "embeddings"
OP_GENERATE_CONTENT: Final = "generate_content"
OP_TEXT_COMPLETION: Final = "text_completion"  # a prompt completed, not a conversation (Ollama ``generate``)
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_INVOKE_WORKFLOW: Final = "invoke_workflow"
OP_RETRIEVAL: Final = "retrieval"
OP_RERANK: Final = "rerank"  # not a GenAI value: a reranking (Cohere ``rerank``), on a ``task`` span
OP_CREATE_CACHE: Final = "create_cache"  # not a GenAI value: google-genai ``caches.create`` (no answer)

# --- metrics ---------------------------------------------------------------------------------------------
METRIC_CLIENT_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_CLIENT_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_CLIENT_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
METRIC_CLIENT_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.operation.time_per_output_chunk"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"

# --- general OTel ----------------------------------------------------------------------------------------
ERROR_TYPE: Final = "error.type"
ERROR_TYPE_OTHER: Final = "_OTHER"  # error.type when neither a provider error code nor an exception type is known
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
SERVICE_NAME: Final = "service.name"
DEPLOYMENT_ENVIRONMENT_NAME: Final = "deployment.environment.name"
SESSION_ID: Final = "session.id"
USER_ID: Final = "user.id"

# --- Cohere-specific -------------------------------------------------------------------------------------
# What Cohere bills (``usage.billed_units``): also gen_ai.usage.* when given (the token metric must be billable).
COHERE_USAGE_BILLED_INPUT_TOKENS: Final = "cohere.usage.billed_units.input_tokens"
COHERE_USAGE_BILLED_OUTPUT_TOKENS: Final = "cohere.usage.billed_units.output_tokens"
COHERE_USAGE_BILLED_SEARCH_UNITS: Final = "cohere.usage.billed_units.search_units"
# What the model read and wrote (``usage.tokens``, template included) when gen_ai.usage.* hold the billed units,
# and the prompt tokens served from Cohere's cache (a share of those, not of the billed units).
COHERE_USAGE_TOKENS_INPUT: Final = "cohere.usage.tokens.input_tokens"
COHERE_USAGE_TOKENS_OUTPUT: Final = "cohere.usage.tokens.output_tokens"
COHERE_USAGE_CACHED_TOKENS: Final = "cohere.usage.cached_tokens"
# Mistral FIM: the code after the gap (the prompt is the code before it, in gen_ai.input.messages). Content.
MISTRAL_FIM_SUFFIX: Final = "mistral.fim.suffix"
# LiteLLM ``Router``: the model name the application called (``model_list[i].model_name``, an alias of one or more
# deployments); gen_ai.request.model is the deployment's own model, which the Router sent.
LITELLM_ROUTER_MODEL_GROUP: Final = "litellm.router.model_group"

# --- Google Gen AI-specific -------------------------------------------------------------------------------
# A prompt the API refused (``prompt_feedback.block_reason``: SAFETY, BLOCKLIST, PROHIBITED_CONTENT...), verbatim.
GCP_GEMINI_PROMPT_BLOCK_REASON: Final = "gcp.gemini.prompt_feedback.block_reason"

# --- OpenAI-specific -------------------------------------------------------------------------------------
OPENAI_API_TYPE: Final = "openai.api.type"
OPENAI_REQUEST_SERVICE_TIER: Final = "openai.request.service_tier"
OPENAI_RESPONSE_SERVICE_TIER: Final = "openai.response.service_tier"
OPENAI_RESPONSE_SYSTEM_FINGERPRINT: Final = "openai.response.system_fingerprint"
# Groq: how a reasoning model returns its reasoning (``parsed``, ``raw`` in ``<think>`` tags, ``hidden``).
GROQ_REQUEST_REASONING_FORMAT: Final = "groq.request.reasoning_format"
# Groq: prompt tokens served from its hardware caches (``x_groq.usage``); not the billed cache reads.
GROQ_USAGE_DRAM_CACHED_TOKENS: Final = "groq.usage.dram_cached_tokens"
GROQ_USAGE_SRAM_CACHED_TOKENS: Final = "groq.usage.sram_cached_tokens"
# Groq: whether the model is to cite the request's documents (``enabled`` / ``disabled``; GenAI has no name).
GROQ_REQUEST_CITATION_OPTIONS: Final = "groq.request.citation_options"
# Groq: a compound model's usage per model it ran (``usage_breakdown``), JSON ``[{"model", "input_tokens", ...}]``.
GROQ_USAGE_BREAKDOWN: Final = "groq.usage.breakdown"

# --- OpenAI Agents SDK (its span data that GenAI conventions have no name for) -------------------------
OPENAI_AGENTS_AGENT_TOOLS: Final = "openai_agents.agent.tools"  # string[]: the agent's tool names
OPENAI_AGENTS_AGENT_HANDOFFS: Final = "openai_agents.agent.handoffs"  # string[]: agents it can hand off to
OPENAI_AGENTS_AGENT_OUTPUT_TYPE: Final = "openai_agents.agent.output_type"
OPENAI_AGENTS_HANDOFF_FROM: Final = "openai_agents.handoff.from_agent"
OPENAI_AGENTS_HANDOFF_TO: Final = "openai_agents.handoff.to_agent"
OPENAI_AGENTS_GUARDRAIL_NAME: Final = "openai_agents.guardrail.name"
OPENAI_AGENTS_GUARDRAIL_TRIGGERED: Final = "openai_agents.guardrail.triggered"
OPENAI_AGENTS_MCP_SERVER: Final = "openai_agents.mcp.server"
OPENAI_AGENTS_MCP_TOOLS: Final = "openai_agents.mcp.tools"  # string[]: what an MCP server's list_tools returned
OPENAI_AGENTS_SPAN_TYPE: Final = "openai_agents.span.type"  # the SDK's span type (agent, function, custom, ...)
OPENAI_AGENTS_CUSTOM_DATA: Final = "openai_agents.custom.data"  # JSON: a custom span's data
OPENAI_AGENTS_ERROR_DATA: Final = "openai_agents.error.data"  # JSON: the data of a span's SpanError
OPENAI_AGENTS_TRACE_ID: Final = "openai_agents.trace.id"  # the SDK's own trace id (trace_<32 hex>)

# --- pydantic-ai (its agent run span; read by the mapping) ----------------------------------------------
PYDANTIC_AI_ALL_MESSAGES: Final = "pydantic_ai.all_messages"  # JSON: the run's messages, GenAI parts
PYDANTIC_AI_FINAL_RESULT: Final = "final_result"  # the run's output (text, or JSON of a structured output)
# Set on a tool span whose tool deferred (ApprovalRequired, CallDeferred): the run waits for it, nothing failed.
# Instrumentation versions below 5 also end such a span in error.
PYDANTIC_AI_TOOL_DEFERRAL_NAME: Final = "pydantic_ai.tool.deferral.name"
PYDANTIC_AI_OPERATION_COST: Final = "operation.cost"  # a model request's cost in USD (genai-prices), its chat span
PYDANTIC_AI_REASONING_TOKENS: Final = "gen_ai.usage.details.reasoning_tokens"  # the provider's usage detail
# Time to first chunk of a streamed request, in seconds, under the metric's name (gen_ai.response.* in ours).
PYDANTIC_AI_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"

# --- OpenInference (read by Langfuse and Phoenix for input/output display) ------------------------------
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
OPENINFERENCE_PROJECT_NAME: Final = "openinference.project.name"
OPENINFERENCE_KIND_EVALUATOR: Final = "EVALUATOR"
# OpenInference feedback on a post-hoc carrier span (spec/annotations.md): one object per carrier, at index 0,
# for the span its one link targets, or (trace. prefix) for that span's trace.
OI_SPAN_EVALUATION_PREFIX: Final = "evaluations.0.evaluation."
OI_TRACE_EVALUATION_PREFIX: Final = "trace.evaluations.0.evaluation."
OI_EVALUATION_NAME: Final = "name"
OI_EVALUATION_SCORE: Final = "score"
OI_EVALUATION_LABEL: Final = "label"
OI_EVALUATION_EXPLANATION: Final = "explanation"
OI_EVALUATION_ANNOTATOR_KIND: Final = "annotator_kind"
OI_EVALUATION_METADATA: Final = "metadata"
MIME_JSON: Final = "application/json"
MIME_TEXT: Final = "text/plain"

# --- Langfuse (conventions.md 4.4) -----------------------------------------------------------------------
LANGFUSE_OBSERVATION_TYPE: Final = "langfuse.observation.type"
LANGFUSE_OBSERVATION_USAGE_DETAILS: Final = "langfuse.observation.usage_details"
LANGFUSE_OBSERVATION_COST_DETAILS: Final = "langfuse.observation.cost_details"
LANGFUSE_OBSERVATION_COMPLETION_START_TIME: Final = "langfuse.observation.completion_start_time"
LANGFUSE_OBSERVATION_MODEL_PARAMETERS: Final = "langfuse.observation.model.parameters"
LANGFUSE_SESSION_ID: Final = "langfuse.session.id"
LANGFUSE_USER_ID: Final = "langfuse.user.id"
LANGFUSE_TRACE_TAGS: Final = "langfuse.trace.tags"
LANGFUSE_TRACE_METADATA: Final = "langfuse.trace.metadata"
LANGFUSE_TRACE_NAME: Final = "langfuse.trace.name"

# --- evaltrace's own -------------------------------------------------------------------------------------
EVALTRACE_SPAN_KIND: Final = "evaltrace.span.kind"
EVALTRACE_EVALUATORS_REF: Final = "evaltrace.evaluators.ref"  # key into the decorator evaluator registry
EVALTRACE_RUN_ID: Final = "evaltrace.run_id"
EVALTRACE_CASE_ID: Final = "evaltrace.case_id"
EVALTRACE_VARIANT: Final = "evaltrace.variant"
EVALTRACE_METADATA: Final = "evaltrace.metadata"
EVALTRACE_COST_USD: Final = "evaltrace.cost_usd"
EVALTRACE_COST_THINKING_USD: Final = "evaltrace.cost_thinking_usd"
EVALTRACE_STREAM_CHUNKS: Final = "evaltrace.stream.chunks"
EVALTRACE_STREAM_COMPLETED: Final = "evaltrace.stream.completed"
EVALTRACE_STREAM_END_REASON: Final = "evaltrace.stream.end_reason"
EVALTRACE_STREAM_TIME_TO_LAST_CHUNK: Final = "evaltrace.stream.time_to_last_chunk"
EVALTRACE_STREAM_OUTPUT_TOKENS_PER_SECOND: Final = "evaltrace.stream.output_tokens_per_second"
EVALTRACE_EVAL_PREFIX: Final = "evaltrace.eval."  # evaltrace.eval.<name>.score / .passed
EVALTRACE_EVAL_FAILED: Final = "evaltrace.eval.failed"
EVALTRACE_EXCEPTION_STACK: Final = "evaltrace.exception.stacktrace"
EVALTRACE_AGENT_ACTION_EVENT: Final = "evaltrace.agent.action"  # a classic LangChain agent chose a tool (span event)
# LangGraph control flow through a run (span events; the span is no failure): an ``interrupt()`` pausing for a human
# (its id, its value only with content capture), a ``Command(graph=Command.PARENT)`` handoff (the nodes it goes to)
# and a drain requested at shutdown (its reason).
EVALTRACE_LANGGRAPH_INTERRUPT_EVENT: Final = "evaltrace.langgraph.interrupt"
EVALTRACE_LANGGRAPH_INTERRUPT_ID: Final = "evaltrace.langgraph.interrupt.id"
EVALTRACE_LANGGRAPH_INTERRUPT_VALUE: Final = "evaltrace.langgraph.interrupt.value"
EVALTRACE_LANGGRAPH_PARENT_COMMAND_EVENT: Final = "evaltrace.langgraph.parent_command"
EVALTRACE_LANGGRAPH_GOTO: Final = "evaltrace.langgraph.goto"
EVALTRACE_LANGGRAPH_DRAIN_EVENT: Final = "evaltrace.langgraph.drain"
EVALTRACE_LANGGRAPH_DRAIN_REASON: Final = "evaltrace.langgraph.drain.reason"

# evaltrace.span.kind values (DESIGN.md section 3).
KIND_LLM: Final = "llm"
KIND_EMBEDDING: Final = "embedding"
KIND_TOOL: Final = "tool"
KIND_AGENT: Final = "agent"
KIND_WORKFLOW: Final = "workflow"
KIND_TASK: Final = "task"
KIND_EVALUATION: Final = "evaluation"
KIND_RETRIEVER: Final = "retriever"  # a retrieval step; its documents are the RAG context evaluators read
KIND_JUDGE: Final = "judge"  # the root span ``judge {evaluator}`` of a judge call's own trace

# Stream end reasons (evaltrace.stream.end_reason); evaltrace.stream.completed is true only for "exhausted".
STREAM_END_EXHAUSTED: Final = "exhausted"  # read to the end, and the stream carried its terminal signal
STREAM_END_CLOSED: Final = "closed_early"
STREAM_END_ERROR: Final = "error"  # an exception while iterating, an ``error`` event, or ``response.failed``
STREAM_END_GC: Final = "garbage_collected"
# The server ended the stream before its terminal signal: a chat choice without a finish_reason, a Responses
# stream without a terminal event (``response.completed`` / ``.incomplete`` / ``.failed``).
STREAM_END_TRUNCATED: Final = "truncated"
STREAM_END_INCOMPLETE: Final = "incomplete"  # a Responses stream that ended in ``response.incomplete``

# openai.api.type values, Langfuse observation types and gen_ai.token.type values (OpenAI instrumentation).
OPENAI_API_TYPE_CHAT_COMPLETIONS: Final = "chat_completions"
OPENAI_API_TYPE_RESPONSES: Final = "responses"
LANGFUSE_TYPE_GENERATION: Final = "generation"
LANGFUSE_TYPE_EMBEDDING: Final = "embedding"
LANGFUSE_TYPE_RETRIEVER: Final = "retriever"
TOKEN_TYPE_INPUT: Final = "input"
TOKEN_TYPE_OUTPUT: Final = "output"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"

# --- evaluation pipeline (evaltrace.evaluation) -------------------------------------------------------------
EVALTRACE_EVAL_SCORE_SUFFIX: Final = ".score"  # evaltrace.eval.<name>.score (double)
EVALTRACE_EVAL_PASSED_SUFFIX: Final = ".passed"  # evaltrace.eval.<name>.passed (boolean)
EVALUATION_SPAN_NAME_PREFIX: Final = "evaluation "  # child span "evaluation {evaluator}"
LANGFUSE_TYPE_EVALUATOR: Final = "evaluator"
EVAL_LABEL_PASS: Final = "pass"
EVAL_LABEL_FAIL: Final = "fail"
EVAL_LABEL_SKIPPED: Final = "skipped"
EVAL_LABEL_NOT_EVALUATED: Final = "not_evaluated"  # label of a skipped evaluation (older traces: "skipped")
# Outcome of one evaluation, derived from its status and verdict: the only vocabulary results are shown in.
# An "error" (the evaluation itself failed) and "not_evaluated" (skipped) are never a pass or a fail.
OUTCOME_PASS: Final = "pass"
OUTCOME_FAIL: Final = "fail"
OUTCOME_ERROR: Final = "error"
OUTCOME_NOT_EVALUATED: Final = "not_evaluated"
OUTCOME_PENDING: Final = "pending"
EVALTRACE_EVAL_OUTCOME_SUFFIX: Final = ".outcome"  # evaltrace.eval.<name>.outcome (one of the OUTCOME_* values)
EVALTRACE_EVAL_ERROR_TYPE_SUFFIX: Final = ".error_type"  # evaltrace.eval.<name>.error_type, outcome error only
EVALTRACE_EVAL_SKIP_REASON_SUFFIX: Final = ".skip_reason"  # evaltrace.eval.<name>.skip_reason, not_evaluated only
EVALTRACE_EVAL_ERRORS: Final = "evaltrace.eval.errors"  # string[]: evaluators whose evaluation errored
EVALTRACE_EVAL_NOT_EVALUATED: Final = "evaltrace.eval.not_evaluated"  # string[]: evaluators that skipped
METRIC_EVAL_EVALUATIONS: Final = "evaltrace.evaluation.count"  # counter, attrs evaluator + status + passed
METRIC_EVAL_DURATION: Final = "evaltrace.evaluation.duration"  # histogram, seconds, attr evaluator
METRIC_EVAL_SPANS_DROPPED: Final = "evaltrace.evaluation.spans_dropped"  # counter, queue overflow
METRIC_EVAL_QUEUE_SIZE: Final = "evaltrace.evaluation.queue_size"  # observable gauge
METRIC_EVAL_SCORES_REJECTED: Final = "evaltrace.evaluation.scores_rejected"  # counter, ScoreConfig violations
METRIC_EVAL_SINK_EXPORTS: Final = "evaltrace.evaluation.sink.scores"  # counter, attrs sink + outcome
METRIC_EVAL_PASS_RATE: Final = "evaltrace.evaluation.pass_rate"  # observable gauge per evaluator (window)
METRIC_EXPORT_SPANS: Final = "evaltrace.export.spans"  # observable counter, attrs exporter + outcome
EVALTRACE_EXPORTER_NAME: Final = "evaltrace.exporter"
EVALTRACE_EXPORT_OUTCOME: Final = "evaltrace.export.outcome"  # exported, export_failed, dropped_queue_full, ...
EVALTRACE_EVALUATOR_NAME: Final = "evaltrace.evaluator"  # metric attribute: evaluator name
EVALTRACE_EVAL_STATUS: Final = "evaltrace.evaluation.status"  # metric attribute: completed / failed / skipped
EVALTRACE_EVAL_PASSED_ATTR: Final = "evaltrace.evaluation.passed"  # metric attribute: bool, judged results only
EVALTRACE_EVAL_OUTCOME_ATTR: Final = "evaltrace.evaluation.outcome"  # metric attribute: OUTCOME_* value
EVALTRACE_SINK_NAME: Final = "evaltrace.sink"  # metric attribute: sink name
EVALTRACE_SINK_OUTCOME: Final = "evaltrace.sink.outcome"  # metric attribute: delivered / retried / dead_lettered
# Evaluations an evaluator could have run and did not, by reason (stats()["not_evaluated_by_reason"], a metric,
# and evaltrace.eval.<name>.skip_reason on spans enriched anyway).
METRIC_EVAL_NOT_EVALUATED: Final = "evaltrace.evaluation.not_evaluated"  # counter, attrs evaluator + skip reason
EVALTRACE_SKIP_REASON: Final = "evaltrace.evaluation.skip_reason"  # metric attribute: one of the SKIP_* values
SKIP_SAMPLED_OUT: Final = "sampled_out"
SKIP_QUEUE_FULL: Final = "queue_full"
SKIP_RATE_LIMITED: Final = "rate_limited"
SKIP_OVER_BUDGET: Final = "over_budget"
# The rate limits and budgets could not be checked (the limiter raised: a limits_clock that fails, a bug of ours):
# the evaluation is not run unchecked (a budget could be overspent), and never lost uncounted.
SKIP_LIMITS_UNAVAILABLE: Final = "limits_unavailable"
SKIP_FILTERED: Final = "filtered"  # name/kind filters accepted the span, the attribute predicate rejected it
SKIP_TRACE_INCOMPLETE: Final = "trace_incomplete"  # trace-level: the trace never completed within the bounds
SKIP_ENGINE_UNAVAILABLE: Final = "engine_unavailable"  # evaluation process down/restarting/full, engine refused job
SKIP_SHUTDOWN: Final = "shutdown"  # cancelled at the shutdown deadline, or due after shutdown had drained
SKIP_LATE_AFTER_WINDOW: Final = "late_after_window"  # trace-level: a new root of a trace evaluated before
SKIP_MAPPING_FAILED: Final = "mapping_failed"  # our mapping of the spans to a Trace failed: never a verdict
SKIP_NOT_SHIPPABLE: Final = "not_shippable"  # evaluation process: the evaluator cannot be imported by reference
SKIP_OVERLOADED: Final = "overloaded"  # the process's stuck evaluator threads are at their cap: no new one
SKIP_NOT_APPLICABLE: Final = "not applicable"  # SkipEvaluation() raised with no message
SKIP_NO_ANSWER: Final = "no_answer"  # the evaluator reads the final answer; the step answered with tool calls only
# Trace completion (docs/evaluation.md "Trace completion"): evaltrace.end_trace() sets the marker on a span; the
# evaluation span of a trace-level result carries the revision (1, then +1 per re-evaluation after late spans).
EVALTRACE_TRACE_END: Final = "evaltrace.trace.end"
EVALTRACE_EVAL_REVISION: Final = "evaltrace.evaluation.revision"
# Judge traces (docs/evaluation.md "Following a judge's call"): every span of one carries the marker, and is
# never evaluated; the evaluation result names the judge trace (event/span attribute, score metadata key).
EVALTRACE_JUDGE: Final = "evaltrace.judge"  # boolean marker on the spans of a judge call's trace
EVALTRACE_JUDGE_EVALUATOR: Final = "evaltrace.judge.evaluator"  # the evaluator the judge worked for (root span)
EVALTRACE_JUDGE_PROMPT: Final = "evaltrace.judge.prompt"  # the prompt's reference, e.g. faithfulness@1 (root span)
EVALTRACE_JUDGE_TRACE_ID: Final = "evaltrace.judge.trace_id"  # 32-hex, on gen_ai.evaluation.result and late spans
JUDGE_SPAN_NAME_PREFIX: Final = "judge "  # root span "judge {evaluator}"
JUDGE_TRACE_ID_KEY: Final = "judge_trace_id"  # result and score metadata key: the judge trace's id (32 hex)
JUDGE_SPAN_ID_KEY: Final = "judge_span_id"  # result metadata key: its root span's id (16 hex)
EVALTRACE_SESSION_END: Final = "evaltrace.session.end"
"""Set by ``evaltrace.end_session()`` on the current span: its session is judged once the trace is complete."""
SESSION_ID_KEYS: Final = (SESSION_ID, LANGFUSE_SESSION_ID)
"""Where a span carries its session id, in order of preference (ours, then Langfuse's convention)."""
USER_ID_KEYS: Final = (USER_ID, LANGFUSE_USER_ID)
# Judge spend, apart from the application's gen_ai.client.* (attrs evaluator + gen_ai.request.model).
METRIC_EVAL_CLIENT_DURATION: Final = "gen_ai.evaluation.client.operation.duration"  # histogram, s
METRIC_EVAL_CLIENT_TOKEN_USAGE: Final = "gen_ai.evaluation.client.token.usage"  # histogram, + gen_ai.token.type
METRIC_EVAL_CLIENT_COST: Final = "gen_ai.evaluation.client.cost"  # counter, USD
METRIC_GEN_AI_EVALUATION_SCORE: Final = "gen_ai.evaluation.score"  # histogram of score values, attr evaluation name
METRIC_EVAL_PASSES: Final = "evaltrace.evaluation.passes"  # counter, attr evaluator (judgements that passed)
METRIC_EVAL_ERRORS: Final = "evaltrace.evaluation.errors"  # counter, attrs evaluator + error.type
METRIC_NAME_OVERFLOW: Final = "_other"  # evaluator name on metrics beyond the distinct-name bound
# Provenance on gen_ai.evaluation.result (opt-in: the spec has no attribute for it yet, conventions.md 1.3).
EVALTRACE_EVALUATOR_VERSION: Final = "evaltrace.evaluator.version"
EVALTRACE_EVALUATOR_TYPE: Final = "evaltrace.evaluator.type"

# --- OTel exception event (span.record_exception) --------------------------------------------------------
EXCEPTION_EVENT: Final = "exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
