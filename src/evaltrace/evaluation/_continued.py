"""A coroutine begun outside any task (``Engine._begin``), driven on by the task that takes it over.

Moved out of ``_engine`` as it was (a stage of its own); ``_engine`` imports ``continue_coro`` as ``_continue``.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any


class Continued:
    """Awaiting it drives a coroutine begun outside any task (``Engine._begin``) on from where it suspended.

    What a task would have done from the start: whatever the coroutine yields (a future to wait for, or None for
    one loop iteration) goes to the task driving this, and what the task sends or throws in (a cancellation at
    shutdown) goes on to the coroutine.
    """

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, None], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, None]:
        coro, yielded = self._coro, self._yielded
        self._yielded = None  # the future waited for: referenced by the task from here, not by this object
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:  # the task was destroyed undone: so is the coroutine
                coro.close()
                raise
            except BaseException as exc:  # a cancellation (or the awaited future's error) goes on to it
                try:
                    yielded = coro.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration:
                    return


async def continue_coro(coro: Coroutine[Any, Any, None], yielded: Any) -> None:
    await Continued(coro, yielded)
