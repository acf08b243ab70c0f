"""Langfuse's usage details as it derives them from a span's ``gen_ai.usage.*`` counts (conventions.md 4.2).

Our spans do not write ``langfuse.observation.usage_details``: Langfuse computes the same object from the counts
(``extractUsageDetails``). Tests check the counts give the details Langfuse should show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_SUBSETS = {
    "gen_ai.usage.cache_read.input_tokens": "input_cached_tokens",
    "gen_ai.usage.cache_creation.input_tokens": "input_cache_creation",
    "gen_ai.usage.reasoning.output_tokens": "output_reasoning_tokens",
}


def langfuse_usage(attrs: Mapping[str, Any]) -> dict[str, int]:
    """``input`` excludes cache reads and writes, ``output`` the reasoning; each subset under its own key."""
    details = {name: attrs[key] for key, name in _SUBSETS.items() if key in attrs}
    if "gen_ai.usage.input_tokens" in attrs:
        cached = details.get("input_cached_tokens", 0) + details.get("input_cache_creation", 0)
        details["input"] = max(attrs["gen_ai.usage.input_tokens"] - cached, 0)
    if "gen_ai.usage.output_tokens" in attrs:
        details["output"] = attrs["gen_ai.usage.output_tokens"] - details.get("output_reasoning_tokens", 0)
    return details
