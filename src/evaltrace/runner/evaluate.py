"""Evaluators of an eval.yaml: built from their entries, then run over traces with each crash kept in its cell.

An entry is ``{name: <catalogue name>, **options}`` or ``{import: "module:object", **options}``. Reserved keys:
``args`` (positional constructor arguments, e.g. tool names), ``as`` (the evaluator's name in results, needed
when one evaluator appears twice) and ``timeout_s`` (per evaluation). An imported object that already has
``evaluate`` is used as is; a class is instantiated with the options; another callable is wrapped with
``@evaltrace.evaluator`` (the options are its keyword arguments, e.g. ``threshold``).

User evaluators cannot take the run down: sync ones run on a :class:`DaemonExecutor` of their own (daemon threads;
one stuck past its ``timeout_s`` is abandoned, never joined, and costs only its own evaluator's threads), async
ones on their own event loop (:mod:`evaltrace.runner._loops`, abandoned when blocked); ``SystemExit`` and
``KeyboardInterrupt`` raised by either become a failed result naming them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltrace._internal.daemon_pool import DaemonExecutor
from evaltrace.evaluation import Evaluator, RunOptions, arun_evaluator, evaluator
from evaltrace.evaluation.runner import is_async_evaluator
from evaltrace.evaluators import create_evaluator
from evaltrace.runner._loops import OnOwnLoop
from evaltrace.runner.adapters import import_object
from evaltrace.runner.config import expand_env
from evaltrace.runner.errors import RunConfigError
from evaltrace.schema import EvalCase, EvaluationResult, Trace

__all__ = ["ConfiguredEvaluator", "ResultKey", "build_evaluators", "evaluate_traces", "result_key"]

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

    @property
    def name(self) -> str:
        """The name results carry (``as:`` if given)."""
        return str(getattr(self.evaluator, "name", "") or type(self.evaluator).__name__)


ResultKey = tuple[str, str, str]
"""(case id, variant name, evaluator name): one result each."""


def result_key(result: EvaluationResult) -> ResultKey:
    """The key of a result."""
    return (result.case_id, result.variant_name, result.evaluator)


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


class _Runners:
    """Where each evaluator runs: its own daemon pool (sync) or its own event loop (async)."""

    def __init__(self, evaluators: Sequence[ConfiguredEvaluator], concurrency: int) -> None:
        self.items: list[tuple[ConfiguredEvaluator, Evaluator, DaemonExecutor | None]] = []
        for item in evaluators:
            if is_async_evaluator(item.evaluator):
                self.items.append((item, OnOwnLoop(item.evaluator), None))
            else:
                pool = DaemonExecutor(max(1, concurrency), thread_name_prefix=f"evaltrace-eval-{item.name}")
                self.items.append((item, item.evaluator, pool))

    def close(self) -> None:
        # Nothing is joined: a stuck evaluator's thread or loop is a daemon and never delays the exit.
        for _, runner, pool in self.items:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
            if isinstance(runner, OnOwnLoop):
                runner.loop.close()


async def evaluate_traces(
    traces: Sequence[Trace],
    cases: Sequence[EvalCase],
    evaluators: Sequence[ConfiguredEvaluator],
    *,
    concurrency: int,
    on_done: Callable[[], None] | None = None,
    done: Collection[ResultKey] = (),
    on_result: Callable[[EvaluationResult], None] | None = None,
) -> list[EvaluationResult]:
    """Run every evaluator on every trace; one result per (trace, evaluator), in trace then evaluator order.

    A crashing, hanging, exiting or loop-blocking evaluator yields a ``failed`` result for its cell only. Each
    result carries its configured name (``as:``), whatever name the evaluator put in it.

    Args:
        traces: The traces (read from traces.jsonl).
        cases: The run's cases; a trace whose case is missing is evaluated with ``case=None``.
        evaluators: The evaluators.
        concurrency: How many evaluations run at once.
        on_done: Called after each trace's evaluations (progress).
        done: Keys of results that exist already (a resumed run): those evaluations are not run again.
        on_result: Called with each result as soon as it exists, on the event loop's thread (to persist it).

    Returns:
        The new results (those in ``done`` left out).
    """
    by_id = {c.id: c for c in cases}
    limit = asyncio.Semaphore(concurrency)
    runners = _Runners(evaluators, concurrency)

    async def one(trace: Trace, item: ConfiguredEvaluator, runner: Evaluator, pool: Any) -> EvaluationResult:
        async with limit:
            options = RunOptions(timeout_s=item.timeout_s)
            case = by_id.get(trace.case_id)
            result = await arun_evaluator(runner, trace, case, options=options, executor=pool)
        if result.evaluator != item.name:
            result = result.stamped(evaluator=item.name)
        if on_result is not None:
            on_result(result)
        return result

    async def per_trace(trace: Trace) -> list[EvaluationResult]:
        todo = [
            (item, runner, pool)
            for item, runner, pool in runners.items
            if (trace.case_id, trace.variant_name, item.name) not in done
        ]
        results = await asyncio.gather(*(one(trace, *entry) for entry in todo))
        if on_done is not None:
            on_done()
        return list(results)

    try:
        nested = await asyncio.gather(*(per_trace(t) for t in traces))
    finally:
        runners.close()
    return [result for group in nested for result in group]
