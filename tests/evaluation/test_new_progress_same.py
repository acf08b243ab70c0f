"""``new_progress(trace)`` builds the object ``Progress(trace)`` builds (s19-evcut: the lane's job, without the class call).

The dataclass's own constructor is the reference: every field in the same order with the same value (a new
``results`` list per object, never shared), equality, ``repr`` and the instance dict's keys. A field added to
``Progress`` without ``new_progress`` fails here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from evaltrace.evaluation import _jobs
from evaltrace.evaluation._job_types import Progress, new_progress
from evaltrace.schema import Trace

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


def _traces() -> list[object]:
    return [Trace(run_id="r", case_id="c", variant_name="v", started_at=NOW, finished_at=NOW), None, "not a trace"]


def test_new_progress_is_the_dataclass_constructors_object() -> None:
    for trace in _traces():
        new, old = new_progress(trace), Progress(trace)  # type: ignore[arg-type]
        assert type(new) is Progress
        assert list(vars(new)) == list(vars(old)) == [field.name for field in dataclasses.fields(Progress)]
        for name, value in vars(old).items():
            assert getattr(new, name) == value and type(getattr(new, name)) is type(value), name
        assert new.trace is trace
        assert new == old and repr(new) == repr(old)


def test_each_progress_has_its_own_results_list() -> None:
    trace = _traces()[0]
    first, second = new_progress(trace), new_progress(trace)  # type: ignore[arg-type]
    assert first.results is not second.results
    first.results.append(object())  # type: ignore[arg-type]
    assert second.results == []


def test_the_lane_builds_its_progress_with_it() -> None:
    assert _jobs.new_progress is new_progress
