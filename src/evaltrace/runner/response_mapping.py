"""The http adapter's ``response_mapping``: JSONPath selectors (and provider presets) from a response body to Trace fields.

Rules, where the spec left a choice:

* A field is filled only from its selector (explicit, else the preset's). With a mapping there is no guessing:
  an unmapped ``final_answer`` or ``structured`` stays None (``structured: "$"`` keeps the whole body).
* A selector that matches nothing, or only JSON nulls, leaves its field None (a custom metric absent).
* ``final_answer``: the string matches joined with no separator (providers split one text into several
  blocks); ``thinking``: joined with blank lines (separate reasoning blocks). ``token_*`` and ``cost_usd``: the
  sum of the numeric matches. ``structured``: exactly one object. ``tool_calls``: objects (or lists of them),
  each ``{id?, name, arguments}`` or a provider's shape of it (see :func:`tool_call_of`).
* A match of the wrong type (``token_input`` matching ``"12"``, ``final_answer`` matching an object) is a
  :class:`MappingFailure`; the http adapter records it as the trace's ``adapter_error``, naming the field and
  the selector, because the mapping (not the system) is what is broken and a guess would hide it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# python-jsonpath's submodules, not its package namespace: mistralai depends on jsonpath-python, which installs a
# `jsonpath/__init__.py` of its own over python-jsonpath's (same top-level name), while env.py and exceptions.py
# stay python-jsonpath's. Importing them directly works whichever package was installed last.
from jsonpath.env import JSONPathEnvironment
from jsonpath.exceptions import JSONPathError

from evaltrace import pricing
from evaltrace.runner.response_presets import PRESETS, Preset
from evaltrace.schema import ToolCall

__all__ = ["FIELDS", "MappedOutput", "MappingFailure", "ResponseMapping", "ResponseMappingError", "tool_call_of"]

FIELDS = (
    "final_answer",
    "thinking",
    "structured",
    "tool_calls",
    "token_input",
    "token_output",
    "token_thinking",
    "cost_usd",
)
"""Trace fields a selector can fill; ``custom`` adds ``metrics.custom.<name>``."""
_KEYS = ("preset", *FIELDS, "custom")
_INT_FIELDS = ("token_input", "token_output", "token_thinking")
# Private selector keys of a preset's price lookup (never fields of the Trace).
_MODEL, _CACHED, _CACHE_WRITE = "_model", "_cached_tokens", "_cache_write_tokens"


class ResponseMappingError(ValueError):
    """A ``response_mapping`` config is malformed; ``key`` is the offending key below ``response_mapping``."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key = key
        self.problem = problem


class MappingFailure(Exception):
    """A response body does not fit the mapping: a selector matched a value of the wrong type."""


@dataclass(frozen=True)
class _Selector:
    text: str
    path: Any  # jsonpath.JSONPath | jsonpath.CompoundJSONPath

    def values(self, body: Any) -> list[Any]:
        """Return the non-null values the selector matches."""
        return [v for v in self.path.findall(body) if v is not None]


@dataclass(frozen=True)
class MappedOutput:
    """What a mapped response says, before it becomes Trace fields."""

    body: Any
    """The decoded response body, as received."""
    final_answer: str | None = None
    thinking: str | None = None
    structured: dict[str, Any] | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    """TraceMetrics fields found (``token_*``, ``cost_usd``, ``custom``)."""


_JSONPATH = JSONPathEnvironment()


def _compile(key: str, text: Any) -> _Selector:
    if not isinstance(text, str) or not text.strip():
        raise ResponseMappingError(key, f"expected a JSONPath selector such as '$.answer', got {text!r}")
    try:
        return _Selector(text, _JSONPATH.compile(text))
    except JSONPathError as exc:
        first_line = str(exc).splitlines()[0]
        raise ResponseMappingError(key, f"invalid JSONPath {text!r}: {first_line}") from None


