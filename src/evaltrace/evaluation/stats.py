"""Counters and latency summaries of the evaluation pipeline, returned by ``processor.stats()``."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from evaltrace.schema import EvaluationResult

_LATENCY_SAMPLES = 1024


def percentile(values: list[float], fraction: float) -> float | None:
    """Return the nearest-rank percentile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class _EvaluatorCounters:
    evaluated: int = 0
    passed: int = 0
    failed: int = 0
    timed_out: int = 0
    skipped: int = 0
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=_LATENCY_SAMPLES))


class PipelineStats:
    """Thread-safe counters; every increment is a few dict operations under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: dict[str, int] = {
            "enqueued": 0,
            "dropped": 0,
            "enriched": 0,
            "held_timeout": 0,
            "evaluation_spans": 0,
            "evaluated": 0,
            "failed": 0,
            "timed_out": 0,
            "skipped": 0,
            "retries": 0,
            "sampled_out": 0,
            "score_rejects": 0,
            "log_events": 0,
            "internal_errors": 0,
            "cancelled": 0,
            "unflushed_jobs": 0,
        }
        self._by_evaluator: dict[str, _EvaluatorCounters] = {}

    def incr(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``name``."""
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + amount

    def record(self, result: EvaluationResult) -> None:
        """Count one finished evaluation."""
        timed_out = result.error is not None and result.error.type == "timeout"
        with self._lock:
            per = self._by_evaluator.setdefault(result.evaluator, _EvaluatorCounters())
            per.evaluated += 1
            per.latencies_ms.append(float(result.latency_ms))
            self.counters["evaluated"] += 1
            if result.status == "failed":
                per.failed += 1
                self.counters["failed"] += 1
            elif result.status == "skipped":
                per.skipped += 1
                self.counters["skipped"] += 1
            elif result.passed:
                per.passed += 1
            if timed_out:
                per.timed_out += 1
                self.counters["timed_out"] += 1

    def snapshot(self) -> dict[str, Any]:
        """Return a copy of the counters plus per-evaluator figures.

        ``evaluators`` maps each name to ``evaluated, passed, failed, timed_out, skipped, pass_rate,
        latency_ms_p50, latency_ms_p95``; ``pass_rate`` is over completed evaluations.
        """
        with self._lock:
            data: dict[str, Any] = dict(self.counters)
            evaluators: dict[str, Any] = {}
            for name, per in self._by_evaluator.items():
                latencies = list(per.latencies_ms)
                completed = per.evaluated - per.failed - per.skipped
                evaluators[name] = {
                    "evaluated": per.evaluated,
                    "passed": per.passed,
                    "failed": per.failed,
                    "timed_out": per.timed_out,
                    "skipped": per.skipped,
                    "pass_rate": per.passed / completed if completed else None,
                    "latency_ms_p50": percentile(latencies, 0.50),
                    "latency_ms_p95": percentile(latencies, 0.95),
                }
        data["evaluators"] = evaluators
        return data
