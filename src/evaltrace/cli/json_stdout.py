"""Keep stdout for one JSON document: everything else a command's run writes there goes to stderr.

A ``--json`` command runs user code (evaluators, the modules they import, C extensions, subprocesses) that may
print. On stdout those lines would land before the JSON and a script's ``json.loads`` would fail. So, for the run,
Python-level writes (``print``, from any thread: ``sys.stdout`` is process-wide) go to ``sys.stderr``, and file
descriptor 1 points at descriptor 2 (``os.write(1, ...)``, C code, a child process); the JSON is written to a
duplicate of the original descriptor 1. Both are restored on every exit path.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

__all__ = ["stdout_for_json_only"]

_STDOUT_FD = 1
_STDERR_FD = 2


def _flush(stream: object) -> None:
    flush = getattr(stream, "flush", None)
    if flush is not None:
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream: nothing to keep
            flush()


def _writes_to_fd_1(stream: object) -> bool:
    """Whether ``stream`` (``sys.stdout`` as the run found it) writes to file descriptor 1."""
    try:
        return bool(stream.fileno() == _STDOUT_FD)  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # a StringIO, a test's capture: not a descriptor
        return False


def _detach_fd_1() -> int | None:
    """Point descriptor 1 at descriptor 2; return a duplicate of the original (None when there is no fd 1 or 2)."""
    try:
        saved = os.dup(_STDOUT_FD)
    except OSError:
        return None
    try:
        os.dup2(_STDERR_FD, _STDOUT_FD)
    except OSError:
        os.close(saved)
        return None
    return saved


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]  # a pipe may take part of it


@contextlib.contextmanager
def stdout_for_json_only() -> Iterator[Callable[[str], None]]:
    """Send what is written to stdout to stderr while the block runs; yield the function that writes the JSON.

    The function writes one line to the real stdout: the original descriptor 1 when ``sys.stdout`` wrote there,
    else the original ``sys.stdout`` object (a test's capture).
    """
    real = sys.stdout
    _flush(real)  # what was printed before the run stays before the JSON
    _flush(sys.stderr)
    to_fd = _writes_to_fd_1(real)
    saved = _detach_fd_1()

    def write_json(text: str) -> None:
        if to_fd and saved is not None:
            encoding = getattr(real, "encoding", None) or "utf-8"
            _write_all(saved, (text + "\n").encode(encoding, errors="backslashreplace"))
        else:
            real.write(text + "\n")
            _flush(real)

    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield write_json
    finally:
        _flush(real)  # writes through a kept reference to the original stream (``sys.__stdout__``) went to fd 2
        _flush(sys.stderr)  # Python-level writes of the run reach descriptor 2 before descriptor 1 is given back
        if saved is not None:
            os.dup2(saved, _STDOUT_FD)
            os.close(saved)
