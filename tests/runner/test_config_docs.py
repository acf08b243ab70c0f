"""docs/offline.md's key tables list exactly the keys of the authoring models: docs and code cannot drift.

The eval.yaml snippets of the docs and the example eval.yaml files write evaluators in one form.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from evaltrace.evaluators.catalogue import CATALOGUE
from evaltrace.runner.config_models import AUTHORING_MODELS, STORE_KEYS, EvaluatorEntry, JudgeConfig, OutputConfig
from evaltrace.runner.evaluator_entries import build_evaluators

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


_YAML_BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _authored_configs() -> list[tuple[str, dict[str, Any]]]:
    """Every eval.yaml of examples/ and every YAML block of README.md and docs/*.md with an ``evaluators:`` list."""
    found: list[tuple[str, dict[str, Any]]] = []
    sources = [*sorted((REPO_ROOT / "examples").rglob("eval.yaml"))]
    docs = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    for path in sources:
        found.append((str(path.relative_to(REPO_ROOT)), yaml.safe_load(path.read_text(encoding="utf-8"))))
    for path in docs:
        for index, block in enumerate(_YAML_BLOCK.findall(path.read_text(encoding="utf-8"))):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and "evaluators" in data:
                found.append((f"{path.relative_to(REPO_ROOT)} block {index}", data))
    return found


def test_docs_and_examples_write_evaluators_and_systems_in_one_form() -> None:
    """One form everywhere a user copies from: ``{name, type}`` (or ``import``), under ``systems:``."""
    configs = _authored_configs()
    assert {where for where, _ in configs} >= {"examples/offline_eval/eval.yaml", "examples/eval/eval.yaml"}
    for where, data in configs:
        for entry in data["evaluators"]:
            parsed = EvaluatorEntry.model_validate(entry)
            assert parsed.type is not None or parsed.import_ is not None, f"{where}: {entry} (older name-only form)"
            assert parsed.as_ is None, f"{where}: {entry} uses 'as'; write name with type"
            assert parsed.type is None or parsed.type in CATALOGUE, f"{where}: {entry}"
        assert "variants" not in data, f"{where}: write systems:, not its alias variants:"


def test_every_documented_evaluator_entry_builds() -> None:
    """Each catalogue entry a doc or example shows loads as written (options and their types included)."""
    judge = JudgeConfig(model="judge-model", base_url="http://127.0.0.1:9/v1", api_key="unused")
    for where, data in _authored_configs():
        for entry in data["evaluators"]:
            if "import" not in entry:  # imports name the user's own modules
                build_evaluators([entry], Path(where), judge=judge)
