"""The score-sink contract: ``export(batch) -> SinkResult``, ``force_flush``, ``shutdown``.

A sink delivers :class:`~evaltrace.schema.Score` objects to one backend. It is called from its own
:class:`~evaltrace.evaluation.sinks.worker.SinkWorker` thread, never from the application, so it may block on
I/O; it must not raise (failures are returned as a :class:`SinkResult`), and it must be idempotent per score
id: the worker re-sends a failed score with the same id, and backends upsert on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from evaltrace.schema import Score


@dataclass(frozen=True)
class SinkResult:
    """Outcome of one ``export`` call.

    Attributes:
        failed: Scores not delivered for a transient reason (a 5xx, a 429, a timeout, a refused connection);
            re-sending them may succeed.
        rejected: Scores the backend refused for good (a 4xx: the score itself is wrong); they go straight to
            the dead-letter file.
        error: A short description of the last failure, for logs and the dead-letter file.
        retry_after_s: How long the backend asked us to wait before the next request (an HTTP ``Retry-After``
            on a 429 or 503), in seconds; None when it did not say. The worker sends nothing to this sink
            before that time has passed: it waits, or dead-letters when the wait would pass its shutdown
            deadline or :attr:`RetryPolicy.max_retry_after_s <evaltrace.evaluation.sinks.worker.RetryPolicy>`.
    """

    failed: Sequence[Score] = field(default_factory=tuple)
    rejected: Sequence[Score] = field(default_factory=tuple)
    error: str | None = None
    retry_after_s: float | None = None

    @property
    def ok(self) -> bool:
        """True when every score of the batch was delivered."""
        return not self.failed and not self.rejected

    @classmethod
    def success(cls) -> SinkResult:
        """The result of a batch delivered completely."""
        return cls()


@runtime_checkable
class ScoreSink(Protocol):
    """A destination for scores (Langfuse, Phoenix, a JSONL file, ...)."""

    @property
    def name(self) -> str:
        """Short name used in stats, logs and dead-letter file names (e.g. ``"langfuse"``)."""
        ...

    def export(self, batch: Sequence[Score]) -> SinkResult:
        """Deliver ``batch``; never raise; return which scores failed and whether a retry may help."""
        ...

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Deliver anything the sink buffers itself; return False if it could not within the timeout."""
        ...

    def shutdown(self) -> None:
        """Release resources (HTTP clients, files); export is not called afterwards."""
        ...


# Returns the monotonic time by which the export running on this thread must return (the worker's shutdown
# deadline, infinity before shutdown). A ContextVar so the worker can pass it to sinks without changing the
# ``export(batch)`` signature; a callable so a deadline set while a batch is being sent applies to its next request.
_export_deadline: ContextVar[Callable[[], float] | None] = ContextVar("evaltrace_sink_export_deadline", default=None)


def export_time_left() -> float | None:
    """Seconds left before the running export must return, or None when there is no deadline (yet).

    A sink doing blocking I/O should cap its timeouts with it: during shutdown the worker stops waiting at its
    deadline and dead-letters the batch in flight, so a request still running after that only holds a thread.
    """
    deadline = _export_deadline.get()
    if deadline is None:
        return None
    left = deadline() - time.monotonic()
    return None if left == float("inf") else left


@contextmanager
def export_deadline(deadline: Callable[[], float]) -> Iterator[None]:
    """Make ``deadline()`` (a ``time.monotonic()`` value, infinity for none) what :func:`export_time_left` reads."""
    token = _export_deadline.set(deadline)
    try:
        yield
    finally:
        _export_deadline.reset(token)
