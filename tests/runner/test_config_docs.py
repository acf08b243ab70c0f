"""docs/offline.md's key tables list exactly the keys of the authoring models: docs and code cannot drift."""

from __future__ import annotations

import re

from evaltrace.runner.config_models import AUTHORING_MODELS, STORE_KEYS, OutputConfig

from .conftest import REPO_ROOT

_MARKER = re.compile(r"^<!-- keys: (\w+) -->$")
_KEY = re.compile(r"`([A-Za-z_]+)`")


def _tables() -> dict[str, set[str]]:
    """Model name -> the keys in the first column of the table under its marker."""
    lines = (REPO_ROOT / "docs" / "offline.md").read_text(encoding="utf-8").splitlines()
    tables: dict[str, set[str]] = {}
    for index, line in enumerate(lines):
        marker = _MARKER.match(line.strip())
        if marker is None:
            continue
        rows = []
        for row in lines[index + 3 :]:  # the marker, the header row and the |---| row come first
            if not row.startswith("|"):
                break
            rows.append(row)
        tables[marker.group(1)] = {key for row in rows for key in _KEY.findall(row.split("|")[1])}
    return tables


def test_every_authoring_model_has_a_table_with_exactly_its_keys() -> None:
    tables = _tables()
    assert set(tables) == {model.__name__ for model in AUTHORING_MODELS}
    for model in AUTHORING_MODELS:
        assert tables[model.__name__] == set(model.authored_keys()), model.__name__


def test_store_keys_cover_the_output_model() -> None:
    assert {key for keys in STORE_KEYS.values() for key in keys} == set(OutputConfig.authored_keys())
