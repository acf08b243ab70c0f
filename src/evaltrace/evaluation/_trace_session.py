"""The session a trace belongs to, and the sampling draw of a session-scope evaluator, which goes by it.

One rule everywhere (admission at a root's end, ``end_session()``, the session a completed trace joins, a given-up
trace's counts): a trace's session is its root's ``session.id`` (or ``langfuse.session.id``), else that of the
first of its spans to end carrying one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv
from evaltrace.evaluation.trace_sampling import session_fraction, trace_fraction

if TYPE_CHECKING:
    from evaltrace.evaluation.completion import OpenTrace
    from evaltrace.evaluation.evaluator import EvaluatorSpec


def sampled_in(spec: EvaluatorSpec, attributes: Any, trace_id: int, session: str | None = None) -> bool:
    """Whether ``spec`` samples this trace in; a session-scope one draws by the trace's session when it has one.

    ``session``: the trace's session (:func:`trace_session`) when known; else the one ``attributes`` carry.
    """
    if spec.sampler is not None:
        try:
            return bool(spec.sampler(attributes))
        except Exception:
            return False
    if spec.sample_rate >= 1.0:
        return True
    if spec.scope == "session":  # a whole session is in or out, never some of its turns
        session_id = session if session is not None else session_of(attributes)
        if session_id is not None:
            return session_fraction(session_id, spec.sample_group) < spec.sample_rate
    return trace_fraction(trace_id, spec.sample_group) < spec.sample_rate


def drawn_at_join(spec: EvaluatorSpec, attributes: Any, session: str | None) -> bool:
    """Whether ``spec``'s draw waits for the session its completed trace joins (``split_sessions`` makes it).

    A session-scope evaluator sampled by session id, its trace's session not known yet (the root carries none, no
    span ended so far carries one): the span carrying it may end after the root (another OTLP batch, a stream
    still running). Drawn now by trace id, one session's turns would be drawn partly by session, partly by trace.
    """
    return (
        session is None
        and spec.scope == "session"
        and spec.sampler is None
        and spec.sample_rate < 1.0
        and session_of(attributes) is None
    )


def session_of(attributes: Any) -> str | None:
    """The session id a span carries (``session.id``, else ``langfuse.session.id``), or None."""
    for key in semconv.SESSION_ID_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def trace_session(entry: OpenTrace, root: ReadableSpan | None = None) -> str | None:
    """The session of a trace being collected: its root's, else the first of its spans carrying one.

    "First" in the order the spans ended (the buffer's order): the rule the completed trace's session is found by
    (``split_sessions``), so sampling, ``end_session()`` and the session a trace joins agree. A LangGraph thread
    run under the user's own span puts it on the run's spans, not on the root. ``root``: the root when the
    caller holds it (else the trace's ended or live one). Only the spans not looked at before are read (the
    answer is kept on ``entry`` once found), so asking at each timer tick costs nothing per span already seen.
    """
    root = root or entry.root or entry.started
    if root is not None:
        found = session_of(root.attributes or {})
        if found is not None:
            return found
    if entry.session is None:
        spans = entry.spans
        end = len(spans)  # appended to concurrently: read up to what is there now, the rest next time
        for index in range(entry.session_seen, end):
            found = session_of(spans[index].attributes or {})
            if found is not None:
                entry.session = found
                break
        entry.session_seen = end
    return entry.session
