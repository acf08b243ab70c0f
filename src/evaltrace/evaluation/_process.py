"""The evaluation process engine (``configure(evaluation="process")``): evaluators run in a child process.

The parent keeps everything that touches spans and outputs (admission, the hold rule, enriched copies,
evaluation spans, scores to sinks, metrics, log events): see ``_jobs``. Per job it sends the evaluated span's
subtree as compact records (``_records``) and the evaluators as import references (``_shipping``) through a
bounded queue; the child (``_child``) maps the records to a Trace, runs the evaluators and sends the results
back through a pipe, where a reader thread hands them to the jobs waiting on the parent's loop.

The child can die (killed, out of memory, a crashing extension): the reader sees its sentinel, every job in
flight is answered "not evaluated" (skip reason ``engine_unavailable``, counted), and the next job starts a
new child after a back-off (0.5 s, doubling to 30 s, reset by the first answer). Until then jobs are answered
the same way at once, so nothing waits on a child that is not there. The child is a daemon process: it is
stopped at the application's exit, and it exits on its own when the application is gone.

A child that is alive but never answers (an evaluator blocking its loop) or an answer lost on the way must not
hold a span for ever: each job has a deadline (its slowest evaluator's timeout times its attempts, the
retries' back-off, plus a margin) after which it is answered ``engine_unavailable`` (counted ``timed_out_jobs``).
An ``os.fork()`` child of the application keeps its hands off the parent's evaluation process: it is taken out
of ``multiprocessing``'s children, whose exit hook would otherwise terminate it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing.process
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import forks, settings
from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation._child import CHILD_NAME, child_main, in_evaluation_child
from evaltrace.evaluation._judge_spans import Shipment, rebuild, resource_attributes
from evaltrace.evaluation._records import to_records
from evaltrace.evaluation._shipping import Reference
from evaltrace.schema import EvaluationResult

logger = logging.getLogger("evaltrace.evaluation")

# (reference, timeout_s, max_retries, retry_backoff_s, inline): what the child needs to run one evaluator.
EvaluatorRef = tuple[Reference, float | None, int, float, bool]


class EngineUnavailable(Exception):
    """The child process could not take or finish the job; the message is the skip reason's detail."""


@dataclass(frozen=True)
class RemoteOutcome:
    """The child's answer to one job: results in the order of the evaluators sent, and what the monitor needs."""

    results: list[EvaluationResult | str]
    """Per evaluator sent: its result, or a skip reason (``not_shippable``) when the child could not find it."""
    query: str
    final_answer: str | None
    retries: int


@dataclass
class ProcessStats:
    """Counters of the evaluation process (``stats()["process"]``)."""

    started: int = 0
    crashes: int = 0
    lost_jobs: int = 0
    refused_jobs: int = 0
    sent: int = 0
    answered: int = 0
    failed_jobs: int = 0
    timed_out_jobs: int = 0
    not_shippable: int = 0
    judge_spans: int = 0
    """Spans of judge calls made in the evaluation process, handed to the exporters here."""
    judge_spans_dropped: int = 0
    """Judge spans the evaluation process could not keep or send (too many at once, or not picklable)."""


