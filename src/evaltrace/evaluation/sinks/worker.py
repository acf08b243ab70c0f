"""One background thread per sink: batching, retries with backoff and jitter, ``Retry-After``, dead-lettering.

Scores arrive from the evaluation worker through :meth:`SinkWorker.submit` (never from the application
thread). The queue is bounded; a score that does not fit is written to the dead-letter file at once (or, when
there is none, dropped and counted), so nothing is lost silently. A batch the sink fails to deliver is retried
with the *same* scores, hence the same ids, so a retry after a lost response is an upsert, not a duplicate.
When the backend answers with ``Retry-After``, nothing is sent to it before that time. When retries run out,
the failure is permanent (a 4xx), the backend's ``Retry-After`` passes the shutdown deadline, or the deadline
comes while a request hangs, the undelivered scores go to the dead-letter file for ``evaltrace scores replay``.

Every score handed to :meth:`SinkWorker.submit` ends in exactly one of ``successes``, ``dead_lettered`` or
``dropped`` (the last only without a dead-letter file) by the time :meth:`SinkWorker.shutdown` returns: each
score has one owner at a time (the queue, the batch in flight, or the code settling it), and ownership moves
under one lock. At the deadline shutdown takes the batch still in flight away from a hung worker thread and
dead-letters it; if that request lands later, the thread counts and writes nothing (the backend has the score
and the dead-letter file has it too: a replay upserts it under the same id, so it is still stored once).

In a child forked from the process the worker starts empty, with zeroed stats, and its thread starts with the
child's first score (see ``_internal/forks.py``): the parent's queued and in-flight scores are the parent's to
deliver, so the child neither sends them again nor dead-letters them.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaltrace._internal import forks
from evaltrace._internal.errors import ErrorEpisode, log_internal_error
from evaltrace._internal.flush_results import flush_ok
from evaltrace.evaluation.sinks._health import OutageLog
from evaltrace.evaluation.sinks.base import ScoreSink, SinkResult, export_deadline
from evaltrace.evaluation.sinks.deadletter import append_lines, save_dead_letters
from evaltrace.evaluation.sinks.not_evaluated import NotEvaluated, NotEvaluatedPartlyWritten
from evaltrace.schema import Score


@dataclass
class SinkStats:
    """Counters of one sink worker (read them through ``EvaluationSpanProcessor.stats()``).

    Once :meth:`SinkWorker.shutdown` has returned, ``submitted == successes + dead_lettered + dropped``.

    Attributes:
        submitted: Scores handed to the worker.
        queued: Those that entered the queue (the others overflowed straight to the dead-letter file).
        successes: Scores the backend acknowledged.
        retries: Export attempts repeated after a transient failure.
        dead_lettered: Scores written to the dead-letter file.
        dropped: Scores lost: no dead-letter file configured, writing it failed, or the encoder refused them
            (each score is encoded on its own: the others of the batch are dead-lettered).
        abandoned: Of ``dead_lettered``, those of the batch whose request was still in flight at the shutdown
            deadline, whether shutdown took it from a hung request or the request's timeout (capped at the
            deadline) ended it (the backend may get them too; a replay then upserts them under the same id).
        not_evaluated: Records of evaluations never run (cut short at shutdown) written for this sink, in its
            own file (JSONL) or its dead-letter file (see :meth:`SinkWorker.not_evaluated`), each counted once
            (in doubt, in both files: a sink that raised without saying what it wrote); never scores.
        not_evaluated_dropped: Such records that could be written nowhere (the sink's write raised, and so did the
            dead-letter file's, or there is none): the evaluations stay counted in
            ``stats()["not_evaluated_by_reason"]``, only this sink's record of them is lost.
        internal_errors: Errors of ours or the sink's, each logged: a sink whose ``export``, ``shutdown`` or
            not-evaluated write raised, a delivery step that failed, a dead-letter file that could not be written.
            Included in the pipeline's ``stats()["internal_errors"]``.
    """

    submitted: int = 0
    queued: int = 0
    successes: int = 0
    retries: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    abandoned: int = 0
    not_evaluated: int = 0
    not_evaluated_dropped: int = 0
    internal_errors: int = 0


@dataclass(frozen=True)
class RetryPolicy:
    """Retry schedule: attempt ``n`` (from 0) waits ``min(max_backoff_s, initial_backoff_s * 2**n)``.

    The wait is multiplied by a random factor in [0.5, 1.0) (jitter) so that many processes recovering from
    the same outage do not retry in lock-step. A backend's ``Retry-After`` lengthens the wait (never shortens
    it) and holds back every batch for that sink until it has passed.

    Attributes:
        max_retries: Retries per batch before its scores are dead-lettered.
        initial_backoff_s: First backoff.
        max_backoff_s: Longest backoff.
        max_retry_after_s: Longest ``Retry-After`` waited for; while a backend's longer one is in force,
            batches are dead-lettered without being sent (waiting would hold every score behind them; sending
            would ignore what the backend asked).
    """

    max_retries: int = 5
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 120.0

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
        outage_log_interval_s: Shortest time between two outage WARNINGs for this sink (see ``_health``).
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
        outage_log_interval_s: float = 60.0,
    ) -> None:
        self.sink = sink
        self.stats = SinkStats()
        self._max_queue = max_queue
        self._batch_size = max(1, batch_size)
        self._delay = schedule_delay_s
        self._retry = retry or RetryPolicy()
        self._dead_letter_path = dead_letter_path
        self._health_interval = outage_log_interval_s
        self._health = OutageLog(sink.name, dead_letter_path, outage_log_interval_s)
        self._queue: deque[Score] = deque()
        self._inflight: list[Score] = []  # the batch the thread owns: not yet delivered nor dead-lettered
        self._cond = threading.Condition()
        self._busy = False
        self._flush_requested = False
        self._shutdown = False
        self._abandoned = False  # set at the shutdown deadline: the thread settles nothing afterwards
        self._closed: bool | None = None  # shutdown's result, once it has run
        self._deadline = float("inf")
        self._not_before = 0.0  # monotonic time before which the backend asked not to be called (Retry-After)
        self._thread: threading.Thread | None = None  # None: not started (yet) in this process
        what = f"starting the delivery thread of score sink {sink.name} (tried again later)"
        self._start_failing = ErrorEpisode(what)
        self._episodes()
        with self._cond:
            self._start_locked()
        forks.reinit_after_fork(self)

    def _episodes(self) -> None:
        """The errors logged once per episode (a dead-letter file or a sink's file that keeps failing)."""
        self._dead_letter_failing = ErrorEpisode(f"writing the dead-letter file {self._dead_letter_path}")
        self._records_failing = ErrorEpisode(f"recording evaluations not run for score sink {self.sink.name}")

    def _start_locked(self) -> None:
        """Start the worker thread unless it runs already or the worker is shut; call with the lock held.

        Never raises: a thread that cannot start (``can't start new thread``) is logged and tried again with the
        next score or flush. Scores wait in the queue meanwhile (``force_flush()`` says False), and ``shutdown()``
        dead-letters whatever is still there, counted.
        """
        if self._thread is None and not self._shutdown:
            thread = threading.Thread(target=self._run, name=f"evaltrace-sink-{self.sink.name}", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # logged once per episode: this is tried again with every score
                self._start_failing.failed()
                return
            self._start_failing.ok()
            self._thread = thread  # only once it runs: else no later score would start one

    def _reinit_after_fork(self) -> None:
        """In a forked child: a new lock, an empty queue, stats at zero; the thread starts with the first score.

        The parent's queued and in-flight scores are the parent's (it delivers or dead-letters them): the child
        forgets them. The backend's ``Retry-After`` still holds. A worker shut down before the fork stays shut.
        """
        self.stats = SinkStats()
        self._health = OutageLog(self.sink.name, self._dead_letter_path, self._health_interval)
        self._queue = deque()
        self._inflight = []
        self._cond = threading.Condition()
        self._busy = False
        self._flush_requested = False
        self._episodes()
        if not self._shutdown:
            self._thread = None

    def submit(self, scores: Iterable[Score]) -> None:
        """Queue ``scores`` for delivery; overflow goes to the dead-letter file (never blocks on the backend)."""
        with self._cond:
            self._start_locked()
            overflow: list[Score] = []
            was_empty = not self._queue
            for score in scores:
                self.stats.submitted += 1
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
                cause = "the sink is shut down" if self._shutdown else f"the sink queue is full ({self._max_queue})"
                self._settle_lost(overflow, cause)

    def not_evaluated(self, records: Sequence[NotEvaluated]) -> None:
        """Record evaluations that were never run (cut short at shutdown) where this sink's scores are looked for.

        A sink keeping a file of its own (``record_not_evaluated``: the JSONL sink) writes them there; any other
        sink's go to its dead-letter file, beside the scores it could not deliver (``scores replay`` keeps them
        and sends none). Written at once (local files, shutdown only): they never wait behind a hung backend.
        Without such a file they are counted in ``stats()["not_evaluated_by_reason"]`` only. A sink's own write
        that raises falls back to the dead-letter file; records written nowhere are counted
        ``not_evaluated_dropped``, and each failed write ``internal_errors`` (logged once per episode).

        A sink's write that wrote some records and then raised: when it says which
        (:class:`NotEvaluatedPartlyWritten`, as the JSONL sink does), only the others go to the dead-letter file,
        so each record is in exactly one file, counted once. A sink that raises without saying is in doubt: every
        record goes to the dead-letter file too (at least once; a copy in both files has the same ``record_id``, so
        the copies can be recognised as one), counted once in ``not_evaluated``.
        """
        if not records:
            return
        write = getattr(self.sink, "record_not_evaluated", None)
        if write is not None:
            try:
                write(records)
            except NotEvaluatedPartlyWritten as exc:
                self._records_error(exc)
                with self._cond:
                    self.stats.not_evaluated += exc.written
                records = records[exc.written :]
            except Exception as exc:
                self._records_error(exc)
            else:
                self._records_failing.ok()
                with self._cond:
                    self.stats.not_evaluated += len(records)
                return
        if self._dead_letter_path is None:
            if write is not None:  # the sink's own file failed and there is nowhere else: lost, counted
                with self._cond:
                    self.stats.not_evaluated_dropped += len(records)
            return
        try:
            append_lines(self._dead_letter_path, [record.to_line() for record in records])
        except Exception as exc:
            with self._cond:
                self.stats.internal_errors += 1
                self.stats.not_evaluated_dropped += len(records)
            self._dead_letter_failing.failed(exc=exc)
            return
        self._dead_letter_failing.ok()
        with self._cond:
            self.stats.not_evaluated += len(records)

    def _records_error(self, exc: BaseException) -> None:
        """The sink's not-evaluated write raised: counted each time, logged once per episode (not once per job)."""
        with self._cond:
            self.stats.internal_errors += 1
        self._records_failing.failed(exc=exc)

    def _internal_error(self, what: str) -> None:
        """Log the exception being handled as an internal error and count it (call from an ``except`` block)."""
        log_internal_error(what)
        with self._cond:
            self.stats.internal_errors += 1

    def force_flush(self, timeout_s: float) -> bool:
        """Deliver (or dead-letter) everything queued; return False if the queue is not empty at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._start_locked()  # its start failed before: try again, a flush must not wait for a missing thread
            self._flush_requested = True
            self._cond.notify_all()
            try:
                while self._queue or self._busy:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._thread is None or not self._thread.is_alive():
                        return False
                    self._cond.wait(remaining)
            finally:
                self._flush_requested = False
        # The sink may be the application's: read its answer as a bool, and an exception as a failure counted here
        # (raised, it would reach the application's force_flush through the evaluation processor).
        try:
            return flush_ok(self.sink.force_flush(max(0, int((deadline - time.monotonic()) * 1000))))
        except Exception:
            self._internal_error(f"flushing score sink {self.sink.name}")
            return False

    def shutdown(self, timeout_s: float) -> bool:
        """Drain within ``timeout_s``: deliver what the backend takes, dead-letter the rest, stop the thread.

        Returns by the deadline even when a request hangs: the batch in flight is then dead-lettered and the
        thread, a daemon, is left to its request.

        Returns:
            True when the thread settled every score itself (delivered, or dead-lettered because the backend
            failed); False when the deadline cut it short and shutdown dead-lettered what it still held.
        """
        with self._cond:
            if self._closed is not None:
                return self._closed
            self._shutdown = True
            self._deadline = min(self._deadline, time.monotonic() + timeout_s)
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(max(0.0, timeout_s))
        with self._cond:
            leftover = [*self._inflight, *self._queue]
            self.stats.abandoned += len(self._inflight)
            self._inflight = []
            self._queue.clear()
            self._abandoned = True
            self._settle_lost(leftover, f"shutdown deadline reached ({timeout_s:.1f} s) before delivery")
            self._closed = not leftover and not (thread is not None and thread.is_alive())
            self._cond.notify_all()
        try:
            self.sink.shutdown()
        except Exception:  # every score is settled already (the sinks buffer none): counted, nothing lost
            self._internal_error(f"shutting down score sink {self.sink.name}")
        return self._closed

    # --- worker thread ------------------------------------------------------------------------------------

    def _run(self) -> None:
        # Sinks cap their request timeouts with what is left of the deadline (sinks.base.export_time_left).
        with export_deadline(lambda: self._deadline):
            while self._next_batch():
                try:
                    self._deliver()
                except Exception:  # the worker must survive a broken sink; the batch is dead-lettered, counted
                    self._internal_error(f"delivering scores to {self.sink.name}")
                    self._give_up("internal error")
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()

    def _next_batch(self) -> bool:
        """Wait for a batch and make it the one in flight; False when the worker should stop."""
        with self._cond:
            fill_deadline: float | None = None  # starts when the first score of the batch is seen
            while True:
                if self._abandoned:
                    return False
                if self._queue and fill_deadline is None:
                    fill_deadline = time.monotonic() + self._delay
                ready = len(self._queue) >= self._batch_size or self._flush_requested or self._shutdown
                if fill_deadline is not None and (ready or time.monotonic() >= fill_deadline):
                    break
                if not self._queue and self._shutdown:
                    return False
                timeout = None if fill_deadline is None else max(fill_deadline - time.monotonic(), 0.0)
                self._cond.wait(timeout)
            count = min(self._batch_size, len(self._queue))
            self._inflight = [self._queue.popleft() for _ in range(count)]
            self._busy = True
            return True

    def _deliver(self) -> None:
        attempt = 0
        while True:
            with self._cond:
                pending = list(self._inflight)
            if not pending:
                return
            held = self._hold_off()
            if held is not None:
                self._give_up(held)
                return
            sent_at = time.monotonic()
            result = self._export(pending)
            # The request ran into the shutdown deadline (the sink caps its timeout with it): it was in flight
            # then, as a hung one shutdown takes away is, and the backend may have it; counted alike either way.
            cut = sent_at < self._deadline <= time.monotonic()
            if not self._settle(pending, result):
                return
            wait = self._retry_wait(result, attempt)
            if isinstance(wait, str):
                self._give_up(wait, in_flight=cut)  # its last attempt: cut by the deadline all the same
                return
            if not self._wait_until(wait):
                self._give_up(f"{result.error}; shutdown deadline reached before the next retry", in_flight=cut)
                return
            attempt += 1
            with self._cond:
                self.stats.retries += 1

    def _settle(self, pending: Sequence[Score], result: SinkResult) -> bool:
        """Count what ``result`` delivered, dead-letter what it rejected; True when some remain to retry."""
        with self._cond:
            if self._abandoned:  # shutdown already dead-lettered this batch: count nothing twice
                return False
            self.stats.successes += len(pending) - len(result.failed) - len(result.rejected)
            self._inflight = list(result.failed)
            self._settle_lost(result.rejected, result.error)
            if result.failed:
                self._health.failed(result.error)
            elif len(result.rejected) < len(pending):
                self._health.delivered()
            return bool(result.failed)

    def _retry_wait(self, result: SinkResult, attempt: int) -> float | str:
        """When (monotonic) to retry ``result.failed``, or why not to."""
        now = time.monotonic()
        retry_after = result.retry_after_s
        if retry_after is not None:
            with self._cond:  # holds back every later batch too, not only this retry
                self._not_before = max(self._not_before, now + retry_after)
            if retry_after > self._retry.max_retry_after_s:
                return (
                    f"{result.error}; Retry-After {retry_after:.0f} s exceeds max_retry_after_s "
                    f"({self._retry.max_retry_after_s:.0f} s)"
                )
        if attempt >= self._retry.max_retries:
            return result.error or "retries exhausted"
        return max(now + self._retry.delay(attempt), self._not_before)

    def _hold_off(self) -> str | None:
        """Wait out a ``Retry-After`` still in force; return why the batch must be dead-lettered instead, if so."""
        left = self._not_before - time.monotonic()
        if left > self._retry.max_retry_after_s:
            # Sending would ignore what the backend asked; holding every score that long would stall the queue.
            return f"the backend asked not to be called for {left:.0f} s more (Retry-After)"
        if not self._wait_until(self._not_before):
            return "the backend's Retry-After ends after the shutdown deadline"
        return None

    def _export(self, batch: Sequence[Score]) -> SinkResult:
        try:
            return self.sink.export(batch)
        except Exception as exc:  # a sink is not supposed to raise; treat it as a transient failure
            self._internal_error(f"exporting scores to {self.sink.name}")
            return SinkResult(failed=tuple(batch), error=f"{type(exc).__name__}: {exc}")

    def _wait_until(self, end: float) -> bool:
        """Sleep until ``end`` (monotonic); False, at once, if shutdown's deadline comes first."""
        with self._cond:
            while True:
                if self._abandoned or end > self._deadline:
                    return False
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return True
                self._cond.wait(remaining)  # shutdown notifies: its deadline may rule the wait out

    def _give_up(self, error: str | None, *, in_flight: bool = False) -> None:
        """Dead-letter the batch in flight, unless shutdown already took it.

        ``in_flight``: its last request was cut by the shutdown deadline; counted ``abandoned`` like a batch that
        shutdown takes from a hung request, so the count does not depend on which of the two settles it first.
        """
        with self._cond:
            if self._abandoned:
                return
            lost, self._inflight = self._inflight, []
            if in_flight:
                self.stats.abandoned += len(lost)
            self._settle_lost(lost, error)

    def _settle_lost(self, scores: Sequence[Score], error: str | None) -> None:
        """Dead-letter (or drop and count) ``scores``; called with the lock held, so each is settled once."""
        if not scores:
            return
        self._health.lost(len(scores), error)
        if self._dead_letter_path is None:
            self.stats.dropped += len(scores)
            return
        try:
            saved = save_dead_letters(self._dead_letter_path, self.sink.name, scores, error)
        except Exception as exc:  # not only OSError: a raise here would leave the scores counted nowhere
            self.stats.dropped += len(scores)
            self.stats.internal_errors += 1
            self._dead_letter_failing.failed(exc=exc)
            return
        self.stats.dead_lettered += saved.written
        if not saved.refused:
            self._dead_letter_failing.ok()
            return
        # Each score is encoded on its own: only those the encoder refused are lost, counted (one error per write).
        self.stats.dropped += len(saved.refused)
        self.stats.internal_errors += 1
        detail = f": {len(saved.refused)} score(s) the encoder refused, dropped (first: {saved.refused[0][1]})"
        self._dead_letter_failing.failed(detail, exc=saved.first_error)
