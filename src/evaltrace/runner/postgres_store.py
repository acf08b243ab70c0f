"""A PostgreSQL store of runs (psycopg 3, extra ``postgres``): the SQLite store's tables, for many users at once.

Tables (prefixed ``evaltrace_`` so they can share a database with an application):

* ``evaltrace_runs``: one row per run; ``summary`` and ``run_namespace`` are JSONB, the namespace with a GIN index
  (``jsonb_path_ops``) so ``list_runs(run_namespace=...)`` is an indexed containment query (``@>``);
* ``evaltrace_traces`` / ``evaltrace_results``: the run's models as JSONB, keyed like the jsonl files;
* ``evaltrace_schema_migrations``: the schema versions applied.

A run arriving cell by cell (``run --engine ray``) has its ``evaltrace_runs`` row from :meth:`PostgresRunStore.begin_run`
(``finished`` false, a placeholder summary) before its cells (:meth:`PostgresRunStore.save_cells`); ``save_run`` at
its end sets the summary and ``finished``.

Every wait on the server is bounded (:mod:`evaltrace.runner._pg_timeouts`): a server that freezes or vanishes makes
the call fail with :class:`PostgresStoreError` within the connect or statement timeout, never hang the run.

The schema is created or migrated when a store is opened. The migration runs in one transaction holding a
transaction-level advisory lock, so processes opening the same database at once wait for each other instead of
failing, and a half-applied migration is never visible. Every statement is also idempotent (``IF NOT EXISTS``), so
tables made by hand or by an older release are adopted and completed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, LiteralString, TypeVar

from evaltrace.exceptions import EvaltraceError, SchemaError
from evaltrace.runner._pg_timeouts import (
    CONNECT_TIMEOUT_S,
    STATEMENT_TIMEOUT_S,
    Deadline,
    NoAnswerError,
    connect_params,
)
from evaltrace.runner.rundir import load_record
from evaltrace.runner.sqlite_store import StoredRun
from evaltrace.schema import EvaluationResult, RunSummary, Trace

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

__all__ = ["SCHEMA_MIGRATIONS", "PostgresRunStore", "PostgresStoreError", "redact_dsn"]

# Any constant works: it only has to be the same for every evaltrace process (pg_advisory_xact_lock(bigint)).
_MIGRATION_LOCK = 0x65766C74726163  # "evltrac"

SCHEMA_MIGRATIONS: tuple[tuple[int, str, tuple[LiteralString, ...]], ...] = (
    (
        1,
        "runs, traces and results",
        (
            """CREATE TABLE IF NOT EXISTS evaltrace_runs (
                run_id text PRIMARY KEY,
                eval_name text NOT NULL,
                started_at timestamptz NOT NULL,
                finished_at timestamptz NOT NULL,
                config_hash text NOT NULL,
                summary jsonb NOT NULL
            )""",
            """CREATE TABLE IF NOT EXISTS evaltrace_traces (
                run_id text NOT NULL REFERENCES evaltrace_runs (run_id) ON DELETE CASCADE,
                case_id text NOT NULL,
                variant_name text NOT NULL,
                data jsonb NOT NULL,
                PRIMARY KEY (run_id, variant_name, case_id)
            )""",
            """CREATE TABLE IF NOT EXISTS evaltrace_results (
                run_id text NOT NULL REFERENCES evaltrace_runs (run_id) ON DELETE CASCADE,
                case_id text NOT NULL,
                variant_name text NOT NULL,
                evaluator text NOT NULL,
                data jsonb NOT NULL,
                PRIMARY KEY (run_id, variant_name, case_id, evaluator)
            )""",
        ),
    ),
    (
        2,
        "run namespace (JSONB, GIN index) and eval index",
        (
            "ALTER TABLE evaltrace_runs ADD COLUMN IF NOT EXISTS run_namespace jsonb NOT NULL DEFAULT '{}'::jsonb",
            """CREATE INDEX IF NOT EXISTS evaltrace_runs_namespace_idx
                ON evaltrace_runs USING gin (run_namespace jsonb_path_ops)""",
            "CREATE INDEX IF NOT EXISTS evaltrace_runs_eval_idx ON evaltrace_runs (eval_name, run_id)",
        ),
    ),
    (
        3,
        "runs.finished (false while a run arrives cell by cell)",
        ("ALTER TABLE evaltrace_runs ADD COLUMN IF NOT EXISTS finished boolean NOT NULL DEFAULT true",),
    ),
)
"""(version, description, statements), applied in order; a version's statements are idempotent."""

