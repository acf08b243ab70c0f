"""botocore objects made traceable without changing what the user reads from them.

* ``EventIterator``: botocore's ``EventStream`` is an iterable (its ``__iter__`` is a generator function), not an
  iterator; the engine's stream proxy pulls with ``__next__``. This proxy iterates it once, lazily, and passes
  everything else (``close()``, ``get_initial_response()``, ``isinstance``) to the stream itself.
* ``rebuffer``: ``invoke_model``'s body is a ``StreamingBody`` read once; the span needs its JSON. The body is
  read (it is complete: ``invoke_model`` does not stream) and replaced by a fresh ``StreamingBody`` over the same
  bytes, so the user's ``read()`` / ``iter_lines()`` / ``iter_chunks()`` see exactly what the service sent.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import wrapt

if TYPE_CHECKING:
    _ObjectProxy = wrapt.ObjectProxy[Any]
else:
    _ObjectProxy = wrapt.ObjectProxy


class EventIterator(_ObjectProxy):
    """An iterator over a botocore ``EventStream`` that is still, for every other purpose, the stream."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._self_events: Iterator[Any] | None = None

    def __iter__(self) -> EventIterator:
        return self

    def __next__(self) -> Any:
        events = self._self_events
        if events is None:
            events = self._self_events = iter(self.__wrapped__)
        return next(events)


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
