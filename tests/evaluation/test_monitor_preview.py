"""The monitor's query preview, rendered when its samples are read: the same text the eager preview made.

``JobRunner._record`` used to map ``trace.input`` and ``str()`` it for every published result (~37k instructions per
evaluated span). A short ``input.value`` text that nothing mapped yet is now kept by reference and rendered in
``ProductionMonitor.samples()`` (``evaluation/_preview.py``). These tests run real spans through the real pipeline
and compare every sample's preview with the one the old code made from an eagerly mapped Trace of the same spans.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.evaluation._preview import SHORT, PendingQuery
from evaltrace.evaluation.monitor import PREVIEW_CHARS, MonitorSample, ProductionMonitor, _Pending
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import EvaluationResult, Trace

from .conftest import MakePipeline, Pipeline

_LONG = "é" * 150 + "x" * 700  # 850 characters: over SHORT


@evaluator(name="reads_output")
def reads_output(trace: Trace) -> bool:
    return trace.output.final_answer is None or True


# (input.value, extra root attributes); every text here is a value some instrumentation records.
INPUTS: list[tuple[Any, dict[str, Any]]] = [
    (json.dumps({"input": "What is the capital of France?"}), {}),
    (json.dumps({"question": "q", "context": ["a", "b"]}), {}),
    (json.dumps({"input": 3, "other": None}), {}),
    (json.dumps({"input": {"nested": [1, 2.5, True]}}), {}),
    (json.dumps({}), {}),
    (json.dumps([]), {}),
    (json.dumps(["a", {"b": 1}]), {}),
    (json.dumps("a JSON string"), {}),
    ("plain text, not JSON", {}),
    ("", {}),
    ('  {"input": "whitespace around"}  ', {}),
    ("42", {}),
    ("NaN", {}),
    ('{"x": NaN, "y": Infinity}', {}),
    ('{"x": 1e999}', {}),
    ("null", {}),
    ("true", {}),
    ('{"input": "a"} trailing', {}),
    ("[" * 70 + "]" * 70, {}),  # deeper than the mapping's depth limit: kept as text
    (json.dumps({"input": "x" * 300}), {}),  # a query longer than the preview
    (json.dumps({"q": "ü€😀" * 50}, ensure_ascii=False), {}),
    (json.dumps({"_truncated": True, "original_length": 99999, "text": "cut"}), {}),
    ('{"input": "as text"}', {"input.mime_type": "text/plain"}),
    ("plain", {"input.mime_type": "application/json"}),
    ("x" * SHORT, {}),  # the longest text kept
    (json.dumps({"input": "y" * (SHORT - 20)}), {}),
    ("x" * (SHORT + 1), {}),  # one over: the eager path
    (json.dumps({"input": _LONG}), {}),
    # A model call's input.value holds its messages: its query is the last user text (the eager path).
    (
        json.dumps([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello?"}]),
        {"evaltrace.span.kind": "llm"},
    ),
    (json.dumps({"messages": [{"role": "user", "content": "hi"}]}), {"evaltrace.span.kind": "llm"}),
    # Attributes that are not one text: the eager path.
    (("a", "b"), {}),
    (7, {}),
    (True, {}),
]


def _old_preview(trace: Trace) -> str:
    """What ``JobRunner._record`` made before (the query) and the monitor kept of it."""
    raw = trace.input.get("input")
    query = raw if isinstance(raw, str) else str(trace.input or "")
    return (query or "")[:PREVIEW_CHARS]


def _run(p: Pipeline, name: str, value: Any, extra: dict[str, Any], child_llm: bool = False) -> None:
    attributes = {"output.value": name, **extra}  # the answer names the span: samples come in any order
    if value is not None:
        attributes["input.value"] = value
    with p.tracer.start_as_current_span(name, attributes=attributes):
        if child_llm:
            with p.tracer.start_as_current_span(
                "chat", attributes={"evaltrace.span.kind": "llm", "gen_ai.input.messages": "[]"}
            ):
                pass


def _expected(p: Pipeline, name: str) -> str:
    root = p.one(name)
    assert root.context is not None
    members = [s for s in p.spans() if s is root or (s.parent is not None and s.parent.span_id == root.context.span_id)]
    return _old_preview(trace_from_spans(members, root=root))


def _entries(p: Pipeline, evaluator_name: str) -> list[Any]:
    return list(p.processor.monitor._samples[evaluator_name])


def test_every_preview_rendered_on_read_is_the_one_the_eager_trace_gives(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([EvaluatorSpec(reads_output, name_glob="r_*")], hold_timeout_s=30.0)
    cases: dict[str, tuple[Any, dict[str, Any]]] = {"r_no_input": (None, {})}
    for index, (value, extra) in enumerate(INPUTS):
        cases[f"r_case{index}"] = (value, extra)
        cases[f"r_child{index}"] = (value, extra)
    for name, (value, extra) in cases.items():
        _run(p, name, value, extra, child_llm=name.startswith("r_child"))  # a model call under a root that is not one
    p.flush()
    entries = _entries(p, "reads_output")
    samples = p.processor.monitor.samples("reads_output")
    assert len(samples) == len(cases) == len(entries)
    deferred = 0
    for entry, sample in zip(entries, samples, strict=True):
        name = sample.output_preview
        value, extra = cases[name]
        assert type(sample) is MonitorSample
        assert sample.query_preview == _expected(p, name), name
        if isinstance(value, str) and len(value) <= SHORT and extra.get("evaltrace.span.kind") != "llm":
            assert type(entry) is _Pending, name  # kept to render: the path under test
            deferred += 1
        else:
            assert type(entry) is MonitorSample, name  # rendered at once, as before
    assert deferred == 2 * 26  # the short texts of roots that are no model call, with and without one under them


@evaluator(name="edits_input")
def edits_input(trace: Trace) -> bool:
    trace.input["input"] = "edited by the evaluator"
    return True


@evaluator(name="reads_input")
def reads_input(trace: Trace) -> bool:
    return bool(trace.input) or True


def test_an_input_an_evaluator_read_or_changed_is_previewed_as_it_is_then(make_pipeline: MakePipeline) -> None:
    p = make_pipeline([reads_output, edits_input, reads_input], hold_timeout_s=30.0)
    _run(p, "root", json.dumps({"input": "original"}), {})
    p.flush()
    monitor = p.processor.monitor
    # The first evaluator read nothing of the input: rendered from the text. The second changed it: its preview
    # and the third's show the change, as when the preview was made right after each evaluator.
    assert [s.query_preview for s in monitor.samples("reads_output")] == ["original"]
    assert [s.query_preview for s in monitor.samples("edits_input")] == ["edited by the evaluator"]
    assert [s.query_preview for s in monitor.samples("reads_input")] == ["edited by the evaluator"]
    assert type(_entries(p, "reads_output")[0]) is _Pending
    assert type(_entries(p, "edits_input")[0]) is MonitorSample


class _Counting:
    def __init__(self, text: str, fail: bool = False) -> None:
        self.text, self.fail, self.calls = text, fail, 0

    def render(self) -> str:
        self.calls += 1
        if self.fail:
            raise RuntimeError("boom")
        return self.text


def test_a_deferred_query_is_rendered_once_on_read_and_its_text_let_go() -> None:
    monitor = ProductionMonitor(clock=lambda: 5.0)
    query = _Counting("q" * 500)
    monitor.record(EvaluationResult(evaluator="judge", passed=True, score=1.0), query=query, output="a" * 300)
    health = monitor.health()["judge"]
    assert (health.sample_count, health.pass_rate, health.average_score) == (1, 1.0, 1.0)
    assert query.calls == 0  # health needs no preview
    first = monitor.samples("judge")
    second = monitor.samples("judge")
    assert query.calls == 1 and first[0] is second[0]
    assert first[0] == MonitorSample(5.0, True, 1.0, "q" * PREVIEW_CHARS, "a" * PREVIEW_CHARS)
    (entry,) = monitor._samples["judge"]
    assert type(entry) is _Pending and entry.query is None  # the kept text is released once rendered


def test_a_query_that_fails_to_render_is_an_empty_preview_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    monitor = ProductionMonitor()
    monitor.record(EvaluationResult(evaluator="judge", passed=False), query=_Counting("x", fail=True), output="o")
    with caplog.at_level(logging.ERROR, logger="evaltrace"):
        (sample,) = monitor.samples("judge")
    assert (sample.query_preview, sample.output_preview, sample.passed) == ("", "o", False)
    assert "rendering a monitor sample's query preview" in caplog.text


def test_a_pending_query_keeps_only_a_short_text() -> None:
    text = json.dumps({"input": "z" * 10})
    pending = PendingQuery(text, as_text=False)
    assert pending.text is text and pending.render() == "z" * 10
    assert PendingQuery(text, as_text=True).render() == text
    assert not hasattr(pending, "__dict__")  # two slots: the text and a flag
