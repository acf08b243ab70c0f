"""Tracer lookup and suppression: the one place that decides which TracerProvider evaltrace uses.

evaltrace uses the provider installed by ``configure()`` (or by a test through ``set_tracer_provider``) and
otherwise the global OTel provider, so it attaches to a provider the user already set instead of fighting it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Tracer, TracerProvider

from evaltrace._version import __version__

INSTRUMENTATION_NAME = "evaltrace"

# The key OTel instrumentations check to stay quiet: opentelemetry.instrumentation.utils.suppress_instrumentation()
# sets this plain string next to its private key. Plain strings, not create_key(): that appends a random suffix,
# and a key nobody else knows would never be set by anyone else.
_SUPPRESS_INSTRUMENTATION_KEY = "suppress_instrumentation"
# The key LLM instrumentations (OpenLLMetry and others) check so that an outer framework's span is not doubled.
_SUPPRESS_LLM_KEY = "suppress_language_model_instrumentation"
# Our own key: set while evaluators (and their judge calls) run, so they are neither traced nor evaluated.
_SUPPRESS_EVALTRACE_KEY = otel_context.create_key("evaltrace-suppress")
# The same key, for the one caller that sets it without the context manager (the evaluator call, once per evaluation).
SUPPRESS_EVALTRACE_KEY = _SUPPRESS_EVALTRACE_KEY

_provider: TracerProvider | None = None
_tracer: Tracer | None = None
_tracer_for: object = None


def set_tracer_provider(provider: TracerProvider | None) -> TracerProvider | None:
    """Make ``provider`` evaltrace's provider (None = follow the global one); return the previous one."""
    global _provider, _tracer, _tracer_for
    previous = _provider
    _provider = provider
    _tracer = None
    _tracer_for = None
    return previous


def own_provider() -> TracerProvider | None:
    """The provider ``configure()`` (or a test) installed for evaltrace; None while it follows the global one."""
    return _provider


def get_tracer_provider() -> TracerProvider:
    """Return the provider evaltrace currently emits to."""
    return _provider if _provider is not None else trace.get_tracer_provider()


def get_tracer() -> Tracer:
    """Return evaltrace's tracer, cached per provider (the lookup is on every decorated call)."""
    global _tracer, _tracer_for
    provider = _provider if _provider is not None else trace.get_tracer_provider()  # get_tracer_provider, inlined
    if _tracer is None or _tracer_for is not provider:
        _tracer = provider.get_tracer(INSTRUMENTATION_NAME, __version__)
        _tracer_for = provider
    return _tracer


def is_suppressed() -> bool:
    """True when instrumentation must not create spans here (suppression by OTel, an LLM framework, or us)."""
    # One context lookup, then plain dict reads: this runs on every traced call. EvaluationSpanProcessor.on_start
    # reads the same two keys inline (SUPPRESSION_KEYS): a key added here must be added there.
    current = otel_context.get_current()
    return bool(current.get(_SUPPRESS_INSTRUMENTATION_KEY) or current.get(_SUPPRESS_EVALTRACE_KEY))


# Either set in the context: no evaltrace span (what is_suppressed checks; wrappers read them from the context they hold).
SUPPRESSION_KEYS = (_SUPPRESS_INSTRUMENTATION_KEY, _SUPPRESS_EVALTRACE_KEY)

# Any of these set in the context: no LLM span. The OpenAI wrappers read them straight from the context they hold.
LLM_SUPPRESSION_KEYS = (_SUPPRESS_INSTRUMENTATION_KEY, _SUPPRESS_EVALTRACE_KEY, _SUPPRESS_LLM_KEY)


@contextmanager
def suppress_instrumentation() -> Iterator[None]:
    """Create no evaltrace spans inside the block (used around evaluators and judge calls)."""
    token = otel_context.attach(otel_context.set_value(_SUPPRESS_EVALTRACE_KEY, True))
    try:
        yield
    finally:
        otel_context.detach(token)


@contextmanager
def suppress_llm_instrumentation() -> Iterator[None]:
    """Mark LLM calls inside the block as recorded already, for other LLM instrumentations and ours."""
    token = otel_context.attach(otel_context.set_value(_SUPPRESS_LLM_KEY, True))
    try:
        yield
    finally:
        otel_context.detach(token)
