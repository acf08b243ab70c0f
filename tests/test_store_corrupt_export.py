"""``evaltrace traces export`` on a partly corrupt store: every readable span goes out, the rest is reported.

A store is damaged two ways: garbage in span rows' JSON (as a bad disk or a hand edit leaves it), and a page
of the spans table overwritten in the file. The real CLI runs in a subprocess, so a traceback would show.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.exporters import LocalStoreExporter
from evaltrace.exporters.store_db import DB_NAME


def _store(root: Path, traces: int, text: int = 100) -> None:
    """``traces`` traces of two spans (``t<i>`` and its child ``t<i>-child``), each holding ``text`` characters."""
    exporter = LocalStoreExporter(root, max_age_s=0, max_bytes=0, writer="thread")
    provider = TracerProvider(resource=Resource({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for i in range(traces):
        with tracer.start_as_current_span(f"t{i}", attributes={"input.value": f"MARK-t{i}- " + "x" * text}):
            with tracer.start_as_current_span(f"t{i}-child", attributes={"input.value": "y" * text}):
                pass
    provider.shutdown()  # closes the database: the WAL is checkpointed into the file


def _export(store: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``evaltrace traces export -o out``; the names of the spans written."""
    script = "import sys; from evaltrace.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", script, "traces", "export", "--store", str(store), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "EVALTRACE_RAISE_INTERNAL_ERRORS": ""},
        check=False,
    )
    names = [
        span["name"]
        for line in out.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    return result, names


def test_export_skips_span_rows_with_garbage_and_reports_them(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store(store, 10)
    with sqlite3.connect(store / DB_NAME) as db:
        db.execute("UPDATE spans SET data = '{\"attributes\": {\"input.va' WHERE name = 't3'")  # cut-off JSON
        db.execute("UPDATE spans SET data = '[1, 2]' WHERE name = 't7-child'")  # JSON, not an object
    result, names = _export(store, tmp_path / "out.jsonl")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    everything = {f"t{i}" for i in range(10)} | {f"t{i}-child" for i in range(10)}
    assert sorted(names) == sorted(everything - {"t3", "t7-child"})
    assert result.stderr.splitlines() == [
        "exported 10 trace(s), 18 span(s)",
        f"error: 2 span(s) in 2 trace(s) of {store} could not be read (the store is partly corrupt) and were not "
        "exported; every readable span was",
    ]


def test_export_skips_traces_on_a_damaged_page_and_exports_the_rest(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store(store, 40, text=3000)  # ~4 spans a 16 kB page: a page holds a few traces' spans
    path = store / DB_NAME
    with sqlite3.connect(path) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        leaves = [r[0] for r in db.execute("SELECT pageno FROM dbstat WHERE name = 'spans' AND pagetype = 'leaf'")]
    data = bytearray(path.read_bytes())
    (damaged,) = [n for n in leaves if b"MARK-t17- " in data[(n - 1) * page_size : n * page_size]]
    offset = (damaged - 1) * page_size
    data[offset : offset + 12] = b"\xa5" * 12  # the page header: not a b-tree page any more
    path.write_bytes(bytes(data))
    result, names = _export(store, tmp_path / "out.jsonl")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "t17" not in names and len(names) >= 40  # most traces went out
    assert len(set(names)) == len(names)
    exported, error = result.stderr.splitlines()
    lost = int(error.split()[1])
    assert exported == f"exported {len(names) // 2} trace(s), {len(names)} span(s)"
    assert len(names) + lost == 80  # every span exported or counted
    assert error.endswith(
        "could not be read (the store is partly corrupt) and were not exported; every readable span was"
    )