class ResponseMapping:
    """Compiled selectors of one variant: built once at adapter build time, applied to each response body."""

    def __init__(
        self,
        selectors: Mapping[str, tuple[_Selector, ...]],
        custom: Mapping[str, _Selector],
        preset: Preset | None = None,
        priced_by: Preset | None = None,
    ) -> None:
        self._selectors = dict(selectors)
        self._custom = dict(custom)
        self._preset = preset
        self._priced_by = priced_by
        if priced_by is not None:  # the price lookup's inputs, read with the same machinery as the fields
            for key, texts in (
                (_MODEL, priced_by.model),
                (_CACHED, priced_by.cached_tokens),
                (_CACHE_WRITE, priced_by.cache_write_tokens),
            ):
                self._selectors[key] = tuple(_compile(key, t) for t in texts)

    @classmethod
    def from_config(cls, config: Any) -> ResponseMapping:
        """Compile a variant's ``response_mapping``.

        Args:
            config: ``{preset?, <field>: selector, ..., custom?: {name: selector}}``.

        Returns:
            The mapping; explicit selectors replace the preset's for their field.

        Raises:
            ResponseMappingError: Not a mapping, unknown key or preset, or a selector that does not compile.
        """
        if not isinstance(config, Mapping):
            raise ResponseMappingError("", f"expected a mapping of field names to JSONPath selectors, got {config!r}")
        for key in config:
            if key not in _KEYS:
                raise ResponseMappingError(str(key), f"unknown key; known: {', '.join(_KEYS)}")
        preset_name = config.get("preset")
        preset = PRESETS.get(preset_name) if isinstance(preset_name, str) else None
        if preset_name is not None and preset is None:
            raise ResponseMappingError("preset", f"unknown preset {preset_name!r}; known: {', '.join(sorted(PRESETS))}")
        selectors: dict[str, tuple[_Selector, ...]] = {}
        if preset is not None:
            for name, texts in preset.selectors.items():
                selectors[name] = tuple(_compile(name, t) for t in texts)
        for name in FIELDS:
            if config.get(name) is not None:
                selectors[name] = (_compile(name, config[name]),)
        custom = config.get("custom") or {}
        if not isinstance(custom, Mapping):
            raise ResponseMappingError("custom", f"expected a mapping of metric names to selectors, got {custom!r}")
        compiled_custom = {str(k): _compile(f"custom.{k}", v) for k, v in custom.items()}
        explicit = {"token_output", "token_thinking"} & {k for k in config if config[k] is not None}
        # The preset's correction applies only to its own counts, never to a user's selector.
        preset_fix = preset if preset is not None and preset.output_excludes_thinking and not explicit else None
        # Without a cost in the body (providers send none) and without a cost_usd selector, a preset prices the
        # call from the model and token counts (genai-prices, or the user's set_model_price overrides).
        priced_by = preset if preset is not None and preset.provider and config.get("cost_usd") is None else None
        return cls(selectors, compiled_custom, preset_fix, priced_by)

    def apply(self, body: Any) -> MappedOutput:
        """Map a decoded JSON body (object or array).

        Raises:
            MappingFailure: A selector matched a value of the wrong type (the message names field and selector).
        """
        metrics: dict[str, Any] = {}
        for name in _INT_FIELDS:
            metrics[name] = self._number(name, body, integer=True)
        metrics["cost_usd"] = self._number("cost_usd", body, integer=False)
        if self._preset is not None and metrics["token_output"] is not None and metrics["token_thinking"]:
            metrics["token_output"] += metrics["token_thinking"]
        if metrics["cost_usd"] is None and self._priced_by is not None:
            metrics.update(self._price(body, metrics))
        custom = {}
        for name, selector in self._custom.items():
            values = selector.values(body)
            if values:
                custom[name] = values[0] if len(values) == 1 else values
        metrics["custom"] = custom
        return MappedOutput(
            body=body,
            final_answer=self._text("final_answer", body, ""),
            thinking=self._text("thinking", body, "\n\n"),
            structured=self._structured(body),
            tool_calls=self._tool_calls(body),
            metrics={k: v for k, v in metrics.items() if v is not None},
        )

    def _price(self, body: Any, metrics: Mapping[str, Any]) -> dict[str, float]:
        assert self._priced_by is not None
        _, models = self._matches(_MODEL, body)
        model = next((m for m in models if isinstance(m, str) and m), None)
        try:
            cached, write = self._number(_CACHED, body, integer=True), self._number(_CACHE_WRITE, body, integer=True)
        except MappingFailure:  # a malformed cache count leaves the cost unknown; it is no field of the trace
            return {}
        cost = pricing.cost_of(
            model,
            input_tokens=metrics.get("token_input"),
            output_tokens=metrics.get("token_output"),
            reasoning_tokens=metrics.get("token_thinking"),
            cached_tokens=cached,
            cache_write_tokens=write,
            provider=self._priced_by.provider,
        )
        if cost is None:
            return {}
        priced = {"cost_usd": cost.total_usd}
        if metrics.get("token_thinking"):
            priced["cost_thinking_usd"] = cost.reasoning_usd
        return priced

    def _matches(self, name: str, body: Any) -> tuple[_Selector | None, list[Any]]:
        """Values of the first alternative selector of ``name`` that matches one."""
        alternatives = self._selectors.get(name, ())
        for selector in alternatives:
            values = selector.values(body)
            if values:
                return selector, values
        return (alternatives[0] if alternatives else None), []

    def _text(self, name: str, body: Any, separator: str) -> str | None:
        selector, values = self._matches(name, body)
        for value in values:
            if not isinstance(value, str):
                raise _wrong(name, selector, value, "text")
        return separator.join(values) if values else None

    def _number(self, name: str, body: Any, *, integer: bool) -> Any:
        selector, values = self._matches(name, body)
        total: float = 0
        for value in values:
            is_number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            if not is_number or (integer and value != int(value)):
                raise _wrong(name, selector, value, "an integer" if integer else "a number")
            total += value
        if not values:
            return None
        return int(total) if integer else float(total)

    def _structured(self, body: Any) -> dict[str, Any] | None:
        selector, values = self._matches("structured", body)
        if not values:
            return None
        if len(values) > 1 or not isinstance(values[0], dict):
            shown = values if len(values) > 1 else values[0]
            raise _wrong("structured", selector, shown, "one JSON object")
        return dict(values[0])

    def _tool_calls(self, body: Any) -> list[ToolCall]:
        selector, values = self._matches("tool_calls", body)
        calls: list[ToolCall] = []
        for value in values:
            for item in value if isinstance(value, list) else [value]:
                call = tool_call_of(item)
                if call is None:
                    raise _wrong("tool_calls", selector, item, "a tool call object with a name")
                calls.append(call)
        return calls


