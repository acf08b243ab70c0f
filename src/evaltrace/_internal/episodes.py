"""Log a loss once per episode: a WARNING at the first loss, one line at recovery with the total.

A full queue or a dead backend can lose thousands of items a second; one log line each would bury the
application's own logs (and cost the application thread). Counting stays exact in the callers' stats; the log
says when an episode starts, what caused it, and, when things work again, how much it cost.
"""

from __future__ import annotations

import logging
import threading
import time


class LossEpisode:
    """Track one kind of loss (``what``) and log its episodes.

    Args:
        logger: Where the two lines go.
        what: Names the component in both lines (e.g. ``"exporter local_store"``).
        unit: Names what is lost (``"span"``, ``"score"``).
        recovery_level: The level of the line that ends an episode (a component whose user must hear of a
            failure once, and of its end without a second warning, logs it at INFO).
    """

    def __init__(
        self, logger: logging.Logger, what: str, unit: str = "span", recovery_level: int = logging.WARNING
    ) -> None:
        self._logger = logger
        self._recovery_level = recovery_level
        self._what = what
        self._unit = unit
        self._lost = 0
        self._since = 0.0
        self._lock = threading.Lock()

    def loss(self, count: int, cause: str) -> None:
        """Record ``count`` items lost for ``cause``; the first loss of an episode logs a WARNING."""
        with self._lock:
            if self._lost == 0:
                self._since = time.monotonic()
                self._logger.warning(
                    "evaltrace: %s is losing %ss: %s (counted in stats())", self._what, self._unit, cause
                )
            self._lost += count

    @property
    def open(self) -> bool:
        """Whether an episode is going on (a loss since the last success)."""
        return self._lost > 0

    def ok(self) -> None:
        """Note a success; ends an episode (one line with its total, at ``recovery_level``). O(1) and lock-free when nothing was lost."""
        if not self._lost:
            return
        with self._lock:
            if self._lost:
                self._logger.log(
                    self._recovery_level,
                    "evaltrace: %s works again; %d %s(s) lost over %.1f s",
                    self._what,
                    self._lost,
                    self._unit,
                    time.monotonic() - self._since,
                )
                self._lost = 0
