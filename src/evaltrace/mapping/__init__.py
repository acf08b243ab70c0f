"""ReadableSpans of one trace (or one subtree) -> ``schema.Trace``: the only reader of span attributes.

Modules: ``_spans`` (root, subtree, attribute values), ``_messages`` (message parts -> TraceMessages),
``_tools`` (tool spans), ``_conversation`` (ordering, repeated history), ``_metrics``, ``_ends`` (the
conversation's ends, structured notes), ``_values`` (each field's value from the root), ``_build`` (the Trace:
the entry point and the eager assembly), ``_lazy_fields`` (the lazy Trace's fields, mapped on first read),
``_lone_span`` (the lazy Trace of a lone span, read from its fields), ``conventions`` (other instrumentations'
attributes: OpenInference, OpenLLMetry, Vercel AI SDK, GenAI span events).

Rules (DESIGN.md section 4, data-model.md part A), where the spec left a choice:

* Messages come from the LLM spans in start order. A call's input usually repeats the conversation so far;
  only the part after the prefix the conversation already holds is appended. That prefix is the longer of
  (a) the longest input prefix found in order in the conversation, gaps allowed (a context window dropped old
  messages), whose match reaches the conversation's last message, and (b) the longest input prefix equal to
  the conversation's beginning (a retry or a fan-out from the same history). A call with
  ``gen_ai.request.previous_response.id`` sends only new items, so only its already-seen system messages are
  skipped. Messages are compared without ``thinking`` (providers do not send reasoning back) and without the
  tool name of tool messages. Output messages are always appended.
* One tool call per assistant message: a message with several ``tool_call`` parts becomes several messages
  (the first also carries the text and reasoning). ``tool_call_response`` parts become ``tool`` messages.
  Tool arguments that are not a JSON object are kept as ``{"_raw": <value>}``; tool results that are neither a
  string nor an object are kept as their JSON text. Media and unknown parts make the message content
  ``{"parts": [...]}``; media of every convention become GenAI ``uri`` / ``blob`` / ``file`` parts with a
  ``modality`` (blob bytes replaced by their length, a ``data:`` URL's payload by its size). ``<think>``
  reasoning inlined in assistant text (closed blocks, a leading ``...</think>`` whose opening tag was in the
  prompt, an unclosed ``<think>`` tail) is moved to ``thinking``.
* Tool spans: without LLM spans each one becomes an assistant tool-call message plus a tool result message.
  With LLM spans a tool span is matched to a call (by call id, else name and arguments) and stamps its
  ``started_at``; its result is inserted only when no tool message already answers the call. An unmatched
  tool span (called by application code) is appended as a call plus result at its place in time.
* Trace fields: ``input`` is the root's ``input.value`` (a non-object wrapped as ``{"input": value}``; for a
  model call whose ``input.value`` holds its input messages, or a request body with Chat ``messages`` or a
  Responses ``input`` list, ``{"input": <the last user text>}``). ``llm_steps``: per model call, in start order,
  its span id, model (the answering one, else the requested one), requested model and finish reasons as recorded
  (GenAI attributes first, then the span's foreign convention); set only when there are model calls.
  ``final_answer``: for a model call (an LLM root) the text of its own output messages, None when it answered
  with tool calls only (its input's history is never its answer; its ``output.value``, which another
  instrumentation may fill with the raw response body, is then not read); for any other root (and a model call
  that recorded no output messages, such as an ``@llm`` function around an instrumented call) its output when
  it is a string (inline ``<think>`` reasoning moved to ``thinking``), else the answer of the last model call to
  end that recorded output (None when that call only asked for tools), else the JSON text of a non-object
  output. ``structured`` the root's output when it is an object (never for a model call with output messages); ``thinking`` all reasoning joined by blank lines. Run, case and variant come from the root's ``evaltrace.*`` attributes (else from the
  first span of the subtree that has them), else the live defaults.
* Metrics: token and cost sums over LLM spans (None when no span reports one). Streaming (evaltrace's and the
  GenAI attributes, else OpenInference's first-token event, OpenLLMetry's chunk events, the Vercel AI SDK's
  ``ai.response.msTo*`` or Langfuse's ``completion_start_time``): first/last chunk latency from the first
  streamed call, ``tokens_per_second`` the mean over streamed calls, chunks summed, ``stream_completed`` true
  only if every streamed call completed.
* Foreign conventions (``conventions``): a span without GenAI message attributes has its messages read by the first
  convention that finds some (OpenInference, OpenLLMetry, Vercel AI SDK, then GenAI span events), converted to the
  GenAI part form so every rule above applies; span kinds come from ``evaltrace.span.kind``, else the convention's
  kind attribute, else ``gen_ai.operation.name``; token and cost keys fall back to their aliases per span. A
  model call whose convention recorded no input messages but whose ``input.value`` holds an OpenAI Responses
  ``input`` list (alone or in the request body) has that list's items as its input messages.
* Conversation ends (``_ends``, the offline runner's rule): unless the root is one step (a tool call, a
  retrieval, an embedding), a trace without a user message gets the user's turn (``turn_user_input`` of its
  input) first, and a final answer that the messages do not end with (and that is not already the last
  assistant text) is appended as an assistant message: a decorator-only agent reads as a conversation.
* Values cut at capture (the truncation marker of ``_internal.jsonutil``) are kept as they are and noted in
  ``extra["enrichment_errors"]`` as ``{"enricher": "evaltrace.mapping", "error": <note>}`` (a failed
  TraceEnricher's shape); malformed or foreign attributes are skipped with a note, never raised. JSON
  nested deeper than 64 levels, and non-finite numbers, are kept as text so the Trace always serialises.
"""

from __future__ import annotations

from evaltrace.mapping._build import trace_from_spans

__all__ = ["trace_from_spans"]