class ProcessEngine:
    """Run evaluations in a spawned child process; see the module docstring.

    Args:
        max_queue: Requests queued for the child at once (the processor's ``max_queue_size``).
        sync_workers: Threads for sync evaluators in the child.
        backoff_s: First wait before restarting a child that died (doubled per death, up to ``max_backoff_s``).
        max_backoff_s: Longest wait between restarts.
        answer_margin_s: Added to a job's own time bound (timeouts, retries) for its deadline: the time it may
            wait in the child's queue and travel both ways.
        on_spans: Takes the judge calls' spans made in the child, as ended spans (None: they are dropped,
            counted).
    """

    def __init__(
        self,
        max_queue: int,
        sync_workers: int,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        answer_margin_s: float = 10.0,
        on_spans: Callable[[Sequence[ReadableSpan]], None] | None = None,
    ) -> None:
        self._answer_margin_s = answer_margin_s
        self._on_spans = on_spans
        self._unshippable: set[Reference] = set()  # references warned about once
        self._ctx = get_context("spawn")
        self._max_queue = max_queue
        self._sync_workers = sync_workers
        self._initial_backoff = backoff_s
        self._max_backoff = max_backoff_s
        self._backoff = backoff_s
        self._down_until = 0.0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
        self._process: Any = None
        self._requests: Any = None
        # In the evaluation process itself (the application's main module re-imported there called configure()):
        # never a grandchild; jobs are answered "not evaluated".
        self._stopped = in_evaluation_child()
        self.stats = ProcessStats()
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        """In a child forked from the application: the parent's evaluation process is the parent's; start anew."""
        if self._process is not None:
            # multiprocessing's exit hook terminates the daemon processes it knows of: in this child that would be
            # the parent's evaluation process. The inherited queue stays as inert memory (its feeder thread and
            # finalizers belong to the parent).
            multiprocessing.process._children.discard(self._process)  # type: ignore[attr-defined]
            forks.keep_inherited(self._process)
            forks.keep_inherited(self._requests)
        self._lock = threading.Lock()
        self._pending = {}
        self._process = self._requests = None
        self._down_until = 0.0
        self.stats = ProcessStats()

    # --- the child ------------------------------------------------------------------------------------------

    def _ensure_child(self) -> bool:
        """Under the lock: a live child (started now if due), or False while it is down or stopped."""
        if self._stopped:
            return False
        if self._process is not None:
            return True
        if time.monotonic() < self._down_until:
            return False
        requests = self._ctx.Queue(self._max_queue)
        requests.cancel_join_thread()  # at exit, never wait on a child that stopped reading
        receive, send = self._ctx.Pipe(duplex=False)
        # The application's capture settings and resource: judge calls in the child are traced as they are here.
        args = (requests, send, self._sync_workers, settings.current, resource_attributes())
        process = self._ctx.Process(target=child_main, args=args, name=CHILD_NAME, daemon=True)
        try:
            process.start()
        except Exception:
            log_internal_error("starting the evaluation process")
            self._mark_down()
            return False
        finally:
            send.close()  # the child holds the write end; EOF on ours means it is gone
        self._process, self._requests = process, requests
        self.stats.started += 1
        threading.Thread(
            target=self._read, args=(process, receive), name="evaltrace-eval-process-reader", daemon=True
        ).start()
        return True

    def _mark_down(self) -> None:
        self._down_until = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self._max_backoff)

    def _read(self, process: Any, receive: Connection) -> None:
        """Reader thread of one child: hand answers to their jobs; on the child's end, fail what is in flight."""
        try:
            while True:
                ready = wait([receive, process.sentinel])
                if receive in ready:
                    try:
                        self._answer(receive.recv())
                        continue
                    except (EOFError, OSError):
                        pass
                elif receive.poll():  # answers sent just before the child ended come first
                    continue
                break
        except Exception:
            log_internal_error("reading answers from the evaluation process")
        finally:
            receive.close()
            self._child_ended(process)

    def _answer(self, reply: tuple[Any, ...]) -> None:
        job_id, results, query, answer, retries, error, spans = reply
        if spans is not None:
            self._export(spans)
        if job_id is None:  # the child's last judge spans, with no job
            return
        with self._lock:
            waiter = self._pending.pop(job_id, None)
            self.stats.answered += 1
            self._backoff = self._initial_backoff  # a working child resets the restart back-off
            if results is None:
                self.stats.failed_jobs += 1
        if waiter is None:
            return
        outcome: Any = RemoteOutcome(results, query, answer, retries) if results is not None else None
        if outcome is None:
            logger.warning("evaltrace: the evaluation process could not evaluate a span: %s", error)
            _resolve(waiter, exc=EngineUnavailable(str(error)))
        else:
            _resolve(waiter, result=outcome)

    def _export(self, shipment: Shipment) -> None:
        """Hand the judge spans of one answer to ``on_spans`` (counted; never raises into the reader)."""
        dropped = shipment[3]
        try:
            spans = rebuild(shipment)
            if self._on_spans is None:
                dropped += len(spans)
            else:
                self._on_spans(spans)
        except Exception:
            log_internal_error("exporting judge spans from the evaluation process")
            dropped += len(shipment[0])
            spans = []
        with self._lock:
            self.stats.judge_spans += len(spans) if self._on_spans is not None else 0
            self.stats.judge_spans_dropped += dropped
        if dropped:
            logger.warning("evaltrace: %d judge span(s) from the evaluation process were dropped", dropped)

    def _child_ended(self, process: Any) -> None:
        with self._lock:
            if self._process is not process:
                return
            self._process = self._requests = None
            lost, self._pending = self._pending, {}
            if not self._stopped:
                self.stats.crashes += 1
                self.stats.lost_jobs += len(lost)
                self._mark_down()
        if lost and not self._stopped:
            logger.warning(
                "evaltrace: the evaluation process ended (exit code %s); %d span(s) go out not evaluated; "
                "restarting it",
                process.exitcode,
                len(lost),
            )
        for waiter in lost.values():
            _resolve(waiter, exc=EngineUnavailable("the evaluation process ended"))

    # --- jobs -----------------------------------------------------------------------------------------------

    async def evaluate(
        self, spans: Sequence[ReadableSpan], root: ReadableSpan, evaluators: Sequence[EvaluatorRef]
    ) -> RemoteOutcome:
        """Evaluate ``root``'s subtree (``spans``, root included) in the child.

        Raises:
            EngineUnavailable: The child is down, restarting, stopped or its queue is full, or it ended before
                answering.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        records, resources = to_records(spans)
        root_index = next((i for i, span in enumerate(spans) if span is root), 0)
        with self._lock:
            if not self._ensure_child():
                self.stats.refused_jobs += 1
                raise EngineUnavailable("the evaluation process is not running")
            job_id = next(self._ids)
            self._pending[job_id] = (loop, future)
            requests = self._requests
        try:
            requests.put_nowait((job_id, tuple(evaluators), records, resources, root_index))
        except (queue.Full, ValueError, OSError) as exc:  # ValueError: the queue was closed under us
            with self._lock:
                self._pending.pop(job_id, None)
                self.stats.refused_jobs += 1
            raise EngineUnavailable(
                f"the evaluation process's queue is full or closed ({type(exc).__name__})"
            ) from None
        with self._lock:
            self.stats.sent += 1
        deadline = self._deadline(evaluators)
        try:
            result: RemoteOutcome = await asyncio.wait_for(future, deadline)
        except TimeoutError:
            with self._lock:
                self._pending.pop(job_id, None)
                self.stats.timed_out_jobs += 1
            logger.warning("evaltrace: the evaluation process did not answer within %.1f s; not evaluated", deadline)
            raise EngineUnavailable(f"no answer from the evaluation process within {deadline:.1f} s") from None
        except asyncio.CancelledError:
            with self._lock:
                self._pending.pop(job_id, None)
            raise
        return self._checked(result, evaluators)

    def _deadline(self, evaluators: Sequence[EvaluatorRef]) -> float | None:
        """The longest a job may take in the child: its slowest evaluator's attempts and back-offs, plus the margin."""
        bound = 0.0
        for _, timeout_s, max_retries, backoff_s, _ in evaluators:
            if timeout_s is None:  # no timeout: nothing bounds the evaluator, so nothing bounds the job
                return None
            attempts = max_retries + 1
            bound = max(bound, timeout_s * attempts + backoff_s * (2**max_retries - 1))
        return bound + self._answer_margin_s

    def _checked(self, outcome: RemoteOutcome, evaluators: Sequence[EvaluatorRef]) -> RemoteOutcome:
        """Skip reasons for the evaluators the child could not find (warned once per reference)."""
        results: list[EvaluationResult | str] = []
        raw: list[Any] = list(outcome.results)  # the child's ``(skip_reason, detail)`` pairs become reasons here
        for result, ref in zip(raw, evaluators, strict=False):
            if isinstance(result, EvaluationResult):
                results.append(result)
                continue
            reason, detail = result
            with self._lock:
                self.stats.not_shippable += 1
                first = ref[0] not in self._unshippable
                self._unshippable.add(ref[0])
            if first:
                logger.warning(
                    "evaltrace: the evaluation process cannot find evaluator %s; not evaluated (skip reason %s)",
                    detail,
                    reason,
                )
            results.append(str(reason))
        return RemoteOutcome(results, outcome.query, outcome.final_answer, outcome.retries)

    def in_flight(self) -> int:
        """Jobs sent and not answered yet."""
        return len(self._pending)

    def alive(self) -> bool:
        """True while a child process runs."""
        process = self._process
        return process is not None and process.is_alive()

    def kill_for_tests(self) -> int | None:
        """Kill the child (SIGKILL) and return its pid; the engine must recover as from any other death."""
        process = self._process
        if process is None:
            return None
        process.kill()
        return int(process.pid)

    def stop(self, timeout_s: float) -> None:
        """Ask the child to finish and exit; kill it after ``timeout_s``. Jobs still in flight are not evaluated."""
        with self._lock:
            self._stopped = True
            process, requests = self._process, self._requests
        if process is None:
            return
        try:
            requests.put(None, timeout=max(0.01, timeout_s))
        except Exception:
            pass
        process.join(timeout_s)
        if process.is_alive():
            process.kill()
            process.join(1.0)
        self._child_ended(process)


def _resolve(
    waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]],
    *,
    result: Any = None,
    exc: BaseException | None = None,
) -> None:
    loop, future = waiter

    def settle() -> None:
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the parent's loop is closed (shutdown): nobody waits any more
        pass
