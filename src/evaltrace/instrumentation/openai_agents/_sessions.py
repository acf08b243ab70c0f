"""The Agents SDK ``Session`` a run uses (``Runner.run(..., session=SQLiteSession("abc"))``), for its spans.

The SDK puts a run's session in no trace or span data (a trace's ``group_id`` is ``RunConfig.group_id`` only), so
``AgentRunner.run`` and ``run_streamed`` are wrapped: each keeps its ``session=`` in a context variable for the
run's duration. The processor reads the session's id when the run's workflow and agent spans start, not when the
run is called: an ``OpenAIConversationsSession`` made without a ``conversation_id`` has no id (its
``session_id`` raises) until the run creates the conversation, before its first agent span. ``Runner.run``,
``run_sync`` and ``run_streamed`` all go through these two methods of the default runner; ``run_sync`` calls
``run``, and the streamed run's background task copies the variable when ``run_streamed`` creates it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Coroutine
from typing import Any

import wrapt
from agents.run import AgentRunner

from evaltrace._internal import semconv as sc
from evaltrace.context import current_context_attributes

_session: contextvars.ContextVar[Any] = contextvars.ContextVar("evaltrace_agents_session", default=None)

# The runner methods wrapped, by name (both take the run's options, ``session`` among them, as keywords).
_METHODS = ("run", "run_streamed")


def current_session_id() -> str | None:
    """The id of the Agents ``Session`` of the run in progress here, None outside one (or with no id yet)."""
    return session_id_of(_session.get())


def session_id_of(session: Any) -> str | None:
    """A ``Session``'s ``session_id``, stripped; None when it has none (or reading it fails), as the SDK reads it."""
    if session is None:
        return None
    try:
        value = session.session_id
    except Exception:  # a custom Session whose id is computed and fails: no id, the run goes on
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        return None
    value = str(value).strip()
    return value or None


def session_attributes(session_id: str, existing: Any = None) -> dict[str, Any]:
    """The attributes naming ``session_id`` on a workflow or agent span.

    ``gen_ai.conversation.id`` always (a real session id, which the conventions ask for). ``session.id``, which
    groups traces into one evaltrace conversation, only when the user's own ``evaltrace.context(session_id=...)``
    (or a session id already on the span, ``existing``) gives none: the user's explicit session wins.
    """
    attrs: dict[str, Any] = {sc.GEN_AI_CONVERSATION_ID: session_id}
    stamped = current_context_attributes()
    if not any(stamped.get(key) or (existing and existing.get(key)) for key in sc.SESSION_ID_KEYS):
        attrs[sc.SESSION_ID] = session_id
    return attrs


async def _in_session(run: Coroutine[Any, Any, Any], session: Any) -> Any:
    token = _session.set(session)
    try:
        return await run
    finally:
        _session.reset(token)


def _run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    session = kwargs.get("session")
    if session is None:
        return wrapped(*args, **kwargs)
    return _in_session(wrapped(*args, **kwargs), session)


def _run_streamed(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    session = kwargs.get("session")
    if session is None:
        return wrapped(*args, **kwargs)
    token = _session.set(session)  # the run's task, created inside, copies it
    try:
        return wrapped(*args, **kwargs)
    finally:
        _session.reset(token)


_WRAPPERS = {"run": _run, "run_streamed": _run_streamed}


def _ours(method: Any) -> bool:
    """Whether ``method`` is our wrapper (not the SDK's method, nor another library's wrapper)."""
    return isinstance(method, wrapt.FunctionWrapper) and getattr(method, "_self_wrapper", None) in _WRAPPERS.values()


def wrap_runner() -> None:
    """Wrap ``AgentRunner.run`` and ``run_streamed`` (idempotent)."""
    for name in _METHODS:
        current = AgentRunner.__dict__.get(name)
        if current is not None and not _ours(current):
            wrapt.wrap_function_wrapper(AgentRunner, name, _WRAPPERS[name])


def unwrap_runner() -> None:
    """Restore the runner's own methods (idempotent; a wrapper another library put over ours stays)."""
    for name in _METHODS:
        current = AgentRunner.__dict__.get(name)
        if current is not None and _ours(current):
            setattr(AgentRunner, name, current.__wrapped__)
