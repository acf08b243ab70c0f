"""The price index for a genai-prices release evaltrace ships none for: built once here, kept beside the price cache.

evaltrace ships ``price_index``'s files for one genai-prices release (the one its ``dev`` extra pins). Under any
other release, a process with no entry in the file of prices already looked up (``price_cache``: the first process,
or the first to meet a model) loaded genai-prices' whole table again (issue 28's start-up row, ~230M instructions).
So a process that has to load that table anyway builds the same index from it (``price_index_build``), for the
provider id it is pricing only, and writes it to
``<price cache folder>/price-index-<digest of the installed RECORD>-f<index format>/<provider id>.json`` (an empty
list of models for a provider the release lacks). Later processes read that provider's file, as from the shipped
index, without importing genai-prices; the first process to price under another provider id builds that one's file.
Building one provider instead of all eleven brings the first process near the cost of pricing through genai-prices,
not to it: +27M instructions, 2.09-2.10x the start-up baseline against 2.00x (building every provider on the
application thread cost 2.51x, 33-39 ms; benchmarks/README.md, s13-prices2).

Only a release whose lookup code is the code the matcher was verified against is indexed: every genai-prices module
but its table (``data.py``) must have the sha256 ``price_index.LOOKUP_CODE`` records, as the installed ``RECORD``
lists them (read without importing genai-prices); a release with only its table changed is indexed, any other is
looked up in genai-prices as before. Each provider's index is also checked against genai-prices' own lookup for a
sample of its models (``agrees``). A release one of whose providers fails the build or the check leaves
``unindexable.json`` (its RECORD) in the folder: no process started after that builds or reads any of its files (a
provider built earlier included), and every price is genai-prices' own lookup. A process already running keeps the
files it loaded; but a price taken from this index into the file of prices already looked up names the marker
(``price_cache.put``'s ``withdrawn_by``), so neither the process that writes the marker nor any started after it
serves that price from there again.

The files are checked on every read: their format, the evaltrace version that wrote them, and the installed
release's ``RECORD`` (every module's sha256 and size) and sizes on disk. Each file is written whole (a temporary
file, then a rename), so a reader sees the old file, the new one, or none; a truncated, corrupt or stale file is not
used and is replaced by the next build. A folder that cannot be written leaves the index in this process's memory
only; with ``$EVALTRACE_PRICE_CACHE=off``, or no cache folder at all (no home, an unusable setting), nothing is built
or kept: the price is looked up in genai-prices as before.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from evaltrace._internal import price_cache, price_index
from evaltrace._version import __version__

__all__ = ["UNINDEXABLE", "folder_for", "marker", "models", "reset"]

logger = logging.getLogger("evaltrace")

UNINDEXABLE = "unindexable.json"  # left by a release that failed the build or the check: not tried again

# "release": the installed release's (source, folder), or None when no index can be kept (resolved once per process).
# "built": what this process built, by provider id (each at most once), or None when the release is not indexed
# here (its lookup code is not the verified one, it is marked unindexable, or a build failed in this process).
_state: dict[str, Any] = {}


def reset() -> None:
    """Forget what this process built (tests)."""
    _state.clear()


def folder_for(source: dict[str, Any]) -> Path | None:
    """Where the index of the install ``source`` (``price_index.installed_source``) is kept, or None (no cache).

    Keyed by a digest of its RECORD, not its version: two installs of one version with other files never share it.
    """
    base = price_cache.folder()
    if base is None:
        return None
    digest = hashlib.sha256(json.dumps(source, sort_keys=True).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return base / f"price-index-{digest}-f{price_index.FORMAT}"


def models(provider_id: str) -> list[Any] | None:
    """The models of ``provider_id`` in the index of the installed genai-prices release, built here if need be.

    None when there is no such index (no genai-prices, the cache off, a release the builder does not index).
    """
    built: dict[str, list[Any] | None] | None = _state.get("built", {})
    if built is None:
        return None
    if provider_id in built:
        return built[provider_id]
    release = _release()
    if release is None or _state.get("built", {}) is None:
        return None
    source, folder = release
    found = price_index.load(folder / f"{provider_id}.json", __version__)
    if found is not None:
        return found
    provider_models = _build(source, folder, provider_id)
    # Read again after the build: this build, or another thread's meanwhile, may have found the release unindexable.
    built = _state.setdefault("built", {})
    if built is None:
        return None
    built[provider_id] = provider_models  # once per provider and process, whatever the outcome
    return provider_models


def marker() -> str | None:
    """The installed release's unindexable marker, relative to the cache folder; None before ``models`` resolved it."""
    release = _state.get("release")
    return None if release is None else f"{release[1].name}/{UNINDEXABLE}"


