"""Counters and latency summaries of the evaluation pipeline, returned by ``processor.stats()``.

Each finished evaluation is counted under one outcome: ``passed`` / ``failed`` (judgements), ``errors`` (the
evaluation itself failed: timeout, unreachable judge, evaluator bug) or ``skipped`` (not evaluated). Pass rates
are over judgements only, so a judge outage raises ``error_rate`` and leaves ``pass_rate`` alone.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaltrace.evaluation.convert import result_outcome, skip_reason
from evaltrace.evaluation.skip_reasons import count_skip_reason, skip_reason_key
from evaltrace.schema import EvaluationResult

_LATENCY_SAMPLES = 1024


def percentile(values: list[float], fraction: float) -> float | None:
    """Return the nearest-rank percentile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


def _ticks(tick: itertools.count[int]) -> int:
    """Calls made to a ticker started at 1: its next number minus 1.

    Read from ``repr`` (``count(N)``): ``__reduce__`` is deprecated for itertools since Python 3.12.
    """
    return int(repr(tick)[6:-1]) - 1


@dataclass(slots=True)
class _EvaluatorCounters:
    evaluated: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    timed_out: int = 0
    skipped: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=_LATENCY_SAMPLES))


_COUNTER_OF_OUTCOME = {"pass": "passed", "fail": "failed", "error": "errors", "not_evaluated": "skipped"}


