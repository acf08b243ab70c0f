"""What rich's ``Console()`` would find out about standard output, found out without importing rich (issue 28).

``traces list`` draws its table without rich (:mod:`evaltrace.cli.plain_table`), and must print exactly what
rich would: at the same width, with colour exactly when rich would use it. The rules below are rich's own
(``Console.size``, ``Console.is_terminal``, ``_detect_color_system``, ``NO_COLOR``), for the environments where
they are simple. Anywhere else (Windows consoles, Jupyter, IDLE, a dumb terminal, an output that is not UTF-8)
:func:`detect` returns None and the caller leaves the printing to rich.
"""

from __future__ import annotations

import builtins
import os
import sys
from dataclasses import dataclass
from typing import TextIO

__all__ = ["Terminal", "detect"]


@dataclass(frozen=True)
class Terminal:
    """Where a plain renderer writes, and how."""

    stream: TextIO
    width: int
    """Cells per line: ``COLUMNS`` when set, else the terminal's width, else 80 (rich's rule)."""
    ansi: bool
    """Write SGR codes: the output is a terminal, or ``FORCE_COLOR`` / ``TTY_COMPATIBLE=1`` says it is one."""
    no_color: bool
    """``NO_COLOR`` is set (not empty): colours are left out, bold and dim stay (rich's rule)."""


def _is_terminal(stream: TextIO, environ: os._Environ[str]) -> bool:
    tty_compatible = environ.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "1"
    force_color = environ.get("FORCE_COLOR")
    if force_color is not None:
        return force_color != ""
    isatty = getattr(stream, "isatty", None)
    try:
        return False if isatty is None else bool(isatty())
    except ValueError:  # a closed file (at the end of a pytest run, for example): rich says no terminal too
        return False


def _width(environ: os._Environ[str]) -> int:
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)  # rich takes it as it is, whatever the terminal says
    for descriptor in (0, 1, 2):  # rich asks stdin, stdout, stderr in that order
        try:
            return os.get_terminal_size(descriptor).columns or 80  # a pseudo-terminal may say 0
        except (AttributeError, ValueError, OSError):
            continue
    return 80


def detect(stream: TextIO | None = None) -> Terminal | None:
    """How rich's ``Console()`` would write to ``stream`` (standard output by default).

    Args:
        stream: The output.

    Returns:
        The width and colour rules, or None where rich's rules are not the simple ones reproduced here.
    """
    out = sys.stdout if stream is None else stream
    environ = os.environ
    if sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return None  # legacy Windows consoles and Jupyter have rules of their own
    if getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return None
    encoding = (getattr(out, "encoding", None) or "utf-8").lower()
    if not encoding.startswith("utf"):
        return None  # rich swaps the box lines for ASCII ones there
    ansi = _is_terminal(out, environ)
    if ansi and environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return None
    width = _width(environ)
    if width < 1:
        return None
    return Terminal(out, width, ansi, environ.get("NO_COLOR", "") != "")
