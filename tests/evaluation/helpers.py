"""Small builders shared by the evaluation tests."""

from __future__ import annotations

import datetime as dt

from evaltrace.schema import Trace


def make_trace(answer: str = "Paris is the capital of France.") -> Trace:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return Trace(
        run_id="live",
        case_id="c1",
        variant_name="svc",
        started_at=now,
        finished_at=now + dt.timedelta(milliseconds=5),
        output={"final_answer": answer},
    )
