from __future__ import annotations

import base64
import json
import stat
import time
from pathlib import Path

import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry import trace as otel_trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from evaltrace.cli import main
from evaltrace.exporters import LocalStoreExporter

JSON_KEYS = {
    "trace_id", "root_name", "service", "start_time", "start_time_unix_nano", "duration_ms", "span_count", "status",
    "evaluations", "session_id", "user_id", "input_tokens", "output_tokens", "cost_usd",
}  # fmt: skip


def _write(
    store: Path,
    service: str,
    name: str,
    *,
    ago_s: float,
    fail: bool = False,
    error: bool = False,
    eval_error: bool = False,
) -> str:
    provider = TracerProvider(resource=Resource({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(LocalStoreExporter(store)))
    tracer = provider.get_tracer("t")
    start = time.time_ns() - int(ago_s * 1e9)
    root = tracer.start_span(name, start_time=start, attributes={"input.value": f"question about {name}"})
    root.set_attribute("evaltrace.eval.tone.outcome", "fail" if fail else "pass")
    root.set_attribute("session.id", f"session-{service}")
    if eval_error:  # a judge that was down: the evaluation errored, it did not judge
        root.set_attribute("evaltrace.eval.judge.outcome", "error")
    with otel_trace.use_span(root, end_on_exit=False):
        child = tracer.start_span("chat", start_time=start + 1000, attributes={"evaltrace.span.kind": "llm"})
        child.set_attribute("gen_ai.usage.input_tokens", 7)
        if error:
            child.set_status(Status(StatusCode.ERROR, "rate limited"))
        child.end(end_time=start + 2000)
    root.end(end_time=start + 3_000_000)
    provider.shutdown()
    return format(root.get_span_context().trace_id, "032x")


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / ".evaltrace"
    ids = {
        "old": _write(root, "batch", "nightly", ago_s=3 * 86400),
        "failed": _write(root, "web", "checkout", ago_s=7200, fail=True),
        "errored": _write(root, "web", "search", ago_s=60, error=True),
    }
    return root, ids


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    assert main(["traces", "list", "--json", *args]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, list)
    return data


def test_list_json_has_stable_keys_and_filters(
    store: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, ids = store
    every = _json(capsys, "--store", str(root))
    assert [t["trace_id"] for t in every] == [ids["errored"], ids["failed"], ids["old"]]
    assert all(set(t) == JSON_KEYS for t in every)
    errored = every[0]
    assert errored["status"] == "error" and errored["span_count"] == 2 and errored["input_tokens"] == 7
    assert errored["evaluations"] == {"pass": 1, "fail": 0, "error": 0, "not_evaluated": 0, "pending": 0}
    assert errored["session_id"] == "session-web" and str(errored["start_time"]).endswith("Z")

    def ids_of(*flags: str) -> list[object]:
        return [t["trace_id"] for t in _json(capsys, "--store", str(root), *flags)]

    assert ids_of("--service", "batch") == [ids["old"]]
    assert ids_of("--since", "1d") == [ids["errored"], ids["failed"]]
    assert ids_of("--status", "error") == [ids["errored"]]
    assert ids_of("--status", "ok", "--since", "1d") == [ids["failed"]]
    assert ids_of("--failed-evals") == [ids["failed"]]
    assert ids_of("--evaluator", "tone", "--limit", "1") == [ids["errored"]]
    assert ids_of("--session", "session-batch") == [ids["old"]]
    assert ids_of("--user", "nobody") == []
    assert ids_of("--search", "checkout") == [ids["failed"]]


def test_where_selects_traces_by_a_span_attribute(
    store: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, ids = store

    def ids_of(*flags: str) -> list[object]:
        return [t["trace_id"] for t in _json(capsys, "--store", str(root), *flags)]

    # A child span's attribute selects its trace; numbers and strings as written; several --where all hold.
    assert ids_of("--where", "gen_ai.usage.input_tokens=7") == [ids["errored"], ids["failed"], ids["old"]]
    assert ids_of("--where", "input.value=question about checkout") == [ids["failed"]]
    assert ids_of("--where", "session.id=session-web", "--where", "evaltrace.eval.tone.outcome=fail") == [ids["failed"]]
    assert ids_of("--where", "gen_ai.usage.input_tokens=8") == []


def test_eval_errors_lists_the_traces_whose_evaluations_errored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / ".evaltrace"
    healthy = _write(root, "web", "healthy", ago_s=30)
    failed = _write(root, "web", "judged-bad", ago_s=20, fail=True)
    errored = _write(root, "web", "judge-down", ago_s=10, eval_error=True)
    both = _write(root, "web", "both", ago_s=5, fail=True, eval_error=True)

    def ids_of(*flags: str) -> list[object]:
        return [t["trace_id"] for t in _json(capsys, "--store", str(root), *flags)]

    assert ids_of("--eval-errors") == [both, errored]
    assert ids_of("--eval-errors", "--evaluator", "judge") == [both, errored]
    assert ids_of("--eval-errors", "--evaluator", "tone") == []  # tone judged every trace
    assert ids_of("--eval-errors", "--failed-evals") == [both]  # every given filter holds
    assert healthy not in ids_of("--eval-errors") and failed not in ids_of("--eval-errors")
    assert main(["traces", "export", "--store", str(root), "--eval-errors"]) == 0
    assert "exported 2 trace(s)" in capsys.readouterr().err


def test_list_table_says_when_filters_match_nothing(
    store: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    root, ids = store
    assert main(["traces", "list", "--store", str(root), "--failed-evals"]) == 0
    out = capsys.readouterr().out
    assert "checkout" in out and "nightly" not in out
    assert main(["traces", "list", "--store", str(root), "--search", "weather"]) == 0
    assert "match these filters" in capsys.readouterr().out


@pytest.mark.parametrize("flags", [["--since", "yesterday"], ["--status", "broken"], ["--limit", "0"]])
def test_bad_flags_are_named(flags: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["traces", "list", "--store", str(tmp_path), *flags])
    assert exited.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_show_accepts_a_unique_prefix_and_lists_candidates_of_an_ambiguous_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    root = tmp_path / ".evaltrace"
    ids = [_write(root, "web", f"t{i}", ago_s=i) for i in range(20)]
    first = ids[0]
    unique = next(first[:n] for n in range(1, 33) if sum(i.startswith(first[:n]) for i in ids) == 1)
    assert main(["traces", "show", unique, "--store", str(root)]) == 0
    assert "t0" in capsys.readouterr().out
    shared = next(p for p in "0123456789abcdef" if sum(i.startswith(p) for i in ids) > 1)
    assert main(["traces", "show", shared, "--store", str(root)]) == 1
    out = capsys.readouterr().out
    assert "ambiguous" in out
    assert all(i in out.replace("\n", "") for i in ids if i.startswith(shared))


def _decode_line(line: str) -> ExportTraceServiceRequest:
    """Parse one OTLP/JSON line with opentelemetry-proto (protobuf's parser wants ids in base64)."""
    document = json.loads(line)
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        assert len(span[key]) in (16, 32) and int(span[key], 16) >= 0  # hex, as OTLP/JSON says
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return ParseDict(document, ExportTraceServiceRequest())


def test_export_otlp_json_writes_one_request_per_trace(
    store: tuple[Path, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, ids = store
    out = tmp_path / "exported" / "traces.jsonl"
    assert main(["traces", "export", "--format", "otlp-json", "--output", str(out), "--store", str(root)]) == 0
    assert "exported 3 trace(s), 6 span(s)" in capsys.readouterr().err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    requests = [_decode_line(line) for line in out.read_text().splitlines()]
    assert len(requests) == 3
    first = requests[0].resource_spans[0]
    assert {kv.key: kv.value.string_value for kv in first.resource.attributes}["service.name"] == "web"
    spans = first.scope_spans[0].spans
    assert {s.trace_id.hex() for s in spans} == {ids["errored"]}
    chat = next(s for s in spans if s.name == "chat")
    assert chat.status.code == 2 and chat.status.message == "rate limited"
    assert chat.parent_span_id == next(s.span_id for s in spans if s.name == "search")

    assert main(["traces", "export", "--store", str(root), "--failed-evals"]) == 0  # to stdout, filtered
    lines = capsys.readouterr().out.splitlines()
    assert (
        len(lines) == 1
        and _decode_line(lines[0]).resource_spans[0].scope_spans[0].spans[0].trace_id.hex() == ids["failed"]
    )
