"""Judge prompts: versioned TOML data files shipped in ``evaltrace/evaluators/prompts/``.

A prompt file has ``name``, ``version``, ``system`` and ``user`` templates, and optional tables of named texts
(rubric criteria). Placeholders are ``{name}``; only names that are given are replaced, in a single pass, so JSON
examples in a template and braces inside substituted values are left alone. A prompt's version is part of the
version of every evaluator that uses it.
"""

from __future__ import annotations

import functools
import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def render_template(template: str, variables: Mapping[str, str]) -> str:
    """Replace ``{name}`` placeholders whose name is in ``variables``; leave every other brace as is."""
    return _PLACEHOLDER.sub(lambda m: variables[m.group(1)] if m.group(1) in variables else m.group(0), template)


@dataclass(frozen=True)
class Prompt:
    """A judge prompt template."""

    name: str
    version: str
    system: str
    user: str
    json_mode: bool = True
    tables: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """``name@vVERSION``, recorded in results and evaluator versions."""
        return f"{self.name}@v{self.version}"

    @property
    def template_hash(self) -> str:
        """Short sha256 of the templates: changes whenever the wording does."""
        return hashlib.sha256(f"{self.system}\x00{self.user}".encode()).hexdigest()[:16]

    def render(self, variables: Mapping[str, str]) -> list[dict[str, str]]:
        """Return the chat messages for ``variables``."""
        messages = []
        if self.system:
            messages.append({"role": "system", "content": render_template(self.system, variables)})
        messages.append({"role": "user", "content": render_template(self.user, variables)})
        return messages

    def table(self, name: str) -> Mapping[str, str]:
        """Return a named table of texts (e.g. rubric criteria); empty when absent."""
        return self.tables.get(name, {})


def _tables(data: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    return {key: {k: str(v) for k, v in value.items()} for key, value in data.items() if isinstance(value, dict)}


@functools.cache
def load_prompt(name: str) -> Prompt:
    """Load the packaged prompt ``name`` (cached; the files are read-only package data).

    Args:
        name: File stem in ``evaltrace/evaluators/prompts/``.

    Returns:
        The prompt.

    Raises:
        FileNotFoundError: No such prompt.
    """
    text = resources.files("evaltrace.evaluators").joinpath("prompts", f"{name}.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    return Prompt(
        name=str(data["name"]),
        version=str(data["version"]),
        system=str(data.get("system", "")),
        user=str(data["user"]),
        json_mode=bool(data.get("json", True)),
        tables=_tables(data),
    )


def custom_prompt(name: str, user: str, *, system: str = "", json_mode: bool = False) -> Prompt:
    """Build a prompt from user-supplied text; its version is a hash of the text, so edits change it."""
    digest = hashlib.sha256(f"{system}\x00{user}".encode()).hexdigest()[:8]
    return Prompt(name=name, version=digest, system=system, user=user, json_mode=json_mode)
