"""Where the local trace store lives and how much it keeps: ``configure(local_store=...)`` and the environment.

Retention defaults keep a laptop healthy: traces stored more than 7 days ago go, and the least recently
stored go first when the database and its WAL take more than 1 GB. ``EVALTRACE_LOCAL_STORE_MAX_AGE`` (``30d``, ``12h``, ``0`` = keep forever) and
``EVALTRACE_LOCAL_STORE_MAX_BYTES`` (``500MB``, ``2GB``, ``0`` = no cap) override the defaults; options passed
to ``configure()`` win over both.

Who writes: ``writer="process"`` (the default where ``sys.executable`` is a Python) sends each batch to a
writer process that owns the SQLite connection; ``"thread"`` writes from the export queue's thread, in this
process. ``EVALTRACE_LOCAL_STORE_WRITER`` sets it when ``configure()`` does not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evaltrace.exceptions import ConfigError

__all__ = [
    "DEFAULT_DIRECTORY",
    "DEFAULT_MAX_AGE_S",
    "DEFAULT_MAX_BYTES",
    "MAX_AGE_ENV",
    "MAX_BYTES_ENV",
    "WRITER_ENV",
    "WRITERS",
    "LocalStoreOptions",
    "parse_duration",
    "parse_size",
    "resolve_store_options",
]

DEFAULT_DIRECTORY = Path(".evaltrace")
DEFAULT_MAX_AGE_S = 7 * 24 * 3600.0
DEFAULT_MAX_BYTES = 1_000_000_000
MAX_AGE_ENV = "EVALTRACE_LOCAL_STORE_MAX_AGE"
MAX_BYTES_ENV = "EVALTRACE_LOCAL_STORE_MAX_BYTES"
WRITER_ENV = "EVALTRACE_LOCAL_STORE_WRITER"
WRITERS = ("process", "thread")
DEFAULT_WRITER = "process"

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", re.IGNORECASE)
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb)?\s*", re.IGNORECASE)
_BYTES = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def parse_duration(text: str, setting: str) -> float:
    """Seconds in ``90``, ``90s``, ``15m``, ``1h`` or ``7d``.

    Raises:
        ConfigError: Not a number with one of those units; the message names ``setting``.
    """
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ConfigError(setting, f"expected a duration such as 90s, 15m, 1h or 7d, got {text!r}")
    return float(match.group(1)) * _SECONDS[match.group(2).lower()]


def parse_size(text: str, setting: str) -> int:
    """Bytes in ``1000000``, ``500MB`` or ``1GB`` (decimal units).

    Raises:
        ConfigError: Not a number with one of those units; the message names ``setting``.
    """
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ConfigError(setting, f"expected a size such as 500MB or 1GB, got {text!r}")
    return int(float(match.group(1)) * _BYTES[(match.group(2) or "b").lower()])


@dataclass(frozen=True)
class LocalStoreOptions:
    """Settings of the local trace store (``configure(local_store=LocalStoreOptions(...))``).

    Attributes:
        directory: Store root; the database is ``<directory>/traces.sqlite3``.
        max_age_s: Traces last written longer ago are deleted; ``0`` keeps them forever.
        max_bytes: Bound on the database and its WAL together: past it the oldest traces are evicted (see
            ``store_space``); ``0`` means no cap (the WAL still stays within 64 MB).
        writer: ``"process"`` (a writer process owns the database) or ``"thread"`` (the export queue's thread
            writes it); ``None`` takes ``EVALTRACE_LOCAL_STORE_WRITER``, else ``"process"``.
    """

    directory: str | Path = DEFAULT_DIRECTORY
    max_age_s: float | None = None
    max_bytes: int | None = None
    writer: str | None = None

    def resolved(self, environ: Mapping[str, str] | None = None) -> LocalStoreOptions:
        """These options with every unset limit taken from the environment, then the defaults.

        Raises:
            ConfigError: A limit, the writer or an environment variable is invalid; the message names it.
        """
        env = os.environ if environ is None else environ
        max_age, max_bytes, writer = self.max_age_s, self.max_bytes, self.writer
        if max_age is None:
            raw = env.get(MAX_AGE_ENV, "").strip()
            max_age = parse_duration(raw, MAX_AGE_ENV) if raw else DEFAULT_MAX_AGE_S
        if max_bytes is None:
            raw = env.get(MAX_BYTES_ENV, "").strip()
            max_bytes = parse_size(raw, MAX_BYTES_ENV) if raw else DEFAULT_MAX_BYTES
        if isinstance(max_age, bool) or not isinstance(max_age, int | float) or max_age < 0:
            raise ConfigError("local_store.max_age_s", f"expected seconds >= 0, got {max_age!r}")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ConfigError("local_store.max_bytes", f"expected an int >= 0, got {max_bytes!r}")
        setting = "local_store.writer"
        if writer is None:
            writer, setting = env.get(WRITER_ENV, "").strip().lower() or DEFAULT_WRITER, WRITER_ENV
        if writer not in WRITERS:
            raise ConfigError(setting, f"expected 'process' or 'thread', got {writer!r}")
        return replace(self, max_age_s=float(max_age), max_bytes=max_bytes, writer=writer)


def resolve_store_options(value: Any, environ: Mapping[str, str] | None = None) -> LocalStoreOptions:
    """Options from what ``configure(local_store=...)`` accepts besides True/False/None.

    Accepts a directory (``str`` or ``os.PathLike``), a :class:`LocalStoreOptions`, or a mapping with the keys
    ``directory``, ``max_age`` (seconds or ``"7d"``), ``max_bytes`` (bytes or ``"1GB"``) and ``writer``
    (``"process"`` or ``"thread"``).

    Raises:
        ConfigError: Anything else, or an invalid limit; the message names it.
    """
    if isinstance(value, LocalStoreOptions):
        return value.resolved(environ)
    if isinstance(value, str | os.PathLike):
        return LocalStoreOptions(Path(value)).resolved(environ)
    if isinstance(value, Mapping):
        unknown = set(value) - {"directory", "max_age", "max_bytes", "writer"}
        if unknown:
            raise ConfigError(
                "local_store", f"unknown option(s) {sorted(unknown)}; use directory, max_age, max_bytes, writer"
            )
        age, size = value.get("max_age"), value.get("max_bytes")
        return LocalStoreOptions(
            directory=Path(value.get("directory", DEFAULT_DIRECTORY)),
            max_age_s=parse_duration(age, "local_store.max_age") if isinstance(age, str) else age,
            max_bytes=parse_size(size, "local_store.max_bytes") if isinstance(size, str) else size,
            writer=value.get("writer"),
        ).resolved(environ)
    raise ConfigError(
        "local_store", f"expected True, False, a directory, a mapping or LocalStoreOptions, got {value!r}"
    )
