"""The local store's writer process merges batches waiting behind the one it takes, and still answers each.

Run in this process on real rows (``stored_row`` of real SDK spans) and a real store: a writer that fell behind
writes the batches waiting for it in one transaction (``MERGE_SPANS`` at most), acknowledges every batch by its
own sequence number, and stores every span once.
"""

from __future__ import annotations

import io
import marshal
import os
import queue
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.exporters import store_process
from evaltrace.exporters.local_store import LocalTraceStore
from evaltrace.exporters.store_rows import stored_row


def _spans(count: int) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("merge-test")
    for i in range(count):
        with tracer.start_as_current_span(f"op-{i}") as span:
            span.set_attribute("input.value", f"question {i}")
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _frames(*messages: Any) -> queue.Queue[bytes | None]:
    frames: queue.Queue[bytes | None] = queue.Queue()
    for message in messages:
        frames.put(marshal.dumps(message))
    return frames


def test_waiting_batches_are_taken_together_up_to_the_merge_cap(monkeypatch: Any) -> None:
    monkeypatch.setattr(store_process, "MERGE_SPANS", 5)
    rows = [stored_row(span) for span in _spans(8)]
    frames = _frames(("batch", 1, rows[:2]), ("batch", 2, rows[2:4]), ("batch", 3, rows[4:6]), ("batch", 4, rows[6:]))
    frames.put(None)  # the application closed the pipe after them

    first, ended = store_process._next_batches(frames)
    assert [batch[1] for batch in first] == [1, 2, 3] and not ended  # 2 + 2 < 5, then 6 >= 5: stop taking
    second, ended = store_process._next_batches(frames)
    assert [batch[1] for batch in second] == [4] and ended  # the end of input seen behind it


def test_an_open_message_is_never_merged_with_the_batches_behind_it() -> None:
    rows = [stored_row(span) for span in _spans(2)]
    frames = _frames(("open", "/nowhere", 0.0, 0), ("batch", 1, rows))
    taken, ended = store_process._next_batches(frames)
    assert [message[0] for message in taken] == ["open"] and not ended
    taken, ended = store_process._next_batches(frames)
    assert [message[1] for message in taken] == [1]


def test_merged_batches_are_stored_once_and_each_is_acknowledged(tmp_path: Path) -> None:
    spans = _spans(12)
    rows = [stored_row(span) for span in spans]
    payload = b"".join(
        store_process._HEADER.pack(len(data)) + data
        for data in (
            marshal.dumps(message)
            for message in (
                ("open", str(tmp_path), 0.0, 0),
                ("batch", 1, rows[:5]),
                ("batch", 2, rows[5:9]),
                ("batch", 3, rows[9:]),
            )
        )
    )
    read_acks, write_acks = os.pipe()
    try:
        writer = store_process._serve(io.BytesIO(payload), write_acks, store_process._Relay())
        assert writer is not None
        writer.session.close()
    finally:
        os.close(write_acks)
    with os.fdopen(read_acks, "rb") as acks_in:
        acks = []
        while (ack := store_process.read_frame(acks_in)) is not None:
            acks.append(ack)
    assert sorted(ack[1] for ack in acks) == [1, 2, 3]  # every batch answered by its own number, merged or not
    assert sum(ack[2] for ack in acks) == 0  # nothing lost
    store = LocalTraceStore(tmp_path)
    try:
        stored = [span.name for trace in store.list_traces(limit=100) for span in store.spans(trace.trace_id)]
    finally:
        store.close()
    assert sorted(stored) == sorted(span.name for span in spans)  # each once


def test_merged_batches_the_store_refused_each_report_their_own_loss(tmp_path: Path) -> None:
    # A batch the application waits on (send_settled, while the writer is failing) merged behind another used to
    # get lost=0, so its export said SUCCESS and ended the loss episode with a false "works again".
    (tmp_path / "traces.sqlite3").write_bytes(b"this is not an SQLite database " * 200)  # every write refused
    rows = [stored_row(span) for span in _spans(12)]
    payload = b"".join(
        store_process._HEADER.pack(len(data)) + data
        for data in (
            marshal.dumps(message)
            for message in (
                ("open", str(tmp_path), 0.0, 0),
                ("batch", 1, rows[:5]),
                ("batch", 2, rows[5:9]),
                ("batch", 3, rows[9:]),
            )
        )
    )
    read_acks, write_acks = os.pipe()
    try:
        writer = store_process._serve(io.BytesIO(payload), write_acks, store_process._Relay())
        assert writer is not None and writer.disabled
        writer.session.close()
    finally:
        os.close(write_acks)
    with os.fdopen(read_acks, "rb") as acks_in:
        acks = []
        while (ack := store_process.read_frame(acks_in)) is not None:
            acks.append(ack)
    assert sorted((ack[1], ack[2]) for ack in acks) == [(1, 5), (2, 4), (3, 3)]  # each batch: all of it lost
