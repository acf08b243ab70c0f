"""The shipped price index stays in step with the genai-prices release the test environment installs.

``test_price_index.py`` checks the index against the installed genai-prices, and skips where another release is
installed (the index is then unused, and prices come from genai-prices itself). These checks keep that skip from
hiding a stale index: the ``dev`` extra pins the release the index was built from, and CI's main step installs it.
"""

from __future__ import annotations

import json
import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from evaltrace._internal import price_index

ROOT = Path(__file__).resolve().parents[2]


def _pinned() -> str:
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"][
        "dev"
    ]
    pins = [m.group(1) for m in (re.fullmatch(r"genai-prices==([0-9A-Za-z.]+)", d) for d in dev) if m]
    assert len(pins) == 1, f"the dev extra should pin genai-prices exactly once, found {dev}"
    return pins[0]


def _shipped_versions() -> set[str]:
    return {
        json.loads(path.read_text(encoding="utf-8"))["genai_prices"]["version"]
        for path in price_index.INDEX_DIR.glob("*.json")
    }


def test_the_shipped_index_is_for_the_genai_prices_release_the_dev_extra_pins() -> None:
    """Bumping the pin without rebuilding the index (scripts/build_price_index.py), or the reverse, fails here."""
    assert _shipped_versions() == {_pinned()}


def test_the_pinned_release_once_installed_is_served_from_the_index() -> None:
    """Where the pinned release is installed (CI's main step), the index is in use, so its tests are not skipped."""
    try:
        installed = version("genai-prices")
    except PackageNotFoundError:
        pytest.skip("genai-prices is not installed")
    if installed != _pinned():
        pytest.skip(f"genai-prices {installed} is installed, not the pinned {_pinned()} (the oldest-versions step)")
    assert price_index.installed_source(installed) is not None, "the installed genai-prices does not match its RECORD"


def test_the_verified_lookup_code_is_the_code_of_the_release_the_shipped_index_was_built_from() -> None:
    """``price_index.LOOKUP_CODE`` (the only genai-prices code an index is built for at run time) is every module but
    the table and the command line of the release the shipped index names: the release its matcher is held to over the
    whole table by ``test_price_index.py``. Rebuilding the index for a new release without updating it fails here."""
    shipped = {
        json.dumps(json.loads(path.read_text(encoding="utf-8"))["genai_prices"]["files"], sort_keys=True)
        for path in price_index.INDEX_DIR.glob("*.json")
    }
    assert len(shipped) == 1
    files = json.loads(shipped.pop())
    not_lookup = {"genai_prices/data.py", "genai_prices/_cli.py", "genai_prices/__main__.py"}
    assert {path: digest for path, digest in files.items() if path not in not_lookup} == price_index.LOOKUP_CODE
    assert "genai_prices/types.py" in price_index.LOOKUP_CODE and "genai_prices/data_snapshot.py" in files
