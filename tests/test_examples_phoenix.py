"""examples/phoenix.py is the one Phoenix setup the docs show, and it does what they say.

``configure(phoenix=URL, phoenix_project=NAME)`` with no other setting: spans reach ``/v1/traces`` filed under the
project (resource ``openinference.project.name``), and each score reaches ``/v1/span_annotations`` exactly once
(the sink ``phoenix=`` adds; no second one). A stand-in Phoenix on 127.0.0.1 speaks the REST subset the example
reads back. (CI also runs the example's calls against a real Phoenix: tests/integration/test_phoenix.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parent.parent
_ENV_PREFIXES = ("OPENAI_", "PYTEST_", "OTEL_", "LANGFUSE_", "PHOENIX_", "EVALTRACE_")


class _Phoenix:
    """Receives OTLP/HTTP protobuf spans and span annotations; lists them per project as Phoenix's REST API does."""

    def __init__(self) -> None:
        self.spans: dict[str, list[dict[str, Any]]] = {}
        self.annotations: list[dict[str, Any]] = []
        phoenix = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path = urlparse(self.path).path
                if path == "/v1/traces":
                    phoenix.receive_spans(body)
                elif path == "/v1/span_annotations":
                    phoenix.annotations += json.loads(body)["data"]
                self._reply({"data": []})

            def do_GET(self) -> None:
                parts = urlparse(self.path).path.strip("/").split("/")  # v1 projects <name> spans|span_annotations
                data: list[dict[str, Any]] = []
                if len(parts) == 4 and parts[3] == "spans":
                    data = phoenix.spans.get(parts[2], [])
                elif len(parts) == 4 and parts[3] == "span_annotations":
                    data = list(phoenix.annotations)
                self._reply({"data": data})

            def _reply(self, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def receive_spans(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            project = resource.get("openinference.project.name", "default")
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.setdefault(project, []).append(
                        {
                            "name": span.name,
                            "context": {"trace_id": span.trace_id.hex(), "span_id": span.span_id.hex()},
                            "events": [{"name": e.name, "attributes": {}} for e in span.events],
                        }
                    )

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def phoenix() -> Iterator[_Phoenix]:
    server = _Phoenix()
    yield server
    server.close()


def test_the_phoenix_example_files_spans_under_its_project_and_annotates_once(
    tmp_path: Path, phoenix: _Phoenix
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    env = {**clean, "PHOENIX_URL": phoenix.url, "PHOENIX_PROJECT_NAME": "docs-project"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "phoenix.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(phoenix.spans) == {"docs-project"}  # every span under the project, none under "default"
    (agent,) = [s for s in phoenix.spans["docs-project"] if s["name"] == "invoke_agent weather-bot"]
    keys = [(a["name"], a["span_id"]) for a in phoenix.annotations]
    assert len(keys) == len(set(keys))  # one sink: each score annotated once
    on_agent = sorted(name for name, span_id in keys if span_id == agent["context"]["span_id"])
    assert on_agent == ["mentions_city", "tool_called"]
    assert "annotation tool_called" in result.stdout


def test_the_docs_show_the_same_phoenix_setup_as_the_example() -> None:
    """README and docs/viewing.md configure Phoenix with phoenix= and phoenix_project=, like the example."""
    example = (ROOT / "examples" / "phoenix.py").read_text(encoding="utf-8")
    viewing = (ROOT / "docs" / "viewing.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = 'phoenix="http://127.0.0.1:6006", phoenix_project="my-project"'
    assert setup in viewing and setup in readme
    assert "phoenix_project=PROJECT" in example
    for text in (example, viewing, readme):
        assert "OTEL_RESOURCE_ATTRIBUTES" not in text  # the second, older way to name the project
        assert "sinks=[PhoenixScoreSink" not in text  # phoenix= adds the sink already
