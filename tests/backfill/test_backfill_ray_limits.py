"""``evaluate --engine ray`` whose limiter fails: as the local backfill and live evaluation, only the evaluator
being checked is refused.

The backfill's ``limits_clock`` is pickled to the cluster's limits actor (a real :class:`GateState` with a real
``LimitGate``) on a real two-node Ray cluster on 127.0.0.1; it raises while a flag file exists, which a test
creates before the run or an evaluator creates on a Ray worker once it has its verdict (the actor, the tasks and
this process share the machine's file system, not their memory).
"""

from __future__ import annotations

import importlib
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

import evaltrace
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluation.limits import Limits
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.schema import Trace
from ray_cluster import two_node_cluster

from .backfill_evaluators import costly, has_answer, picky
from .stored import assert_consistent, build_store, evaluation_spans, stored_reason_keys, stored_reasons

# One worker runs every Ray module, one cluster at a time (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("ray")


class FlagClock:
    """Monotonic seconds that raise while ``flag`` exists (the limiter itself cannot decide); picklable.

    Each raise is logged as a line of ``flag.raised`` (read by the test: the actor is another process).
    """

    def __init__(self, flag: Path) -> None:
        self.flag = flag
        self.raised = flag.with_suffix(".raised")

    def __call__(self) -> float:
        if self.flag.exists():
            with self.raised.open("a", encoding="utf-8") as log:
                log.write("raised\n")
            raise OSError("clock source unavailable")
        return 1000.0

    def raises(self) -> int:
        """How many times it raised."""
        return len(self.raised.read_text().splitlines()) if self.raised.exists() else 0


class DriverOnlyClock:
    """A clock that works on the driver and cannot be loaded on the cluster: unpickling it imports a module the
    cluster's nodes do not have (as a clock defined in a module only the driver's machine holds)."""

    def __call__(self) -> float:
        return 1000.0

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return importlib.import_module, ("evaltrace_test_module_only_the_driver_has",)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, Any]]:
    with two_node_cluster() as running:
        yield running


