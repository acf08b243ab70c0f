"""Models of each adapter's ``config`` in eval.yaml (``python_function``, ``http`` and its ``response_mapping``).

Part of the authoring models (:mod:`evaltrace.runner.config_models`): they validate key names and value types
only. What a value means is up to the adapter (:mod:`evaltrace.runner.adapters`), which also compiles the
selectors and imports the target when it is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from evaltrace.runner._authoring import AuthoringModel
from evaltrace.runner._config_errors import key_error
from evaltrace.runner.response_presets import PRESETS

__all__ = [
    "ADAPTER_CONFIGS",
    "HTTP_METHODS",
    "SELECTOR_FIELDS",
    "FunctionConfig",
    "HttpConfig",
    "ResponseMappingConfig",
]

HTTP_METHODS = ("GET", "PATCH", "POST", "PUT")
SELECTOR_FIELDS = (
    "final_answer",
    "thinking",
    "structured",
    "tool_calls",
    "token_input",
    "token_output",
    "token_thinking",
    "cost_usd",
)
"""``response_mapping`` keys holding one JSONPath selector of a Trace field."""
_SELECTOR_EXPECTED = "expected a JSONPath selector such as '$.answer'"


class FunctionConfig(AuthoringModel):
    """``config`` of a ``python_function`` system."""

    target: str
    """``module:function``, imported with the eval.yaml's directory on ``sys.path``."""
    timeout_s: float | None = Field(default=None, gt=0)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments of every call, so one function serves several systems."""


class ResponseMappingConfig(AuthoringModel):
    """``response_mapping`` of an ``http`` system: a provider preset and/or JSONPath selectors per Trace field."""

    preset: str | None = None
    final_answer: str | None = None
    thinking: str | None = None
    structured: str | None = None
    tool_calls: str | None = None
    token_input: str | None = None
    token_output: str | None = None
    token_thinking: str | None = None
    cost_usd: str | None = None
    custom: dict[str, str] = Field(default_factory=dict)
    """Metric name -> selector, filling ``metrics.custom.<name>``."""

    @field_validator("preset", mode="before")
    @classmethod
    def _known_preset(cls, value: Any) -> Any:
        if value is not None and value not in PRESETS:
            raise key_error("", f"unknown preset {value!r}; known: {', '.join(sorted(PRESETS))}")
        return value

    @field_validator(*SELECTOR_FIELDS, mode="before")
    @classmethod
    def _selector(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise key_error("", f"{_SELECTOR_EXPECTED}, got {value!r}")
        return value

    @field_validator("custom", mode="before")
    @classmethod
    def _custom_selectors(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            for name, selector in value.items():
                if not isinstance(selector, str) or not selector.strip():
                    raise key_error(str(name), f"{_SELECTOR_EXPECTED}, got {selector!r}")
        return value


class HttpConfig(AuthoringModel):
    """``config`` of an ``http`` system."""

    url: str
    method: str = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float | None = Field(default=None, gt=0)
    body_template: Any = None
    """JSON body with ``{{input}}`` / ``{{input.key}}`` placeholders; default: the case input itself."""
    response_mapping: ResponseMappingConfig | None = None

    @field_validator("method", mode="before")
    @classmethod
    def _known_method(cls, value: Any) -> Any:
        if not isinstance(value, str) or value.upper() not in HTTP_METHODS:
            raise key_error("", f"expected one of {', '.join(HTTP_METHODS)}, got {value!r}")
        return value


ADAPTER_CONFIGS: Mapping[str, type[AuthoringModel]] = {"http": HttpConfig, "python_function": FunctionConfig}
"""Adapter name -> model of its ``config`` (another registered adapter's config is checked by its builder)."""
