"""Type checks for every ``configure()`` argument, run before anything is built.

Without them a wrong type surfaced wherever the value was first used: ``headers=123`` as an AttributeError deep in
the OTLP settings, ``evaluators=[42]`` as a TypeError in the processor, and ``local_store=42`` not at all (no local
store, no error). One row per parameter (a test fails when a parameter has none); each row says what is accepted,
and the error names the setting: ``configure(headers=123): expected a mapping of str to str, a "k=v,k2=v2" string
or None, got int``. Values of other than scalar types are shown by type only: a misplaced secret (a header list,
an API key) must not end up in a traceback or a log.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from evaltrace.exceptions import ConfigError

__all__ = ["CHECKS", "check_configure_arguments"]

# A check returns None when the value is accepted, else what was expected and what came instead.
Check = Callable[[Any], str | None]


def _got(value: Any) -> str:
    return f"got {type(value).__name__}"


def _optional_str(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else f"expected a string or None, {_got(value)}"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"expected True or False, {_got(value)}"


def _evaluation_flag(value: Any) -> str | None:
    return (
        None if isinstance(value, bool) or value == "process" else f'expected True, False or "process", {_got(value)}'
    )


def _optional_flag(value: Any) -> str | None:
    return None if value is None or isinstance(value, bool) else f"expected True, False or None, {_got(value)}"


def _headers(value: Any) -> str | None:
    expected = 'expected a mapping of str to str, a "k=v,k2=v2" string or None'
    if value is None or isinstance(value, str):
        return None
    if not isinstance(value, Mapping):
        return f"{expected}, {_got(value)}"
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            return f"{expected}, got a {type(key).__name__} -> {type(item).__name__} item"
    return None


def _phoenix(value: Any) -> str | None:
    if value is None or isinstance(value, bool | str):
        return None
    return f"expected True, False, a base URL or None, {_got(value)}"


def _local_store(value: Any) -> str | None:
    # Mappings and LocalStoreOptions are checked in full (keys, limits) when the exporter is built.
    expected = "expected True, False, a directory (str or os.PathLike), store options or None"
    if value is None or isinstance(value, bool | os.PathLike | Mapping) or _has_fields(value, "max_age_s"):
        return None
    if isinstance(value, str):
        return None if value.strip() else f"{expected}, got an empty string"
    return f"{expected}, {_got(value)}"


def _has_fields(value: Any, *names: str) -> bool:
    return all(hasattr(value, name) for name in names)


def _items(value: Any, what: str, accepts: Callable[[Any], bool], *, optional: bool = False) -> str | None:
    """A list or tuple whose every item ``accepts``; ``what`` names the item type in the message."""
    if optional and value is None:
        return None
    expected = f"expected a list of {what}{' or None' if optional else ''}"
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        return f"{expected}, {_got(value)}"
    for index, item in enumerate(value):
        if not accepts(item):
            return f"{expected}, got {type(item).__name__} at [{index}]"
    return None


def _has_methods(item: Any, *names: str) -> bool:
    return all(callable(getattr(item, name, None)) for name in names)


def _exporters(value: Any) -> str | None:
    return _items(
        value,
        "SpanExporter objects",
        lambda item: isinstance(item, SpanExporter) or _has_methods(item, "export", "shutdown", "force_flush"),
    )


def _evaluators(value: Any) -> str | None:
    if isinstance(value, Sequence) and not value:
        return None
    from evaltrace.evaluation.evaluator import Evaluator, EvaluatorSpec  # only when given: a heavy import

    return _items(value, "Evaluator or EvaluatorSpec objects", lambda item: isinstance(item, Evaluator | EvaluatorSpec))


def _sinks(value: Any) -> str | None:
    if value is None or (isinstance(value, Sequence) and not value):
        return None
    from evaltrace.evaluation.sinks.base import ScoreSink

    return _items(value, "ScoreSink objects", lambda item: isinstance(item, ScoreSink), optional=True)


def _evaluation_options(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return f"expected a mapping of option names to values or None, {_got(value)}"
    for key in value:
        if not isinstance(key, str):
            return f"expected option names (str) as keys, got a {type(key).__name__} key"
    from evaltrace.evaluation.options import option_value_problem  # only when given: a heavy import

    problem = option_value_problem(value)  # unknown names: ProcessorOptions.from_kwargs, which names the option
    return None if problem is None else f"{problem[0]}: {problem[1]}"


def _max_attribute_length(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer >= 0 (0 = no cap) or None, {_got(value)}"
    return None if value >= 0 else f"expected an integer >= 0 (0 = no cap), got {value}"


def _redact(value: Any) -> str | None:
    if value is None or isinstance(value, bool) or callable(value):
        return None
    if isinstance(value, list | tuple):  # regexes masked with the built-ins (compiled and checked by the Redactor)
        return _items(value, "regex patterns (str or re.Pattern)", lambda item: isinstance(item, str | re.Pattern))
    return f"expected True, False, None, a list of regex patterns or a str -> str callable, {_got(value)}"


def _tracer_provider(value: Any) -> str | None:
    if value is None or isinstance(value, TracerProvider):
        return None
    return f"expected an opentelemetry.sdk.trace.TracerProvider or None, {_got(value)}"


def _timeout(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"expected a number of seconds > 0, {_got(value)}"
    return None if value > 0 and math.isfinite(value) else f"expected a number of seconds > 0, got {value}"


def _queue_bytes(value: Any) -> str | None:
    # A string is parsed (and a bad one named) by parse_size when the queues are built.
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f'expected a number of bytes >= 0 (0 = no byte bound), a size such as "64MB" or None, {_got(value)}'
    return None if value >= 0 else f"expected a number of bytes >= 0 (0 = no byte bound), got {value}"


CHECKS: dict[str, Check] = {
    "service_name": _optional_str,
    "environment": _optional_str,
    "otlp_endpoint": _optional_str,
    "protocol": _optional_str,
    "headers": _headers,
    "langfuse": _optional_flag,
    "phoenix": _phoenix,
    "phoenix_project": _optional_str,
    "local_store": _local_store,
    "console": _flag,
    "exporters": _exporters,
    "capture_content": _optional_flag,
    "max_attribute_length": _max_attribute_length,
    "redact": _redact,
    "evaluators": _evaluators,
    "sinks": _sinks,
    "evaluation_options": _evaluation_options,
    "evaluation": _evaluation_flag,
    "evaluation_provenance": _optional_flag,
    "trace_judges": _optional_flag,
    "tracer_provider": _tracer_provider,
    "batch": _flag,
    "shutdown_timeout_s": _timeout,
    "handle_sigterm": _flag,
    "export_queue_max_bytes": _queue_bytes,
}
"""What each ``configure()`` parameter accepts (every parameter has a row)."""


def _shown(value: Any) -> str:
    """The value as written when it is a harmless scalar; otherwise only its type (it may hold a secret)."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    return f"<{type(value).__name__}>"


def check_configure_arguments(arguments: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for the first argument whose type (or range) ``configure()`` cannot use.

    Args:
        arguments: ``configure()``'s parameters by name, as passed.

    Raises:
        ConfigError: ``setting`` is the parameter; the message reads ``configure(<name>=<value>): <problem>``.
    """
    for name, value in arguments.items():
        problem = CHECKS[name](value)  # a KeyError here is a parameter added without its row
        if problem is not None:
            error = ConfigError(name, problem)
            error.args = (f"configure({name}={_shown(value)}): {problem}",)
            raise error
