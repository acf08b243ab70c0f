"""Production monitoring: per-evaluator pass rate over a sliding window, with health thresholds.

Status per evaluator (data-model.md part D): ``healthy``; ``warning`` when the pass rate is below 0.85;
``critical`` below 0.70; ``insufficient_data`` when nothing was judged in the window (or fewer than
``min_samples``). The pass rate and the status come from judgements (pass/fail) only: an evaluation that
errored (a judge outage, a timeout) or was not evaluated (skipped) is counted on its own (``errors``,
``skipped``, ``error_rate``), so an outage of the judge shows as a rising error rate, never as a collapse of
the pass rate. Each sample keeps 200-character previews of the query and output, the score and ``passed``.
Memory is bounded by ``max_samples`` per evaluator (and per kind of non-verdict).

The evaluation pipeline may hand over a query still to render (an object with ``render() -> str``, holding a short
text: ``_preview.PendingQuery``): its preview is made when :meth:`ProductionMonitor.samples` first reads the sample,
not for every result (most samples are never read).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from evaltrace._internal.errors import log_internal_error
from evaltrace.evaluation._preview import PendingQuery
from evaltrace.evaluation.convert import JUDGED, result_outcome
from evaltrace.schema import EvaluationResult

HealthStatus = Literal["healthy", "warning", "critical", "insufficient_data"]
WARNING_BELOW = 0.85
CRITICAL_BELOW = 0.70
PREVIEW_CHARS = 200
_new = object.__new__
_setattr = object.__setattr__


@dataclass(frozen=True)
class MonitorSample:
    """One evaluated interaction as the monitor keeps it."""

    at: float
    passed: bool
    score: float | None
    query_preview: str
    output_preview: str


class DeferredQuery(Protocol):
    """A query the monitor renders when its sample is first read."""

    def render(self) -> str:
        """The query text (the monitor keeps its first ``PREVIEW_CHARS`` characters)."""
        ...


class _Pending:
    """A judgement's sample whose query preview is made on first read (``samples()``); ``sample`` once made."""

    __slots__ = ("at", "output_preview", "passed", "query", "sample", "score")
    at: float
    passed: bool
    score: float | None
    query: DeferredQuery | None  # None once rendered: the kept text is let go
    output_preview: str
    sample: MonitorSample | None

    def made(self) -> MonitorSample:
        """The sample (made once; two readers at once may both make it, equal, and keep one)."""
        sample = self.sample
        if sample is None:
            query = self.query
            try:
                text = query.render() if query is not None else ""
            except Exception:  # a bug of ours: an empty preview, as when the Trace's input failed to map
                log_internal_error("rendering a monitor sample's query preview")
                text = ""
            sample = MonitorSample(self.at, self.passed, self.score, text[:PREVIEW_CHARS], self.output_preview)
            if self.sample is None:
                self.sample = sample
                self.query = None
            sample = self.sample
        return sample


