"""Evaluators of an eval.yaml: built from their entries, then run over traces with each crash kept in its cell.

An entry is ``{name: <catalogue name>, **options}`` or ``{import: "module:object", **options}``. Reserved keys:
``args`` (positional constructor arguments, e.g. tool names), ``as`` (the evaluator's name in results, needed
when one evaluator appears twice) and ``timeout_s`` (per evaluation). An imported object that already has
``evaluate`` is used as is; a class is instantiated with the options; another callable is wrapped with
``@evaltrace.evaluator`` (the options are its keyword arguments, e.g. ``threshold``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltrace.evaluation import Evaluator, RunOptions, arun_evaluator, evaluator
from evaltrace.evaluators import create_evaluator
from evaltrace.runner.adapters import import_object
from evaltrace.runner.config import expand_env
from evaltrace.runner.errors import RunConfigError
from evaltrace.schema import EvalCase, EvaluationResult, Trace

__all__ = ["ConfiguredEvaluator", "build_evaluators", "evaluate_traces"]

_RESERVED = ("name", "import", "args", "as", "timeout_s")


@dataclass(frozen=True)
class ConfiguredEvaluator:
    """An evaluator and how it runs.

    Attributes:
        evaluator: The evaluator.
        timeout_s: Per-evaluation timeout (None: none).
    """

    evaluator: Evaluator
    timeout_s: float | None = None


def _instantiate(entry: dict[str, Any], path: Path, where: str, base_dir: Path) -> Any:
    args = entry.get("args", [])
    if not isinstance(args, list):
        raise RunConfigError(path, f"{where}.args", "expected a list of positional arguments")
    options = {k: v for k, v in entry.items() if k not in _RESERVED}
    if "name" in entry:
        return create_evaluator(str(entry["name"]), *args, **options)
    obj = import_object(str(entry["import"]), base_dir)
    if hasattr(obj, "evaluate") and not inspect.isclass(obj):
        if args or options:
            raise ValueError("an imported evaluator instance takes no options")
        return obj
    if inspect.isclass(obj):
        return obj(*args, **options)
    if callable(obj):
        return evaluator(**options)(obj)
    raise ValueError(f"{entry['import']!r} is neither an evaluator, a class nor a function")


def _build_one(entry: dict[str, Any], path: Path, index: int, base_dir: Path) -> ConfiguredEvaluator:
    where = f"evaluators[{index}]"
    expanded = expand_env(entry, path, where)
    try:
        built = _instantiate(expanded, path, where, base_dir)
    except RunConfigError:
        raise
    except (KeyError, TypeError, ValueError, ImportError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        raise RunConfigError(path, where, f"cannot build the evaluator: {message}") from None
    if not callable(getattr(built, "evaluate", None)):
        raise RunConfigError(path, where, f"{type(built).__name__} has no evaluate(trace, case) method")
    if "as" in expanded:
        try:
            built.name = str(expanded["as"])
        except AttributeError:
            raise RunConfigError(path, f"{where}.as", f"{type(built).__name__} does not allow renaming") from None
    timeout = expanded.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
        raise RunConfigError(path, f"{where}.timeout_s", f"expected a positive number, got {timeout!r}")
    return ConfiguredEvaluator(built, None if timeout is None else float(timeout))


def build_evaluators(
    entries: Sequence[dict[str, Any]], path: Path, *, base_dir: Path | None = None
) -> list[ConfiguredEvaluator]:
    """Build every evaluator of a config.

    Args:
        entries: The ``evaluators`` entries.
        path: The config file (named in error messages).
        base_dir: Directory that ``import:`` modules are found in (default: the config file's directory).

    Returns:
        The evaluators, in entry order.

    Raises:
        RunConfigError: An entry cannot be built, or two evaluators share a name.
    """
    built: list[ConfiguredEvaluator] = []
    for index, entry in enumerate(entries):
        item = _build_one(entry, path, index, base_dir if base_dir is not None else path.parent)
        name = str(getattr(item.evaluator, "name", ""))
        if any(str(getattr(b.evaluator, "name", "")) == name for b in built):
            raise RunConfigError(path, f"evaluators[{index}]", f"duplicate evaluator name {name!r}; add 'as: <name>'")
        built.append(item)
    return built


async def evaluate_traces(
    traces: Sequence[Trace],
    cases: Sequence[EvalCase],
    evaluators: Sequence[ConfiguredEvaluator],
    *,
    concurrency: int,
    on_done: Callable[[], None] | None = None,
) -> list[EvaluationResult]:
    """Run every evaluator on every trace; one result per (trace, evaluator), in trace then evaluator order.

    A crashing, hanging or misbehaving evaluator yields a ``failed`` result for its cell only.

    Args:
        traces: The traces (read from traces.jsonl).
        cases: The run's cases; a trace whose case is missing is evaluated with ``case=None``.
        evaluators: The evaluators.
        concurrency: How many evaluations run at once.
        on_done: Called after each trace's evaluations (progress).

    Returns:
        The results.
    """
    by_id = {c.id: c for c in cases}
    limit = asyncio.Semaphore(concurrency)
    pool = concurrent.futures.ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="evaltrace-run-eval")

    async def one(trace: Trace, item: ConfiguredEvaluator) -> EvaluationResult:
        async with limit:
            options = RunOptions(timeout_s=item.timeout_s)
            return await arun_evaluator(item.evaluator, trace, by_id.get(trace.case_id), options=options, executor=pool)

    async def per_trace(trace: Trace) -> list[EvaluationResult]:
        results = await asyncio.gather(*(one(trace, item) for item in evaluators))
        if on_done is not None:
            on_done()
        return list(results)

    try:
        nested = await asyncio.gather(*(per_trace(t) for t in traces))
    finally:
        # A timed-out sync evaluator keeps its thread; do not wait for it.
        pool.shutdown(wait=False, cancel_futures=True)
    return [result for group in nested for result in group]
