"""The models ``trusted_models`` builds store their parts through the descriptors' own ``__set__`` (s19-evcut).

The old builders are kept here verbatim (``cls.__new__(cls)`` and four ``object.__setattr__`` calls): every model
the new code builds, from the pipeline's own producers (a stamped verdict, a coerced answer, a stamped copy) and
from odd classes (a subclass, one with slots of its own, one shadowing a pydantic slot, one with its own
``__new__``, a class made to keep the old calls), must be the same object field by field: its class, its instance
dict (the very dict handed in, its keys in order, the same value objects), its fields set, no extra, no private
values, the same dump and equality.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from evaltrace._internal import trusted_models
from evaltrace._internal.trusted_models import from_template, trusted, trusted_copy
from evaltrace.evaluation import evaluator
from evaltrace.evaluation._results import stamp
from evaltrace.mapping._lazy import LazyTrace
from evaltrace.schema import EvaluationResult, Score, Trace, TraceError, TraceMetrics, TraceOutput

M = TypeVar("M", bound=BaseModel)
NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


# --- the builders before s19-evcut, verbatim --------------------------------------------------------------------


def old_from_template(cls: type[M], data: dict[str, Any], fields_set: set[str]) -> M:
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", data)
    object.__setattr__(model, "__pydantic_fields_set__", fields_set)
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def old_trusted_copy_store(model: M, update: dict[str, Any]) -> M:
    data = model.__dict__.copy()
    data.update(update)
    copied = type(model).__new__(type(model))
    object.__setattr__(copied, "__dict__", data)
    object.__setattr__(copied, "__pydantic_fields_set__", model.__pydantic_fields_set__ | update.keys())
    object.__setattr__(copied, "__pydantic_extra__", None)
    object.__setattr__(copied, "__pydantic_private__", None)
    return copied


# --- odd classes ----------------------------------------------------------------------------------------------


class OwnResult(EvaluationResult):
    """A user subclass: resolves to BaseModel's descriptors (the new path)."""


class Slotted(BaseModel):
    __slots__ = ("scratch",)
    name: str = ""
    value: float | None = None


class Shadow(BaseModel):
    """Redefines a pydantic slot: its own member descriptor, not BaseModel's, is the one ``object.__setattr__`` uses
    (the first class in the MRO defining the name); storing through BaseModel's would leave Shadow's slot unset."""

    __slots__ = ("__pydantic_fields_set__",)
    name: str = ""


MADE: list[str] = []


class OwnNew(BaseModel):
    """A model whose ``__new__`` is its own: the old calls are kept (its ``__new__`` runs, as before)."""

    name: str = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> OwnNew:
        model = super().__new__(cls)
        MADE.append(cls.__name__)
        return model


def same(new: BaseModel, old: BaseModel, data: dict[str, Any] | None = None) -> None:
    assert type(new) is type(old)
    assert list(new.__dict__) == list(old.__dict__)
    assert all(new.__dict__[key] is old.__dict__[key] for key in old.__dict__)
    if data is not None:
        assert new.__dict__ is data  # the dict handed in is the instance dict, as object.__setattr__ stored it
    assert new.__pydantic_fields_set__ == old.__pydantic_fields_set__
    assert type(new.__pydantic_fields_set__) is type(old.__pydantic_fields_set__)
    assert new.__pydantic_extra__ is None and old.__pydantic_extra__ is None
    assert new.__pydantic_private__ is None and old.__pydantic_private__ is None
    assert new == old
    assert new.model_dump() == old.model_dump()
    assert new.model_dump_json() == old.model_dump_json()
    assert repr(new) == repr(old)
    assert new.model_fields_set == old.model_fields_set


def rebuilt_both(model: BaseModel) -> tuple[BaseModel, BaseModel, dict[str, Any]]:
    data = dict(model.__dict__)
    fields_set = set(model.__pydantic_fields_set__)
    new = from_template(type(model), data, fields_set)
    assert new.__pydantic_fields_set__ is fields_set  # stored as handed in, as object.__setattr__ did
    return new, old_from_template(type(model), dict(data), set(fields_set)), data


def _trace() -> Trace:
    return Trace.model_construct(
        run_id="run", case_id="case", variant_name="v", started_at=NOW, finished_at=NOW,
        output=TraceOutput(final_answer="Paris"),
    )  # fmt: skip


@evaluator(name="judge", version="3")
def _judge(trace: Trace) -> bool:
    return True


@evaluator(name="plain")
def _plain(trace: Trace) -> float:
    return 0.25


