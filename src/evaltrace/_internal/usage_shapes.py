"""Pure: token usage in any common shape -> ``Usage`` with OTel's inclusive semantics.

Accepted shapes, told apart by their keys (a mapping, or an SDK object such as ``response.usage``):

* ours: ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_creation_tokens``,
  ``reasoning_tokens``, all optional. Counts are inclusive, as in OTel: ``input_tokens`` includes the cache
  reads and writes, ``output_tokens`` includes the reasoning tokens. Unknown keys are an error (a typo would
  otherwise lose a count silently).
* OpenAI Chat Completions: ``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``
  (and ``cache_write_tokens``), ``completion_tokens_details.reasoning_tokens``.
* OpenAI Responses: ``input_tokens``, ``output_tokens``, ``input_tokens_details.cached_tokens``,
  ``output_tokens_details.reasoning_tokens``.
* Anthropic: ``input_tokens`` (which *excludes* the cache), ``output_tokens``, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``; the cache counts are added to the input here.
* Gemini (``usage_metadata``): ``prompt_token_count``, ``candidates_token_count``, ``thoughts_token_count``
  (added to the output), ``cached_content_token_count``.

Provider shapes ignore keys they do not read, so a newer SDK's extra fields never break a call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal.engine.outcome import Usage

OUR_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens")
_OPENAI_CHAT = frozenset({"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"})
_OPENAI_RESPONSES = frozenset({"input_tokens_details", "output_tokens_details"})
_ANTHROPIC = frozenset({"cache_read_input_tokens", "cache_creation_input_tokens", "cache_creation", "server_tool_use"})
_GEMINI = frozenset({"prompt_token_count", "candidates_token_count", "thoughts_token_count", "total_token_count"})


def parse_usage(value: Any) -> Usage:
    """Return the ``Usage`` of ``value`` (see the module docstring for the shapes); bad input raises ValueError."""
    data = _as_dict(value)
    keys = data.keys()
    if keys & _OPENAI_CHAT:
        return _openai(data, "prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details")
    if keys & _OPENAI_RESPONSES:
        return _openai(data, "input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details")
    if keys & _ANTHROPIC:
        return _anthropic(data)
    if keys & _GEMINI:
        return _gemini(data)
    unknown = sorted(str(k) for k in keys if k not in OUR_KEYS)
    if unknown:
        raise ValueError(
            f"usage has unknown key(s) {unknown}: expected {list(OUR_KEYS)}, "
            "or an OpenAI, Anthropic or Gemini usage object"
        )
    return Usage(
        input_tokens=_count(data, "input_tokens"),
        output_tokens=_count(data, "output_tokens"),
        cached_tokens=_count(data, "cache_read_tokens"),
        reasoning_tokens=_count(data, "reasoning_tokens"),
        cache_write_tokens=_count(data, "cache_creation_tokens"),
    )


def _openai(data: Mapping[str, Any], inputs: str, outputs: str, input_details: str, output_details: str) -> Usage:
    """OpenAI's Chat and Responses usage: the same counts under the two APIs' own key names."""
    details_in = _as_dict(data.get(input_details) or {})
    details_out = _as_dict(data.get(output_details) or {})
    return Usage(
        input_tokens=_count(data, inputs),
        output_tokens=_count(data, outputs),
        cached_tokens=_count(details_in, "cached_tokens"),
        reasoning_tokens=_count(details_out, "reasoning_tokens"),
        cache_write_tokens=_count(details_in, "cache_write_tokens"),
    )


def _anthropic(data: Mapping[str, Any]) -> Usage:
    """Anthropic's ``input_tokens`` counts only uncached input: the cache reads and writes are added back."""
    uncached = _count(data, "input_tokens")
    reads = _count(data, "cache_read_input_tokens")
    writes = _count(data, "cache_creation_input_tokens")
    total = None if uncached is None else uncached + (reads or 0) + (writes or 0)
    return Usage(
        input_tokens=total,
        output_tokens=_count(data, "output_tokens"),
        cached_tokens=reads,
        cache_write_tokens=writes,
    )


def _gemini(data: Mapping[str, Any]) -> Usage:
    """Gemini counts thoughts apart from the candidates: OTel's output includes them."""
    candidates = _count(data, "candidates_token_count")
    thoughts = _count(data, "thoughts_token_count")
    output = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return Usage(
        input_tokens=_count(data, "prompt_token_count"),
        output_tokens=output,
        cached_tokens=_count(data, "cached_content_token_count"),
        reasoning_tokens=thoughts,
    )


def _as_dict(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)  # pydantic SDK models (openai, anthropic, google-genai)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    raise ValueError(f"usage must be a mapping or a usage object, not {type(value).__name__}")


def _count(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"usage[{key!r}] must be a non-negative integer, got {value!r}")
    return value
