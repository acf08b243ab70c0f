"""A run's finished cells written into its SQLite/PostgreSQL stores as they finish (``run --engine ray``).

The run directory stays the record a resume reads: each cell goes to ``traces.jsonl`` / ``results.jsonl`` first,
then to every database store, so a store never holds a cell the run directory lacks (a cell killed in between is
in the run directory only, not run again, and reaches the store with the run's end). A resume sends the cells
saved before it once more when it starts: a trace stored already is kept and a result replaces its own row, so
nothing is stored twice.

A store that fails mid-run is dropped from the stream with a note; the run goes on, and the full save at the
run's end (:func:`~evaltrace.runner.stores.save_to_stores`) tries it again and reports it as before (exit 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evaltrace.runner.stores import RunStore, StoreSpec, open_store, store_namespace
from evaltrace.schema import EvaluationResult, RunSummary, Trace

__all__ = ["CellStream"]


class CellStream:
    """Streams one run's cells into its database stores; use as a context manager.

    Args:
        specs: The run's stores (``local_files`` entries are skipped).
        placeholder: The run's summary until it ends (id, start, config hash, cases; no variants).
        eval_name: The eval's name.
        run_namespace: The command line's namespace (its keys win over a store's ``run_namespace``).
    """

    def __init__(
        self,
        specs: Sequence[StoreSpec],
        placeholder: RunSummary,
        *,
        eval_name: str,
        run_namespace: Mapping[str, str] | None,
    ) -> None:
        self._specs = [s for s in specs if s.type != "local_files"]
        self._placeholder = placeholder
        self._eval_name = eval_name
        self._namespace = run_namespace
        self._open: list[tuple[StoreSpec, RunStore]] = []
        self.notes: list[str] = []
        """One note per store that stopped receiving cells (it is tried again, whole, at the run's end)."""

    def start(self, traces: Sequence[Trace], results: Sequence[EvaluationResult]) -> None:
        """Open every store, record the run as begun, and send the cells saved before (a resume's)."""
        for spec in self._specs:
            store: RunStore | None = None
            try:
                store = open_store(spec)
                namespace = store_namespace(spec, self._namespace)
                store.begin_run(self._placeholder, eval_name=self._eval_name, run_namespace=namespace)
                if traces or results:
                    store.save_cells(self._placeholder.run_id, traces, results)
            # Broad on purpose, as save_to_stores: a store's failure must never stop or lose the run.
            except Exception as exc:
                self._drop(spec, store, exc)
            else:
                self._open.append((spec, store))

    def cell(self, trace: Trace, results: Sequence[EvaluationResult]) -> None:
        """Save one finished cell (already in the run directory) to every store still open."""
        for spec, store in list(self._open):
            try:
                store.save_cells(self._placeholder.run_id, [trace], results)
            except Exception as exc:  # see start()
                self._open.remove((spec, store))
                self._drop(spec, store, exc)

    def _drop(self, spec: StoreSpec, store: RunStore | None, exc: Exception) -> None:
        self.notes.append(
            f"{spec.describe()} ({spec.entry}) stopped receiving cells as they finished:"
            f" {str(exc).strip() or type(exc).__name__}; the whole run is saved to it at the end"
        )
        if store is not None:
            try:
                store.close()
            except Exception:  # the store's own error is the one worth a note
                pass

    def close(self) -> None:
        """Close every store."""
        for _, store in self._open:
            try:
                store.close()
            except Exception:  # closing cannot lose a cell: each was committed when saved
                pass
        self._open = []

    def __enter__(self) -> CellStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
