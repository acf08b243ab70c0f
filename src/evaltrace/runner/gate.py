"""The CI gate of ``--fail-on-regression``: what stops a run or a comparison from going green.

A gate must not pass on nothing: besides regressions (passed on the baseline, failed now) it fails when a case
that passed on the baseline has no verdict now (its evaluation errored or was skipped: a regression could hide
there), when a compared variant judged no case on either side, when a variant of the run judged no case at
all (every evaluation errored or skipped), and when no evaluator judged anything on a variant (its evaluations all
errored or were not evaluated), even if some of its cases failed by the system.
"""

from __future__ import annotations

from evaltrace.runner.summary import judged_results
from evaltrace.schema import ComparisonReport, RunSummary

__all__ = ["comparison_gate_problems", "run_gate_problems"]


def comparison_gate_problems(report: ComparisonReport) -> list[str]:
    """Why a comparison fails the gate (empty: it passes)."""
    problems = []
    for delta in report.deltas:
        if delta.regressions:
            problems.append(f"variant {delta.variant}: regressed: {', '.join(delta.regressions)}")
        if delta.unverified:
            problems.append(
                f"variant {delta.variant}: passed on the baseline, no verdict now (evaluation error or not"
                f" evaluated): {', '.join(delta.unverified)}"
            )
        if delta.not_evaluated:
            problems.append(f"variant {delta.variant}: no case judged on one side; nothing to compare")
    return problems


def run_gate_problems(summary: RunSummary) -> list[str]:
    """Why a run fails the gate: its comparison's problems, and variants that judged no case or no evaluation."""
    problems = comparison_gate_problems(summary.comparison) if summary.comparison is not None else []
    judged = judged_results(summary)
    for variant in summary.variants:
        if variant.cases_failed is not None and variant.cases_passed + variant.cases_failed == 0:
            problems.append(
                f"variant {variant.name}: not evaluated: no case judged ({variant.cases_eval_errors or 0} evaluation"
                f" error(s), {variant.cases_not_evaluated or 0} not evaluated)"
            )
        elif judged.get(variant.name) == 0:
            cells = [r.by_variant[variant.name] for r in summary.by_evaluator if variant.name in r.by_variant]
            errors = sum(c.errors or 0 for c in cells)
            skipped = sum(c.not_evaluated or 0 for c in cells)
            problems.append(
                f"variant {variant.name}: not evaluated: no evaluator judged anything ({errors} evaluation error(s),"
                f" {skipped} not evaluated; {variant.cases_errored} case(s) failed by the system)"
            )
    return problems
