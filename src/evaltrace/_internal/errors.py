"""One boundary for our own errors: log them, never let them reach the application.

Under pytest (``PYTEST_CURRENT_TEST`` set) or with ``EVALTRACE_RAISE_INTERNAL_ERRORS=1`` the error is re-raised
instead, so tests see our bugs rather than a log line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger("evaltrace")


def reraise_internal_errors() -> bool:
    """True under pytest or with EVALTRACE_RAISE_INTERNAL_ERRORS=1: our errors must surface, not be logged."""
    return bool(os.environ.get("PYTEST_CURRENT_TEST")) or os.environ.get("EVALTRACE_RAISE_INTERNAL_ERRORS") == "1"


@contextmanager
def handle_internal_errors(what: str) -> Iterator[None]:
    """Run evaltrace's own code for ``what``; log any exception (re-raise it under tests).

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