def _produced() -> list[BaseModel]:
    """What the pipeline's producers build (each through the new code), one of each kind."""
    trace = _trace()
    results: list[BaseModel] = [
        _judge._stamped_verdict(True, trace, NOW),
        _judge._stamped_verdict(False, trace, NOW + dt.timedelta(days=1)),  # started after now: finished = started
        _plain._stamped_verdict(True, trace, NOW),
        _judge._coerce(True),
        _plain._coerce(False),
        _plain._coerce(0.25),
        _plain._coerce("fail"),
        _judge._coerce(EvaluationResult(evaluator="", passed=True)),
        trusted(EvaluationResult, None, evaluator="x", passed=True, started_at=NOW, finished_at=NOW),
        trusted(EvaluationResult, {"evaluator"}, evaluator="x", passed=False, score=0.1, evaluation_id="e"),
        trusted(TraceMetrics),
        trusted(TraceOutput, None, final_answer="Paris"),
        trusted(OwnResult, None, evaluator="own", passed=True),
        trusted(Slotted, None, name="s", value=1.5),
        trusted(Shadow, None, name="sh"),
        trusted(OwnNew, None, name="n"),
    ]
    errored = EvaluationResult(
        evaluator="e", passed=False, status="failed", error=TraceError(type="timeout", message="late")
    )
    for result in (EvaluationResult(evaluator="", passed=True, score=0.9, metadata={"k": 1}), errored):
        results.append(stamp(result, _judge, trace, NOW))
        results.append(stamp(result, _plain, trace, NOW))
        results.append(trusted_copy(result, {"reason": "r", "run_id": "x"}))
    results.append(trusted_copy(Score(name="s", value=1.0, trace_id="0" * 32), {"value": 2.0}))
    return results


def test_our_result_class_takes_the_descriptors_path() -> None:
    """The proof below compares the new path: the classes the pipeline builds resolve to the descriptors."""
    for cls in (EvaluationResult, OwnResult, Slotted, Shadow, TraceMetrics, Trace):
        assert len(trusted_models._setters(cls)) == 4, cls
    assert trusted_models._setters(OwnNew) == ()  # its own __new__: the old calls
    # Its ``__dict__`` is a property (the first definition in its MRO; BaseModel's getset comes later): the old calls.
    assert trusted_models._setters(LazyTrace) == ()


def test_a_shadowed_slot_is_stored_through_the_class_own_descriptor() -> None:
    """``object.__setattr__`` resolves a name to the first class in the MRO defining it: Shadow's own slot."""
    own = Shadow.__dict__["__pydantic_fields_set__"]
    assert own is not BaseModel.__dict__["__pydantic_fields_set__"]
    fields_set = {"name"}
    model = from_template(Shadow, {"name": "x"}, fields_set)
    assert own.__get__(model, Shadow) is fields_set  # in Shadow's slot, where a read of the attribute looks
    assert model.model_fields_set is fields_set
    same(model, old_from_template(Shadow, {"name": "x"}, {"name"}))


def test_every_model_the_producers_build_equals_the_old_builders() -> None:
    for model in _produced():
        new, old, data = rebuilt_both(model)
        same(new, old, data)
        same(model, old)  # the producer's own model, built by the new code, is the old builders' too


def test_trusted_copy_equals_the_old_store() -> None:
    trace = _trace()
    sources: list[BaseModel] = [*_produced(), trace, Score(name="s", value=1.0, trace_id="0" * 32)]
    for source in sources:
        for update in ({}, {"evaluator": "other"} if isinstance(source, EvaluationResult) else {}):
            same(trusted_copy(source, update), old_trusted_copy_store(source, update))


def test_a_class_kept_on_the_old_calls_builds_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback (``object.__setattr__``), forced for our own class and taken by one with its own ``__new__``."""
    monkeypatch.setitem(trusted_models._SETTERS, EvaluationResult, ())
    for model in _produced():
        new, old, data = rebuilt_both(model)
        same(new, old, data)
    before = len(MADE)
    same(trusted(OwnNew, None, name="n"), old_from_template(OwnNew, {"name": "n"}, {"name"}))
    assert len(MADE) == before + 2  # its __new__ ran for both


def test_an_odd_class_is_looked_up_once_and_never_raises() -> None:
    class Broken(type):
        @property
        def __mro__(cls) -> Any:  # type: ignore[override]
            raise RuntimeError("boom")

    odd = Broken("Odd", (), {})
    assert trusted_models._setters(odd) == ()
    assert trusted_models._SETTERS[odd] == ()
