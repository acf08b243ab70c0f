"""Promoted baselines: ``runs/baselines/<eval_name>/`` holds the summary of the run a drift check compares with.

Beside ``summary.yaml`` the baseline keeps ``case_outcomes.json`` (variant -> case id -> outcome: ``pass``,
``fail``, ``error`` or ``not_evaluated``; older baselines hold booleans, read as pass / fail), because regressions
are per case and a summary alone only has rates. A run that judged no case cannot be promoted: a baseline of
nothing would make every later drift check vacuous.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from evaltrace._internal.private_files import make_private_dirs, write_private_text
from evaltrace.exceptions import EvaltraceError, SchemaError
from evaltrace.runner.rundir import SUMMARY_FILE, RunDirectory, read_summary_file
from evaltrace.runner.summary import JUDGED, CaseOutcomes, Outcome, case_outcomes
from evaltrace.schema import RunSummary

__all__ = [
    "BASELINES_DIR",
    "Baseline",
    "NothingEvaluatedError",
    "baseline_dir",
    "load_baseline",
    "promote_run",
    "run_eval_name",
]

BASELINES_DIR = "baselines"
OUTCOMES_FILE = "case_outcomes.json"


class NothingEvaluatedError(EvaltraceError):
    """The run judged no case (every evaluation errored or was skipped): it cannot be a baseline."""


@dataclass(frozen=True)
class Baseline:
    """A promoted run's summary and per-case outcomes."""

    summary: RunSummary
    outcomes: CaseOutcomes


def baseline_dir(runs_dir: Path, eval_name: str) -> Path:
    """Return ``<runs_dir>/baselines/<eval_name>``."""
    return runs_dir / BASELINES_DIR / eval_name


def run_eval_name(run: RunDirectory) -> str:
    """Return the eval name of a run (from its config.yaml, else from the run id)."""
    try:
        name = run.read_config().get("name")
    except (OSError, SchemaError):
        name = None
    return str(name) if name else run.run_id.partition("_")[2]


def promote_run(run: RunDirectory, runs_dir: Path) -> Path:
    """Make ``run`` the baseline of its eval; replaces any earlier baseline.

    Args:
        run: The run to promote (it must have been evaluated: summary.yaml exists).
        runs_dir: The runs directory holding ``baselines/``.

    Returns:
        The baseline directory.
    """
    summary = run.read_summary()
    if summary.run_id != run.run_id:
        raise SchemaError(f"{run.path / SUMMARY_FILE}: run_id {summary.run_id!r} does not match the directory")
    outcomes = case_outcomes(run.read_traces(), run.read_results())
    if not any(o in JUDGED for cases in outcomes.values() for o in cases.values()):
        raise NothingEvaluatedError(
            f"run {run.run_id} judged no case (every evaluation errored or was skipped): not promoted"
        )
    target = baseline_dir(runs_dir, run_eval_name(run))
    make_private_dirs(target)
    for name, text in (
        (SUMMARY_FILE, (run.path / SUMMARY_FILE).read_text(encoding="utf-8")),
        (OUTCOMES_FILE, json.dumps(outcomes, indent=1, sort_keys=True) + "\n"),
    ):
        write_private_text(target / name, text)
    return target


def load_baseline(runs_dir: Path, eval_name: str) -> Baseline | None:
    """Return the promoted baseline of ``eval_name``, or None when none was promoted."""
    directory = baseline_dir(runs_dir, eval_name)
    if not (directory / SUMMARY_FILE).is_file():
        return None
    summary = read_summary_file(directory / SUMMARY_FILE)
    try:
        raw = json.loads((directory / OUTCOMES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SchemaError(f"{directory / OUTCOMES_FILE}: cannot read the baseline outcomes ({exc})") from None
    try:
        outcomes = {str(v): {str(c): _OUTCOMES[p] for c, p in cases.items()} for v, cases in raw.items()}
    except (KeyError, TypeError, AttributeError) as exc:
        raise SchemaError(f"{directory / OUTCOMES_FILE}: not a map of case outcomes ({exc!r})") from None
    return Baseline(summary, outcomes)


# Booleans: baselines promoted before outcomes had four values.
_OUTCOMES: dict[object, Outcome] = {
    "pass": "pass",
    "fail": "fail",
    "error": "error",
    "not_evaluated": "not_evaluated",
    True: "pass",
    False: "fail",
}
