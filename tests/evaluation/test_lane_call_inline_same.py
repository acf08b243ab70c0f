"""The fast lane's evaluator call with ``_fuses`` and ``_suppress`` inline (s20-evrec2) answers as before.

``call_evaluator_stamped`` used to ask ``_fuses(evaluator, trace)`` and ``_call_stamped`` to call ``_suppress()``:
two frames per evaluation, now inline. The old three (and ``_call_stamped``, which now holds ``_suppress``'s body) are
kept verbatim below and given the same calls, with the clock and the evaluation ids pinned: the same answer
(result class, instance dict in order, fields set; the same exception type, arguments and cause), the same
``stamped`` flag, the same context seen by the evaluator's function (the suppression key and whatever was
attached), the context restored after the call, and one call of the function per side. Evaluators: a plain sync
function answering True, False, a number, a label, a ready result, None (refused by ``_coerce``), raising an
``Exception`` and a ``BaseException``; one taking the case; an async one; a subclass; an empty, a non-``str`` name;
a ``str`` and a non-``str`` version; ``evaluate`` or ``_coerce`` replaced on the instance or on the class; a class
evaluator. Traces: the pipeline's lazily mapped ``LazyTrace``, a plain ``Trace``, a user ``Trace`` subclass and a
non-Trace. Contexts: the thread's default one and one with a key attached. And the stuck-thread cap refusing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib
import itertools
import types
from collections.abc import Callable, Iterator
from typing import Any, TypeGuard

import pytest
from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal.daemon_pool import UserAbort, stuck_calls
from evaltrace._internal.fast_context import DEFAULT, attach, detach, get_current
from evaltrace._internal.tracing import SUPPRESS_EVALTRACE_KEY
from evaltrace.evaluation import _calls
from evaltrace.evaluation._calls import (
    _REUSE_SUPPRESSED,
    _SUPPRESSED_ALONE,
    Overloaded,
    call_evaluator,
    call_evaluator_stamped,
)
from evaltrace.evaluation._mapping import build_trace
from evaltrace.evaluation.evaluator import _ORIGINAL_COERCE, _ORIGINAL_EVALUATE, FunctionEvaluator, evaluator
from evaltrace.mapping._lazy import LazyTrace
from evaltrace.schema import EvalCase, EvaluationResult, Trace, TraceOutput
from test_mapping_lone_fields import _decorated_spans

evaluator_module = importlib.import_module("evaltrace.evaluation.evaluator")
T0 = dt.datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=dt.UTC)
PINNED_DT = types.SimpleNamespace(datetime=types.SimpleNamespace(now=lambda tz=None: T0), UTC=dt.UTC)
IDS = itertools.count()


def pinned_id() -> str:
    return f"eval_{next(IDS):06d}"


@pytest.fixture(autouse=True)
def _pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluator_module, "dt", PINNED_DT)
    monkeypatch.setattr(evaluator_module, "evaluation_id", pinned_id)


# ---- the old code, verbatim (s19: evaluation/_calls.py) --------------------------------------------------------


def _suppress() -> Any:
    """Attach the current context with evaltrace's suppression key set; the token to detach it with."""
    current = get_current()
    if current is DEFAULT and _REUSE_SUPPRESSED:
        return attach(_SUPPRESSED_ALONE)
    return attach(Context({**current, SUPPRESS_EVALTRACE_KEY: True}))


def _fuses(evaluator: Any, trace: Any) -> TypeGuard[FunctionEvaluator]:
    if type(evaluator) is not FunctionEvaluator or evaluator.is_async or not isinstance(trace, Trace):
        return False
    name, version = evaluator.name, evaluator.version
    own = evaluator.__dict__
    return (
        type(name) is str
        and bool(name)
        and (version is None or type(version) is str)
        and FunctionEvaluator.evaluate is _ORIGINAL_EVALUATE
        and FunctionEvaluator._coerce is _ORIGINAL_COERCE
        and "evaluate" not in own
        and "_coerce" not in own
    )


