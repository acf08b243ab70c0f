"""Fork safety: what each component does in a child process made by ``os.fork()``.

A child of ``fork()`` (gunicorn ``--preload``, ``multiprocessing`` with the ``fork`` start method) holds a copy
of the parent's memory but only the thread that forked: every worker thread evaltrace started is gone, a lock
one of them held stays held for ever, and what sat in the queues belongs to the parent, which still exports,
evaluates and delivers it. Without help, the child queues spans that are never exported, evaluations that never
run and scores that are never delivered, or hangs on a lock.

Each component with a thread, a lock its threads take, or a queue calls :func:`reinit_after_fork` on itself when
it is created. One ``os.register_at_fork(after_in_child=...)`` callback (registered once, at import) then calls
its ``_reinit_after_fork()`` in the child, in creation order (an owner after what it owns). That method, run
while the child has a single thread:

- creates new locks, events, conditions and queues (never acquires an inherited one);
- forgets the parent's queued and in-flight work: the child neither exports it again nor counts it as lost;
- starts the child's counters and stats at zero (they describe this process only);
- leaves threads to be started on first use (asyncio loops are new loops: the parent's are never run);
- keeps a component that was shut down before the fork shut down.

The registry holds weak references: a component that was garbage-collected is neither kept alive nor called.
The exit hooks ``configure()`` registered are inherited by the child, so a child that exits normally drains its
own pipeline like any process (see ``docs/reliability.md``, "Fork").
"""

from __future__ import annotations

# Imported for its fork hooks, before any TracerProvider of ours exists. OTel SDK >= 1.44 registers an
# ``after_in_child`` hook per TracerProvider that re-detects resources on a ThreadPoolExecutor, and this module
# registers hooks that hold its global submit lock across fork() and reinitialise it in the child. Child hooks
# run in registration order: when this module is first imported after a provider was made (asyncio, httpx and
# our own pools import it lazily), the provider's hook runs first and waits for ever on the still-held lock,
# and the forked child (a gunicorn worker) hangs before it runs a line (a provider given its resource runs no
# detector, so nothing imported the module before it; tests/test_fork_safety.py).
import concurrent.futures.thread  # noqa: F401
import itertools
import os
import weakref
from collections.abc import Callable
from typing import Protocol

from evaltrace._internal.errors import log_internal_error


class ForkAware(Protocol):
    """A component that can make itself usable again in a forked child."""

    def _reinit_after_fork(self) -> None: ...


_components: weakref.WeakValueDictionary[int, ForkAware] = weakref.WeakValueDictionary()
_serial = itertools.count()
_module_reinits: list[Callable[[], None]] = []


def reinit_after_fork(component: ForkAware) -> None:
    """Call ``component._reinit_after_fork()`` in every child forked from now on, while it is alive."""
    _components[next(_serial)] = component


def call_in_child(reinit: Callable[[], None]) -> None:
    """Call ``reinit`` in every child forked from now on, before the components: for module-level state."""
    _module_reinits.append(reinit)


_inherited: list[object] = []


def keep_inherited(obj: object) -> None:
    """Keep the child's copy of a parent's ``obj`` (an event loop, an HTTP client) referenced, never used or closed.

    The copy of a running loop cannot be closed (its thread is not in the child) and collecting it would warn
    about an unclosed loop; closing a client's copy could end connections the parent still uses. It stays as inert
    memory instead.
    """
    _inherited.append(obj)


def _after_fork_in_child() -> None:
    for reinit in _module_reinits:
        try:
            reinit()
        except Exception:
            log_internal_error(f"re-initialising {getattr(reinit, '__module__', reinit)} after fork")
    for _, component in sorted(_components.items(), key=lambda item: item[0]):
        try:
            component._reinit_after_fork()
        except Exception:  # an at-fork callback must not raise; the other components still need their turn
            log_internal_error(f"re-initialising {type(component).__name__} after fork")


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)
