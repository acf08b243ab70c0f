"""``evaltrace report <run_id|run dir> -o run.html``: one self-contained HTML page of an offline run.

The page has the case × variant matrix (each cell's outcome, its scores, and every evaluator's verdict and
reason on hover), the figures per variant (outcome counts, pass rate, latency, cost, tokens), each evaluator's
pass rate per variant, a heatmap leaderboard, the insights and their explanations, the changes against the baseline, and each variant's answers side by
side. Each cell opens its trace in a dialog (``#t-N``, N its line in traces.jsonl): the evaluations, the case,
the final answer, its span waterfall, thinking, tool calls, messages and metrics, rendered from
the run's Trace with the trace report's own pieces. Everything is escaped on the server side (nothing from a
run is ever read as markup) and the CSS and script are inline: the page makes no request.
"""

from __future__ import annotations

import datetime as dt
from html import escape
from pathlib import Path
from typing import Any

from evaltrace._internal.private_files import make_private_dirs, private_opener
from evaltrace._version import __version__
from evaltrace.evaluators.compliance import compliance_tags
from evaltrace.report.chat import chat_messages
from evaltrace.report.chat_html import render_bubbles
from evaltrace.report.html import _calls_with_results, _content, _message, _ms, _pretty, _thinking
from evaltrace.report.run_assets import CSS, JS
from evaltrace.report.run_insights_html import analytics_section, heatmap_leaderboard, insights_section
from evaltrace.report.run_model import RunCell, RunReportData, build_run_report
from evaltrace.report.run_views import cell_waterfall, side_by_side
from evaltrace.runner.case_turns import SESSION_KEY, conversation_messages, turn_traces
from evaltrace.runner.rundir import RunDirectory
from evaltrace.schema import EvalCase, RunSummary, Trace
from evaltrace.schema.runs import EvaluatorVerdict, VariantSummary

__all__ = ["render_run_report", "write_run_report"]

# Outcome -> (CSS class, text). An error and a skip are never shown as pass or fail.
_OUTCOMES = {
    "pass": ("pass", "pass"),
    "fail": ("fail", "fail"),
    "error": ("error", "error"),
    "not_evaluated": ("neutral", "not evaluated"),
}


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _badge(outcome: str, extra: str = "") -> str:
    css, text = _OUTCOMES.get(outcome, ("neutral", outcome))
    return f'<span class="badge {css}" data-outcome="{_e(outcome)}">{_e(extra or text)}</span>'


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _verdict_line(v: EvaluatorVerdict) -> str:
    word = _OUTCOMES.get(v.outcome, ("", v.outcome))[1]
    if v.error_type:
        word += f" ({v.error_type})"
    score = f" {v.score:.2f}" if v.score is not None else ""
    return f"{v.evaluator}: {word}{score}" + (f" - {v.reason}" if v.reason else "")


def _cell_title(cell: RunCell) -> str:
    lines = [f"{cell.case_id} × {cell.variant}"]
    if cell.trace is not None and cell.trace.error is not None:
        lines.append(f"system error {cell.trace.error.type}: {cell.trace.error.message}")
    lines += [_verdict_line(v) for v in cell.verdicts]
    if cell.trace is not None and not cell.verdicts:
        lines.append("no evaluator applies")
    return "\n".join(lines)


def _cell(cell: RunCell) -> str:
    if cell.outcome is None:
        return f'<td><span class="cell none" title="{_e(cell.case_id)} × {_e(cell.variant)}: never ran">no trace</span></td>'
    css, text = _OUTCOMES[cell.outcome]
    # The cell says how many judged results passed; each score and reason is in the title (hover) and the dialog.
    judged = [v for v in cell.verdicts if v.outcome in ("pass", "fail")]
    detail = f"{sum(v.outcome == 'pass' for v in judged)}/{len(judged)}" if judged else ""
    if cell.trace is not None and cell.trace.error is not None:
        detail = "system error"
    shown = f'{_e(text)}<span class="sc">{_e(detail)}</span>' if detail else _e(text)
    return (
        f'<td><a class="cell {css}" href="#{cell.dom_id}" data-open="{cell.dom_id}" data-outcome="{cell.outcome}"'
        f' data-case="{_e(cell.case_id)}" data-variant="{_e(cell.variant)}" title="{_e(_cell_title(cell))}">'
        f"{shown}</a></td>"
    )


