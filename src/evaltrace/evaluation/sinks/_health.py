"""Log a sink's outages as episodes: one WARNING when it starts failing, one when it delivers again.

A backend that is down fails every batch, and a retry loop fails it several times more: one line per failure
would bury the application's own logs. So an episode (from the first failed attempt or lost score to the next
batch delivered in full) logs a WARNING when it starts, naming the sink and the cause; the first score it
dead-letters (or drops) once, with the file to replay; a reminder at most once per interval while it lasts; and
one line when the sink delivers again, with what the episode cost. Exact counts are in ``SinkStats``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

logger = logging.getLogger("evaltrace.evaluation.sinks")


class OutageLog:
    """Episode logging for one sink; the worker calls it with its lock held, so it needs none of its own.

    Args:
        sink: The sink's name, in every line.
        dead_letter_path: Where lost scores go (None: they are dropped), named in the dead-letter line.
        interval_s: Shortest time between two episode-start (or reminder) lines: a flapping backend logs at
            most one episode per interval; the episodes in between are counted, not logged.
    """

    def __init__(self, sink: str, dead_letter_path: Path | None, interval_s: float = 60.0) -> None:
        self._sink = sink
        self._path = dead_letter_path
        self._interval = interval_s
        self._since: float | None = None  # start of the current episode
        self._failures = 0
        self._lost = 0
        self._announced = False  # this episode's start was logged, so its end is logged too
        self._lost_announced = False
        self._last_line = -float("inf")

    def failed(self, cause: str | None) -> None:
        """An export attempt failed for a transient reason (it will be retried or dead-lettered)."""
        now = self._begin()
        self._failures += 1
        if not self._announced and self._may_log(now):
            self._announced = True
            logger.warning(
                "evaltrace: score sink %s is failing: %s; retrying (not logged again until it recovers, "
                "counted in stats())",
                self._sink,
                cause,
            )
        elif self._announced and now - self._last_line >= self._interval:
            self._last_line = now
            logger.warning(
                "evaltrace: score sink %s still failing after %d attempt(s) over %.0f s: %s",
                self._sink,
                self._failures,
                now - (self._since or now),
                cause,
            )

    def lost(self, count: int, cause: str | None) -> None:
        """``count`` scores went to the dead-letter file (or were dropped, without one)."""
        now = self._begin()
        self._lost += count
        if self._lost_announced or not (self._announced or self._may_log(now)):
            return
        self._lost_announced = True
        self._last_line = now
        if self._path is None:
            logger.warning(
                "evaltrace: %d score(s) for %s dropped (no dead_letter_dir): %s; further losses are counted in "
                "stats() (sinks.%s.dropped), not logged",
                count,
                self._sink,
                cause,
                self._sink,
            )
            return
        logger.warning(
            "evaltrace: %d score(s) for %s written to the dead-letter file %s: %s; further ones are counted in "
            "stats(), not logged; deliver them later with: evaltrace scores replay %s --sink %s",
            count,
            self._sink,
            self._path,
            cause,
            self._path,
            self._sink,
        )

    def delivered(self) -> None:
        """A batch went through in full: the episode (if any) ends. O(1) when there is none."""
        if self._since is None:
            return
        if self._announced and self._failures:
            where = "dropped" if self._path is None else f"sent to {self._path}"
            logger.warning(
                "evaltrace: score sink %s is delivering again after %d failed attempt(s) over %.1f s; %d score(s) "
                "%s meanwhile",
                self._sink,
                self._failures,
                time.monotonic() - self._since,
                self._lost,
                where,
            )
        self._since = None
        self._failures = self._lost = 0
        self._announced = self._lost_announced = False

    def _begin(self) -> float:
        now = time.monotonic()
        if self._since is None:
            self._since = now
        return now

    def _may_log(self, now: float) -> bool:
        if now - self._last_line < self._interval:
            return False
        self._last_line = now
        return True
