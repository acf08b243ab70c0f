"""The run page's reading of its figures: the insights with their explanations, and the heatmap leaderboard.

The leaderboard ranks the variants by case pass rate (ties: faster first) and gives each evaluator's figure per
variant as a heatmap cell: its average score when the score is on [0, 1], else its pass rate; red is 0, green
is 1. A cell's exact figures are in its title and ``data-value``. Everything from the run is escaped.
"""

from __future__ import annotations

from html import escape
from typing import Any

from evaltrace.runner.analytics import EvaluationPerformance, EvaluationQuality
from evaltrace.schema import RunSummary
from evaltrace.schema.runs import EvaluatorVariantRollup, VariantSummary

__all__ = ["analytics_section", "heatmap_leaderboard", "insights_section"]


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _figure(cell: EvaluatorVariantRollup | None, lower: bool) -> tuple[float | None, str]:
    """(value on [0, 1] for the colour, 1 = good; its label) of one evaluator on one variant."""
    if cell is None or not (cell.passed or 0) + (cell.failed or 0):
        return None, "not judged"
    if cell.avg_score is not None and 0.0 <= cell.avg_score <= 1.0:
        if lower:  # e.g. an error rate: 0 is the best score, so it is the greenest
            return 1.0 - cell.avg_score, f"avg {cell.avg_score:.2f} (lower is better)"
        return cell.avg_score, f"avg {cell.avg_score:.2f}"
    if cell.pass_rate is not None:
        return cell.pass_rate, f"{cell.pass_rate * 100:.0f}% pass"
    return None, "not judged"


def _heat(value: float | None, label: str, title: str) -> str:
    if value is None:
        return f'<td class="heat none" title="{_e(title)}">{_e(label)}</td>'
    hue = round(120 * max(0.0, min(1.0, value)))  # 0 red .. 120 green
    return (
        f'<td class="heat num" data-value="{value:.4f}" style="background:hsl({hue},70%,82%)"'
        f' title="{_e(title)}">{_e(label)}</td>'
    )


def _rank_key(v: VariantSummary) -> tuple[float, float, str]:
    return (-(v.pass_rate if v.pass_rate is not None else -1.0), v.avg_latency_ms, v.name)


def heatmap_leaderboard(summary: RunSummary, lower_is_better: frozenset[str] = frozenset()) -> str:
    """The ``Leaderboard`` section: a row per variant, best first, a heatmap column per evaluator.

    Args:
        summary: The run's summary.
        lower_is_better: Evaluators whose score is better lower: their colour is of ``1 - score``.
    """
    if not summary.variants or not summary.by_evaluator:
        return ""
    ranked = sorted(summary.variants, key=_rank_key)
    head = "<tr><th>#</th><th>variant</th><th>pass rate</th>" + "".join(
        f"<th>{_e(r.evaluator)}</th>" for r in summary.by_evaluator
    )
    rows = []
    for rank, variant in enumerate(ranked, start=1):
        rate = variant.pass_rate
        cells = [_heat(rate, "-" if rate is None else f"{rate * 100:.1f}%", f"{variant.name}: case pass rate")]
        for rollup in summary.by_evaluator:
            value, label = _figure(rollup.by_variant.get(variant.name), rollup.evaluator in lower_is_better)
            cells.append(_heat(value, label, f"{rollup.evaluator} on {variant.name}: {label}"))
        rows.append(
            f'<tr data-variant="{_e(variant.name)}" data-rank="{rank}"><td class="num">{rank}</td>'
            f"<td><b>{_e(variant.name)}</b></td>{''.join(cells)}</tr>"
        )
    legend = (
        '<p class="legend">Ranked by case pass rate (ties: faster first). Each cell is the evaluator\'s average'
        " score on [0, 1], else its pass rate: red is the worst, green the best.</p>"
    )
    return (
        f'<section id="leaderboard"><h2>Leaderboard</h2><table class="heatmap">{head}</tr>{"".join(rows)}</table>'
        f"{legend}</section>"
    )


