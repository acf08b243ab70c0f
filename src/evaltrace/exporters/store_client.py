"""The application's end of the local store's writer process (``store_process``).

:meth:`WriterProcess.send` hands a batch of rows to the child and returns: a blocking pipe write waits without
the GIL, which is the back-pressure (the export queue counts what it then drops). A thread reads the child's
acknowledgements: what each batch stored and lost, what retention deleted, and the log records to log here.
:meth:`WriterProcess.wait` waits until every batch sent was acknowledged. If the child dies, the batches it had
not acknowledged are counted lost (a batch committed just before the death is counted too: an over-count, never
an unseen loss) and logged once; the caller then writes in its own thread.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from evaltrace.exporters.store_import import ImportReport
from evaltrace.exporters.store_process import PROTOCOL, read_frame, write_frame
from evaltrace.exporters.store_span import PlainSpan

__all__ = ["WriterProcess", "WriterStartError", "python_is_usable"]

logger = logging.getLogger("evaltrace.local_store")
START_TIMEOUT_S = 30.0
"""How long the first export waits for the child to import and say it is ready (~0.1 s on a quiet machine)."""
_PYTHON = re.compile(r"(python|pypy)[\d.]*(\.exe)?", re.IGNORECASE)
_PIPE_BYTES = 1 << 20  # Linux lets a pipe hold 1 MiB without privileges: fewer wake-ups per batch


class WriterStartError(Exception):
    """The writer process could not be started or did not say it was ready."""


def python_is_usable() -> bool:
    """Whether ``sys.executable`` is a Python that can run ``-m`` (not an embedding program such as uWSGI)."""
    executable = sys.executable
    return bool(executable) and _PYTHON.fullmatch(Path(executable).name) is not None and os.path.isfile(executable)


class WriterProcess:
    """A running writer process and the counts of what it acknowledged."""

    def __init__(self, directory: Path, max_age_s: float, max_bytes: int) -> None:
        """Start the child and wait until it is ready.

        Raises:
            WriterStartError: It could not start, or exited or stayed silent before saying it was ready.
        """
        self.lost_spans = 0
        self.deleted_traces = 0
        self.deleted_spans = 0
        self.import_report = ImportReport()
        self.dead = False
        self.store_unusable = False
        """The writer found the store unusable (corrupt, a newer evaltrace's) and said so once: stop sending."""
        self._pending: dict[int, int] = {}  # batch number -> spans in it, until acknowledged
        self._seq = 0
        self._done = threading.Condition()
        self._send_lock = threading.Lock()
        self._proc, self._to_child, from_child = _spawn()
        self._closing = False
        # Unbuffered: a buffered reader's lock, held by the reading thread when the process forks, would stay
        # held in the forked child, which must close its copy.
        self._acks = os.fdopen(from_child, "rb", buffering=0)
        try:
            _wait_ready(self._acks, self._proc)
            write_frame(self._to_child, ("open", str(directory), max_age_s, max_bytes))
        except (OSError, WriterStartError) as exc:
            self._kill()
            self._close_fds()
            raise WriterStartError(str(exc)) from exc
        self._reader = threading.Thread(target=self._read_acks, name="evaltrace-local-store-acks", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._proc.pid

    def send(self, rows: list[PlainSpan]) -> bool:
        """Hand ``rows`` to the child; False when it is gone (or the rows cannot be encoded): write them yourself.

        Blocks while the pipe is full, without the GIL: the child is still writing earlier batches.
        """
        with self._send_lock:
            with self._done:
                if self.dead:
                    return False
                self._seq += 1
                seq = self._seq
                self._pending[seq] = len(rows)
            try:
                write_frame(self._to_child, ("batch", seq, rows))
                return True
            except ValueError:  # a value marshal refuses (a str subclass): this batch goes the in-process way
                with self._done:
                    self._pending.pop(seq, None)
                    self._done.notify_all()
                return False
            except OSError:
                with self._done:
                    if self._pending.pop(seq, None) is None:  # the reader already counted it lost: it is not
                        self.lost_spans -= len(rows)
                self._died("its pipe closed")
                return False

    def wait(self, timeout_s: float) -> bool:
        """Wait until every batch sent was acknowledged (or counted lost); False at the timeout."""
        with self._done:
            return self._done.wait_for(lambda: not self._pending, max(0.0, timeout_s))

    def close(self, timeout_s: float) -> None:
        """Let the child finish what it was sent within ``timeout_s``, then stop it; what it did not finish is lost."""
        self.wait(timeout_s)
        self._closing = True
        try:
            os.close(self._to_child)  # the child's input ends: it exits once it has written what it read
        except OSError:
            pass
        self._to_child = -1
        try:
            self._proc.wait(max(0.05, min(timeout_s, 5.0)))
        except subprocess.TimeoutExpired:
            self._kill()  # hung: a blocked send() then fails with a broken pipe instead of waiting for ever
        self._reader.join(max(0.05, min(timeout_s, 5.0)))
        self._died("the exporter shut down")
        if not self._reader.is_alive():
            self._acks.close()

    def abandon_after_fork(self) -> None:
        """In a forked child: close this process's copies of the pipe, never write to the parent's writer."""
        self._close_fds()
        self.dead = True

    def _read_acks(self) -> None:
        try:
            while (message := read_frame(self._acks)) is not None:
                self._acknowledged(message)
        except Exception:  # a torn or foreign frame: the child is no longer trusted
            logger.exception("evaltrace internal error while reading the local store writer's replies")
        self._died(f"it exited (code {self._proc.poll()})")

    def _acknowledged(self, message: Any) -> None:
        _, seq, lost, traces, spans, report, logs, disabled = message
        for name, level, text in logs:
            logging.getLogger(name).log(level, "%s", text)
        with self._done:
            self._pending.pop(seq, None)
            self.lost_spans += lost
            self.deleted_traces += traces
            self.deleted_spans += spans
            if report is not None:
                self.import_report = ImportReport(*report)
            self.store_unusable = self.store_unusable or disabled
            self._done.notify_all()

    def _died(self, why: str) -> None:
        with self._done:
            lost = sum(self._pending.values())
            self._pending.clear()
            self.lost_spans += lost
            first = not self.dead
            self.dead = True
            self._done.notify_all()
        if lost or (first and not self._closing):
            logger.warning(
                "local store writer process (pid %d): %s; %d span(s) it had not acknowledged are counted lost, "
                "later spans are written in this process",
                self._proc.pid,
                why,
                lost,
            )

    def _kill(self) -> None:
        try:
            self._proc.kill()
            self._proc.wait(5.0)
        except (OSError, subprocess.TimeoutExpired):
            pass

    def _close_fds(self) -> None:
        if self._to_child >= 0:
            try:
                os.close(self._to_child)
            except OSError:
                pass
            self._to_child = -1
        self._acks.close()


def _spawn() -> tuple[subprocess.Popen[bytes], int, int]:
    """Start ``python -m evaltrace.exporters.store_process``; its stdin and stdout are our two pipes."""
    child_in, to_child = os.pipe()
    from_child, child_out = os.pipe()
    _grow(to_child)
    package_root = str(Path(__file__).resolve().parents[2])  # the child imports this very evaltrace
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evaltrace.exporters.store_process"],
            stdin=child_in,
            stdout=child_out,
            env=env,
            close_fds=True,
        )
    except OSError as exc:
        for fd in (to_child, from_child):
            os.close(fd)
        raise WriterStartError(f"cannot start {sys.executable}: {exc}") from exc
    finally:
        os.close(child_in)
        os.close(child_out)
    return proc, to_child, from_child


def _grow(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
    except (ImportError, OSError):  # not Linux, or a lower limit: the default size works, with more wake-ups
        pass


def _wait_ready(acks: Any, proc: subprocess.Popen[bytes]) -> None:
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(acks, selectors.EVENT_READ)
        if not selector.select(START_TIMEOUT_S):
            raise WriterStartError(f"the writer process said nothing within {START_TIMEOUT_S:.0f} s")
    ready = read_frame(acks)
    if ready is not None and ready != ("ready", PROTOCOL):
        raise WriterStartError(f"the writer process speaks {ready!r}, not protocol {PROTOCOL} (evaltrace upgraded?)")
    if ready is None:
        try:
            code = proc.wait(5.0)  # its output ended: it is exiting, and its code says why
        except subprocess.TimeoutExpired:
            code = None
        raise WriterStartError(f"the writer process exited before it was ready (code {code})")
