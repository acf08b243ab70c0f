"""Resource limits of the worker's receivers: what one client, or many at once, may make the worker hold.

Every limit has a default that keeps a worker on a network within a known footprint, and a flag of
``evaltrace worker`` to change it (see ``docs/viewing.md``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from evaltrace.exceptions import ConfigError

__all__ = ["DEFAULT_MAX_INFLIGHT_BYTES", "BudgetExceeded", "ByteBudget", "Reservation", "ReceiverLimits"]

MIB = 1024 * 1024
_RECLAIM_EVERY_S = 1.0  # a refused request looks for stale holdings at most this often (the look is O(stale))
# Wire-size bytes; decoded spans take a few times as much memory. 128 MiB holds about 16 collector batches of
# 8,192 one-kilobyte spans, and a request alone is admitted whatever its size.
DEFAULT_MAX_INFLIGHT_BYTES = 128 * MIB


@dataclass(frozen=True)
class ReceiverLimits:
    """Bounds on connections, time and bytes of the OTLP receivers.

    Attributes:
        max_body_bytes: Largest request body, on the wire and after decompression (HTTP: 413 beyond it; gRPC:
            ``max_receive_message_length``). 20 MiB, the collector's OTLP/HTTP default.
        max_connections: Connections served at once (HTTP: one thread each; one more gets 503 and is closed)
            and gRPC calls at once (one more gets RESOURCE_EXHAUSTED).
        idle_timeout_s: Longest wait for the next bytes of a request, or for the next request on a kept-alive
            connection, before the connection is closed (gRPC: ``max_connection_idle``).
        request_timeout_s: Longest time reading one request (headers and body) may take, however slowly the
            bytes trickle in, before the connection is closed; counted from when the worker starts waiting for
            it, so keep it above ``idle_timeout_s`` or kept-alive connections are closed at this bound.
        max_inflight_bytes: Work in flight, in bytes: request bodies (wire and decompressed) being read and
            decoded, then the decoded payload of the spans admitted and not yet exported. A request that would
            go over it gets 503 + ``Retry-After``. A request alone is always served, whatever its size up to
            ``max_body_bytes``, so a sender never retries for ever.
        max_json_depth: Deepest nesting of objects and arrays in an OTLP/JSON body (400 beyond it).
    """

    max_body_bytes: int = 20 * MIB
    max_connections: int = 64
    idle_timeout_s: float = 30.0
    request_timeout_s: float = 60.0
    max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES
    max_json_depth: int = 64

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_connections", "max_inflight_bytes", "max_json_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(name, f"must be a positive integer, got {value!r}")
        for name in ("idle_timeout_s", "request_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(name, f"must be a positive number of seconds, got {value!r}")


class BudgetExceeded(Exception):
    """Taking these bytes would put the receivers over ``max_inflight_bytes``; the request should be retried."""


class ByteBudget:
    """A shared count of the bytes requests (and the spans they delivered) hold, refused beyond ``limit``.

    Args:
        limit: Bytes all requests together may hold.
        reclaim: Called (without the budget's lock) before a refusal, to give back what is held for no reason
            any more; the request is then tried once more.
    """

    def __init__(self, limit: int, reclaim: Callable[[], None] | None = None) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()
        self._reclaim = reclaim
        self._reclaimed_at = float("-inf")

    @property
    def used(self) -> int:
        """Bytes held now."""
        with self._lock:
            return self._used

    def reservation(self) -> Reservation:
        """An empty reservation; grow it as bytes are read, release it when the request is done."""
        return Reservation(self)

    def _take(self, held: int, more: int) -> None:
        if self._try_take(held, more):
            return
        now = time.monotonic()
        if self._reclaim is not None and now - self._reclaimed_at >= _RECLAIM_EVERY_S:
            self._reclaimed_at = now
            self._reclaim()
            if self._try_take(held, more):
                return
        raise BudgetExceeded(f"{self.used} bytes in flight, limit {self.limit}")

    def _try_take(self, held: int, more: int) -> bool:
        with self._lock:
            # A request holding everything that is held may go over: alone, it is bounded by max_body_bytes.
            if self._used + more > self.limit and self._used != held:
                return False
            self._used += more
            return True

    def give_back(self, amount: int) -> None:
        """Release ``amount`` bytes held outside a reservation (spans handed over by :meth:`Reservation.hand_over`)."""
        with self._lock:
            self._used -= amount

    def _convert(self, held: int, kept: int) -> None:
        with self._lock:
            self._used += kept - held


class Reservation:
    """The bytes one request holds in a :class:`ByteBudget`; a context manager that releases them at exit."""

    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget
        self.held = 0

    def grow(self, amount: int) -> None:
        """Hold ``amount`` more bytes.

        Raises:
            BudgetExceeded: Other requests hold too much already.
        """
        if amount > 0:
            self._budget._take(self.held, amount)
            self.held += amount

    def hand_over(self, amount: int) -> int:
        """Keep ``amount`` bytes held past this reservation, giving the rest back.

        The caller returns them later with :meth:`ByteBudget.give_back`. Never refused: the request was
        admitted with what it holds.

        Returns:
            ``amount``, now held by the caller.
        """
        held, self.held = self.held, 0
        self._budget._convert(held, amount)
        return amount

    def release(self) -> None:
        """Give every held byte back (idempotent)."""
        held, self.held = self.held, 0
        if held:
            self._budget.give_back(held)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
