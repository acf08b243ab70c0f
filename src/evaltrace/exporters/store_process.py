"""The local store's writer process: ``python -m evaltrace.exporters.store_process``.

The application process builds each batch's rows (``store_rows.stored_row``) and sends them here over a pipe;
this process owns the SQLite connection and does the binding, writing, retention and the JSONL import of the
first open, so none of that takes the application's GIL. It imports no OpenTelemetry SDK (unless the store has
JSONL files to import) and exits when its input pipe closes: the application shut the exporter down or died.

Frames both ways are an 8-byte little-endian length and a ``marshal`` payload (a format private to one evaltrace
version: parent and child are the same interpreter running the same files, checked by ``PROTOCOL``, derived
from the package version and a digest of this module and the record layout). A frame longer than
``MAX_FRAME_BYTES`` is refused as torn or foreign. The parent passes two dedicated pipe ends (``main(input_fd,
output_fd)``), so nothing printed while the interpreter starts can reach the protocol. To the writer:
``("open", directory, max_age_s, max_bytes)`` once, then ``("batch", seq, rows)``. From the writer:
``ready_frame()`` (raw bytes, not a frame) once imported, then one ``("ack", seq, lost, deleted_traces,
deleted_spans, import_report, logs, disabled, failing)`` per batch: ``lost`` counts the batch's spans not stored, ``import_report`` is ``None`` or the
first open's four counts, ``logs`` are the log records raised meanwhile (the application logs them as its own),
``disabled`` says the store cannot be used (corrupt, a newer evaltrace's): the application stops sending, and
``failing`` that the last batch could not be stored (a full disk): the application waits for each next ack,
so that its export reports the outcome, until one is stored.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import marshal
import os
import queue
import signal
import struct
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, BinaryIO

from evaltrace._internal.errors import log_internal_error
from evaltrace.exporters.store_db import StoreError
from evaltrace.exporters.store_session import StoreSession, StoreWriteError
from evaltrace.exporters.store_span import from_plain

__all__ = ["MAX_FRAME_BYTES", "PROTOCOL", "read_frame", "read_payload", "ready_frame", "write_frame"]

_HEADER = struct.Struct("<Q")
MAX_FRAME_BYTES = 1 << 28
"""Longest frame either side accepts (256 MiB): a bigger length is a torn or foreign stream, never an allocation."""


def _protocol() -> str:
    """This evaltrace's version and a digest of the record layout and of this module: derived, never bumped by hand."""
    from evaltrace._version import __version__
    from evaltrace.exporters.store_span import EvalRow, StoredSpan

    digest = hashlib.sha256(repr((StoredSpan._fields, EvalRow._fields)).encode())
    try:
        digest.update(Path(__file__).read_bytes())
    except OSError:  # pragma: no cover - a zip import: the version and the layout still tell versions apart
        pass
    return f"{__version__}:{digest.hexdigest()[:16]}"


PROTOCOL = _protocol()
"""Sent with ``ready``: an application that loaded another evaltrace (upgraded while it ran) writes itself."""
logger = logging.getLogger("evaltrace.local_store")


def write_frame(fd: int, message: Any) -> None:
    """Send ``message`` as one frame on ``fd`` (a blocking write: it waits, without the GIL, for the reader).

    Raises:
        ValueError: ``message`` holds a value ``marshal`` cannot encode (e.g. a ``str`` subclass).
        OSError: The pipe is closed (``BrokenPipeError``: the reader is gone).
    """
    payload = marshal.dumps(message)
    if len(payload) > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {len(payload)} bytes, more than {MAX_FRAME_BYTES}")
    for part in (_HEADER.pack(len(payload)), payload):  # two writes: no copy of a multi-MB batch
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view) :]


def ready_frame() -> bytes:
    """The exact bytes the writer sends first; the parent compares them, never decoding what it reads before."""
    return f"evaltrace local store writer {PROTOCOL}\n".encode()


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
        self.session = StoreSession(Path(directory), max_age_s, max_bytes, WRITER_CACHE_KIB)
        # Under a small cap, batches are written a chunk at a time (store_space): no merging past one chunk.
        self.merge_spans = self.session.limits.chunk_spans or MERGE_SPANS
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
            except StoreWriteError:  # a full disk...: the session logged it once for the episode
                pass
            except Exception:  # nothing of the batch was written: counted, and the next batch is tried
                log_internal_error("writing spans to the local store")
        after = self.session.deleted
        report = None
        if self.session.opened and not self._reported_import:
            self._reported_import = True
            r = self.session.import_report
            report = (r.files, r.spans, r.unreadable_lines, r.unreadable_files)
        return lost, after.traces - before.traces, after.spans - before.spans, report


