"""The local store's writer process: ``python -m evaltrace.exporters.store_process``.

The application process builds each batch's rows (``store_rows.stored_row``) and sends them here over a pipe;
this process owns the SQLite connection and does the binding, writing, retention and the JSONL import of the
first open, so none of that takes the application's GIL. It imports no OpenTelemetry SDK (unless the store has
JSONL files to import) and exits when its input pipe closes: the application shut the exporter down or died.

Frames both ways are an 8-byte little-endian length and a ``marshal`` payload (a format private to one evaltrace
version: parent and child are the same interpreter running the same files, checked by ``PROTOCOL``). To the
writer: ``("open", directory, max_age_s, max_bytes)`` once, then ``("batch", seq, rows)``. From the writer:
``("ready", PROTOCOL)`` once imported, then one ``("ack", seq, lost, deleted_traces, deleted_spans, import_report,
logs, disabled)`` per batch: ``lost`` counts the batch's spans not stored, ``import_report`` is ``None`` or the
first open's four counts, ``logs`` are the log records raised meanwhile (the application logs them as its own),
and ``disabled`` says the store cannot be used (corrupt, a newer evaltrace's): the application stops sending.
"""

from __future__ import annotations

import gc
import logging
import marshal
import os
import queue
import struct
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, BinaryIO

from evaltrace._internal.errors import log_internal_error
from evaltrace.exporters.store_db import StoreError
from evaltrace.exporters.store_session import StoreSession
from evaltrace.exporters.store_span import from_plain

__all__ = ["read_frame", "read_payload", "write_frame"]

_HEADER = struct.Struct("<Q")
PROTOCOL = 1
"""Sent with ``ready``: an application that loaded another evaltrace version (upgraded while it ran) writes itself."""
logger = logging.getLogger("evaltrace.local_store")


def write_frame(fd: int, message: Any) -> None:
    """Send ``message`` as one frame on ``fd`` (a blocking write: it waits, without the GIL, for the reader).

    Raises:
        ValueError: ``message`` holds a value ``marshal`` cannot encode (e.g. a ``str`` subclass).
        OSError: The pipe is closed (``BrokenPipeError``: the reader is gone).
    """
    payload = marshal.dumps(message)
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = stream.read(size)  # a raw (unbuffered) stream may return less than asked
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(stream: BinaryIO) -> Any:
    """The next message on ``stream``, or ``None`` at the end of the stream (a torn frame counts as the end)."""
    payload = read_payload(stream)
    return None if payload is None else marshal.loads(payload)


