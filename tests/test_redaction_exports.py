"""``configure(redact=True)``: no secret leaves the process by any route, while evaluators judge the real text.

One real scenario per secret: an agent whose tool fails with an error echoing the secret (span status and
exception event), whose answer carries it, and an evaluator quoting it in its reason and metadata. Everything
that leaves the process is then read back where it landed: the local store files, OTLP/HTTP and Langfuse on a
real HTTP server on 127.0.0.1, the JSONL score file, a dead-letter file, and the SDK's in-memory log exporter.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

import evaltrace
from evaltrace.evaluation import JsonlScoreSink
from evaltrace.evaluation.sinks import SinkResult
from evaltrace.exporters import LocalTraceStore
from evaltrace.exporters.span_json import span_to_dict
from evaltrace.schema import EvaluationResult, Score, Trace

SECRETS = {
    "email": ("ada.lovelace@example.com", "[REDACTED:EMAIL]"),
    "openai_key": ("sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8t", "[REDACTED:API_KEY]"),
    "stripe_key": ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED:API_KEY]"),
    "ipv4": ("203.0.113.77", "[REDACTED:IP_ADDRESS]"),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "[REDACTED:JWT]",
    ),
}


@dataclass
class _Server:
    """A real HTTP server on 127.0.0.1 standing in for an OTLP collector and Langfuse: records every body raw."""

    url: str = ""
    bodies: dict[str, list[bytes]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def received(self, path: str) -> list[bytes]:
        with self.lock:
            return list(self.bodies.get(path, []))


@pytest.fixture
def server() -> Iterator[_Server]:
    recorder = _Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with recorder.lock:
                recorder.bodies.setdefault(self.path, []).append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            return

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    http.daemon_threads = True
    recorder.url = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield recorder
    http.shutdown()
    http.server_close()


class _RejectingSink:
    """A backend that refuses every score for good: the worker writes them to the dead-letter file."""

    name = "rejecting"

    def export(self, batch: Sequence[Score]) -> SinkResult:
        return SinkResult(rejected=tuple(batch), error="400 bad request")

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        return None


@dataclass
class _Landed:
    """What one scenario left in each place, and what its evaluator saw."""

    texts: dict[str, str]
    seen_by_evaluator: list[str]


def _otlp_text(bodies: list[bytes]) -> str:
    spans: list[Any] = []
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans.extend(s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
    assert spans, "no span reached the receiver"
    # The raw bytes too: protobuf stores strings verbatim, so a secret anywhere in the request would show.
    return "\n".join([str(spans), *(b.decode("utf-8", "replace") for b in bodies)])


def _run_scenario(secret: str, tmp: Path, server: _Server, monkeypatch: pytest.MonkeyPatch) -> _Landed:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-test")
    monkeypatch.setenv("LANGFUSE_HOST", server.url)
    seen: list[str] = []

    @evaltrace.evaluator(name="quotes")
    def quotes(trace: Trace) -> EvaluationResult:
        answer = str(trace.output.final_answer or "")
        seen.append(answer)
        return EvaluationResult(
            evaluator="quotes", passed=False, score=0.0, reason=f"the answer leaks {answer}", metadata={"q": answer}
        )

    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    handle = evaltrace.configure(
        "redaction-test",
        otlp_endpoint=server.url,
        langfuse=True,
        local_store=tmp / "traces",
        redact=True,
        evaluators=[evaltrace.evaluation.EvaluatorSpec(quotes, span_kinds={"agent"})],
        sinks=[JsonlScoreSink(tmp / "scores.jsonl"), _RejectingSink()],
        evaluation_options={
            "logger_provider": logger_provider,
            "dead_letter_dir": tmp / "dead-letter",
            "sink_schedule_delay_s": 0.01,
        },
        batch=False,
    )

    @evaltrace.tool
    def lookup(query: str) -> str:
        raise ValueError(f"400 Bad Request: could not parse {query!r}")

    @evaltrace.agent
    def answer(question: str) -> str:
        try:
            lookup(question)
        except ValueError:
            pass
        return f"Your record: {question}"

    answer(f"contact {secret} please")
    assert handle.force_flush(10_000)
    handle.shutdown()
    logger_provider.shutdown()

    texts = {
        "local_store": _stored_text(tmp / "traces"),
        "otlp": _otlp_text(server.received("/v1/traces")),
        "langfuse_traces": _otlp_text(server.received("/api/public/otel/v1/traces")),
        "langfuse_scores": "\n".join(b.decode() for b in server.received("/api/public/scores")),
        "jsonl_sink": (tmp / "scores.jsonl").read_text(),
        "dead_letter": (tmp / "dead-letter" / "rejecting.jsonl").read_text(),
        "log_events": json.dumps([dict(r.log_record.attributes or {}) for r in logs.get_finished_logs()]),
    }
    return _Landed(texts, seen)


def _stored_text(store: Path) -> str:
    """Every span of the local store as JSON (the store is a SQLite file: read it through its reader)."""
    reader = LocalTraceStore(store)
    spans = [span_to_dict(s) for summary in reader.list_traces() for s in reader.spans(summary.trace_id)]
    return json.dumps(spans, ensure_ascii=False)


ENTRY_POINTS = ["local_store", "otlp", "langfuse_traces", "langfuse_scores", "jsonl_sink", "dead_letter", "log_events"]
# Where the failed tool's exception message lands as the span status description and exception event.
CARRIES_STATUS = {"local_store", "otlp", "langfuse_traces"}


@pytest.mark.parametrize("kind", sorted(SECRETS))
@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_no_secret_leaves_by_any_route(
    entry_point: str, kind: str, tmp_path: Path, server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret, mask = SECRETS[kind]
    landed = _run_scenario(secret, tmp_path, server, monkeypatch)
    text = landed.texts[entry_point]
    assert text, f"nothing reached {entry_point}"
    assert secret not in text
    assert mask in text
    # Redaction is at the export boundary only: the evaluator judged the real answer.
    assert any(secret in answer for answer in landed.seen_by_evaluator)
    if entry_point in CARRIES_STATUS:
        assert "400 Bad Request: could not parse" in text  # the status/exception is there, masked, not dropped


def _status_and_exception(spans: list[dict[str, Any]]) -> tuple[str, str]:
    (failed,) = [s for s in spans if s["name"].endswith("lookup")]
    (event,) = [e for e in failed["events"] if e["name"] == "exception"]
    return failed["status"].get("description", ""), event["attributes"]["exception.message"]


def test_status_description_and_exception_event_are_redacted_in_the_store(
    tmp_path: Path, server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret, mask = SECRETS["openai_key"]
    _run_scenario(secret, tmp_path, server, monkeypatch)
    description, message = _status_and_exception(json.loads(_stored_text(tmp_path / "traces")))
    assert description.startswith("ValueError: 400 Bad Request") and mask in description
    assert secret not in message and mask in message


def test_without_redaction_the_secret_is_exported(tmp_path: Path, server: _Server) -> None:
    """The control: the same scenario without ``redact`` exports the secret (so the tests above are meaningful)."""
    secret = SECRETS["email"][0]
    handle = evaltrace.configure(local_store=tmp_path / "traces", batch=False, evaluation=False)

    @evaltrace.agent
    def answer(question: str) -> str:
        raise ValueError(question)

    with pytest.raises(ValueError):
        answer(secret)
    handle.shutdown()
    assert secret in _stored_text(tmp_path / "traces")
