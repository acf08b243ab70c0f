"""Async evaluators of an offline run: each on its own event loop, kept for the run, replaced when it blocks."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Iterator

import pytest

from evaltrace.runner.evaluate import ConfiguredEvaluator, evaluate_traces
from evaltrace.schema import EvalCase, EvaluationResult, Trace

T0 = dt.datetime(2026, 5, 3, 10, 30, tzinfo=dt.UTC)
TRACES = [Trace(run_id="r", case_id=f"c{i}", variant_name="v", started_at=T0, finished_at=T0) for i in range(1, 5)]


class BlocksOnFirstCase:
    """Blocks its event loop (a sync wait inside ``async def``) on c1; answers at once otherwise."""

    name = "blocks"
    version = None

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.loops: dict[str, int] = {}

    async def evaluate(self, trace: Trace, case: EvalCase | None) -> EvaluationResult:
        self.loops[trace.case_id] = id(asyncio.get_running_loop())
        if trace.case_id == "c1":
            self.release.wait(10)  # not awaitable: nothing else can run on this loop meanwhile
        await asyncio.sleep(0)
        return EvaluationResult(evaluator=self.name, passed=True)


class RemembersItsLoop:
    name = "steady"
    version = None

    def __init__(self) -> None:
        self.loops: set[int] = set()

    async def evaluate(self, trace: Trace, case: EvalCase | None) -> EvaluationResult:
        self.loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0)
        return EvaluationResult(evaluator=self.name, passed=True)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # lets the abandoned loop's thread finish


def test_a_blocked_loop_is_abandoned_and_the_evaluator_goes_on_on_a_new_one(release: threading.Event) -> None:
    blocking, steady = BlocksOnFirstCase(release), RemembersItsLoop()
    evaluators = [ConfiguredEvaluator(blocking, timeout_s=0.3), ConfiguredEvaluator(steady, timeout_s=0.3)]
    main_loops: set[int] = set()

    async def run() -> list[EvaluationResult]:
        main_loops.add(id(asyncio.get_running_loop()))
        return await evaluate_traces(TRACES, [], evaluators, concurrency=1)

    results = {(r.case_id, r.evaluator): r for r in asyncio.run(run())}
    first = results["c1", "blocks"]
    assert first.status == "failed" and first.error is not None and first.error.type == "timeout"
    # The cases after it ran on a fresh loop, not queued behind the blocked one.
    assert all(results[f"c{i}", "blocks"].status == "completed" for i in (2, 3, 4))
    assert blocking.loops["c2"] != blocking.loops["c1"] and len({blocking.loops[f"c{i}"] for i in (2, 3, 4)}) == 1
    # The other async evaluator kept one loop of its own for the whole run (its clients stay usable).
    assert all(results[f"c{i}", "steady"].passed for i in (1, 2, 3, 4))
    assert len(steady.loops) == 1 and not steady.loops & main_loops and not steady.loops & set(blocking.loops.values())
