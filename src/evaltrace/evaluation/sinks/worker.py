"""One background thread per sink: batching, retries with exponential backoff and jitter, dead-lettering.

Scores arrive from the evaluation worker through :meth:`SinkWorker.submit` (never from the application
thread). The queue is bounded; a score that does not fit is written to the dead-letter file at once (or, when
there is none, dropped and counted), so nothing is lost silently. A batch the sink fails to deliver is retried
with the *same* scores, hence the same ids, so a retry after a lost response is an upsert, not a duplicate.
When retries run out, or the failure is permanent (a 4xx), or shutdown's deadline is near, the undelivered
scores go to the dead-letter file for ``evaltrace scores replay``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation.sinks.base import ScoreSink, SinkResult
from evaltrace.evaluation.sinks.deadletter import write_dead_letters
from evaltrace.schema import Score

logger = logging.getLogger("evaltrace.evaluation")


@dataclass
class SinkStats:
    """Counters of one sink worker (read them through ``EvaluationSpanProcessor.stats()``)."""

    queued: int = 0
    successes: int = 0
    retries: int = 0
    dead_lettered: int = 0
    dropped: int = 0


@dataclass(frozen=True)
class RetryPolicy:
    """Retry schedule: attempt ``n`` (from 0) waits ``min(max_backoff_s, initial_backoff_s * 2**n)``.

    The wait is multiplied by a random factor in [0.5, 1.0) (jitter) so that many processes recovering from
    the same outage do not retry in lock-step.
    """

    max_retries: int = 5
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 30.0

    def delay(self, attempt: int) -> float:
        """Return the wait before retry number ``attempt`` (0-based)."""
        base = min(self.max_backoff_s, self.initial_backoff_s * (2**attempt))
        jittered: float = base * (0.5 + random.random() / 2)  # jitter, not security
        return jittered


class SinkWorker:
    """Deliver scores to one sink from a daemon thread.

    Args:
        sink: The sink.
        max_queue: Scores held before new ones overflow to the dead-letter file.
        batch_size: Most scores per ``export`` call.
        schedule_delay_s: Longest wait for a batch to fill before a partial batch is sent.
        retry: Retry schedule for retryable failures.
        dead_letter_path: JSONL file for scores that could not be delivered; None counts them as dropped.
    """

    def __init__(
        self,
        sink: ScoreSink,
        *,
        max_queue: int = 10_000,
        batch_size: int = 50,
        schedule_delay_s: float = 0.5,
        retry: RetryPolicy | None = None,
        dead_letter_path: Path | None = None,
    ) -> None:
        self.sink = sink
        self.stats = SinkStats()
        self._max_queue = max_queue
        self._batch_size = max(1, batch_size)
        self._delay = schedule_delay_s
        self._retry = retry or RetryPolicy()
        self._dead_letter_path = dead_letter_path
        self._queue: deque[Score] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._flush_requested = False
        self._shutdown = False
        self._deadline = float("inf")
        self._thread = threading.Thread(target=self._run, name=f"evaltrace-sink-{sink.name}", daemon=True)
        self._thread.start()

    def submit(self, scores: Iterable[Score]) -> None:
        """Queue ``scores`` for delivery; overflow goes to the dead-letter file (never blocks on the backend)."""
        overflow: list[Score] = []
        with self._cond:
            was_empty = not self._queue
            for score in scores:
                if self._shutdown or len(self._queue) >= self._max_queue:
                    overflow.append(score)
                else:
                    self._queue.append(score)
                    self.stats.queued += 1
            # Wake the worker when a batch is full, or when the first score arrives so it starts the
            # schedule-delay clock (an idle worker waits without a timeout).
            if len(self._queue) >= self._batch_size or (was_empty and self._queue):
                self._cond.notify_all()
        if overflow:
            self._dead_letter(overflow, "sink queue full or shut down")

    def force_flush(self, timeout_s: float) -> bool:
        """Deliver (or dead-letter) everything queued; return False if the queue is not empty at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._flush_requested = True
            self._cond.notify_all()
            try:
                while self._queue or self._busy:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._thread.is_alive():
                        return False
                    self._cond.wait(remaining)
            finally:
                self._flush_requested = False
        return self.sink.force_flush(max(0, int((deadline - time.monotonic()) * 1000)))

    def shutdown(self, timeout_s: float) -> bool:
        """Drain within ``timeout_s``: deliver what the backend takes, dead-letter the rest, stop the thread."""
        with self._cond:
            self._shutdown = True
            self._deadline = time.monotonic() + timeout_s
            self._cond.notify_all()
        self._thread.join(max(0.0, timeout_s))
        clean = not self._thread.is_alive()
        with self._cond:
            leftover = list(self._queue)
            self._queue.clear()
        if leftover:
            # The sink is hung past the deadline: keep what it never got so a replay can deliver it.
            self._dead_letter(leftover, "shutdown deadline reached")
            clean = False
        try:
            self.sink.shutdown()
        except Exception:
            log_internal_error(f"shutting down score sink {self.sink.name}")
        return clean

    # --- worker thread ------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                self._deliver(batch)
            except Exception:  # the worker must survive a broken sink
                log_internal_error(f"delivering scores to {self.sink.name}")
                self._dead_letter(batch, "internal error")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _next_batch(self) -> list[Score] | None:
        with self._cond:
            fill_deadline: float | None = None  # starts when the first score of the batch is seen
            while True:
                if self._queue and fill_deadline is None:
                    fill_deadline = time.monotonic() + self._delay
                ready = len(self._queue) >= self._batch_size or self._flush_requested or self._shutdown
                if fill_deadline is not None and (ready or time.monotonic() >= fill_deadline):
                    break
                if not self._queue and self._shutdown:
                    return None
                timeout = None if fill_deadline is None else max(fill_deadline - time.monotonic(), 0.0)
                self._cond.wait(timeout)
            count = min(self._batch_size, len(self._queue))
            batch = [self._queue.popleft() for _ in range(count)]
            self._busy = True
            return batch

    def _deliver(self, batch: Sequence[Score]) -> None:
        pending: Sequence[Score] = batch
        attempt = 0
        while True:
            result = self._export(pending)
            self.stats.successes += len(pending) - len(result.failed) - len(result.rejected)
            self._dead_letter(result.rejected, result.error)
            if not result.failed:
                return
            pending = result.failed
            if attempt >= self._retry.max_retries or not self._wait_backoff(self._retry.delay(attempt)):
                self._dead_letter(pending, result.error)
                return
            attempt += 1
            self.stats.retries += 1

    def _export(self, batch: Sequence[Score]) -> SinkResult:
        try:
            return self.sink.export(batch)
        except Exception as exc:  # a sink is not supposed to raise; treat it as a transient failure
            log_internal_error(f"exporting scores to {self.sink.name}")
            return SinkResult(failed=tuple(batch), error=f"{type(exc).__name__}: {exc}")

    def _wait_backoff(self, delay: float) -> bool:
        """Sleep ``delay`` unless shutdown's deadline comes first; return False when there is no time left."""
        with self._cond:
            if self._shutdown and time.monotonic() + delay >= self._deadline:
                return False
            end = time.monotonic() + delay
            while (remaining := end - time.monotonic()) > 0:
                self._cond.wait(remaining)
                if self._shutdown and end >= self._deadline:
                    return False
        return True

    def _dead_letter(self, scores: Sequence[Score], error: str | None) -> None:
        if not scores:
            return
        if self._dead_letter_path is None:
            self.stats.dropped += len(scores)
            logger.warning("evaltrace: %d score(s) for %s not delivered: %s", len(scores), self.sink.name, error)
            return
        try:
            self.stats.dead_lettered += write_dead_letters(self._dead_letter_path, self.sink.name, scores, error)
        except OSError:
            self.stats.dropped += len(scores)
            log_internal_error(f"writing the dead-letter file {self._dead_letter_path}")
