"""``evaltrace runs analytics|preference|agreement|trend``: the analytics of :mod:`evaltrace.runner.analytics`.

Each prints a few plain lines (``--json``: the analytics record itself, for scripts) and reads only the run
directories: no judge is called again.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from evaltrace.cli._untrusted import plain
from evaltrace.exceptions import EvaltraceError
from evaltrace.runner.analytics import (
    ab_preference,
    evaluation_performance,
    evaluation_quality,
    human_ai_agreement,
    load_human_scores,
    temporal_trend,
)
from evaltrace.runner.migrate import current_summary
from evaltrace.runner.rundir import SUMMARY_FILE, RunDirectory, resolve_run
from evaltrace.schema._base import SchemaModel

__all__ = ["register_verbs"]

EXIT_OK = 0


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    from evaltrace.cli.runs import add_runs_dir  # runs imports this module: resolve the cycle at call time

    parser.add_argument("run", help="run directory, run id or unique prefix")
    add_runs_dir(parser)
    parser.add_argument("--json", action="store_true", help="print the record as JSON")


def register_verbs(verbs: Any) -> None:
    """Add the analytics verbs to ``evaltrace runs``."""
    analytics = verbs.add_parser(
        "analytics", help="evaluation performance (success rate, duration, cost) and quality (agreement, confidence)"
    )
    _run_arguments(analytics)
    analytics.set_defaults(func=analytics_command)

    preference = verbs.add_parser(
        "preference", help="A/B preference of two variants, case by case, with a confidence interval and a sign test"
    )
    _run_arguments(preference)
    preference.add_argument("variant_a", help="the variant whose preference is measured")
    preference.add_argument("variant_b", help="the variant it is compared with")
    preference.add_argument(
        "--evaluator", default=None, help="decide each case by this evaluator's score (default: share of passes)"
    )
    preference.add_argument("--confidence", type=float, default=0.95, help="interval coverage (default 0.95)")
    preference.set_defaults(func=preference_command)

    agreement = verbs.add_parser("agreement", help="human-versus-AI agreement, given a file of human scores")
    _run_arguments(agreement)
    agreement.add_argument(
        "--human", type=Path, required=True, metavar="FILE",
        help="human scores: JSON, JSON Lines or YAML list of {case_id, variant?, evaluator?, score 0-1, passed?}",
    )  # fmt: skip
    agreement.add_argument("--evaluator", default=None, help="the evaluator human scores without one are paired with")
    agreement.set_defaults(func=agreement_command)

    trend = verbs.add_parser("trend", help="a variant's pass rate (or an evaluator's average) over the runs")
    trend.add_argument("variant", help="the variant to follow")
    from evaltrace.cli.runs import add_runs_dir

    add_runs_dir(trend)
    trend.add_argument("--evaluator", default=None, help="follow this evaluator's average score instead")
    trend.add_argument("-n", "--limit", type=int, default=20, help="how many of the latest runs (default 20)")
    trend.add_argument("--json", action="store_true", help="print the record as JSON")
    trend.set_defaults(func=trend_command)


def _error(exc: BaseException) -> int:
    from evaltrace.cli.runs import print_error

    return print_error(exc)


def _run(args: argparse.Namespace) -> RunDirectory:
    return RunDirectory(resolve_run(args.run, args.runs_dir, argument="RUN"))


def _emit(console: Console, record: SchemaModel, lines: list[str], as_json: bool) -> int:
    if as_json:
        print(json.dumps(record.model_dump(mode="json"), indent=2))
        return EXIT_OK
    for line in lines:
        console.print(plain(line), highlight=False, soft_wrap=True)
    return EXIT_OK


def _num(value: float | None, fmt: str = ".3f", none: str = "-") -> str:
    return none if value is None else format(value, fmt)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def analytics_command(args: argparse.Namespace) -> int:
    """Print a run's evaluation performance and quality metrics."""
    try:
        results = _run(args).read_results()
    except EvaltraceError as exc:
        return _error(exc)
    performance, quality = evaluation_performance(results), evaluation_quality(results)
    if args.json:
        print(json.dumps({"evaluation_performance": performance.model_dump(mode="json"),
                          "evaluation_quality": quality.model_dump(mode="json")}, indent=2))  # fmt: skip
        return EXIT_OK
    p = performance
    lines = [
        f"Evaluation performance: {p.total_evaluations} evaluations, {p.successful_evaluations} completed,"
        f" {p.failed_evaluations} errored, {p.not_evaluated} not evaluated; success rate {_pct(p.success_rate)}",
        f"  duration avg {_num(p.average_duration_ms, '.1f')} ms, p95 {_num(p.p95_duration_ms, '.1f')} ms;"
        f" judge cost {'-' if p.total_cost_usd is None else f'${p.total_cost_usd:.6f}'}",
    ]
    lines += [
        f"  {name}: {e.successful_evaluations}/{e.total_evaluations} completed, success rate"
        f" {_pct(e.success_rate)}, avg {_num(e.average_duration_ms, '.1f')} ms"
        for name, e in p.by_evaluator.items()
    ]
    q = quality
    lines.append(
        f"Evaluation quality: evaluator agreement {_pct(q.evaluator_agreement)} over {q.cells_compared} cell(s)"
        " judged by two or more evaluators"
    )
    lines += [f"  correlation {pair}: {r:+.3f}" for pair, r in q.inter_evaluator_correlation.items()]
    if q.confidence_distribution:
        shares = ", ".join(f"{k.removesuffix('_confidence')} {_pct(v)}" for k, v in q.confidence_distribution.items())
        lines.append(f"  confidence ({q.results_with_confidence} results): {shares}")
    else:
        lines.append("  confidence: no evaluator reported one")
    return _emit(Console(), performance, lines, False)


