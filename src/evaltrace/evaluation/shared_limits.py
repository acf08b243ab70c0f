"""Rate limits and judge budgets shared by every replica through Redis (the ``redis_url`` evaluation option).

Without it each process (each ``evaltrace worker`` replica) keeps its own token buckets and spend windows, so a
fleet of N replicas may spend N budgets. With it, one token bucket per rate limit and one spend counter per
budget window live in Redis, keyed per evaluator (``evaltrace:limits:evaluator:<name>:...``) and for the
processor-wide limits (``evaltrace:limits:global:...``). Each admission and each charge is one Lua script, so
the check-and-take of every scope an evaluation needs is atomic across the fleet. Every key expires: a bucket
once it would have refilled, a spend counter a minute after its window ends. Shared windows are clock hours and
UTC days read from the Redis server's clock (one clock for the whole fleet).

Redis never blocks an evaluation for long: every call has a short timeout and no retry. When Redis does not
answer, the replica falls back to its own (per-replica) state with one WARNING, asks Redis again at most every
``RETRY_S`` (one caller at a time, the others stay local meanwhile), and goes back to the shared state once it
answers, with one more WARNING saying so. What was spent during the outage is then added to the shared counters,
so the fleet's budget still counts it. Each replica also keeps charging its local windows all along, so that a
fallback continues from what this replica spent, as a replica without Redis would.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from evaltrace.evaluation.limits import DAY_S, HOUR_S, OVER_BUDGET, RATE_LIMITED
from evaltrace.exceptions import ConfigError

__all__ = ["REDIS_SCHEMES", "SharedLimits", "check_redis_url"]

logger = logging.getLogger("evaltrace.evaluation")

REDIS_SCHEMES = ("redis", "rediss", "unix")
KEY_PREFIX = "evaltrace:limits"
# Loopback or same-zone Redis answers in well under a millisecond; this bounds a stalled one (and the first
# connection), so the thread admitting an evaluation waits at most this long once per RETRY_S of an outage.
TIMEOUT_S = 0.5
RETRY_S = 2.0
_NO_REFILL_TTL_S = 7 * 86_400  # a bucket that never refills (rate 0) is forgotten after a week
_WINDOW_TTL_MARGIN_S = 60

_REASONS = {0: None, 1: OVER_BUDGET, 2: RATE_LIMITED}  # the admission script's answers

# KEYS: the buckets (ARGV[1] of them), then the spend windows.
# ARGV: the bucket count; rate, capacity and ttl per bucket; period and limit per window.
# Same rule as LimitGate.admit: a budget reached refuses first; then every bucket must hold a token, and either
# all of them give one or none does (a refusal by one scope costs the other nothing).
_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local nb = tonumber(ARGV[1])
local at = 2 + 3 * nb
for i = nb + 1, #KEYS do
  local period = tonumber(ARGV[at])
  local limit = tonumber(ARGV[at + 1])
  at = at + 2
  local held = redis.call('HMGET', KEYS[i], 'window', 'spent')
  local spent = 0
  if tonumber(held[1]) == math.floor(now / period) then spent = tonumber(held[2]) or 0 end
  if spent >= limit then return 1 end
end
local levels = {}
local allowed = true
for i = 1, nb do
  local rate = tonumber(ARGV[3 * i - 1])
  local capacity = tonumber(ARGV[3 * i])
  local held = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local tokens = tonumber(held[1])
  local last = tonumber(held[2])
  if tokens == nil or last == nil then
    tokens = capacity
    last = now
  end
  tokens = math.min(capacity, tokens + math.max(0, now - last) * rate)
  levels[i] = tokens
  if tokens < 1 then allowed = false end
end
for i = 1, nb do
  local tokens = levels[i]
  if allowed then tokens = tokens - 1 end
  redis.call('HSET', KEYS[i], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.17g', now))
  redis.call('EXPIRE', KEYS[i], tonumber(ARGV[3 * i + 1]))
end
if allowed then return 0 end
return 2
"""

