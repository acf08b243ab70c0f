from __future__ import annotations

import json
import threading
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from evaltrace.exporters import LocalStoreExporter, LocalTraceStore
from evaltrace.exporters.span_json import span_from_dict, span_to_dict


def test_concurrent_exports_never_interleave_lines(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path, file_name="run-1")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    big = "x" * 20_000  # long lines make torn writes likely if writes were not atomic under the lock

    def work(n: int) -> None:
        for i in range(50):
            with tracer.start_as_current_span(f"w{n}-{i}") as span:
                span.set_attribute("payload", big)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = (tmp_path / "traces" / "run-1.jsonl").read_text().splitlines()
    assert len(lines) == 400
    assert all(json.loads(line)["attributes"]["payload"] == big for line in lines)


def test_round_trip_keeps_ids_status_events_and_later_copies_win(tmp_path: Path) -> None:
    exporter = LocalStoreExporter(tmp_path)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("root") as root:
        with tracer.start_as_current_span("child") as child:
            child.add_event("note", {"k": "v"})
            child.set_status(Status(StatusCode.ERROR, "bad"))
            child.set_attribute("tags", ["a", "b"])
    trace_hex = format(root.get_span_context().trace_id, "032x")
    spans = LocalTraceStore(tmp_path).spans(trace_hex)
    assert [s.name for s in spans] == ["root", "child"]
    restored_child = spans[1]
    assert restored_child.parent is not None
    assert restored_child.parent.span_id == root.get_span_context().span_id
    assert restored_child.status.status_code is StatusCode.ERROR and restored_child.status.description == "bad"
    assert restored_child.events[0].name == "note" and dict(restored_child.events[0].attributes or {}) == {"k": "v"}
    assert tuple(restored_child.attributes["tags"]) == ("a", "b")  # type: ignore[index]

    # an enriched copy of the same span exported later replaces the first one
    data = span_to_dict(restored_child)
    data["attributes"]["evaltrace.eval.x.passed"] = True
    exporter.export([span_from_dict(data)])
    again = LocalTraceStore(tmp_path).spans(trace_hex[:10])
    assert len(again) == 2
    assert again[1].attributes["evaltrace.eval.x.passed"] is True  # type: ignore[index]


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    good = {
        "trace_id": "1" * 32, "span_id": "2" * 16, "parent_span_id": None, "name": "ok", "kind": "INTERNAL",
        "start_time": 1, "end_time": 2, "status": {"code": "UNSET"}, "attributes": {}, "events": [], "links": [],
        "resource": {}, "scope": {"name": "t"},
    }  # fmt: skip
    (tmp_path / "traces" / "a.jsonl").write_text(json.dumps(good) + "\n" + '{"trace_id": "1111')
    assert [s.name for s in LocalTraceStore(tmp_path).spans("1" * 32)] == ["ok"]