def _matrix(data: RunReportData) -> str:
    head = "".join(f"<th>{_e(v)}</th>" for v in data.variants)
    rows = "".join(
        f'<tr><th class="case" title="{_e(case_id)}">{_e(case_id)}</th>'
        + "".join(_cell(data.cells[v, case_id]) for v in data.variants)
        + "</tr>"
        for case_id in data.case_ids
    )
    legend = (
        '<p class="legend">pass: judged and nothing failed it &middot; fail: the system failed or an evaluator failed'
        " it &middot; error: an evaluation errored (no verdict) &middot; not evaluated: every evaluator skipped."
        " Hover a cell for each evaluator's verdict and reason; click it for the trace.</p>"
    )
    return (
        f'<section id="matrix"><h2>Cases × variants</h2><table class="matrix"><tr><th>case</th>{head}</tr>'
        f"{rows}</table>{legend}</section>"
    )


def _rate(v: VariantSummary) -> str:
    if v.pass_rate is None or (v.cases_failed is not None and v.cases_passed + v.cases_failed == 0):
        return _badge("not_evaluated")
    return f"{v.pass_rate * 100:.1f}%"


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _variants(summary: RunSummary) -> str:
    head = "<th>variant</th>" + "".join(
        f'<th class="num">{h}</th>'
        for h in ("cases", "pass", "fail", "error", "not evaluated", "pass rate", "avg latency", "avg cost",
                  "avg tokens in / out")
    )  # fmt: skip
    rows = []
    for v in summary.variants:
        cost = f"${v.avg_cost_usd:.5f}" if v.avg_cost_usd is not None else "-"
        tokens = "-"
        if v.avg_tokens_input is not None or v.avg_tokens_output is not None:
            tokens = f"{v.avg_tokens_input or 0:.0f} / {v.avg_tokens_output or 0:.0f}"
        cells = [v.cases_total, v.cases_passed, _count(v.cases_failed), _count(v.cases_eval_errors)]
        cells += [_count(v.cases_not_evaluated)]
        rows.append(
            f'<tr data-variant="{_e(v.name)}"><td><b>{_e(v.name)}</b></td>'
            + "".join(f'<td class="num">{_e(c)}</td>' for c in cells)
            + f'<td class="num">{_rate(v)}</td><td class="num">{_ms(v.avg_latency_ms)}</td>'
            f'<td class="num">{_e(cost)}</td><td class="num">{_e(tokens)}</td></tr>'
        )
    note = '<p class="legend">pass rate = pass / (pass + fail); errors and not-evaluated cases are neither.</p>'
    return f'<section id="variants"><h2>Variants</h2><table><tr>{head}</tr>{"".join(rows)}</table>{note}</section>'


def _evaluators(summary: RunSummary) -> str:
    if not summary.by_evaluator:
        return ""
    names = [v.name for v in summary.variants]
    head = "<tr><th>evaluator</th>" + "".join(f"<th>{_e(n)}</th>" for n in names) + "</tr>"
    rows = []
    for rollup in summary.by_evaluator:
        cells = []
        for name in names:
            cell = rollup.by_variant.get(name)
            if cell is None:
                cells.append("<td>n/a</td>")
                continue
            judged = (cell.passed or 0) + (cell.failed or 0)
            rate = cell.pass_rate
            parts = [f"{rate * 100:.1f}% ({cell.passed}/{judged})"] if judged and rate is not None else []
            if cell.avg_score is not None and judged:
                parts.append(f"avg {cell.avg_score:.2f}")
            parts += [f"{cell.errors} error(s)"] if cell.errors else []
            parts += [f"{cell.not_evaluated} not evaluated"] if cell.not_evaluated else []
            cells.append(f"<td>{_e(', '.join(parts) or 'not evaluated')}</td>")
        tags = "".join(
            f'<span class="tag" data-standard="{_e(t)}">{_e(t)}</span>' for t in compliance_tags(rollup.evaluator)
        )
        # The tags float to the right of the name (they come first so the name cell still ends with the name).
        rows.append(f"<tr><td>{tags}<b>{_e(rollup.evaluator)}</b></td>{''.join(cells)}</tr>")
    title = "Evaluators &middot; pass rate over judged results per variant"
    return f'<section id="evaluators"><h2>{title}</h2><table>{head}{"".join(rows)}</table></section>'


def _changes(summary: RunSummary, data: RunReportData) -> str:
    report = summary.comparison
    if report is None:
        return ""
    items = []
    for delta in report.deltas:
        for change in delta.changes:
            cell = data.cells.get((delta.variant, change.case_id))
            link = f'<a href="#{cell.dom_id}" data-open="{cell.dom_id}">' if cell is not None else "<span>"
            moved = "; ".join(
                f"{_e(e.evaluator)}: {_e(_verdict_line(e.before).partition(': ')[2] if e.before else 'unknown')}"
                f" &rarr; {_e(_verdict_line(e.now).partition(': ')[2] if e.now else 'absent')}"
                for e in change.evaluators
            )
            items.append(
                f"<li>{_badge(change.now, change.kind)} {link}{_e(change.case_id)} in {_e(delta.variant)}"
                f"{'</a>' if cell is not None else '</span>'}: {_e(change.before)} &rarr; {_e(change.now)}"
                f"{'; ' + _e(change.system_error) if change.system_error else ''}{'; ' + moved if moved else ''}</li>"
            )
    what = "baseline variant" if report.kind == "ad_hoc" else "baseline run"
    body = f'<ul class="plain">{"".join(items)}</ul>' if items else '<p class="empty">No case moved.</p>'
    return f'<section id="changes"><h2>Compared with {what} {_e(report.baseline)}</h2>{body}</section>'


