"""Where the recorded cassettes are: tests/conftest.py's CASSETTE_DIR (an empty list when missing)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _root_cassette_dir() -> Path:
    # Both conftest.py files are top-level modules named "conftest"; load the root one under its own name.
    spec = importlib.util.spec_from_file_location("_evaltrace_root_conftest", Path(__file__).parents[1] / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.CASSETTE_DIR)


CASSETTE_DIR = _root_cassette_dir()
CASSETTES: list[Path] = sorted(CASSETTE_DIR.glob("*.yaml")) if CASSETTE_DIR.is_dir() else []


def cassette(name: str) -> Path:
    return CASSETTE_DIR / name
