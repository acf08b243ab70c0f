"""``evaltrace.end_session(session_id)``: the conversation is over, judge the session now."""

from __future__ import annotations

import logging

from opentelemetry import trace as otel_trace

from evaltrace._internal import semconv
from evaltrace._internal.errors import log_internal_error

__all__ = ["end_session"]

logger = logging.getLogger("evaltrace")


def end_session(session_id: str) -> bool:
    """Declare the session over: session-scope evaluators judge it now instead of after its quiet period.

    Session-scope evaluators (``EvaluatorSpec(evaluator, scope="session")``) normally wait until no trace of
    the session completed for ``session_quiet_period_s``. After this call the session is judged as soon as its
    traces that have ended are in (their own quiet period is skipped too). A trace of the session that arrives
    later still re-judges it, as a new revision of the same scores. Call it when the user closes the chat::

        with evaltrace.context(session_id=chat.id):
            reply = agent.run(message)
        if chat.closed:
            evaltrace.end_session(chat.id)

    In ``evaltrace worker`` (evaluation outside the application) the call marks the current span instead
    (``evaltrace.session.end=<session_id>``), so call it inside the session's last traced work to reach the
    worker. Never raises for our sake.

    Args:
        session_id: The ``session.id`` the session's spans carry.

    Returns:
        True when the in-process evaluation pipeline was told or the current span was marked.

    Raises:
        ValueError: ``session_id`` is not a non-empty string.
    """
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"end_session() needs the session id (a non-empty str), got {session_id!r}")
    told = False
    try:
        span = otel_trace.get_current_span()
        if span.is_recording():
            span.set_attribute(semconv.EVALTRACE_SESSION_END, session_id)
            told = True
        from evaltrace.config import current_handle

        handle = current_handle()
        processor = handle.evaluation_processor if handle is not None else None
        end = getattr(processor, "end_session", None)
        if end is not None:
            end(session_id)
            told = True
    except Exception:  # never break the application over a marker
        log_internal_error("ending a session")
    return told
