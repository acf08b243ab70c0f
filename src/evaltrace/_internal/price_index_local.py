"""The price index for a genai-prices release evaltrace ships none for: built once here, kept beside the price cache.

evaltrace ships ``price_index``'s files for one genai-prices release (the one its ``dev`` extra pins). Under any
other release, a process with no entry in the file of prices already looked up (``price_cache``: the first process,
or the first to meet a model) loaded genai-prices' whole table again (issue 28's start-up row, ~230M instructions).
So the first process that has to load that table anyway builds the same index from it (``price_index_build``),
checks it against genai-prices' own lookup for a sample of each provider's models (``agrees``: a release whose
lookup changed in a way the index does not repeat is not indexed), and writes it to
``<price cache folder>/price-index-<genai-prices version>-f<index format>/<provider id>.json``. Later processes read
one provider's file from there, as from the shipped index, without importing genai-prices.

The files are the shipped index's, checked alike on every read: their format, and the installed release's
``RECORD`` (every module's sha256 and size) and sizes on disk. Each file is written whole (a temporary file, then a
rename), so a reader sees the old file, the new one, or none; a truncated, corrupt or stale file is not used and is
replaced by the next build. A folder that cannot be written leaves the index in this process's memory only; with
``$EVALTRACE_PRICE_CACHE=off`` (or no home) nothing is built or kept: the price is looked up in genai-prices as
before. A release the builder cannot read (a new clause kind, changed types) is looked up in genai-prices as before.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from pathlib import Path
from typing import Any, Final

from evaltrace._internal import price_cache, price_index

__all__ = ["folder_for", "models", "reset"]

logger = logging.getLogger("evaltrace")

_VERSION: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]*\Z")  # a release name that is safe in a file name

# "built": this process's documents by provider id, or None when they could not be built (built at most once).
_state: dict[str, Any] = {}


def reset() -> None:
    """Forget what this process built (tests)."""
    _state.clear()


def folder_for(version: str) -> Path | None:
    """Where the index of genai-prices ``version`` is kept, or None (the price cache is off, or no home)."""
    base = price_cache.folder()
    if base is None or not _VERSION.match(version):
        return None
    return base / f"price-index-{version}-f{price_index.FORMAT}"


def models(provider_id: str) -> list[Any] | None:
    """The models of ``provider_id`` in the index of the installed genai-prices release, built here if need be.

    None when there is no such index (no genai-prices, the cache off, a release the builder cannot index).
    """
    if "built" not in _state:
        version = price_index.installed_version()
        folder = None if version is None else folder_for(version)
        if version is None or folder is None:
            return None
        found = price_index.load(folder / f"{provider_id}.json")
        if found is not None:
            return found
        _state["built"] = _build(version, folder)  # once per process, whatever the outcome
    documents: dict[str, dict[str, Any]] | None = _state["built"]
    document = None if documents is None else documents.get(provider_id)
    return None if document is None else document["models"]


def _build(version: str, folder: Path) -> dict[str, dict[str, Any]] | None:
    """Build, check and write the index of the installed release; its documents as read back, or None."""
    if price_cache.custom_snapshot_set():
        return None  # genai-prices' table is the user's own: not the release's
    try:
        from evaltrace._internal import price_index_build

        texts = {
            provider_id: price_index_build.text(doc) for provider_id, doc in price_index_build.build(version).items()
        }
        # The documents as a reader of the files will see them (tuples are lists, floats round-tripped).
        documents = {provider_id: json.loads(text) for provider_id, text in texts.items()}
        if price_cache.custom_snapshot_set() or not price_index_build.agrees(documents, dt.datetime.now(tz=dt.UTC)):
            logger.debug("genai-prices %s: its prices are not indexed (its lookup differs from the index's)", version)
            return None
    except Exception:  # a release this builder cannot read: genai-prices decides, as before
        logger.debug("genai-prices %s: its prices could not be indexed", version, exc_info=True)
        return None
    for provider_id, text in texts.items():  # a folder that cannot be written: the documents serve this process
        path = folder / f"{provider_id}.json"
        if price_cache.replace(path, text):
            price_cache.sweep(path)  # a killed writer's temporary file
    return documents
