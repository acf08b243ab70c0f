"""``evaltrace traces list`` starts light: it imports what listing needs and nothing else (issue 28).

Each command runs in a fresh interpreter on a real store (spans written by the real exporter through the real
OTel SDK) and reports what it left in ``sys.modules``: this interpreter's already holds everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.exporters import LocalStoreExporter

# Never needed to list traces: the evaluation engine and its pydantic models, the OpenTelemetry SDK (spans are
# rebuilt only by `show`), the store's writer (only an import of older JSONL files writes), logging.
HEAVY = (
    "evaltrace.evaluation",
    "evaltrace.schema",
    "evaltrace.mapping",
    "pydantic",
    "opentelemetry",
    "evaltrace.exporters.store_writer",
    "evaltrace.exporters.store_sessions",
    "logging",
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("store")
    exporter = LocalStoreExporter(directory, writer="thread")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent assistant", attributes={"session.id": "s-1"}):
        with tracer.start_as_current_span("chat gpt-4o-mini", attributes={"gen_ai.usage.input_tokens": 12}):
            pass
    provider.shutdown()
    return directory


def _run(args: list[str]) -> tuple[str, list[str]]:
    """``evaltrace ARGS`` in a fresh interpreter: (its output, the module names it left loaded)."""
    probe = textwrap.dedent(f"""
        import contextlib, io, json, sys
        from evaltrace.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main({args!r})
        print(json.dumps({{"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0, done.stderr
    return result["out"], result["modules"]


def _heavy(modules: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    names = (*HEAVY, *extra)
    return [m for m in modules if any(m == name or m.startswith(name + ".") for name in names)]


def test_traces_list_imports_no_heavy_module(store: Path) -> None:
    """The table is drawn (header, rule, row) by the plain renderer: rich is not imported at all (issue 28)."""
    out, modules = _run(["traces", "list", "--store", str(store)])
    lines = out.splitlines()
    assert lines[0] == f"Traces in {store}"
    assert lines[1].startswith("trace id ") and set(lines[2]) == {"─"}
    assert "invoke_agent assistant" in lines[3] and lines[3].rstrip().endswith("ok")
    assert _heavy(modules, ("rich",)) == []


def test_traces_list_json_imports_no_rich(store: Path) -> None:
    """Scripts read ``--json``: no table is drawn, so rich is not imported either."""
    out, modules = _run(["traces", "list", "--json", "--store", str(store)])
    assert [row["root_name"] for row in json.loads(out)] == ["invoke_agent assistant"]
    assert _heavy(modules, ("rich",)) == []


def test_traces_list_on_a_missing_store_imports_no_heavy_module(tmp_path: Path) -> None:
    out, modules = _run(["traces", "list", "--store", str(tmp_path / "none")])
    assert "No traces" in out
    assert _heavy(modules, ("rich",)) == []
