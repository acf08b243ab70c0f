"""The ``evaluation`` block of eval.yaml (an EvaluationConfig) and the evaluation records a run writes.

Consumed: the block says which evaluators run (``evaluators``, by result name; default all), their options
(``evaluator_configs``, over the entry's own), whether evaluations run in parallel (``parallel_execution``: false
runs one at a time), the timeout of an evaluation whose entry has none (``timeout_ms``) and how failed
evaluations are retried (``retry_config``; none without it). ``summary_method`` and ``weights`` make each case's
summary score.

Produced, next to results.jsonl and rebuilt with the summary (run, resume, re-evaluate, merge, summarize):

* ``evaluations.jsonl``: one :class:`~evaltrace.schema.MultiEvaluationResult` per (case, system), targeting the
  case's OTel trace id, its evaluations typed by kind (:meth:`EvaluationResult.to_evaluation`);
* ``evaluation_batch.json``: the run's :class:`~evaltrace.schema.EvaluationBatch` (every evaluation, the
  evaluator versions, the total evaluation time);
* ``evaluation_config.json``: the :class:`~evaltrace.schema.EvaluationConfig` the run followed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltrace._internal.private_files import write_private_text
from evaltrace.runner.config import _validated, mask_secrets
from evaltrace.runner.config_models import EvaluationBlock
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.evaluator_entries import ConfiguredEvaluator
from evaltrace.schema import (
    EvaluationBatch,
    EvaluationConfig,
    EvaluationResult,
    MultiEvaluationResult,
    RetryConfig,
    Trace,
)
from evaltrace.schema.evaluation import BatchMetadata

__all__ = [
    "BATCH_FILE",
    "EVALUATIONS_FILE",
    "EVALUATION_CONFIG_FILE",
    "EvaluationPlan",
    "write_evaluation_records",
]

EVALUATIONS_FILE = "evaluations.jsonl"
BATCH_FILE = "evaluation_batch.json"
EVALUATION_CONFIG_FILE = "evaluation_config.json"

_NOT_OPTIONS = ("name", "type", "as", "import")
"""Entry keys ``evaluator_configs`` may not change: they say which evaluator it is, not how it runs."""


def _entry_name(entry: dict[str, Any]) -> str | None:
    value = entry.get("as") or entry.get("name")
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class EvaluationPlan:
    """How a run's evaluations are chosen, configured and run (the ``evaluation`` block; None: the defaults)."""

    block: EvaluationBlock | None
    path: Path

    @classmethod
    def of(cls, raw: dict[str, Any], path: Path) -> EvaluationPlan:
        """Read the ``evaluation`` block of a raw eval.yaml.

        Raises:
            RunConfigError: The block is malformed (the message names the key).
        """
        data = raw.get("evaluation")
        return cls(None if data is None else _validated(EvaluationBlock, data, path, "evaluation"), path)

    def entries(self, entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The evaluator entries with ``evaluator_configs`` applied (before the evaluators are built).

        Raises:
            RunConfigError: A config names no entry, or changes what an entry is (``type``, ``import``, ...).
        """
        if self.block is None:
            return [dict(e) for e in entries]
        named = {name: i for i, e in enumerate(entries) if (name := _entry_name(e)) is not None}
        out = [dict(e) for e in entries]
        for name, options in self.block.evaluator_configs.items():
            where = f"evaluation.evaluator_configs.{name}"
            if name not in named:
                raise RunConfigError(self.path, where, f"no evaluator is named {name!r}; named: {', '.join(named)}")
            fixed = sorted(set(options) & set(_NOT_OPTIONS))
            if fixed:
                raise RunConfigError(
                    self.path, f"{where}.{fixed[0]}", "says which evaluator it is; set it on the entry"
                )
            out[named[name]].update(options)
        return out

    def select(self, built: Sequence[ConfiguredEvaluator]) -> list[ConfiguredEvaluator]:
        """The evaluators to run (``evaluators``), each without a timeout given ``timeout_ms``.

        Raises:
            RunConfigError: ``evaluators`` names an evaluator the config does not have.
        """
        if self.block is None:
            return list(built)
        chosen = list(built)
        if self.block.evaluators is not None:
            names = [b.name for b in built]
            for index, name in enumerate(self.block.evaluators):
                if name not in names:
                    problem = f"no evaluator is named {name!r}; named: {', '.join(names)}"
                    raise RunConfigError(self.path, f"evaluation.evaluators[{index}]", problem)
            chosen = [b for b in built if b.name in self.block.evaluators]
        if self.block.timeout_ms is not None:
            seconds = self.block.timeout_ms / 1000
            chosen = [b if b.timeout_s is not None else dataclasses.replace(b, timeout_s=seconds) for b in chosen]
        return chosen

    def concurrency(self, configured: int) -> int:
        """How many evaluations run at once: one when ``parallel_execution`` is false."""
        return 1 if self.block is not None and not self.block.parallel_execution else configured

    @property
    def retry(self) -> RetryConfig | None:
        """How failed evaluations are retried (None: they are not)."""
        if self.block is None or self.block.retry_config is None:
            return None
        return RetryConfig.model_validate(self.block.retry_config.model_dump())

    def config_record(self, entries: Sequence[dict[str, Any]], names: Sequence[str]) -> EvaluationConfig:
        """The EvaluationConfig the run followed: its evaluators in order, each named entry's options."""
        # Masked as config.yaml is: an entry may hold a literal key (a judge's api_key).
        options = {
            name: mask_secrets({k: v for k, v in e.items() if k not in _NOT_OPTIONS})
            for e in self.entries(entries)
            if (name := _entry_name(e)) is not None
        }
        block = self.block
        return EvaluationConfig(
            evaluators=list(names),
            evaluator_configs={name: values for name, values in options.items() if values},
            parallel_execution=block.parallel_execution if block else True,
            timeout_ms=block.timeout_ms if block else None,
            retry_config=self.retry,
        )


def write_evaluation_records(
    run_path: Path,
    run_id: str,
    plan: EvaluationPlan,
    entries: Sequence[dict[str, Any]],
    traces: Sequence[Trace],
    results: Sequence[EvaluationResult],
) -> None:
    """Write evaluations.jsonl, evaluation_batch.json and evaluation_config.json (see the module docstring)."""
    targets = {(t.case_id, t.variant_name): t.extra.get("trace_id") for t in traces}
    grouped: dict[tuple[str, str], list[EvaluationResult]] = {}
    for result in results:
        grouped.setdefault((result.case_id, result.variant_name), []).append(result)
    method = plan.block.summary_method if plan.block else "weighted_average"
    weights = plan.block.weights if plan.block else None
    lines: list[str] = []
    every = []
    names: dict[str, str | None] = {}
    for trace in traces:
        key = (trace.case_id, trace.variant_name)
        target = targets.get(key)
        target = target if isinstance(target, str) and target else f"{run_id}/{trace.case_id}/{trace.variant_name}"
        evaluations = [r.to_evaluation(target) for r in grouped.get(key, [])]
        every.extend(evaluations)
        names.update({r.evaluator: r.evaluator_version for r in grouped.get(key, [])})
        multi = MultiEvaluationResult(
            target_event_id=target, evaluations=evaluations, summary_method=method, weights=weights
        )
        lines.append(multi.model_dump_json() + "\n")
    write_private_text(run_path / EVALUATIONS_FILE, "".join(lines))
    starts = [r.started_at for r in results]
    metadata = BatchMetadata(
        batch_size=len(every),
        evaluator_versions={name: version for name, version in names.items() if version},
        processing_time_ms=float(sum(r.latency_ms for r in results)),
        **({"created_at": min(starts)} if starts else {}),
    )
    batch = EvaluationBatch(batch_id=f"batch_{run_id}", evaluations=every, batch_metadata=metadata, status="completed")
    write_private_text(run_path / BATCH_FILE, batch.model_dump_json(indent=1) + "\n")
    record = plan.config_record(entries, list(names))
    write_private_text(run_path / EVALUATION_CONFIG_FILE, record.model_dump_json(indent=1) + "\n")
