"""A file of prices already looked up in genai-prices, so a new process need not load its whole table.

genai-prices has one bundled table of every provider's models; the first lookup in a process imports it: about
60M instructions for its types (pydantic schemas) and 130M to build ~100k objects, which then set off a full pass
of the cyclic collector over the application (issue 28's start-up row). The price of one (provider, model) does
not change until genai-prices is upgraded or a dated price of that model starts, so it is written here on first
lookup and read back by later processes, which then never import genai-prices at all.

An entry holds the converted ``ModelPrice`` (floats, which JSON round-trips exactly) or ``None`` (genai-prices
does not know the model), and the UTC date from which it no longer holds, if any. It is kept only when it is
exact: the file names the ``genai_prices/data.py`` it came from (path, size, modification time), so any other
install or version discards the whole file; a model whose price depends on the time of day (an off-peak rate) or
on a constraint this module does not know is never written; a user's own snapshot (``set_custom_snapshot``,
``UpdatePrices``) turns the file off for that process; an entry taken from the price index built at run time
(``price_index_local``) names that release's ``unindexable.json`` and is not served once that file exists (one check
per process). Every failure to read or write it (no home, a read-only disk, a corrupt or concurrent file) only means
a miss: the price is then looked up in genai-prices as before.

The file is bounded: model names come from responses (fine-tunes, deployments), so at most 512 prices and 64
unknown names are kept; once full, nothing new is written and the other models are looked up in genai-prices as
before. Below the bound each new model rewrites the file (a few hundred small writes per install at most).

Location: one file per genai-prices install, so environments (venvs) with different installs each keep their own
warm start: ``prices-<hash>.json`` (a short hash of the install's ``data.py`` path) in
``$XDG_CACHE_HOME/evaltrace/`` (``~/.cache/evaltrace/``), or in the folder ``$EVALTRACE_PRICE_CACHE`` names (an
existing folder, or a path ending in ``/``). ``$EVALTRACE_PRICE_CACHE`` naming a file uses that file as is (shared
by every install that names it: the last one to write it wins); ``off`` or ``0`` disables the cache. A temporary
file a killed writer left beside it is removed by the next process that writes, once it is an hour old.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
import threading
import time
from enum import Enum
from pathlib import Path
from typing import Any, Final, Literal

from evaltrace._internal.private_files import PRIVATE_FILE_MODE, make_private_dirs

__all__ = [
    "MISS",
    "PRICE_CACHE_ENV",
    "Entry",
    "Miss",
    "custom_snapshot_set",
    "decode",
    "encode",
    "folder",
    "get",
    "put",
    "replace",
    "reset",
    "sweep",
    "valid_until",
    "withdraw",
]

PRICE_CACHE_ENV = "EVALTRACE_PRICE_CACHE"
_FORMAT = 1
_OFF = frozenset({"", "0", "off", "false", "no"})
# Bounds on what the file (and this process's view of it) holds: prices, and names genai-prices does not know.
_MAX_ENTRIES: Final = (512, 64)
_STALE_TMP_S = 3600.0  # a writer's temporary file lives milliseconds: one this old was left by a killed writer

# A converted price: (input, output, cached_input, tiers, cache_write), ``ModelPrice``'s fields in order.
Price = tuple[float, float, float | None, tuple[tuple[int, float, float | None, float], ...], float | None]
Entry = Price | None  # None: genai-prices does not know the model


class Miss(Enum):
    """The type of ``MISS``."""

    MISS = "miss"


MISS: Final = Miss.MISS  # not in the file (or the file is not usable): look it up
_NO_EXPIRY = ""
_UNCACHEABLE: Any = object()

# "path", "source", "prices", "counts", "swept", "withdrawn": loaded once per process, on first use
_state: dict[str, Any] = {}


def reset() -> None:
    """Forget what this process read (tests; a changed ``$EVALTRACE_PRICE_CACHE``)."""
    _state.clear()


def get(provider_id: str, model: str) -> Entry | Literal[Miss.MISS]:
    """The cached price of ``model`` at ``provider_id``, ``None`` for a model genai-prices lacks, or ``MISS``."""
    if custom_snapshot_set():
        return MISS
    prices = _loaded()
    if prices is None:
        return MISS
    row = prices.get(provider_id, {}).get(model)
    if row is None:
        return MISS
    try:
        until, price, *withdrawn_by = row
        if until and dt.datetime.now(tz=dt.UTC).date() >= dt.date.fromisoformat(until):
            return MISS
        if withdrawn_by and _withdrawn(withdrawn_by[0]):
            return MISS  # its source was found wrong since: genai-prices' own lookup replaces it
        return decode(price)
    except (TypeError, ValueError):  # a file edited or written by a future format: not ours to trust
        return MISS


def put(provider_id: str, model: str, price: Entry, until: Any, withdrawn_by: str | None = None) -> None:
    """Write ``price`` (from a full lookup) unless ``until`` says it cannot be cached; never raises for I/O.

    ``withdrawn_by``: a file, relative to the cache folder, whose existence withdraws the entry (the marker of a
    release whose run-time price index, the entry's source, was found to differ from genai-prices).
    """
    if until is _UNCACHEABLE or custom_snapshot_set():
        return
    prices = _loaded()
    path, source = _state.get("path"), _state.get("source")
    if prices is None or path is None:
        return
    rows = prices.setdefault(provider_id, {})
    if model not in rows:  # a new entry (an expired one is replaced in place)
        counts, kind = _state["counts"], int(price is None)
        if counts[kind] >= _MAX_ENTRIES[kind]:
            return  # full: this model is looked up in genai-prices in every process, as without the file
        counts[kind] += 1
    row = [until.isoformat() if until else _NO_EXPIRY, encode(price)]
    rows[model] = row if withdrawn_by is None else [*row, withdrawn_by]
    if not _state.get("swept"):
        _state["swept"] = True
        sweep(path)
    # Lock-free: each dict copy is one step under the GIL, so another thread's put cannot change a dict while it is
    # serialised (at worst the file misses that thread's entry until its own write).
    snapshot = {provider: dict(rows) for provider, rows in dict(prices).items()}
    text = json.dumps({"format": _FORMAT, "source": source, "prices": snapshot}, separators=(",", ":"))
    if not replace(path, text):
        _state["prices"] = None  # unwritable: stop trying in this process


def withdraw() -> None:
    """Check again, at the next ``get``, which entries are withdrawn (this process has just written a marker)."""
    _state.pop("withdrawn", None)


def _withdrawn(marker: Any) -> bool:
    """Whether the file ``marker`` (relative to the cache folder) exists: checked once per marker and process."""
    withdrawn: dict[str, bool] = _state.setdefault("withdrawn", {})
    if marker not in withdrawn:
        path: Path | None = _state.get("path")
        # A marker that is not a relative path inside the folder is not ours: the entry is not trusted either.
        if path is None or not isinstance(marker, str) or Path(marker).is_absolute() or ".." in Path(marker).parts:
            withdrawn[marker] = True
        else:
            withdrawn[marker] = os.path.exists(path.parent / marker)
    return withdrawn[marker]


def replace(path: Path, text: str) -> bool:
    """Replace the private file ``path`` with ``text`` whole; False when it cannot be written (never raises)."""
    # One temporary file per writer (process and thread): writers may be at work at once, and each must replace the
    # file with a whole document of its own.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        make_private_dirs(path.parent)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
        with open(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return False
    return True


def valid_until(info: Any, now: dt.datetime) -> Any:
    """The UTC date from which ``info.get_prices(now)`` may change, None if never, or uncacheable.

    genai-prices picks the last of a model's conditional prices whose constraint is active; a start date is
    active from that UTC day on. Only start dates are understood here: any other constraint (an off-peak time of
    day, one added in a later version) makes the entry uncacheable.
    """
    conditional = info.prices
    if not isinstance(conditional, list):
        return None
    today = now.astimezone(dt.UTC).date()
    upcoming: list[dt.date] = []
    for price in conditional:
        constraint = price.constraint
        if constraint is None:
            continue
        start = getattr(constraint, "start_date", None)
        if type(constraint).__name__ != "StartDateConstraint" or type(start) is not dt.date:
            return _UNCACHEABLE
        if start > today:
            upcoming.append(start)
    return min(upcoming) if upcoming else None


def custom_snapshot_set() -> bool:
    """Whether a snapshot of the user's own (``set_custom_snapshot``, ``UpdatePrices``) replaces the bundled table."""
    # Without genai_prices.data_snapshot imported, no snapshot of the user's can have been set.
    snapshot_module = sys.modules.get("genai_prices.data_snapshot")
    return snapshot_module is not None and getattr(snapshot_module, "_custom_snapshot", None) is not None


def _loaded() -> dict[str, dict[str, Any]] | None:
    """This process's view of the file (read once), or None when there is no usable cache."""
    if "prices" not in _state:
        _state["prices"] = _read()
    prices: dict[str, dict[str, Any]] | None = _state["prices"]
    return prices


def _read() -> dict[str, dict[str, Any]] | None:
    prices = _read_file()
    if prices is not None:
        counts = [0, 0]
        for rows in prices.values():
            for row in rows.values():
                counts[int(not isinstance(row, list) or len(row) not in (2, 3) or row[1] is None)] += 1
        _state["counts"] = counts
    return prices


def _read_file() -> dict[str, dict[str, Any]] | None:
    setting = os.environ.get(PRICE_CACHE_ENV)
    if setting is not None and setting.strip().lower() in _OFF:
        return None
    source = _source()
    path = None if source is None else _path(setting, source)
    if path is None or source is None:
        return None
    _state["path"], _state["source"] = path, source
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # unreadable or corrupt: start afresh (the next write replaces it)
    if not isinstance(document, dict) or document.get("format") != _FORMAT or document.get("source") != source:
        return {}  # another genai-prices version or install
    prices = document.get("prices")
    if not isinstance(prices, dict) or not all(isinstance(rows, dict) for rows in prices.values()):
        return {}
    return prices


def folder() -> Path | None:
    """The folder evaltrace keeps its price files in (this file's, or a named file's), None when they are off."""
    setting = os.environ.get(PRICE_CACHE_ENV)
    if setting is not None:
        if setting.strip().lower() in _OFF:
            return None
        named = _expanded(setting)
        if named is None:
            return None
        return named if setting.endswith(("/", os.sep)) or named.is_dir() else named.parent
    return _default_folder()


def _expanded(setting: str) -> Path | None:
    """``$EVALTRACE_PRICE_CACHE`` as a path, None when its ``~`` names no home (``~nosuchuser/``): no cache then."""
    try:
        return Path(setting).expanduser()
    except RuntimeError:
        return None


def _default_folder() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME")
    try:
        return (Path(base) if base else Path.home() / ".cache") / "evaltrace"
    except RuntimeError:  # no home directory
        return None


def _path(setting: str | None, source: list[Any]) -> Path | None:
    directory = _default_folder() if setting is None else _expanded(setting)
    if directory is None:
        return None
    if setting is not None and not setting.endswith(("/", os.sep)) and not directory.is_dir():
        return directory  # a file the user named: used as is
    # One file per install (its data.py path): another venv's install never discards this one's prices; an upgrade
    # of this install changes the size and time inside the file, which then starts afresh.
    digest = hashlib.sha256(str(source[0]).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return directory / f"prices-{digest}.json"


def sweep(path: Path) -> None:
    """Remove the temporary files of ``path`` that a killed writer left (best effort)."""
    prefix, cutoff = f"{path.name}.", time.time() - _STALE_TMP_S
    try:
        with os.scandir(path.parent) as entries:
            for entry in entries:
                if entry.name.startswith(prefix) and entry.name.endswith(".tmp") and entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
    except OSError:
        pass


def genai_prices_package() -> Path | None:
    """The folder of the ``genai_prices`` package found on ``sys.path`` (not imported), or None."""
    from importlib.util import find_spec

    try:
        spec = find_spec("genai_prices")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _source() -> list[Any] | None:
    """Which genai-prices table the file describes: its data module's path, size and modification time."""
    package = genai_prices_package()
    if package is None:
        return None
    data = os.path.join(package, "data.py")
    try:
        stat = os.stat(data)
    except OSError:
        return None
    return [data, stat.st_size, stat.st_mtime_ns]


def encode(price: Entry) -> Any:
    """``price`` as JSON values (tuples as lists)."""
    if price is None:
        return None
    inp, out, cached, tiers, write = price
    return [inp, out, cached, [list(tier) for tier in tiers], write]


def decode(row: Any) -> Entry:
    """The price ``encode`` wrote; TypeError or ValueError for anything else."""
    if row is None:
        return None
    inp, out, cached, tiers, write = row
    decoded: Price = (
        _float(inp),
        _float(out),
        _optional(cached),
        tuple((_int(s), _float(i), _optional(c), _float(o)) for s, i, c, o in tiers),
        _optional(write),
    )
    return decoded


def _float(value: Any) -> float:
    if type(value) is not float:
        raise TypeError(value)
    return value


def _optional(value: Any) -> float | None:
    return None if value is None else _float(value)


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(value)
    return value
