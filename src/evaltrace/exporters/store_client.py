"""The application's end of the local store's writer process (``store_process``).

:meth:`WriterProcess.send` hands a batch of rows to the child and returns: a blocking pipe write waits without
the GIL, which is the back-pressure (the export queue counts what it then drops). A thread reads the child's
acknowledgements: what each batch stored and lost, what retention deleted, and the log records to log here.
:meth:`WriterProcess.wait` waits until every batch sent was acknowledged. If the child dies, the batches it had
not acknowledged are counted lost (a batch committed just before the death is counted too: an over-count, never
an unseen loss) and logged once; the caller then writes in its own thread.

The child runs in its own session (the terminal's Ctrl-C and signals to the application's process group are the
application's to handle: it flushes, then closes the pipe), isolated (``-I -S``: no site hooks, no
``PYTHONPATH``, no current directory) with the application's ``sys.path`` given explicitly, and speaks on two
dedicated pipes, never on its stdin or stdout. Its stderr goes to an unlinked file, never to the application's:
the last line is quoted when it fails.
"""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from evaltrace._internal import forks
from evaltrace.exporters.store_import import ImportReport
from evaltrace.exporters.store_process import read_frame, ready_frame, write_frame
from evaltrace.exporters.store_span import PlainSpan

__all__ = ["WriterProcess", "WriterStartError", "python_is_usable"]

logger = logging.getLogger("evaltrace.local_store")
START_TIMEOUT_S = 30.0
"""How long the first export waits for the child to import and say it is ready (~0.1 s on a quiet machine)."""
KILL_WAIT_S = 1.0
"""How long a killed child is waited for (it is gone at once unless the kernel holds it in a disk wait)."""
_PYTHON = re.compile(r"(python|pypy)[\d.]*(\.exe)?", re.IGNORECASE)
_PIPE_BYTES = 1 << 20  # Linux lets a pipe hold 1 MiB without privileges: fewer wake-ups per batch
_PIPES_SELECTABLE = os.name != "nt"
"""Windows cannot ``select`` on a pipe, so the ready wait cannot time out there: the thread writer is used."""
_SCRUBBED_ENV = ("OTEL_PYTHON_", "PYTHONSTARTUP")
"""Environment variables the child does without: OpenTelemetry's auto-instrumentation must not trace the writer."""

_live_fds: set[int] = set()
"""Pipe ends of the writer processes of this process; a forked child closes its copies at once (see below)."""


def _forget_after_fork() -> None:
    """In a forked child: close the parent's pipe ends, even those of a writer still starting when it forked."""
    for fd in list(_live_fds):
        try:
            os.close(fd)
        except OSError:
            pass
    _live_fds.clear()


forks.call_in_child(_forget_after_fork)


class WriterStartError(Exception):
    """The writer process could not be started or did not say it was ready."""


def python_is_usable() -> bool:
    """Whether a writer process can run: ``sys.executable`` is a Python (not uWSGI...) and pipes can be waited on."""
    executable = sys.executable
    return (
        _PIPES_SELECTABLE
        and bool(executable)
        and _PYTHON.fullmatch(Path(executable).name) is not None
        and os.path.isfile(executable)
    )


