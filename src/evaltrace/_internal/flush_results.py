"""What a ``force_flush`` answered, read one way everywhere: a bool, whatever the exporter, sink or processor returned.

OpenTelemetry's contract is ``force_flush(timeout_millis) -> bool``, but the objects we flush are often the
application's own (exporters, span processors, score sinks) and do not always keep it:

* ``None`` comes from base classes of older SDKs (``SpanProcessor.force_flush`` before 1.31 has no ``return``). The
  SDK's own multi-processors count only an explicit ``False`` as a failure, so ``None`` is success here too: an
  exporter inheriting that base must not make every flush fail.
* Any other falsy value (``0``, ``""``, an empty container) is a failure. Testing ``is not False`` read those as
  success, so a flush that said "no" in its own way was reported flushed.
* An exception is a failure, logged and never raised into the application calling ``force_flush``.
"""

from __future__ import annotations

from collections.abc import Callable

from evaltrace._internal.errors import log_internal_error


def flush_ok(result: object) -> bool:
    """Read one ``force_flush`` answer as success or failure.

    Args:
        result: What the ``force_flush`` returned.

    Returns:
        True for ``None`` (older SDK base classes, as the SDK reads it) and for truthy values; False for ``False``,
        any other falsy value, and a value whose truth cannot be read.
    """
    if result is None or result is True:  # the common answers first: no bool() call for them
        return True
    try:
        return bool(result)
    except Exception:  # an object whose __bool__ raises answers nothing we can trust
        return False


def flush_call(flush: Callable[[int], object], timeout_millis: int, what: str) -> bool:
    """Call ``flush(timeout_millis)`` and read its answer with :func:`flush_ok`; an exception is logged, then False.

    Args:
        flush: A bound ``force_flush`` method.
        timeout_millis: Its timeout.
        what: What is being flushed, for the log line (e.g. ``"flushing a downstream processor"``).

    Returns:
        Whether the flush succeeded.
    """
    try:
        return flush_ok(flush(timeout_millis))
    except Exception:
        log_internal_error(what)
        return False
