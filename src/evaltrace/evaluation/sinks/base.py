"""The score-sink contract: ``export(batch) -> SinkResult``, ``force_flush``, ``shutdown``.

A sink delivers :class:`~evaltrace.schema.Score` objects to one backend. It is called from its own
:class:`~evaltrace.evaluation.sinks.worker.SinkWorker` thread, never from the application, so it may block on
I/O; it must not raise (failures are returned as a :class:`SinkResult`), and it must be idempotent per score
id: the worker re-sends a failed score with the same id, and backends upsert on it.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    """

    failed: Sequence[Score] = field(default_factory=tuple)
    rejected: Sequence[Score] = field(default_factory=tuple)
    error: str | None = None

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
