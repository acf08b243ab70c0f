"""Run a store test with both writers: the writer process and the export queue's thread (``writer="thread"``).

The store tests read the store right after exporting. With the writer process ``export`` returns once the batch
is handed over, and ``force_flush`` is what makes it readable; the fixture makes every export of the test wait
for that, so the same assertions check both writers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from evaltrace.exporters import LocalStoreExporter
from evaltrace.exporters.store_options import WRITER_ENV


@pytest.fixture(params=["thread", "process"], autouse=True)
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The default writer for this test (``EVALTRACE_LOCAL_STORE_WRITER``); each export waits until stored."""
    monkeypatch.setenv(WRITER_ENV, request.param)
    export = LocalStoreExporter.export

    def export_and_wait(self: LocalStoreExporter, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = export(self, spans)
        process = self._process
        assert process is None or process.wait(30)  # stored (force_flush would also say False after a loss)
        if self.options.writer == "process" and result is SpanExportResult.SUCCESS:
            assert self._processes, "the process variant wrote in-process: the writer process never started"
        return result

    monkeypatch.setattr(LocalStoreExporter, "export", export_and_wait)
    exporters: list[LocalStoreExporter] = []
    init = LocalStoreExporter.__init__

    def init_and_track(self: LocalStoreExporter, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        exporters.append(self)

    monkeypatch.setattr(LocalStoreExporter, "__init__", init_and_track)
    yield request.param
    for exporter in exporters:  # no writer process outlives its test
        exporter.shutdown()
