"""What a stream proxy's ``for`` loop reads: the stream's inner iterator when its ``__iter__`` only re-yields it.

Split from :mod:`evaltrace._internal.engine.stream` (which re-exports :func:`same_code`): run once per stream, when
``SyncStreamProxy.__iter__`` picks the iterator its per-chunk generator loops over, never per chunk.
"""

from __future__ import annotations

from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

_NO_SENTINEL = object()
"""``iter(pull, _NO_SENTINEL)``: a C iterator over a ``__next__`` that ends at its StopIteration."""


def _reyield(self: Any) -> Iterator[Any]:  # the shape of openai's (and groq's) ``Stream.__iter__``
    for item in self._iterator:  # noqa: UP028  # this exact bytecode is what is recognised
        yield item


_REYIELD = _reyield.__code__
_REYIELDS: dict[CodeType, bool] = {}
"""Per ``__iter__`` code object: whether it is exactly ``_reyield``'s (one dict lookup per stream).

Keyed by the code, not by the stream class: a class whose ``__iter__`` is replaced later (patched by another
library, or by a test) is judged by the function it has now.
"""


def same_code(code: CodeType | None, shape: CodeType) -> bool:
    """Whether ``code`` does exactly what ``shape`` does: the same bytecode, names, constants, flags and arguments.

    The one test behind every "this SDK method only does X" bypass (openai's re-yielding ``Stream.__iter__`` here,
    anthropic's observer-notifying one): what a function does is its code object, whatever its name or module, so
    an SDK version or subclass that does anything more (another call, another attribute, a closure) is told apart.
    """
    return (
        code is not None
        and code.co_code == shape.co_code
        and code.co_names == shape.co_names
        and code.co_consts == shape.co_consts
        and code.co_flags == shape.co_flags
        and code.co_argcount == shape.co_argcount
        and code.co_kwonlyargcount == shape.co_kwonlyargcount
        and code.co_freevars == shape.co_freevars
    )


def _inner_iterator(wrapped: Any) -> Iterator[Any] | None:
    """The iterator ``iter(wrapped)`` would only re-yield, item for item, when that is all its ``__iter__`` does.

    openai's ``Stream.__iter__`` is ``for item in self._iterator: yield item``: a generator frame resumed per
    chunk that adds nothing. Looping over ``_iterator`` itself yields the same items in the same order, with the
    same errors, and saves that resume. Recognised only on a plain function (a wrapper around it, wrapt's or any
    other, is called as it is, even though it hands out the wrapped function's ``__code__``) whose bytecode,
    names, constants, flags and arguments are ``_reyield``'s: an SDK version or subclass whose ``__iter__`` does
    anything more (anthropic's notifies an observer per item) is read through ``iter()``. None when not recognised.
    """
    method = getattr(type(wrapped), "__iter__", None)
    if type(method) is not FunctionType:
        return None
    code = method.__code__
    plain = _REYIELDS.get(code)
    if plain is None:
        plain = _REYIELDS[code] = same_code(code, _REYIELD)
    if not plain:
        return None
    inner = getattr(wrapped, "_iterator", None)
    if inner is None:
        return None
    try:
        source: Iterator[Any] = iter(inner)  # what the re-yielding ``for`` itself calls
    except TypeError:
        return None
    return source
