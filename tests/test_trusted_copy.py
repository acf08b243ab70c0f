"""trusted_copy: the stamped result's cheap copy equals pydantic's model_copy, fields set included."""

from __future__ import annotations

import datetime as dt

from evaltrace._internal.trusted_models import trusted, trusted_copy
from evaltrace.schema import EvaluationResult

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(milliseconds=7)


def test_trusted_copy_equals_model_copy() -> None:
    values = {"evaluator": "x", "passed": True, "started_at": NOW, "finished_at": NOW, "evaluation_id": "e"}
    original = trusted(EvaluationResult, None, **values)
    update = {"run_id": "live", "case_id": "c", "started_at": NOW, "finished_at": LATER, "evaluator_version": "2"}
    copied, reference = trusted_copy(original, dict(update)), original.model_copy(update=dict(update))
    assert copied == reference
    assert list(copied.__dict__) == list(reference.__dict__)
    assert copied.model_fields_set == reference.model_fields_set == set(values) | set(update)
    assert copied.model_dump() == reference.model_dump()
    assert copied.latency_ms == 7
    # A copy: the original is unchanged and its containers are shared as model_copy shares them (shallow).
    assert original.run_id != "live" and original.model_fields_set == set(values)
    assert copied.detail is original.detail
