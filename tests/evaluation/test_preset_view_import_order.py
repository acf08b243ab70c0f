"""A span being started with a preset is read with its preset, whenever the evaluation modules were imported.

``deferred_attributes`` starts LLM spans without their start attributes and puts them in on the first read of
``span.attributes`` (its view, installed on ``ReadableSpan`` at the first preset start). The evaluation
processor's ``on_start`` and ``plain_attrs`` read the SDK's ``_attributes`` field in place of that property when
the span's class has the SDK's own property. They used to take that property from ``ReadableSpan`` at their own
import: imported after the first preset start (``configure()`` without evaluators, an instrumented LLM call, then
an evaluator added), they took the view for the SDK's property and read a starting LLM span without its preset, so
its kind was unknown and its trace was not buffered for a kind-matched evaluator. Run in a fresh interpreter: this
one imported everything long ago.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanKind
from evaltrace._internal import deferred_attributes as da

assert "evaltrace.evaluation.processor" not in sys.modules and "evaltrace.mapping._spans" not in sys.modules
preset = da.Preset({"gen_ai.operation.name": "chat", "evaltrace.span.kind": "llm"})
da.start_span(TracerProvider().get_tracer("warm"), "warm", SpanKind.CLIENT, preset, None).end()
view = getattr(ReadableSpan.__dict__["attributes"], "fget", None) is da._attributes_property

from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, evaluator  # after the view

@evaluator(name="on_llm")
def on_llm(trace):
    return True

processor = EvaluationSpanProcessor(evaluators=[EvaluatorSpec(on_llm, span_kinds=["llm"])])
provider = TracerProvider()
provider.add_span_processor(processor)
tracer = provider.get_tracer("t")
preset_span = da.start_span(tracer, "chat m", SpanKind.CLIENT, preset, None)
preset_tracked = processor._buffer.tracking(preset_span.get_span_context().trace_id)
preset_span.end()
copies = []
copy = BoundedAttributes.copy
BoundedAttributes.copy = lambda self: copies.append(1) or copy(self)
plain = tracer.start_span("chat n", attributes={"evaltrace.span.kind": "llm"})
plain_tracked = processor._buffer.tracking(plain.get_span_context().trace_id)
BoundedAttributes.copy = copy
plain.end()
provider.shutdown()
print(json.dumps({"view": view, "preset": preset_tracked, "plain": plain_tracked, "copies": len(copies)}))
"""


# Another library's patch of ReadableSpan.attributes, made after evaltrace's import and before the first preset
# start (our view then wraps it): readers that skip the property would skip the patch.
PATCHED_CHILD = r"""
import json
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanKind
from evaltrace._internal import deferred_attributes as da
from evaltrace.mapping._spans import plain_attrs

sdk = ReadableSpan.__dict__["attributes"]
ReadableSpan.attributes = property(lambda span: {**sdk.fget(span), "patched": 1})
preset = da.Preset({"gen_ai.operation.name": "chat", "evaltrace.span.kind": "llm"})
tracer = TracerProvider().get_tracer("t")
da.start_span(tracer, "warm", SpanKind.CLIENT, preset, None).end()
span = tracer.start_span("plain", attributes={"a": 1})
print(json.dumps({"view": ReadableSpan.__dict__["attributes"].fget is da._attributes_property,
                  "property": dict(span.attributes), "plain_attrs": plain_attrs(span)}))
"""


def _child(code: str) -> dict[str, object]:
    # Without the OTEL_* settings of the environment: a span count limit or a sampler set there turns preset
    # starts (and so the view) off.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def test_a_starting_preset_span_is_read_with_its_preset_when_evaluation_is_imported_after_the_view() -> None:
    seen = _child(CHILD)
    assert seen["view"]  # the view was installed before the evaluation modules were imported
    assert seen["preset"] is True  # was False: read without its preset, kind unknown, the trace not buffered
    # Any other span is still read in place under the view (no copy): the fast path is not lost after an LLM call.
    assert (seen["plain"], seen["copies"]) == (True, 0)


def test_another_librarys_patch_under_the_view_is_never_read_around() -> None:
    seen = _child(PATCHED_CHILD)
    assert seen["view"]  # our view wraps the other library's property
    assert seen["property"] == {"a": 1, "patched": 1}
    assert seen["plain_attrs"] == seen["property"]  # was {"a": 1}: the in-place read skipped the patch


PATCHED_FIRST_CHILD = r"""
import json
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

sdk = ReadableSpan.__dict__["attributes"]
ReadableSpan.attributes = property(lambda span: {**sdk.fget(span), "patched": 1})  # before evaltrace's import
from evaltrace.mapping._spans import plain_attrs

span = TracerProvider().get_tracer("t").start_span("plain", attributes={"a": 1})
print(json.dumps({"property": dict(span.attributes), "plain_attrs": plain_attrs(span)}))
"""


def test_a_patch_made_before_evaltrace_is_imported_is_read_through_too() -> None:
    seen = _child(PATCHED_FIRST_CHILD)
    assert seen["plain_attrs"] == seen["property"] == {"a": 1, "patched": 1}  # was {"a": 1}: taken for the SDK's