SCHEMA_VERSION = SCHEMA_MIGRATIONS[-1][0]


class PostgresStoreError(EvaltraceError):
    """The PostgreSQL store cannot be used: psycopg is missing or the server cannot be reached."""


def redact_dsn(dsn: str) -> str:
    """Return ``dsn`` without its password, for messages (URL or ``key=value`` form)."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:  # no psycopg: nothing will connect either; say as little as possible
        return dsn.split("@")[-1] if "@" in dsn else dsn
    try:
        params = conninfo_to_dict(dsn)
    except Exception:  # an unparsable dsn fails on connect with its own message
        return "<unparsable dsn>"
    params.pop("password", None)
    return make_conninfo("", **params)


def _namespace(namespace: Mapping[str, str] | None) -> str:
    return json.dumps({str(k): str(v) for k, v in (namespace or {}).items()}, sort_keys=True)


_CHUNK_ROWS = 200
"""Rows per executemany: each chunk is one guarded wait, so the deadline bounds a wait, not the size of a run."""


def _chunks(rows: list[T]) -> Iterator[list[T]]:
    for start in range(0, len(rows), _CHUNK_ROWS):
        yield rows[start : start + _CHUNK_ROWS]


def _load(model: type[Any], value: Any) -> Any:
    # JSONB comes back parsed; load_record migrates rows written by an older release, as for the jsonl files.
    return load_record(model, json.dumps(value))


class PostgresRunStore:
    """Runs in a PostgreSQL database; use as a context manager or call :meth:`close`.

    Same methods as :class:`~evaltrace.runner.SqliteRunStore`.

    Example:
        >>> with PostgresRunStore("postgresql://user@db/evals") as store:  # doctest: +SKIP
        ...     store.list_runs(run_namespace={"project": "bot", "branch": "main"})
    """

    def __init__(
        self,
        dsn: str,
        *,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        statement_timeout_s: float = STATEMENT_TIMEOUT_S,
    ) -> None:
        """Connect to ``dsn`` and create or migrate the tables.

        Args:
            dsn: Connection string (URL or ``key=value``).
            connect_timeout_s: Seconds to connect, unless the dsn sets ``connect_timeout``.
            statement_timeout_s: Seconds per statement, unless the dsn's ``options`` set ``statement_timeout``;
                the client stops waiting for any answer 2 s later (a frozen server cannot cancel anything).

        Raises:
            PostgresStoreError: psycopg is not installed, or the server cannot be reached or does not answer.
        """
        try:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict, make_conninfo
        except ImportError:
            raise PostgresStoreError("the PostgreSQL store needs psycopg: pip install 'evaltrace[postgres]'") from None
        self.where = f"postgres {redact_dsn(dsn)}"
        try:
            params = conninfo_to_dict(dsn)
            timeouts = connect_params(params, connect_timeout_s, statement_timeout_s)
            self._db: psycopg.Connection[Any] = psycopg.connect(make_conninfo("", **params))
        except psycopg.Error as exc:
            raise PostgresStoreError(f"{self.where}: cannot connect: {str(exc).strip()}") from None
        self._deadline = Deadline(timeouts.answer_s, lambda: self._db.pgconn.socket)
        try:
            with self._answer():
                if timeouts.set_statement_timeout_ms is not None:
                    # Session-wide, committed at once: it must hold for the migration's statements too.
                    self._db.execute(
                        "SELECT set_config('statement_timeout', %s, false)", (f"{timeouts.set_statement_timeout_ms}ms",)
                    )
                    self._db.commit()
                self._migrate()
        except BaseException:
            self._db.close()
            raise

    @contextmanager
    def _answer(self) -> Iterator[None]:
        """Guard one call to the server: one that stays unanswered past the deadline is a PostgresStoreError."""
        try:
            with self._deadline.answer_within():
                yield
        except NoAnswerError as exc:
            raise PostgresStoreError(
                f"{self.where}: {exc}; the server is frozen, overloaded or unreachable (connection abandoned)"
            ) from None

    def _migrate(self) -> None:
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            self._db.execute(
                """CREATE TABLE IF NOT EXISTS evaltrace_schema_migrations (
                    version integer PRIMARY KEY,
                    description text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )"""
            )
            applied = {row[0] for row in self._db.execute("SELECT version FROM evaltrace_schema_migrations")}
            for version, description, statements in SCHEMA_MIGRATIONS:
                if version in applied:
                    continue
                for statement in statements:
                    self._db.execute(statement)
                self._db.execute(
                    "INSERT INTO evaltrace_schema_migrations (version, description) VALUES (%s, %s)",
                    (version, description),
                )

    def schema_versions(self) -> list[int]:
        """Return the schema versions applied to this database, in order."""
        with self._answer():
            rows = self._db.execute("SELECT version FROM evaltrace_schema_migrations ORDER BY version").fetchall()
            self._db.commit()
        return [row[0] for row in rows]

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> PostgresRunStore:
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
        """Insert or update a run in one transaction; its results are replaced, stored traces kept (write-once).

        Args:
            summary: The run's summary.
            traces: Its traces.
            results: Its results (replace any stored for the run, as a re-evaluation does).
            eval_name: The eval's name.
            run_namespace: Namespace of the run; None keeps the stored one (empty for a new run).
        """
        run_id = summary.run_id
        trace_rows = [(run_id, t.case_id, t.variant_name, t.model_dump_json()) for t in traces]
        result_rows = [(run_id, r.case_id, r.variant_name, r.evaluator, r.model_dump_json()) for r in results]
        # One transaction, each round trip guarded on its own: a big run is many short waits, never one long one.
        try:
            with self._db.cursor() as cur:
                with self._answer():
                    cur.execute(
                        """INSERT INTO evaltrace_runs
                               (run_id, eval_name, started_at, finished_at, config_hash, summary, run_namespace)
                           VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb)
                           ON CONFLICT (run_id) DO UPDATE SET eval_name = excluded.eval_name,
                               finished_at = excluded.finished_at, config_hash = excluded.config_hash,
                               summary = excluded.summary, finished = true,
                               run_namespace = CASE WHEN %s THEN excluded.run_namespace
                                                    ELSE evaltrace_runs.run_namespace END""",
                        (
                            run_id,
                            eval_name,
                            summary.started_at,
                            summary.finished_at,
                            summary.config_hash,
                            summary.model_dump_json(),
                            _namespace(run_namespace),
                            run_namespace is not None,
                        ),
                    )
                self._insert_traces(cur, trace_rows)
                with self._answer():
                    cur.execute("DELETE FROM evaltrace_results WHERE run_id = %s", (run_id,))
                self._upsert_results(cur, result_rows)
            with self._answer():
                self._db.commit()
        except BaseException:
            self._rollback()
            raise

    def begin_run(self, summary: RunSummary, *, eval_name: str, run_namespace: Mapping[str, str] | None = None) -> None:
        """Record a run that starts arriving cell by cell (``finished`` false), unless the run is stored already.

        Args:
            summary: A placeholder summary (id, start, config hash, cases); :meth:`save_run` replaces it.
            eval_name: The eval's name.
            run_namespace: Namespace of the run (None: empty).
        """
        try:
            with self._answer():
                self._db.execute(
                    """INSERT INTO evaltrace_runs
                           (run_id, eval_name, started_at, finished_at, config_hash, summary, run_namespace, finished)
                       VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, false) ON CONFLICT (run_id) DO NOTHING""",
                    (
                        summary.run_id,
                        eval_name,
                        summary.started_at,
                        summary.finished_at,
                        summary.config_hash,
                        summary.model_dump_json(),
                        _namespace(run_namespace),
                    ),
                )
                self._db.commit()
        except BaseException:
            self._rollback()
            raise

    def save_cells(self, run_id: str, traces: Sequence[Trace], results: Sequence[EvaluationResult]) -> None:
        """Add finished cells' traces and results to a run begun with :meth:`begin_run`, in one transaction.

        A stored trace is kept (write-once) and a result replaces the stored one of its key: a cell saved again
        (a resumed run) adds nothing twice.
        """
        trace_rows = [(run_id, t.case_id, t.variant_name, t.model_dump_json()) for t in traces]
        result_rows = [(run_id, r.case_id, r.variant_name, r.evaluator, r.model_dump_json()) for r in results]
        try:
            with self._db.cursor() as cur:
                self._insert_traces(cur, trace_rows)
                self._upsert_results(cur, result_rows)
            with self._answer():
                self._db.commit()
        except BaseException:
            self._rollback()
            raise

    def _insert_traces(self, cur: Any, rows: list[tuple[str, str, str, str]]) -> None:
        """Insert trace rows, keeping those stored already (write-once), a guarded wait per chunk."""
        for chunk in _chunks(rows):
            with self._answer():
                cur.executemany(
                    """INSERT INTO evaltrace_traces (run_id, case_id, variant_name, data)
                       VALUES (%s, %s, %s, %s::jsonb) ON CONFLICT DO NOTHING""",
                    chunk,
                )

    def _upsert_results(self, cur: Any, rows: list[tuple[str, str, str, str, str]]) -> None:
        """Insert result rows, each replacing the stored one of its key, a guarded wait per chunk."""
        for chunk in _chunks(rows):
            with self._answer():
                cur.executemany(
                    """INSERT INTO evaltrace_results (run_id, case_id, variant_name, evaluator, data)
                       VALUES (%s, %s, %s, %s, %s::jsonb)
                       ON CONFLICT (run_id, variant_name, case_id, evaluator) DO UPDATE SET data = excluded.data""",
                    chunk,
                )

    def _rollback(self) -> None:
        """End a failed transaction, unless the connection is gone (the server then discards it)."""
        if self._deadline.cut or self._db.closed:
            return
        try:
            with self._answer():
                self._db.rollback()
        except Exception:  # the save's own error is the one to report
            pass

    def list_runs(
        self, *, eval_name: str | None = None, run_namespace: Mapping[str, str] | None = None
    ) -> list[StoredRun]:
        """Return stored runs, newest first, optionally of one eval and within a namespace.

        Args:
            eval_name: Only runs of this eval.
            run_namespace: Only runs whose namespace holds every given key with the given value (``@>``).
        """
        with self._answer():
            rows = self._db.execute(
                """SELECT run_id, eval_name, summary, run_namespace, finished FROM evaltrace_runs
                   WHERE (%s::text IS NULL OR eval_name = %s) AND run_namespace @> %s::jsonb
                   ORDER BY run_id COLLATE "C" DESC""",
                (eval_name, eval_name, _namespace(run_namespace)),
            ).fetchall()
            self._db.commit()  # end the read transaction: a long-lived store must not pin old row versions
        return [self._stored(row) for row in rows]

    def get_run(self, run_id: str) -> StoredRun:
        """Return one run.

        Raises:
            SchemaError: No such run in the database.
        """
        with self._answer():
            row = self._db.execute(
                "SELECT run_id, eval_name, summary, run_namespace, finished FROM evaltrace_runs WHERE run_id = %s",
                (run_id,),
            ).fetchone()
            self._db.commit()
        if row is None:
            raise SchemaError(f"{self.where}: no run {run_id!r}")
        return self._stored(row)

    @staticmethod
    def _stored(row: tuple[Any, ...]) -> StoredRun:
        return StoredRun(row[0], row[1], RunSummary.model_validate(row[2]), dict(row[3] or {}), bool(row[4]))

    def traces(self, run_id: str) -> list[Trace]:
        """Return a run's traces (variant, then case order)."""
        with self._answer():
            rows = self._db.execute(
                "SELECT data FROM evaltrace_traces WHERE run_id = %s"
                ' ORDER BY variant_name COLLATE "C", case_id COLLATE "C"',
                (run_id,),
            ).fetchall()
            self._db.commit()
        return [_load(Trace, row[0]) for row in rows]

    def results(self, run_id: str) -> list[EvaluationResult]:
        """Return a run's evaluation results."""
        with self._answer():
            rows = self._db.execute(
                "SELECT data FROM evaltrace_results WHERE run_id = %s"
                ' ORDER BY variant_name COLLATE "C", case_id COLLATE "C", evaluator COLLATE "C"',
                (run_id,),
            ).fetchall()
            self._db.commit()
        return [_load(EvaluationResult, row[0]) for row in rows]
