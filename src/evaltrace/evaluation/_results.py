"""The results the runner makes: failed, not evaluated, timed out, and stamped with the trace and the call's times.

Re-exported by :mod:`evaltrace.evaluation.runner`, where they were defined.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from evaltrace._internal.trusted_models import from_template, trusted_copy
from evaltrace.evaluation.evaluator import _STAMPED_FIELDS
from evaltrace.schema import EvaluationResult, Trace
from evaltrace.schema.trace import TraceError

ERROR_TYPE_KEY = "error_type"


TIMEOUT_ERROR_TYPE = "timeout"


INVALID_OUTPUT_ERROR_TYPE = "invalid_output"


def evaluator_name(evaluator: Any) -> str:
    """Return the evaluator's name, tolerating objects that lack one."""
    return str(getattr(evaluator, "name", None) or type(evaluator).__name__)


def failed_result(
    evaluator: Any, error_type: str, message: str, *, timeout: bool = False, stack: str | None = None
) -> EvaluationResult:
    """Return the result recorded when an evaluator could not produce one."""
    return EvaluationResult(
        evaluator=evaluator_name(evaluator),
        evaluator_version=getattr(evaluator, "version", None),
        passed=False,
        status="failed",
        reason=f"evaluator failed: {message}",
        detail={ERROR_TYPE_KEY: error_type},
        error=TraceError(type="timeout" if timeout else "exception", message=message, stack=stack),
    )


def skipped_result(evaluator: Any, reason: str) -> EvaluationResult:
    """Return the result recorded for an evaluation that was not run (e.g. shutdown)."""
    return EvaluationResult(
        evaluator=evaluator_name(evaluator),
        evaluator_version=getattr(evaluator, "version", None),
        passed=False,
        status="skipped",
        reason=reason,
    )


def timed_out_result(evaluator: Any, timeout_s: float | None) -> EvaluationResult:
    """The result of an evaluation our deadline cut short."""
    return failed_result(evaluator, TIMEOUT_ERROR_TYPE, f"timed out after {timeout_s} s", timeout=True)


def _unit_field(unit: Any, name: str) -> str:
    """A field of the judged unit: a Trace has them all; a Conversation (session scope) is its session's case."""
    value = getattr(unit, name, None)
    if value is None and name == "case_id":
        value = getattr(unit, "session_id", None)
    return value if isinstance(value, str) else ""


_STAMPED = _STAMPED_FIELDS
"""The fields :func:`stamp` always sets (``evaluator_version`` too, when it fills it)."""


def stamp(result: EvaluationResult, evaluator: Any, trace: Trace, started: dt.datetime) -> EvaluationResult:
    """Return ``result`` stamped with the trace's run, case and variant, the evaluator, and the call's times."""
    version = getattr(evaluator, "version", None)
    finished = dt.datetime.now(dt.UTC)  # _now(), without its call
    if finished < started:  # max(started, now), without its call (an equal time is the same value either way)
        finished = started
    if (
        type(result) is EvaluationResult
        and (version is None or type(version) is str)
        and isinstance(trace, Trace)  # a lazily mapped one too (its identity is always set)
        and result.__pydantic_extra__ is None
        and result.__pydantic_private__ is None
    ):
        # The common case, in one step: what trusted_copy(result, updates) below builds (the same __dict__ in
        # field order, the same fields set), without the updates dict and its call.
        data = result.__dict__
        # A copy of it with these fields stored in it, in the literal's order: the same dict as
        # ``{**data, "evaluator": ..., ...}``, without that literal's second dict (~3k). A key data already holds
        # keeps its place; one it lacks (a hand-edited dict) is appended, in the same order in both versions.
        stamped = data.copy()
        stamped["evaluator"] = data["evaluator"] or evaluator_name(evaluator)
        stamped["run_id"] = trace.run_id
        stamped["case_id"] = trace.case_id
        stamped["variant_name"] = trace.variant_name
        stamped["started_at"] = started
        stamped["finished_at"] = finished
        fields_set = result.__pydantic_fields_set__ | _STAMPED
        if version is not None and data["evaluator_version"] is None:
            stamped["evaluator_version"] = version
            fields_set.add("evaluator_version")
        return from_template(EvaluationResult, stamped, fields_set)
    updates: dict[str, Any] = {"evaluator": result.evaluator or evaluator_name(evaluator)}
    if result.evaluator_version is None and version is not None:
        updates["evaluator_version"] = version
    if version is None or isinstance(version, str):
        # Every value is of its field's type already (the trace's validated strings, aware UTC datetimes in
        # order), so an unvalidated copy is the same result as stamped()'s dump-and-validate, at a fraction of
        # its cost (it was the largest part of a cheap evaluator's cost per span).
        is_trace = isinstance(trace, Trace)
        updates["run_id"] = trace.run_id if is_trace else _unit_field(trace, "run_id")
        updates["case_id"] = trace.case_id if is_trace else _unit_field(trace, "case_id")
        updates["variant_name"] = trace.variant_name if is_trace else _unit_field(trace, "variant_name")
        updates["started_at"] = started
        updates["finished_at"] = finished
        return trusted_copy(result, updates)
    return result.stamped(
        run_id=_unit_field(trace, "run_id"),
        case_id=_unit_field(trace, "case_id"),
        variant_name=_unit_field(trace, "variant_name"),
        started_at=started,
        finished_at=finished,
        **updates,
    )