def _evaluations(cell: RunCell) -> str:
    if not cell.verdicts:
        return '<section><h2>Evaluations</h2><p class="empty">No evaluator applies: not evaluated.</p></section>'
    rows = "".join(
        f'<tr data-outcome="{v.outcome}"><td><b>{_e(v.evaluator)}</b></td>'
        f"<td>{_badge(v.outcome, f'error: {v.error_type}' if v.error_type else '')}</td>"
        f"<td>{_score(v.score)}</td><td>{_e(v.reason)}</td></tr>"
        for v in cell.verdicts
    )
    head = "<tr><th>Evaluator</th><th>Result</th><th>Score</th><th>Reason</th></tr>"
    return f"<section><h2>Evaluations</h2><table>{head}{rows}</table></section>"


def _case(case: EvalCase | None, trace: Trace) -> str:
    expected = case.expected.model_dump(exclude_defaults=True) if case is not None else {}
    metadata = case.metadata if case is not None else {}
    parts = [f"<h3>Input</h3><pre>{_e(_pretty(trace.input or (case.input if case else {})))}</pre>"]
    if expected:
        parts.append(f"<h3>Expected</h3><pre>{_e(_pretty(expected))}</pre>")
    if metadata:
        parts.append(f"<h3>Metadata</h3><pre>{_e(_pretty(metadata))}</pre>")
    return f'<section><h2>Case</h2><div class="detail">{"".join(parts)}</div></section>'


def _output(trace: Trace) -> str:
    error = ""
    if trace.error is not None:
        stack = f"<pre>{_e(trace.error.stack)}</pre>" if trace.error.stack else ""
        error = f'<p class="err-text">{_e(trace.error.type)}: {_e(trace.error.message)}</p>{stack}'
    answer = trace.output.final_answer
    structured = trace.output.structured
    return (
        f"<section><h2>Final answer</h2>{error}"
        f"{_content(answer) if answer else '<p class=empty>No final answer.</p>'}"
        f"{f'<h3>Structured output</h3><pre>{_e(_pretty(structured))}</pre>' if structured else ''}"
        f"{_thinking(trace.output.thinking, 'Thinking (whole trace)')}</section>"
    )


def _tools_and_messages(trace: Trace) -> str:
    calls = "".join(
        f"<tr><td><b>{_e(c.name)}</b></td><td><pre>{_e(_pretty(c.arguments))}</pre></td>"
        f"<td><pre>{_e(_pretty(result))}</pre></td></tr>"
        for c, result in _calls_with_results(trace)
    )
    tools = (
        f"<table><tr><th>Tool</th><th>Arguments</th><th>Result</th></tr>{calls}</table>"
        if calls
        else '<p class="empty">No tool calls.</p>'
    )
    messages = "".join(_message(m) for m in trace.messages) or '<p class="empty">No messages.</p>'
    return f"<section><h2>Tool calls</h2>{tools}</section><section><h2>Messages</h2>{messages}</section>"


def _metrics(cell: RunCell, trace: Trace, traces_path: str) -> str:
    m = trace.metrics
    items: list[tuple[str, Any]] = [("latency", _ms(trace.latency_ms))]
    if m.token_input is not None or m.token_output is not None:
        items.append(("tokens", f"{m.token_input or 0} in / {m.token_output or 0} out"))
    items += [("thinking tokens", m.token_thinking), ("cost", m.cost_usd and f"${m.cost_usd:.6f}")]
    items += [("first token", m.latency_first_token_ms and _ms(m.latency_first_token_ms))]
    items += [("tokens/s", m.tokens_per_second and f"{m.tokens_per_second:.1f}")]
    items += [(f"custom {k}", v) for k, v in sorted(m.custom.items())]
    trace_id = trace.extra.get("trace_id")
    items += [("trace id", trace_id), ("traces.jsonl", cell.trace_line and f"{traces_path}:{cell.trace_line}")]
    return "".join(f"<span>{_e(label)} <b>{_e(value)}</b></span>" for label, value in items if value not in (None, ""))


