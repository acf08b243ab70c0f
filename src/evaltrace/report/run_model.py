"""What a run report shows, gathered from a run directory: the case × variant cells and the run's summary.

Cell outcomes come from :func:`evaltrace.runner.summary.case_outcomes`, the function summary.yaml is computed
with, so the page and the summary never disagree: an evaluation error or a case nothing judged is never shown
as a pass or a fail. A (case, variant) with no trace (a run killed before it ran) has no outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from evaltrace.runner.analytics import (
    EvaluationPerformance,
    EvaluationQuality,
    evaluation_performance,
    evaluation_quality,
)
from evaltrace.runner.artifacts import DIFF_FILE, artifact_dir
from evaltrace.runner.findings import CellKey, trace_locations, verdict_of, with_findings
from evaltrace.runner.rundir import CASES_FILE, HASH_FILE, SUMMARY_FILE, TRACES_FILE, RunDirectory
from evaltrace.runner.summary import Outcome, case_outcomes, summarise_run
from evaltrace.schema import EvalCase, EvaluationResult, RunSummary, Trace
from evaltrace.schema.runs import EvaluatorVerdict

__all__ = ["RunCell", "RunReportData", "build_run_report"]


@dataclass
class RunCell:
    """One (case, variant) of the matrix.

    Attributes:
        dom_id: Id of the cell's trace detail in the page: ``t-<n>`` for the trace on line ``n`` of traces.jsonl
            (what the terminal prints as ``traces.jsonl:n``), ``c-<n>`` for a cell with no trace.
        case_id: The case.
        variant: The variant.
        outcome: pass / fail / error / not_evaluated; None when the cell has no trace.
        trace: The cell's Trace, if it ran.
        verdicts: Every evaluator's verdict on it, in results order.
        trace_line: Line of its Trace in traces.jsonl.
    """

    dom_id: str
    case_id: str
    variant: str
    outcome: Outcome | None
    trace: Trace | None
    verdicts: list[EvaluatorVerdict] = field(default_factory=list)
    trace_line: int | None = None
    file_diff: str | None = None
    """The cell's ``diff.txt`` (filesystem evals), cut at :data:`MAX_DIFF_CHARS`; None without a workspace."""


@dataclass
class RunReportData:
    """Everything the run page renders.

    Attributes:
        summary: The run's summary (summary.yaml, or computed from the traces when the run never got one).
        case_ids: Rows of the matrix, in dataset order.
        variants: Columns of the matrix, in config order.
        cells: The cells by (variant, case id).
        cases: The cases by id (input and expectations), when the run kept its snapshot.
        traces_path: The run's traces.jsonl.
    """

    summary: RunSummary
    case_ids: list[str]
    variants: list[str]
    cells: dict[CellKey, RunCell]
    cases: dict[str, EvalCase]
    traces_path: str
    lower_is_better: frozenset[str] = frozenset()
    """Evaluators whose score is better lower (``detail.direction``): the leaderboard colours them the other way."""
    performance: EvaluationPerformance | None = None
    """How the run's evaluations went (``evaltrace runs analytics``)."""
    quality: EvaluationQuality | None = None
    """Whether the run's evaluators agree and how confident they were."""


def _summary(run: RunDirectory, traces: list[Trace], results: list[EvaluationResult]) -> RunSummary:
    if (run.path / SUMMARY_FILE).is_file():
        return run.read_summary()
    # A run interrupted before its summary: the page still shows what it did.
    started = min((t.started_at for t in traces), default=None)
    finished = max((t.finished_at for t in traces), default=None)
    if started is None or finished is None:
        raise LookupError(f"run {run.run_id} has no traces yet: nothing to report")
    variants = list(dict.fromkeys(t.variant_name for t in traces))
    summary, outcomes = summarise_run(
        run_id=run.run_id,
        started_at=started,
        finished_at=finished,
        config_path="",
        config_hash=run.read_hash() if (run.path / HASH_FILE).is_file() else "",
        variant_names=variants,
        traces=traces,
        results=results,
    )
    return with_findings(summary, outcomes, traces, results)


MAX_DIFF_CHARS = 65_536
"""Longest ``diff.txt`` shown in a cell's detail; the file in the run directory keeps the rest."""


def _file_diff(run: RunDirectory, case_id: str, variant: str) -> str | None:
    path = artifact_dir(run.path, case_id, variant) / DIFF_FILE
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            text = handle.read(MAX_DIFF_CHARS + 1)
    except OSError:
        return None
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + f"\n... cut at {MAX_DIFF_CHARS} characters: the whole diff is {path}"
    return text


def build_run_report(run: RunDirectory) -> RunReportData:
    """Gather the report of a run directory.

    Raises:
        LookupError: The run has no traces.
        SchemaError: A file of the run is malformed.
    """
    if not (run.path / TRACES_FILE).is_file():
        raise LookupError(f"run {run.run_id} has no {TRACES_FILE}: nothing to report")
    traces, results = run.read_traces(), run.read_results()
    summary = _summary(run, traces, results)
    cases = run.read_cases() if (run.path / CASES_FILE).is_file() else []
    case_ids = list(dict.fromkeys([*(c.id for c in cases), *(t.case_id for t in traces)]))
    variants = list(dict.fromkeys([*(v.name for v in summary.variants), *(t.variant_name for t in traces)]))
    outcomes = case_outcomes(traces, results)
    locations = trace_locations(run.path / TRACES_FILE)
    by_cell: dict[CellKey, list[EvaluatorVerdict]] = {}
    for result in results:
        by_cell.setdefault((result.variant_name, result.case_id), []).append(verdict_of(result))
    traced = {(t.variant_name, t.case_id): t for t in reversed(traces)}  # the first trace of a cell wins
    cells: dict[CellKey, RunCell] = {}
    for case_id in case_ids:
        for variant in variants:
            key = (variant, case_id)
            trace = traced.get(key)
            cells[key] = RunCell(
                # The terminal's reference "traces.jsonl:19" and "run.html#t-19" name the same cell: one index.
                dom_id=f"t-{locations[key]}" if trace is not None and key in locations else f"c-{len(cells) + 1}",
                case_id=case_id,
                variant=variant,
                outcome=outcomes.get(variant, {}).get(case_id) if trace is not None else None,
                trace=trace,
                verdicts=by_cell.get(key, []),
                trace_line=locations.get(key),
                file_diff=_file_diff(run, case_id, variant) if trace is not None else None,
            )
    return RunReportData(
        summary=summary,
        case_ids=case_ids,
        variants=variants,
        cells=cells,
        cases={c.id: c for c in cases},
        traces_path=str(run.path / TRACES_FILE),
        lower_is_better=frozenset(r.evaluator for r in results if r.detail.get("direction") == "lower"),
        performance=evaluation_performance(results) if results else None,
        quality=evaluation_quality(results) if results else None,
    )