def _call_stamped(
    evaluator: FunctionEvaluator, trace: Trace, case: EvalCase | None, started: dt.datetime
) -> tuple[Any, bool]:
    token = _suppress()
    try:
        value = evaluator.func(trace, case) if evaluator._takes_case else evaluator.func(trace)
        if value is True or value is False:
            return evaluator._stamped_verdict(value, trace, started), True
        return evaluator._coerce(value), False
    except Exception:
        raise
    except BaseException as exc:  # as in _call: the evaluator's error result, never the loop's or the job's end
        raise UserAbort(exc) from exc
    finally:
        detach(token)


def old_call_evaluator_stamped(
    evaluator: Any, trace: Trace, started: dt.datetime
) -> tuple[Any, Exception | None, bool]:
    if not _fuses(evaluator, trace):
        produced, exc = call_evaluator(evaluator, trace)
        return produced, exc, False
    if stuck_calls.refuses(id(evaluator)):
        return None, Overloaded(evaluator), False
    try:
        produced, stamped = _call_stamped(evaluator, trace, None, started)
    except Exception as exc:
        return None, exc, False
    except BaseException as exc:
        return None, UserAbort(exc), False
    return produced, None, stamped


# ---- the cases ---------------------------------------------------------------------------------------------------

SEEN: list[tuple[str, dict[str, Any]]] = []  # (function, the context it ran in), per call
READY = EvaluationResult(evaluator="ready", passed=True, score=0.5)


class _Stop(BaseException):
    pass


def _answering(tag: str, answer: Callable[[], Any]) -> Callable[..., Any]:
    def check(trace: Any) -> Any:
        SEEN.append((tag, dict(get_current())))
        return answer()

    check.__name__ = f"check_{tag}"
    return check


def _raise(exc: BaseException) -> Callable[[], Any]:
    def go() -> Any:
        raise exc

    return go


ANSWERS: dict[str, Callable[[], Any]] = {
    "true": lambda: True,
    "false": lambda: False,
    "number": lambda: 0.75,
    "label": lambda: "good",
    "ready": lambda: READY,
    "none": lambda: None,
    "raises": _raise(ValueError("boom", 7)),
    "aborts": _raise(_Stop("stop")),
}


class _SubEvaluator(FunctionEvaluator):
    pass


class _ClassEvaluator:
    name = "class_check"
    version = None

    def evaluate(self, trace: Any, case: Any) -> Any:
        SEEN.append(("class", dict(get_current())))
        return READY


def _evaluators() -> Iterator[tuple[str, Any]]:
    for tag, answer in ANSWERS.items():
        yield tag, evaluator(name=f"e_{tag}")(_answering(tag, answer))
    yield "versioned", evaluator(name="e_v", version="v2")(_answering("versioned", lambda: True))

    def with_case(trace: Any, case: Any) -> bool:
        SEEN.append(("case", dict(get_current())))
        return case is None

    yield "case", evaluator(name="e_case")(with_case)

    async def later(trace: Any) -> bool:
        return True

    yield "async", evaluator(name="e_async")(later)
    sub = _SubEvaluator(_answering("sub", lambda: True), name="e_sub")
    yield "sub", sub
    empty = evaluator(name="e_empty")(_answering("empty", lambda: True))
    empty.name = ""
    yield "empty-name", empty
    numbered = evaluator(name="e_num")(_answering("numbered", lambda: True))
    numbered.name = 5  # type: ignore[assignment]
    yield "int-name", numbered
    odd_version = evaluator(name="e_oddv")(_answering("oddv", lambda: False))
    odd_version.version = 3  # type: ignore[assignment]
    yield "int-version", odd_version
    own_evaluate = evaluator(name="e_own")(_answering("own", lambda: True))
    own_evaluate.evaluate = lambda trace, case: READY  # type: ignore[method-assign]
    yield "own-evaluate", own_evaluate
    own_coerce = evaluator(name="e_ownc")(_answering("ownc", lambda: True))
    own_coerce._coerce = lambda value: READY  # type: ignore[method-assign]
    yield "own-coerce", own_coerce
    yield "class", _ClassEvaluator()


class _MyTrace(Trace):
    pass


def _traces(exporter: InMemorySpanExporter) -> Iterator[Any]:
    spans = _decorated_spans(exporter)
    lazy = build_trace([spans[0]], spans[0])
    assert type(lazy) is LazyTrace  # the pipeline's own Trace class
    yield lazy
    times = {"run_id": "r", "case_id": "c", "variant_name": "v", "started_at": T0, "finished_at": T0}
    yield Trace(**times, output=TraceOutput(final_answer="x"))
    yield _MyTrace(**times)
    yield {"input": "q"}  # not a Trace: never fused


