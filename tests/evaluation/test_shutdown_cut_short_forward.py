"""A raising forward when shutdown cuts a job short (``cancel_now``): the span is exported or counted, never lost.

A job submitted once the engine stopped (as one left in its inbox at shutdown) is cut short at once on the
submitting thread (``Engine._cut_short``, ``JobRunner.cancel_now``). A bug of ours in the forward path (the
forward raising, patched in here) must not lose its span uncounted: as shutdown's take-over does
(``_job_cuts.forward_or_count``), it is then an internal error and counted in ``dropped_at_shutdown``.
"""

from __future__ import annotations

from typing import Any

import pytest

from evaltrace.evaluation import evaluator
from evaltrace.schema import Trace

from .conftest import MakePipeline, wait_until


@pytest.mark.parametrize("raising", ["enriched-forward", "every-forward"])
def test_a_raising_forward_in_a_job_cut_short_at_shutdown_is_counted_never_lost(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch, raising: str
) -> None:
    """``enriched-forward``: the marked span's forward raises, the span goes as it is (exported, unmarked);
    ``every-forward``: that forward raises too, the span is counted dropped (``evaluation_loop_stalled``) and as
    an internal error. Either way exported + counted = produced, and the job's queue slot is given back.

    Before, the enriched span's forward raising left the job claimed and marked forwarded: its span was neither
    exported nor counted (one forward attempted, none as it is).
    """

    @evaluator(name="quick")
    def quick(trace: Trace) -> bool:
        return True

    p = make_pipeline([quick])
    with p.tracer.start_as_current_span("before"):
        pass
    assert wait_until(lambda: p.processor.stats()["queued"] == 0, 30)  # the engine's threads are up and idle
    p.processor._engine.stop(1.0)  # a job submitted from here is cut short at once, as one left in its inbox
    ctx = p.processor._runner.ctx
    original = ctx.forward
    calls: list[str] = []

    def forward(span: Any) -> None:
        calls.append(span.name)
        if raising == "every-forward" or len(calls) == 1:
            raise RuntimeError("a bug of ours in the forward path")
        original(span)

    monkeypatch.setattr(ctx, "forward", forward)
    with p.tracer.start_as_current_span("cut"):
        pass
    monkeypatch.setattr(ctx, "forward", original)
    stats = p.processor.stats()
    exported = [span for span in p.spans() if span.name == "cut"]
    dropped = stats["dropped_at_shutdown_by_reason"].get("evaluation_loop_stalled", 0)
    assert calls == ["cut", "cut"]  # the marked span, then the span as it is
    assert len(exported) + dropped == 1
    if raising == "every-forward":
        assert dropped == 1 and stats["internal_errors"] >= 1
    else:
        assert dropped == 0 and not any(key.startswith("evaltrace.eval.") for key in exported[0].attributes or {})
    assert stats["cancelled"] == 1
    assert stats["not_evaluated_by_reason"] == {"shutdown": 1}
    assert stats["queued"] == 0  # the job's slot is given back
