"""What a run (or re-evaluation) reports: progress as it goes, its outcome at the end, and its scores pushed.

Shared by every stage of :mod:`evaltrace.runner.engine` (execute, evaluate, summarise, store) and by ``runs merge``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from evaltrace.evaluation.sinks.base import ScoreSink
from evaltrace.runner.rundir import RunDirectory
from evaltrace.runner.score_push import push_scores, run_scores
from evaltrace.schema import EvaluationResult, RunSummary, Trace

__all__ = ["Cell", "NullProgress", "ProgressReporter", "RunOutcome", "push_run_scores"]


class ProgressReporter(Protocol):
    """Receives progress of the two phases (executing, evaluating)."""

    def start(self, description: str, total: int) -> None:
        """A phase of ``total`` steps begins."""
        ...

    def advance(self) -> None:
        """One step of the current phase is done."""
        ...


class NullProgress:
    """Reports nothing."""

    def start(self, description: str, total: int) -> None:
        """Ignore."""

    def advance(self) -> None:
        """Ignore."""


@dataclass
class RunOutcome:
    """What a run (or re-evaluation) produced.

    Attributes:
        run: The run directory.
        summary: The summary written to summary.yaml.
        traces: The traces (as in traces.jsonl).
        results: The evaluation results (as in results.jsonl).
        notes: Things the user should know (e.g. ``--drift`` without a promoted baseline).
        stored: The stores (``output:``, ``--sqlite``, ``--postgres``) the run was saved to.
        store_errors: One message per store that could not save the run (the run directory is complete).
    """

    run: RunDirectory
    summary: RunSummary
    traces: list[Trace]
    results: list[EvaluationResult]
    notes: list[str] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    store_errors: list[str] = field(default_factory=list)


Cell = tuple[str, str]
"""(case id, variant name)."""


def push_run_scores(outcome: RunOutcome, sinks: Sequence[str | ScoreSink]) -> None:
    """Send a finished run's scores to ``sinks``, recording each sink with the stores (a failure exits 3)."""
    if not sinks:
        return
    scores = run_scores(outcome.summary, outcome.traces, outcome.results)
    delivered, failed = push_scores(sinks, scores, outcome.run.path)
    outcome.stored += delivered
    outcome.store_errors += failed
