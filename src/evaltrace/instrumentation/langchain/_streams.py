"""A streamed LangChain model call, recorded as ``instrument_openai()`` records the stream it reads.

Split from :mod:`evaltrace.instrumentation.langchain._results`: which chunk starts the time-to-first-chunk clock,
how the stream ended (a Responses stream's ``incomplete`` / ``failed`` / ``cancelled`` status included), and the
failure a Responses stream reported, whether LangChain ends the run with the response or the integration raised it.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from opentelemetry.util.types import AttributeValue

from evaltrace._internal import semconv as sc
from evaltrace._internal.openai.response import responses_failure
from evaltrace.instrumentation.langchain import _codec
from evaltrace.instrumentation.langchain._context import Run

# --- which chunk carries output -----------------------------------------------------------------------------

# Content block type -> the keys whose text is output (LangChain's standard blocks, langchain-openai's Responses
# blocks, langchain-anthropic's). Any other block (an annotation, a built-in tool's item, a bare index) is none.
_OUTPUT_KEYS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "reasoning": ("reasoning", "text"),
    "thinking": ("thinking",),
    "refusal": ("refusal",),
    "function_call": ("arguments",),
    "tool_call_chunk": ("args",),
    "input_json_delta": ("partial_json",),
}


def _has_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _block_has_output(block: Any) -> bool:
    if isinstance(block, str):
        return bool(block)
    if not isinstance(block, Mapping):
        return False
    keys = _OUTPUT_KEYS.get(block.get("type"))  # type: ignore[arg-type]
    if keys is not None and any(_has_text(block.get(key)) for key in keys):
        return True
    # A Responses reasoning item's summary parts (``{"type": "reasoning", "summary": [{"text": ...}]}``).
    summary = block.get("summary") if block.get("type") == "reasoning" else None
    return isinstance(summary, Sequence) and any(isinstance(s, Mapping) and _has_text(s.get("text")) for s in summary)


def _extras_have_output(extra: Any) -> bool:
    """``additional_kwargs`` output: reasoning text, a refusal, tool-call or function-call argument fragments."""
    if not isinstance(extra, Mapping) or not extra:
        return False
    if _has_text(extra.get("reasoning_content")) or _has_text(extra.get("refusal")):
        return True
    reasoning = extra.get("reasoning")  # langchain-openai's Responses v0 format
    if isinstance(reasoning, Mapping) and _block_has_output({**reasoning, "type": "reasoning"}):
        return True
    legacy = extra.get("function_call")
    if isinstance(legacy, Mapping) and _has_text(legacy.get("arguments")):
        return True
    calls = extra.get("tool_calls")
    return isinstance(calls, Sequence) and any(
        isinstance(call, Mapping) and isinstance(fn := call.get("function"), Mapping) and _has_text(fn.get("arguments"))
        for call in calls
    )


def carries_output(token: Any, chunk: Any) -> bool:
    """Whether a streamed chunk carries output: text, reasoning, a refusal or tool-call arguments.

    A chunk that only opens the answer (Chat Completions' role-only first delta, a Responses stream's
    ``response.created`` / ``output_item.added``, a tool call's name without arguments) or only closes it (usage,
    the finish reason, LangChain's last empty chunk) is none, as the OpenAI instrumentation's Responses reading
    counts only ``*.delta`` events: its time is not the time to the first output.
    """
    message = getattr(chunk, "message", None)
    if message is None:  # a text-completion model's ``GenerationChunk``, or no chunk given: the token is the text
        text = getattr(chunk, "text", None) if chunk is not None else token
        return _has_text(text)
    content = getattr(message, "content", None)
    if isinstance(content, str):
        if content:
            return True
    elif isinstance(content, Sequence) and any(_block_has_output(block) for block in content):
        return True
    calls = getattr(message, "tool_call_chunks", None)
    if isinstance(calls, Sequence) and any(isinstance(c, Mapping) and _has_text(c.get("args")) for c in calls):
        return True
    return _extras_have_output(getattr(message, "additional_kwargs", None))


# --- how the stream ended -----------------------------------------------------------------------------------


def responses_metadata(generations: Sequence[Any]) -> Mapping[str, Any] | None:
    """The ``response_metadata`` of an OpenAI Responses answer (langchain-openai keeps its ``status`` there)."""
    for generation in generations:
        message = getattr(generation, "message", None)
        metadata = getattr(message, "response_metadata", None)
        if isinstance(metadata, Mapping) and metadata.get("object") == "response" and metadata.get("status"):
            return metadata
    return None


def end_reason(generations: Sequence[Any], reasons: Sequence[str]) -> str | None:
    """How a stream LangChain ended with its response ended, as the OpenAI instrumentation names it.

    A Responses answer's status says it: ``incomplete`` (a token limit, a content filter: cut by the API, no
    error) and ``failed`` (``error``) are not completed. Otherwise every choice ended with its finish reason: the
    stream carried its terminal signal (``exhausted``). Without one, whether the server cut the stream or the
    integration dropped the reason is not known: no end reason is claimed.
    """
    metadata = responses_metadata(generations)
    status = metadata.get("status") if metadata is not None else None
    if status == "incomplete":
        return sc.STREAM_END_INCOMPLETE
    if status == "failed":
        return sc.STREAM_END_ERROR
    return sc.STREAM_END_EXHAUSTED if generations and len(reasons) == len(generations) else None


def response_failure(generations: Sequence[Any]) -> tuple[str, str] | None:
    """(``error.type``, status message) of a Responses answer whose status is ``failed``, else None.

    Read as ``instrument_openai()`` reads it (:func:`~evaltrace._internal.openai.response.responses_failure`); any
    other status (``cancelled`` included: the response was stopped, nothing failed) is no failure.
    """
    metadata = responses_metadata(generations)
    if metadata is None:
        return None
    return responses_failure(SimpleNamespace(status=metadata.get("status"), error=metadata.get("error")))


_RESPONSE_ERROR_CLASSES = frozenset({("openai.types.responses.response_error", "ResponseError")})
# The text of openai's ``ResponseError``, which langchain-openai raises as a ``ValueError`` when a stream ends in
# ``response.failed``: its repr (``ResponseError(code='...', message='...', ...)``, openai's models' ``str``), or
# pydantic's plain ``str`` (``code='...' message='...'``).
_REPR = re.compile(r"ResponseError\((?P<fields>.*)\)", re.S)
_PLAIN = re.compile(r"code=(?P<code>'[^']*'|\"[^\"]*\"|None) message=(?P<message>'.*'|\".*\")", re.S)


def _error_fields(text: str) -> dict[str, Any] | None:
    """``code`` and ``message`` of a ``ResponseError``'s text, read as the literals its repr wrote; else None."""
    repr_match = _REPR.fullmatch(text)
    if repr_match is not None:
        try:
            call = ast.parse(f"f({repr_match['fields']})", mode="eval").body
            if not isinstance(call, ast.Call) or call.args:
                return None
            fields = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("code", "message")}
        except (ValueError, SyntaxError, TypeError):
            return None
        return fields if "message" in fields else None
    plain = _PLAIN.fullmatch(text)
    if plain is None:
        return None
    try:
        return {"code": ast.literal_eval(plain["code"]), "message": ast.literal_eval(plain["message"])}
    except (ValueError, SyntaxError):
        return None


