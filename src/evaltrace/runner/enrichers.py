"""TraceEnrichers: add to each case's trace what only another system knows, before it is persisted.

An enricher is any object with a ``name`` and ``enrich(trace) -> Trace | None`` (a function ``f(trace)`` works
too, named after itself): it returns the enriched trace (or None for "nothing to add"), typically reading the
upstream platform's copy of the trace by ``trace.extra["trace_id"]`` (Langfuse, Phoenix) to add its cost, scores
or tags. eval.yaml lists them under ``enrichers:`` (``{import: "module:object", name?, timeout_s?, <options>}``;
a class is built with the options); ``run_eval(enrichers=[...])`` takes objects.

Enrichers run in order, after a cell's trace is complete and before it is appended to traces.jsonl (traces are
write-once: evaluators judge the enriched trace). Enrichment is never fatal: an enricher that raises, runs past
its ``timeout_s`` (it is abandoned on a daemon thread), returns something that is not a Trace, or changes which
cell the trace is (run, case, variant, times) leaves the trace as it was and adds one structured entry to
``trace.extra["enrichment_errors"]``: ``{"enricher": <name>, "error": "<type>: <message>"}``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evaltrace._internal.daemon_pool import DaemonExecutor
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.import_paths import import_dirs, import_object
from evaltrace.schema import Trace

__all__ = ["ENRICHMENT_ERRORS_KEY", "ConfiguredEnricher", "Enrichment", "TraceEnricher", "build_enrichers"]

ENRICHMENT_ERRORS_KEY = "enrichment_errors"
_IDENTITY = ("run_id", "case_id", "variant_name", "started_at", "finished_at")
"""What an enricher may not change: which cell the trace is, and when it ran (latency is the runner's)."""


@runtime_checkable
class TraceEnricher(Protocol):
    """Adds to a trace what another system knows about it (see the module docstring)."""

    name: str

    def enrich(self, trace: Trace) -> Trace | None:
        """Return the enriched trace, or None to leave it as it is; raising is recorded, never fatal."""
        ...


@dataclass(frozen=True)
class ConfiguredEnricher:
    """An enricher and its per-trace timeout (None: none)."""

    enricher: TraceEnricher
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        # A function f(trace) is an enricher too (``run_eval(enrichers=[f])``), named after itself.
        if not callable(getattr(self.enricher, "enrich", None)):
            object.__setattr__(self, "enricher", _as_enricher(self.enricher, None))

    @property
    def name(self) -> str:
        """The name its errors carry."""
        return str(getattr(self.enricher, "name", "") or type(self.enricher).__name__)


class _FunctionEnricher:
    def __init__(self, function: Any, name: str | None) -> None:
        self._function = function
        self.name: str = name or str(getattr(function, "__name__", "enricher"))

    def enrich(self, trace: Trace) -> Trace | None:
        result: Trace | None = self._function(trace)
        return result


def _as_enricher(value: Any, name: str | None) -> TraceEnricher:
    if callable(getattr(value, "enrich", None)):
        if name is not None:
            value.name = name
        enricher: TraceEnricher = value
        return enricher
    if callable(value):
        return _FunctionEnricher(value, name)
    raise TypeError(f"{type(value).__name__} has no enrich(trace) method and is not a function")


def build_enrichers(entries: Any, path: Path, pythonpath: Sequence[str] = ()) -> list[ConfiguredEnricher]:
    """Build eval.yaml's ``enrichers:`` entries.

    Raises:
        RunConfigError: An entry is malformed, cannot be imported or built (named by its index).
    """
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise RunConfigError(path, "enrichers", "expected a list of {import: module:object, ...}")
    dirs = import_dirs(path, path.parent, pythonpath)
    built: list[ConfiguredEnricher] = []
    for index, entry in enumerate(entries):
        where = f"enrichers[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("import"), str):
            raise RunConfigError(path, where, "expected a mapping with import: module:object")
        options = {k: v for k, v in entry.items() if k not in ("import", "name", "timeout_s")}
        name, timeout = entry.get("name"), entry.get("timeout_s")
        if name is not None and not isinstance(name, str):
            raise RunConfigError(path, f"{where}.name", f"expected a string, got {name!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise RunConfigError(path, f"{where}.timeout_s", f"expected a number of seconds > 0, got {timeout!r}")
        try:
            target = import_object(entry["import"], dirs)
        except ValueError as exc:
            raise RunConfigError(path, f"{where}.import", str(exc)) from None
        try:
            made = target(**options) if inspect.isclass(target) else target
            if options and not inspect.isclass(target):
                raise TypeError(f"options {sorted(options)} need a class, and {entry['import']} is not one")
            enricher = _as_enricher(made, name)
        except (TypeError, ValueError) as exc:
            raise RunConfigError(path, where, f"cannot build the enricher: {exc}") from None
        built.append(ConfiguredEnricher(enricher, float(timeout) if timeout is not None else None))
    return built


class Enrichment:
    """Runs a run's enrichers over each trace (on daemon threads, so a hung enricher never holds the run)."""

    def __init__(self, enrichers: Sequence[ConfiguredEnricher]) -> None:
        self.enrichers = list(enrichers)
        self._pool = DaemonExecutor(max(1, len(self.enrichers)), thread_name_prefix="evaltrace-enrich")

    async def enrich(self, trace: Trace) -> Trace:
        """``trace`` after every enricher, each failure recorded in ``extra["enrichment_errors"]``."""
        for item in self.enrichers:
            try:
                result = await self._call(item, trace)
                if result is None:
                    continue
                if not isinstance(result, Trace):
                    raise TypeError(f"returned {type(result).__name__}, not a Trace")
                changed = [key for key in _IDENTITY if getattr(result, key) != getattr(trace, key)]
                if changed:
                    raise ValueError(f"changed {', '.join(changed)}: an enricher adds to a trace, it is the same cell")
                trace = Trace.model_validate(result.model_dump(exclude={"latency_ms"}))
            except TimeoutError:
                trace = _with_error(trace, item.name, f"TimeoutError: no answer within {item.timeout_s:g} s")
            # Broad on purpose: enrichment is never fatal, whatever the enricher raised.
            except Exception as exc:
                trace = _with_error(trace, item.name, f"{type(exc).__name__}: {exc}")
        return trace

    async def _call(self, item: ConfiguredEnricher, trace: Trace) -> Any:
        future = self._pool.submit(item.enricher.enrich, trace)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), item.timeout_s)
        except BaseException:
            if not future.done():  # timed out while it runs: its thread is let go and replaced
                self._pool.abandon(future)
            raise

    def close(self) -> None:
        """Let the threads go (never joined: a hung enricher's thread is a daemon)."""
        self._pool.shutdown(wait=False)


def _with_error(trace: Trace, name: str, error: str) -> Trace:
    errors = list(trace.extra.get(ENRICHMENT_ERRORS_KEY) or [])
    errors.append({"enricher": name, "error": error})
    return trace.model_copy(update={"extra": {**trace.extra, ENRICHMENT_ERRORS_KEY: errors}})
