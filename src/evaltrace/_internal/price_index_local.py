"""The price index for a genai-prices release evaltrace ships none for: built once here, kept beside the price cache.

evaltrace ships ``price_index``'s files for one genai-prices release (the one its ``dev`` extra pins). Under any
other release, a process with no entry in the file of prices already looked up (``price_cache``: the first process,
or the first to meet a model) loaded genai-prices' whole table again (issue 28's start-up row, ~230M instructions).
So the first process that has to load that table anyway builds the same index from it (``price_index_build``) and
writes it to ``<price cache folder>/price-index-<digest of the installed RECORD>-f<index format>/<provider id>.json``
(one file per provider id evaltrace prices; an empty one for a provider the release lacks). Later processes read
one provider's file from there, as from the shipped index, without importing genai-prices.

Only a release whose lookup code is the code the matcher was verified against is indexed: every genai-prices module
but its table (``data.py``) must have the sha256 ``price_index.LOOKUP_CODE`` records, as the installed ``RECORD``
lists them (read without importing genai-prices); a release with only its table changed is indexed, any other is
looked up in genai-prices as before. The index is also checked against genai-prices' own lookup for a sample of each
provider's models (``agrees``). A release that fails the build or the check leaves ``unindexable.json`` (its RECORD)
in the folder, so later processes do not try again.

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

__all__ = ["UNINDEXABLE", "folder_for", "models", "reset"]

logger = logging.getLogger("evaltrace")

UNINDEXABLE = "unindexable.json"  # left by a release that failed the build or the check: not tried again

# "built": this process's documents by provider id, or None when they could not be built (built at most once).
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
    if "built" not in _state:
        version = price_index.installed_version()
        source = None if version is None else price_index._installed(version)
        folder = None if source is None else folder_for(source)
        if source is None or folder is None:
            return None
        found = price_index.load(folder / f"{provider_id}.json", __version__)
        if found is not None:
            return found
        _state["built"] = _build(source, folder)  # once per process, whatever the outcome
    documents: dict[str, dict[str, Any]] | None = _state["built"]
    document = None if documents is None else documents.get(provider_id)
    return None if document is None else document["models"]


def _build(source: dict[str, Any], folder: Path) -> dict[str, dict[str, Any]] | None:
    """Build, check and write the index of the installed release; its documents as read back, or None."""
    version = source["version"]
    if not price_index.lookup_code_verified(source):
        logger.debug("genai-prices %s: its prices are not indexed (its lookup code is not the verified one)", version)
        return None
    marker = {"format": price_index.FORMAT, "evaltrace": __version__, "genai_prices": source}
    if _read(folder / UNINDEXABLE) == marker or price_cache.custom_snapshot_set():
        return None  # an earlier process failed to index it; or genai-prices' table is the user's own
    try:
        from evaltrace._internal import price_index_build

        built = price_index_build.build(version)
        for provider_id in price_index_build.PROVIDER_IDS:  # a provider the release lacks: no price, as genai-prices
            built.setdefault(
                provider_id,
                {"format": price_index.FORMAT, "genai_prices": source, "provider": provider_id, "models": []},
            )
        texts = {
            provider_id: price_index_build.text(doc | {"evaltrace": __version__}) for provider_id, doc in built.items()
        }
        # The documents as a reader of the files will see them (tuples are lists, floats round-tripped).
        documents = {provider_id: json.loads(text) for provider_id, text in texts.items()}
        if price_cache.custom_snapshot_set():
            return None
        if not price_index_build.agrees(documents, dt.datetime.now(tz=dt.UTC)):
            logger.debug("genai-prices %s: its prices are not indexed (its lookup differs from the index's)", version)
            price_cache.replace(folder / UNINDEXABLE, json.dumps(marker))
            return None
    except Exception:  # a release this builder cannot read: genai-prices decides, as before
        logger.debug("genai-prices %s: its prices could not be indexed", version, exc_info=True)
        if not price_cache.custom_snapshot_set():
            price_cache.replace(folder / UNINDEXABLE, json.dumps(marker))
        return None
    for provider_id, text in texts.items():  # a folder that cannot be written: the documents serve this process
        path = folder / f"{provider_id}.json"
        if price_cache.replace(path, text):
            price_cache.sweep(path)  # a killed writer's temporary file
    return documents


def _read(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None