# KEYS: the spend windows; ARGV: period and amount per window. A counter of an older window starts again at 0.
_CHARGE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for i = 1, #KEYS do
  local period = tonumber(ARGV[2 * i - 1])
  local index = math.floor(now / period)
  if tonumber(redis.call('HGET', KEYS[i], 'window')) ~= index then
    redis.call('HSET', KEYS[i], 'window', string.format('%d', index), 'spent', '0')
  end
  redis.call('HINCRBYFLOAT', KEYS[i], 'spent', ARGV[2 * i])
  redis.call('EXPIRE', KEYS[i], math.ceil((index + 1) * period - now) + tonumber(ARGV[#ARGV]))
end
return 0
"""

Scope = tuple[str, Any]  # (key part, Limits): "global" or "evaluator:<name>"


def check_redis_url(url: str, where: str = "redis_url") -> None:
    """Raise a ConfigError naming ``where`` unless ``url`` is a Redis URL (``redis://``, ``rediss://``, ``unix://``)."""
    scheme = urlsplit(url).scheme if isinstance(url, str) else ""
    if scheme not in REDIS_SCHEMES:
        # Only the scheme is shown: the rest of a URL may hold a password.
        shown = f"scheme {scheme!r}" if scheme else "no scheme"
        raise ConfigError(where, f"expected a redis://, rediss:// or unix:// URL, got {shown}")


def _where(url: str) -> str:
    """The server a URL names, without its credentials (for log lines)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"


class SharedLimits:
    """The Redis side of a :class:`~evaltrace.evaluation.limits.LimitGate` (thread-safe).

    Args:
        url: The Redis server (``redis://[:password@]host:port/db``, ``rediss://`` for TLS, ``unix://``).
        timeout_s: Connect and reply timeout of every call.
        retry_s: Longest interval between two attempts to reach Redis again during an outage.

    Raises:
        ConfigError: A URL that is not a Redis one, or the redis package missing.
    """

    def __init__(self, url: str, *, timeout_s: float = TIMEOUT_S, retry_s: float = RETRY_S) -> None:
        check_redis_url(url)
        try:  # imported here: only a configured Redis URL pays for it
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise ConfigError("redis_url", "needs the redis package: pip install 'evaltrace[redis]'") from None
        try:
            # No retry: a failed call is a fallback to local state, never a wait (redis-py retries 3 times with
            # backoff by default).
            self._client: Any = redis.Redis.from_url(
                url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0)
            )
        except ValueError as exc:
            raise ConfigError("redis_url", str(exc)) from None
        self._admit = self._client.register_script(_ADMIT)
        self._charge = self._client.register_script(_CHARGE)
        self._where = _where(url)
        self._retry_s = retry_s
        self._lock = threading.Lock()
        self._down = False
        self._probing = False
        self._retry_at = 0.0
        # Spend charged while Redis was down, by scopes: added to the shared counters once it answers again.
        self._owed: dict[tuple[Scope, ...], list[float]] = {}
        self.fallbacks = 0  # outages seen (each warned once)

    @property
    def down(self) -> bool:
        """True while this replica uses its own state because Redis did not answer."""
        return self._down

    def stats(self) -> dict[str, Any]:
        """``redis`` (the server, without credentials), ``down`` and ``fallbacks``."""
        return {"redis": self._where, "down": self._down, "fallbacks": self.fallbacks}

    def admit(self, scopes: Sequence[Scope]) -> tuple[bool, str | None]:
        """Take a token from every bucket of ``scopes`` unless a budget or a bucket refuses.

        Returns:
            ``(True, None)`` admitted, ``(True, reason)`` refused with ``over_budget`` / ``rate_limited``, or
            ``(False, None)`` when Redis did not answer: decide locally.
        """
        buckets = [(key, limits) for key, limits in scopes if limits.evaluations_per_second is not None]
        windows = [(f"{key}:{kind}:{int(period)}", period, limit) for key, kind, period, limit in _windows(scopes)]
        if not buckets and not windows:
            return True, None
        keys = [f"{KEY_PREFIX}:{key}:rate" for key, _ in buckets] + [f"{KEY_PREFIX}:{k}" for k, _, _ in windows]
        args: list[Any] = [len(buckets)]
        for _, limits in buckets:
            rate = float(limits.evaluations_per_second)
            capacity = float(limits.burst if limits.burst is not None else max(1.0, rate))
            ttl = math.ceil(capacity / rate) + 1 if rate > 0 else _NO_REFILL_TTL_S
            args += [repr(rate), repr(capacity), ttl]
        for _, period, limit in windows:
            args += [repr(period), repr(float(limit))]
        answer = self._call(self._admit, keys, args)
        if answer is None:
            return False, None
        return True, _REASONS.get(answer)

    def charge(self, scopes: Sequence[Scope], tokens: int, usd: float | None) -> None:
        """Add a judge's spend to the shared windows of ``scopes`` (owed until Redis answers, if it does not)."""
        call = _charge_call(scopes, float(tokens), usd)
        if call is not None and self._call(self._charge, *call) is None:
            with self._lock:
                owed = self._owed.setdefault(tuple(scopes), [0.0, 0.0])
                owed[0] += tokens
                owed[1] += usd or 0.0

    def _call(self, script: Any, keys: list[str], args: list[Any]) -> int | None:
        """Run ``script``; None when Redis is down (known, or found now)."""
        probing = False
        with self._lock:
            if self._down:
                if self._probing or time.monotonic() < self._retry_at:
                    return None
                self._probing = probing = True  # this caller asks Redis; the others stay local until it knows
        try:
            if probing:  # first what was spent meanwhile, so this very call already sees it
                self._pay_owed()
            answer = int(script(keys=keys, args=args))
        except Exception as exc:  # redis.RedisError, OSError, or a reply we cannot read: no use to us either
            self._failed(exc)
            return None
        if probing:
            self._recovered()
        return answer

    def _pay_owed(self) -> None:
        """Add the spend owed since the outage began to the shared windows (raises when Redis does not answer)."""
        with self._lock:
            owed = list(self._owed.items())
        for scopes, (tokens, usd) in owed:
            call = _charge_call(scopes, tokens, usd or None)
            if call is not None:
                self._charge(keys=call[0], args=call[1])
            with self._lock:  # paid: later spend of these scopes starts a new debt
                held = self._owed.get(scopes)
                if held is not None:
                    held[0] -= tokens
                    held[1] -= usd
                    if held[0] <= 0 and held[1] <= 0:
                        del self._owed[scopes]

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self._probing = False
            self._retry_at = time.monotonic() + self._retry_s
            if self._down:
                return
            self._down = True
            self.fallbacks += 1
        logger.warning(
            "evaltrace: Redis at %s did not answer (%s: %s); rate limits and budgets are per replica until it "
            "does (asked again every %gs)",
            self._where,
            type(exc).__name__,
            exc,
            self._retry_s,
        )

    def _recovered(self) -> None:
        with self._lock:
            self._down = False
            self._probing = False
        logger.warning("evaltrace: Redis at %s answers again; rate limits and budgets are shared again", self._where)

    def close(self) -> None:
        """Close the connections (the client reconnects if used again)."""
        try:
            self._client.close()
        except Exception:  # closing a broken connection: nothing left to do
            logger.debug("closing the Redis client", exc_info=True)


def _charge_call(scopes: Sequence[Scope], tokens: float, usd: float | None) -> tuple[list[str], list[Any]] | None:
    """Keys and arguments of the charge script for this spend; None when no window of ``scopes`` takes it."""
    keys: list[str] = []
    args: list[Any] = []
    for key, kind, period, _ in _windows(scopes):
        amount = tokens if kind == "tokens" else usd
        if amount:
            keys.append(f"{KEY_PREFIX}:{key}:{kind}:{int(period)}")
            args += [repr(period), repr(float(amount))]
    return (keys, [*args, _WINDOW_TTL_MARGIN_S]) if keys else None


def _windows(scopes: Sequence[Scope]) -> list[tuple[str, str, float, float]]:
    """``(scope key, "tokens" | "usd", period_s, limit)`` of every budget window set in ``scopes``."""
    found: list[tuple[str, str, float, float]] = []
    for key, limits in scopes:
        for kind, limit, period in (
            ("tokens", limits.max_tokens_per_hour, HOUR_S),
            ("tokens", limits.max_tokens_per_day, DAY_S),
            ("usd", limits.max_usd_per_hour, HOUR_S),
            ("usd", limits.max_usd_per_day, DAY_S),
        ):
            if limit is not None:
                found.append((key, kind, period, float(limit)))
    return found
