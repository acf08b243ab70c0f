"""Fixtures for offline runs: throwaway projects (eval.yaml, cases.yaml, a system-under-test module) in tmp dirs,
a real HTTP system, and a real PostgreSQL server (skipped with the reason when none can start, failed under CI)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from .postgres_server import PostgresServer, ServerUnavailable

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO_ROOT / "examples" / "offline_eval"
_counter = itertools.count()

SUT_SOURCE = """
import asyncio
import threading
import time

import evaltrace
from evaltrace.context import current_context_attributes

CALLS = []
SEEN_ATTRIBUTES = []
_lock = threading.Lock()
ACTIVE = [0, 0]  # current, max


@evaltrace.tool
def lookup(key: str) -> str:
    return {"a": "alpha", "b": "beta"}.get(key, "unknown")


@evaltrace.agent(name="sut")
def answer(question: str, key: str = "a") -> str:
    CALLS.append(question)
    SEEN_ATTRIBUTES.append(dict(current_context_attributes()))
    if question == "boom":
        raise RuntimeError("system exploded")
    return f"{question}: {lookup(key)}"


@evaltrace.agent(name="sut")
async def answer_async(question: str, key: str = "a") -> str:
    CALLS.append(question)
    with _lock:
        ACTIVE[0] += 1
        ACTIVE[1] = max(ACTIVE)
    await asyncio.sleep(0.01)
    with _lock:
        ACTIVE[0] -= 1
    if question == "boom":
        raise RuntimeError("system exploded")
    return f"{question}: {lookup(key)}"


def answer_wrong(question: str, key: str = "a") -> str:
    CALLS.append(question)
    return f"{question}: nothing"


def slow(question: str, key: str = "a") -> str:
    time.sleep(1.0)
    return "late"


def structured(question: str, key: str = "a") -> dict:
    return {"answer": f"{question}: alpha", "confidence": 0.9}
"""

PROBE_SOURCE = '''
from pathlib import Path

from evaltrace.schema import EvaluationResult


class TracesWritten:
    """Passes only if traces.jsonl of the trace's run holds this trace and was sealed (every cell ran)."""

    name = "traces_written"
    version = "1"

    def __init__(self, runs_dir: str) -> None:
        self.runs_dir = Path(runs_dir)

    def evaluate(self, trace, case):
        path = self.runs_dir / trace.run_id / "traces.jsonl"
        assert path.is_file(), f"{path} missing while evaluating"
        assert not path.stat().st_mode & 0o222, "traces.jsonl still writable while evaluating"
        held = f'"case_id":"{trace.case_id}"' in path.read_text()
        return EvaluationResult(evaluator=self.name, passed=held, reason="traces.jsonl present")


class Crashes:
    name = "crashes"
    version = None

    def evaluate(self, trace, case):
        raise ZeroDivisionError("evaluator bug")


def answer_mentions_question(trace, case):
    return case.input["question"] in (trace.output.final_answer or "")
'''


@dataclass
class Project:
    """A throwaway eval project: eval.yaml + cases.yaml + a uniquely named SUT module, and a runs dir."""

    root: Path
    module: str
    probe: str
    runs_dir: Path
    modules: list[str] = field(default_factory=list)

    @property
    def eval_path(self) -> Path:
        return self.root / "eval.yaml"

    def write(self, config: dict[str, Any], cases: list[dict[str, Any]] | None = None) -> Path:
        """Write eval.yaml (cases: cases.yaml unless given) and return its path."""
        config = {"cases": "cases.yaml", **config}
        self.eval_path.write_text(yaml.safe_dump(config, sort_keys=False))
        if cases is not None:
            (self.root / "cases.yaml").write_text(yaml.safe_dump(cases, sort_keys=False))
        return self.eval_path

    def sut(self) -> ModuleType:
        return sys.modules[self.module]

    def target(self, function: str) -> str:
        return f"{self.module}:{function}"


DEFAULT_CASES = [
    {
        "id": "c1",
        "input": {"question": "q1", "key": "a"},
        "expected": {"must_call_tools": ["lookup"], "answer_should_include": ["alpha"]},
    },
    {"id": "c2", "input": {"question": "q2", "key": "b"}, "expected": {"answer_should_include": ["beta"]}},
    {"id": "c3", "input": {"question": "boom"}, "expected": {"answer_should_include": ["alpha"]}},
]


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    index = next(_counter)
    module, probe = f"evaltrace_sut_{index}", f"evaltrace_probe_{index}"
    root = tmp_path / "project"
    root.mkdir()
    (root / f"{module}.py").write_text(textwrap.dedent(SUT_SOURCE))
    (root / f"{probe}.py").write_text(textwrap.dedent(PROBE_SOURCE))
    (root / "cases.yaml").write_text(yaml.safe_dump(DEFAULT_CASES, sort_keys=False))
    yield Project(root=root, module=module, probe=probe, runs_dir=tmp_path / "runs")
    for name in (module, probe):
        sys.modules.pop(name, None)
    if str(root.resolve()) in sys.path:
        sys.path.remove(str(root.resolve()))


@dataclass
class HttpSystem:
    """A real HTTP server on 127.0.0.1 standing in for a deployed system."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


def _handler(system: HttpSystem) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"null")
            system.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
            if self.path == "/fail":
                self._send(500, b"internal error", "text/plain")
            elif self.path == "/missing":
                self._send(404, b"no such route", "text/plain")
            elif self.path == "/slow":
                time.sleep(1.0)
                self._send(200, b'{"answer": "late"}', "application/json")
            elif self.path == "/text":
                self._send(200, f"plain {body.get('question')}".encode(), "text/plain")
            else:
                answer = {"answer": f"{body.get('question')}: alpha", "echo": body}
                self._send(200, json.dumps(answer).encode(), "application/json")

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture
def http_system() -> Iterator[HttpSystem]:
    system = HttpSystem(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(system))
    server.daemon_threads = True
    system.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield system
    finally:
        server.shutdown()
        server.server_close()


def _postgres_unavailable(reason: str) -> None:
    # CI must not go green by skipping its only real database server (.ci/run installs one).
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI is set but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for the session (initdb in a temp dir, loopback port); skipped when none can run."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _postgres_unavailable("psycopg is not installed (pip install -e '.[dev]')")
    try:
        server = PostgresServer.start()
    except (ServerUnavailable, OSError, subprocess.SubprocessError) as exc:
        _postgres_unavailable(f"no PostgreSQL server could start: {exc}")
        raise  # unreachable: skip/fail raise
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """DSN of a fresh, empty database on the session's server."""
    return postgres_server.create_database(f"evaltrace_test_{os.getpid()}_{next(_counter)}")