def _release() -> tuple[dict[str, Any], Path] | None:
    """The installed release and its index folder, once per process; None (and "built" None) if it is not indexed."""
    if "release" not in _state:
        version = price_index.installed_version()
        source = None if version is None else price_index._installed(version)
        folder = None if source is None else folder_for(source)
        release = None if source is None or folder is None else (source, folder)
        _state["release"] = release
        if release is not None and not _indexable(*release):
            _state["built"] = None
    found: tuple[dict[str, Any], Path] | None = _state["release"]
    return found


def _indexable(source: dict[str, Any], folder: Path) -> bool:
    """Whether the release's lookup code is the verified one and no process found it unindexable."""
    if not price_index.lookup_code_verified(source):
        logger.debug(
            "genai-prices %s: its prices are not indexed (its lookup code is not the verified one)", source["version"]
        )
        return False
    marked: bool = _read(folder / UNINDEXABLE) == _marker(source)
    return not marked


def _marker(source: dict[str, Any]) -> dict[str, Any]:
    return {"format": price_index.FORMAT, "evaltrace": __version__, "genai_prices": source}


def _build(source: dict[str, Any], folder: Path, provider_id: str) -> list[Any] | None:
    """Build, check and write the index of ``provider_id`` under the installed release; its models as read back."""
    version = source["version"]
    if price_cache.custom_snapshot_set():  # genai-prices' table is the user's own: not this release's
        _state["built"] = None
        return None
    try:
        from evaltrace._internal import price_index_build

        built = price_index_build.build(version, provider_ids=(provider_id,))
        # A provider the release lacks: no price, as genai-prices answers.
        document = built.get(provider_id) or {
            "format": price_index.FORMAT,
            "genai_prices": source,
            "provider": provider_id,
            "models": [],
        }
        text = price_index_build.text(document | {"evaltrace": __version__})
        # The document as a reader of the file will see it (tuples are lists, floats round-tripped).
        read_back = json.loads(text)
        if price_cache.custom_snapshot_set():
            _state["built"] = None
            return None
        if not price_index_build.agrees({provider_id: read_back}, dt.datetime.now(tz=dt.UTC)):
            logger.debug("genai-prices %s: its prices are not indexed (its lookup differs from the index's)", version)
            _unindexable(source, folder)
            return None
    except Exception:  # a release this builder cannot read: genai-prices decides, as before
        logger.debug("genai-prices %s: its prices could not be indexed", version, exc_info=True)
        if not price_cache.custom_snapshot_set():
            _unindexable(source, folder)
        else:
            _state["built"] = None
        return None
    path = folder / f"{provider_id}.json"
    if price_cache.replace(path, text):  # a folder that cannot be written: the models serve this process
        price_cache.sweep(path)  # a killed writer's temporary file
    found: list[Any] = read_back["models"]
    return found


def _unindexable(source: dict[str, Any], folder: Path) -> None:
    """Mark the release as not indexed, here and for later processes (a failed build is not tried again)."""
    _state["built"] = None
    price_cache.replace(folder / UNINDEXABLE, json.dumps(_marker(source)))
    price_cache.withdraw()  # the prices this process already took from the release's index are not served again


def _read(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None
