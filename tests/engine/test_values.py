"""The value readers every codec shares (``_internal/engine/values.py``): counts and server addresses."""

from __future__ import annotations

from typing import Any

import pytest

from evaltrace._internal.engine.values import count, host_port


@pytest.mark.parametrize(("value", "expected"), [(3, 3), (0, 0), (True, None), (2.0, None), ("3", None), (None, None)])
def test_count_is_an_int_never_a_bool(value: Any, expected: int | None) -> None:
    assert count(value) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.groq.com/openai/v1", ("api.groq.com", 443)),
        ("http://127.0.0.1:11434", ("127.0.0.1", 11434)),
        ("http://localhost/v1", ("localhost", 80)),
        ("https://bedrock-runtime.us-east-1.amazonaws.com:8443", ("bedrock-runtime.us-east-1.amazonaws.com", 8443)),
        ("ftp://files.example", ("files.example", None)),
        # A port that is no number is read as absent (every provider alike), never raised into the call.
        ("http://proxy.internal:abc/v1", ("proxy.internal", 80)),
    ],
)
def test_host_port_defaults_the_port_from_the_scheme(url: str, expected: tuple[str | None, int | None]) -> None:
    assert host_port(url) == expected
