"""Runtime capture settings shared by the decorators and the instrumentations.

``configure()`` replaces the module-level ``current`` object; readers take one attribute per call, so a
reconfiguration is seen by the next span without locks (attribute assignment is atomic in CPython).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from evaltrace._internal.jsonutil import DEFAULT_MAX_LENGTH

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CAPTURE_OFF_VALUES = frozenset({"false", "0", "no", "off", "no_content", "event_only"})


def capture_content_from_env(default: bool = True) -> bool:
    """Read the standard GenAI capture switch; evaltrace captures by default because evaluators need content.

    ``span_only``, ``span_and_event``, ``true`` keep content on spans; ``false``, ``no_content`` and
    ``event_only`` turn span content off. Unknown values keep the default.
    """
    raw = os.environ.get(CAPTURE_CONTENT_ENV)
    if raw is None or not raw.strip():
        return default
    return raw.strip().lower() not in _CAPTURE_OFF_VALUES


@dataclass(frozen=True)
class CaptureSettings:
    """What instrumentation records: content on or off, and the cap for each JSON attribute value."""

    capture_content: bool = True
    max_attribute_length: int = DEFAULT_MAX_LENGTH


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
