"""The examples say a trace was exported or written only when it was: each checks ``force_flush()`` (and stats).

Each example runs as a user would run it (a subprocess in a fresh directory), against a real OTLP endpoint on
127.0.0.1 that accepts or refuses what it is sent, or with a local store that cannot be written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from example_output import assert_written_paths_exist

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
_ENV_PREFIXES = ("OPENAI_", "PYTEST_", "OTEL_", "LANGFUSE_", "PHOENIX_", "JAEGER_", "EVALTRACE_")


class _Backend:
    """An OTLP/HTTP endpoint on 127.0.0.1 answering every POST with ``status`` (400: refused, never retried)."""

    def __init__(self, status: int) -> None:
        self.requests = 0
        self.accepting = status == 200
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                backend.requests += 1
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(params=[200, 400], ids=["accepting", "refusing"])
def backend(request: pytest.FixtureRequest) -> Iterator[_Backend]:
    server = _Backend(request.param)
    yield server
    server.close()


def _run(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_jaeger_says_exported_only_when_the_backend_took_the_spans(tmp_path: Path, backend: _Backend) -> None:
    result = _run("jaeger.py", tmp_path, JAEGER_OTLP_HTTP=backend.url)
    assert backend.requests > 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    if backend.accepting:
        assert result.returncode == 0, result.stderr
        assert re.search(r"^exported \d+ span\(s\) via http/protobuf", result.stdout, re.MULTILINE), result.stdout
    else:
        assert result.returncode == 1, result.stdout
        assert "exported" not in result.stdout
        assert re.search(r"NOT all sent to .*: [1-9]\d* span\(s\) lost", result.stderr), result.stderr


def test_langfuse_says_exported_only_when_the_backend_took_the_spans(tmp_path: Path, backend: _Backend) -> None:
    result = _run(
        "langfuse.py", tmp_path, LANGFUSE_HOST=backend.url, LANGFUSE_PUBLIC_KEY="pk-lf-test", LANGFUSE_SECRET_KEY="sk"
    )
    assert backend.requests > 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    if backend.accepting:
        assert result.returncode == 0, result.stderr
        assert re.search(r"^trace [0-9a-f]{32}: exported \d+ span\(s\)", result.stdout, re.MULTILINE), result.stdout
    else:
        assert result.returncode == 1, result.stdout
        assert "exported" not in result.stdout
        assert re.search(r"NOT all sent: [1-9]\d* span\(s\) lost", result.stderr), result.stderr


def test_quickstart_never_says_written_when_the_store_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / ".evaltrace").write_text("a file where the store's folder should be")
    result = _run("quickstart.py", tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "written to" not in result.stdout
    assert "NOT all written" in result.stderr
    assert "local_store is losing spans" in result.stderr  # the cause, from evaltrace's own warning


def test_quickstart_says_written_when_it_was(tmp_path: Path) -> None:
    result = _run("quickstart.py", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Trace and its evaluations written to .evaltrace/traces.sqlite3" in result.stdout
    assert_written_paths_exist(result.stdout, tmp_path)
