"""Evaluators of an eval.yaml run over traces, with each crash kept in its cell.

Entries are built by :mod:`evaltrace.runner.evaluator_entries` (re-exported here). Each result carries its
configured name and, for catalogue evaluators, ``evaluator_type`` = the catalogue type, whatever the evaluator put
in it.

User evaluators cannot take the run down: sync ones run on a :class:`DaemonExecutor` of their own (daemon threads;
one stuck past its ``timeout_s`` is abandoned, never joined, and costs only its own evaluator's threads), async
ones on their own event loop (:mod:`evaltrace.runner._loops`, abandoned when blocked); ``SystemExit`` and
``KeyboardInterrupt`` raised by either become a failed result naming them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, cast

from evaltrace._internal.daemon_pool import DaemonExecutor
from evaltrace.evaluation import Evaluator, RunOptions, arun_evaluator
from evaltrace.evaluation.runner import is_async_evaluator, skipped_result
from evaltrace.runner._loops import OnOwnLoop
from evaltrace.runner.case_turns import case_conversation
from evaltrace.runner.evaluator_entries import ConfiguredEvaluator, build_evaluators
from evaltrace.schema import Conversation, EvalCase, EvaluationResult, RetryConfig, Trace

if TYPE_CHECKING:
    from evaltrace.runner.outcome import ProgressReporter

__all__ = ["ConfiguredEvaluator", "ResultKey", "build_evaluators", "evaluate_all", "evaluate_traces", "result_key"]


ResultKey = tuple[str, str, str]
"""(case id, variant name, evaluator name): one result each."""


def result_key(result: EvaluationResult) -> ResultKey:
    """The key of a result."""
    return (result.case_id, result.variant_name, result.evaluator)


def _labelled(result: EvaluationResult, item: ConfiguredEvaluator) -> EvaluationResult:
    """The result under its configured name and catalogue type."""
    updates: dict[str, Any] = {}
    if result.evaluator != item.name:
        updates["evaluator"] = item.name
    if item.evaluator_type is not None and result.evaluator_type != item.evaluator_type:
        updates["evaluator_type"] = item.evaluator_type
    return result.stamped(**updates) if updates else result


def _beyond_max_rows(trace: Trace, item: ConfiguredEvaluator, row: int | None) -> EvaluationResult:
    """The not-evaluated result of a case past the evaluator's ``max_dataset_rows`` (the evaluator is not called)."""
    where = f"row {row + 1} of the dataset" if row is not None else "a case not in the dataset"
    result = skipped_result(item.evaluator, f"skipped: max_dataset_rows {item.max_dataset_rows} reached ({where})")
    detail = {"skipped": "max_dataset_rows", "max_dataset_rows": item.max_dataset_rows}
    stamped = result.stamped(run_id=trace.run_id, case_id=trace.case_id, variant_name=trace.variant_name, detail=detail)
    return _labelled(stamped, item)


class _OnConversation:
    """A session-scope evaluator bound to one case's conversation.

    It is asked about the case trace (the result is stamped from it: run, case, variant) and judges the
    conversation instead.
    """

    def __init__(self, runner: Evaluator, conversation: Conversation) -> None:
        self._runner = runner
        self._conversation = conversation
        self.is_async = is_async_evaluator(runner)
        self.name = getattr(runner, "name", type(runner).__name__)
        self.version = getattr(runner, "version", None)

    def evaluate(self, trace: Trace, case: EvalCase | None = None) -> Any:
        return self._runner.evaluate(cast(Trace, self._conversation), case)

    def __getattr__(self, name: str) -> Any:  # threshold, direction, ...: the evaluator's own
        return getattr(self._runner, name)


def _session_labelled(result: EvaluationResult, conversation: Conversation) -> EvaluationResult:
    """A session-scope result names the session it judged (``metadata.session_id``, ``metadata.scope``)."""
    metadata = {**(result.metadata or {}), "session_id": conversation.session_id, "scope": "session"}
    return result.model_copy(update={"metadata": metadata})


class _Runners:
    """Where each evaluator runs: its own daemon pool (sync) or its own event loop (async)."""

    def __init__(self, evaluators: Sequence[ConfiguredEvaluator], concurrency: int) -> None:
        self.items: list[tuple[ConfiguredEvaluator, Evaluator, DaemonExecutor | None]] = []
        for item in evaluators:
            if is_async_evaluator(item.evaluator):
                self.items.append((item, OnOwnLoop(item.evaluator), None))
            else:
                pool = DaemonExecutor(max(1, concurrency), thread_name_prefix=f"evaltrace-eval-{item.name}")
                self.items.append((item, item.evaluator, pool))

    async def aclose(self) -> None:
        # Nothing is joined: a stuck evaluator's thread or loop is a daemon and never delays the exit. Async
        # evaluators' clients are closed on their own loops first, all at once, within CLOSE_WAIT_S in all.
        for _, _, pool in self.items:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        await asyncio.gather(*(runner.aclose() for _, runner, _ in self.items if isinstance(runner, OnOwnLoop)))


