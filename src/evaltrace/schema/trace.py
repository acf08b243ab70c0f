"""The Trace family (data-model.md part A): what one run of the system did, as evaluators see it."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    computed_field,
    field_validator,
    model_serializer,
    model_validator,
)

from evaltrace.schema._base import SchemaModel, UtcDatetime, VersionedModel, whole_ms

Role = Literal["user", "assistant", "tool", "system"]
TraceErrorType = Literal["timeout", "http_5xx", "adapter_error", "exception"]
TRACE_ERROR_TYPES: tuple[TraceErrorType, ...] = ("timeout", "http_5xx", "adapter_error", "exception")


class ExpectedBehavior(SchemaModel):
    """What a case expects of the system; every list is a check an evaluator can run."""

    must_call_tools: list[str] = Field(default_factory=list)
    answer_should_include: list[str] = Field(default_factory=list)
    answer_should_not_include: list[str] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)
    """Ground truth, keyed by fact name."""
    must_modify_files: list[str] = Field(default_factory=list)
    must_not_modify_files: list[str] = Field(default_factory=list)
    must_create_files: list[str] = Field(default_factory=list)
    """Globs (relative to the workspace) of files the system must create (filesystem evals)."""


MAX_SIMULATED_TURNS = 50
"""Upper bound of ``simulated_user.max_turns``: a conversation longer than this is a loop, not a test."""


class StopWhen(SchemaModel):
    """When a simulated conversation ends before ``max_turns``: exactly one of the two is set."""

    phrase: str | None = None
    """The system's answer contains this text (case-insensitive)."""
    goal_met: bool = False
    """The judge model, shown the goal and the transcript, says the goal was met."""


class SimulatedUser(SchemaModel):
    """A case played as a conversation: a judge-block model acts as the user, turn by turn."""

    persona: str
    """Who the user is (the simulator is told to stay in this role)."""
    goal: str
    """What the user wants from the conversation."""
    first_message: str | None = None
    """The user's first message; when absent the simulator writes it."""
    max_turns: int = Field(default=5, ge=1, le=MAX_SIMULATED_TURNS)
    """Most turns (user message + system answer) before the conversation ends."""
    stop_when: StopWhen | None = None
    """An earlier end; None: the conversation runs ``max_turns`` turns."""

    @field_validator("stop_when", mode="before")
    @classmethod
    def _phrase_shorthand(cls, value: Any) -> Any:
        return {"phrase": value} if isinstance(value, str) else value


