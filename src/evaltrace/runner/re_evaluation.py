"""``re-evaluate``: the evaluators run again over a run's saved traces (the system is never called)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from evaltrace.runner.artifacts import attach_artifacts
from evaltrace.runner.baselines import run_eval_name
from evaltrace.runner.evaluate import evaluate_all
from evaltrace.runner.evaluation_records import write_evaluation_records
from evaltrace.runner.outcome import NullProgress, ProgressReporter, RunOutcome, push_run_scores
from evaltrace.runner.resume import re_evaluation_setup
from evaltrace.runner.run_summary import RunOrder, SummaryInputs, previous_summary, summarise_with_findings
from evaltrace.runner.rundir import CONFIG_FILE, RunDirectory
from evaltrace.runner.stores import parse_outputs, save_to_stores
from evaltrace.schema import utcnow

__all__ = ["re_evaluate"]


def re_evaluate(
    run: RunDirectory,
    *,
    config_path: Path | None = None,
    runs_dir: Path | None = None,
    drift: bool = False,
    progress: ProgressReporter | None = None,
) -> RunOutcome:
    """Re-run the evaluators over a run's traces.jsonl (the system is never called); rewrite results and summary.

    Args:
        run: The run directory.
        config_path: An eval.yaml whose evaluators to use instead of the run's own config.yaml.
        runs_dir: Where promoted baselines live, for ``drift`` (default: the run's parent directory).
        drift: Compare with the promoted baseline.
        progress: Progress receiver.

    Returns:
        The outcome (saved to the ``output:`` stores of the run's own config.yaml).
    """
    progress = progress or NullProgress()
    previous = previous_summary(run)
    setup = re_evaluation_setup(run, config_path, previous)
    stores = parse_outputs(run.path / CONFIG_FILE, run.read_config().get("output"))
    cases = run.read_cases()
    known = setup.variant_names or ([v.name for v in previous.variants] if previous else [])
    traces = run.read_traces()  # appended as cells finished: put them back in config order
    variant_names = [*known, *dict.fromkeys(t.variant_name for t in traces if t.variant_name not in known)]
    order = RunOrder(variant_names, [c.id for c in cases], [e.name for e in setup.evaluators])
    traces.sort(key=order.trace)
    evaluated = attach_artifacts(traces, run.path)  # filesystem evals: each trace's artifact, read from disk
    concurrency = setup.plan.concurrency(setup.concurrency)
    retry = setup.plan.retry
    results = asyncio.run(evaluate_all(evaluated, cases, setup.evaluators, concurrency, progress, retry=retry))
    run.write_results(results)
    started = previous.started_at if previous else min((t.started_at for t in traces), default=utcnow())
    notes: list[str] = []
    inputs = SummaryInputs(
        run,
        started,
        previous.config_path if previous else str(setup.source),
        variant_names,
        setup.baseline,
        (runs_dir or run.path.parent) if drift else None,
        cases,
    )
    summary = summarise_with_findings(inputs, traces, results, notes)
    run.write_summary(summary)
    write_evaluation_records(run.path, run.run_id, setup.plan, setup.entries, traces, results)
    meta = run.read_meta()
    namespace = meta.run_namespace if meta is not None else None
    stored, errors = save_to_stores(
        stores, summary, traces, results, eval_name=run_eval_name(run), run_namespace=namespace
    )
    outcome = RunOutcome(run, summary, traces, results, notes, stored, errors)
    sinks = run.read_config().get("sinks")
    push_run_scores(outcome, [str(s) for s in sinks] if isinstance(sinks, list) else [])
    return outcome
