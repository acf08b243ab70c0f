"""The base of the authoring models: unknown keys are errors naming the nearest known key, values are not coerced."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from evaltrace.runner._config_errors import key_error, unknown_key_problem

__all__ = ["AuthoringModel"]


class AuthoringModel(BaseModel):
    """Base of the authoring models: unknown keys are errors naming the nearest known key; no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @classmethod
    def authored_keys(cls) -> tuple[str, ...]:
        """The keys a user may write (field aliases where a key is a Python keyword)."""
        return tuple(info.alias or name for name, info in cls.model_fields.items())

    @classmethod
    def keys_for(cls, data: Mapping[str, Any]) -> Collection[str]:
        """The keys allowed in ``data`` (a subclass may narrow them by a discriminating value)."""
        return cls.authored_keys()

    @classmethod
    def key_kind(cls, data: Mapping[str, Any]) -> str:
        """How an unknown key of ``data`` is described (``key``, ``key for a sqlite store``)."""
        return "key"

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            known = cls.keys_for(data)
            for key in data:
                if key not in known:
                    problem = unknown_key_problem(str(key), known, cls.key_kind(data))
                    raise key_error(str(key), problem, unknown=True)
        return data