def _evals(store: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(store / DB_NAME) as conn:
        return conn.execute("SELECT evaluator, outcome, count(*) FROM evals GROUP BY 1, 2 ORDER BY 1, 2").fetchall()


def _limits_unavailable(store: Path) -> int:
    with sqlite3.connect(store / DB_NAME) as conn:
        spans = conn.execute("SELECT data FROM spans").fetchall()
    return sum("limits_unavailable" in str(row[0]) for row in spans)


def test_a_limiter_that_fails_on_the_cluster_refuses_only_its_evaluator(
    cluster: tuple[Any, Any], tmp_path: Path
) -> None:
    """The Ray backfill finishes: ``costly`` is not evaluated (``limits_unavailable``) on each trace, never run
    unchecked; ``has_answer`` judges every trace; nothing is retried into an engine error."""
    store = tmp_path / "store"
    build_store(store, 3)
    flag = tmp_path / "clock-fails"
    flag.touch()
    spec = EvaluatorSpec(costly, limits=Limits(max_tokens_per_hour=10_000))
    report = evaltrace.evaluate_traces(
        [has_answer, spec], store=store, sinks=[], engine="ray", concurrency=2, limits_clock=FlagClock(flag)
    )
    assert report.stopped is None
    assert report.evaluations == 6
    assert report.outcomes == {"pass": 3, "not_evaluated": 3}
    assert _evals(store) == [("costly", "not_evaluated", 3), ("has_answer", "pass", 3)]
    assert _limits_unavailable(store) == 3


def test_the_ray_report_breaks_not_evaluated_down_by_reason_as_the_local_one(
    cluster: tuple[Any, Any], tmp_path: Path
) -> None:
    """The Ray tasks' answers are counted by reason on the driver: ``costly`` refused by the cluster's failing
    limiter on each trace, ``picky`` skipping the short answers; the breakdown is the local engine's for the same
    traces and evaluators, sums to ``not_evaluated``, and is what the store holds."""
    flag = tmp_path / "clock-fails"
    flag.touch()
    spec = EvaluatorSpec(costly, limits=Limits(max_tokens_per_hour=10_000))
    reports = {}
    for engine in ("local", "ray"):
        store = tmp_path / engine
        build_store(store, 4)  # traces 1 and 3 answer "ok"
        reports[engine] = evaltrace.evaluate_traces(
            [has_answer, picky, spec], store=store, sinks=[], engine=engine, concurrency=2, limits_clock=FlagClock(flag)
        )
        assert reports[engine].not_evaluated_by_evaluator == stored_reason_keys(store)
        assert stored_reasons(store)["picky"] == {"no reference answer": 2}  # the free text, on the spans
    on_ray = reports["ray"]
    assert (on_ray.stopped, on_ray.evaluations, on_ray.outcomes) == (None, 12, {"pass": 6, "not_evaluated": 6})
    assert on_ray.not_evaluated_by_evaluator == {
        "costly": {"limits_unavailable": 4},
        "picky": {"other": 2},  # free text: never a key; the store's span holds it
    }
    assert on_ray.not_evaluated_by_reason == {"limits_unavailable": 4, "other": 2}
    assert_consistent(on_ray)
    local = reports["local"]
    assert (local.outcomes, local.not_evaluated_by_reason, local.not_evaluated_by_evaluator) == (
        on_ray.outcomes,
        on_ray.not_evaluated_by_reason,
        on_ray.not_evaluated_by_evaluator,
    )


def test_a_verdict_stands_on_the_cluster_when_charging_its_spend_fails(
    cluster: tuple[Any, Any], tmp_path: Path
) -> None:
    """The clock fails once the judge has answered (on a Ray worker): the charge on the limits actor fails, the
    verdict and the other evaluator's are stored and counted."""
    store = tmp_path / "store"
    build_store(store, 1)
    flag = tmp_path / "clock-fails"

    @evaltrace.evaluator(name="costly")
    def breaks_the_clock(trace: Trace) -> Any:
        result = costly.evaluate(trace, None)
        flag.touch()  # after admission, before the charge
        return result

    spec = EvaluatorSpec(breaks_the_clock, limits=Limits(max_tokens_per_hour=10_000))
    clock = FlagClock(flag)
    report = evaltrace.evaluate_traces(
        [has_answer, spec], store=store, sinks=[], engine="ray", concurrency=1, limits_clock=clock
    )
    assert clock.raises() >= 1  # the charge, the last call on the limiter, did fail
    assert (report.stopped, report.evaluations, report.outcomes) == (None, 2, {"pass": 2})
    assert _evals(store) == [("costly", "pass", 1), ("has_answer", "pass", 1)]
    assert _limits_unavailable(store) == 0


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The ERROR lines the driver logged."""
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def test_a_limits_clock_that_raises_while_the_limits_actor_is_set_up_refuses_only_its_evaluator(
    cluster: tuple[Any, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A rate limit's token bucket used to read the clock when the limits actor made it: the actor failed to start
    and the backfill ended in ``RayEngineError`` after retries. Now, as on the local engine, the run finishes:
    ``costly`` (under a rate limit) is not evaluated (``limits_unavailable``) on every trace, ``has_answer`` judges
    every trace, all of it stored and counted. The driver logs the failure once (the actor's traceback), not once
    per trace or per task."""
    store = tmp_path / "store"
    build_store(store, 3)
    flag = tmp_path / "clock-fails"
    flag.touch()
    clock = FlagClock(flag)
    spec = EvaluatorSpec(costly, limits=Limits(evaluations_per_second=100, burst=100))
    with caplog.at_level(logging.INFO, logger="evaltrace"):
        report = evaltrace.evaluate_traces(
            [has_answer, spec], store=store, sinks=[], engine="ray", concurrency=2, limits_clock=clock
        )
    assert clock.raises() >= 3  # each admission of costly asked the clock, on the actor
    assert (report.stopped, report.evaluations, report.outcomes) == (None, 6, {"pass": 3, "not_evaluated": 3})
    assert _evals(store) == [("costly", "not_evaluated", 3), ("has_answer", "pass", 3)]
    assert _limits_unavailable(store) == 3
    refused = ("costly", "not_evaluated", "limits_unavailable", "UNSET")  # never an error status on the span
    assert [row for row in evaluation_spans(store) if row[0] == "costly"] == [refused] * 3
    (error,) = _errors(caplog)
    assert "evaluator 'costly' on the cluster's limits actor" in error
    assert "OSError: clock source unavailable" in error


def test_limits_the_cluster_cannot_set_up_refuse_only_their_evaluator_without_an_engine_error(
    cluster: tuple[Any, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The limits actor cannot load the backfill's ``limits_clock`` (before: the actor failed to start and every
    task was retried into ``RayEngineError``). The run finishes: ``costly`` (under a limit) is not evaluated
    (``limits_unavailable``) on every trace, ``has_answer`` (under none) judges every trace, all stored. The driver
    logs why once, and the refusal once, not once per trace."""
    store = tmp_path / "store"
    build_store(store, 3)
    spec = EvaluatorSpec(costly, limits=Limits(max_tokens_per_hour=10_000))
    with caplog.at_level(logging.INFO, logger="evaltrace"):
        report = evaltrace.evaluate_traces(
            [has_answer, spec], store=store, sinks=[], engine="ray", concurrency=2, limits_clock=DriverOnlyClock()
        )
    assert (report.stopped, report.evaluations, report.outcomes) == (None, 6, {"pass": 3, "not_evaluated": 3})
    assert _evals(store) == [("costly", "not_evaluated", 3), ("has_answer", "pass", 3)]
    assert _limits_unavailable(store) == 3
    unjudged = ("costly", "not_evaluated", "limits_unavailable", "UNSET")  # never an error status on the span
    assert [row for row in evaluation_spans(store) if row[0] == "costly"] == [unjudged] * 3
    set_up, refused = _errors(caplog)
    assert "setting up the backfill's limits on the cluster's limits actor" in set_up
    assert "No module named 'evaltrace_test_module_only_the_driver_has'" in set_up
    assert "evaluator 'costly'" in refused and "could not be set up on the cluster" in refused


def test_the_limits_actor_keeps_one_error_per_episode_and_the_line_that_ends_it_for_the_driver(
    tmp_path: Path,
) -> None:
    """The actor's body (a real ``GateState``, here in-process): a limiter failing on every admission keeps one
    ERROR line (with the traceback) for the episode, every admission still raising (each one refused by its task);
    the admission that works again keeps the INFO line with the count; a new failure starts a new episode."""
    import ray

    from evaltrace.backfill.ray_judging import GateState

    flag = tmp_path / "clock-fails"
    flag.touch()
    state = GateState(
        None,
        {"costly": Limits(evaluations_per_second=100, burst=100, max_tokens_per_hour=10_000)},
        ray.cloudpickle.dumps(FlagClock(flag)),
    )
    for _ in range(3):
        with pytest.raises(OSError, match="clock source unavailable"):
            state.admit("costly")
    assert state.admit("has_answer") is None  # under no limit: never asks the clock
    (error,) = state.log_lines()
    assert error[0] == logging.ERROR and "evaluator 'costly'" in error[1] and "OSError: clock source" in error[1]
    flag.unlink()
    assert (state.admit("costly"), state.admit("costly")) == (None, None)
    assert state.log_lines() == [
        (
            logging.INFO,
            "evaltrace: checking or charging the rate limits and budgets of evaluator 'costly' on the cluster's"
            " limits actor works again after 3 internal error(s)",
        )
    ]
    flag.touch()
    with pytest.raises(OSError):
        state.charge("costly", 100, 0.001)
    assert [level for level, _ in state.log_lines()] == [logging.ERROR]


def test_a_failed_set_up_on_the_actor_refuses_only_evaluators_under_a_rate_or_budget(tmp_path: Path) -> None:
    """A clock the actor cannot load refuses the evaluators whose limits read it (a rate, a budget window, or a
    global one of those); one under a concurrency cap alone is admitted, as the local engine admits it (a cap is
    Ray's lease bookkeeping on the real clock)."""
    import ray

    from evaltrace.backfill.ray_judging import GateState, LimitsUnavailable

    unloadable = ray.cloudpickle.dumps(FlagClock(tmp_path / "flag"))[:-3]  # truncated: cannot be unpickled
    state = GateState(
        None,
        {
            "capped": Limits(max_concurrent=1),
            "rated": Limits(evaluations_per_second=5),
            "costly": Limits(max_usd_per_day=1.0),
        },
        unloadable,
    )
    assert state.admit("capped") is None
    assert state.acquire("capped", 60) is not None and state.acquire("capped", 60) is None  # its cap still holds
    for name in ("rated", "costly"):
        with pytest.raises(LimitsUnavailable, match=name):
            state.admit(name)
    under_global = GateState(Limits(evaluations_per_second=5), {"capped": Limits(max_concurrent=1)}, unloadable)
    with pytest.raises(LimitsUnavailable):
        under_global.admit("capped")
