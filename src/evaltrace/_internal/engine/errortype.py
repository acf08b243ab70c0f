"""``error.type`` of an exception raised by a provider SDK."""

from __future__ import annotations


def error_type_of(error: BaseException) -> str:
    """``error.type``: the provider's error code when the API sent one, else the exception class qualname.

    OpenAI's errors carry it as ``code``; Anthropic's only in the body, as ``{"error": {"type": ...}}``.
    """
    code = getattr(error, "code", None)
    if isinstance(code, str) and code:
        return code
    body = getattr(error, "body", None)
    nested = body.get("error") if isinstance(body, dict) else None
    code = nested.get("type") if isinstance(nested, dict) else None
    if isinstance(code, str) and code:
        return code
    return type(error).__qualname__
