"""Calling an evaluator once, here and now, under evaltrace's suppression (the runner's sync calls).

``call_evaluator`` is what the fast lane and the thread pool call; ``call_evaluator_stamped`` fuses a function
evaluator's call with its stamp where it can. A call the stuck-thread cap refuses is ``Overloaded``, never made.
Re-exported by :mod:`evaltrace.evaluation.runner`, where they were defined.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, TypeGuard

from opentelemetry.context import Context

from evaltrace._internal.daemon_pool import UserAbort, stuck_calls
from evaltrace._internal.fast_context import DEFAULT, attach, detach, get_current
from evaltrace._internal.tracing import SUPPRESS_EVALTRACE_KEY
from evaltrace.evaluation.evaluator import _ORIGINAL_COERCE, _ORIGINAL_EVALUATE, Evaluator, FunctionEvaluator
from evaltrace.schema import EvalCase, Trace

_NOT_CALLED: Any = object()


_SUPPRESSED_ALONE = Context({SUPPRESS_EVALTRACE_KEY: True})  # the default (empty) context, suppressed: see _call


# Shared across evaluations only where Context refuses every change: opentelemetry-api 1.30 (our floor) blocks
# ``ctx[k] = v`` alone, so an evaluator's ``get_current().pop(...)`` or ``.update(...)`` would reach every later one.
_REUSE_SUPPRESSED = all(
    getattr(Context, name) is not getattr(dict, name)
    for name in ("update", "pop", "setdefault", "clear", "__delitem__")
)


def _suppress() -> Any:
    """Attach the current context with evaltrace's suppression key set; the token to detach it with.

    Keep in sync with :func:`_call_stamped`, which attaches the same context inline (the lane's path).
    """
    current = get_current()
    if current is DEFAULT and _REUSE_SUPPRESSED:
        return attach(_SUPPRESSED_ALONE)
    return attach(Context({**current, SUPPRESS_EVALTRACE_KEY: True}))


def _call(evaluator: Evaluator, trace: Trace, case: EvalCase | None) -> Any:
    # Suppressed so that a judge model's HTTP calls and any spans the evaluator makes are not traced by us
    # (and so can never be evaluated, which would recurse). What suppress_instrumentation() does, without its
    # generator-based context manager, and through fast_context (the ContextVar's own methods, not the API's two
    # Python calls around each): this runs once per evaluation. ``Context({**current, key: True})`` is exactly
    # ``otel_context.set_value(key, True)``.
    # On a lane worker or the loop nothing is attached (the runtime's default context): the suppressed context is
    # then always the same one, built once, where this OpenTelemetry's Context refuses changes (_REUSE_SUPPRESSED).
    token = _suppress()
    try:
        return evaluator.evaluate(trace, case)
    except Exception:
        raise
    except BaseException as exc:
        # Inline on the loop, SystemExit/KeyboardInterrupt would stop it, a CancelledError would read as our own
        # shutdown, and any other (GeneratorExit, gevent.Timeout) would end the job uncounted: wrapped, each is
        # this evaluator's error result (as call_evaluator gives on the fast lane), and the others still run.
        raise UserAbort(exc) from exc
    finally:
        detach(token)  # set and reset in this one frame: the reset cannot fail (OTel's detach only logs if it did)


def _fuses(evaluator: Any, trace: Any) -> TypeGuard[FunctionEvaluator]:
    """Whether a call of ``evaluator`` on ``trace`` may be fused with its stamp (:func:`_call_stamped`).

    Keep in sync with :func:`call_evaluator_stamped`, which makes these checks inline (the lane's path).

    A plain :class:`FunctionEvaluator` with a sync function, its ``evaluate`` and ``_coerce`` not replaced (on the
    class or the instance: compared with the ones ``evaluator.py`` captured right after the class body, so that a
    post-import hook's patch counts as a replacement), a non-empty ``str`` name, a ``str`` or None version, and a
    Trace: exactly what ``evaluate`` then :func:`stamp`'s one-step path handle.
    """
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
    """``_call`` of a function evaluator that :func:`_fuses`: ``(stamped result, True)`` for a True/False answer.

    Otherwise ``(output, False)``: what ``evaluate`` returns (``_coerce`` of the function's answer), for the caller
    to check and stamp as usual. The function, and ``_coerce``, run suppressed as in ``_call``; what they raise
    propagates the same way (a ``BaseException`` that is not an ``Exception`` wrapped in ``UserAbort``). A
    True/False answer's result is built once, stamped (``_stamped_verdict``), instead of built and then copied by :func:`stamp`.
    """
    # _suppress() inline (every fused call: its frame cost ~1k instructions); the same context attached.
    current = get_current()
    if current is DEFAULT and _REUSE_SUPPRESSED:
        token = attach(_SUPPRESSED_ALONE)
    else:
        token = attach(Context({**current, SUPPRESS_EVALTRACE_KEY: True}))
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


call_in_thread = _call
"""Call a sync evaluator (suppressed; a non-``Exception`` ``BaseException`` wrapped in ``UserAbort``): a thread's task."""


class Overloaded(Exception):
    """The call was not started: the process's stuck threads are at their cap and this evaluator holds its share.

    Our decision, not the evaluator failing on the span: the evaluation is "not evaluated" (``overloaded``).
    """

    def __init__(self, evaluator: Any) -> None:
        mine = stuck_calls.of(id(evaluator))
        super().__init__(
            f"not run: {stuck_calls.total} evaluator threads are still running calls whose timeout passed (cap "
            f"{stuck_calls.limit}), {mine} of them this evaluator's; it gets no new thread until one returns"
        )


def call_evaluator(evaluator: Evaluator, trace: Trace) -> tuple[Any, Exception | None]:
    """Call a sync evaluator once, here and now (suppressed): ``(output, None)`` or ``(None, exception)``.

    A ``BaseException`` that is not an ``Exception`` (``gevent.Timeout``, a ``CancelledError`` raised by sync
    code) comes back wrapped in ``UserAbort``, as from the thread pool: an error naming its type, never raised.
    Not called when the evaluator holds its share of the stuck threads at the cap: ``(None, Overloaded)`` then.
    """
    if stuck_calls.refuses(id(evaluator)):
        return None, Overloaded(evaluator)
    try:
        return _call(evaluator, trace, None), None
    except Exception as exc:
        return None, exc
    except BaseException as exc:
        return None, UserAbort(exc)


def call_evaluator_stamped(
    evaluator: Evaluator, trace: Trace, started: dt.datetime
) -> tuple[Any, Exception | None, bool]:
    """:func:`call_evaluator` with the call fused with its stamp where it can be (see :func:`_call_stamped`).

    Returns:
        ``(stamped result, None, True)`` for a function evaluator's True/False answer (what ``stamp(output,
        evaluator, trace, started)`` returns, built once); otherwise ``call_evaluator``'s ``(output, None)`` or
        ``(None, exception)`` and False: the caller checks and stamps it as before.
    """
    # _fuses(evaluator, trace) inline (the fast lane's every call: its frame cost ~1k instructions): the same
    # reads and checks in the same order; tests/evaluation/test_lane_call_inline_same.py compares the two.
    fused: FunctionEvaluator | None = None  # the evaluator, when it fuses (typed as such, without a cast() call)
    if type(evaluator) is FunctionEvaluator and not evaluator.is_async and isinstance(trace, Trace):
        name, version = evaluator.name, evaluator.version
        own = evaluator.__dict__
        if (
            type(name) is str
            and name  # a str: bool(name) without its call
            and (version is None or type(version) is str)
            and FunctionEvaluator.evaluate is _ORIGINAL_EVALUATE
            and FunctionEvaluator._coerce is _ORIGINAL_COERCE
            and "evaluate" not in own
            and "_coerce" not in own
        ):
            fused = evaluator
    if fused is None:
        produced, exc = call_evaluator(evaluator, trace)
        return produced, exc, False
    if stuck_calls.refuses(id(evaluator)):
        return None, Overloaded(evaluator), False
    try:
        produced, stamped = _call_stamped(fused, trace, None, started)
    except Exception as exc:
        return None, exc, False
    except BaseException as exc:
        return None, UserAbort(exc), False
    return produced, None, stamped
