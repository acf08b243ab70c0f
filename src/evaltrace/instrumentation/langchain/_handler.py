"""``EvaltraceCallbackHandler``: LangChain / LangGraph runs -> OTel spans with evaltrace's kinds and GenAI attributes.

One span per run, parented by ``parent_run_id`` (a run whose parent LangChain did not report starts under the
current OTel context, so a chain called inside an ``@evaltrace.agent`` nests under it):

* a LangGraph graph (the run LangGraph starts without a ``langgraph_node``), a subgraph (a compiled graph used
  as a node or invoked inside one; recognised when its first node starts) and a classic ``AgentExecutor``:
  ``invoke_agent {name}``, kind ``agent``;
* every other chain (graph nodes, sequences, lambdas, prompts): a ``task`` span named after the run
  (Langfuse ``chain``, OpenInference ``CHAIN``), input and output as ``input.value`` / ``output.value``;
* a tool: ``execute_tool {name}`` with ``gen_ai.tool.*``;
* a retriever: ``retrieval {name}``, kind ``retriever``, its documents in ``gen_ai.retrieval.documents``; the
  mapping hands them to RAG evaluators as the retrieved context;
* a model call: ``chat {model}`` (CLIENT), kind ``llm``, unless evaltrace's instrumentation of the model's SDK
  is on (``instrument_openai()``, ``instrument_groq()``...) and reads what the integration asks the SDK for:
  then the SDK call's own span is the model call's span, and this handler makes none (see ``_runs``).

Each span is made current in the OTel context while its run lasts, so the SDK call of a model (and any code a
chain runs) nests under the right chain span. Every span ends exactly once (``pop`` of the run record), on
success and on error. Runs tagged ``langsmith:hidden`` (LangGraph's internal writes) get no span: their children
go to the nearest shown ancestor. Nothing here raises into LangChain: errors go through evaltrace's boundary.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from uuid import UUID

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, TracerProvider
from opentelemetry.util.types import AttributeValue

from evaltrace._internal import semconv as sc
from evaltrace._internal import settings
from evaltrace._internal.errors import handle_internal_errors, reraise_internal_errors
from evaltrace._internal.fast_context import SPAN_KEY, get_current
from evaltrace._internal.jsonutil import capped_text
from evaltrace._internal.spans import end_error
from evaltrace._internal.tracing import INSTRUMENTATION_NAME, LLM_SUPPRESSION_KEYS, SUPPRESSION_KEYS, get_tracer
from evaltrace.context import session_in, session_stamp
from evaltrace.instrumentation.langchain import _codec
from evaltrace.instrumentation.langchain._context import Contexts, Run, WhileRequesting, span_of
from evaltrace.instrumentation.langchain._models import model_request as _model_request
from evaltrace.instrumentation.langchain._results import captured as _captured
from evaltrace.instrumentation.langchain._results import control_flow_events as _control_flow_events
from evaltrace.instrumentation.langchain._results import end_model_error as _end_model_error
from evaltrace.instrumentation.langchain._results import json_value as _json
from evaltrace.instrumentation.langchain._results import model_result as _model_result
from evaltrace.instrumentation.langchain._results import tool_arguments as _codec_arguments
from evaltrace.instrumentation.langchain._results import tool_result as _tool_result
from evaltrace.instrumentation.langchain._runs import _KIND_LABELS, _agent_attributes, _is_agent, _name
from evaltrace.instrumentation.langchain._runs import _integration_calls_the_sdk as _integration_calls_the_sdk
from evaltrace.instrumentation.langchain._runs import conversation_attributes as _conversation
from evaltrace.instrumentation.langchain._runs import provider_traced as provider_traced
from evaltrace.instrumentation.langchain._runs import thread_of as _thread_of
from evaltrace.instrumentation.langchain._streams import carries_output as _carries_output

try:
    # The defining module: importing the package could meet it half-initialised (we load while LangChain does).
    from langchain_core.callbacks.base import BaseCallbackHandler
except ImportError:  # the extra is missing: the class still exists (evaltrace.EvaltraceCallbackHandler resolves)

    class BaseCallbackHandler:  # type: ignore[no-redef]
        """Stands in for LangChain's base class: creating a handler says what to install."""

        def __init__(self) -> None:
            raise ImportError("EvaltraceCallbackHandler needs langchain-core: pip install 'evaltrace[langchain]'")


