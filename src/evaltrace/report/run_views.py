"""Two views of a run page beyond the matrix: each cell's span waterfall, and the variants' answers side by side.

The waterfall is drawn from the timeline the run keeps in each Trace (:mod:`evaltrace.runner.span_timeline`);
a run made before that was recorded shows the case's own duration and says why there is no more. The
side-by-side table puts each variant's final answer (or the system's error) for a case on one row, so two
prompts or models can be read against each other without opening a dialog per cell. Everything is escaped.
"""

from __future__ import annotations

from html import escape
from typing import Any

from evaltrace.report.html import _kind_class, _ms
from evaltrace.report.run_model import RunCell, RunReportData
from evaltrace.runner.span_timeline import DROPPED_KEY, read_timeline

__all__ = ["cell_waterfall", "side_by_side"]

ANSWER_CHARS = 1_200
"""Longest answer shown side by side; the cell's dialog has the whole of it."""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def cell_waterfall(cell: RunCell) -> str:
    """The ``Spans`` section of a cell's dialog: one row per span, indented by depth, with its bar and duration."""
    trace = cell.trace
    if trace is None:
        return ""
    timeline = read_timeline(trace.extra)
    if not timeline:
        return (
            '<section class="waterfall-cell"><h2>Spans</h2><p class="empty">No span timing in this run (recorded by'
            f" runs of a newer evaltrace): the case took {_e(_ms(trace.latency_ms))}.</p></section>"
        )
    total = max((row.start_ms + row.duration_ms for row in timeline), default=0.0) or 1.0
    rows = []
    for row in timeline:
        left = min(100.0, row.start_ms / total * 100)
        width = max(0.3, min(100.0 - left, row.duration_ms / total * 100))
        rows.append(
            f'<div class="wf-row{" err" if row.error else ""}" data-kind="{_e(row.kind)}">'
            f'<div class="wf-name" style="padding-left:{row.depth * 14}px" title="{_e(row.name)}">'
            f'<span class="kind {_kind_class(row.kind)}">{_e(row.kind)}</span>{_e(row.name)}</div>'
            f'<div class="wf-track"><div class="wf-bar" style="left:{left:.3f}%;width:{width:.3f}%"></div></div>'
            f'<div class="wf-dur">{_e(_ms(row.duration_ms))}</div></div>'
        )
    dropped = trace.extra.get(DROPPED_KEY)
    more = f'<p class="legend">{_e(dropped)} more spans not kept.</p>' if dropped else ""
    return f'<section class="waterfall-cell"><h2>Spans</h2><div class="wf">{"".join(rows)}</div>{more}</section>'


def _answer(cell: RunCell) -> str:
    trace = cell.trace
    if trace is None:
        return '<td class="answer"><span class="empty">no trace</span></td>'
    if trace.error is not None:
        text, css = f"{trace.error.type}: {trace.error.message}", "answer err-text"
    else:
        text, css = trace.output.final_answer or "", "answer"
    if len(text) > ANSWER_CHARS:
        text = text[:ANSWER_CHARS] + f"… ({len(text) - ANSWER_CHARS} more characters in the cell's trace)"
    shown = _e(text) if text else '<span class="empty">No final answer.</span>'
    outcome = cell.outcome or ""
    return (
        f'<td class="{css}" data-case="{_e(cell.case_id)}" data-variant="{_e(cell.variant)}"'
        f' data-outcome="{_e(outcome)}"><a href="#{cell.dom_id}" data-open="{cell.dom_id}">{_e(outcome.replace("_", " "))}'
        f"</a><div>{shown}</div></td>"
    )


def side_by_side(data: RunReportData) -> str:
    """The ``Answers side by side`` section: a row per case, a column per variant, each cell's final answer."""
    head = "".join(f"<th>{_e(v)}</th>" for v in data.variants)
    rows = "".join(
        f'<tr><th class="case" title="{_e(case_id)}">{_e(case_id)}</th>'
        + "".join(_answer(data.cells[v, case_id]) for v in data.variants)
        + "</tr>"
        for case_id in data.case_ids
    )
    return (
        f'<section id="side-by-side"><h2>Answers side by side</h2><table class="sbs"><tr><th>case</th>{head}</tr>'
        f"{rows}</table></section>"
    )