def _wrong(name: str, selector: _Selector | None, value: Any, wanted: str) -> MappingFailure:
    shown = json.dumps(value, default=str)
    if len(shown) > 120:
        shown = shown[:117] + "..."
    text = selector.text if selector is not None else "?"
    return MappingFailure(f"response_mapping.{name}: selector {text!r} matched {shown}, expected {wanted}")


_WRAPPERS = ("function", "functionCall", "function_call")
_ARGUMENT_KEYS = ("arguments", "input", "args")
_ID_KEYS = ("call_id", "id")  # Responses function_call items: call_id links the result, id is the item's own


def tool_call_of(value: Any) -> ToolCall | None:
    """Read one tool call in any provider's shape; None when ``value`` is not one.

    Accepted: ``{id?, name, arguments}`` (arguments an object or JSON text), OpenAI Chat ``{id, function:
    {name, arguments}}``, OpenAI Responses ``{call_id, name, arguments}``, Anthropic ``{id, name, input}``,
    Gemini ``{functionCall: {id?, name, args}}`` (or ``function_call``). Arguments that are not a JSON object
    are kept as ``{"_raw": value}``, as everywhere in the Trace.
    """
    if not isinstance(value, dict):
        return None
    inner = next((value[k] for k in _WRAPPERS if isinstance(value.get(k), dict)), value)
    name = inner.get("name")
    if not isinstance(name, str) or not name:
        return None
    call_id = next((v for k in _ID_KEYS for v in (value.get(k), inner.get(k)) if isinstance(v, str) and v), None)
    arguments = next((inner[k] for k in _ARGUMENT_KEYS if k in inner), None)
    return ToolCall(id=call_id, name=name, arguments=_arguments(arguments))


def _arguments(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.strip() else {}
        except ValueError:
            return {"_raw": value}
        return parsed if isinstance(parsed, dict) else {"_raw": value}
    return value if isinstance(value, dict) else {"_raw": value}