_STOP_REASONS = {
    "max_turns": "max_turns reached",
    "phrase": "the stop phrase appeared in the answer",
    "goal_met": "the judge found the goal met",
    "system_error": "the system failed",
    "simulator_error": "the simulated user failed",
}


def _conversation(trace: Trace) -> str:
    """A simulated-user case's turns as a chat: each turn's user message, tool calls and answer, in order."""
    turns = turn_traces(trace)
    if turns is None:
        return ""
    facts = trace.extra.get("simulated_user")
    facts = facts if isinstance(facts, dict) else {}
    reason = _STOP_REASONS.get(str(facts.get("stop_reason")), str(facts.get("stop_reason", "")))
    head = (
        f'<p class="facts">session <b>{_e(trace.extra.get(SESSION_KEY, ""))}</b> &middot; '
        f"<b>{len(turns)}</b> turn{'s' if len(turns) != 1 else ''} &middot; ended: {_e(reason)}</p>"
    )
    bubbles = "".join(
        f'<div class="chat-sep" data-turn="{index + 1}"><span>turn {index + 1}</span></div>'
        + render_bubbles(chat_messages(conversation_messages([turn])))
        for index, turn in enumerate(turns)
    )
    return f'<section class="conversation"><h2>Conversation</h2>{head}<div class="chat">{bubbles}</div></section>'


def _dialog(cell: RunCell, data: RunReportData) -> str:
    trace = cell.trace
    if trace is None or cell.outcome is None:
        return ""
    files = f"<h3>Files changed</h3><pre>{_e(cell.file_diff)}</pre>" if cell.file_diff is not None else ""
    body = "".join(
        [
            _evaluations(cell),
            _conversation(trace),
            _output(trace),
            cell_waterfall(cell),
            _tools_and_messages(trace),
            files,
            _case(data.cases.get(cell.case_id), trace),
        ]
    )
    return (
        f'<dialog class="trace" id="{cell.dom_id}" data-case="{_e(cell.case_id)}" data-variant="{_e(cell.variant)}">'
        f'<div class="dhead"><button type="button" data-close>Close</button>'
        f"<h2>{_e(cell.case_id)} × {_e(cell.variant)} {_badge(cell.outcome)}</h2>"
        f'<div class="meta">{_metrics(cell, trace, data.traces_path)}</div></div>'
        f'<div class="dbody">{body}</div></dialog>'
    )


def _header(data: RunReportData) -> str:
    summary = data.summary
    counts: dict[str, int] = {}
    for cell in data.cells.values():
        if cell.outcome is not None:
            counts[cell.outcome] = counts.get(cell.outcome, 0) + 1
    badges = " ".join(
        _badge(o, f"{counts[o]} {_OUTCOMES[o][1]}") for o in ("pass", "fail", "error", "not_evaluated") if counts.get(o)
    )
    items = [
        ("started", summary.started_at.strftime("%Y-%m-%d %H:%M:%S UTC")),
        ("cases", str(summary.cases_total)),
        ("variants", ", ".join(data.variants)),
        ("config", summary.config_path or "-"),
    ]
    if summary.selection is not None:
        items.append(("selection", f"{len(summary.selection.selected)} of {summary.selection.cases_total} cases"))
    meta = "".join(f"<span>{label} <b>{_e(value)}</b></span>" for label, value in items)
    return f"<header><h1>Run {_e(summary.run_id)} {badges}</h1><div class='meta'>{meta}</div></header>"


def render_run_report(data: RunReportData) -> str:
    """Return the complete HTML document of a run."""
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    main = "".join(
        [
            _matrix(data),
            side_by_side(data),
            _variants(data.summary),
            _evaluators(data.summary),
            heatmap_leaderboard(data.summary, data.lower_is_better),
            insights_section(data.summary),
            analytics_section(data.performance, data.quality),
            _changes(data.summary, data),
        ]
    )
    dialogs = "".join(_dialog(cell, data) for cell in data.cells.values())
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Run {_e(data.summary.run_id)} &middot; evaltrace report</title><style>{CSS}</style></head><body>"
        f"{_header(data)}<main>{main}</main>{dialogs}"
        f"<footer>Generated by evaltrace {_e(__version__)} at {generated} from {_e(data.traces_path)}.</footer>"
        f"<script>{JS}</script></body></html>\n"
    )


def write_run_report(run: RunDirectory, output: str | Path) -> Path:
    """Write the report of ``run`` to ``output`` (parent directories are created).

    Raises:
        LookupError: The run has no traces.
        SchemaError: A file of the run is malformed.
    """
    path = Path(output)
    make_private_dirs(path.parent)
    with open(path, "w", encoding="utf-8", opener=private_opener) as handle:  # 0600: it shows prompts and outputs
        handle.write(render_run_report(build_run_report(run)))
    return path
