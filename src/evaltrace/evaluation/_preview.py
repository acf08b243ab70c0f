"""The monitor's query preview of an evaluated span, rendered when the monitor's samples are read.

Every judgement becomes a monitor sample with a 200-character preview of the trace's query: ``trace.input["input"]``
when it is a string, else ``str(trace.input)``. Building it for each result meant mapping ``trace.input`` (a JSON
parse) and ``str()`` of the parsed value, about 37k instructions per evaluated span that no evaluator had asked for.

When nothing has mapped the input yet and it is a short ``input.value`` text on a root that is not a model call
(there ``Trace.input`` is that text parsed, as is), the sample keeps a reference to that text instead, and
:meth:`PendingQuery.render` makes the same query from it when ``ProductionMonitor.samples()`` is read. Any other
case (the input mapped or failed already, a longer text, a model call's input, an attribute that is not text)
takes the eager path. Memory stays bounded: a kept text is at most ``SHORT`` characters, a few times the preview.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel

from evaltrace._internal import semconv
from evaltrace.schema import Trace

# The longest input text a sample may keep to render later (four times the 200-character preview).
SHORT = 800
# A model's real instance dict and its private slot (a LazyTrace keeps its field source there), read past
# LazyTrace's ``__dict__`` property, which would map every field.
_GET_DICT: Any = BaseModel.__dict__["__dict__"].__get__
_GET_PRIVATE: Any = BaseModel.__dict__["__pydantic_private__"].__get__
_GET_FIELDS_SET: Any = BaseModel.__dict__["__pydantic_fields_set__"].__get__
_SPANS: list[ModuleType] = []
_new = object.__new__


def _spans() -> ModuleType:
    """``evaltrace.mapping._spans`` (its ``loads`` and ``is_llm``), imported on first use, then kept."""
    if not _SPANS:
        _SPANS.append(importlib.import_module("evaltrace.mapping._spans"))
    return _SPANS[0]


def query_of(trace_input: dict[str, Any]) -> str:
    """The query the monitor previews for a Trace's ``input``: its ``input`` text, else the whole value as text."""
    raw = trace_input.get("input")
    return raw if isinstance(raw, str) else str(trace_input or "")


class PendingQuery:
    """A short ``input.value`` text, and whether it is plain text (``input.mime_type`` text/plain) or JSON."""

    __slots__ = ("as_text", "text")

    def __init__(self, text: str, as_text: bool) -> None:
        self.text = text
        self.as_text = as_text

    def render(self) -> str:
        """The query ``query_of(trace.input)`` gives for the span this text came from."""
        # Trace.input of a root that is not a model call, from its input.value (mapping's _input and json_attr).
        value = self.text if self.as_text else _spans().loads(self.text)
        return query_of(value if isinstance(value, dict) else {"input": value})


def deferred_query(span: ReadableSpan, trace: Trace) -> PendingQuery | None:
    """The query of ``trace`` (mapped with ``span`` as its root) to render later; None: compute it now."""
    if "input" in _GET_DICT(trace):  # mapped already (perhaps changed by an evaluator since): as it is now
        return None
    # The two pydantic slots read as attributes, not through their descriptors' ``__get__`` (a call with its
    # argument tuple each): a Trace's class overrides neither, so both reads are the same slot.
    source: Any = trace.__pydantic_private__
    failures = getattr(source, "failures", None)  # a LazyTrace's field source (FieldSource)
    if type(failures) is not dict or "input" in failures:  # not lazy, or its input failed to map: eager path
        return None
    attributes: Mapping[str, Any] | None
    try:  # the source's plain copy of the root's attributes (the same items): no mapping view built for a read
        attributes = source.root_attrs if source.root is span else span.attributes
    except AttributeError:  # a source without them (not the mapping's _Fields)
        attributes = span.attributes
    if not attributes:
        return None
    text = attributes.get(semconv.INPUT_VALUE)
    if type(text) is not str or len(text) > SHORT:
        return None
    # A model call's input.value may hold its messages (the query is then the last user text): eager path. The
    # Trace marks llm_steps set only when its subtree has model calls: without it the root is no model call.
    if "llm_steps" in trace.__pydantic_fields_set__ and _spans().is_llm(span, attributes):
        return None
    # PendingQuery(text, as_text) without its __init__ frame (once per evaluated span)
    pending = _new(PendingQuery)
    pending.text = text
    pending.as_text = attributes.get(semconv.INPUT_MIME_TYPE) == semconv.MIME_TEXT
    return pending
