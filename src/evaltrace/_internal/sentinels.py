"""Pure: the keyword arguments a call really gave, without the SDK's "not given" sentinels."""

from __future__ import annotations

from typing import Any

# Keyword value types that are neither None nor a sentinel: a call whose values are all of these has nothing to drop.
_PLAIN_VALUE_TYPES = frozenset((str, int, float, bool, list, dict, tuple))


def given(kwargs: dict[str, Any], sentinels: frozenset[str]) -> dict[str, Any]:
    """``kwargs`` without None values and instances of the classes named in ``sentinels`` (``NotGiven``, ``Unset``).

    Sentinels are told by class name, so the SDK that defines them need not be imported. The result is only read:
    a call with nothing to drop (the common case, checked in one C-level pass) gets ``kwargs`` itself back.
    """
    if _PLAIN_VALUE_TYPES.issuperset(map(type, kwargs.values())):
        return kwargs
    return {k: v for k, v in kwargs.items() if v is not None and type(v).__name__ not in sentinels}
