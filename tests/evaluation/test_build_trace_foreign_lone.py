"""A lone span of a foreign convention is mapped once by ``build_trace``, to the same Trace as before.

``build_trace`` tries ``_build._lazy_single`` on an evaluated span without descendants; for a span without
``evaltrace.span.kind`` (OpenInference, OpenLLMetry, Vercel AI or GenAI-event attributes only) or one ending before
its start it returns None, and ``build_trace`` used to call ``trace_from_spans``, which tried it a second time before
the general mapping. Now it goes to that general mapping directly (``_build.mapped_trace``). Differential: the old
``build_trace`` is kept verbatim below, and both map the conventions' recorded attribute sets and edited variants;
the Traces must read the same field by field (in two orders) and dump the same whole, and the new one must try the
lone shortcut once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan

from evaltrace.evaluation import _mapping
from evaltrace.evaluation._mapping import MappingFailed, build_trace
from evaltrace.mapping import _build
from evaltrace.mapping._lazy import FIELDS
from evaltrace.schema import Trace
from test_mapping_conventions import EVENT_SPAN, OPENINFERENCE, OPENLLMETRY, VERCEL, genai_events, span


def old_build_trace(spans: Sequence[ReadableSpan], root: ReadableSpan) -> Trace:
    """``evaluation._mapping.build_trace`` before this change (verbatim but for the logging)."""
    try:
        mapping = _mapping._MAPPING[0] if _mapping._MAPPING else _mapping._mapping()
        if len(spans) == 1 and spans[0] is root and type(root) is ReadableSpan:
            original, lone = _mapping._LONE[0][:2]
            if mapping.trace_from_spans is original:
                single = lone(root)
                if single is not None:
                    return single
        trace: Trace = mapping.trace_from_spans(list(spans), root=root, lazy=True)
        return trace
    except Exception as exc:
        raise MappingFailed(f"{type(exc).__name__}: {exc}") from exc


OI_CHAIN = {
    "openinference.span.kind": "CHAIN",
    "input.value": json.dumps({"question": "Capital of France?", "context": {"user": "ada"}}),
    "input.mime_type": "application/json",
    "output.value": '"Paris is the capital of France."',
    "output.mime_type": "application/json",
}
OPENLLMETRY_WORKFLOW = {
    "traceloop.span.kind": "workflow",
    "traceloop.entity.name": "answer",
    "traceloop.entity.input": json.dumps({"inputs": {"question": "Capital of France?"}}),
    "traceloop.entity.output": json.dumps({"outputs": "Paris."}),
}


def _variants() -> Iterator[tuple[str, dict[str, Any], list[Event], int]]:
    """(id, attributes, events, end offset in ns: negative ends the span before its start)."""
    bases: dict[str, tuple[dict[str, Any], list[Event]]] = {
        "openinference-llm": (OPENINFERENCE, []),
        "openllmetry-chat": (OPENLLMETRY, []),
        "vercel-ai": (VERCEL, []),
        "genai-events-json": (EVENT_SPAN, genai_events(flat=False)),
        "genai-events-flat": (EVENT_SPAN, genai_events(flat=True)),
        "openinference-chain": (OI_CHAIN, []),
        "openllmetry-workflow": (OPENLLMETRY_WORKFLOW, []),
        "no-attributes": ({}, []),
        "evaltrace-agent": ({"evaltrace.span.kind": "agent", "output.value": '"Paris."'}, []),
    }
    for name, (attributes, events) in bases.items():
        yield name, dict(attributes), events, 0
        yield f"{name}/ends-before-start", dict(attributes), events, -2_000_000_000
        for kind in ("AGENT", "TOOL", "RETRIEVER", "EVALUATOR", "bogus"):  # OpenInference kinds, one it does not know
            yield f"{name}/oi-{kind}", {**attributes, "openinference.span.kind": kind}, events, 0
        yield f"{name}/text-output", {**attributes, "output.value": "Paris.", "output.mime_type": "text/plain"}, [], 0
        yield f"{name}/op-execute-tool", {**attributes, "gen_ai.operation.name": "execute_tool"}, events, 0
        yield f"{name}/error", {**attributes, "error.type": "ValueError"}, events, 0


VARIANTS = list(_variants())


def _span(attributes: dict[str, Any], events: list[Event], end_offset: int) -> ReadableSpan:
    made = span("answer", attributes, events=events)
    if end_offset:
        made._end_time = made._start_time + end_offset  # type: ignore[operator]
    return made


def _mapped(build: Callable[[Sequence[ReadableSpan], ReadableSpan], Trace], root: ReadableSpan) -> Trace | str:
    try:
        return build([root], root)
    except MappingFailed as exc:
        return f"failed: {exc}"


@pytest.mark.parametrize(
    ("attributes", "events", "end_offset"), [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS]
)
def test_a_foreign_lone_span_maps_as_before_field_by_field_and_whole(
    attributes: dict[str, Any], events: list[Event], end_offset: int
) -> None:
    for order in (FIELDS, tuple(reversed(FIELDS))):
        root = _span(attributes, events, end_offset)
        old, new = _mapped(old_build_trace, root), _mapped(build_trace, root)
        if isinstance(old, str) or isinstance(new, str):
            assert old == new
            return
        assert type(new) is type(old)
        assert new.model_fields_set == old.model_fields_set
        for name in order:
            assert getattr(new, name) == getattr(old, name), name
        assert new.model_dump_json() == old.model_dump_json()
        assert new.latency_ms == old.latency_ms


@pytest.mark.parametrize(
    ("attributes", "events", "end_offset"), [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS]
)
def test_build_trace_tries_the_lone_shortcut_once(
    attributes: dict[str, Any], events: list[Event], end_offset: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_trace([span("warm", {})], span("warm", {}))  # _LONE filled
    calls: list[ReadableSpan] = []
    original = _build._lazy_single

    def counted(root: ReadableSpan, *output_map: Any) -> Trace | None:  # build_trace passes its output mapping
        calls.append(root)
        return original(root, *output_map)

    monkeypatch.setattr(_build, "_lazy_single", counted)  # what trace_from_spans looks up
    monkeypatch.setattr(_mapping, "_LONE", [(_mapping._LONE[0][0], counted, *_mapping._LONE[0][2:])])
    root = _span(attributes, events, end_offset)
    _mapped(old_build_trace, root)  # a span ending before its start fails (mapping_failed) on both
    tried_before = len(calls)
    calls.clear()
    _mapped(build_trace, root)
    assert len(calls) == 1
    assert tried_before == (1 if attributes.get("evaltrace.span.kind") and not end_offset else 2)
