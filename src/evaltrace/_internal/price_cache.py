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
``UpdatePrices``) turns the file off for that process. Every failure to read or write it (no home, a read-only
disk, a corrupt or concurrent file) only means a miss: the price is then looked up in genai-prices as before.

Location: ``$EVALTRACE_PRICE_CACHE`` (``off`` or ``0`` disables it), else
``$XDG_CACHE_HOME/evaltrace/prices.json`` (``~/.cache/evaltrace/prices.json``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import threading
from enum import Enum
from pathlib import Path
from typing import Any, Final, Literal

from evaltrace._internal.private_files import PRIVATE_FILE_MODE, make_private_dirs

__all__ = ["MISS", "PRICE_CACHE_ENV", "Entry", "get", "put", "reset", "valid_until"]

PRICE_CACHE_ENV = "EVALTRACE_PRICE_CACHE"
_FORMAT = 1
_OFF = frozenset({"", "0", "off", "false", "no"})

# A converted price: (input, output, cached_input, tiers, cache_write), ``ModelPrice``'s fields in order.
Price = tuple[float, float, float | None, tuple[tuple[int, float, float | None, float], ...], float | None]
Entry = Price | None  # None: genai-prices does not know the model


class _Miss(Enum):
    MISS = "miss"


MISS: Final = _Miss.MISS  # not in the file (or the file is not usable): look it up
_NO_EXPIRY = ""
_UNCACHEABLE: Any = object()

_state: dict[str, Any] = {}  # "path", "source", "prices": loaded once per process, on first use


def reset() -> None:
    """Forget what this process read (tests; a changed ``$EVALTRACE_PRICE_CACHE``)."""
    _state.clear()


def get(provider_id: str, model: str) -> Entry | Literal[_Miss.MISS]:
    """The cached price of ``model`` at ``provider_id``, ``None`` for a model genai-prices lacks, or ``MISS``."""
    if _custom_snapshot():
        return MISS
    prices = _loaded()
    if prices is None:
        return MISS
    row = prices.get(provider_id, {}).get(model)
    if row is None:
        return MISS
    try:
        until, price = row
        if until and dt.datetime.now(tz=dt.UTC).date() >= dt.date.fromisoformat(until):
            return MISS
        return _decode(price)
    except (TypeError, ValueError):  # a file edited or written by a future format: not ours to trust
        return MISS


def put(provider_id: str, model: str, price: Entry, until: Any) -> None:
    """Write ``price`` (from a full lookup) unless ``until`` says it cannot be cached; never raises for I/O."""
    if until is _UNCACHEABLE or _custom_snapshot():
        return
    prices = _loaded()
    path, source = _state.get("path"), _state.get("source")
    if prices is None or path is None:
        return
    prices.setdefault(provider_id, {})[model] = [until.isoformat() if until else _NO_EXPIRY, _encode(price)]
    # Lock-free: each dict copy is one step under the GIL, so another thread's put cannot change a dict while it is
    # serialised (at worst the file misses that thread's entry until its own write).
    snapshot = {provider: dict(rows) for provider, rows in dict(prices).items()}
    text = json.dumps({"format": _FORMAT, "source": source, "prices": snapshot}, separators=(",", ":"))
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
        _state["prices"] = None  # unwritable: stop trying in this process
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


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


def _custom_snapshot() -> bool:
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
    path = _path()
    source = None if path is None else _source()
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


def _path() -> Path | None:
    setting = os.environ.get(PRICE_CACHE_ENV)
    if setting is not None:
        return None if setting.strip().lower() in _OFF else Path(setting).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    try:
        root = Path(base) if base else Path.home() / ".cache"
    except RuntimeError:  # no home directory
        return None
    return root / "evaltrace" / "prices.json"


def _source() -> list[Any] | None:
    """Which genai-prices table the file describes: its data module's path, size and modification time."""
    from importlib.util import find_spec

    try:
        spec = find_spec("genai_prices")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    data = os.path.join(next(iter(spec.submodule_search_locations)), "data.py")
    try:
        stat = os.stat(data)
    except OSError:
        return None
    return [data, stat.st_size, stat.st_mtime_ns]


def _encode(price: Entry) -> Any:
    if price is None:
        return None
    inp, out, cached, tiers, write = price
    return [inp, out, cached, [list(tier) for tier in tiers], write]


def _decode(row: Any) -> Entry:
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
