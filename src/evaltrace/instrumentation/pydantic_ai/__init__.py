"""pydantic-ai instrumentation: turn on pydantic-ai's own OpenTelemetry GenAI spans, with evaltrace's settings.

pydantic-ai records agent runs itself (``invoke_agent {agent}``, ``chat {model}``, ``execute_tool {tool}`` spans
with ``gen_ai.*`` attributes); evaltrace's mapping reads them like its own. ``instrument_pydantic_ai()`` sets
``Agent.instrument_all(InstrumentationSettings(...))`` with evaltrace's tracer provider, its content setting
(``configure(capture_content=...)``, read as each run and span starts) and the newest data format, whose messages are GenAI semconv parts with tool
results in ``tool`` messages (version 6, else 5 on releases without it).

No duplicate model spans: pydantic-ai's ``chat {model}`` span is each model request's span. Around the model's
own request (its class's ``request``, and the opening of ``request_stream``, wrapped when the first span for it
opens; restored by ``uninstrument``) the LLM-suppression key is set, so the provider SDK call it makes
(``instrument_openai()``'s span, or any instrumentation honouring the key) records no second span, while the
application's own model calls, made as it reads a streamed run, are traced.

Example:
    >>> import evaltrace
    >>> evaltrace.instrument_pydantic_ai()  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any, Literal

from opentelemetry.trace import Span, Tracer, TracerProvider
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings

from evaltrace._internal import settings
from evaltrace._internal.tracing import get_tracer_provider, suppress_llm_instrumentation

__all__ = ["instrument_pydantic_ai", "uninstrument_pydantic_ai"]

# pydantic-ai's data formats, newest first: 6 puts tool results in ``tool`` messages (GenAI semconv's pairing);
# 5 (its default) in ``user`` messages, which the mapping reads the same. Both use GenAI parts for media.
_VERSIONS: tuple[Literal[6, 5], ...] = (6, 5)
_lock = threading.Lock()
_installed: InstrumentationSettings | None = None
_previous: InstrumentationSettings | bool = False
# Modules that open pydantic-ai's model request span by this name (the model wrapper, the capability).
_SPAN_OPENERS = ("pydantic_ai.models.instrumented", "pydantic_ai.capabilities.instrumentation")
_OPENER = "open_model_request_span"
_patched: list[tuple[Any, Callable[..., Any]]] = []  # (module, original opener), for uninstrument
# Model classes whose request methods are wrapped: (class, name, its own attribute before, None if inherited).
_patched_models: list[tuple[type, str, Any]] = []
_models_done: set[type] = set()
_models_lock = threading.Lock()


def instrument_pydantic_ai(**kwargs: Any) -> InstrumentationSettings:
    """Turn on pydantic-ai's spans for every agent, on evaltrace's provider (idempotent); return the settings.

    Spans go to evaltrace's provider as it is when each span starts (``configure()`` before or after, a test's
    ``capture_traces()``). An agent built with its own ``instrument=`` keeps its own settings.

    Args:
        **kwargs: ``tracer_provider`` or ``meter_provider`` to use instead of evaltrace's (and the global
            meter provider); any other ``InstrumentationSettings`` keyword (``include_binary_content``, ...).

    Returns:
        The settings installed with ``Agent.instrument_all``.
    """
    global _installed, _previous
    options: dict[str, Any] = {"tracer_provider": _FollowingTracerProvider(), **kwargs}
    with _lock:
        installed = _settings(options)
        if _installed is None:  # what uninstrument puts back (the application's own instrument_all, if any)
            _previous = Agent._instrument_default
        Agent.instrument_all(installed)
        _installed = installed
        if not _patched:
            _suppress_inside_model_spans()
        return installed


def uninstrument_pydantic_ai() -> None:
    """Put back pydantic-ai's default instrumentation as it was before ``instrument_pydantic_ai`` (else a no-op)."""
    global _installed
    with _lock:
        if _installed is not None and Agent._instrument_default is _installed:
            Agent.instrument_all(_previous)
        _installed = None
        while _patched:
            module, original = _patched.pop()
            setattr(module, _OPENER, original)
        with _models_lock:
            while _patched_models:
                cls, name, own = _patched_models.pop()
                if own is None:
                    delattr(cls, name)
                else:
                    setattr(cls, name, own)
            _models_done.clear()


