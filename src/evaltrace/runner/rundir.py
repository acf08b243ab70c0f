"""The run directory ``runs/<run_id>/``: the durable surface of an offline run (data-model.md part A).

``traces.jsonl`` is written once (exclusive create, then made read-only) and before any evaluator runs;
``results.jsonl`` and ``summary.yaml`` are replaced atomically, so ``re-evaluate`` can rewrite them. Beside the
files of the layout the directory holds ``cases.jsonl``: the cases as they were when the run executed, so a
re-evaluation judges against the same expectations even after cases.yaml was edited.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from evaltrace.exceptions import EvaltraceError, SchemaError
from evaltrace.schema import EvalCase, EvaluationResult, RunSummary, Trace

__all__ = [
    "CASES_FILE",
    "CONFIG_FILE",
    "HASH_FILE",
    "RESULTS_FILE",
    "SUMMARY_FILE",
    "TRACES_FILE",
    "RunDirectory",
    "RunNotFoundError",
    "new_run_id",
    "resolve_run",
]

TRACES_FILE = "traces.jsonl"
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.yaml"
CONFIG_FILE = "config.yaml"
HASH_FILE = "config_hash.txt"
CASES_FILE = "cases.jsonl"
_ID_TIME_FORMAT = "%Y-%m-%dT%H-%M-%S"
_MAX_ID_ATTEMPTS = 1000

M = TypeVar("M", bound=BaseModel)


class RunNotFoundError(EvaltraceError, LookupError):
    """No run directory matches the given id or path."""


def new_run_id(eval_name: str, when: dt.datetime) -> str:
    """Return the sortable run id ``{ISO8601 with '-' for ':'}_{eval_name}`` (UTC, whole seconds)."""
    return f"{when.astimezone(dt.UTC).strftime(_ID_TIME_FORMAT)}_{eval_name}"


def resolve_run(reference: str | Path, runs_dir: Path) -> Path:
    """Find a run directory from a path, a run id under ``runs_dir``, or a unique prefix of one.

    Raises:
        RunNotFoundError: Nothing (or more than one run) matches.
    """
    candidate = Path(reference)
    if (candidate / SUMMARY_FILE).is_file() or (candidate / TRACES_FILE).is_file():
        return candidate
    direct = runs_dir / str(reference)
    if (direct / TRACES_FILE).is_file():
        return direct
    matches = sorted(p for p in runs_dir.glob(f"{reference}*") if (p / TRACES_FILE).is_file())
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(p.name for p in matches[:5])
        raise RunNotFoundError(f"{reference!r} matches several runs in {runs_dir}: {names}")
    raise RunNotFoundError(f"no run {str(reference)!r} (not a run directory, nor a run id in {runs_dir})")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _jsonl(models: Iterable[BaseModel]) -> str:
    return "".join(m.model_dump_json() + "\n" for m in models)


def _read_jsonl(path: Path, model: type[M]) -> list[M]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read ({exc.strerror or exc})") from None
    items: list[M] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(model.model_validate_json(line))
        except ValidationError as exc:
            raise SchemaError(f"{path}:{number}: not a valid {model.__name__}: {exc.errors()[0]['msg']}") from None
    return items


class RunDirectory:
    """Reads and writes the files of one run directory.

    Attributes:
        path: The directory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def run_id(self) -> str:
        """The run id (the directory name)."""
        return self.path.name

    @classmethod
    def create(cls, runs_dir: Path, eval_name: str, when: dt.datetime) -> RunDirectory:
        """Create a new, empty run directory; a taken id moves on by a second so ids stay unique and sortable."""
        runs_dir.mkdir(parents=True, exist_ok=True)
        for offset in range(_MAX_ID_ATTEMPTS):
            path = runs_dir / new_run_id(eval_name, when + dt.timedelta(seconds=offset))
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return cls(path)
        raise FileExistsError(f"no free run id in {runs_dir} near {when.isoformat()}")

    def write_config(
        self, masked_config: dict[str, Any], digest: str, cases: list[EvalCase], *, verbatim: str | None = None
    ) -> None:
        """Write ``config.yaml``, ``config_hash.txt`` and the cases snapshot.

        Args:
            masked_config: The config with secrets masked (dumped as YAML unless ``verbatim`` is given).
            digest: The config hash.
            cases: The cases the run uses.
            verbatim: The authored file text, kept as is (comments included) when masking changed nothing.
        """
        text = verbatim if verbatim is not None else yaml.safe_dump(masked_config, sort_keys=False, allow_unicode=True)
        _atomic_write(self.path / CONFIG_FILE, text)
        _atomic_write(self.path / HASH_FILE, digest + "\n")
        _atomic_write(self.path / CASES_FILE, _jsonl(cases))

    def write_traces(self, traces: list[Trace]) -> None:
        """Write ``traces.jsonl`` once; it is then made read-only.

        Raises:
            FileExistsError: The run already has traces (they are never rewritten).
        """
        target = self.path / TRACES_FILE
        with target.open("x", encoding="utf-8") as handle:
            handle.write(_jsonl(traces))
            handle.flush()
            os.fsync(handle.fileno())
        target.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)

    def write_results(self, results: list[EvaluationResult]) -> None:
        """Replace ``results.jsonl`` atomically."""
        _atomic_write(self.path / RESULTS_FILE, _jsonl(results))

    def write_summary(self, summary: RunSummary) -> None:
        """Replace ``summary.yaml`` atomically."""
        data = summary.model_dump(mode="json")
        _atomic_write(self.path / SUMMARY_FILE, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))

    def read_traces(self) -> list[Trace]:
        """Load ``traces.jsonl``."""
        return _read_jsonl(self.path / TRACES_FILE, Trace)

    def read_results(self) -> list[EvaluationResult]:
        """Load ``results.jsonl`` (empty when the run was never evaluated)."""
        path = self.path / RESULTS_FILE
        return _read_jsonl(path, EvaluationResult) if path.exists() else []

    def read_cases(self) -> list[EvalCase]:
        """Load the cases snapshot."""
        return _read_jsonl(self.path / CASES_FILE, EvalCase)

    def read_summary(self) -> RunSummary:
        """Load ``summary.yaml``."""
        return read_summary_file(self.path / SUMMARY_FILE)

    def read_config(self) -> dict[str, Any]:
        """Load ``config.yaml`` (the masked config the run used)."""
        data = yaml.safe_load((self.path / CONFIG_FILE).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise SchemaError(f"{self.path / CONFIG_FILE}: expected a mapping")
        return data

    def read_hash(self) -> str:
        """Return the config hash."""
        return (self.path / HASH_FILE).read_text(encoding="utf-8").strip()


def read_summary_file(path: Path) -> RunSummary:
    """Load a RunSummary from a YAML file.

    Raises:
        SchemaError: The file is missing or not a RunSummary.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return RunSummary.model_validate(data)
    except OSError as exc:
        raise SchemaError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise SchemaError(f"{path}: not a valid RunSummary: {exc}") from None