def preference_command(args: argparse.Namespace) -> int:
    """Print the A/B preference of two variants of a run."""
    try:
        results = _run(args).read_results()
        ab = ab_preference(
            results, args.variant_a, args.variant_b, evaluator=args.evaluator, confidence=args.confidence
        )
    except (EvaltraceError, ValueError) as exc:
        return _error(exc)
    by = f"by {ab.evaluator}" if ab.evaluator else "by share of evaluators passed"
    interval = ab.confidence_interval
    ci = "-" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"
    verdict = "significant" if ab.statistical_significance else "not significant"
    lines = [
        f"{ab.variant_a} vs {ab.variant_b} ({by}, {ab.sample_size} cases both judged): {ab.wins} wins,"
        f" {ab.losses} losses, {ab.ties} ties",
        f"preference for {ab.variant_a}: {_num(ab.preference_score)}, {ab.confidence * 100:g}% CI {ci}"
        f" (Wilson); sign test p = {ab.p_value:.4f}: {verdict}",
    ]
    return _emit(Console(), ab, lines, args.json)


def agreement_command(args: argparse.Namespace) -> int:
    """Print how well the evaluators agree with the given human scores."""
    try:
        results = _run(args).read_results()
        report = human_ai_agreement(results, load_human_scores(args.human), evaluator=args.evaluator)
    except (EvaltraceError, ValueError) as exc:
        return _error(exc)
    lines = [
        f"Human vs AI: {report.pairs} pair(s), agreement score {_num(report.agreement_score)}"
        f" (1 - mean |human - AI| = {_num(report.mean_absolute_difference)}), correlation"
        f" {_num(report.correlation, '+.3f')}, verdict agreement {_pct(report.verdict_agreement)}",
    ]
    if report.unmatched:
        lines.append(f"{report.unmatched} human score(s) matched no judged evaluation of the run")
    lines += [
        f"  discrepancy {d.case_id} × {d.variant} ({d.evaluator}): human {d.human_score:.2f}, AI {d.ai_score:.2f}"
        for d in report.discrepancies
    ]
    return _emit(Console(), report, lines, args.json)


def trend_command(args: argparse.Namespace) -> int:
    """Print a variant's figure over the latest runs of the runs directory and its trend."""
    paths = sorted(p for p in args.runs_dir.iterdir() if (p / SUMMARY_FILE).is_file()) if args.runs_dir.is_dir() else []
    try:
        summaries = [current_summary(RunDirectory(p)) for p in paths]
    except EvaltraceError as exc:
        return _error(exc)
    summaries.sort(key=lambda s: (s.started_at, s.run_id))
    known = sorted({v.name for s in summaries for v in s.variants})
    if args.variant not in known:
        where = f"any of the {len(summaries)} runs" if summaries else "any run (there is none)"
        return _error(ValueError(f"variant {args.variant!r} is not in {where} in {args.runs_dir}"
                                 + (f"; variants: {', '.join(known)}" if known else "")))  # fmt: skip
    report = temporal_trend(summaries[-max(args.limit, 1) :], args.variant, evaluator=args.evaluator)
    history = ", ".join(f"{r} {s:.3f}" for r, s in zip(report.run_ids, report.historical_scores, strict=True))
    lines = [
        f"{report.metric} of {report.variant} over {len(report.run_ids)} run(s): {report.trend}"
        f" (change {_num(report.change_rate, '+.4f')} per run, stability {_num(report.stability_score)})",
        f"  {history or 'no run has this figure'}",
    ]
    return _emit(Console(), report, lines, args.json)