class _FollowingSettings(InstrumentationSettings):
    """pydantic-ai's settings whose ``include_content`` is evaltrace's content setting of the moment.

    pydantic-ai reads ``include_content`` when each run and span starts; a value copied at
    ``instrument_pydantic_ai()`` would keep recording prompts after ``configure(capture_content=False)``.
    An ``include_content`` given to ``instrument_pydantic_ai`` is kept as is.
    """

    _fixed_content: bool | None = None

    def __init__(self, **options: Any) -> None:
        fixed = options.get("include_content")
        super().__init__(**options)
        self._fixed_content = fixed if isinstance(fixed, bool) else None

    @property
    def include_content(self) -> bool:
        fixed = self._fixed_content
        return settings.current.capture_content if fixed is None else fixed

    @include_content.setter
    def include_content(self, value: bool) -> None:
        self._fixed_content = value


class _FollowingTracerProvider(TracerProvider):
    """Tracers that start each span on evaltrace's provider of the moment.

    pydantic-ai asks its provider for a tracer once, when the settings are made; evaltrace's provider can change
    afterwards (``configure()`` called later, a test's ``capture_traces()``), and the spans must follow it.
    """

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Any = None,
    ) -> Tracer:
        return _FollowingTracer((instrumenting_module_name, instrumenting_library_version, schema_url, attributes))


class _FollowingTracer(Tracer):
    """A tracer of evaltrace's current provider, looked up again only when the provider changed."""

    def __init__(self, args: tuple[str, str | None, str | None, Any]) -> None:
        self._args = args
        self._provider: TracerProvider | None = None
        self._tracer: Tracer | None = None

    def _current(self) -> Tracer:
        provider = get_tracer_provider()
        if self._tracer is None or provider is not self._provider:
            self._tracer = provider.get_tracer(*self._args)
            self._provider = provider
        return self._tracer

    def start_span(self, *args: Any, **kwargs: Any) -> Span:
        return self._current().start_span(*args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        return self._current().start_as_current_span(*args, **kwargs)


def _suppress_inside_model_spans() -> None:
    """Wrap pydantic-ai's model request span opener so that no LLM instrumentation records a call inside it."""
    for name in _SPAN_OPENERS:
        try:
            module = importlib.import_module(name)
        except ImportError:  # a release without this module (the capability came later)
            continue
        original = getattr(module, _OPENER, None)
        if original is None or getattr(original, "__evaltrace_wrapped__", None) is not None:
            continue
        setattr(module, _OPENER, _suppressing(original))
        _patched.append((module, original))


def _suppressing(original: Callable[..., Any]) -> Callable[..., Any]:
    @contextmanager
    def open_model_request_span(*args: Any, **kwargs: Any) -> Iterator[Any]:
        request_context = kwargs.get("request_context", args[1] if len(args) > 1 else None)
        _suppress_requests_of(getattr(request_context, "model", None))
        with original(*args, **kwargs) as opened:
            yield opened

    open_model_request_span.__evaltrace_wrapped__ = original  # type: ignore[attr-defined]
    return open_model_request_span


def _suppress_requests_of(model: Any) -> None:
    """Wrap the model class's ``request`` / ``request_stream`` (once per class) so its SDK call records nothing.

    Only the request itself is suppressed, not the model span's lifetime: a streamed run keeps that span open
    while the application reads the stream (``async with agent.run_stream()``), and the application's own model
    calls there are its own, to be traced.
    """
    cls = type(model)
    if model is None or cls in _models_done:
        return
    with _models_lock:
        if cls in _models_done:
            return
        for name, wrap in (("request", _suppressed_request), ("request_stream", _suppressed_stream)):
            method = getattr(cls, name, None)
            if method is None or getattr(method, "__evaltrace_wrapped__", None) is not None:
                continue
            _patched_models.append((cls, name, cls.__dict__.get(name)))
            setattr(cls, name, wrap(method))
        _models_done.add(cls)


def _suppressed_request(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        with suppress_llm_instrumentation():
            return await method(self, *args, **kwargs)

    request.__evaltrace_wrapped__ = method  # type: ignore[attr-defined]
    return request


def _suppressed_stream(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    @asynccontextmanager
    async def request_stream(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async with AsyncExitStack() as stack:
            with suppress_llm_instrumentation():  # the SDK's request is made while the stream is opened
                stream = await stack.enter_async_context(method(self, *args, **kwargs))
            yield stream  # the application reads it here: its own model calls are traced

    request_stream.__evaltrace_wrapped__ = method  # type: ignore[attr-defined]
    return request_stream


def _settings(options: dict[str, Any]) -> InstrumentationSettings:
    """The settings in the newest data format this pydantic-ai accepts (its own choice when ``version`` is given)."""
    if "version" in options:
        return _FollowingSettings(**options)
    for version in _VERSIONS:
        try:
            return _FollowingSettings(**options, version=version)
        except (ValueError, TypeError):  # a release that does not know this version
            continue
    return _FollowingSettings(**options)
