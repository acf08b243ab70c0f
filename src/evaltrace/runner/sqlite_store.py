"""A SQLite store of runs (stdlib ``sqlite3``): summaries, traces and results of many runs, with run namespaces.

Rows hold the models as JSON (the same text as the jsonl files), with the keys needed to select them in
columns. ``run_namespace`` (``{str: str}``, e.g. project and branch) is a JSON column of every row: ``runs``,
``traces`` and ``results`` (data-model.md, run namespacing), so a trace or result row can be selected by tenant
without a join; a row's namespace is its run's, rewritten when the run's namespace changes. A database created
before these columns existed gets them added in place (``ALTER TABLE``) when opened, trace and result rows
taking their run's namespace, and runs without one reading as the empty namespace. The schema version lives in ``PRAGMA user_version``. Traces and results stored by an
older release are migrated as they are read, like the jsonl files (:mod:`evaltrace.schema.migrations`).

A run can also arrive cell by cell (``run --engine ray``): :meth:`SqliteRunStore.begin_run` writes its ``runs`` row
with ``finished = 0`` and a placeholder summary, :meth:`SqliteRunStore.save_cells` adds each finished cell's trace and
results, and :meth:`SqliteRunStore.save_run` at the run's end writes the real summary and sets ``finished = 1``.
A driver killed in between leaves every cell it saved, and its run listed as unfinished.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from evaltrace._internal.private_files import private_opener
from evaltrace.exceptions import SchemaError
from evaltrace.runner.rundir import load_record
from evaltrace.schema import EvaluationResult, RunSummary, Trace

__all__ = ["SCHEMA_USER_VERSION", "SqliteRunStore", "StoredRun"]

SCHEMA_USER_VERSION = 4
"""1: runs/traces/results; 2: ``runs.run_namespace`` added; 3: ``run_namespace`` on traces and results too;
4: ``runs.finished`` (0 while a run arrives cell by cell)."""

_CREATE = (
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY,
        eval_name TEXT NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        config_hash TEXT NOT NULL,
        summary TEXT NOT NULL,
        run_namespace TEXT NOT NULL DEFAULT '{}',
        finished INTEGER NOT NULL DEFAULT 1
    )""",
    """CREATE TABLE IF NOT EXISTS traces (
        run_id TEXT NOT NULL,
        case_id TEXT NOT NULL,
        variant_name TEXT NOT NULL,
        data TEXT NOT NULL,
        run_namespace TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (run_id, variant_name, case_id)
    )""",
    """CREATE TABLE IF NOT EXISTS results (
        run_id TEXT NOT NULL,
        case_id TEXT NOT NULL,
        variant_name TEXT NOT NULL,
        evaluator TEXT NOT NULL,
        data TEXT NOT NULL,
        run_namespace TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (run_id, variant_name, case_id, evaluator)
    )""",
)


_COPY_NAMESPACE = (
    "UPDATE {table} SET run_namespace = COALESCE("
    "(SELECT runs.run_namespace FROM runs WHERE runs.run_id = {table}.run_id), '{{}}') {where}"
)
"""Give the rows of ``table`` (those matching ``where``) their run's namespace."""


_ADDED_COLUMNS = (
    ("runs", "run_namespace", "TEXT NOT NULL DEFAULT '{}'"),
    ("traces", "run_namespace", "TEXT NOT NULL DEFAULT '{}'"),
    ("results", "run_namespace", "TEXT NOT NULL DEFAULT '{}'"),
    ("runs", "finished", "INTEGER NOT NULL DEFAULT 1"),
)
"""Columns a database made by an older release lacks: (table, column, definition), added in place."""

_RUN_NAMESPACE = "COALESCE((SELECT run_namespace FROM runs WHERE run_id = ?), '{}')"
"""A cell row's namespace: its run's."""


