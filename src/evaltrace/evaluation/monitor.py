"""Production monitoring: per-evaluator pass rate over a sliding window, with health thresholds.

Status per evaluator (data-model.md part D): ``healthy``; ``warning`` when the pass rate is below 0.85;
``critical`` below 0.70; ``insufficient_data`` when nothing was sampled in the window (or fewer than
``min_samples``). Each sample keeps 200-character previews of the query and output, the score and ``passed``.
Memory is bounded by ``max_samples`` per evaluator.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from evaltrace.schema import EvaluationResult

HealthStatus = Literal["healthy", "warning", "critical", "insufficient_data"]
WARNING_BELOW = 0.85
CRITICAL_BELOW = 0.70
PREVIEW_CHARS = 200


@dataclass(frozen=True)
class MonitorSample:
    """One evaluated interaction as the monitor keeps it."""

    at: float
    passed: bool
    score: float | None
    query_preview: str
    output_preview: str


@dataclass(frozen=True)
class EvaluatorHealth:
    """Health of one evaluator over the window.

    Attributes:
        evaluator: Evaluator name.
        sample_count: Completed evaluations in the window (failed/skipped ones are not judgements).
        pass_rate: Share that passed, or None without samples.
        average_score: Mean score of the samples that have one, or None.
        status: ``healthy`` / ``warning`` / ``critical`` / ``insufficient_data``.
    """

    evaluator: str
    sample_count: int
    pass_rate: float | None
    average_score: float | None
    status: HealthStatus


def health_status(pass_rate: float | None, samples: int, min_samples: int = 1) -> HealthStatus:
    """Classify a pass rate: insufficient data, critical (< 0.70), warning (< 0.85) or healthy."""
    if pass_rate is None or samples < max(1, min_samples):
        return "insufficient_data"
    if pass_rate < CRITICAL_BELOW:
        return "critical"
    if pass_rate < WARNING_BELOW:
        return "warning"
    return "healthy"


class ProductionMonitor:
    """Sliding-window view of live evaluation results.

    Args:
        window_s: Window length in seconds.
        min_samples: Samples needed before a status other than ``insufficient_data`` is given.
        max_samples: Samples kept per evaluator (the oldest are dropped first).
        clock: Monotonic clock (tests pass a fake one).
    """

    def __init__(
        self,
        window_s: float = 3600.0,
        *,
        min_samples: int = 1,
        max_samples: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_s = window_s
        self.min_samples = min_samples
        self._max_samples = max_samples
        self._clock = clock
        self._samples: dict[str, deque[MonitorSample]] = {}
        self._lock = threading.Lock()

    def register(self, evaluator: str) -> None:
        """Make ``evaluator`` appear in :meth:`health` even before it has samples."""
        with self._lock:
            self._samples.setdefault(evaluator, deque(maxlen=self._max_samples))

    def record(self, result: EvaluationResult, query: str | None = None, output: str | None = None) -> None:
        """Add a completed result (failed and skipped evaluations are ignored: they are not verdicts)."""
        if result.status != "completed":
            self.register(result.evaluator)
            return
        sample = MonitorSample(
            at=self._clock(),
            passed=result.passed,
            score=result.score,
            query_preview=(query or "")[:PREVIEW_CHARS],
            output_preview=(output or "")[:PREVIEW_CHARS],
        )
        with self._lock:
            self._samples.setdefault(result.evaluator, deque(maxlen=self._max_samples)).append(sample)

    def samples(self, evaluator: str) -> list[MonitorSample]:
        """Return the samples of ``evaluator`` still in the window, oldest first."""
        horizon = self._clock() - self.window_s
        with self._lock:
            return [s for s in self._samples.get(evaluator, ()) if s.at >= horizon]

    def health(self) -> dict[str, EvaluatorHealth]:
        """Return the health of every evaluator seen, keyed by name."""
        with self._lock:
            names = sorted(self._samples)
        return {name: self._health_of(name) for name in names}

    def _health_of(self, name: str) -> EvaluatorHealth:
        window = self.samples(name)
        count = len(window)
        pass_rate = sum(s.passed for s in window) / count if count else None
        scores = [s.score for s in window if s.score is not None]
        average = sum(scores) / len(scores) if scores else None
        return EvaluatorHealth(name, count, pass_rate, average, health_status(pass_rate, count, self.min_samples))
