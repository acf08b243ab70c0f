"""Where a finished run is saved besides its run directory: the ``output:`` stores of eval.yaml and ``--sqlite``.

``output:`` entries (data-model.md, run namespace):

* ``{type: local_files, path: DIR}``: the runs directory (the run directory is always written; ``path`` only says
  where, relative to the working directory like ``runs_dir``). ``run_namespace`` is ignored by local files.
* ``{type: sqlite, path: FILE, run_namespace: {k: v}}``: a :class:`~evaltrace.runner.SqliteRunStore` (the path is
  relative to the working directory, like ``runs_dir``).
* ``{type: postgres, dsn: DSN, run_namespace: {k: v}}``: a :class:`~evaltrace.runner.postgres_store.PostgresRunStore`;
  ``${VAR}`` in the dsn is expanded only to connect, never written anywhere.

Saving never loses a run: the run directory is complete before any store is tried, each store is tried even when
another failed, and a failure is returned as a message naming the store (the CLI prints it and exits 3; the run
can be saved later with ``evaltrace runs push``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

from evaltrace.runner.config import EvalConfig, expand_env
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.sqlite_store import SqliteRunStore, StoredRun
from evaltrace.schema import EvaluationResult, RunSummary, Trace

__all__ = [
    "STORE_TYPES",
    "RunStore",
    "StoreSpec",
    "configured_runs_dir",
    "configured_stores",
    "open_store",
    "parse_outputs",
    "save_to_stores",
    "store_namespace",
]

StoreType = Literal["local_files", "sqlite", "postgres"]
STORE_TYPES: tuple[StoreType, ...] = ("local_files", "sqlite", "postgres")


class RunStore(Protocol):
    """What the engine and the CLI need of a run store (SQLite and PostgreSQL implement it)."""

    def save_run(
        self,
        summary: RunSummary,
        traces: Sequence[Trace],
        results: Sequence[EvaluationResult],
        *,
        eval_name: str,
        run_namespace: Mapping[str, str] | None = None,
    ) -> None:
        """Insert or update a run (results replaced, traces kept, namespace kept when None)."""
        ...

    def begin_run(self, summary: RunSummary, *, eval_name: str, run_namespace: Mapping[str, str] | None = None) -> None:
        """Record a run whose cells arrive one by one (unfinished until :meth:`save_run`); a stored run is kept."""
        ...

    def save_cells(self, run_id: str, traces: Sequence[Trace], results: Sequence[EvaluationResult]) -> None:
        """Add finished cells to a begun run (a trace stored already is kept; a result replaces its key's)."""
        ...

    def list_runs(
        self, *, eval_name: str | None = None, run_namespace: Mapping[str, str] | None = None
    ) -> list[StoredRun]:
        """Return stored runs, newest first, of one eval and within a namespace when given."""
        ...

    def get_run(self, run_id: str) -> StoredRun:
        """Return one run (SchemaError when missing)."""
        ...

    def traces(self, run_id: str) -> list[Trace]:
        """Return a run's traces."""
        ...

    def results(self, run_id: str) -> list[EvaluationResult]:
        """Return a run's results."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...

    def __enter__(self) -> RunStore: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


@dataclass(frozen=True)
class StoreSpec:
    """One store to save runs to.

    Attributes:
        type: ``local_files``, ``sqlite`` or ``postgres``.
        path: Directory (local_files) or database file (sqlite).
        dsn: Connection string (postgres), ``${VAR}`` references unexpanded.
        run_namespace: Namespace recorded with each run (None: keep what the store has, for ``--sqlite``).
        source: The config file the entry came from (for messages and ``${VAR}`` errors), or None for a flag.
        entry: Where the entry sits (``output[1]``, ``--sqlite``).
    """

    type: StoreType
    path: str | None = None
    dsn: str | None = None
    run_namespace: dict[str, str] | None = field(default=None)
    source: Path | None = None
    entry: str = "output"

    def describe(self) -> str:
        """Name the store for the user (a dsn without its password)."""
        if self.type == "postgres":
            from evaltrace.runner.postgres_store import redact_dsn

            return f"postgres {redact_dsn(self.dsn or '')}"
        return f"{self.type} {self.path}"


def _text(path: Path, entry: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise RunConfigError(path, f"{entry}.{key}", f"expected a non-empty string, got {value!r}")
    return value


def _namespace(path: Path, entry: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str | int | float | bool) for v in value.values()):
        raise RunConfigError(path, f"{entry}.run_namespace", f"expected a mapping of names to strings, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def _field(item: Any, key: str) -> Any:
    # A raw mapping, or a validated entry object of EvalConfig.outputs.
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _parse_entry(path: Path, entry: str, item: Any) -> StoreSpec:
    kind = _field(item, "type")
    if kind not in STORE_TYPES:
        raise RunConfigError(path, f"{entry}.type", f"unknown store {kind!r}; known: {', '.join(STORE_TYPES)}")
    namespace = _namespace(path, entry, _field(item, "run_namespace"))
    if kind == "postgres":
        dsn = _text(path, entry, "dsn", _field(item, "dsn"))
        return StoreSpec("postgres", dsn=dsn, run_namespace=namespace, source=path, entry=entry)
    location = _field(item, "path")
    if kind == "local_files" and location is None:
        return StoreSpec("local_files", source=path, entry=entry)
    return StoreSpec(kind, path=_text(path, entry, "path", location), run_namespace=namespace, source=path, entry=entry)


def parse_outputs(path: Path, value: Any) -> list[StoreSpec]:
    """Read an ``output:`` list (mappings, or the validated entry objects of EvalConfig.outputs).

    Raises:
        RunConfigError: An entry is malformed, or two local_files entries name different directories.
    """
    if value is None:
        return []
    if not isinstance(value, list):
        raise RunConfigError(path, "output", "expected a list of stores ({type: local_files | sqlite | postgres})")
    specs = [_parse_entry(path, f"output[{i}]", item) for i, item in enumerate(value)]
    local = {s.path for s in specs if s.type == "local_files" and s.path is not None}
    if len(local) > 1:
        raise RunConfigError(path, "output", f"local_files entries name different directories: {sorted(local)}")
    return specs


def configured_stores(config: EvalConfig) -> list[StoreSpec]:
    """The ``output:`` stores of a config (``EvalConfig.outputs`` when the loader provides it, else the raw key)."""
    outputs = getattr(config, "outputs", None)
    return parse_outputs(config.path, outputs if outputs is not None else config.raw.get("output"))


def configured_runs_dir(config: EvalConfig) -> Path:
    """Where run directories go: a ``local_files`` output's ``path``, else ``runs_dir`` (default ``runs``).

    Raises:
        RunConfigError: Both are set and differ.
    """
    local = next((s for s in configured_stores(config) if s.type == "local_files" and s.path), None)
    if local is None or local.path is None:
        return config.runs_dir
    if "runs_dir" in config.raw and Path(str(config.raw["runs_dir"])) != Path(local.path):
        raise RunConfigError(config.path, f"{local.entry}.path", f"differs from runs_dir {config.raw['runs_dir']!r}")
    return Path(local.path)


def open_store(spec: StoreSpec) -> RunStore:
    """Open (creating or migrating) the database of a sqlite or postgres spec.

    Raises:
        RunConfigError: A ``${VAR}`` of the dsn is not set.
        ValueError: ``spec`` is a local_files spec (nothing to open).
        Exception: Whatever the database raised (the caller names the store).
    """
    if spec.type == "sqlite" and spec.path is not None:
        return SqliteRunStore(spec.path)
    if spec.type == "postgres" and spec.dsn is not None:
        from evaltrace.runner.postgres_store import PostgresRunStore

        dsn = expand_env(spec.dsn, spec.source or Path(spec.entry), f"{spec.entry}.dsn")
        return PostgresRunStore(dsn)
    raise ValueError(f"{spec.describe()}: not a database store")


def store_namespace(spec: StoreSpec, run_namespace: Mapping[str, str] | None) -> dict[str, str] | None:
    """The namespace a run is saved with in ``spec``: the store's ``run_namespace``, the command line's keys winning."""
    if run_namespace is None:
        return spec.run_namespace
    return {**(spec.run_namespace or {}), **run_namespace}


def save_to_stores(
    specs: Sequence[StoreSpec],
    summary: RunSummary,
    traces: Sequence[Trace],
    results: Sequence[EvaluationResult],
    *,
    eval_name: str,
    run_namespace: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """Save a run to every database store; a store that fails does not stop the others.

    Args:
        specs: The stores (local_files entries are skipped: the run directory is already written).
        summary: The run's summary.
        traces: Its traces.
        results: Its results.
        eval_name: The eval's name.
        run_namespace: Namespace from the command line; its keys win over a store's ``run_namespace``.

    Returns:
        (stores saved to, one message per store that failed, naming it and the error).
    """
    saved: list[str] = []
    failed: list[str] = []
    for spec in specs:
        if spec.type == "local_files":
            continue
        namespace = store_namespace(spec, run_namespace)
        try:
            with open_store(spec) as store:
                store.save_run(summary, traces, results, eval_name=eval_name, run_namespace=namespace)
        # Broad on purpose: the run directory is written already, so any store error (driver, network, disk,
        # a missing ${VAR}) is reported by name and must not lose the run or stop the next store.
        except Exception as exc:
            failed.append(f"{spec.describe()} ({spec.entry}): {str(exc).strip() or type(exc).__name__}")
        else:
            saved.append(spec.describe())
    return saved, failed