class _Relay(logging.Handler):
    """Keeps the records the store's code logs, for the application to log as its own with the next ack."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        self.records.append((record.name, record.levelno, text))

    def take(self) -> list[tuple[str, int, str]]:
        records, self.records = self.records, []
        return records


class _Writer:
    """The store side of the pipe: what ``LocalStoreExporter`` does on its thread, for batches received."""

    def __init__(self, directory: str, max_age_s: float, max_bytes: int) -> None:
        self.session = StoreSession(Path(directory), max_age_s, max_bytes)
        self._reported_import = False
        self.disabled = False

    def write(self, rows: list[tuple[Any, ...]]) -> tuple[int, int, int, tuple[int, int, int, int] | None]:
        """Store ``rows``; what was lost, what retention deleted and (once) what the first open imported.

        A store that cannot be used (corrupt, a newer evaltrace's) is reported once, as the exporter's thread
        reports it, and every batch after it is counted lost.
        """
        before = self.session.deleted
        lost = len(rows)
        if not self.disabled:
            try:
                lost = self.session.write([from_plain(row) for row in rows])
            except StoreError as exc:  # it will not heal while this process runs: one warning, not one per batch
                self.disabled = True
                logger.warning("%s; spans are not written to it", exc)
            except Exception:  # nothing of the batch was written: counted, and the next batch is tried
                log_internal_error("writing spans to the local store")
        after = self.session.deleted
        report = None
        if self.session.opened and not self._reported_import:
            self._reported_import = True
            r = self.session.import_report
            report = (r.files, r.spans, r.unreadable_lines, r.unreadable_files)
        return lost, after.traces - before.traces, after.spans - before.spans, report


MERGE_SPANS = 32_768
"""Batches waiting when the writer is free are written together, up to this many spans a transaction: with random
trace ids each batch dirties most leaves of the id indexes, so one commit for several batches writes those pages
once (a writer that fell behind catches up instead of falling further behind)."""
WAITING_FRAMES = 4
"""Frames read ahead from the pipe while SQLite writes (bounded: past it the pipe fills and the exporter waits)."""
GC_EVERY = 64
"""Batches between two full garbage collections (automatic collection is off: the rows are acyclic tuples)."""


def read_payload(stream: BinaryIO) -> bytes | None:
    """The next frame's payload on ``stream`` (not decoded), or ``None`` at the end of the stream."""
    header = _read_exact(stream, _HEADER.size)
    return None if header is None else _read_exact(stream, _HEADER.unpack(header)[0])


def _read_ahead(stream: BinaryIO, frames: queue.Queue[bytes | None]) -> None:
    """Move frames from the pipe to ``frames`` while the writer works (reads give up the GIL; SQLite does too)."""
    try:
        while (payload := read_payload(stream)) is not None:
            frames.put(payload)
    finally:
        frames.put(None)


def _next_batches(frames: queue.Queue[bytes | None]) -> tuple[list[Any], bool]:
    """The next message and the batches waiting behind it (up to ``MERGE_SPANS``); and whether the input ended."""
    payload = frames.get()
    if payload is None:
        return [], True
    messages = [marshal.loads(payload)]
    spans = len(messages[0][2]) if messages[0][0] == "batch" else MERGE_SPANS
    while spans < MERGE_SPANS:
        try:
            payload = frames.get_nowait()
        except queue.Empty:
            break
        if payload is None:
            return messages, True
        messages.append(marshal.loads(payload))  # only the first message is ever "open"
        spans += len(messages[-1][2])
    return messages, False


def _serve(stream: BinaryIO, out: int, relay: _Relay) -> _Writer | None:
    """Answer batches until the input ends; returns the writer to close."""
    frames: queue.Queue[bytes | None] = queue.Queue(WAITING_FRAMES)
    threading.Thread(target=_read_ahead, args=(stream, frames), name="read-ahead", daemon=True).start()
    writer: _Writer | None = None
    served = 0
    ended = False
    while not ended:
        batches, ended = _next_batches(frames)
        if not batches:
            break
        if batches[0][0] == "open":
            writer = _Writer(*batches[0][1:])
            continue
        rows = batches[0][2] if len(batches) == 1 else [row for batch in batches for row in batch[2]]
        if writer is None:  # pragma: no cover - the parent always opens first
            lost, traces, deleted, report = len(rows), 0, 0, None
            logger.error("evaltrace internal error: a batch reached the local store writer before it was opened")
        else:
            lost, traces, deleted, report = writer.write(rows)
        # The counts ride on the first ack (the application adds them up); every batch is acknowledged.
        disabled = writer is None or writer.disabled
        write_frame(out, ("ack", batches[0][1], lost, traces, deleted, report, relay.take(), disabled))
        for batch in batches[1:]:
            write_frame(out, ("ack", batch[1], 0, 0, 0, None, [], disabled))
        served += len(batches)
        if served >= GC_EVERY:
            served = 0
            gc.collect()
    return writer


def main() -> int:
    """Serve one application process until its pipe closes."""
    gc.disable()
    out = os.dup(1)  # acks only: anything printed by mistake goes to stderr, never into the protocol
    os.dup2(2, 1)
    relay = _Relay()
    root = logging.getLogger("evaltrace")
    root.addHandler(relay)
    root.setLevel(logging.INFO)
    root.propagate = False
    stream = os.fdopen(0, "rb", buffering=1 << 20)
    write_frame(out, ("ready", PROTOCOL))
    writer = _serve(stream, out, relay)
    if writer is not None:
        writer.session.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a child process; its work is tested through the exporter
    sys.exit(main())
