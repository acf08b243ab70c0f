"""Expected tool steps and their argument matchers, as configured for the trajectory evaluators.

An expected step is a tool name (``"search"``) or a mapping ``{"name": "search", "args": {...}}``. Each
argument matcher is one of:

* a plain value: the argument must equal it (``{"city": "Paris"}``);
* ``{"regex": "<pattern>"}``: the argument, as text (JSON for non-strings), must contain a match (``re.search``);
* ``{"any": true}``: the argument must be present, with any value;
* ``{"equals": <value>}``: the argument must equal ``<value>``, for a literal that looks like a matcher.

Arguments a call carries but the step does not name are ignored, so a step constrains only what it names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaltrace.schema import ToolCall

_MATCHER_KEYS = frozenset({"regex", "any", "equals"})


@dataclass(frozen=True)
class ArgMatcher:
    """One argument constraint: equality, a regex search, or mere presence."""

    kind: str
    """``equals``, ``regex`` or ``any``."""
    value: Any = None
    pattern: re.Pattern[str] | None = None

    def matches(self, arguments: Mapping[str, Any], key: str) -> bool:
        """Return whether ``arguments[key]`` satisfies the constraint (a missing argument never does)."""
        if key not in arguments:
            return False
        actual = arguments[key]
        if self.kind == "any":
            return True
        if self.pattern is not None:
            text = actual if isinstance(actual, str) else json.dumps(actual, sort_keys=True, default=str)
            return self.pattern.search(text) is not None
        return bool(actual == self.value)

    def describe(self) -> str:
        """Render the constraint for a reason text."""
        if self.kind == "any":
            return "any value"
        if self.pattern is not None:
            return f"regex {self.pattern.pattern!r}"
        return json.dumps(self.value, default=str)


def parse_matcher(spec: Any, where: str) -> ArgMatcher:
    """Read one matcher; ``where`` names it in errors (e.g. ``"search.query"``).

    Raises:
        ValueError: A bad regex or a mapping mixing matcher keys.
    """
    if isinstance(spec, Mapping) and len(spec) == 1 and next(iter(spec)) in _MATCHER_KEYS:
        kind, value = next(iter(spec.items()))
        if kind == "regex":
            if not isinstance(value, str):
                raise ValueError(f"argument matcher {where}: regex must be a string, got {value!r}")
            try:
                return ArgMatcher("regex", pattern=re.compile(value))
            except re.error as exc:
                raise ValueError(f"argument matcher {where}: bad regex {value!r}: {exc}") from None
        if kind == "any":
            if value is not True:
                raise ValueError(f"argument matcher {where}: write {{any: true}}, got {{any: {value!r}}}")
            return ArgMatcher("any")
        return ArgMatcher("equals", value=value)
    return ArgMatcher("equals", value=spec)


@dataclass(frozen=True)
class ExpectedStep:
    """One expected tool call: a name and the arguments it must carry."""

    name: str
    args: dict[str, ArgMatcher] = field(default_factory=dict)

    def wrong_argument(self, call: ToolCall) -> str | None:
        """Return the first argument of ``call`` that breaks a constraint, described; None when all hold."""
        for key, matcher in self.args.items():
            if not matcher.matches(call.arguments, key):
                got = json.dumps(call.arguments[key], default=str) if key in call.arguments else "nothing"
                return f"argument {key!r} of {self.name}: expected {matcher.describe()}, got {got}"
        return None

    def matches(self, call: ToolCall) -> bool:
        """Return whether ``call`` is this step: same name and every constraint holds."""
        return call.name == self.name and self.wrong_argument(call) is None

    def describe(self) -> str:
        """Render the step, with its constraints, for a reason text."""
        if not self.args:
            return self.name
        inner = ", ".join(f"{key}={m.describe()}" for key, m in self.args.items())
        return f"{self.name}({inner})"


def _parse_args(spec: Any, name: str) -> dict[str, ArgMatcher]:
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"args of expected tool {name!r} must be a mapping of argument -> matcher, got {spec!r}")
    return {str(key): parse_matcher(value, f"{name}.{key}") for key, value in spec.items()}


def parse_steps(items: Sequence[Any], shared_args: Mapping[str, Any] | None = None) -> list[ExpectedStep]:
    """Read expected steps; ``shared_args`` (tool -> argument matchers) apply to every step of that tool.

    A step's own ``args`` win over the shared ones for the same argument.

    Raises:
        ValueError: An item is neither a name nor a ``{name, args}`` mapping, or a matcher is malformed.
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise ValueError(f"expected must be a list of tool names or {{name, args}} mappings, got {items!r}")
    shared = {str(tool): _parse_args(spec, str(tool)) for tool, spec in (shared_args or {}).items()}
    steps: list[ExpectedStep] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            name, own = item, {}
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str) and set(item) <= {"name", "args"}:
            name, own = item["name"], _parse_args(item.get("args"), item["name"])
        else:
            raise ValueError(f"expected[{index}] must be a tool name or {{name, args}}, got {item!r}")
        steps.append(ExpectedStep(name, {**shared.get(name, {}), **own}))
    return steps