class WriterProcess:
    """A writer process and the counts of what it acknowledged: created (spawned), then :meth:`start` ed."""

    def __init__(self, directory: Path, max_age_s: float, max_bytes: int) -> None:
        """Spawn the child; :meth:`start` waits until it is ready.

        Raises:
            WriterStartError: It could not be spawned (no Python, no file descriptors left...).
        """
        self.lost_spans = 0
        self.deleted_traces = 0
        self.deleted_spans = 0
        self.import_report = ImportReport()
        self.dead = False
        self.restartable = False
        """It was retired after a torn frame, not because it failed: a new one may be started."""
        self.store_unusable = False
        """The writer found the store unusable (corrupt, a newer evaltrace's) and said so once: stop sending."""
        self.failing = False
        """The child's last batch could not be stored (a full disk): :meth:`send_settled` tells each outcome."""
        self.on_lost: Callable[[int, str], None] | None = None
        """Told of every span counted lost after ``send`` returned True (the export queue counted it exported)."""
        self._settling: dict[int, int | None] = {}  # batch number -> spans lost, for send_settled() to return
        self._open = (str(directory), max_age_s, max_bytes)
        self._pending: dict[int, int] = {}  # batch number -> spans in it, until acknowledged
        self._writing: int | None = None  # the batch send() is writing now: its own to settle
        self._seq = 0
        self._done = threading.Condition()
        self._send_lock = threading.Lock()
        self._closing = False
        self._reader: threading.Thread | None = None
        self._proc, self._to_child, self._from_child, self._errors = _spawn()
        # Unbuffered and not owning the fd: a buffered reader's lock, held by the reading thread when the process
        # forks, would stay held in the forked child; the fd is closed through ``_live_fds`` only.
        self._acks = os.fdopen(self._from_child, "rb", buffering=0, closefd=False)

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._proc.pid

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until the child says it is ready (at most ``timeout_s``) and open the store in it.

        Raises:
            WriterStartError: It exited, said something else, or stayed silent; it is killed and its pipes closed.
        """
        try:
            _wait_ready(self._from_child, self._proc, timeout_s, self._last_words)
            write_frame(self._to_child, ("open", *self._open))
        except BaseException as exc:  # whatever happened, no child and no pipe is left behind
            self.kill()
            self._close_fds()
            if isinstance(exc, WriterStartError):
                raise
            if isinstance(exc, Exception):
                raise WriterStartError(f"{type(exc).__name__}: {exc}") from exc
            raise
        self._reader = threading.Thread(target=self._read_acks, name="evaltrace-local-store-acks", daemon=True)
        self._reader.start()

    def send(self, rows: list[PlainSpan]) -> bool:
        """Hand ``rows`` to the child; False when it is gone (or the rows cannot be encoded): write them yourself.

        Blocks while the pipe is full, without the GIL: the child is still writing earlier batches. Interrupted
        half-way (a ``KeyboardInterrupt`` on the thread exporting), the batch is counted lost and this writer is
        retired (``restartable``) before the exception goes on: a torn frame never garbles a later one.
        """
        return self._send(rows, settle=False) is not None

    def send_settled(self, rows: list[PlainSpan], timeout_s: float) -> int | None:
        """Hand ``rows`` over and wait (at most ``timeout_s``) for their acknowledgement.

        Used while the child is :attr:`failing`, so that the export reports what happened to its batch and a
        loss episode ends only when a batch was really stored.

        Returns:
            How many of the rows were not stored (counted in ``lost_spans``, not told to ``on_lost``); ``0``
            when the answer comes later (then told as ``send`` tells it); ``None`` when the child is gone.
        """
        seq = self._send(rows, settle=True)
        if seq is None:
            return None
        with self._done:
            self._done.wait_for(lambda: self._settling.get(seq) is not None or self.dead, max(0.0, timeout_s))
            lost = self._settling.pop(seq, None)
        return lost or 0

    def _send(self, rows: list[PlainSpan], settle: bool) -> int | None:
        """``send``; returns the batch's number, or ``None`` when it was not handed over."""
        with self._send_lock:
            with self._done:
                if self.dead:
                    return None
                self._seq += 1
                seq = self._seq
                self._pending[seq] = len(rows)
                self._writing = seq
                if settle:
                    self._settling[seq] = None
            try:
                write_frame(self._to_child, ("batch", seq, rows))
            except ValueError:  # a value marshal refuses, or a batch over the frame cap: written in-process
                with self._done:
                    self._writing = None
                    self._pending.pop(seq, None)
                    self._settling.pop(seq, None)
                    self._done.notify_all()
                return None
            except OSError:
                with self._done:  # the child died: this batch was not sent, the caller writes it
                    self._writing = None
                    self._pending.pop(seq, None)
                    self._settling.pop(seq, None)
                self._died("its pipe closed")
                return None
            except BaseException:
                self._retire(seq)
                raise
            with self._done:
                self._writing = None
                late = self._pending.pop(seq, None) if self.dead else None  # sent whole as the child died
                if late is not None:
                    self.lost_spans += late
                    self._done.notify_all()
            if late is not None:
                self._report_lost(late, "the writer process died as they were handed to it")
            return seq

    def wait(self, timeout_s: float) -> bool:
        """Wait until every batch sent was acknowledged (or counted lost); False at the timeout."""
        with self._done:
            return self._done.wait_for(lambda: not self._pending, max(0.0, timeout_s))

    def close(self, timeout_s: float) -> None:
        """Let the child finish what it was sent within ``timeout_s``, then stop it; what it did not finish is lost.

        Returns by ``timeout_s`` (plus :data:`KILL_WAIT_S` if the child must be killed); nothing keeps running.
        """
        deadline = time.monotonic() + max(0.0, timeout_s)
        self.wait(deadline - time.monotonic())
        self._closing = True
        self._close_fd(self._to_child)  # the child's input ends: it exits once it has written what it read
        self._to_child = -1
        try:
            self._proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()  # hung: a blocked send() then fails with a broken pipe instead of waiting for ever
        if self._reader is not None:
            self._reader.join(max(0.05, deadline - time.monotonic()))
        self._died("the exporter shut down")
        if self._reader is None or not self._reader.is_alive():
            self._close_fds()

    def kill(self) -> None:
        """Kill the child now and reap it (a start in progress then fails at once)."""
        try:
            self._proc.kill()
            self._proc.wait(KILL_WAIT_S)
        except (OSError, subprocess.TimeoutExpired):
            pass

    def abandon_after_fork(self) -> None:
        """In a forked child: never write to the parent's writer (its pipe ends were closed at the fork)."""
        self._to_child = -1
        self.dead = True

    def _read_acks(self) -> None:
        try:
            while (message := read_frame(self._acks)) is not None:
                self._acknowledged(message)
        except Exception:  # a torn or foreign frame: the child is no longer trusted
            logger.exception("evaltrace internal error while reading the local store writer's replies")
        try:
            code: int | None = self._proc.wait(KILL_WAIT_S)  # reaped: no zombie until shutdown
        except subprocess.TimeoutExpired:
            code = None
        self._died(f"it exited (code {code}){self._last_words()}")
        self._errors.close()  # the child is gone: its stderr file and our end of its replies are not needed
        self._close_fd(self._from_child)

    def _acknowledged(self, message: Any) -> None:
        _, seq, lost, traces, spans, report, logs, disabled, failing = message
        for name, level, text in logs:
            logging.getLogger(name).log(level, "%s", text)
        with self._done:
            self._pending.pop(seq, None)
            settled = seq in self._settling  # send_settled() returns the loss: the export reports it
            if settled:
                self._settling[seq] = lost
            self.failing = failing
            self.lost_spans += lost
            self.deleted_traces += traces
            self.deleted_spans += spans
            if report is not None:
                self.import_report = ImportReport(*report)
            self.store_unusable = self.store_unusable or disabled
            self._done.notify_all()
        if lost and not settled:
            self._report_lost(lost, "the writer process could not store them (it logged why)")

    def _died(self, why: str) -> None:
        with self._done:
            lost = sum(n for seq, n in self._pending.items() if seq != self._writing)  # send() settles its own
            for seq in [s for s in self._pending if s != self._writing]:
                del self._pending[seq]
            self.lost_spans += lost
            first = not self.dead
            self.dead = True
            self._done.notify_all()
        if lost or (first and not self._closing):
            logger.warning(
                "local store writer process (pid %d): %s; %d span(s) it had not acknowledged are counted lost%s",
                self._proc.pid,
                why,
                lost,
                "" if self._closing else ", later spans are written in this process",
            )
        if lost:
            self._report_lost(lost, f"the local store writer process ended: {why}")

    def _retire(self, seq: int) -> None:
        """A frame was torn: close the pipe (the child stores what came whole, then exits), count this batch."""
        with self._done:
            self._writing = None
            lost = self._pending.pop(seq, 0)
            self.lost_spans += lost
            self.restartable = True
            self._closing = True  # the reader still counts the acks of earlier batches, then logs only losses
            self.dead = True
            self._done.notify_all()
        self._close_fd(self._to_child)
        self._to_child = -1
        logger.warning(
            "local store writer process (pid %d): a batch was interrupted while being handed over; its %d span(s) "
            "are counted lost and a new writer process takes the next batch",
            self._proc.pid,
            lost,
        )
        self._report_lost(lost, "interrupted while handed to the writer process")

    def _report_lost(self, spans: int, cause: str) -> None:
        listener = self.on_lost
        if listener is not None and spans:
            try:
                listener(spans, cause)
            except Exception:  # pragma: no cover - the export queue's counter: never breaks the ack reader
                logger.exception("evaltrace internal error while counting lost spans")

    def _last_words(self) -> str:
        """The child's last stderr line (a crash's exception), quoted for the log; empty when it said nothing."""
        try:
            self._errors.seek(0, io.SEEK_END)
            size = self._errors.tell()
            self._errors.seek(max(0, size - 4096))
            lines = self._errors.read().decode(errors="replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return f"; it said: {lines[-1].strip()}" if lines else ""

    def _close_fd(self, fd: int) -> None:
        if fd in _live_fds:  # closed once, and never after a fork closed it (the number may be reused by then)
            _live_fds.discard(fd)
            try:
                os.close(fd)
            except OSError:
                pass

    def _close_fds(self) -> None:
        self._close_fd(self._to_child)
        self._to_child = -1
        self._close_fd(self._from_child)
        self._acks.close()
        self._errors.close()


def _child_path() -> list[str]:
    """The application's ``sys.path`` without its current directory, and with this evaltrace's root."""
    cwd = os.getcwd()
    path = [p for p in sys.path if p and p != "." and p != cwd]
    package_root = str(Path(__file__).resolve().parents[2])  # e.g. an editable install's import hook
    if package_root not in path:
        path.append(package_root)
    return path


def _spawn() -> tuple[subprocess.Popen[bytes], int, int, IO[bytes]]:
    """Start the isolated child with its two pipe ends passed as fds 3+; stdin, stdout are /dev/null."""
    fds: list[int] = []
    try:
        child_in, to_child = os.pipe()
        fds += (child_in, to_child)
        from_child, child_out = os.pipe()
        fds += (from_child, child_out)
        _grow(to_child)
        errors = tempfile.TemporaryFile()
    except OSError as exc:  # EMFILE...: the caller falls back to writing in-process, once
        for fd in fds:
            os.close(fd)
        raise WriterStartError(f"cannot create its pipes: {exc}") from exc
    _live_fds.update((to_child, from_child))
    code = (
        f"import sys; sys.path[:] = {_child_path()!r}; "
        f"from evaltrace.exporters.store_process import main; sys.exit(main({child_in}, {child_out}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_ENV)}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", code],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            pass_fds=(child_in, child_out),
            env=env,
            close_fds=True,
            start_new_session=True,  # not in the terminal's foreground group: Ctrl-C is the application's
        )
    except OSError as exc:
        for fd in (to_child, from_child):
            _live_fds.discard(fd)
            os.close(fd)
        errors.close()
        raise WriterStartError(f"cannot start {sys.executable}: {exc}") from exc
    finally:
        os.close(child_in)
        os.close(child_out)
    return proc, to_child, from_child, errors


def _grow(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
    except (ImportError, OSError):  # not Linux, or a lower limit: the default size works, with more wake-ups
        pass


def _wait_ready(fd: int, proc: subprocess.Popen[bytes], timeout_s: float, last_words: Callable[[], str]) -> None:
    """Read the exact ready frame within ``timeout_s``; anything else is refused before it is decoded."""
    import selectors

    expected = ready_frame()
    got = b""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while len(got) < len(expected):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise WriterStartError(f"the writer process said nothing within {timeout_s:.0f} s")
            chunk = os.read(fd, len(expected) - len(got))
            if not chunk:
                try:
                    code: int | None = proc.wait(KILL_WAIT_S)  # its output ended: it is exiting; the code says why
                except subprocess.TimeoutExpired:
                    code = None
                raise WriterStartError(f"the writer process exited before it was ready (code {code}){last_words()}")
            got += chunk
            if not expected.startswith(got):
                raise WriterStartError(
                    "the writer process does not speak this evaltrace's protocol (evaltrace upgraded while running?)"
                )
