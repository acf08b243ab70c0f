"""The mapping builds its Trace without re-validation: it must equal, dump and load as a validated one."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.mapping import trace_from_spans
from evaltrace.mapping._spans import plain_attrs
from evaltrace.schema import Trace, TraceOutput


def _spans() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent") as root:
        root.set_attribute("evaltrace.span.kind", "agent")
        root.set_attribute("input.value", json.dumps({"question": "capital of France?", "n": 1.5}))
        root.set_attribute("output.value", json.dumps("Paris"))
        with tracer.start_as_current_span("chat") as llm:
            llm.set_attribute("gen_ai.operation.name", "chat")
            llm.set_attribute(
                "gen_ai.input.messages", json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
            )
            call = {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"q": "France"}}
            llm.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [call]}]))
            llm.set_attribute("gen_ai.usage.input_tokens", 7)
    return list(exporter.get_finished_spans())


def test_trace_equals_its_validated_twin() -> None:
    trace = trace_from_spans(_spans())
    given = {k: getattr(trace, k) for k in trace.model_fields_set if k not in ("tool_calls", "tool_results")}
    validated = Trace(**given)
    assert trace == validated
    assert trace.model_fields_set == validated.model_fields_set
    assert trace.model_dump_json() == validated.model_dump_json()
    assert trace.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert [c.name for c in trace.tool_calls] == ["lookup"]  # the validator's derived views, done by the mapping
    assert Trace.model_validate_json(trace.model_dump_json()) == trace


def test_times_out_of_order_still_fail_validation() -> None:
    spans = _spans()
    root = next(s for s in spans if s.name == "agent")
    assert root.start_time is not None
    root._end_time = root.start_time - 1_000_000  # ended before it started: a malformed foreign span
    with pytest.raises(ValueError, match="before started_at"):
        trace_from_spans(spans, root=root)


def _single(service: str, **attributes: str) -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("agent", attributes=attributes):
        pass
    (span,) = exporter.get_finished_spans()
    return span


def test_a_single_span_reads_its_own_identity_and_its_own_resource() -> None:
    # The single-span path reads identity inline and remembers the last resource's service name: each span
    # still gets its own resource's name, and its own run/case/variant when it has them.
    first, second = _single("svc-a"), _single("svc-b")
    assert trace_from_spans([first], root=first).variant_name == "svc-a"
    assert trace_from_spans([second], root=second).variant_name == "svc-b"
    assert trace_from_spans([first], root=first).variant_name == "svc-a"
    named = _single("svc-a", **{"evaltrace.run_id": "r1", "evaltrace.case_id": "c1", "evaltrace.variant": "v1"})
    trace = trace_from_spans([named], root=named)
    assert (trace.run_id, trace.case_id, trace.variant_name) == ("r1", "c1", "v1")
    empty = _single("svc-a", **{"evaltrace.run_id": "", "evaltrace.variant": ""})
    trace = trace_from_spans([empty], root=empty)
    assert (trace.run_id, trace.case_id, trace.variant_name) == ("live", f"{empty.context.trace_id:032x}", "svc-a")


@pytest.mark.parametrize(
    ("output", "answer", "thinking"),
    [
        ("Paris", "Paris", None),
        ("<think>capital?</think>Paris", "Paris", "capital?"),
        ("thinks> Paris", "thinks> Paris", None),
    ],
)
def test_a_text_output_loses_only_its_reasoning(output: str, answer: str, thinking: str | None) -> None:
    span = _single("svc", **{"output.value": json.dumps(output)})
    trace = trace_from_spans([span], root=span)
    assert (trace.output.final_answer, trace.output.thinking) == (answer, thinking)
    assert trace.output == Trace.model_validate_json(trace.model_dump_json()).output


_CHAT_ANSWER = json.dumps(
    [{"role": "assistant", "parts": [{"type": "reasoning", "content": "hm"}, {"type": "text", "content": "Paris"}]}]
)


@pytest.mark.parametrize(
    "attributes",
    [
        {"output.value": json.dumps("Paris")},
        {"output.value": json.dumps("<think>capital?</think>Paris")},
        {"output.value": "Paris", "output.mime_type": "text/plain"},
        {"gen_ai.operation.name": "chat", "gen_ai.output.messages": _CHAT_ANSWER},  # a model call's own answer
    ],
    ids=["json-text", "inline-reasoning", "plain-text", "model-call"],
)
def test_an_answer_output_is_its_validated_twin_in_every_way(attributes: dict[str, str]) -> None:
    """The answer's TraceOutput is built without pydantic (its slots set directly): nothing of it may differ."""
    span = _single("svc", **attributes)
    for trace in (trace_from_spans([span], root=span), trace_from_spans([span], root=span, lazy=True)):
        output = trace.output
        twin = TraceOutput(final_answer=output.final_answer, thinking=output.thinking)
        assert output.final_answer == "Paris"
        assert type(output) is TraceOutput and output == twin
        assert list(output.__dict__.items()) == list(twin.__dict__.items())  # values and field order
        assert output.model_fields_set == twin.model_fields_set == {"final_answer", "thinking"}
        assert output.model_dump(exclude_unset=True) == twin.model_dump(exclude_unset=True)
        assert (output.__pydantic_extra__, output.__pydantic_private__) == (twin.__pydantic_extra__, None)
        assert repr(output) == repr(twin) and output.model_dump_json() == twin.model_dump_json()
        assert pickle.loads(pickle.dumps(output)) == twin and copy.deepcopy(output) == twin
        output.final_answer = "Lyon"  # an unfrozen model as the validated one (its own dict, not shared)
        assert trace_from_spans([span], root=span).output.final_answer == "Paris"


class _NoCopy(Mapping[str, Any]):
    """An attribute mapping without ``copy()`` (a foreign ReadableSpan's)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def test_a_spans_attributes_are_read_as_a_plain_dict_copy_of_what_its_view_shows() -> None:
    """plain_attrs() copies through the view's copy(); every kind of span gives dict(view), as its own dict."""
    live = _single("svc", **{"input.value": '{"q":1}', "output.value": '"a"', "evaltrace.span.kind": "agent"})
    values = dict(live.attributes or {})
    spans = [
        live,  # the SDK's span: BoundedAttributes under the view
        ReadableSpan(name="copy", context=live.context, attributes=dict(values), resource=live.resource),
        ReadableSpan(name="foreign", context=live.context, attributes=_NoCopy(dict(values)), resource=live.resource),
        ReadableSpan(name="none", context=live.context, attributes=None, resource=live.resource),
    ]
    for span in spans:
        got = plain_attrs(span)
        view = dict(span.attributes or {})
        assert type(got) is dict and list(got.items()) == list(view.items()), span.name
        got["evaltrace.span.kind"] = "edited"  # the copy is the mapping's own: the span is unchanged
        assert dict(span.attributes or {}) == view, span.name
