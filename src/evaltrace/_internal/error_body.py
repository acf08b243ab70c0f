"""Pure: the error code an API put in an error response body, for ``error.type``."""

from __future__ import annotations

from typing import Any

from evaltrace._internal.jsonutil import loads_or_raw


def code_in_body(body: Any, keys: tuple[str, ...]) -> str | None:
    """The first non-empty string under one of ``keys`` in an API error body, else None.

    ``body`` is the error object itself or ``{"error": {...}}`` around it, as a dict or as JSON text (SDKs keep
    either). ``keys`` in order of preference (``("code", "type")``: a specific code before a class of errors).
    """
    if isinstance(body, str):
        body = loads_or_raw(body) if body.startswith("{") else None
    if not isinstance(body, dict):
        return None
    inner = body.get("error")
    source = inner if isinstance(inner, dict) else body
    for key in keys:
        value = source.get(key)
        if isinstance(value, str) and value:
            return value
    return None
