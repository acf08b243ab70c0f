"""Bounds on every wait of the PostgreSQL store, so a frozen or vanished server fails the save instead of hanging it.

Three bounds, each settable in the dsn (libpq parameters), with defaults when it says nothing:

* ``connect_timeout`` (default :data:`CONNECT_TIMEOUT_S` s per address): connecting, including the startup
  exchange, so a server that accepts TCP but never answers is given up;
* ``options=-c statement_timeout=...`` (default :data:`STATEMENT_TIMEOUT_S` s, set with ``SET`` once connected:
  a startup ``options`` parameter of our own would be refused by a PgBouncer in front of the server): the server
  cancels a slow statement (a lock wait, say) itself and the transaction ends cleanly on its side;
* a client-side deadline of the statement timeout plus :data:`GRACE_S` s on every round trip. A stopped server
  (SIGSTOP, a hung VM, a dead host behind a live route) cannot cancel anything and its kernel still acknowledges
  our packets, so neither ``statement_timeout`` nor TCP keepalives or ``tcp_user_timeout`` ever fire: only the
  client can end the wait. At the deadline the connection's socket is shut down, which wakes the waiting call with
  an error, and the store reports :class:`NoAnswerError`.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONNECT_TIMEOUT_S",
    "GRACE_S",
    "STATEMENT_TIMEOUT_S",
    "Deadline",
    "NoAnswerError",
    "Timeouts",
    "connect_params",
]

CONNECT_TIMEOUT_S = 10
"""Seconds to connect (per address tried), when the dsn gives no ``connect_timeout``."""

STATEMENT_TIMEOUT_S = 30.0
"""Seconds a statement may run, when the dsn's ``options`` give no ``statement_timeout``."""

GRACE_S = 2.0
"""Seconds past the statement timeout before the client stops waiting (time for the server's own cancel to arrive)."""

# Every form libpq ``options`` pass on to the server: ``-c statement_timeout=5s``, ``-cstatement_timeout=5s``, and
# the long option ``--statement-timeout=5s`` (or ``--statement_timeout``: the server reads "-" in a name as "_").
_STATEMENT_TIMEOUT = re.compile(
    r"statement[_-]timeout\s*=\s*'?(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?'?(?![A-Za-z])", re.IGNORECASE
)
_UNIT_S = {"us": 0.000001, "ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


class NoAnswerError(Exception):
    """The server did not answer within the client-side deadline; the connection was cut."""


def _statement_timeout_s(options: str) -> float | None:
    """The ``statement_timeout`` set by libpq ``options``, in seconds (None when unset; 0 means none)."""
    given = _STATEMENT_TIMEOUT.findall(options)
    if not given:
        return None
    value, unit = given[-1]  # the last one given is the one the server keeps
    return float(value) * _UNIT_S[(unit or "ms").lower()]


@dataclass(frozen=True)
class Timeouts:
    """What :func:`connect_params` decided.

    Attributes:
        answer_s: The client-side deadline of each call, in seconds (None: none).
        set_statement_timeout_ms: The ``statement_timeout`` to ``SET`` once connected (None: the dsn sets its own).
    """

    answer_s: float | None
    set_statement_timeout_ms: int | None


def connect_params(params: dict[str, Any], connect_timeout_s: float, statement_timeout_s: float) -> Timeouts:
    """Complete libpq ``params`` in place with a ``connect_timeout`` if it lacks one; decide the other two bounds.

    The dsn's own ``connect_timeout`` and ``statement_timeout`` win over the defaults; the client deadline follows
    whichever statement timeout applies (the server gets the first chance to cancel cleanly). A dsn that turns
    the statement timeout off (``statement_timeout=0``) turns the client deadline off too: its owner asked for
    statements without a bound.

    Args:
        params: The dsn as a mapping (``psycopg.conninfo.conninfo_to_dict``).
        connect_timeout_s: Seconds to connect when the dsn does not say.
        statement_timeout_s: Seconds per statement when the dsn does not say.
    """
    if not str(params.get("connect_timeout") or "").strip():
        params["connect_timeout"] = str(max(1, round(connect_timeout_s)))  # libpq takes whole seconds, 0 = never
    own = _statement_timeout_s(str(params.get("options") or ""))
    if own is not None:
        return Timeouts(own + GRACE_S if own > 0 else None, None)
    return Timeouts(statement_timeout_s + GRACE_S, max(1, round(statement_timeout_s * 1000)))


class Deadline:
    """Cuts a connection that leaves a call unanswered past ``timeout_s``; use :meth:`answer_within` per call."""

    def __init__(self, timeout_s: float | None, socket_fd: Any) -> None:
        """Watch the connection whose socket ``socket_fd()`` returns (read when the deadline passes).

        Args:
            timeout_s: Seconds each guarded call may wait (None: no deadline).
            socket_fd: Returns the connection's socket descriptor (``pgconn.socket``); may raise once closed.
        """
        self.timeout_s = timeout_s
        self._socket_fd = socket_fd
        self._lock = threading.Lock()
        self._armed = 0  # generation of the guarded call in progress; 0 when none
        self._generation = 0
        self.cut = False

    def _expire(self, generation: int) -> None:
        with self._lock:
            if self._armed != generation:
                return  # that call finished just before the timer fired
            # Armed: the call has not returned to answer_within. One whose answer psycopg was still reading at
            # the deadline is cut too (nothing outside psycopg tells it from one still waiting); its result
            # stands, and since the socket is then shut down, the next call reports the cut connection.
            self.cut = True
            try:
                # shutdown() on a duplicate of the descriptor ends the connection for its owner too, and wakes the
                # thread blocked on it (EOF); closing the owner's descriptor under it instead would be unsafe.
                with socket.socket(fileno=os.dup(self._socket_fd())) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
            except Exception:  # closed meanwhile (OSError, or psycopg's error): nothing waits on it any more
                pass

    @contextmanager
    def answer_within(self) -> Iterator[None]:
        """Run the block (one call to the server); past the deadline the connection is cut.

        Raises:
            NoAnswerError: The connection was cut (now or by an earlier call); the block's error is its cause.
        """
        if self.cut:
            raise NoAnswerError(f"no answer within {self.timeout_s:g} s")
        if self.timeout_s is None:
            yield
            return
        with self._lock:
            self._generation += 1
            self._armed = generation = self._generation
        timer = threading.Timer(self.timeout_s, self._expire, (generation,))
        timer.daemon = True
        timer.start()
        try:
            yield
        except Exception as exc:
            if self.cut:
                raise NoAnswerError(f"no answer within {self.timeout_s:g} s") from exc
            raise
        finally:
            with self._lock:
                self._armed = 0
            timer.cancel()
