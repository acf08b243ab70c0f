"""Loading ``eval.yaml`` and ``cases.yaml`` into validated models, with errors that name file, entry and problem.

The authoring models of :mod:`evaltrace.runner.config_models` define every key; an unknown one is an error naming
the nearest known key (``eval.yaml: systems[1].config.timout_s: unknown key; did you mean timeout_s?``). Paths
inside eval.yaml (``cases``) are relative to the eval.yaml's directory; ``runs_dir`` is relative to the working
directory (where runs of every eval land); ``pythonpath`` entries are relative to the eval.yaml's directory and
must exist. ``${VAR}`` references are kept unexpanded in the loaded config (so
nothing secret is ever persisted) and expanded only when an adapter, store or judge is built.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from evaltrace._internal import safe_yaml
from evaltrace.runner._config_errors import first_problem
from evaltrace.runner.config_models import CaseConfig, EvalFileConfig, EvaluatorEntry, JudgeConfig, OutputConfig
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.import_paths import import_dirs
from evaltrace.schema import EvalCase, RunVariant

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_RUNS_DIR",
    "MAX_AUTHORED_BYTES",
    "EvalConfig",
    "config_hash",
    "expand_env",
    "load_cases",
    "load_eval_config",
    "load_evaluator_entries",
    "load_judge",
    "mask_secrets",
    "system_entries",
]

DEFAULT_RUNS_DIR = "runs"
DEFAULT_CONCURRENCY = 4
MASK = "***"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_KEY = re.compile(r"(authorization|api[_-]?key|token|secret|password|passwd|cookie)", re.IGNORECASE)
# Keys that look secret but hold none: response_mapping's token-count selectors.
_NOT_SECRET_KEYS = frozenset({"token_input", "token_output", "token_thinking"})
# A password inside a connection string (postgresql://user:pw@host, or libpq's "password=pw"), whatever its key.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)(?P<secret>[^@\s]+)(?P<tail>@)")
_KV_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<secret>'(?:[^'\\]|\\.)*'|[^\s']+)", re.IGNORECASE)
M = TypeVar("M", bound=BaseModel)
MAX_AUTHORED_BYTES = 256 * 1024 * 1024
"""Largest eval.yaml / cases.yaml read (a 58 MiB cases.yaml loads in about 12 s)."""
_CHUNK = 1024 * 1024
_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


@dataclass(frozen=True)
class EvalConfig:
    """A validated eval.yaml and the cases it names.

    Attributes:
        name: Eval name (part of the run id; letters, digits, ``_``, ``-``, ``.``).
        path: The eval.yaml file.
        raw: The authored mapping, ``${VAR}`` references unexpanded.
        cases: The cases, in file order.
        variants: The systems (``systems:``, or its alias ``variants:``), in file order.
        evaluators: Evaluator entries as written (see :class:`~evaltrace.runner.config_models.EvaluatorEntry`).
        concurrency: How many (case, variant) executions run at once.
        runs_dir: Where run directories are created.
        baseline: Variant that the others are compared with, if any.
        outputs: The ``output:`` stores, validated (``${VAR}`` in a dsn unexpanded); empty when none are given,
            None only for a config made without :func:`load_eval_config` (``raw["output"]`` is then read).
        judge: The ``judge:`` block (``${VAR}`` unexpanded), or None: judges then use the environment's defaults.
        variants_key: The key the systems were written under, for messages (``systems[1]`` or ``variants[1]``).
        pythonpath: The ``pythonpath:`` directories as written (relative to the eval.yaml's directory).
        sinks: The ``sinks:`` score sinks (``jsonl:PATH``, ``langfuse``, ``phoenix[:URL]``) the run's scores go to.
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
    outputs: list[OutputConfig] | None = None
    judge: JudgeConfig | None = None
    variants_key: str = "variants"
    pythonpath: list[str] = field(default_factory=list)
    sinks: list[str] = field(default_factory=list)


def _not_regular(mode: int) -> str | None:
    """What a file of this mode is when it is not a regular file (None when it is one)."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _NOT_REGULAR if test(mode)), "not a regular file")


def _read_bounded(handle: BinaryIO, limit: int) -> bytes:
    """Read up to ``limit`` bytes in chunks (``read(limit)`` would allocate ``limit`` bytes up front)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = handle.read(min(_CHUNK, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _read_authored(path: Path) -> bytes:
    """Read an authored file: a regular file of at most :data:`MAX_AUTHORED_BYTES`, never a pipe or a device.

    The type is checked before opening (opening a FIFO waits for a writer; ``/dev/zero`` never ends), again on
    the open file (it may have been swapped), and the read is bounded whatever the size says (``/proc`` files).
    """
    try:
        kind = _not_regular(os.stat(path).st_mode)
        if kind is not None:
            raise RunConfigError(path, "", f"expected a regular file, got {kind}")
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(descriptor, "rb") as handle:
            kind = _not_regular(os.fstat(handle.fileno()).st_mode)
            if kind is not None:
                raise RunConfigError(path, "", f"expected a regular file, got {kind}")
            data = _read_bounded(handle, MAX_AUTHORED_BYTES + 1)
    except OSError as exc:
        raise RunConfigError(path, "", f"cannot read the file ({exc.strerror or exc})") from None
    if len(data) > MAX_AUTHORED_BYTES:
        limit = MAX_AUTHORED_BYTES // (1024 * 1024)
        raise RunConfigError(path, "", f"larger than {limit} MiB: refused")
    return data


def _read_yaml(path: Path) -> Any:
    """Read an authored YAML file; hostile shapes (alias bombs, recursion, deep nesting) are refused by the loader."""
    data = _read_authored(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunConfigError(
            path, "", f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} ({exc.reason})"
        ) from None
    try:
        return safe_yaml.load(text)
    except safe_yaml.YamlLimitError as exc:
        raise RunConfigError(path, "", f"refused: {exc}") from None
    except yaml.YAMLError as exc:
        raise RunConfigError(path, "", f"not valid YAML: {exc}") from None


def _validated(model: type[M], data: Any, path: Path, entry: str = "") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where, problem, _ = first_problem(exc, entry)
        raise RunConfigError(path, where, problem) from None


def load_cases(path: Path) -> list[EvalCase]:
    """Read a cases file: a YAML list of EvalCase mappings (or a mapping with a ``cases`` list).

    Args:
        path: The cases.yaml file.

    Returns:
        The cases, in file order.

    Raises:
        RunConfigError: The file is missing, not YAML, not a list, an entry is invalid or has an unknown key, or
            ids repeat.
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
        _validated(CaseConfig, entry, path, f"cases[{index}]")
        case = EvalCase.model_validate(entry)
        if case.id in seen:
            raise RunConfigError(path, f"cases[{index}].id", f"duplicate case id {case.id!r}")
        seen.add(case.id)
        cases.append(case)
    return cases


def system_entries(raw: Mapping[str, Any]) -> Any:
    """The authored systems of a config mapping: ``systems``, else its alias ``variants`` (None when neither)."""
    return raw["systems"] if raw.get("systems") is not None else raw.get("variants")


def load_evaluator_entries(path: Path, data: Any) -> list[dict[str, Any]]:
    """Validate the ``evaluators`` list (each entry's form and reserved keys; options are checked when built).

    Raises:
        RunConfigError: An entry is malformed (named by its index).
    """
    if data is None:
        return []
    if not isinstance(data, list):
        raise RunConfigError(path, "evaluators", "expected a list of evaluator entries")
    for index, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise RunConfigError(path, f"evaluators[{index}]", f"expected a mapping, got {type(entry).__name__}")
        _validated(EvaluatorEntry, entry, path, f"evaluators[{index}]")
    return [dict(entry) for entry in data]


def load_judge(path: Path, data: Any) -> JudgeConfig | None:
    """Validate a ``judge:`` block (None when absent).

    Raises:
        RunConfigError: The block is malformed or has an unknown key.
    """
    return None if data is None else _validated(JudgeConfig, data, path, "judge")


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
    authored = _validated(EvalFileConfig, raw, path)
    import_dirs(path, path.parent, authored.pythonpath)  # a missing directory is named before anything runs
    key = authored.systems_key
    return EvalConfig(
        name=authored.name,
        path=path,
        raw=raw,
        cases=cases if cases is not None else load_cases(path.parent / authored.cases),
        # Plain schema models for the engine, built from the entries as written (defaults not filled in).
        variants=[RunVariant.model_validate(entry) for entry in raw[key]],
        evaluators=[dict(entry) for entry in raw.get("evaluators") or []],
        concurrency=authored.concurrency,
        runs_dir=Path(authored.runs_dir),
        baseline=authored.baseline,
        outputs=list(authored.output),
        judge=authored.judge,
        variants_key=key,
        pythonpath=list(authored.pythonpath),
        sinks=list(authored.sinks),
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
    if isinstance(value, str) and _SECRET_KEY.search(key) and key not in _NOT_SECRET_KEYS and not _only_refs(value):
        return MASK
    if isinstance(value, str):
        return _mask_connection_passwords(value)
    return value


def _mask_connection_passwords(value: str) -> str:
    def mask(match: re.Match[str]) -> str:
        secret = match.group("secret")
        if _ENV_REF.fullmatch(secret.strip("'")):  # a ${VAR} reference names the password without holding it
            return match.group(0)
        return match.group("head") + MASK + (match.groupdict().get("tail") or "")

    return _KV_PASSWORD.sub(mask, _URL_PASSWORD.sub(mask, value))


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