def _answer(made: tuple[Any, Exception | None, bool]) -> Any:
    produced, exc, stamped = made
    if exc is not None:
        cause = exc.__cause__
        return ("exc", type(exc), exc.args, type(cause), getattr(cause, "args", None), stamped)
    if isinstance(produced, EvaluationResult):
        fields_set = produced.__pydantic_fields_set__
        return ("result", type(produced), list(produced.__dict__.items()), sorted(fields_set), stamped)
    if asyncio.iscoroutine(produced):
        produced.close()
        return ("coroutine", stamped)
    return ("other", produced, stamped)


def _both(evaluator: Any, trace: Any, started: dt.datetime) -> tuple[Any, Any]:
    global IDS
    before = get_current()
    out = []
    for call in (call_evaluator_stamped, old_call_evaluator_stamped):
        IDS = itertools.count()
        SEEN.clear()
        answer = _answer(call(evaluator, trace, started))
        assert get_current() is before  # the evaluator's context detached
        out.append((answer, list(SEEN)))
    return out[0], out[1]


@pytest.mark.parametrize("attached", [False, True], ids=["default-context", "a-key-attached"])
@pytest.mark.usefixtures("provider")
def test_the_inline_checks_call_and_answer_as_before(attached: bool, exporter: InMemorySpanExporter) -> None:
    token = attach(otel_context.set_value("user-key", "kept")) if attached else None
    try:
        assert (get_current() is DEFAULT) is (not attached)
        count = fused = 0
        for trace in _traces(exporter):
            for tag, check in _evaluators():
                for started in (T0 - dt.timedelta(seconds=1), T0 + dt.timedelta(seconds=1)):
                    new, old = _both(check, trace, started)
                    assert new == old, (tag, type(trace))
                    count += 1
                    fused += new[0][-1] is True
                    if tag not in ("async", "own-evaluate"):  # each side ran the function once, suppressed
                        assert len(new[1]) == 1, tag
                        seen = new[1][0][1]
                        assert seen[SUPPRESS_EVALTRACE_KEY] is True
                        assert seen.get("user-key") == ("kept" if attached else None)
        assert count > 100
        assert fused >= 12  # true/false/versioned/case on three kinds of Trace, both starts
    finally:
        if token is not None:
            detach(token)


def test_an_evaluator_the_cap_refuses_is_not_called_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stuck_calls, "refuses", lambda key: True)
    trace = Trace(run_id="r", case_id="c", variant_name="v", started_at=T0, finished_at=T0)
    for tag, check in _evaluators():
        new, old = _both(check, trace, T0)
        assert new[1] == old[1] == []  # never called
        assert new[0][:4] == old[0][:4]
        assert new[0][1] is Overloaded or tag == "async"


def test_a_patched_class_evaluate_or_coerce_is_not_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = Trace(run_id="r", case_id="c", variant_name="v", started_at=T0, finished_at=T0)
    check = evaluator(name="e_patched")(_answering("patched", lambda: True))
    for name in ("evaluate", "_coerce"):
        with monkeypatch.context() as patch:
            original = getattr(FunctionEvaluator, name)
            patch.setattr(FunctionEvaluator, name, lambda self, *args, o=original: o(self, *args))
            new, old = _both(check, trace, T0)
            assert new == old
            assert new[0][-1] is False  # through the patched method: not stamped here
    assert _calls._fuses(check, trace)  # unpatched again: fused


@pytest.mark.usefixtures("provider")
def test_the_inline_checks_never_fuse_what_the_live_fuses_refuses(exporter: InMemorySpanExporter) -> None:
    # call_evaluator_stamped makes _fuses' checks inline; _fuses itself stays for the loop's in-place path. Should
    # the two drift apart, the lane must not fuse an evaluator the live _fuses refuses (the copy above is frozen).
    fused = 0
    for trace in _traces(exporter):
        for tag, check in _evaluators():
            produced, exc, stamped = call_evaluator_stamped(check, trace, T0)
            if asyncio.iscoroutine(produced):
                produced.close()
            if stamped:
                assert _calls._fuses(check, trace), tag
                fused += 1
    assert fused >= 6
