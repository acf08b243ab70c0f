"""The monitor's deferred query reads the lazy source's copy of the root's attributes, and is what it was.

``_preview.deferred_query`` used to read ``span.attributes`` (a mapping view built per read) and build its
``PendingQuery`` through ``__init__``; it now reads the lazy Trace source's plain copy of the same root's attributes
when the source's root is that span, and sets the two slots directly. Differential: the old function is kept
verbatim below; both are asked about lone and multi-span traces of every evaltrace kind and foreign conventions,
with every shape of ``input.value`` (short and long, JSON and text, not text, missing), the input already read or
failed, another span than the trace's root, and a plain (not lazy) Trace. Same None-or-not, same text, same
``as_text``, same rendered query.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv
from evaltrace.evaluation import _preview
from evaltrace.evaluation._mapping import build_trace
from evaltrace.evaluation._preview import SHORT, PendingQuery, deferred_query
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Trace
from test_mapping_conventions import OPENINFERENCE, span

_GET_DICT, _GET_PRIVATE, _GET_FIELDS_SET = _preview._GET_DICT, _preview._GET_PRIVATE, _preview._GET_FIELDS_SET


def old_deferred_query(span: ReadableSpan, trace: Trace) -> PendingQuery | None:
    """``_preview.deferred_query`` before this change, verbatim."""
    if "input" in _GET_DICT(trace):  # mapped already (perhaps changed by an evaluator since): as it is now
        return None
    failures = getattr(_GET_PRIVATE(trace), "failures", None)  # a LazyTrace's field source (FieldSource)
    if type(failures) is not dict or "input" in failures:  # not lazy, or its input failed to map: eager path
        return None
    attributes: Mapping[str, Any] | None = span.attributes
    if not attributes:
        return None
    text = attributes.get(semconv.INPUT_VALUE)
    if type(text) is not str or len(text) > SHORT:
        return None
    if "llm_steps" in _GET_FIELDS_SET(trace) and _preview._spans().is_llm(span, attributes):
        return None
    return PendingQuery(text, attributes.get(semconv.INPUT_MIME_TYPE) == semconv.MIME_TEXT)


INPUTS: tuple[Any, ...] = (
    json.dumps({"question": "Capital of France?", "context": {"user": "ada"}}),
    json.dumps("Capital of France?"),
    "Capital of France?",
    "",
    "x" * SHORT,
    "x" * (SHORT + 1),
    json.dumps({"messages": [{"role": "user", "content": "Hi"}]}),
    '{"evaltrace.truncated":true,"original_length":99999,"preview":"abc"}',
    ("a", "b"),
    7,
    None,
)
MIMES: tuple[str | None, ...] = (None, "text/plain", "application/json")
KINDS: tuple[dict[str, Any], ...] = (
    {"evaltrace.span.kind": "agent"},
    {"evaltrace.span.kind": "workflow"},
    {"evaltrace.span.kind": "llm", "gen_ai.operation.name": "chat"},
    {"evaltrace.span.kind": "tool", "gen_ai.operation.name": "execute_tool"},
    {"openinference.span.kind": "CHAIN"},
    dict(OPENINFERENCE),
    {},
)


def _attributes() -> Iterator[dict[str, Any]]:
    for kind in KINDS:
        for value in INPUTS:
            for mime in MIMES:
                attributes = {**kind, "output.value": '"Paris."'}
                if value is not None:
                    attributes["input.value"] = value
                if mime is not None:
                    attributes["input.mime_type"] = mime
                yield attributes


CASES = list(_attributes())


def _same(old: PendingQuery | None, new: PendingQuery | None) -> None:
    assert (old is None) == (new is None)
    if old is not None and new is not None:
        assert type(new) is PendingQuery
        # The new code builds it without __init__: a slot added later must not be left unset.
        assert all(hasattr(new, name) for name in PendingQuery.__slots__)
        assert (new.text, new.as_text) == (old.text, old.as_text)
        assert new.render() == old.render()


def _traces(attributes: dict[str, Any]) -> Iterator[tuple[ReadableSpan, Trace]]:
    """The lone span's Trace, and the Trace of the same root with a model call and with a plain child under it."""
    root = span("answer", attributes)
    yield root, build_trace([root], root)
    llm = span("chat", {"evaltrace.span.kind": "llm", "gen_ai.operation.name": "chat"}, parent=root, start=10)
    plain = span("step", {"evaltrace.span.kind": "chain"}, parent=root, start=20)
    for children in ([llm], [plain], [plain, llm]):
        yield root, build_trace([root, *children], root)


@pytest.mark.parametrize("attributes", CASES)
def test_the_deferred_query_is_the_one_the_old_code_gave(attributes: dict[str, Any]) -> None:
    for root, trace in _traces(attributes):
        _same(old_deferred_query(root, trace), deferred_query(root, trace))
        other = span("other", {**attributes, "input.value": "another span's text"})
        _same(old_deferred_query(other, trace), deferred_query(other, trace))  # not the source's root
        try:
            trace.input  # noqa: B018  # read: the query is then made from it, by both
        except Exception:  # a field that failed to map: "input" in failures, the eager path for both
            pass
        _same(old_deferred_query(root, trace), deferred_query(root, trace))
    root = span("answer", attributes)
    eager = trace_from_spans([root], root=root)
    assert deferred_query(root, eager) is None and old_deferred_query(root, eager) is None
