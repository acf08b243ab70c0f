"""A result's instance dict is built as the template's copy with the per-call fields stored in it (s19-evcut).

``FunctionEvaluator._stamped_verdict`` (the lane's fused call and stamp, once per evaluation), ``_coerce``'s
True/False answer and ``stamp``'s one-step path built it as a literal ``{**template, "evaluator": ..., ...}`` (a
second dict of the pairs, merged into the copy and freed). The old three are kept verbatim below and asked the same
questions, with the clock and the evaluation ids pinned (each side gets the same values in the same order): the
same result class, instance dict (keys in order, values and their types), fields set (and its iteration order), no
extra or private values, dumps, ``repr`` and equality; Traces: real lazily
mapped Traces of decorated spans of every output shape, plain Traces; evaluators with and
without a version; answers True and False; results to stamp of every kind (a judgement, an error, a skip, a
``model_construct``-ed one missing a field, one with an ``evaluator`` already, one with a version already).
"""

from __future__ import annotations

import datetime as dt
import importlib
import itertools
import types
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import trusted_models
from evaltrace.evaluation import _results
from evaltrace.evaluation._mapping import build_trace
from evaltrace.evaluation._results import evaluator_name, stamp
from evaltrace.evaluation.evaluator import _RESULT_TEMPLATE, _STAMPED_FIELDS, FunctionEvaluator, evaluator
from evaltrace.mapping._lazy import LazyTrace
from evaltrace.schema import EvaluationResult, Trace, TraceError, TraceOutput
from test_mapping_lone_fields import _decorated_spans

evaluator_module = importlib.import_module("evaltrace.evaluation.evaluator")
T0 = dt.datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=dt.UTC)
_STAMPED = _STAMPED_FIELDS


class _Clock:
    """``dt`` for the modules under test: ``datetime.now`` returns the pinned time; the rest is the real module."""

    def __init__(self) -> None:
        self.at = T0

    def now(self, tz: Any = None) -> dt.datetime:
        return self.at


CLOCK = _Clock()
PINNED_DT = types.SimpleNamespace(datetime=CLOCK, UTC=dt.UTC)  # what the code reads: dt.datetime.now(dt.UTC)
IDS = itertools.count()


def pinned_id() -> str:
    return f"eval_{next(IDS):06d}"


# ---- the old code, verbatim (dt and evaluation_id are the pinned ones above) --------------------------------------
dt_old = PINNED_DT
evaluation_id = pinned_id


def old_coerce_bool(self: FunctionEvaluator, value: Any) -> EvaluationResult:
    name = self.name
    if (value is True or value is False) and isinstance(name, str):
        now = dt_old.datetime.now(dt_old.UTC)
        data = {
            **_RESULT_TEMPLATE,
            "evaluator": name,
            "evaluator_type": self.evaluator_type,
            "passed": value,
            "detail": {},
            "started_at": now,
            "finished_at": now,
            "evaluation_id": evaluation_id(),
        }
        fields_set = {"evaluator", "evaluator_type", "passed", "started_at", "finished_at"}
        if self.version is not None:
            data["evaluator_version"] = self.version
            fields_set.add("evaluator_version")
        return trusted_models.from_template(EvaluationResult, data, fields_set)
    raise AssertionError("only the True/False path changed")


def old_stamped_verdict(self: FunctionEvaluator, value: bool, trace: Trace, started: dt.datetime) -> EvaluationResult:
    finished = dt_old.datetime.now(dt_old.UTC)  # stamp()'s max(started, now)
    if finished < started:
        finished = started
    data = {
        **_RESULT_TEMPLATE,
        "evaluator": self.name,
        "evaluator_type": self.evaluator_type,
        "passed": value,
        "detail": {},
        "started_at": started,
        "finished_at": finished,
        "evaluation_id": evaluation_id(),
        "run_id": trace.run_id,
        "case_id": trace.case_id,
        "variant_name": trace.variant_name,
    }
    fields_set = {"evaluator", "evaluator_type", "passed", "started_at", "finished_at"}
    fields_set |= _STAMPED_FIELDS
    if self.version is not None:
        data["evaluator_version"] = self.version
        fields_set.add("evaluator_version")
    return trusted_models.from_template(EvaluationResult, data, fields_set)


def old_stamp_one_step(
    result: EvaluationResult, evaluator: Any, trace: Trace, started: dt.datetime
) -> EvaluationResult:
    """``stamp``'s one-step path (the caller checks its conditions, as ``stamp`` did)."""
    version = getattr(evaluator, "version", None)
    finished = dt_old.datetime.now(dt_old.UTC)
    if finished < started:
        finished = started
    data = result.__dict__
    stamped = {
        **data,
        "evaluator": data["evaluator"] or evaluator_name(evaluator),
        "run_id": trace.run_id,
        "case_id": trace.case_id,
        "variant_name": trace.variant_name,
        "started_at": started,
        "finished_at": finished,
    }
    fields_set = result.__pydantic_fields_set__ | _STAMPED
    if version is not None and data["evaluator_version"] is None:
        stamped["evaluator_version"] = version
        fields_set.add("evaluator_version")
    return trusted_models.from_template(EvaluationResult, stamped, fields_set)


