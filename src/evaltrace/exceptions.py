"""Exceptions raised by evaltrace into user code.

Hierarchy::

    EvaltraceError
     ├── ConfigError          a setting passed to configure() or found in the environment is invalid
     ├── SchemaError          a persisted file or model does not satisfy the data model
     └── ScoreValidationError a score violates its ScoreConfig (range, category, data type)

Errors inside instrumentation and evaluation never reach the application: they are logged at one boundary
(``_internal.errors.handle_internal_errors``). These exceptions are only raised where the user asked for
something that cannot be done, at the call that asked for it.
"""

from __future__ import annotations

__all__ = ["ConfigError", "EvaltraceError", "SchemaError", "ScoreValidationError"]


class EvaltraceError(Exception):
    """Base class of every exception evaltrace raises on purpose."""


class ConfigError(EvaltraceError, ValueError):
    """A configuration value is invalid; the message names the setting and what was wrong."""

    def __init__(self, setting: str, problem: str) -> None:
        self.setting = setting
        self.problem = problem
        super().__init__(f"invalid setting {setting!r}: {problem}")


class SchemaError(EvaltraceError, ValueError):
    """Data (a file, a record) does not satisfy the evaltrace data model."""


class ScoreValidationError(EvaltraceError, ValueError):
    """A score does not satisfy its ScoreConfig."""
