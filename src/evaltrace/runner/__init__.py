"""Offline runs (DESIGN.md section 6): cases × variants under tracing, evaluated, summarised and compared.

``evaltrace run eval.yaml`` is :func:`run_eval`, ``run --resume`` is :func:`resume_run`, ``re-evaluate`` is
:func:`re_evaluate`, ``runs summarize`` is :func:`summarize_run`; ``compare`` and ``promote`` are :func:`compare_runs` / :func:`compare_with_baseline` and
:func:`promote_run`. See ``docs/offline.md`` for the eval.yaml format and the run directory.
"""

from __future__ import annotations

from evaltrace.runner.adapters import AdapterFailure
from evaltrace.runner.baselines import load_baseline, promote_run
from evaltrace.runner.compare import compare_runs, compare_with_baseline
from evaltrace.runner.config import EvalConfig, load_cases, load_eval_config
from evaltrace.runner.engine import ProgressReporter, RunOutcome, re_evaluate, resume_run, run_eval, summarize_run
from evaltrace.runner.enrichers import TraceEnricher
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.rundir import RunDirectory, RunNotFoundError, resolve_run
from evaltrace.runner.sqlite_store import SqliteRunStore, StoredRun

__all__ = [
    "AdapterFailure",
    "EvalConfig",
    "ProgressReporter",
    "RunConfigError",
    "RunDirectory",
    "RunNotFoundError",
    "RunOutcome",
    "SqliteRunStore",
    "StoredRun",
    "TraceEnricher",
    "compare_runs",
    "compare_with_baseline",
    "load_baseline",
    "load_cases",
    "load_eval_config",
    "promote_run",
    "re_evaluate",
    "resolve_run",
    "resume_run",
    "run_eval",
    "summarize_run",
]
