"""The evaluation process's main function: map span records to a Trace, run the evaluators, send the results.

Started by :class:`~evaltrace.evaluation._process.ProcessEngine` with ``multiprocessing``'s spawn method (a fresh
interpreter: nothing of the application's threads, locks or tracer provider is inherited). A reader thread takes
requests off the bounded queue; the main thread runs an event loop on which each request is a task, so a slow
judge does not hold up the others. Sync evaluators run on a daemon thread pool (``inline`` ones on the loop),
async ones on the loop. Results go back through a pipe as ``EvaluationResult`` objects.

Request: ``(job_id, evaluators, records, resources, root_index)`` with ``evaluators`` a tuple of
``(reference, timeout_s, max_retries, retry_backoff_s, inline)``; ``None`` asks the child to finish what it
has and exit. Reply: ``(job_id, results, query, final_answer, retries, error, judge_spans)``: per evaluator an
``EvaluationResult`` or ``(skip_reason, detail)`` when its reference cannot be resolved here (skip reason
``not_shippable``); ``results`` is None and ``error`` says why when the job could not be evaluated at all.
A result that cannot be pickled is replaced by an error result naming the evaluator, so every job is answered.
``judge_spans`` carries the judge calls' spans that ended here since the last reply (see ``_judge_spans``), or
None; a last reply with ``job_id`` None carries those still held when the process stops.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
import queue
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

CHILD_NAME = "evaltrace-evaluation"
_POLL_S = 1.0


def in_evaluation_child() -> bool:
    """True in the evaluation process (set before the application's main module is re-imported there)."""
    return multiprocessing.current_process().name == CHILD_NAME


class _Child:
    def __init__(self, results: Connection, sync_workers: int, collector: Any = None) -> None:
        from evaltrace._internal.daemon_pool import DaemonExecutor

        self.results = results
        self.collector = collector  # the judge spans' Collector (None: judge calls are not traced)
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

    def _evaluator(self, reference: Any) -> Any:
        """The evaluator ``reference`` names, or why it cannot be found here (cached either way)."""
        from evaltrace._internal import semconv
        from evaltrace.evaluation._shipping import resolve_reference

        found = self.evaluators.get(reference)
        if found is None:
            try:
                found = resolve_reference(reference)
            except Exception as exc:  # an import error or a registration not found: this evaluator only
                found = _Unresolved(semconv.SKIP_NOT_SHIPPABLE, f"{reference!r}: {type(exc).__name__}: {exc}")
            self.evaluators[reference] = found
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
                _unresolved(evaluator)
                if isinstance(evaluator, _Unresolved)
                else arun_evaluator(
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
            reply: tuple[Any, ...] = (job_id, results, query, trace.output.final_answer, retries[0], None, None)
        except BaseException as exc:  # every job is answered, or its span waits in the parent until the deadline
            reply = (job_id, None, "", None, retries[0], f"{type(exc).__name__}: {exc}", None)
            if not isinstance(exc, Exception):
                self._send(reply)
                raise
        self._send(reply)

    def _send(self, reply: tuple[Any, ...]) -> None:
        if self.collector is not None:  # the judge calls' spans travel with the answers
            reply = (*reply[:6], self.collector.take())
        try:
            self.results.send(reply)
            return
        except OSError:  # the application is gone: nobody reads answers any more
            self._stop_now()
            return
        except Exception:  # pickling failed before anything was written: the pipe is intact
            reply = _picklable(reply)
        try:
            self.results.send(reply)
        except Exception:
            self._stop_now()

    def _stop_now(self) -> None:
        self.stopping = True
        self.loop.stop()


@dataclass(frozen=True)
class _Unresolved:
    """An evaluator whose reference could not be resolved in this process: its skip reason and why."""

    reason: str
    detail: str


async def _unresolved(found: _Unresolved) -> tuple[str, str]:
    return (found.reason, found.detail)


def _picklable(reply: tuple[Any, ...]) -> tuple[Any, ...]:
    """``reply`` with each result that cannot be pickled replaced by an error result naming its evaluator."""
    from types import SimpleNamespace

    from evaltrace.evaluation.runner import failed_result

    job_id, results, query, answer, retries, error, spans = reply
    try:
        pickle.dumps(spans)
    except Exception:  # a span attribute no pickle takes: the spans are dropped, and counted as such
        spans = ([], [], [], len(spans[0]) + spans[3]) if spans is not None else None
    if results is None:
        return (job_id, None, "", None, retries, str(error), spans)
    fixed = []
    for result in results:
        try:
            pickle.dumps(result)
            fixed.append(result)
        except Exception as exc:
            name = str(getattr(result, "evaluator", None) or "?")
            message = (
                f"the result of evaluator {name!r} cannot be sent back from the evaluation process "
                f"({type(exc).__name__}: {exc}); keep its detail/metadata to plain data"
            )
            named = SimpleNamespace(name=name, version=getattr(result, "evaluator_version", None))
            fixed.append(failed_result(named, "UnpicklableResult", message))
    try:
        pickle.dumps((query, answer))
    except Exception:
        query, answer = str(query), None if answer is None else str(answer)
    return (job_id, fixed, query, answer, retries, None, spans)


def child_main(
    requests: Any,
    results: Connection,
    sync_workers: int,
    capture: Any = None,
    resource: dict[str, Any] | None = None,
) -> None:
    """Entry point of the evaluation process (runs until it gets ``None`` or its parent is gone).

    ``capture`` is the application's ``CaptureSettings`` (content capture, caps, judge tracing) and ``resource``
    its resource's attributes, which the judge calls traced here are made with.
    """
    collector = None
    if capture is not None:
        from evaltrace._internal import settings

        settings.replace(capture)
        if capture.trace_judges:
            from evaltrace.evaluation._judge_spans import install

            collector = install(resource)
    child = _Child(results, sync_workers, collector)
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
        if collector is not None and (held := collector.take()) is not None:
            try:  # the last judge spans, with no job left to carry them
                results.send((None, None, "", None, 0, None, held))
            except Exception:
                pass  # the parent is gone: nobody would export them
        results.close()
