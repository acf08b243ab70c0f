"""``evaltrace traces export --endpoint``: stored traces reach a real OTLP/HTTP receiver through the SDK exporter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from otlp_receivers import OTLPHttpReceiver, by_name

from evaltrace.cli import main
from evaltrace.exporters import LocalStoreExporter


def _store(root: Path) -> dict[str, str]:
    provider = TracerProvider(resource=Resource({"service.name": "yesterday"}))
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(root)))
    tracer = provider.get_tracer("scope-x", "1.2")
    ids = {}
    for name, outcome in (("good", "pass"), ("bad", "fail")):
        with tracer.start_as_current_span(f"invoke_agent {name}", attributes={"input.value": name}) as agent:
            agent.set_attribute("evaltrace.eval.tone.outcome", outcome)
            with tracer.start_as_current_span("execute_tool lookup") as tool:
                tool.add_event("note", {"k": 1})
        ids[name] = format(agent.get_span_context().trace_id, "032x")
        time.sleep(0.002)
    provider.shutdown()
    return ids


def test_export_sends_stored_traces_to_an_otlp_http_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _store(tmp_path / "store")
    with OTLPHttpReceiver() as receiver:
        assert main(["traces", "export", "--endpoint", receiver.base_url, "--store", str(tmp_path / "store")]) == 0
        spans = receiver.wait_for_spans(4)
    assert "sent 4 span(s)" in capsys.readouterr().err
    assert {r.path for r in receiver.requests} == {"/v1/traces"}
    named = by_name([s for s in spans if s.trace_id == ids["bad"]])
    agent, tool = named["invoke_agent bad"], named["execute_tool lookup"]
    assert tool.parent_span_id == agent.span_id and tool.events == [("note", {"k": 1})]
    assert agent.attributes["evaltrace.eval.tone.outcome"] == "fail"
    assert agent.resource["service.name"] == "yesterday" and agent.scope == "scope-x"


def test_export_filters_and_reports_a_refusing_endpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = _store(tmp_path / "store")
    with OTLPHttpReceiver() as receiver:
        args = ["traces", "export", "--endpoint", receiver.base_url + "/v1/traces", "--failed-evals"]
        assert main([*args, "--store", str(tmp_path / "store")]) == 0
        spans = receiver.wait_for_spans(2)
    assert {s.trace_id for s in spans} == {ids["bad"]}
    capsys.readouterr()
    with OTLPHttpReceiver(status=400) as refusing:
        code = main(["traces", "export", "--endpoint", refusing.base_url, "--store", str(tmp_path / "store")])
    assert code == 1
    assert "4 span(s) were refused or not delivered" in capsys.readouterr().err
