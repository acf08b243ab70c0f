"""A lone decorated span's ``output`` and ``input`` mapped in one frame (``_build._Lone``) equal the general mapping.

Differential: real spans made by the ``@agent`` and ``@workflow`` decorators (what the live pipeline
evaluates), and edited copies of them (every shape of ``output.value`` / ``input.value`` the fast path must either
map alike or leave to the general path), are mapped by ``_Lone`` and by the general ``_Fields`` source it replaces
(the old code), field by field, with the same notes kept for ``extra``; and each lazy Trace is checked whole
against the eager mapping (``lazy_mapping.check_lazy``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace.mapping import _build
from evaltrace.mapping._lazy import _DICT, _PRIVATE, FIELDS
from lazy_mapping import ORIGINAL, check_lazy
from readable_spans import rebuilt

pytestmark = pytest.mark.usefixtures("provider")

QUESTION, CONTEXT = "What is the capital of France?", {"user": "ada", "locale": "en-GB", "turn": 3}
LONG = "Paris. " * 40  # past the 128-character shortcut of loads()' depth check
DEEP = "[" * 70 + "]" * 70  # deeper than the 64 levels a Trace keeps as JSON: kept as text
OUTPUTS: tuple[Any, ...] = (
    "Paris is the capital of France.",
    "",
    LONG,
    "<think>the capital?</think>Paris.",
    "Paris.</think>",
    "café ✓ \u2028 \\ \" '",
    {"answer": "Paris", "sources": [1, 2, {"x": None}]},
    [1, "two", 3.5],
    None,
    42,
    3.25,
    True,
)

# Edited values of output.value / input.value (raw attribute text), each read by both sources.
RAW_VALUES: tuple[Any, ...] = (
    '"Paris"',
    '""',
    ' "Paris"',  # whitespace around a JSON value: decode() accepts it
    '"Paris" ',
    '"Paris" trailing',  # not JSON: kept as text
    "Paris",
    "",
    "   ",
    '"<think>hm</think>Paris"',
    '"a</think>b"',
    "plain think> text",
    "NaN",
    '"NaN"',
    "[1e999]",
    "1e999",
    '{"a":1}',
    '{"a":NaN}',
    "[1,2]",
    "null",
    "true",
    "12",
    DEEP,
    '"' + "x" * 200 + '"',
    '{"evaltrace.truncated":true,"original_length":99999,"preview":"abc"}',  # a value cut at capture: noted
    '{"evaltrace.truncated":true,"original_length_is_minimum":true,"original_length":4096}',
    '{"evaltrace.truncated":false}',
    '{"evaltrace.truncated":1}',
    '"unterminated',
    ("a", "b"),  # not text: a sequence attribute
    7,
    3.5,
    False,
)
MIME_TYPES: tuple[str | None, ...] = (None, "text/plain", "application/json")


def _decorated_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """Real finished spans of the decorators, for every output shape (one decorated call each, no children)."""
    spans: list[ReadableSpan] = []
    for decorate in (evaltrace.agent, evaltrace.workflow):
        for value in OUTPUTS:

            @decorate()
            def answer(question: str, context: dict[str, Any], _value: Any = value) -> Any:
                return _value

            exporter.clear()
            answer(QUESTION, CONTEXT)
            (span,) = exporter.get_finished_spans()
            spans.append(span)
    return spans


def _edited(span: ReadableSpan, changes: dict[str, Any] | None = None) -> ReadableSpan:
    """A copy of ``span`` as the pipeline holds it, its attributes changed (None removes one)."""
    attributes = dict(span.attributes or {})
    for key, value in (changes or {}).items():
        if value is None:
            attributes.pop(key, None)
        else:
            attributes[key] = value
    return rebuilt(span, attributes)


def _variants(span: ReadableSpan) -> Iterator[ReadableSpan]:
    yield _edited(span)
    for raw in RAW_VALUES:
        for mime in MIME_TYPES:
            yield _edited(span, {"output.value": raw, "output.mime_type": mime})
            yield _edited(span, {"input.value": raw, "input.mime_type": mime})
    yield _edited(span, {"output.value": None})
    yield _edited(span, {"input.value": None})
    # Without input.value / output.value: the conventions' keys (pydantic-ai's messages, another output key).
    yield _edited(span, {"input.value": None, "pydantic_ai.all_messages": '[{"role":"user","content":"hi"}]'})
    yield _edited(span, {"output.value": None, "gen_ai.output.messages": '"x"'})


def _general(lone: Any) -> Any:
    """The same source as the general ``_Fields`` (the code ``_Lone`` replaces for these two fields)."""
    general = object.__new__(_build._Fields)
    general.failures = {}
    for name in _build._Fields.__slots__:
        setattr(general, name, getattr(lone, name))
    general.parts = {}
    return general


def _same(got: Any, want: Any) -> None:
    assert type(got) is type(want)
    assert got == want
    if hasattr(want, "model_fields_set"):
        assert got.model_fields_set == want.model_fields_set
        assert got.model_dump_json() == want.model_dump_json()


def _check(span: ReadableSpan) -> None:
    trace = _build._lazy_single(span)
    assert trace is not None
    lone = _PRIVATE.__get__(trace)
    assert type(lone) is _build._Lone  # a decorated span without model or tool kind: the one-frame source
    general = _general(lone)
    for order in (("output", "input"), ("input", "output")):
        lone.parts.clear()
        general.parts.clear()
        for name in order:
            _same(lone.field(name), general.field(name))
        assert lone.parts == general.parts  # the notes kept for ``extra``
    # Every other field, and ``extra`` (the notes of both), from the fast source as from the general one.
    for name in FIELDS:
        if name not in _DICT.__get__(trace):
            _same(lone.field(name), general.field(name))
    check_lazy([span], span, ORIGINAL([span], span))


def test_a_decorated_span_maps_its_output_and_input_as_the_general_mapping(exporter: InMemorySpanExporter) -> None:
    for span in _decorated_spans(exporter):
        _check(_edited(span))


def test_edited_outputs_and_inputs_of_a_decorated_span_map_as_the_general_mapping(
    exporter: InMemorySpanExporter,
) -> None:
    (agent, *_) = _decorated_spans(exporter)
    for span in _variants(agent):
        _check(span)


def test_model_and_tool_spans_keep_the_general_source(exporter: InMemorySpanExporter) -> None:
    (agent, *_) = _decorated_spans(exporter)
    for changes in ({"evaltrace.span.kind": "llm"}, {"evaltrace.span.kind": "tool"}):
        span = _edited(agent, changes)
        trace = _build._lazy_single(span)
        assert trace is not None and type(_PRIVATE.__get__(trace)) is _build._Fields
        check_lazy([span], span, ORIGINAL([span], span))
