"""Rebuild evaltrace's shipped price index from the installed genai-prices (run after bumping genai-prices).

    PYTHONPATH=src python scripts/build_price_index.py

Writes ``src/evaltrace/_internal/price_index_data/<provider>.json`` for the installed release (its version read from its
metadata) and removes the files of providers genai-prices no longer has. Then pin that release in pyproject's ``dev``
extra: ``tests/instrumentation/test_price_index_pin.py`` fails while the shipped files are for another release than
the pin, and ``test_price_index.py`` (which runs where the pinned release is installed, as in CI's main step) fails
while they differ from what this script would write for it.
"""

from __future__ import annotations

from importlib.metadata import version

from evaltrace._internal import price_index
from evaltrace._internal.price_index_build import build, write


def main() -> None:
    """Write the index for the installed genai-prices release."""
    documents = build(version("genai-prices"))
    for stale in price_index.INDEX_DIR.glob("*.json"):
        if stale.stem not in documents:
            stale.unlink()
    write(documents, price_index.INDEX_DIR)
    print(f"wrote {len(documents)} files to {price_index.INDEX_DIR}")


if __name__ == "__main__":
    main()