WRITER_CACHE_KIB = 131_072
"""The writer process's SQLite page cache, 128 MB (allocated as pages are read; the application's own writer keeps
16 MB). With random trace ids every batch changes pages all over the ``spans (trace_id, span_id)`` and ``traces
(trace_id)`` indexes, ~100 MB at 1,000,000 decorator spans: in a 16 MB cache each transaction wrote changed pages
out to the WAL before its commit and read them back, ~10 us a span more at that size (benchmarks/README.md)."""
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
    if header is None:
        return None
    size = _HEADER.unpack(header)[0]
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {size} bytes: a torn or foreign stream")
    return _read_exact(stream, size)


def _read_ahead(stream: BinaryIO, frames: queue.Queue[bytes | None]) -> None:
    """Move frames from the pipe to ``frames`` while the writer works (reads give up the GIL; SQLite does too)."""
    try:
        while (payload := read_payload(stream)) is not None:
            frames.put(payload)
    finally:
        frames.put(None)


def _next_batches(frames: queue.Queue[bytes | None], most: int | None = None) -> tuple[list[Any], bool]:
    """The next message and the batches waiting behind it, and whether the input ended.

    Batches are merged up to ``most`` spans (the writer's, smaller under a size cap), never past ``MERGE_SPANS``.
    """
    limit = MERGE_SPANS if most is None else min(most, MERGE_SPANS)
    payload = frames.get()
    if payload is None:
        return [], True
    messages = [marshal.loads(payload)]
    spans = len(messages[0][2]) if messages[0][0] == "batch" else limit
    while spans < limit:
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
        batches, ended = _next_batches(frames, None if writer is None else writer.merge_spans)
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
        # Retention's counts ride on the first ack (the application adds them up); every batch is acknowledged
        # with its own share of the loss: a batch the application waits on (send_settled) must not read 0 when
        # the merged write lost it, or its export says SUCCESS and ends the loss episode on a false "works again".
        disabled = writer is None or writer.disabled
        failing = writer is not None and writer.session.failing
        shares = _shares(lost, [len(batch[2]) for batch in batches])
        acks = [("ack", batches[0][1], shares[0], traces, deleted, report, relay.take(), disabled, failing)]
        acks += [
            ("ack", batch[1], share, 0, 0, None, [], disabled, failing)
            for batch, share in zip(batches[1:], shares[1:], strict=True)
        ]
        out = _acknowledge(out, acks)
        served += len(batches)
        if served >= GC_EVERY:
            served = 0
            gc.collect()
    return writer


def _shares(lost: int, sizes: list[int]) -> list[int]:
    """Split ``lost`` spans of a merged write among its batches, none more than its size (all of each when all lost).

    A write loses all of it (a full disk, an unusable store) or spans SQLite refused one by one, of batches it
    cannot tell apart: those are charged to the first batches; the total is what was lost either way.
    """
    shares = []
    for size in sizes:
        share = min(lost, size)
        shares.append(share)
        lost -= share
    return shares


def _acknowledge(out: int, acks: list[Any]) -> int:
    """Send ``acks`` on ``out``; ``-1`` once the application is gone (what was read is still stored, unacknowledged)."""
    if out >= 0:
        try:
            for ack in acks:
                write_frame(out, ack)
        except OSError:  # EPIPE: the application exited without waiting; nothing to tell, nothing to print
            return -1
    return out


def main(input_fd: int | None = None, output_fd: int | None = None) -> int:
    """Serve one application process until its input pipe closes.

    Args:
        input_fd: The pipe the batches arrive on (default: stdin, as ``python -m``).
        output_fd: The pipe acks go to (default: a copy of stdout, stdout then going to stderr).
    """
    # The application's Ctrl-C, or a signal to its process group, is the application's to handle: it flushes,
    # then closes our input, and we exit once what we read is stored. A SIGKILL still ends us.
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    gc.disable()
    if output_fd is None:
        out = os.dup(1)  # acks only: anything printed by mistake goes to stderr, never into the protocol
        os.dup2(2, 1)
    else:
        out = output_fd
    relay = _Relay()
    root = logging.getLogger("evaltrace")
    root.addHandler(relay)
    root.setLevel(logging.INFO)
    root.propagate = False
    stream = os.fdopen(0 if input_fd is None else input_fd, "rb", buffering=1 << 20)
    try:
        os.write(out, ready_frame())  # a few bytes: one write
    except OSError:
        return 0  # the application is already gone
    writer = _serve(stream, out, relay)
    if writer is not None:
        writer.session.close()
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a child process; its work is tested through the exporter
    sys.exit(main())
