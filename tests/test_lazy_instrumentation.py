"""``evaltrace.instrument_<provider>()`` names the extra to install when the provider's SDK is missing."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

import evaltrace
from evaltrace._internal import lazy_instrumentation

EXTRAS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "langchain": "langchain",
    "bedrock": "bedrock",
    "google_genai": "google-genai",
    "cohere": "cohere",
    "ollama": "ollama",
    "litellm": "litellm",
    "mistral": "mistral",
    "groq": "groq",
    "openai_agents": "openai-agents",
    "pydantic_ai": "pydantic-ai",
}


def test_every_public_instrument_function_is_covered() -> None:
    public = {name.removeprefix("instrument_") for name in evaltrace.__all__ if name.startswith("instrument_")}
    assert public == set(EXTRAS)


@pytest.mark.parametrize("provider", sorted(EXTRAS))
def test_a_missing_sdk_is_an_import_error_naming_the_extra(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sdk = lazy_instrumentation._SDKS[provider]
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == sdk else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(
        ImportError, match=rf"instrument_{provider}\(\) needs: pip install 'evaltrace\[{EXTRAS[provider]}\]'"
    ):
        getattr(evaltrace, f"instrument_{provider}")()
