"""One boundary for our own errors: log them, never let them reach the application.

Only with ``EVALTRACE_RAISE_INTERNAL_ERRORS=1`` is the error re-raised instead, so evaltrace's own test suite (its
``tests/conftest.py`` sets the switch) sees our bugs rather than a log line. Being under pytest is not enough:
evaltrace runs inside applications' own test suites, where a bug of ours must never fail the user's test.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger("evaltrace")


class FieldMappingFailed(Exception):
    """Mapping field ``field`` of a lazily mapped Trace raised ``__cause__``: a bug of ours, not the reader's.

    Raised where an evaluator reads that field; the evaluation records the evaluator as not evaluated
    (``mapping_failed``), never as its error (see ``mapping_failure``).
    """

    def __init__(self, field: str) -> None:
        super().__init__(f"mapping Trace.{field} failed")
        self.field = field


def mapping_failure(exc: BaseException) -> FieldMappingFailed | None:
    """The FieldMappingFailed ``exc`` is or was raised from/while handling (an evaluator may wrap it), else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, FieldMappingFailed):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def reraise_internal_errors() -> bool:
    """True with EVALTRACE_RAISE_INTERNAL_ERRORS=1 (evaltrace's own tests): our errors must surface, not be logged.

    ``PYTEST_CURRENT_TEST`` is deliberately not read: the application's own pytest run sets it too.
    """
    return os.environ.get("EVALTRACE_RAISE_INTERNAL_ERRORS") == "1"


@contextmanager
def handle_internal_errors(what: str) -> Iterator[None]:
    """Run evaltrace's own code for ``what``; log any exception (re-raise it with the switch on).

    Use it around instrumentation work only, never around the user's call: user exceptions must propagate
    unchanged, so the wrapped block must not contain the user's function.
    """
    try:
        yield
    except Exception:
        if reraise_internal_errors():
            raise
        logger.exception("evaltrace internal error while %s (the application call is unaffected)", what)


def log_internal_error(what: str) -> None:
    """Log the exception being handled as an internal error; call from an ``except`` block.

    Unlike ``handle_internal_errors`` this never re-raises: use it in background workers, where raising would
    only kill the worker thread.
    """
    logger.exception("evaltrace internal error while %s", what)


class ErrorEpisode:
    """Log a recurring internal error once per episode: its first traceback, then silence until it works again.

    A persistent fault (a clock that raises, a thread limit) hit once per span would log a traceback per span on
    the application's thread, burying its logs and slowing ``span.end()``. The callers count every occurrence in
    their stats; this logs the first one of an episode (with its traceback) and one INFO line when it ends.

    Args:
        what: What failed, as in ``log_internal_error`` (``"charging the judge spend"``).
    """

    def __init__(self, what: str) -> None:
        self._what = what
        self._count = 0  # occurrences in the current episode
        self._lock = threading.Lock()

    def failed(self, detail: str = "", exc: BaseException | None = None) -> None:
        """Note one occurrence. The first of an episode is logged with its traceback.

        Call from an ``except`` block, or pass the exception as ``exc`` (to log it later, once a lock is released).
        """
        with self._lock:
            self._count += 1
            first = self._count == 1
        if first:
            logger.exception(
                "evaltrace internal error while %s%s (logged once until it works again; every occurrence is counted)",
                self._what,
                detail,
                exc_info=exc if exc is not None else True,
            )

    def ok(self, outcome: str = "works again") -> None:
        """Note a success: ends an episode with one INFO line. O(1) and lock-free when nothing failed.

        Args:
            outcome: How the episode ended, for that line (``"is no longer needed"``).
        """
        if not self._count:
            return
        with self._lock:
            count, self._count = self._count, 0
        if count:
            logger.info("evaltrace: %s %s after %d internal error(s)", self._what, outcome, count)
