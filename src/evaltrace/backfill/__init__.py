"""Re-judging stored traces (backfill): evaluators run over traces that already exist, without the application.

Entry points: :func:`evaltrace.evaluate_traces` and ``evaltrace evaluate``. See docs/evaluation.md,
"Re-judge stored traces".
"""

from __future__ import annotations

from evaltrace.backfill.api import evaluate_traces
from evaltrace.backfill.engine import BackfillReport, BackfillStoreError

__all__ = ["BackfillReport", "BackfillStoreError", "evaluate_traces"]
