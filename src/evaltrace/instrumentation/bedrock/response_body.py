"""``invoke_model``'s body made readable twice: by the span, then by the user.

The body is a ``StreamingBody`` read once; the span needs its JSON. ``rebuffer`` reads it (it is complete:
``invoke_model`` does not stream) and replaces it by a fresh ``StreamingBody`` over the same bytes, so the user's
``read()`` / ``iter_lines()`` / ``iter_chunks()`` see exactly what the service sent.
"""

from __future__ import annotations

import io
from collections.abc import MutableMapping
from typing import Any


class _Failed:
    """A raw stream whose every read raises the error the real body raised when we read it first."""

    def __init__(self, error: BaseException) -> None:
        self._error = error

    def read(self, amt: int | None = None) -> bytes:
        raise self._error

    def close(self) -> None:
        """Nothing left to close: the real body was closed by its failed read."""


def rebuffer(result: MutableMapping[str, Any]) -> bytes:
    """Read ``result["body"]`` and put an unread ``StreamingBody`` of the same bytes in its place.

    Raises what reading raised, after replacing the body by one that raises the same error on read: the user
    meets the error where they would have, when reading the body.
    """
    from botocore.response import StreamingBody  # type: ignore[import-untyped]

    body = result["body"]
    try:
        data: bytes = body.read()
    except BaseException as error:
        result["body"] = StreamingBody(_Failed(error), None)
        raise
    result["body"] = StreamingBody(io.BytesIO(data), len(data))
    return data