@dataclass(frozen=True)
class StoredRun:
    """One row of ``runs``.

    Attributes:
        run_id: The run's id.
        eval_name: Its eval's name.
        summary: Its summary (a placeholder while unfinished: no variants yet).
        run_namespace: Its namespace.
        finished: False while the run arrives cell by cell (``begin_run`` without ``save_run`` yet): a driver
            killed mid-run leaves it so, with every cell it saved; ``run --resume`` completes it.
    """

    run_id: str
    eval_name: str
    summary: RunSummary
    run_namespace: dict[str, str]
    finished: bool = True


def _namespace_json(namespace: Mapping[str, str] | None) -> str:
    clean = {str(k): str(v) for k, v in (namespace or {}).items()}
    return json.dumps(clean, sort_keys=True, separators=(",", ":"))


def _run_row(summary: RunSummary, eval_name: str, namespace: Mapping[str, str] | None) -> tuple[str, ...]:
    """The values of a ``runs`` row, in the columns' order up to ``run_namespace``."""
    return (
        summary.run_id,
        eval_name,
        summary.started_at.isoformat(),
        summary.finished_at.isoformat(),
        summary.config_hash,
        summary.model_dump_json(),
        _namespace_json(namespace),
    )


class SqliteRunStore:
    """Runs in one SQLite file; use as a context manager or call :meth:`close`.

    Example:
        >>> with SqliteRunStore("runs.db") as store:  # doctest: +SKIP
        ...     store.list_runs(run_namespace={"branch": "main"})
    """

    def __init__(self, path: Path | str) -> None:
        """Open (creating or migrating) the database at ``path``."""
        self.path = Path(path)
        if not self.path.exists() and self.path.parent.is_dir():
            # sqlite would create it 0644; its journal and WAL files copy the database's mode
            os.close(private_opener(self.path, os.O_WRONLY | os.O_CREAT))
        self._db = sqlite3.connect(self.path)
        self._migrate()

    def _migrate(self) -> None:
        with self._db:
            for statement in _CREATE:
                self._db.execute(statement)
            for table, column, definition in _ADDED_COLUMNS:
                columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
                if column in columns:
                    continue
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
                if column == "run_namespace" and table != "runs":  # rows stored before the column: their run's
                    self._db.execute(_COPY_NAMESPACE.format(table=table, where=""))
            self._db.execute(f"PRAGMA user_version = {SCHEMA_USER_VERSION}")

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> SqliteRunStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def save_run(
        self,
        summary: RunSummary,
        traces: Sequence[Trace],
        results: Sequence[EvaluationResult],
        *,
        eval_name: str,
        run_namespace: Mapping[str, str] | None = None,
    ) -> None:
        """Insert or update a run; its results are replaced, traces already stored are kept (write-once).

        Args:
            summary: The run's summary.
            traces: Its traces.
            results: Its results (replace any stored for the run, as a re-evaluation does).
            eval_name: The eval's name.
            run_namespace: Namespace of the run; None keeps the stored one (empty for a new run).
        """
        with self._db:
            self._db.execute(
                """INSERT INTO runs (run_id, eval_name, started_at, finished_at, config_hash, summary, run_namespace)
                   VALUES (?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT(run_id) DO UPDATE SET eval_name = excluded.eval_name,
                       finished_at = excluded.finished_at, config_hash = excluded.config_hash,
                       summary = excluded.summary, finished = 1,
                       run_namespace = CASE WHEN ? THEN excluded.run_namespace ELSE runs.run_namespace END""",
                (*_run_row(summary, eval_name, run_namespace), run_namespace is not None),
            )
            self._db.executemany(
                "INSERT OR IGNORE INTO traces (run_id, case_id, variant_name, data) VALUES (?, ?, ?, ?)",
                [(summary.run_id, t.case_id, t.variant_name, t.model_dump_json()) for t in traces],
            )
            self._db.execute("DELETE FROM results WHERE run_id = ?", (summary.run_id,))
            self._db.executemany(
                "INSERT OR REPLACE INTO results (run_id, case_id, variant_name, evaluator, data) VALUES (?, ?, ?, ?, ?)",
                [(summary.run_id, r.case_id, r.variant_name, r.evaluator, r.model_dump_json()) for r in results],
            )
            # Every row carries its run's namespace, the one just saved or the one the run kept.
            for table in ("traces", "results"):
                self._db.execute(_COPY_NAMESPACE.format(table=table, where="WHERE run_id = ?"), (summary.run_id,))

    def begin_run(self, summary: RunSummary, *, eval_name: str, run_namespace: Mapping[str, str] | None = None) -> None:
        """Record a run that starts arriving cell by cell (``finished`` 0), unless the run is stored already.

        Args:
            summary: A placeholder summary (id, start, config hash, cases); :meth:`save_run` replaces it.
            eval_name: The eval's name.
            run_namespace: Namespace of the run (None: empty), carried by every cell row saved after.
        """
        with self._db:
            self._db.execute(
                """INSERT INTO runs
                       (run_id, eval_name, started_at, finished_at, config_hash, summary, run_namespace, finished)
                   VALUES (?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT(run_id) DO NOTHING""",
                _run_row(summary, eval_name, run_namespace),
            )

    def save_cells(self, run_id: str, traces: Sequence[Trace], results: Sequence[EvaluationResult]) -> None:
        """Add finished cells' traces and results to a run, in one transaction.

        A trace already stored is kept (write-once) and a result replaces the stored one of its key, so saving a
        cell again (a resumed run) adds nothing twice. Each row takes its run's namespace.
        """
        with self._db:
            self._db.executemany(
                "INSERT OR IGNORE INTO traces (run_id, case_id, variant_name, data, run_namespace)"
                f" VALUES (?, ?, ?, ?, {_RUN_NAMESPACE})",
                [(run_id, t.case_id, t.variant_name, t.model_dump_json(), run_id) for t in traces],
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO results (run_id, case_id, variant_name, evaluator, data, run_namespace)"
                f" VALUES (?, ?, ?, ?, ?, {_RUN_NAMESPACE})",
                [(run_id, r.case_id, r.variant_name, r.evaluator, r.model_dump_json(), run_id) for r in results],
            )

    def list_runs(
        self, *, eval_name: str | None = None, run_namespace: Mapping[str, str] | None = None
    ) -> list[StoredRun]:
        """Return stored runs, newest first, optionally of one eval and within a namespace.

        Args:
            eval_name: Only runs of this eval.
            run_namespace: Only runs whose namespace holds every given key with the given value.
        """
        query = "SELECT run_id, eval_name, summary, run_namespace, finished FROM runs"
        params: tuple[str, ...] = ()
        if eval_name is not None:
            query, params = query + " WHERE eval_name = ?", (eval_name,)
        wanted = {str(k): str(v) for k, v in (run_namespace or {}).items()}
        runs = []
        for run_id, name, summary, namespace_text, finished in self._db.execute(
            query + " ORDER BY run_id DESC", params
        ):
            namespace = json.loads(namespace_text or "{}")
            if all(namespace.get(k) == v for k, v in wanted.items()):
                runs.append(StoredRun(run_id, name, RunSummary.model_validate_json(summary), namespace, bool(finished)))
        return runs

    def get_run(self, run_id: str) -> StoredRun:
        """Return one run.

        Raises:
            SchemaError: No such run in the database.
        """
        row = self._db.execute(
            "SELECT run_id, eval_name, summary, run_namespace, finished FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise SchemaError(f"{self.path}: no run {run_id!r}")
        summary = RunSummary.model_validate_json(row[2])
        return StoredRun(row[0], row[1], summary, json.loads(row[3] or "{}"), bool(row[4]))

    def traces(self, run_id: str) -> list[Trace]:
        """Return a run's traces (variant, then case order)."""
        rows = self._db.execute(
            "SELECT data FROM traces WHERE run_id = ? ORDER BY variant_name, case_id", (run_id,)
        ).fetchall()
        return [load_record(Trace, row[0]) for row in rows]

    def results(self, run_id: str) -> list[EvaluationResult]:
        """Return a run's evaluation results."""
        rows = self._db.execute(
            "SELECT data FROM results WHERE run_id = ? ORDER BY variant_name, case_id, evaluator", (run_id,)
        ).fetchall()
        return [load_record(EvaluationResult, row[0]) for row in rows]