# Why a span was dropped at shutdown instead of going downstream (``stats()["dropped_at_shutdown_by_reason"]``):
# shutdown took over a job the evaluation loop had not finished and could not build its child evaluation spans (a
# bug of ours; the job's own span always goes out), or it was forwarded after the downstream processors shut down.
DROP_LOOP_STALLED = "evaluation_loop_stalled"
DROP_AFTER_SHUTDOWN = "after_downstream_shutdown"


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
            "passed": 0,
            "failed": 0,
            "errors": 0,
            "timed_out": 0,
            "skipped": 0,
            "retries": 0,
            "sampled_out": 0,
            "score_rejects": 0,
            "log_events": 0,
            "internal_errors": 0,
            "cancelled": 0,
            "unflushed_jobs": 0,
            "reevaluations": 0,
            "superseded": 0,
            "dropped_at_shutdown": 0,
        }
        self._dropped_at_shutdown: dict[str, int] = {}
        self._by_evaluator: dict[str, _EvaluatorCounters] = {}
        # Evaluations an evaluator could have run and did not, by reason: {reason: {evaluator: count}}.
        self._not_evaluated: dict[str, dict[str, int]] = {}
        # Hot-path counters (a skip decided on the application thread): itertools.count's next() is one C call,
        # atomic under the GIL, no lock; their values are added to the locked counts when read.
        self._tickers: dict[tuple[str, str], itertools.count[int]] = {}
        # The evaluators' own skips (results, counted in ``skipped``) by the reason stored on the span.
        self._skipped_by_reason: dict[str, int] = {}
        # ``enqueued``, counted once per admitted span on the application thread: a ticker like the ones above
        # (one C call, no lock; ``incr("enqueued")`` took the lock, ~3.6k instructions per span), added to the
        # locked count when read. Exact under threads: itertools.count's next() holds the GIL for the whole step.
        self._enqueued_tick: itertools.count[int] = itertools.count(1)
        self.enqueued: Callable[[], int] = self._enqueued_tick.__next__
        """Count one span admitted for evaluation (``counters["enqueued"]`` in :meth:`snapshot`)."""

    def incr(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``name``."""
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + amount

    def dropped_at_shutdown(self, reason: str, amount: int = 1) -> None:
        """Count ``amount`` spans that shutdown dropped instead of forwarding, for ``reason`` (``DROP_*``)."""
        with self._lock:
            self.counters["dropped_at_shutdown"] += amount
            self._dropped_at_shutdown[reason] = self._dropped_at_shutdown.get(reason, 0) + amount

    def not_evaluated(self, reason: str, evaluator: str, amount: int = 1) -> None:
        """Count ``amount`` evaluations of ``evaluator`` not run for ``reason`` (``sampled_out``, ``queue_full``...)."""
        with self._lock:
            self._by_evaluator.setdefault(evaluator, _EvaluatorCounters())  # listed with zeros, like the rest
            per = self._not_evaluated.setdefault(reason, {})
            per[evaluator] = per.get(evaluator, 0) + amount

    def ticker(self, reason: str, evaluator: str) -> Callable[[], int]:
        """Return a lock-free counter of ``evaluator`` not run for ``reason``: each call counts one.

        For the application thread's hot path; counted exactly like :meth:`not_evaluated` (and, for
        ``sampled_out``, in the ``sampled_out`` counter too).
        """
        with self._lock:
            self._by_evaluator.setdefault(evaluator, _EvaluatorCounters())
            tick = self._tickers.setdefault((reason, evaluator), itertools.count(1))
        return tick.__next__

    def _merged_not_evaluated(self) -> dict[str, dict[str, int]]:
        """Under the lock: the locked counts plus the tickers' (a ticker's value is its next number minus 1)."""
        merged = {reason: dict(per) for reason, per in self._not_evaluated.items()}
        for (reason, evaluator), tick in self._tickers.items():
            ticks = _ticks(tick)
            if ticks:
                per = merged.setdefault(reason, {})
                per[evaluator] = per.get(evaluator, 0) + ticks
        return merged

    def _ticked(self, reason: str) -> int:
        return sum(_ticks(t) for (r, _), t in self._tickers.items() if r == reason)

    def not_evaluated_counts(self) -> dict[str, dict[str, int]]:
        """Return a copy of ``{reason: {evaluator: count}}`` (for the not-evaluated metric)."""
        with self._lock:
            return self._merged_not_evaluated()

    def record(self, result: EvaluationResult, outcome: str | None = None) -> None:
        """Count one finished evaluation under its outcome (``result_outcome(result)``, when the caller has it)."""
        if outcome is None:
            outcome = result_outcome(result)
        # Outside the lock the application's threads count skips under: the latency (result.latency_ms without
        # the property or whole_ms()'s frame for our own class, whose fields are read from its instance dict: a
        # pydantic model's attribute read takes the generic lookup, ~300 instructions each; a user subclass may
        # override the property). whole_ms() floors the microseconds to milliseconds; a normalized timedelta's
        # days and seconds are whole milliseconds, so only its microseconds need the floor division (~600
        # instructions less than dividing by a timedelta, which converts both operands to microseconds).
        if type(result) is EvaluationResult:
            values = result.__dict__
            delta = values["finished_at"] - values["started_at"]
            latency_ms = float(delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000)
            error = values["error"]
            name = values["evaluator"]
        else:
            latency_ms = float(result.latency_ms)
            error = result.error
            name = result.evaluator
        timed_out = error is not None and error.type == "timeout"
        counters = self.counters
        # lock.acquire() and a finally, not ``with``: the with statement builds two bound methods (~1k instructions).
        lock = self._lock
        if outcome == "pass" or outcome == "fail":  # a judgement (every result of a healthy pipeline): no reason
            lock.acquire()
            try:
                per = self._by_evaluator.get(name)
                if per is None:  # not setdefault: it would build a counters object (and its deque) on every call
                    per = self._by_evaluator[name] = _EvaluatorCounters()
                per.evaluated += 1
                per.latencies_ms.append(latency_ms)
                counters["evaluated"] += 1
                if outcome == "pass":
                    per.passed += 1
                    counters["passed"] += 1
                else:
                    per.failed += 1
                    counters["failed"] += 1
                if timed_out:
                    per.timed_out += 1
                    counters["timed_out"] += 1
            finally:
                lock.release()
            return
        key = _COUNTER_OF_OUTCOME.get(outcome)
        # Outside the lock: capping and matching the reason is bounded work. "" marks a skip counted as ``other``.
        reason = (skip_reason_key(skip_reason(result)) or "") if key == "skipped" else None
        with lock:
            per = self._by_evaluator.get(name)
            if per is None:
                per = self._by_evaluator[name] = _EvaluatorCounters()
            per.evaluated += 1
            per.latencies_ms.append(latency_ms)
            counters["evaluated"] += 1
            if key is not None:
                setattr(per, key, getattr(per, key) + 1)
                counters[key] += 1
                if reason is not None:
                    count_skip_reason(per.skipped_by_reason, reason)
                    count_skip_reason(self._skipped_by_reason, reason)
            if timed_out:
                per.timed_out += 1
                counters["timed_out"] += 1

    def snapshot(self) -> dict[str, Any]:
        """Return a copy of the counters plus per-evaluator figures.

        ``evaluators`` maps each name to ``evaluated, passed, failed, errors, timed_out, skipped,
        skipped_by_reason, pass_rate, error_rate, latency_ms_p50, latency_ms_p95``: ``failed`` counts judgements
        that failed, ``errors`` evaluations that errored (``timed_out`` is the subset that timed out); ``pass_rate``
        is ``passed / (passed + failed)`` and ``error_rate`` ``errors / (passed + failed + errors)`` (None when
        their denominator is 0); skipped evaluations are in neither. ``skipped_by_reason`` (also in total) breaks
        ``skipped``, the evaluators' own "not evaluated" results, down by the reason stored on the span
        (``evaltrace.eval.<name>.skip_reason``): a code of evaltrace's own (``no_answer``, :data:`~evaltrace.evaluation.skip_reasons.SKIP_CODES`;
        ``skipped`` when the result gave none) or an identifier-like token (``no_reference``: lowercase letters,
        digits, ``_.-``, at most 64, the first :data:`~evaltrace.evaluation.skip_reasons.MAX_SKIP_REASON_TOKENS` per evaluator and in total);
        any other reason (free text) is counted under ``other``, so its counts sum to ``skipped``. ``not_evaluated_by_reason`` counts the
        evaluations that were never started (``sampled_out``, ``filtered``, ``queue_full``, ``rate_limited``,
        ``over_budget``, ``trace_incomplete``, ``mapping_failed``, ``shutdown``, ...), in total and, under each evaluator's entry, per evaluator.
        """
        with self._lock:
            data: dict[str, Any] = dict(self.counters)
            data["sampled_out"] += self._ticked("sampled_out")
            data["enqueued"] += _ticks(self._enqueued_tick)
            not_evaluated = self._merged_not_evaluated()
            evaluators: dict[str, Any] = {}
            for name, per in self._by_evaluator.items():
                latencies = list(per.latencies_ms)
                judged = per.passed + per.failed
                evaluators[name] = {
                    "evaluated": per.evaluated,
                    "passed": per.passed,
                    "failed": per.failed,
                    "errors": per.errors,
                    "timed_out": per.timed_out,
                    "skipped": per.skipped,
                    "skipped_by_reason": dict(per.skipped_by_reason),
                    "pass_rate": per.passed / judged if judged else None,
                    "error_rate": per.errors / (judged + per.errors) if judged + per.errors else None,
                    "latency_ms_p50": percentile(latencies, 0.50),
                    "latency_ms_p95": percentile(latencies, 0.95),
                }
            by_reason = {reason: sum(counts.values()) for reason, counts in not_evaluated.items()}
            data["skipped_by_reason"] = dict(self._skipped_by_reason)
            data["dropped_at_shutdown_by_reason"] = dict(self._dropped_at_shutdown)
            for reason, counts in not_evaluated.items():
                for name, count in counts.items():
                    evaluators[name].setdefault("not_evaluated_by_reason", {})[reason] = count
        data["evaluators"] = evaluators
        data["not_evaluated_by_reason"] = by_reason
        return data