# ---- inputs ----------------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluator_module, "dt", PINNED_DT)
    monkeypatch.setattr(evaluator_module, "evaluation_id", pinned_id)
    monkeypatch.setattr(_results, "dt", PINNED_DT)


def _traces(exporter: InMemorySpanExporter) -> Iterator[Trace]:
    spans = _decorated_spans(exporter)
    lazy = [build_trace([span], span) for span in spans]
    assert lazy and all(type(trace) is LazyTrace for trace in lazy)  # the pipeline's own Trace class
    yield from lazy
    yield Trace.model_construct(run_id="r", case_id="c", variant_name="v", started_at=T0, finished_at=T0)
    yield Trace(
        run_id="r2", case_id="c2", variant_name="w", started_at=T0, finished_at=T0, output=TraceOutput(final_answer="x")
    )


def _evaluators() -> list[FunctionEvaluator]:
    def check(trace: Trace) -> bool:
        return True

    return [
        evaluator(name="plain")(check),
        evaluator(name="versioned", version="2.1")(check),
        evaluator(name="typed", evaluator_type="llm_judge")(check),
    ]


def _to_stamp() -> list[EvaluationResult]:
    missing = EvaluationResult.model_construct(passed=True, evaluator="m")
    del missing.__dict__["run_id"]  # a hand-edited one: the field is appended, in the same place both ways
    return [
        EvaluationResult(evaluator="", passed=True),
        EvaluationResult(evaluator="named", passed=False, score=0.2, reason="r", metadata={"k": 1}),
        EvaluationResult(evaluator="", passed=False, status="failed", error=TraceError(type="timeout", message="t")),
        EvaluationResult(evaluator="", passed=False, status="skipped", reason="not_applicable"),
        EvaluationResult(evaluator="", passed=True, evaluator_version="9"),
        EvaluationResult.model_construct(passed=True, evaluator=""),
        missing,
    ]


def same(new: EvaluationResult, old: EvaluationResult) -> None:
    assert type(new) is type(old)
    assert list(new.__dict__) == list(old.__dict__)
    for key, value in old.__dict__.items():
        assert new.__dict__[key] == value and type(new.__dict__[key]) is type(value), key
    assert new.__pydantic_fields_set__ == old.__pydantic_fields_set__
    assert list(new.__pydantic_fields_set__) == list(old.__pydantic_fields_set__)
    assert new.__pydantic_extra__ is None and old.__pydantic_extra__ is None
    assert new.__pydantic_private__ is None and old.__pydantic_private__ is None
    assert new.model_dump() == old.model_dump() and new.model_dump_json() == old.model_dump_json()
    assert repr(new) == repr(old) and new == old


def kept(template: list[tuple[str, Any]], new: EvaluationResult) -> None:
    """The shared template is untouched and the result's dict is a dict of its own (the new code copies it)."""
    assert list(_RESULT_TEMPLATE.items()) == template
    assert all(value is _RESULT_TEMPLATE[key] for key, value in template)
    assert new.__dict__ is not _RESULT_TEMPLATE


def both(new: Any, old: Any, *args: Any) -> tuple[Any, Any]:
    """Each side from the same pinned id counter: the same ids in the same order."""
    global IDS
    IDS = itertools.count()
    made_new = new(*args)
    IDS = itertools.count()
    made_old = old(*args)
    return made_new, made_old


# ---- the comparisons -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("late", [False, True], ids=["now-after-start", "start-after-now"])
@pytest.mark.usefixtures("provider")
def test_stamped_verdict_builds_the_old_result(late: bool, exporter: InMemorySpanExporter) -> None:
    started = T0 + dt.timedelta(seconds=1) if late else T0 - dt.timedelta(seconds=1)
    count = 0
    template = list(_RESULT_TEMPLATE.items())
    for trace in _traces(exporter):
        for function in _evaluators():
            for value in (True, False):
                new, old = both(
                    FunctionEvaluator._stamped_verdict, old_stamped_verdict, function, value, trace, started
                )
                same(new, old)
                kept(template, new)
                assert new.finished_at == max(started, T0)
                count += 1
    assert count > 50


def test_coerce_of_true_and_false_builds_the_old_result() -> None:
    template = list(_RESULT_TEMPLATE.items())
    for function in _evaluators():
        for value in (True, False):
            new, old = both(FunctionEvaluator._coerce, old_coerce_bool, function, value)
            same(new, old)
            kept(template, new)


@pytest.mark.usefixtures("provider")
def test_stamp_builds_the_old_result(exporter: InMemorySpanExporter) -> None:
    count = 0
    template = list(_RESULT_TEMPLATE.items())
    for trace in _traces(exporter):
        for function in _evaluators():
            for result in _to_stamp():
                before = list(result.__dict__.items())
                new, old = both(stamp, old_stamp_one_step, result, function, trace, T0)
                same(new, old)
                kept(template, new)
                assert new.__dict__ is not result.__dict__  # a copy: the stamped result's own dict is untouched
                assert list(result.__dict__.items()) == before
                count += 1
    assert count > 100
