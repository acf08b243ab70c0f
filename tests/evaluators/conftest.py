"""Fixtures of the evaluator tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .factories import build_case, build_trace


@pytest.fixture
def make_trace() -> Callable[..., Any]:
    return build_trace


@pytest.fixture
def make_case() -> Callable[..., Any]:
    return build_case