@dataclass(frozen=True)
class EvaluatorHealth:
    """Health of one evaluator over the window.

    Attributes:
        evaluator: Evaluator name.
        sample_count: Judged evaluations (pass or fail) in the window.
        pass_rate: Share of the judged ones that passed, or None without any.
        average_score: Mean score of the samples that have one, or None.
        status: ``healthy`` / ``warning`` / ``critical`` / ``insufficient_data``, from the judged ones only.
        errors: Evaluations in the window that errored (status ``failed``): not in ``pass_rate``.
        skipped: Evaluations in the window that were not evaluated (status ``skipped``): not in any rate.
        error_rate: ``errors / (sample_count + errors)``, or None when neither happened.
    """

    evaluator: str
    sample_count: int
    pass_rate: float | None
    average_score: float | None
    status: HealthStatus
    errors: int = 0
    skipped: int = 0
    error_rate: float | None = None


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
        self._samples: dict[str, deque[MonitorSample | _Pending]] = {}
        # When each non-verdict happened, per evaluator: {"error" | "not_evaluated": deque of clock times}.
        self._non_verdicts: dict[str, dict[str, deque[float]]] = {}
        self._lock = threading.Lock()

    def register(self, evaluator: str) -> None:
        """Make ``evaluator`` appear in :meth:`health` even before it has samples."""
        with self._lock:
            self._samples.setdefault(evaluator, deque(maxlen=self._max_samples))

    def record(
        self,
        result: EvaluationResult,
        query: str | DeferredQuery | None = None,
        output: str | None = None,
        outcome: str | None = None,
    ) -> None:
        """Add a result: a judgement becomes a sample; an error or a skip is only counted (it is no verdict).

        ``query``: the query text, or one rendered when the sample is first read (see the module's docstring).
        ``outcome``: ``result_outcome(result)``, when the caller has it already.
        """
        if outcome is None:
            outcome = result_outcome(result)
        if outcome not in JUDGED:  # not is_judged(outcome), without its call
            at = self._clock()
            with self._lock:
                self._samples.setdefault(result.evaluator, deque(maxlen=self._max_samples))
                if outcome != "pending":
                    kinds = self._non_verdicts.setdefault(result.evaluator, {})
                    kinds.setdefault(outcome, deque(maxlen=self._max_samples)).append(at)
            return
        # Our own result class's fields from its instance dict: a pydantic model's attribute read takes the generic
        # lookup (~300 instructions each); any other class (a subclass may override a field) is read as before.
        if type(result) is EvaluationResult:
            values = result.__dict__
            name, passed, score = values["evaluator"], values["passed"], values["score"]
        else:
            name, passed, score = result.evaluator, result.passed, result.score
        entry: MonitorSample | _Pending
        # The pipeline's deferred query first (every judgement of a short text input): its exact type costs no
        # isinstance() walk of its class's bases.
        if type(query) is not PendingQuery and (query is None or isinstance(query, str)):
            # _sample(...) inline: this runs for every judgement.
            entry = _new(MonitorSample)
            _setattr(
                entry,
                "__dict__",
                {
                    "at": self._clock(),
                    "passed": passed,
                    "score": score,
                    "query_preview": (query or "")[:PREVIEW_CHARS],
                    "output_preview": (output or "")[:PREVIEW_CHARS],
                },
            )
        else:  # _Pending() (no __init__ of its own: cheaper than object.__new__(_Pending), which slices its args)
            entry = _Pending()
            entry.at, entry.passed, entry.score = self._clock(), passed, score
            entry.query, entry.output_preview, entry.sample = query, (output or "")[:PREVIEW_CHARS], None
        # lock.acquire() and a finally, not ``with``: the with statement builds two bound methods (~1k instructions).
        lock = self._lock
        lock.acquire()
        try:
            samples = self._samples.get(name)
            if samples is None:  # not setdefault: it would build a deque on every call
                samples = self._samples[name] = deque(maxlen=self._max_samples)
            samples.append(entry)
        finally:
            lock.release()

    def samples(self, evaluator: str) -> list[MonitorSample]:
        """Return the samples of ``evaluator`` still in the window, oldest first."""
        window = self._window(evaluator)
        # Previews still to render are made here, outside the lock (results keep coming in meanwhile).
        return [entry.made() if isinstance(entry, _Pending) else entry for entry in window]

    def _window(self, evaluator: str) -> list[MonitorSample | _Pending]:
        """The kept entries of ``evaluator`` still in the window, oldest first (previews not rendered)."""
        horizon = self._clock() - self.window_s
        with self._lock:
            return [s for s in self._samples.get(evaluator, ()) if s.at >= horizon]

    def health(self) -> dict[str, EvaluatorHealth]:
        """Return the health of every evaluator seen, keyed by name."""
        with self._lock:
            names = sorted(self._samples)
        return {name: self._health_of(name) for name in names}

    def _non_verdicts_in_window(self, name: str, outcome: str) -> int:
        horizon = self._clock() - self.window_s
        with self._lock:
            return sum(1 for at in self._non_verdicts.get(name, {}).get(outcome, ()) if at >= horizon)

    def _health_of(self, name: str) -> EvaluatorHealth:
        window = self._window(name)  # passed, score: no preview needed
        count = len(window)
        pass_rate = sum(s.passed for s in window) / count if count else None
        scores = [s.score for s in window if s.score is not None]
        average = sum(scores) / len(scores) if scores else None
        errors = self._non_verdicts_in_window(name, "error")
        skipped = self._non_verdicts_in_window(name, "not_evaluated")
        error_rate = errors / (count + errors) if count + errors else None
        status = health_status(pass_rate, count, self.min_samples)
        return EvaluatorHealth(name, count, pass_rate, average, status, errors, skipped, error_rate)
