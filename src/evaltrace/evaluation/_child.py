"""The evaluation process's main function: map span records to a Trace, run the evaluators, send the results.

Started by :class:`~evaltrace.evaluation._process.ProcessEngine` with ``multiprocessing``'s spawn method (a fresh
interpreter: nothing of the application's threads, locks or tracer provider is inherited). A reader thread takes
requests off the bounded queue; the main thread runs an event loop on which each request is a task, so a slow
judge does not hold up the others. Sync evaluators run on a daemon thread pool (``inline`` ones on the loop),
async ones on the loop. Results go back through a pipe as ``EvaluationResult`` objects.

Request: ``(job_id, evaluators, records, resources, root_index)`` with ``evaluators`` a tuple of
``(reference, timeout_s, max_retries, retry_backoff_s, inline)``; ``None`` asks the child to finish what it
has and exit. Reply: ``(job_id, results, query, final_answer, retries, error)``: ``results`` is None and
``error`` says why when the job could not be evaluated at all (an evaluator that cannot be imported, say).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import threading
from multiprocessing.connection import Connection
from typing import Any

CHILD_NAME = "evaltrace-evaluation"
_POLL_S = 1.0


def in_evaluation_child() -> bool:
    """True in the evaluation process (set before the application's main module is re-imported there)."""
    return multiprocessing.current_process().name == CHILD_NAME


class _Child:
    def __init__(self, results: Connection, sync_workers: int) -> None:
        from evaltrace._internal.daemon_pool import DaemonExecutor

        self.results = results
        self.loop = asyncio.new_event_loop()
        self.pool = DaemonExecutor(sync_workers, thread_name_prefix="evaltrace-child-eval")
        self.evaluators: dict[str, Any] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.stopping = False

    def start(self, item: Any) -> None:
        if item is None:
            self.stopping = True
            self._maybe_stop()
            return
        task = self.loop.create_task(self.run(item))
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self._maybe_stop()

    def _maybe_stop(self) -> None:
        if self.stopping and not self.tasks:
            self.loop.stop()

    def _evaluator(self, reference: str) -> Any:
        from evaltrace.evaluation._shipping import resolve_reference

        found = self.evaluators.get(reference)
        if found is None:
            found = self.evaluators[reference] = resolve_reference(reference)
        return found

    async def run(self, item: Any) -> None:
        from evaltrace.evaluation._mapping import build_trace
        from evaltrace.evaluation._records import from_records
        from evaltrace.evaluation.runner import RunOptions, arun_evaluator

        job_id, refs, records, resources, root_index = item
        retries = [0]

        def count_retry() -> None:
            retries[0] += 1

        try:
            evaluators = [self._evaluator(ref[0]) for ref in refs]
            spans = from_records(records, resources)
            trace = build_trace(spans, spans[root_index])
            runs = [
                arun_evaluator(
                    evaluator,
                    trace,
                    None,
                    options=RunOptions(timeout_s=timeout, max_retries=max_retries, initial_backoff_s=backoff),
                    executor=None if inline else self.pool,
                    on_retry=count_retry,
                )
                for evaluator, (_, timeout, max_retries, backoff, inline) in zip(evaluators, refs, strict=True)
            ]
            results = await asyncio.gather(*runs)
            raw = trace.input.get("input")
            query = raw if isinstance(raw, str) else str(trace.input or "")
            reply: tuple[Any, ...] = (job_id, results, query, trace.output.final_answer, retries[0], None)
        except Exception as exc:
            reply = (job_id, None, "", None, retries[0], f"{type(exc).__name__}: {exc}")
        try:
            self.results.send(reply)
        except OSError:  # the application is gone: nobody reads answers any more
            self.stopping = True
            self.loop.stop()


def child_main(requests: Any, results: Connection, sync_workers: int) -> None:
    """Entry point of the evaluation process (runs until it gets ``None`` or its parent is gone)."""
    child = _Child(results, sync_workers)
    parent = multiprocessing.parent_process()

    def feed() -> None:
        while True:
            try:
                item = requests.get(timeout=_POLL_S)
            except queue.Empty:
                if parent is not None and not parent.is_alive():  # orphaned: nobody reads the results
                    item = None
                else:
                    continue
            except (EOFError, OSError):
                item = None
            child.loop.call_soon_threadsafe(child.start, item)
            if item is None:
                return

    threading.Thread(target=feed, name="evaltrace-child-feed", daemon=True).start()
    try:
        child.loop.run_forever()
    finally:
        child.pool.shutdown(wait=False, cancel_futures=True)
        results.close()
