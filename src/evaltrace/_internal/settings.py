"""Runtime capture settings shared by the decorators and the instrumentations.

``configure()`` replaces the module-level ``current`` object; readers take one attribute per call, so a
reconfiguration is seen by the next span without locks (attribute assignment is atomic in CPython).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from evaltrace._internal.jsonutil import DEFAULT_MAX_LENGTH

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
TRACE_JUDGES_ENV = "EVALTRACE_TRACE_JUDGES"
_TRUE_VALUES = frozenset({"true", "1", "yes", "on"})
_FALSE_VALUES = frozenset({"false", "0", "no", "off"})
_CAPTURE_ON_VALUES = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})
_CAPTURE_OFF_VALUES = frozenset({"false", "0", "no", "off", "no_content", "event_only"})
logger = logging.getLogger("evaltrace")
_warned: set[str] = set()  # values already warned about: configure() reads the variable again on every call


def capture_content_from_env(default: bool = True) -> bool:
    """Read the standard GenAI capture switch; evaltrace captures by default because evaluators need content.

    ``span_only``, ``span_and_event``, ``true`` (also ``1``, ``yes``, ``on``) keep content on spans; ``false``,
    ``no_content`` and ``event_only`` (also ``0``, ``no``, ``off``) turn span content off; case is ignored. An
    unknown value turns content off (a typo in a switch meant to stop capture must not leave it on) and logs one
    warning naming the variable and the value.
    """
    raw = os.environ.get(CAPTURE_CONTENT_ENV)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in _CAPTURE_ON_VALUES:
        return True
    if value not in _CAPTURE_OFF_VALUES and raw not in _warned:
        _warned.add(raw)
        logger.warning(
            "%s=%r is not a known value (true, false, span_only, span_and_event, no_content, event_only): "
            "message content is not captured",
            CAPTURE_CONTENT_ENV,
            raw,
        )
    return False


def trace_judges_from_env() -> bool:
    """Read ``EVALTRACE_TRACE_JUDGES``: on unless ``false`` (also ``0``, ``no``, ``off``); case is ignored.

    Raises:
        ConfigError: Another value (a switch meant to turn something off must not be guessed at).
    """
    raw = os.environ.get(TRACE_JUDGES_ENV, "").strip()
    if not raw or raw.lower() in _TRUE_VALUES:
        return True
    if raw.lower() in _FALSE_VALUES:
        return False
    from evaltrace.exceptions import ConfigError

    raise ConfigError(TRACE_JUDGES_ENV, f"expected true or false, got {raw!r}")


@dataclass(frozen=True)
class CaptureSettings:
    """What instrumentation records: content on or off, the cap for each JSON attribute value, judge traces."""

    capture_content: bool = True
    max_attribute_length: int = DEFAULT_MAX_LENGTH
    trace_judges: bool = True
    """Trace each judge call as a trace of its own (``configure(trace_judges=...)``, ``EVALTRACE_TRACE_JUDGES``)."""


current = CaptureSettings(capture_content=capture_content_from_env())


def get() -> CaptureSettings:
    """Return the settings in force."""
    return current


def replace(settings: CaptureSettings) -> CaptureSettings:
    """Install ``settings``; return the previous ones (tests restore them)."""
    global current
    previous = current
    current = settings
    return previous
