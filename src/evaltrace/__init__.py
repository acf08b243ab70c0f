"""evaltrace: trace LLM applications with OpenTelemetry and evaluate them while they run."""

from __future__ import annotations

from evaltrace._version import __version__
from evaltrace.exceptions import ConfigError, EvaltraceError

__all__ = ["ConfigError", "EvaltraceError", "__version__"]