async def evaluate_traces(
    traces: Sequence[Trace],
    cases: Sequence[EvalCase],
    evaluators: Sequence[ConfiguredEvaluator],
    *,
    concurrency: int,
    on_done: Callable[[], None] | None = None,
    done: Collection[ResultKey] = (),
    on_result: Callable[[EvaluationResult], None] | None = None,
) -> list[EvaluationResult]:
    """Run every evaluator on every trace; one result per (trace, evaluator), in trace then evaluator order.

    A crashing, hanging, exiting or loop-blocking evaluator yields a ``failed`` result for its cell only. Each
    result carries its configured name and catalogue type, whatever the evaluator put in it.

    Args:
        traces: The traces (read from traces.jsonl).
        cases: The run's cases; a trace whose case is missing is evaluated with ``case=None``.
        evaluators: The evaluators.
        concurrency: How many evaluations run at once.
        on_done: Called after each trace's evaluations (progress).
        done: Keys of results that exist already (a resumed run): those evaluations are not run again.
        on_result: Called with each result as soon as it exists, on the event loop's thread (to persist it).

    Returns:
        The new results (those in ``done`` left out).
    """
    by_id = {c.id: c for c in cases}
    rows = {c.id: row for row, c in enumerate(cases)}
    limit = asyncio.Semaphore(concurrency)
    runners = _Runners(evaluators, concurrency)

    async def one(trace: Trace, item: ConfiguredEvaluator, runner: Evaluator, pool: Any) -> EvaluationResult:
        row = rows.get(trace.case_id)
        if item.max_dataset_rows is not None and (row is None or row >= item.max_dataset_rows):
            result = _beyond_max_rows(trace, item, row)
            if on_result is not None:
                on_result(result)
            return result
        async with limit:
            options = RunOptions(timeout_s=item.timeout_s)
            case = by_id.get(trace.case_id)
            conversation = case_conversation(trace) if item.scope == "session" else None
            if conversation is not None:
                runner = cast(Evaluator, _OnConversation(runner, conversation))
            result = await arun_evaluator(runner, trace, case, options=options, executor=pool)
        result = _labelled(result, item)
        if conversation is not None:
            result = _session_labelled(result, conversation)
        if on_result is not None:
            on_result(result)
        return result

    async def per_trace(trace: Trace) -> list[EvaluationResult]:
        todo = [
            (item, runner, pool)
            for item, runner, pool in runners.items
            if (trace.case_id, trace.variant_name, item.name) not in done
        ]
        results = await asyncio.gather(*(one(trace, *entry) for entry in todo))
        if on_done is not None:
            on_done()
        return list(results)

    try:
        nested = await asyncio.gather(*(per_trace(t) for t in traces))
    finally:
        await runners.aclose()
    return [result for group in nested for result in group]


async def evaluate_all(
    traces: list[Trace],
    cases: list[EvalCase],
    evaluators: list[ConfiguredEvaluator],
    concurrency: int,
    progress: ProgressReporter,
    done: set[ResultKey] | None = None,
    on_result: Callable[[EvaluationResult], None] | None = None,
    retry: RetryConfig | None = None,
) -> list[EvaluationResult]:
    """The evaluation stage of a run: every missing (trace, evaluator) result, then the failed ones again.

    ``retry`` (the ``evaluation:`` block's retry_config) runs only the failed evaluations again, after its backoff.
    """
    progress.start("evaluating", len(traces))
    results = await evaluate_traces(
        traces,
        cases,
        evaluators,
        concurrency=concurrency,
        on_done=progress.advance,
        done=done or set(),
        on_result=on_result,
    )
    for attempt in range(retry.max_retries if retry is not None else 0):
        assert retry is not None
        failed = {result_key(r) for r in results if r.status == "failed"}
        if not failed:
            break
        # The evaluation block's retry_config: only the failed evaluations run again, after the backoff.
        await asyncio.sleep(retry.initial_delay_ms / 1000 * retry.backoff_multiplier**attempt)
        keep = set(done or ()) | {key for r in results if (key := result_key(r)) not in failed}
        again = await evaluate_traces(
            traces, cases, evaluators, concurrency=concurrency, done=keep, on_result=on_result
        )
        redone = {result_key(r): r for r in again}
        results = [redone.get(result_key(r), r) for r in results]
    return results