def insights_section(summary: RunSummary) -> str:
    """The ``Insights`` section: best / least accurate, fastest / slowest, retrieval, failure split, rubric."""
    insights = summary.insights
    if insights is None:
        return ""
    facts = [
        ("best variant", insights.best_variant),
        ("least accurate variant", insights.least_accurate_variant),
        ("hardest case", insights.hardest_case and f"{insights.hardest_case} (failed on "
         f"{insights.hardest_case_failures} variant(s))"),
        ("fastest variant", insights.fastest_variant),
        ("slowest variant", insights.slowest_variant),
        ("cheapest variant", insights.cheapest_variant),
        ("most expensive variant", insights.most_expensive_variant),
        ("best context retrieval", insights.best_retrieval_variant),
        ("worst context retrieval", insights.worst_retrieval_variant),
    ]  # fmt: skip
    items = [f'<li data-insight="{_e(label)}">{label}: <b>{_e(value)}</b></li>' for label, value in facts if value]
    split = insights.failure_split
    if split is not None and split.retrieval + split.generation + split.both + split.system:
        parts = (("retrieval", split.retrieval), ("generation", split.generation), ("both", split.both),
                 ("system", split.system))  # fmt: skip
        shown = ", ".join(f'<span data-split="{k}">{k} <b>{n}</b></span>' for k, n in parts)
        items.append(f'<li data-insight="failure split">failures by cause: {shown}</li>')
    if insights.complexity_distribution:
        shown = ", ".join(f"{_e(k)} <b>{n}</b>" for k, n in insights.complexity_distribution.items())
        items.append(f'<li data-insight="complexity">cases by complexity: {shown}</li>')
    items += [f'<li class="err-text">{_e(p)}</li>' for p in insights.problems]
    explained = "".join(f"<li>{_e(line)}</li>" for line in insights.explanations)
    rubric = _dimensions(summary)
    if not items and not explained and not rubric:
        return ""
    why = f'<h3>Why</h3><ul class="plain explanations">{explained}</ul>' if explained else ""
    return f'<section id="insights"><h2>Insights</h2><ul class="plain">{"".join(items)}</ul>{why}{rubric}</section>'


def _dimensions(summary: RunSummary) -> str:
    averages = summary.insights.dimension_averages if summary.insights is not None else {}
    if not averages:
        return ""
    names = sorted({d for by_dim in averages.values() for d in by_dim})
    head = "<tr><th>variant</th>" + "".join(f"<th>{_e(n)}</th>" for n in names) + "</tr>"
    rows = "".join(
        f'<tr data-variant="{_e(v)}"><td><b>{_e(v)}</b></td>'
        + "".join(
            _heat(by_dim[n], f"{by_dim[n]:.2f}", f"{n} on {v}") if n in by_dim else '<td class="heat none">-</td>'
            for n in names
        )
        + "</tr>"
        for v, by_dim in averages.items()
    )
    return f'<h3>Rubric dimension averages</h3><table class="heatmap rubric">{head}{rows}</table>'


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def analytics_section(performance: EvaluationPerformance | None, quality: EvaluationQuality | None) -> str:
    """The ``Evaluation analytics`` section: how the evaluations went and whether the evaluators agree."""
    if performance is None or quality is None or not performance.total_evaluations:
        return ""
    p, q = performance, quality
    cost = "-" if p.total_cost_usd is None else f"${p.total_cost_usd:.6f}"
    duration = "-" if p.average_duration_ms is None else f"{p.average_duration_ms:.1f} ms"
    p95 = "-" if p.p95_duration_ms is None else f"{p.p95_duration_ms:.1f} ms"
    facts = [
        ("evaluations", p.total_evaluations),
        ("completed", p.successful_evaluations),
        ("errored", p.failed_evaluations),
        ("not evaluated", p.not_evaluated),
        ("success rate", _pct(p.success_rate)),
        ("average duration", duration),
        ("p95 duration", p95),
        ("judge cost", cost),
        ("evaluator agreement", f"{_pct(q.evaluator_agreement)} of {q.cells_compared} cell(s)"),
    ]
    items = [f'<li data-metric="{_e(k)}">{_e(k)}: <b>{_e(v)}</b></li>' for k, v in facts]
    items += [f'<li data-metric="correlation">{_e(pair)}: <b>{r:+.3f}</b></li>'
              for pair, r in q.inter_evaluator_correlation.items()]  # fmt: skip
    if q.confidence_distribution:
        shares = ", ".join(f"{k.removesuffix('_confidence')} {_pct(v)}" for k, v in q.confidence_distribution.items())
        items.append(f'<li data-metric="confidence">confidence: <b>{_e(shares)}</b></li>')
    note = (
        '<p class="legend">success rate = completed / (completed + errored); agreement: cells judged by two'
        " evaluators or more on which every verdict is the same. <code>evaltrace runs analytics</code> prints the"
        " same.</p>"
    )
    return (
        f'<section id="analytics"><h2>Evaluation analytics</h2><ul class="plain">{"".join(items)}</ul>{note}</section>'
    )