class EvalCase(VersionedModel):
    """One dataset case: an opaque input for the system plus the behaviour expected of it."""

    id: str
    input: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    expected: ExpectedBehavior = Field(default_factory=ExpectedBehavior)
    simulated_user: SimulatedUser | None = None
    """Set for a multi-turn case: the runner plays the user (docs/offline.md)."""

    @model_serializer(mode="wrap")
    def _drop_unset_simulation(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A one-turn case serialises as before this field existed, so config hashes of older runs still match.
        data: dict[str, Any] = handler(self)
        if data.get("simulated_user", ...) is None:
            del data["simulated_user"]
        return data


class WorkspaceSpec(SchemaModel):
    """Where a filesystem eval's system works: a fresh copy of ``path`` per (case, variant)."""

    kind: Literal["tempdir_snapshot", "git_branch"]
    path: str
    """The source directory (relative to the eval.yaml) copied, or the git repository branched, per cell."""
    ignore: list[str] = Field(default_factory=list)
    """Globs left out of the manifests and the diff (``.git`` is always left out)."""


class RunVariant(VersionedModel):
    """One way of running the system (a function, an HTTP endpoint, ...) that cases are run against."""

    name: str
    adapter: str
    """``"python_function"``, ``"http"`` or another registered adapter name."""
    config: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    workspace: WorkspaceSpec | None = None
    """Set for filesystem evals: each (case, variant) runs in a fresh copy and its changes are recorded."""


class ToolCall(SchemaModel):
    """A tool call requested by the model (or made by the application)."""

    id: str | None = None
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed arguments; arguments that were not a JSON object are kept as ``{"_raw": <text>}``."""
    started_at: UtcDatetime | None = None
    from_tool_span: bool = False
    """True when only the tool span that ran it tells of this call: no model call of the trace recorded asking
    for it (its model call recorded no output, content capture was off, or the application called the tool
    itself). Its name, id and arguments are the tool span's (an additive 1.x field)."""

    @model_serializer(mode="wrap")
    def _drop_unset_from_tool_span(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A call a model call recorded serialises as before this field existed: stored traces, their hashes and
        # the tool calls a judge is shown stay byte for byte the same.
        data: dict[str, Any] = handler(self)
        if data.get("from_tool_span", ...) is False:
            del data["from_tool_span"]
        return data


class ToolResult(SchemaModel):
    """What a tool returned, linked to its call by ``tool_call_id`` when the call had an id."""

    tool_call_id: str | None = None
    name: str
    content: dict[str, Any] | str


class TraceMessage(SchemaModel):
    """One conversation message.

    An assistant message that requests a tool carries it in ``tool_call`` (one call per message). A ``tool``
    message carries the result in ``content``, the tool name in ``name`` and the id of the call it answers in
    ``tool_call_id`` (an additive 1.x field; a ``tool_call`` on a tool message is read as the call answered).
    Reasoning text goes to ``thinking``, never into ``content``.
    """

    role: Role
    content: str | dict[str, Any] | None = None
    thinking: str | None = None
    tool_call: ToolCall | None = None
    name: str | None = None
    tool_call_id: str | None = None

    def text(self) -> str | None:
        """The message's text: its content when that is text, else the text parts of a media message joined.

        A message with image, audio or file parts keeps them in ``content["parts"]``; what a judge reads of it is
        its text parts only, never a dump of the parts (which may hold a media payload): None when it has no text.
        Other object content (a tool's result, a value cut at capture) is its JSON text.
        """
        content = self.content
        if content is None or isinstance(content, str):
            return content
        parts = content.get("parts")
        if not isinstance(parts, list):
            return json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)
        texts = [
            p if isinstance(p, str) else p.get("content")
            for p in parts
            if isinstance(p, str) or (isinstance(p, dict) and p.get("type") == "text")
        ]
        joined = "\n".join(t for t in texts if isinstance(t, str) and t)
        return joined or None


class LlmStep(SchemaModel):
    """One model call of the trace (an LLM span), in start order: which model answered and why it stopped."""

    span_id: str | None = None
    """The call's span id (16-hex)."""
    model: str | None = None
    """The model that answered (the response's model), else the one asked for; None when not recorded."""
    request_model: str | None = None
    """The model the call asked for."""
    finish_reasons: list[str] = Field(default_factory=list)
    """The provider's finish reasons, verbatim, one per choice (``stop``, ``tool_calls``, ``length``, ...)."""


class TraceOutput(SchemaModel):
    """The system's answer: final text, separate reasoning, and structured output if any."""

    final_answer: str | None = None
    thinking: str | None = None
    """Reasoning text; never concatenated into ``final_answer``."""
    structured: dict[str, Any] | None = None


class TraceMetrics(SchemaModel):
    """Token, cost and streaming figures; ``None`` means "not reported", not zero."""

    token_input: int | None = None
    token_output: int | None = None
    token_thinking: int | None = None
    cost_usd: float | None = None
    """Total cost, including ``cost_thinking_usd``."""
    cost_thinking_usd: float | None = None
    latency_first_token_ms: int | None = None
    latency_last_token_ms: int | None = None
    tokens_per_second: float | None = None
    stream_chunks: int | None = None
    stream_completed: bool | None = None
    custom: dict[str, Any] = Field(default_factory=dict)


class TraceError(SchemaModel):
    """Why the system raised; present on a Trace if and only if it did."""

    type: TraceErrorType
    message: str
    stack: str | None = None


def derive_tool_views(messages: list[TraceMessage]) -> tuple[list[ToolCall], list[ToolResult]]:
    """Return the tool calls and tool results that ``messages`` contain, in message order.

    Args:
        messages: The conversation.

    Returns:
        ``(tool_calls, tool_results)``: every assistant message's ``tool_call``, and one ToolResult per ``tool``
        message (content ``""`` when the message had none).
    """
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for message in messages:
        if message.role == "assistant" and message.tool_call is not None:
            calls.append(message.tool_call)
        elif message.role == "tool":
            answered = message.tool_call
            call_id = message.tool_call_id or (answered.id if answered else None)
            name = message.name or (answered.name if answered else "")
            content = message.content if message.content is not None else ""
            results.append(ToolResult(tool_call_id=call_id, name=name, content=content))
    return calls, results


class Trace(VersionedModel):
    """Everything one (case, variant) execution or one live request did, built from its spans.

    Invariants, enforced on validation:

    * ``started_at``/``finished_at`` are required, timezone-aware UTC (naive input is taken as UTC) and
      ``finished_at >= started_at``.
    * ``latency_ms`` is computed from them in whole milliseconds. It is serialised, but a supplied value is
      ignored on input (it is recomputed), so a file edited by hand can never disagree with its timestamps.
    * ``tool_calls``/``tool_results`` are views of ``messages``: when not supplied they are derived from all the
      messages; supplied lists, empty ones included, are kept as given. The mapping supplies them without the
      calls and results of the history a multi-turn input repeats (a turn's tool calls are the ones it made), and
      with an error result (``{"error": ...}``) for a call whose tool span failed, where ``messages`` keeps the
      text the model was sent for it; each result is the one of the call it follows in ``messages`` (call ids
      repeat across turns on some servers, or are absent), never another call's under the same id. A stored
      Trace read back keeps them so. Adapters that have no messages may set them too.
    * ``error`` is set if and only if the system raised; its ``type`` is one of the four TraceError types.
    * ``output.thinking`` is never part of ``output.final_answer``.
    """

    run_id: str
    case_id: str
    variant_name: str
    started_at: UtcDatetime
    finished_at: UtcDatetime
    input: dict[str, Any] = Field(default_factory=dict)
    output: TraceOutput = Field(default_factory=TraceOutput)
    messages: list[TraceMessage] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_results: list[ToolResult] = Field(default_factory=list)
    metrics: TraceMetrics = Field(default_factory=TraceMetrics)
    llm_steps: list[LlmStep] = Field(default_factory=list)
    """Each model call's model and finish reasons, in start order (an additive 1.x field)."""
    error: TraceError | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    """Keys we use: ``trace_id`` (32-hex), ``span_id`` (16-hex), ``enrichment_errors``: a list of the span
    mapping's notes, ``{"enricher": "evaltrace.mapping", "error": <note>}``, and of TraceEnricher failures,
    ``{"enricher": name, "error": "<type>: <message>"}`` (traces stored by earlier versions may hold plain-string
    notes)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def latency_ms(self) -> int:
        """``finished_at - started_at`` in whole milliseconds."""
        return whole_ms(self.started_at, self.finished_at)

    @field_validator("input", mode="before")
    @classmethod
    def _wrap_input(cls, value: Any) -> Any:
        return value if value is None or isinstance(value, dict) else {"input": value}

    @model_validator(mode="after")
    def _check_invariants(self) -> Trace:
        if self.finished_at < self.started_at:
            raise ValueError(
                f"finished_at ({self.finished_at.isoformat()}) is before started_at ({self.started_at.isoformat()})"
            )
        given = self.model_fields_set
        if "tool_calls" not in given or "tool_results" not in given:
            calls, results = derive_tool_views(self.messages)
            self.tool_calls = self.tool_calls if "tool_calls" in given else calls
            self.tool_results = self.tool_results if "tool_results" in given else results
        return self
