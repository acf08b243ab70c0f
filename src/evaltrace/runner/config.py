"""Loading ``eval.yaml`` and ``cases.yaml`` into validated models, with errors that name file, entry and problem.

Paths inside eval.yaml (``cases``) are relative to the eval.yaml's directory; ``runs_dir`` is relative to the
working directory (where runs of every eval land). ``${VAR}`` references are kept unexpanded in the loaded
config (so nothing secret is ever persisted) and expanded only when an adapter or evaluator is built.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from evaltrace.runner.errors import RunConfigError
from evaltrace.schema import EvalCase, RunVariant

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_RUNS_DIR",
    "EvalConfig",
    "config_hash",
    "expand_env",
    "load_cases",
    "load_eval_config",
    "load_evaluator_entries",
    "mask_secrets",
]

DEFAULT_RUNS_DIR = "runs"
DEFAULT_CONCURRENCY = 4
MASK = "***"
_KNOWN_KEYS = frozenset({"name", "cases", "variants", "evaluators", "concurrency", "runs_dir", "baseline"})
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_KEY = re.compile(r"(authorization|api[_-]?key|token|secret|password|passwd|cookie)", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class EvalConfig:
    """A validated eval.yaml and the cases it names.

    Attributes:
        name: Eval name (part of the run id; letters, digits, ``_``, ``-``, ``.``).
        path: The eval.yaml file.
        raw: The authored mapping, ``${VAR}`` references unexpanded.
        cases: The cases, in file order.
        variants: The variants, in file order.
        evaluators: Evaluator entries (``{name: ..., **options}`` or ``{import: "module:object", **options}``).
        concurrency: How many (case, variant) executions run at once.
        runs_dir: Where run directories are created.
        baseline: Variant that the others are compared with, if any.
    """

    name: str
    path: Path
    raw: dict[str, Any]
    cases: list[EvalCase]
    variants: list[RunVariant]
    evaluators: list[dict[str, Any]] = field(default_factory=list)
    concurrency: int = DEFAULT_CONCURRENCY
    runs_dir: Path = Path(DEFAULT_RUNS_DIR)
    baseline: str | None = None


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RunConfigError(path, "", f"cannot read the file ({exc.strerror or exc})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RunConfigError(path, "", f"not valid YAML: {exc}") from None


def _first_error(exc: ValidationError) -> tuple[str, str]:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    return where, str(error["msg"])


def load_cases(path: Path) -> list[EvalCase]:
    """Read a cases file: a YAML list of EvalCase mappings (or a mapping with a ``cases`` list).

    Args:
        path: The cases.yaml file.

    Returns:
        The cases, in file order.

    Raises:
        RunConfigError: The file is missing, not YAML, not a list, an entry is invalid, or ids repeat.
    """
    data = _read_yaml(path)
    if isinstance(data, dict) and "cases" in data:
        data = data["cases"]
    if not isinstance(data, list) or not data:
        raise RunConfigError(path, "", "expected a non-empty list of cases")
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for index, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise RunConfigError(path, f"cases[{index}]", f"expected a mapping, got {type(entry).__name__}")
        try:
            case = EvalCase.model_validate(entry)
        except ValidationError as exc:
            where, msg = _first_error(exc)
            raise RunConfigError(path, f"cases[{index}].{where}", msg) from None
        if case.id in seen:
            raise RunConfigError(path, f"cases[{index}].id", f"duplicate case id {case.id!r}")
        seen.add(case.id)
        cases.append(case)
    return cases


def _load_variants(path: Path, data: Any) -> list[RunVariant]:
    if not isinstance(data, list) or not data:
        raise RunConfigError(path, "variants", "expected a non-empty list of variants")
    variants: list[RunVariant] = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise RunConfigError(path, f"variants[{index}]", f"expected a mapping, got {type(entry).__name__}")
        try:
            variant = RunVariant.model_validate(entry)
        except ValidationError as exc:
            where, msg = _first_error(exc)
            raise RunConfigError(path, f"variants[{index}].{where}", msg) from None
        if not _NAME.match(variant.name):
            raise RunConfigError(path, f"variants[{index}].name", f"{variant.name!r} is not a valid variant name")
        if any(v.name == variant.name for v in variants):
            raise RunConfigError(path, f"variants[{index}].name", f"duplicate variant name {variant.name!r}")
        variants.append(variant)
    return variants


def load_evaluator_entries(path: Path, data: Any) -> list[dict[str, Any]]:
    """Validate the ``evaluators`` list: mappings with exactly one of ``name`` / ``import``.

    Raises:
        RunConfigError: An entry is malformed (named by its index).
    """
    if data is None:
        return []
    if not isinstance(data, list):
        raise RunConfigError(path, "evaluators", "expected a list of evaluator entries")
    for index, entry in enumerate(data):
        if not isinstance(entry, dict) or ("name" in entry) == ("import" in entry):
            raise RunConfigError(
                path, f"evaluators[{index}]", "expected a mapping with exactly one of 'name' or 'import'"
            )
    return [dict(entry) for entry in data]


def _positive_int(path: Path, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RunConfigError(path, key, f"expected a positive integer, got {value!r}")
    return value


def load_eval_config(
    path: Path | str, *, raw: dict[str, Any] | None = None, cases: list[EvalCase] | None = None
) -> EvalConfig:
    """Read and validate an eval.yaml and the cases file it names.

    Args:
        path: The eval.yaml file.
        raw: Its content, already read (a run's saved config.yaml, for a resume); the file is then not read.
        cases: The cases, already loaded (a run's snapshot); the cases file is then not read.

    Returns:
        The validated config.

    Raises:
        RunConfigError: Anything malformed; the message names the file, the entry and the problem.
    """
    path = Path(path)
    if raw is None:
        raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise RunConfigError(path, "", "expected a mapping at the top level")
    unknown = sorted(set(raw) - _KNOWN_KEYS)
    if unknown:
        raise RunConfigError(path, unknown[0], f"unknown key; expected one of {', '.join(sorted(_KNOWN_KEYS))}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise RunConfigError(path, "name", f"expected a name of letters, digits, '_', '-' or '.', got {name!r}")
    cases_ref = raw.get("cases")
    if not isinstance(cases_ref, str) or not cases_ref:
        raise RunConfigError(path, "cases", "expected the path of a cases.yaml file")
    variants = _load_variants(path, raw.get("variants"))
    baseline = raw.get("baseline")
    if baseline is not None and baseline not in {v.name for v in variants}:
        raise RunConfigError(path, "baseline", f"{baseline!r} is not one of the variants")
    runs_dir = raw.get("runs_dir", DEFAULT_RUNS_DIR)
    if not isinstance(runs_dir, str) or not runs_dir:
        raise RunConfigError(path, "runs_dir", f"expected a directory path, got {runs_dir!r}")
    return EvalConfig(
        name=name,
        path=path,
        raw=raw,
        cases=cases if cases is not None else load_cases(path.parent / cases_ref),
        variants=variants,
        evaluators=load_evaluator_entries(path, raw.get("evaluators")),
        concurrency=_positive_int(path, "concurrency", raw.get("concurrency", DEFAULT_CONCURRENCY)),
        runs_dir=Path(runs_dir),
        baseline=baseline,
    )


def expand_env(value: Any, path: Path, entry: str, environ: Mapping[str, str] | None = None) -> Any:
    """Return ``value`` with every ``${VAR}`` in its strings replaced by the environment variable.

    Args:
        value: A config value (nested dicts and lists are walked).
        path: The config file, for the error message.
        entry: Where ``value`` sits in the file, for the error message.
        environ: The environment (default ``os.environ``).

    Returns:
        The expanded copy.

    Raises:
        RunConfigError: A referenced variable is not set.
    """
    env = os.environ if environ is None else environ
    if isinstance(value, dict):
        return {k: expand_env(v, path, f"{entry}.{k}", env) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, path, f"{entry}[{i}]", env) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise RunConfigError(path, entry, f"environment variable {name} is not set")
        return env[name]

    return _ENV_REF.sub(substitute, value)


def mask_secrets(value: Any, key: str = "") -> Any:
    """Return a copy of a config with literal secrets masked, for ``config.yaml``.

    ``${VAR}`` references are kept (they name the secret without holding it); any other string under a key
    that looks secret (``Authorization``, ``api_key``, ``token``, ``password`` ...) becomes ``"***"``.
    """
    if isinstance(value, dict):
        return {k: mask_secrets(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v, key) for v in value]
    if isinstance(value, str) and _SECRET_KEY.search(key) and not _only_refs(value):
        return MASK
    return value


def _only_refs(value: str) -> bool:
    # "Bearer ${TOKEN}" holds no secret itself: only the fixed scheme word and a reference.
    rest = _ENV_REF.sub("", value).strip()
    return bool(_ENV_REF.search(value)) and rest.lower() in {"", "bearer", "basic", "token"}


def config_hash(masked_config: Mapping[str, Any], cases: list[EvalCase]) -> str:
    """Return the sha256 of the masked config and the cases (canonical JSON): equal hashes, same inputs."""
    payload = {
        "config": masked_config,
        "cases": [c.model_dump(mode="json") for c in cases],
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