def raised_failure(error: BaseException) -> tuple[str, str] | None:
    """(``error.type``, status message) of a failed Responses answer an integration raised, else None.

    langchain-openai raises a ``ValueError`` for a stream ending in ``response.failed`` (the text of the response's
    ``error``) and for a failed whole response (the error object itself): the failure the API reported is read
    back from it, so the span names it as ``instrument_openai()`` does (the provider's code as ``error.type``,
    ``"{code}: {message}"`` as the status), not as a ``ValueError``.
    """
    if type(error) is not ValueError or len(error.args) != 1:
        return None
    reported = error.args[0]
    if _codec.is_a(reported, _RESPONSE_ERROR_CLASSES):
        return responses_failure(SimpleNamespace(status="failed", error=reported))
    fields = _error_fields(reported) if isinstance(reported, str) else None
    if fields is None:
        return None
    return responses_failure(SimpleNamespace(status="failed", error=fields))


# --- the stream's attributes --------------------------------------------------------------------------------


def stream_attributes(run: Run, end: str | None, output_tokens: int | None = None) -> dict[str, AttributeValue]:
    """A streamed model call's timings from its chunks' callbacks, as the SDK instrumentations record a stream.

    How the stream ended (``evaltrace.stream.completed`` true only for ``exhausted``) when ``end`` is known, the
    chunk count, the time to the last chunk (from the run's start) and, once a chunk carried output, the time to
    that first output chunk, Langfuse's completion start time and the output tokens per second between it and the
    last chunk. Nothing for a run no chunk of which arrived.
    """
    first_ns, last_ns = run.first_chunk_ns, run.last_chunk_ns
    if not run.chunks:
        return {}
    attributes: dict[str, AttributeValue] = {sc.GEN_AI_REQUEST_STREAM: True}
    if end is not None:
        attributes[sc.EVALTRACE_STREAM_COMPLETED] = end == sc.STREAM_END_EXHAUSTED
        attributes[sc.EVALTRACE_STREAM_END_REASON] = end
    attributes[sc.EVALTRACE_STREAM_CHUNKS] = run.chunks
    if first_ns is not None:
        attributes[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = max(0.0, (first_ns - run.started_ns) / 1e9)
        # Langfuse's time to first token, as the SDK instrumentations stamp it.
        first = dt.datetime.fromtimestamp(first_ns / 1e9, tz=dt.UTC)
        attributes[sc.LANGFUSE_OBSERVATION_COMPLETION_START_TIME] = first.isoformat(timespec="microseconds")
    if last_ns is not None:
        attributes[sc.EVALTRACE_STREAM_TIME_TO_LAST_CHUNK] = max(0.0, (last_ns - run.started_ns) / 1e9)
        if output_tokens is not None and first_ns is not None and last_ns > first_ns:
            attributes[sc.EVALTRACE_STREAM_OUTPUT_TOKENS_PER_SECOND] = output_tokens / ((last_ns - first_ns) / 1e9)
    return attributes
