"""A backfill whose limiter fails: as live evaluation, only the evaluator being checked is refused.

The backfill's real :class:`~evaltrace.evaluation.limits.LimitGate` is given a clock that raises (its
``limits_clock`` option failing), then the real backfill judges real stored traces into the real local store.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import evaltrace
from evaltrace.evaluation import EvaluatorSpec
from evaltrace.evaluation.limits import Limits
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.schema import EvaluationResult, Trace

from .backfill_evaluators import has_answer
from .stored import build_store, evaluation_spans


class FailingClock:
    """Monotonic seconds that raise while ``failing`` (the limiter itself cannot decide)."""

    def __init__(self, failing: bool) -> None:
        self.failing = failing
        self.now = 1000.0

    def __call__(self) -> float:
        if self.failing:
            raise OSError("clock source unavailable")
        return self.now


@pytest.fixture
def clock() -> FailingClock:
    """The backfill's ``limits_clock``, healthy until a test says otherwise."""
    return FailingClock(failing=False)


def _evals(store: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(store / DB_NAME) as conn:
        return conn.execute("SELECT evaluator, outcome, count(*) FROM evals GROUP BY 1, 2 ORDER BY 1, 2").fetchall()


@evaltrace.evaluator(name="budgeted")
def budgeted(trace: Trace) -> Any:
    """Pass, reporting a judge call of 100 tokens."""
    judge = {"model": "gpt-4o-mini", "input_tokens": 90, "output_tokens": 10, "cost_usd": 0.001}
    return EvaluationResult(evaluator="budgeted", passed=True, detail={"judge": judge})


def test_a_limiter_that_fails_refuses_only_its_evaluator_in_a_backfill(
    tmp_path: Path, clock: FailingClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The backfill finishes: ``budgeted`` is not evaluated (``limits_unavailable``), ``has_answer`` judges each trace.

    Never run unchecked (its budget could be overspent), never lost uncounted, and the run is not aborted; the
    failure is logged once (one episode), not once per trace.
    """
    store = tmp_path / "store"
    build_store(store, 3)
    clock.failing = True
    spec = EvaluatorSpec(budgeted, limits=Limits(max_tokens_per_hour=10_000))
    with caplog.at_level(logging.INFO, logger="evaltrace"):
        report = evaltrace.evaluate_traces([has_answer, spec], store=store, sinks=[], concurrency=2, limits_clock=clock)
    assert report.stopped is None
    assert report.evaluations == 6
    assert report.outcomes == {"pass": 3, "not_evaluated": 3}
    assert _evals(store) == [("budgeted", "not_evaluated", 3), ("has_answer", "pass", 3)]
    with sqlite3.connect(store / DB_NAME) as conn:
        spans = conn.execute("SELECT data FROM spans").fetchall()
    assert sum("limits_unavailable" in str(row[0]) for row in spans) == 3
    failures = [r for r in caplog.records if r.levelno == logging.ERROR and "budgeted" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None


def test_a_backfill_verdict_stands_when_charging_its_spend_fails(tmp_path: Path, clock: FailingClock) -> None:
    """The clock fails once the judge has answered: the charge fails, the verdict and the other one are stored."""

    @evaltrace.evaluator(name="budgeted")
    def breaks_the_clock(trace: Trace) -> Any:
        result = budgeted.evaluate(trace, None)
        clock.failing = True  # after admission, before the charge
        return result

    store = tmp_path / "store"
    build_store(store, 1)
    spec = EvaluatorSpec(breaks_the_clock, limits=Limits(max_tokens_per_hour=10_000), inline=True)
    report = evaltrace.evaluate_traces([has_answer, spec], store=store, sinks=[], concurrency=1, limits_clock=clock)
    assert clock.failing
    assert (report.stopped, report.evaluations, report.outcomes) == (None, 2, {"pass": 2})
    assert _evals(store) == [("budgeted", "pass", 1), ("has_answer", "pass", 1)]


def test_a_limits_clock_that_is_not_callable_is_refused_naming_it(tmp_path: Path) -> None:
    """Checked as live evaluation's option is, before anything is read or judged."""
    store = tmp_path / "store"
    build_store(store, 1)
    with pytest.raises(evaltrace.ConfigError, match=r"limits_clock.*expected Callable\[\[\], float\], got 3\.0"):
        evaltrace.evaluate_traces([has_answer], store=store, sinks=[], limits_clock=3.0)  # type: ignore[arg-type]
    assert _evals(store) == []


def test_a_limits_clock_that_raises_while_limits_are_set_up_refuses_only_its_evaluator_in_a_backfill(
    tmp_path: Path, clock: FailingClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A rate limit's token bucket used to read the clock when made: the backfill's set-up raised the clock's error.

    Now the run finishes: ``budgeted`` (under a rate limit) is not evaluated (``limits_unavailable``) on every
    trace, never run unchecked, never a pass or fail; ``has_answer`` judges each trace; all of it stored, logged
    once. Nothing is lost: once the clock answers, the same backfill run again judges ``budgeted`` on every trace.
    """
    store = tmp_path / "store"
    build_store(store, 3)
    clock.failing = True
    spec = EvaluatorSpec(budgeted, limits=Limits(evaluations_per_second=100, burst=100))
    with caplog.at_level(logging.INFO, logger="evaltrace"):
        report = evaltrace.evaluate_traces([has_answer, spec], store=store, sinks=[], concurrency=2, limits_clock=clock)
    assert (report.stopped, report.evaluations, report.outcomes) == (None, 6, {"pass": 3, "not_evaluated": 3})
    assert _evals(store) == [("budgeted", "not_evaluated", 3), ("has_answer", "pass", 3)]
    refused = ("budgeted", "not_evaluated", "limits_unavailable", "UNSET")
    assert [row for row in evaluation_spans(store) if row[0] == "budgeted"] == [refused] * 3
    failures = [r for r in caplog.records if r.levelno == logging.ERROR and "budgeted" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None
    clock.failing = False
    again = evaltrace.evaluate_traces(
        [has_answer, spec], store=store, sinks=[], concurrency=2, limits_clock=clock, resume=False
    )
    assert (again.stopped, again.outcomes) == (None, {"pass": 6})
    assert _evals(store) == [("budgeted", "pass", 3), ("has_answer", "pass", 3)]


def test_a_global_rate_limit_whose_clock_raises_at_set_up_refuses_every_evaluator_and_the_backfill_finishes(
    tmp_path: Path, clock: FailingClock
) -> None:
    """Every evaluator is under the backfill's own ``limits``: each is refused on each trace, stored and counted."""
    store = tmp_path / "store"
    build_store(store, 2)
    clock.failing = True
    report = evaltrace.evaluate_traces(
        [has_answer, budgeted],
        store=store,
        sinks=[],
        concurrency=2,
        limits=Limits(evaluations_per_second=100, burst=100),
        limits_clock=clock,
    )
    assert (report.stopped, report.evaluations, report.outcomes) == (None, 4, {"not_evaluated": 4})
    assert _evals(store) == [("budgeted", "not_evaluated", 2), ("has_answer", "not_evaluated", 2)]
    refused = [(name, "not_evaluated", "limits_unavailable", "UNSET") for name in ("budgeted", "has_answer")]
    assert evaluation_spans(store) == sorted(refused * 2)