_HIDDEN_TAG = "langsmith:hidden"  # LangGraph's internal runs (channel writes): shown nowhere, so no span either
_SUPPRESS_LLM_KEY = LLM_SUPPRESSION_KEYS[2]


class EvaltraceCallbackHandler(BaseCallbackHandler):
    """LangChain callback handler that records runs as evaltrace spans.

    ``evaltrace.instrument_langchain()`` registers one for every run; pass one explicitly instead with
    ``chain.invoke(x, config={"callbacks": [EvaltraceCallbackHandler()]})``.

    Example:
        >>> handler = EvaltraceCallbackHandler()  # doctest: +SKIP
        >>> graph.invoke({"messages": [("user", "hi")]}, config={"callbacks": [handler]})  # doctest: +SKIP
    """

    # Called in the caller's context (never from an executor thread), so the spans made current here are the
    # ones the code inside the run sees.
    run_inline = True

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        """Create a handler; it holds only the runs in flight.

        Args:
            tracer_provider: The provider of the spans; default: evaltrace's, looked up per span.
        """
        super().__init__()
        self._runs: dict[UUID, Run] = {}
        self._contexts = Contexts()
        self._tracer = tracer_provider.get_tracer(INSTRUMENTATION_NAME) if tracer_provider is not None else None

    @property
    def raise_error(self) -> bool:  # type: ignore[override]
        """LangChain re-raises a handler's errors only with our switch on (``EVALTRACE_RAISE_INTERNAL_ERRORS=1``)."""
        return reraise_internal_errors()

    # --- lifecycle ---------------------------------------------------------------------------------------

    def _parent_context(self, parent_run_id: UUID | None, current: Context) -> tuple[Context, Span | None]:
        """The context a run starts under, and the span of its parent run (None: no parent run of ours)."""
        parent = self._runs.get(parent_run_id) if parent_run_id is not None else None
        if parent is None:
            return self._contexts.outside(current), None
        # The current context's values (suppression, baggage) with the parent run's span, which the current
        # context may not hold (a callback made from a thread the parent's context was not copied to).
        return Context({**current, SPAN_KEY: parent.shown}), parent.shown

    def _start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        kind: str,
        name: str,
        attributes: dict[str, AttributeValue],
        span_kind: SpanKind = SpanKind.INTERNAL,
        metadata: Mapping[str, Any] | None = None,
    ) -> Run | None:
        current = get_current()
        suppress_otel, suppress_ours = SUPPRESSION_KEYS
        if current.get(suppress_otel) or current.get(suppress_ours):
            return None
        parent, _ = self._parent_context(parent_run_id, current)
        session = self._session(parent_run_id, parent, metadata)
        if session is not None:
            attributes = {**attributes, sc.SESSION_ID: session}
            if session_in(parent) != session:  # so the stamping processor stamps what it would inside a context()
                parent = Context({**parent, **session_stamp(parent, session)})
        langfuse_type, openinference_kind = _KIND_LABELS[kind]
        attributes = {
            sc.EVALTRACE_SPAN_KIND: kind,
            sc.LANGFUSE_OBSERVATION_TYPE: langfuse_type,
            sc.OPENINFERENCE_SPAN_KIND: openinference_kind,
            **attributes,
        }
        start = time.time_ns()
        span = (self._tracer or get_tracer()).start_span(
            name, context=parent, kind=span_kind, attributes=attributes, start_time=start
        )
        run = Run(span, span, Context({**parent, SPAN_KEY: span}), current, kind, started_ns=start, session=session)
        # A model call recorded here: an LLM instrumentation under it must not record its request again.
        extra: dict[str, object] = {_SUPPRESS_LLM_KEY: WhileRequesting(run)} if kind == sc.KIND_LLM else {}
        if session is not None and session_in(current) != session:  # spans of other instrumentations inside too
            extra.update(session_stamp(current, session, run))  # bound to the run: left behind, it stamps no more
        self._contexts.enter(run, current, extra)
        self._runs[run_id] = run
        return run

    def _session(self, parent_run_id: UUID | None, parent: Context, metadata: Mapping[str, Any] | None) -> str | None:
        """The ``session.id`` of a run: its parent run's; for a run of ours at the top, its LangGraph thread.

        A LangGraph thread is a conversation (each ``invoke`` on it a turn): stamped as evaltrace's session, its
        turns make one :class:`~evaltrace.schema.conversation.Conversation`. A session the user set
        (``evaltrace.context(session_id=...)``) is theirs: it wins, and no thread is stamped over it.
        """
        parent_run = self._runs.get(parent_run_id) if parent_run_id is not None else None
        if parent_run is not None:
            return parent_run.session
        thread = _thread_of(metadata)
        return thread if thread is not None and session_in(parent) is None else None

    def _pass_through(
        self, run_id: UUID, parent_run_id: UUID | None, kind: str, metadata: Mapping[str, Any] | None = None
    ) -> None:
        """Keep a run without a span: its children (and an SDK call inside it) nest under its nearest ancestor."""
        current = get_current()
        parent, shown = self._parent_context(parent_run_id, current)
        # No parent run of ours: what is current outside our runs stays current (the user's span, say), so the
        # SDK's span of a top-level model call nests where it would without LangChain.
        run = Run(
            None,
            shown or span_of(parent),
            parent,
            current,
            kind,
            session=self._session(parent_run_id, parent, metadata),
        )
        # The ancestor's span made current where the run executes (another thread may not); the thread's session
        # too, for the span the model's SDK instrumentation makes inside.
        extra = session_stamp(current, run.session, run) if run.session and session_in(current) != run.session else None
        if shown is not None or extra:
            self._contexts.enter(run, current, extra)
        self._runs[run_id] = run

    def _finish(self, run_id: UUID) -> Run | None:
        """Take the run out (so it ends once) and restore the context its start replaced."""
        run = self._runs.pop(run_id, None)
        if run is not None:
            run.ended = True
            self._contexts.leave(run)
        return run

    def _end(self, run_id: UUID, what: str, describe: Callable[[Run], Mapping[str, AttributeValue]]) -> None:
        """End the run's span, once; what ``describe`` reads off the result is best effort: the span ends anyway."""
        with handle_internal_errors(f"ending a LangChain {what} span"):
            run = self._finish(run_id)
            if run is None or run.span is None:
                return
            try:
                with handle_internal_errors(f"recording a LangChain {what} result"):
                    run.span.set_attributes(describe(run))
            finally:
                run.span.end()

    def _fail(self, run_id: UUID, what: str, error: BaseException) -> None:
        """End the run's span, once, as failed by ``error`` (status ERROR, ``error.type``, the exception event).

        LangGraph's control flow is no failure: the span ends with an event naming it (see
        :func:`~evaltrace.instrumentation.langchain._results.control_flow_events`).
        """
        with handle_internal_errors(f"ending a failed LangChain {what} span"):
            run = self._finish(run_id)
            if run is None or run.span is None:
                return
            events = _control_flow_events(error)
            if events is None and run.kind == sc.KIND_LLM:
                _end_model_error(run.span, error, run)
                return
            if events is None:
                end_error(run.span, error)  # the decorators' own ending: the span ends even if recording fails
                return
            try:
                with handle_internal_errors(f"recording LangGraph control flow on a LangChain {what} span"):
                    for name, attributes in events:
                        run.span.add_event(name, attributes)
            finally:
                run.span.end()

    # --- chains and agents -------------------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Start a chain span (an agent span for a LangGraph graph or an AgentExecutor)."""
        with handle_internal_errors("starting a LangChain chain span"):
            metadata = metadata or {}
            # Before the hidden check: a subgraph's first node may be one (LangGraph's ``__start__``).
            self._promote_subgraph(parent_run_id, metadata)
            if tags and _HIDDEN_TAG in tags:
                self._pass_through(run_id, parent_run_id, sc.KIND_TASK, metadata)
                return
            name = _name(kwargs, serialized, "chain")
            attributes: dict[str, AttributeValue] = {}
            if _is_agent(name, serialized, metadata):
                kind, span_name = sc.KIND_AGENT, f"invoke_agent {name}"
                attributes.update(_agent_attributes(name, metadata))
            else:
                kind, span_name = sc.KIND_TASK, name
            if settings.current.capture_content:
                attributes[sc.INPUT_VALUE] = _json(inputs)
            run = self._start(run_id, parent_run_id, kind, span_name, attributes, metadata=metadata)
            if run is not None:
                namespace = metadata.get("langgraph_checkpoint_ns")
                run.namespace = namespace if isinstance(namespace, str) and namespace else None
                # A run inside a node (in the node's namespace, where the node itself is one level below its
                # graph's) is a chain the node calls, or a subgraph: which one, its first child tells.
                parent = self._runs.get(parent_run_id) if parent_run_id is not None else None
                if kind == sc.KIND_TASK and run.namespace and parent is not None and parent.namespace == run.namespace:
                    run.graph_name = name

    def _promote_subgraph(self, parent_run_id: UUID | None, metadata: Mapping[str, Any]) -> None:
        """Make the parent run an agent span when this run is a node of it: the parent is a LangGraph subgraph.

        LangGraph starts a subgraph (a compiled graph used as a node, or invoked inside one) with the metadata of
        the node that runs it, ``langgraph_node`` included, so at its start it looks like any chain a node calls.
        Its nodes tell it apart: each runs in a checkpoint namespace of its own, one level below the graph's
        (``sub:<task>|node:<task>``), where a chain called inside a node shares the node's. So the first node
        renames the subgraph's span ``invoke_agent {name}`` and gives it the agent attributes, before it ends.
        Only a run inside a node is a candidate: a node's own run, whose functional-API ``@task`` children also
        run one level below it, stays a task.
        """
        parent = self._runs.get(parent_run_id) if parent_run_id is not None else None
        if parent is None or parent.graph_name is None or parent.span is None or parent.namespace is None:
            return
        namespace = metadata.get("langgraph_checkpoint_ns")
        if not isinstance(namespace, str) or not namespace.startswith(parent.namespace + "|"):
            return
        name, parent.graph_name, parent.kind = parent.graph_name, None, sc.KIND_AGENT
        langfuse_type, openinference_kind = _KIND_LABELS[sc.KIND_AGENT]
        parent.span.update_name(f"invoke_agent {name}")
        parent.span.set_attributes(
            {
                sc.EVALTRACE_SPAN_KIND: sc.KIND_AGENT,
                sc.LANGFUSE_OBSERVATION_TYPE: langfuse_type,
                sc.OPENINFERENCE_SPAN_KIND: openinference_kind,
                **_agent_attributes(name, metadata),
            }
        )

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """End the chain span with its output."""
        self._end(run_id, "chain", lambda run: _captured(sc.OUTPUT_VALUE, outputs))

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """End the chain span as failed."""
        self._fail(run_id, "chain", error)

    def on_agent_action(self, action: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Note a classic agent's decision to call a tool, as an event on its span (the tool run has its own)."""
        with handle_internal_errors("recording a LangChain agent action"):
            run = self._runs.get(run_id)
            if run is not None and run.span is not None:
                event: dict[str, AttributeValue] = {sc.GEN_AI_TOOL_NAME: str(getattr(action, "tool", ""))}
                if settings.current.capture_content:
                    event[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = _json(getattr(action, "tool_input", None))
                run.span.add_event(sc.EVALTRACE_AGENT_ACTION_EVENT, event)

    def on_agent_finish(self, finish: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Record a classic agent's final answer on its span (the chain's end records its outputs too)."""
        with handle_internal_errors("recording a LangChain agent finish"):
            run = self._runs.get(run_id)
            values = getattr(finish, "return_values", None)
            if run is not None and run.span is not None and settings.current.capture_content and values:
                run.span.set_attribute(sc.OUTPUT_VALUE, _json(values))

    # --- tools -------------------------------------------------------------------------------------------

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Start an ``execute_tool {name}`` span."""
        with handle_internal_errors("starting a LangChain tool span"):
            name = _name(kwargs, serialized, "tool")
            attributes: dict[str, AttributeValue] = {
                sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
                sc.GEN_AI_TOOL_NAME: name,
                sc.GEN_AI_TOOL_TYPE: "function",
            }
            description = serialized.get("description") if isinstance(serialized, Mapping) else None
            if isinstance(description, str) and description:
                attributes[sc.GEN_AI_TOOL_DESCRIPTION] = description.strip().splitlines()[0]
            call_id = kwargs.get("tool_call_id")
            if isinstance(call_id, str) and call_id:
                attributes[sc.GEN_AI_TOOL_CALL_ID] = call_id
            attributes.update(_conversation(metadata))
            if settings.current.capture_content:
                arguments = inputs if inputs is not None else _codec_arguments(input_str)
                attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = _json(arguments)
            run = self._start(
                run_id, parent_run_id, sc.KIND_TOOL, f"execute_tool {name}", attributes, metadata=metadata
            )
            if run is not None and isinstance(call_id, str) and call_id:
                run.tool_call_id = call_id  # which message of a returned Command is this call's result

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """End the tool span with its result (a ``ToolMessage``'s content, or the value returned)."""
        self._end(run_id, "tool", lambda run: _tool_result(run, output))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """End the tool span as failed."""
        self._fail(run_id, "tool", error)

    # --- retrievers --------------------------------------------------------------------------------------

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Start a ``retrieval {name}`` span with the query."""
        with handle_internal_errors("starting a LangChain retriever span"):
            name = _name(kwargs, serialized, "retriever")
            attributes: dict[str, AttributeValue] = {
                sc.GEN_AI_OPERATION_NAME: sc.OP_RETRIEVAL,
                **_conversation(metadata),
            }
            if settings.current.capture_content and isinstance(query, str):
                attributes[sc.GEN_AI_RETRIEVAL_QUERY_TEXT] = capped_text(query, settings.current.max_attribute_length)
                attributes[sc.INPUT_VALUE] = _json({"query": query})
            self._start(run_id, parent_run_id, sc.KIND_RETRIEVER, f"retrieval {name}", attributes, metadata=metadata)

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        """End the retriever span with the documents it found (the RAG context evaluators read)."""
        self._end(
            run_id,
            "retriever",
            lambda run: _captured(sc.GEN_AI_RETRIEVAL_DOCUMENTS, documents, _codec.documents),
        )

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """End the retriever span as failed."""
        self._fail(run_id, "retriever", error)

    # --- models ------------------------------------------------------------------------------------------

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Start a ``chat {model}`` span, or none when the model's SDK call is traced by its own instrumentation."""
        with handle_internal_errors("starting a LangChain chat model span"):
            batch = messages[0] if messages else []
            self._model_start(run_id, parent_run_id, metadata or {}, kwargs, sc.OP_CHAT, batch, serialized)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Start a ``text_completion {model}`` span for a (non-chat) LLM."""
        with handle_internal_errors("starting a LangChain LLM span"):
            batch = [{"role": "user", "content": prompts[0]}] if prompts else []
            self._model_start(run_id, parent_run_id, metadata or {}, kwargs, sc.OP_TEXT_COMPLETION, batch, serialized)

    def _model_start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: Mapping[str, Any],
        kwargs: Mapping[str, Any],
        operation: str,
        batch: Sequence[Any],
        serialized: Any,
    ) -> None:
        if provider_traced(metadata.get("ls_provider")):
            self._pass_through(run_id, parent_run_id, sc.KIND_LLM, metadata)
            return
        attributes, model = _model_request(metadata, kwargs, operation, batch, serialized)
        run = self._start(
            run_id, parent_run_id, sc.KIND_LLM, f"{operation} {model}", attributes, SpanKind.CLIENT, metadata
        )
        if run is not None:
            request_model, provider = attributes.get(sc.GEN_AI_REQUEST_MODEL), attributes.get(sc.GEN_AI_PROVIDER_NAME)
            run.model = request_model if isinstance(request_model, str) else None
            run.provider = provider if isinstance(provider, str) else None

    def on_llm_new_token(self, token: Any, *, run_id: UUID, chunk: Any = None, **kwargs: Any) -> None:
        """Count a streamed chunk; the first output chunk's and the last chunk's times are the stream's timings.

        Time to first chunk starts at the first chunk that carries output (see ``_streams.carries_output``), not at
        a role-only opening one; each chunk is looked into only until that one came (then O(1)).
        """
        run = self._runs.get(run_id)
        if run is None or run.span is None:
            return
        now = time.time_ns()
        if run.first_chunk_ns is None:
            with handle_internal_errors("reading a LangChain stream chunk"):
                if _carries_output(token, chunk):
                    run.first_chunk_ns = now
        run.last_chunk_ns = now
        run.chunks += 1

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """End the model span with the response: output messages, finish reasons, usage, id and model."""
        self._end(run_id, "model", lambda run: _model_result(run, response))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """End the model span as failed."""
        self._fail(run_id, "model", error)
