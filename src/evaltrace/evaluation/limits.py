"""Rate limits and judge budgets of the evaluation processor: what may run now, and what it has spent.

A :class:`Limits` is set per evaluator (``EvaluatorSpec.limits``) and once for the whole processor
(``ProcessorOptions.limits``); an evaluation runs only when both allow it. The checks run in ``on_end`` on the
application thread, so each is O(1) under one lock: a token bucket for evaluations per second, fixed windows
(an hour, a day, counted from the processor's clock) for judge tokens and USD. What is refused is not queued: it
becomes a "not evaluated" result with the skip reason ``rate_limited`` or ``over_budget``, never a fail.

With a Redis URL (the ``redis_url`` option, ``evaltrace worker --redis-url``) the rate limits and budgets are
kept in Redis and hold across every replica (see :mod:`evaltrace.evaluation.shared_limits`); concurrency slots
stay per process. Without one, every process has its own.

Spend is charged when a result comes back, from the judge's own usage (``detail["judge"]``: the tokens in its
replies, priced by :mod:`evaltrace.pricing`, the source the application's LLM spans use), so evaluations already
running when a budget runs out still finish: a budget can be overshot by at most the evaluations in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaltrace._internal import semconv
from evaltrace._internal.errors import ErrorEpisode
from evaltrace.exceptions import ConfigError

if TYPE_CHECKING:
    from evaltrace.evaluation.shared_limits import SharedLimits

Clock = Callable[[], float]
HOUR_S = 3600.0
DAY_S = 86_400.0
RATE_LIMITED = semconv.SKIP_RATE_LIMITED
OVER_BUDGET = semconv.SKIP_OVER_BUDGET


@dataclass(frozen=True)
class Limits:
    """Caps on one evaluator's (or, on the processor, all evaluators') evaluations and judge spend.

    Every cap is off when None.

    Attributes:
        evaluations_per_second: Token-bucket rate of evaluations started.
        burst: Bucket size: evaluations allowed at once after a quiet spell (default: one second's worth, at
            least 1).
        max_tokens_per_hour: Judge tokens (input + output) per hour.
        max_tokens_per_day: Judge tokens per day.
        max_usd_per_hour: Judge cost in USD per hour.
        max_usd_per_day: Judge cost in USD per day.
        max_concurrent: Evaluations (hence judge calls) running at once; more wait for a slot inside the bounded
            evaluation queue.
    """

    evaluations_per_second: float | None = None
    burst: int | None = None
    max_tokens_per_hour: int | None = None
    max_tokens_per_day: int | None = None
    max_usd_per_hour: float | None = None
    max_usd_per_day: float | None = None
    max_concurrent: int | None = None

    def __post_init__(self) -> None:
        for name in ("evaluations_per_second", "max_usd_per_hour", "max_usd_per_day"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"limits.{name}", f"must not be negative, got {value}")
        for name in ("burst", "max_tokens_per_hour", "max_tokens_per_day", "max_concurrent"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"limits.{name}", f"must be a non-negative integer, got {value!r}")
        if self.max_concurrent == 0:
            raise ConfigError("limits.max_concurrent", "must be at least 1")

    @classmethod
    def coerce(cls, value: Limits | Mapping[str, Any] | None, where: str) -> Limits | None:
        """Accept a :class:`Limits`, a mapping of its fields (YAML, environment) or None.

        Raises:
            ConfigError: An unknown key or a bad value, named with ``where``.
        """
        if value is None or isinstance(value, Limits):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(where, f"must be a mapping of limits, got {type(value).__name__}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}", f"unknown limit; known: {', '.join(sorted(known))}")
        try:
            return cls(**value)
        except ConfigError as exc:  # name the key where the user wrote it, not in the dataclass
            raise ConfigError(exc.setting.replace("limits", where, 1), exc.problem) from None


class TokenBucket:
    """``rate`` tokens per second up to ``capacity``; :meth:`take` never blocks.

    The clock is first read by the first :meth:`available`, never when the bucket is made: a full bucket is full
    whenever it is first asked (a refill is capped at ``capacity``), so this decides exactly as reading it at
    creation would, and a clock that raises while limits are set up (``configure()``, a backfill's or the Ray
    limits actor's start) fails no set-up: it fails the admissions that read it, each refused as
    ``limits_unavailable`` like any failing limiter.
    """

    def __init__(self, rate: float, capacity: float, clock: Clock) -> None:
        self._rate = rate
        self._capacity = capacity
        self._tokens = capacity
        self._clock = clock
        self._at: float | None = None  # not read yet

    def available(self) -> bool:
        """Refill by the time passed; return True when a whole token is there (call under the owner's lock)."""
        now = self._clock()
        if self._at is not None:
            self._tokens = min(self._capacity, self._tokens + (now - self._at) * self._rate)
        self._at = now
        return self._tokens >= 1.0

    def take(self) -> None:
        """Spend one token (after :meth:`available` said yes)."""
        self._tokens -= 1.0


class SpendWindow:
    """A fixed window of ``period_s`` (numbered from the clock's zero) holding what was spent in it."""

    def __init__(self, limit: float, period_s: float, clock: Clock) -> None:
        self.limit = limit
        self._period = period_s
        self._clock = clock
        self._index = -1
        self.spent = 0.0

    def _roll(self) -> None:
        index = int(self._clock() // self._period)
        if index != self._index:
            self._index = index
            self.spent = 0.0

    def exhausted(self) -> bool:
        """Return True when this window's spend has reached the limit."""
        self._roll()
        return self.spent >= self.limit

    def add(self, amount: float) -> None:
        """Charge ``amount`` to the current window."""
        self._roll()
        self.spent += amount


class _Scope:
    """The state of one :class:`Limits`: bucket, token and USD windows, concurrency slots."""

    def __init__(self, key: str, limits: Limits, clock: Clock) -> None:
        self.key = key  # its name in the shared state: "global" or "evaluator:<name>"
        self.limits = limits
        self.bucket: TokenBucket | None = None
        if limits.evaluations_per_second is not None:
            rate = limits.evaluations_per_second
            capacity = limits.burst if limits.burst is not None else max(1.0, rate)
            self.bucket = TokenBucket(rate, float(capacity), clock)

        def windows(per_hour: float | None, per_day: float | None) -> list[SpendWindow]:
            pairs = ((per_hour, HOUR_S), (per_day, DAY_S))
            return [SpendWindow(float(limit), period, clock) for limit, period in pairs if limit is not None]

        self.tokens = windows(limits.max_tokens_per_hour, limits.max_tokens_per_day)
        self.usd = windows(limits.max_usd_per_hour, limits.max_usd_per_day)
        self.slots: asyncio.Semaphore | None = None  # made on the evaluation loop at first use

    def over_budget(self) -> bool:
        return any(window.exhausted() for window in (*self.tokens, *self.usd))

    def charge(self, tokens: int, usd: float | None) -> None:
        for window in self.tokens:
            window.add(tokens)
        if usd is not None:
            for window in self.usd:
                window.add(usd)


class LimitGate:
    """Decide whether an evaluation may run now, and charge judge spend (thread-safe).

    Args:
        global_limits: Limits over every evaluator of the processor (None: none).
        clock: Seconds, monotonic (injectable for tests); windows are numbered from its zero.
        shared: Rate limits and budgets kept in Redis for every replica; this gate's own state decides while
            Redis does not answer (None: this gate's state only).
    """

    def __init__(
        self, global_limits: Limits | None, clock: Clock = time.monotonic, shared: SharedLimits | None = None
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._global = _Scope("global", global_limits, clock) if global_limits is not None else None
        self._scopes: dict[str, _Scope] = {}
        self.shared = shared
        # Evaluator name -> its failing charges (spend.charge_judge): logged once per episode, every one counted.
        self.charge_failing: dict[str, ErrorEpisode] = {}

    def register(self, name: str, limits: Limits | None) -> None:
        """Set the limits of evaluator ``name`` (the first registration of a name wins)."""
        if limits is not None and name not in self._scopes:
            # setdefault: two application threads resolving one decorator's evaluators at once keep one scope.
            self._scopes.setdefault(name, _Scope(f"evaluator:{name}", limits, self._clock))

    @property
    def active(self) -> bool:
        """True when any limit is set (otherwise the processor skips the gate entirely)."""
        return self._global is not None or bool(self._scopes)

    def admit(self, name: str) -> str | None:
        """Return None when evaluator ``name`` may run now (taking a rate token), else the skip reason."""
        scopes = [s for s in (self._scopes.get(name), self._global) if s is not None]
        if not scopes:
            return None
        if self.shared is not None:
            answered, reason = self.shared.admit([(scope.key, scope.limits) for scope in scopes])
            if answered:
                return reason
        with self._lock:
            if any(scope.over_budget() for scope in scopes):
                return OVER_BUDGET
            buckets = [scope.bucket for scope in scopes if scope.bucket is not None]
            if not all(bucket.available() for bucket in buckets):
                return RATE_LIMITED
            for bucket in buckets:  # both or neither: a refusal by one scope costs the other nothing
                bucket.take()
        return None

    def charge(self, name: str, tokens: int, usd: float | None) -> None:
        """Charge a judge's spend to evaluator ``name`` and to the global budget."""
        scopes = [s for s in (self._scopes.get(name), self._global) if s is not None]
        if not scopes:
            return
        try:
            with self._lock:  # always charged here too: a fallback continues from what this process spent
                for scope in scopes:
                    scope.charge(tokens, usd)
        finally:  # this process's windows failing (its clock) never keeps the spend from the fleet's budget
            if self.shared is not None:
                self.shared.charge([(scope.key, scope.limits) for scope in scopes], tokens, usd)

    @contextlib.asynccontextmanager
    async def slot(self, name: str) -> AsyncIterator[None]:
        """Hold a concurrency slot of evaluator ``name`` and a global one (on the evaluation loop)."""
        async with contextlib.AsyncExitStack() as stack:
            for scope in (self._scopes.get(name), self._global):
                if scope is None or scope.limits.max_concurrent is None:
                    continue
                if scope.slots is None:  # only the evaluation loop gets here, so no race
                    scope.slots = asyncio.Semaphore(scope.limits.max_concurrent)
                await stack.enter_async_context(scope.slots)
            yield
